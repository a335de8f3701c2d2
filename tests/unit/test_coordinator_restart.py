"""A coordinator that crashed and was started again by node 0's wrapper (docs/multinode.md, "The
coordinator's own process"): what the wrapper decides (:mod:`neuron_watch.recovery.coordcrash`),
what the new coordinator takes up from the run dir (:mod:`neuron_watch.job.memory`), and what it
learns from the nodes: each rank's newest progress, sent again by the node
(:meth:`ProgressPace.reset`), so that a hang is judged by the hang timeout with the same culprit
and last progress as the coordinator that did not crash."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.events import Action, Label, RankKey, Verdict
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.job.hosting import cause_of
from neuron_watch.job.memory import STATE_FILE, JobMemory, memory_of, recall
from neuron_watch.recovery.coordcrash import MAX_COORDINATOR_RESTARTS, HostAction, after_exit
from neuron_watch.recovery.policy import Decision
from neuron_watch.runtime import default_judge_factory
from tests.unit.test_coordinator_progress import COORDINATOR_SESSION, JOB, SECRET, Clock
from tests.unit.test_progress_pace import KB, PACE, Side, _feed, _training

# -- what the wrapper does when its coordinator ends ------------------------------------------------


def test_a_coordinator_that_died_is_started_again_up_to_the_bound_then_the_node_runs_unobserved() -> None:
    assert cause_of(-6) == "signal SIGABRT" and cause_of(1) == "exit code 1" and cause_of(-200) == "signal 200"
    for done in range(MAX_COORDINATOR_RESTARTS):
        d = after_exit("signal SIGABRT", False, done, 4242)
        assert d.action is HostAction.RESTART and d.cause == "signal SIGABRT"
        assert f"({done + 1} of {MAX_COORDINATOR_RESTARTS})" in d.message and "pid 4242" in d.message
    gave_up = after_exit("exit code 1", False, MAX_COORDINATOR_RESTARTS, 4242)
    assert gave_up.action is HostAction.GIVE_UP and "UNOBSERVED" in gave_up.message
    assert "never stopped while they work" in gave_up.message
    # it said the job is over before it exited: its end, whatever its code, is not a crash
    assert after_exit("exit code 1", True, 0, 4242).action is HostAction.ENDED
    assert after_exit("signal SIGTERM", True, MAX_COORDINATOR_RESTARTS, 4242).action is HostAction.ENDED


# -- what it takes up from its run dir ------------------------------------------------------------------


def make(run_dir: Path, clock: Clock) -> Coordinator:
    return Coordinator("127.0.0.1:0", SECRET, str(run_dir), job=JOB,
                       settings=CoordinatorSettings(expected_nodes=1, silence=10.0),
                       judge_factory=default_judge_factory(WatchConfig(hang_timeout=5.0)), clock=clock.mono,
                       wall=clock.wall, announce=False, session=COORDINATOR_SESSION)


def test_the_job_a_crashed_coordinator_leaves_is_taken_up_by_the_next(tmp_path: Path) -> None:
    clock = Clock()
    run_dir = tmp_path / "run"
    first = make(run_dir, clock)
    try:
        first.tick(clock.mono())
        assert recall(str(run_dir)) == JobMemory()  # written from the first turn on
        # what a restart leaves: a failed generation counted, its incident numbered, generation 1
        outcome = first.recovery.policy.on_failure(Verdict(Label.COLLECTIVE_HANG, Action.RESTART, step=8), 30.0, None)
        assert outcome.decision is Decision.RESTART and first.restarts == 1
        first.recovery.generation, first.recovery.incident, first.recovery.launched_from = 1, 1, "/ckpt/step_5"
        first.tick(clock.mono() + 0.1)
    finally:
        first.close()
    left = json.loads((run_dir / STATE_FILE).read_text())
    assert left["generation"] == 1 and left["restarts"] == first.restarts and left["incidents"] == 1
    memory = recall(str(run_dir))
    # no node said it runs generation 1 yet: its relaunch is still owed to a successor (test_resume_mid_recovery)
    assert memory is not None and memory == memory_of(first.recovery, launch_unconfirmed=True)
    assert memory.under_way == "relaunch"
    assert memory.failures == (("collective_hang", 8),) and memory.launched_from == "/ckpt/step_5"

    second = make(run_dir, clock)
    try:
        second.status_files.kept.restore(second.recovery, memory)
        assert second.generation == 1 and second.restarts == first.restarts
        assert second.recovery.incident == 1  # its next incident is incident-2: incident-1 is not overwritten
        assert second.recovery.policy.failures == [("collective_hang", 8)]  # the same failure again is a crash loop
        assert memory_of(second.recovery, launch_unconfirmed=True) == memory
    finally:
        second.close()


def test_a_record_that_cannot_be_read_is_no_record(tmp_path: Path) -> None:
    assert recall(str(tmp_path)) is None
    (tmp_path / STATE_FILE).write_text("{not json")
    assert recall(str(tmp_path)) is None
    (tmp_path / STATE_FILE).write_text(json.dumps({"generation": "2", "restarts": -1, "failures": [[1, 2], ["x"]],
                                                   "incidents": 3, "launched_from": 7}))
    assert recall(str(tmp_path)) == JobMemory(incidents=3)  # each field of the wrong type is its default


# -- what it learns from the nodes ------------------------------------------------------------------------


@pytest.mark.parametrize("pace", [0.0, PACE])
def test_after_a_coordinator_crash_the_new_judge_names_the_same_culprit_and_last_progress(pace: float) -> None:
    """Four ranks train a step a second; rank 2 stops at 40 s, the others at 45 s (a hang, rank 2
    the culprit). The coordinator crashes at 42 s: a new judge, which never saw a step, takes over
    at 43 s, and the node resets its pace as its link does for a new coordinator session. The node
    sends it every rank's newest progress again (rank 2's is step 39, at its real time): its hang
    verdict comes by the hang timeout and equals the verdict of the judge that never crashed. The
    node without the reset sends it nothing of rank 2, and the new judge names another culprit."""
    settings = JudgeSettings(hang_timeout=6.0)
    timed = _training(4, 60, {2: 40, 0: 45, 1: 45, 3: 45})
    start = timed[0][1].mono
    crash = 1042.0
    kept = Side("n0", pace, start, settings)
    resent = Side("n0", pace, start, settings)
    blind = Side("n0", pace, start, settings)
    before = [(at, ln) for at, ln in timed if at <= crash]
    after = [(at, ln) for at, ln in timed if at > crash]
    _feed([kept, resent, blind], before, until=crash)
    for side in (resent, blind):
        side.judge = Judge(KB, settings, crash + 1.0)  # the new coordinator's judge
    resent.batches.pace.reset()  # the link, on the new coordinator's session
    _feed([kept, resent, blind], after, until=1070.0)
    verdict_at = 1045.0 + 6.0 + 1.0  # the last rank's last step, the hang timeout and a second
    hung = resent.judge.verdict(verdict_at)
    assert hung.label is Label.COLLECTIVE_HANG and hung.culprit == RankKey("n0", 2)
    # the same verdict; only the order the ranks were first heard of differs (rank 2's came last)
    same = kept.judge.verdict(verdict_at)
    def by_rank(v: Verdict) -> Verdict:
        return replace(v, ranks=tuple(sorted(v.ranks, key=lambda k: (k.node, k.rank))))

    assert by_rank(hung) == by_rank(same)
    last = {ev.key.rank: (ev.text, ev.mono) for ev in hung.evidence}
    assert last[2][0].startswith("step 39 ") and last[2][1] == start + 39 + 2 / 40  # its own time
    # without the rows sent again, the new judge never heard of rank 2: it blames another rank
    blind_verdict = blind.judge.verdict(verdict_at)
    assert RankKey("n0", 2) not in blind.judge.ranks and blind_verdict.culprit != RankKey("n0", 2)
