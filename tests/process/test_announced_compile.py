"""A compile a rank announces in its own words and runs in its own process waits on the rank's CPU.

Real torchrun jobs under ``neuron-watch`` (the toy job, 2 ranks, gloo, CPU): at step 4 rank 1 prints a
TensorRT engine build's announcement as a program that builds its engines itself prints it (turbo-ocr's
``Building TRT engine: <onnx> -> <plan>``), while rank 0 waits for it in the step's collective, silent.
No compiler process runs: only rank 1's process tree's CPU time, which the node samples, shows a build.

* The build never runs (``--build-stuck``: the rank waits forever without CPU, a builder deadlocked):
  a hang, judged at the hang timeout after the tree's last growth (and the in-process compile window
  after the announcement), not after the two-hour compile budget; rank 1 the culprit. The run ends on
  it (``--max-restarts 0``).
* Its mirror: the build burns CPU for several times the in-process compile window and the hang timeout
  together, then the rank steps on: compiling all along, never a hang, and the job finishes.

The figures (when the verdicts came after the announcement, how long the build took) are printed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.diagnosis.judge import IN_PROCESS_COMPILE_STALL
from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    assert_ended_on_the_fault,
    events,
    named,
    pids_with_env,
    run_to_end,
)
from tests.process.test_culprit import HANG, NO_RESTART

pytestmark = pytest.mark.process

STARTUP = "180"  # imports of torch on a busy 2-core machine, before the first step
BUILD_AT = "4"
#: longer than the in-process compile window and the hang timeout together, several times over: only
#: the rank's CPU, not its announcement, can keep it "compiling" that long
BUILD_SECONDS = 3 * IN_PROCESS_COMPILE_STALL


def _t(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def _stamped_at(run_dir: Path, words: str) -> float:
    """The wall time rank 1's log line holding ``words`` gives (UTC ISO, as the toy prints it)."""
    log = (run_dir / "gen-0" / "rank-1.log").read_text(errors="replace")
    line = next(ln for ln in log.splitlines() if words in ln)
    return dt.datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()


def _announced_at(run_dir: Path) -> float:
    """When rank 1 announced its build."""
    return _stamped_at(run_dir, "Building TRT engine:")


def _argv(run_dir: Path, *build: str) -> list[str]:
    return [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--startup-timeout", STARTUP,
            "--stop-timeout", "10", "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2", TOY,
            "--steps", "8", "--checkpoint-every", "100", "--checkpoint-dir", str(run_dir.parent / "ckpt"),
            "--build-at", BUILD_AT, "--build-rank", "1", *build]


@pytest.mark.timeout(420)
def test_a_rank_hung_after_announcing_a_build_is_a_hang_at_the_hang_timeout_not_a_compile(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    code, out = run_to_end(_argv(run_dir, "--build-stuck"), str(tmp_path), toy_env, run_dir, 360)
    evs = events(run_dir)
    assert_ended_on_the_fault(code, evs, out)
    verdicts = named(evs, "verdict")
    announced = _announced_at(run_dir)
    # the announcement was read as a compile of rank 1 (so the hang below is not a line missed) ...
    compiling = [v for v in verdicts if v["label"] == "compiling"]
    assert compiling and compiling[0]["culprit"]["rank"] == 1, [(v["label"], v["reason"]) for v in verdicts]
    # ... and then, its tree idle, a hang with rank 1 the culprit, well within the compile budget
    hang = [v for v in verdicts if v["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["action"] == "restart", [(v["label"], v["reason"]) for v in verdicts]
    assert hang[0]["culprit"]["rank"] == 1, hang[0]
    assert "> hang timeout" in hang[0]["reason"] and hang[0]["step"] == int(BUILD_AT) - 1, hang[0]
    assert _t(hang[0]) > _t(compiling[0])
    print(f"\nbuild announced, then stuck: 'compiling' {_t(compiling[0]) - announced:.1f}s after the announcement, "
          f"'collective_hang' {_t(hang[0]) - announced:.1f}s after it (hang timeout {HANG[1]}s, in-process "
          f"compile window {IN_PROCESS_COMPILE_STALL:g}s)")
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


@pytest.mark.timeout(480)
def test_a_rank_building_in_its_own_process_past_the_hang_timeout_is_compiling_and_finishes(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    code, out = run_to_end(_argv(run_dir, "--build-seconds", f"{BUILD_SECONDS:g}"), str(tmp_path), toy_env,
                           run_dir, 420)
    assert code == 0, out[-3000:]
    evs = events(run_dir)
    verdicts = named(evs, "verdict")
    assert [v for v in verdicts if v["label"] == "collective_hang"] == [], [(v["label"], v["reason"]) for v in verdicts]
    assert named(evs, "restart") == [] and named(evs, "job_finished")[0]["exit_code"] == 0
    log = (run_dir / "gen-0" / "rank-1.log").read_text(errors="replace")
    assert "Building TRT engine:" in log and "Built: " in log and "step 8 " in log, log[-2000:]
    compiling = [v for v in verdicts if v["label"] == "compiling"]
    assert compiling and compiling[0]["culprit"]["rank"] == 1, [(v["label"], v["reason"]) for v in verdicts]
    # compiling from the announcement until the build's end: the build's own end line ("Built: ...") or the
    # rank's next step closes it, whichever the judge reads first (the step comes a collective later, so a
    # turn between the two sees the build over at the job's step 3). Never healthy while the build runs:
    # the rank's CPU keeps it compiling for as long as it burns.
    after = [v for v in verdicts if _t(v) > _t(compiling[0])]
    built = _stamped_at(run_dir, "Built: ")
    assert after and after[0]["label"] == "healthy" and _t(after[0]) >= built, (
        after[:1], f"the build ended at {built}")
    assert after[0]["step"] >= int(BUILD_AT) - 1, after[:1]
    announced = _announced_at(run_dir)
    print(f"\nbuild of {BUILD_SECONDS:g}s in the rank's own process: 'compiling' {_t(compiling[0]) - announced:.1f}s "
          f"after the announcement until {_t(after[0]) - announced:.1f}s after it (hang timeout {HANG[1]}s); "
          "no hang, the job finished")
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
