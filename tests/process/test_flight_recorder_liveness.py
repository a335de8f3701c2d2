"""Liveness from the ranks' own Flight Recorder, for real: torchrun (gloo, 2 CPU ranks) under neuron-watch.

The rank program (tests/process/ranks/quiet_collectives.py) prints its first step, then only calls
all_reduce: its output says nothing for longer than --hang-timeout while its collectives complete.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    assert_ended_on_the_fault,
    events,
    named,
    pids_with_env,
    run_to_end,
    toy_environment,
)

pytestmark = pytest.mark.process

RANKS = str(Path(__file__).resolve().parent / "ranks" / "quiet_collectives.py")


def watch(tmp_path: Path, env: dict[str, str], *rank_args: str, watch_args: tuple[str, ...] = (),
          timeout: float = 240, max_restarts: int = 1) -> tuple[int, str, Path]:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--hang-timeout", "8", "--startup-timeout", "120",
            "--max-restarts", str(max_restarts), "--no-prewarm", *watch_args,
            "torchrun", "--nproc_per_node", "2", RANKS, *rank_args]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout)
    return code, out, run_dir


def test_silent_ranks_whose_collectives_complete_are_not_restarted(tmp_path: Path, toy_env: dict[str, str]) -> None:
    code, out, run_dir = watch(tmp_path, toy_env, "--quiet-for", "25")
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident"), out[-3000:]
    assert "liveness: flight recorder on" in out
    started_ev = named(evs, "job_started")[0]
    assert "flight recorder" in started_ev["liveness"]
    status = json.loads((run_dir / "status.json").read_text())
    assert status["liveness"]["flight_recorder"] == 2, status["liveness"]
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def test_ranks_that_stop_calling_collectives_are_a_hang(tmp_path: Path, toy_env: dict[str, str]) -> None:
    # Every rank stops calling collectives (each sleeps 600 s): judged a hang. The verdict is the
    # subject: the job ends on it (--max-restarts 0); a restarted generation would only start torch
    # in both ranks again and finish, which other tests show.
    # 20 s of collectives first: the probe reads every 5 s, and collectives are the job's progress
    # once they keep completing (3 readings; start-up's few only restart the startup clock).
    code, out, run_dir = watch(tmp_path, toy_env, "--quiet-for", "20", "--sleep-for", "600", timeout=400,
                               max_restarts=0)
    evs = events(run_dir)
    verdicts = [e for e in named(evs, "verdict") if e.get("label") == "collective_hang"]
    assert verdicts and verdicts[0]["generation"] == 0, out[-3000:]
    assert_ended_on_the_fault(code, evs, out)  # given up on the hang, the give-up's exit code
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


@pytest.fixture(scope="module")
def saving_without_recorder(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, Path]:
    """One run read by the probe-off test and the checkpoint-liveness test: ``--no-rank-probe``,
    2 ranks silent for 26 s (3x the hang timeout and more) while rank 0 writes a complete checkpoint
    every 3 s into ``--checkpoint-dir``. (exit code, console, run dir, checkpoint dir); no pid of it
    survives."""
    tmp_path = tmp_path_factory.mktemp("no-recorder")
    ckpt = tmp_path / "ckpt"
    code, out, run_dir = watch(tmp_path, toy_environment(), "--quiet-for", "26", "--save-to", str(ckpt),
                               "--save-every", "3", watch_args=("--no-rank-probe", "--checkpoint-dir", str(ckpt)))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out, run_dir, ckpt


@pytest.mark.xdist_group("no-recorder")
def test_the_probe_is_off_with_one_flag(saving_without_recorder: tuple[int, str, Path, Path]) -> None:
    code, out, run_dir, _ = saving_without_recorder
    assert code == 0, out[-3000:]
    assert "Server listening to UNIX" not in out and "flight recorder on" not in out
    assert "--no-rank-probe" in named(events(run_dir), "job_started")[0]["liveness"]


@pytest.mark.xdist_group("no-recorder")
def test_a_silent_job_that_keeps_saving_checkpoints_is_not_restarted_without_a_recorder(
    saving_without_recorder: tuple[int, str, Path, Path]
) -> None:
    """No flight recorder (--no-rank-probe) and no output for 3x the hang timeout, but rank 0 writes a
    complete checkpoint every 3 s: a new checkpoint in --checkpoint-dir is a sign of life."""
    code, out, run_dir, ckpt = saving_without_recorder
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    assert not named(evs, "restart") and not named(evs, "incident")
    assert "a new complete checkpoint appeared" in (run_dir / "merged.log").read_text()
    assert len(list(ckpt.glob("step_*/done"))) >= 3  # it did keep saving, so the silence was its only sign
