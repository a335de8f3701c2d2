"""A failure told by a traceback whose last line is a generic wrapper: the live verdict is diagnose's.

Real torchrun, 2 CPU ranks, a script that refuses a bad optimizer name while it loads its configuration
(``ValueError`` in ``load_config``) and re-raises it as ``RuntimeError("could not set up the run")``:
Python prints the chain root first, so the last line of each rank's traceback names no cause. The
watchdog's live judge sees only the lines a signature matched; the node sends the lines around the
failure with them (node/error_context.py), and the judge reads the cause and the frames from them as
``neuron-watch diagnose`` reads them from the rank logs: configuration, stopped, never restarted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, pids_with_env, run_to_end
from tests.fixtures.stopped import stopped_as_diagnose_reads_it

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
    live = stopped_as_diagnose_reads_it(run_dir, code, out, toy_env)
    assert "ValueError: unknown optimizer 'adamw2'" in live["evidence"][0]["text"], live["evidence"]
