"""Failures before the first step. Real torchrun jobs.

* A missing script dies in every generation before any step: one restart, then a crash loop,
  exit 4 (README "Exit codes"), not the whole budget spent in seconds and exit 1.
* A newest checkpoint that cannot be loaded (its ``done`` marker is there, its state is garbage):
  the generation started from it fails before its first step, the next starts from the previous
  complete checkpoint and the job finishes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, VENV_BIN, events, named, pids_with_env, run_to_end

pytestmark = pytest.mark.process


def test_a_missing_script_is_a_crash_loop_exit_4(tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--max-restarts", "5",
            "torchrun", "--nproc_per_node", "1", str(tmp_path / "no_such_train.py")]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=240)
    assert not pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
    assert code == 4, out[-3000:]
    evs = events(run_dir)
    # python's "can't open file" is a configuration error (stop) when it is read before the rank's
    # exit is judged; otherwise the second generation's identical failure is the loop
    assert len(named(evs, "restart")) <= 1
    (gave_up,) = named(evs, "gave_up")
    assert (("crash loop" in gave_up["reason"] and "before the first step" in gave_up["reason"])
            or gave_up["label"] == "config_error"), gave_up
    assert gave_up["exit_code"] == 4 and evs[-1]["event"] == "job_finished" and evs[-1]["exit_code"] == 4


def test_an_unloadable_checkpoint_falls_back_to_the_previous_one(tmp_path: Path, toy_env: dict[str, str]) -> None:
    ckpt = tmp_path / "ckpt"
    # two complete checkpoints, written by the real job without the watchdog
    subprocess.run([str(VENV_BIN / "torchrun"), "--nproc_per_node", "1", TOY, "--steps", "10",
                    "--checkpoint-every", "5", "--checkpoint-dir", str(ckpt)],
                   cwd=tmp_path, env=toy_env, check=True, capture_output=True, timeout=180)
    assert (ckpt / "step_5" / "done").exists() and (ckpt / "step_10" / "done").exists()
    (ckpt / "step_10" / "state.pt").write_bytes(b"not a torch file")  # a torn copy, a disk error
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt), "--max-restarts", "3",
            "torchrun", "--nproc_per_node", "1", TOY, "--steps", "14", "--checkpoint-every", "100",
            "--checkpoint-dir", str(ckpt)]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, timeout=300)
    assert not pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    (restart,) = named(evs, "restart")
    assert restart["checkpoint"] == str(ckpt / "step_5") and restart["avoided"] == [str(ckpt / "step_10")]
    assert named(evs, "job_finished")[-1]["state"] == "finished"
    gen1 = (run_dir / "gen-1" / "rank-0.log").read_text()
    assert "resuming at step 6" in gen1 and "step 14 loss" in gen1
