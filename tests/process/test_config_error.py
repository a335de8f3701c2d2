"""A job that cannot start as configured is not restarted: a restart cannot fix it.

Real torchrun, 2 CPU ranks, a script that imports a package that is not installed: the ranks die
with Python's own ``ModuleNotFoundError`` (after its ``Traceback`` header), torchrun reports
``ChildFailedError``. A Hugging Face Trainer job failing this way used to be restarted three times
as ``other_crash``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process

SCRIPT = """\
import torch.distributed as dist  # the rank gets as far as a real job's imports
import nonexistent_pkg_for_neuron_watch_tests  # noqa: F401
dist.init_process_group("gloo")
"""


def test_a_missing_package_stops_the_job_without_a_restart(tmp_path: Path, toy_env: dict[str, str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "3",
            "torchrun", "--nproc_per_node", "2", str(script)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 240)
    evs = events(run_dir)
    assert not named(evs, "restart"), out[-3000:]
    assert sorted(p.name for p in run_dir.glob("gen-*")) == ["gen-0"]  # one generation
    verdicts = [e for e in named(evs, "verdict") if e["label"] != "healthy"]
    assert verdicts and verdicts[-1]["label"] == "config_error" and verdicts[-1]["action"] == "stop", out[-3000:]
    assert any("ModuleNotFoundError" in e["text"] for e in verdicts[-1]["evidence"])
    finished = named(evs, "job_finished")[0]
    # README "Exit codes": 4 when the failure is not fixed by a restart, whoever ended the job first
    # (the watchdog's verdict or torchrun's own exit)
    assert code == finished["exit_code"] == 4, out[-3000:]
    assert "config_error is not fixed by a restart" in out
    assert finished["restarts"] == 0
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
