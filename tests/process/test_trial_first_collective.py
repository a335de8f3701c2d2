"""A rank that never enters the job's first collective is a hang at the hang timeout, not at start-up's.

Real torchrun, 2 gloo ranks of the toy (``--hang-at 1 --hang-rank 1``): both ranks complete the
parameters' broadcasts, rank 0 enters step 1's all_reduce and waits in it, rank 1 never does. No
progress line was ever printed, so before the fix only ``--startup-timeout`` (30 min by default)
judged it, and ``neuron-watch status`` showed both ranks ``progressing`` meanwhile. Now the
ranks' flight recorders show the collective rank 0 entered and rank 1 did not, rank 1's process
burns no CPU, and the hang is judged at ``--hang-timeout`` with rank 1 the culprit, captured and
given up on (``--max-restarts 0``). The startup timeout is left long (600 s): a verdict that waited for it
would outlast the test's timeout. A first step slow on one rank while the other waits in its collective
(``ranks/slow_first_step.py``: it computes, a tenth of a core, for 3 hang timeouts) is no hang: no
verdict but healthy, exit 0 (the rule without its CPU reading restarted it within 4 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    assert_ended_on_the_fault,
    events,
    named,
    pids_with_env,
    run_to_end,
)
from tests.process.test_culprit import HANG, NO_RESTART, assert_incident_says

pytestmark = pytest.mark.process


@pytest.mark.timeout(300)
def test_a_rank_that_never_enters_the_first_collective_is_a_hang_at_the_hang_timeout(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--startup-timeout", "600",
            "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2", TOY, "--steps", "3",
            "--hang-at", "1", "--hang-rank", "1", "--checkpoint-dir", str(tmp_path / "ck")]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    evs = events(run_dir)
    assert_ended_on_the_fault(code, evs, out)
    assert "step 1 loss" not in (run_dir / "merged.log").read_text()  # no step was ever printed
    (hang,) = [v for v in named(evs, "verdict") if v["label"] == "collective_hang"]
    assert hang["action"] == "restart" and hang["culprit"] == {"node": hang["culprit"]["node"], "rank": 1}, hang
    assert hang["culprit_source"] == "flight_recorder", hang
    assert "rank1 never entered collective" in hang["reason"] and "> hang timeout" in hang["reason"], hang
    (bundle,) = [d for d in sorted((run_dir / "incidents" / "incident-1").iterdir()) if d.is_dir()]
    assert_incident_says(bundle, hang)


SLOW_FIRST_STEP = str(Path(__file__).resolve().parent / "ranks" / "slow_first_step.py")


@pytest.mark.timeout(300)
def test_a_first_step_slow_on_one_rank_while_the_other_waits_in_its_collective_is_not_a_hang(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """Rank 1 computes (a tenth of a core) for 3 hang timeouts before it joins the all-reduce rank 0
    entered: its process tree's CPU keeps the clock from running out, no verdict but healthy, exit 0."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--hang-timeout", "3", "--startup-timeout", "600",
            "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2", SLOW_FIRST_STEP, "--slow", "10"]
    code, out = run_to_end(argv, str(tmp_path), toy_env, run_dir, 280)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    evs = events(run_dir)
    assert code == 0 and named(evs, "job_finished")[0]["exit_code"] == 0, out[-3000:]
    labels = {v["label"] for v in named(evs, "verdict")}
    assert labels <= {"healthy"}, [(v["label"], v["reason"]) for v in named(evs, "verdict")]
    assert named(evs, "incident") == [] and "step 3 loss" in (run_dir / "merged.log").read_text()
