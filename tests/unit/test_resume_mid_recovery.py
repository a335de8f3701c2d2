"""A coordinator that died mid-recovery (after its verdict: during the capture, the stop or the
relaunch) and was started again (docs/multinode.md, "A crash mid-recovery"): what it reads of its
predecessor's recovery (:mod:`neuron_watch.job.memory`), what it decides once it knows what runs
(:func:`neuron_watch.recovery.coordcrash.resume`, pure), and how the machine finishes the recovery
(``recovery.machine.resume_stop``, ``resume_relaunch``): the restart neither lost nor done
twice (counted once), and no healthy new generation stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.events import JobState, NodeStatus
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.memory import JobMemory, Takeover, memory_of, recall, verdict_from_record, verdict_record
from neuron_watch.recovery.commands import Relaunched
from neuron_watch.recovery.coordcrash import RESUME_JOIN_WAIT, ResumeAction, UnderWay, launch_confirmed, resume
from neuron_watch.recovery.machine import ChooseCheckpoint, Facts, Relaunch, StopJob, resume_relaunch, resume_stop
from tests.unit.test_recovery import HANG, HW, Job, kinds

CAPTURE, STOP, RELAUNCH = UnderWay.CAPTURE, UnderWay.STOP, UnderWay.RELAUNCH
GO_ON, WAIT = ResumeAction.GO_ON, ResumeAction.WAIT


# -- what it decides (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(("under_way", "launched", "nodes_at", "all_back", "waited", "expected"), [
    # nothing was under way: the job is judged as it is found
    (None, None, (), False, 0.0, GO_ON),
    # a verdict given, its restart not counted: stopped once every node is back (or the wait is over)
    (CAPTURE, None, (3,), False, 1.0, WAIT),
    (CAPTURE, None, (3, 3), True, 1.0, ResumeAction.STOP_AND_RESTART),
    (STOP, None, (3,), False, RESUME_JOIN_WAIT, ResumeAction.STOP_AND_RESTART),
    # srun: its step ended by itself while the predecessor stopped it: nothing to wait for
    (STOP, -1, (), False, 0.0, ResumeAction.STOP_AND_RESTART),
    # a later generation runs already (a node says so): nothing is owed
    (STOP, None, (4, 4), True, 1.0, GO_ON),
    (CAPTURE, 4, (), False, 0.0, GO_ON),
    # the restart counted, generation 4 chosen: it runs (the srun step of 4, or every node): go on
    (RELAUNCH, 4, (), False, 0.0, GO_ON),
    (RELAUNCH, None, (4, 4), True, 1.0, GO_ON),
    # ... it does not: the step of 3 ended, none started; every node back still in 3 (stopped)
    (RELAUNCH, -1, (), False, 0.0, ResumeAction.RELAUNCH),
    (RELAUNCH, 3, (), False, 0.0, ResumeAction.RELAUNCH),
    (RELAUNCH, None, (3, 3), True, 1.0, ResumeAction.RELAUNCH),
    (RELAUNCH, None, (3,), False, 1.0, WAIT),
    # part of the job runs generation 4 already: never stop a node that works
    (RELAUNCH, None, (4, 3), True, 1.0, GO_ON),
])
def test_what_a_coordinator_started_mid_recovery_does(under_way: UnderWay | None, launched: int | None,
                                                      nodes_at: tuple[int, ...], all_back: bool, waited: float,
                                                      expected: ResumeAction) -> None:
    recorded = 4 if under_way is RELAUNCH else 3  # RELAUNCH records the generation it was to start
    decided = resume(under_way, recorded, launched=launched, nodes_at=nodes_at, all_back=all_back, waited=waited)
    assert decided.action is expected, decided
    assert bool(decided.message) is (expected not in (GO_ON, WAIT) or (under_way is not None and expected is GO_ON))


# -- what it reads ---------------------------------------------------------------------------------------------


def test_the_record_says_which_recovery_was_under_way_and_its_verdict(tmp_path: Path) -> None:
    job = Job()
    job.to_running()
    assert memory_of(job.rec).under_way == "" and memory_of(job.rec).verdict == {}
    job.tick(HANG, at=10)
    assert job.rec.state is JobState.CAPTURING
    capturing = memory_of(job.rec)
    assert capturing.under_way == "capture" and capturing.incidents == 1 and capturing.restarts == 0
    got = verdict_from_record(capturing.verdict)
    assert got is not None and (got.label, got.action, got.culprit, got.step, got.reason) == (
        HANG.label, HANG.action, HANG.culprit, HANG.step, HANG.reason)
    job.everyone(NodeStatus.EVIDENCE_DONE)
    job.tick(at=11)
    assert memory_of(job.rec).under_way == "stop"
    # written, then read back as it was
    Takeover(str(tmp_path), IOHealth("n0")).record(job.rec)
    assert recall(str(tmp_path)) == memory_of(job.rec)
    # a signal's stop is no restart: nothing is owed by a successor
    interrupted = Job()
    interrupted.to_running()
    interrupted.rec.interrupt(15, 5.0, 0)
    assert memory_of(interrupted.rec).under_way == ""


def test_a_record_of_an_unreadable_recovery_resumes_nothing() -> None:
    assert verdict_from_record({"label": "no such label", "action": "restart"}) is None
    assert verdict_from_record({}) is None
    assert JobMemory.from_dict({"under_way": "teleport"}).owed is None
    assert JobMemory.from_dict({"under_way": 3, "verdict": "x"}) == JobMemory()


# -- how the machine finishes it -----------------------------------------------------------------------------


def restarted_job(memory: JobMemory, tmp_path: Path) -> tuple[Job, Takeover]:
    """A new coordinator's recovery, taken up from ``memory`` (as hosted.py does)."""
    job = Job()
    takeover = Takeover(str(tmp_path), IOHealth("n0"))
    takeover.restore(job.rec, memory)
    return job, takeover


def test_died_while_stopping_the_new_one_stops_what_is_left_and_restarts_once(tmp_path: Path) -> None:
    first = Job()
    first.to_running()
    first.fail_and_capture(HANG)  # the verdict, the evidence, the stop asked: then it dies
    left = memory_of(first.rec)
    assert left.under_way == "stop" and left.restarts == 0 and left.incidents == 1

    job, takeover = restarted_job(left, tmp_path)
    job.now = 100.0
    assert takeover.resumption(job.now, launched=None, nodes_at=(0,), all_back=False) is None  # n1 not back
    decided = takeover.resumption(job.now + 1, launched=None, nodes_at=(0, 0), all_back=True)
    assert decided is not None and decided[0].action is ResumeAction.STOP_AND_RESTART
    assert takeover.resumption(job.now + 2, launched=None, nodes_at=(0, 0), all_back=True) is None  # decided once
    out = resume_stop(job.rec, decided[1], job.now, job.heard)
    assert job.rec.state is JobState.STOPPING
    (stop,) = [c for c in out if isinstance(c, StopJob)]
    assert stop.incident == 1 and stop.verdict is not None and stop.verdict.culprit == HANG.culprit  # incident-1's
    (phase,) = [c for c in out if kinds([c]) == ["recovery_phase"]]
    assert phase.fields == {"phase": "stopping", "previous": "starting", "resumed": True}
    # the nodes (stopped already, or now) answer; the restart is counted once, the generation is 1
    job.everyone(NodeStatus.STOPPED)
    job.tick(at=job.now + 1)
    assert job.rec.policy.restarts == 1 and job.rec.generation == 1 and job.rec.incident == 1
    assert [c.generation for c in job.log if isinstance(c, Relaunch)] == [1]
    assert job.rec.state is JobState.STARTING


def test_died_relaunching_the_new_one_relaunches_the_chosen_generation_counting_nothing_again(
        tmp_path: Path) -> None:
    first = Job()
    first.to_running()
    first.fail_and_capture(HANG)
    first.everyone(NodeStatus.STOPPED)
    out = first.rec.tick(first.now + 1, Facts(first.nodes, first.heard, None, True, first.progress, first.gone))
    assert [c for c in out if isinstance(c, ChooseCheckpoint)]
    first.rec.checkpoint_chosen("/ckpt/step_6", first.now + 1, first.heard)  # the relaunch asked: then it dies
    assert first.rec.state is JobState.RESTARTING and first.rec.generation == 1 and first.rec.policy.restarts == 1
    left = memory_of(first.rec)
    assert left.under_way == "relaunch" and left.launched_from == "/ckpt/step_6"

    job, takeover = restarted_job(left, tmp_path)
    assert job.rec.generation == 1 and job.rec.policy.restarts == 1
    decided = takeover.resumption(200.0, launched=-1, nodes_at=(), all_back=False)  # srun: no step runs
    assert decided is not None and decided[0].action is ResumeAction.RELAUNCH
    out = resume_relaunch(job.rec, decided[1], 200.0, job.heard)
    (relaunch,) = [c for c in out if isinstance(c, Relaunch)]
    assert (relaunch.generation, relaunch.checkpoint) == (1, "/ckpt/step_6")
    assert job.rec.state is JobState.RESTARTING and job.rec.policy.restarts == 1  # not counted again
    assert not [c for c in out if kinds([c]) == ["restart"]]  # the restart event was its predecessor's


def test_died_relaunching_but_the_new_generation_runs_it_is_not_touched(tmp_path: Path) -> None:
    memory = JobMemory(generation=1, restarts=1, incidents=1, launched_from="/ckpt/step_6", under_way="relaunch",
                       verdict=verdict_record(HW))
    job, takeover = restarted_job(memory, tmp_path)
    decided = takeover.resumption(5.0, launched=None, nodes_at=(1, 1), all_back=True)
    assert decided is not None and decided[0].action is ResumeAction.GO_ON
    assert "generation 1 runs" in decided[0].message
    job.to_running()  # judged as any generation: nothing stopped
    assert not [c for c in job.log if isinstance(c, (StopJob, Relaunch))]
    assert job.rec.policy.restarts == 1


def test_a_resumption_after_a_signal_or_the_end_does_nothing() -> None:
    job = Job()
    job.to_running()
    job.rec.interrupt(15, 1.0, 0)
    assert resume_stop(job.rec, HANG, 2.0, 0) == [] and resume_relaunch(job.rec, HANG, 2.0, 0) == []
    assert job.rec.state is JobState.RUNNING


# -- a crash during the relaunch itself: after the launch was sent, before every node took it ---------------


@pytest.mark.parametrize(("launched", "nodes_at", "all_back", "runs"), [
    (None, (1, 1), True, True),  # every node says it runs generation 1 (its hello, its `launched` status)
    (None, (2, 1), True, True),  # ... or a later one
    (None, (1, 0), True, False),  # one node still in 0: its `launch` may be lost with the coordinator
    (None, (1,), False, False),  # a node not back: not known
    (None, (), True, False),
    (1, (), False, True),  # srun: the batch step says the step of 1 runs
    (-1, (1, 1), False, False),  # ... no step runs
])
def test_a_generation_is_confirmed_once_every_node_or_the_step_says_it_runs(
        launched: int | None, nodes_at: tuple[int, ...], all_back: bool, runs: bool) -> None:
    assert launch_confirmed(1, launched=launched, nodes_at=nodes_at, all_back=all_back) is runs


def relaunched_job() -> Job:
    """A job its coordinator relaunched as generation 1 (restart counted, launch sent), now starting."""
    job = Job()
    job.to_running()
    job.fail_and_capture(HANG)
    job.everyone(NodeStatus.STOPPED)
    job.rec.tick(job.now + 1, Facts(job.nodes, job.heard, None, True, job.progress, job.gone))
    job.rec.checkpoint_chosen("/ckpt/step_6", job.now + 1, job.heard)
    job.rec.relaunched(Relaunched(), job.now + 1)
    assert job.rec.state is JobState.STARTING and job.rec.generation == 1 and job.rec.policy.restarts == 1
    return job


def test_the_relaunch_stays_owed_in_the_record_until_every_node_runs_the_new_generation(tmp_path: Path) -> None:
    job = relaunched_job()
    takeover = Takeover(str(tmp_path), IOHealth("n0"))
    asked: list[int] = []

    def nobody_yet(generation: int) -> bool:
        asked.append(generation)
        return False

    takeover.record(job.rec, nobody_yet)
    left = recall(str(tmp_path))
    assert left is not None and asked == [1]
    assert (left.under_way, left.generation, left.restarts, left.launched_from) == ("relaunch", 1, 1, "/ckpt/step_6")
    assert verdict_from_record(left.verdict) is not None
    job.to_running()  # RUNNING before the nodes said so: still owed
    takeover.record(job.rec, nobody_yet)
    assert memory_of(job.rec, launch_unconfirmed=True).under_way == "relaunch"
    takeover.record(job.rec, lambda generation: generation <= 1)  # every node says it runs 1
    confirmed = recall(str(tmp_path))
    assert confirmed is not None and confirmed.under_way == "" and confirmed.generation == 1
    takeover.record(job.rec, nobody_yet)  # not asked again once confirmed
    assert asked == [1, 1] and recall(str(tmp_path)) == confirmed


@pytest.mark.parametrize(("nodes_at", "expected"), [
    ((0, 0), ResumeAction.RELAUNCH),  # the launch was lost with the coordinator: started now, not counted again
    ((1, 1), ResumeAction.GO_ON),  # it arrived: the new generation starts, healthy, and is not touched
    ((1, 0), ResumeAction.GO_ON),  # one node has it: a node that works is never stopped
])
def test_died_while_the_new_generation_starts_the_restart_is_neither_lost_nor_done_twice(
        tmp_path: Path, nodes_at: tuple[int, int], expected: ResumeAction) -> None:
    first = Takeover(str(tmp_path), IOHealth("n0"))
    first.record(relaunched_job().rec, lambda generation: False)  # then it dies
    left = recall(str(tmp_path))
    assert left is not None
    job, takeover = restarted_job(left, tmp_path)
    decided = takeover.resumption(5.0, launched=None, nodes_at=nodes_at, all_back=True)
    assert decided is not None and decided[0].action is expected, decided
    out = resume_relaunch(job.rec, decided[1], 5.0, job.heard) if expected is ResumeAction.RELAUNCH else []
    assert [c.generation for c in out if isinstance(c, Relaunch)] == ([1] if expected is ResumeAction.RELAUNCH else [])
    assert not [c for c in out if kinds([c]) == ["restart"]]
    assert job.rec.policy.restarts == 1 and job.rec.generation == 1
    # the successor keeps the relaunch owed until every node runs generation 1, as its predecessor did
    takeover.record(job.rec, lambda generation: min(nodes_at) >= generation)
    again = recall(str(tmp_path))
    assert again is not None and again.under_way == ("" if min(nodes_at) == 1 else "relaunch"), again
