"""A failure told by a traceback whose last line is a generic wrapper: the live verdict is diagnose's.

Real torchrun, 2 CPU ranks, a script that refuses a bad optimizer name while it loads its configuration
(``ValueError`` in ``load_config``) and re-raises it as ``RuntimeError("could not set up the run")``:
Python prints the chain root first, so the last line of each rank's traceback names no cause. The
watchdog's live judge sees only the lines a signature matched; the node sends the lines around the
failure with them (node/error_context.py), and the judge reads the cause and the frames from them as
``neuron-watch diagnose`` reads them from the rank logs: configuration, stopped, never restarted.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

SCRIPT = """\
import sys

import torch.distributed as dist  # the rank gets as far as a real job's imports


def load_config(argv):
    name = argv[argv.index("--optimizer") + 1]
    if name not in ("sgd", "adam"):
        raise ValueError(f"unknown optimizer {name!r}: expected one of sgd, adam")
    return {"optimizer": name}


def main():
    try:
        config = load_config(sys.argv)
    except ValueError as e:
        raise RuntimeError("could not set up the run") from e
    dist.init_process_group("gloo")
    print(config, flush=True)


main()
"""


def test_a_bad_argument_re_raised_by_a_wrapper_stops_the_job_as_diagnose_reads_it(tmp_path: Path,
                                                                                  toy_env: dict[str, str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "3",
            "torchrun", "--nproc_per_node", "2", str(script), "--optimizer", "adamw2"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 240)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    evs = events(run_dir)
    assert not named(evs, "restart"), out[-3000:]
    assert sorted(p.name for p in run_dir.glob("gen-*")) == ["gen-0"]  # one generation
    verdicts = [e for e in named(evs, "verdict") if e["label"] != "healthy"]
    assert verdicts, out[-3000:]
    live = verdicts[-1]
    assert (live["label"], live["action"]) == ("config_error", "stop"), (live["reason"], out[-3000:])
    assert "ValueError: unknown optimizer 'adamw2'" in live["evidence"][0]["text"], live["evidence"]
    assert named(evs, "job_finished")[0]["exit_code"] == code == 4, out[-3000:]
    # the same logs offline
    res = subprocess.run([NEURON_WATCH, "diagnose", "--json", str(run_dir / "gen-0")], capture_output=True,
                         text=True, timeout=60, env=toy_env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["label"], doc["action"]) == (live["label"], live["action"]), (doc["reason"], live["reason"])
