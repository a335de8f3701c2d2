"""Flight Recorder dumps -> per-group progress, and what the judge makes of it.

The dumps under data/flight_recorder/ are real ``fr_trace_json`` answers of torch 2.13's worker
server (recorded by tests/fixtures/record_fr_dumps.py: 2 gloo ranks, ``TORCH_FR_BUFFER_SIZE=4``,
5 all_reduces on the default group and 2 on a second group, then rank 0 enters an all_reduce rank 1
never joins).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.diagnosis.flight_recorder import FlightRecorderError, GroupProgress, advanced, summarize
from neuron_watch.diagnosis.judge import STEADY_COLLECTIVES, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey, WorkerSample

DATA = Path(__file__).parent / "data" / "flight_recorder"
KB = default_knowledge_base()
N = "node-a"


def dump(rank: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"gloo-rank{rank}.json").read_text())
    return doc


def test_a_real_gloo_dump_summarizes_per_process_group() -> None:
    doc = dump(1)
    assert doc["version"] == "2.10" and len(doc["entries"]) == 4  # the ring buffer kept the newest 4
    s = summarize(doc)
    assert [g.group for g in s] == ["0", "1"]
    default, sub = s
    # pg_status survives the buffer wrapping; the newest entry names the op
    assert (default.completed, default.enqueued, default.started) == (4, 6, -1)
    assert default.op == "gloo:barrier" and default.state == "scheduled"
    assert default.wall == pytest.approx(1795453409.36, abs=1.0)
    assert (sub.completed, sub.enqueued, sub.op) == (2, 2, "gloo:all_reduce")


def test_the_rank_that_did_not_join_is_behind_on_what_it_entered() -> None:
    r0, r1 = summarize(dump(0)), summarize(dump(1))
    assert r0[0].enqueued == 7 and r1[0].enqueued == 6


def test_a_recorder_that_is_off_or_empty_gives_no_groups() -> None:
    # TORCH_FR_BUFFER_SIZE=0: the server answers, with nothing in it (seen with torch 2.13)
    assert summarize({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": []}) == ()


def test_entries_alone_still_summarize() -> None:
    doc = dump(1)
    del doc["pg_status"]
    s = summarize(doc)
    # the newest entry (the barrier, 6) is not retired yet: the one before it is the newest completed
    assert s[0].enqueued == 6 and s[0].completed == 5


@pytest.mark.parametrize("doc", [[], {"pg_status": [], "entries": []}, {"pg_status": {}, "entries": {}}])
def test_what_is_not_a_dump_is_refused(doc: Any) -> None:
    with pytest.raises(FlightRecorderError):
        summarize(doc)


def test_advanced_counts_a_newly_completed_collective_in_any_group() -> None:
    a = (GroupProgress("0", 4, -1, 6), GroupProgress("1", 2, -1, 2))
    assert advanced(None, a)
    assert not advanced(a, a)
    assert advanced(a, (GroupProgress("0", 4, -1, 6), GroupProgress("1", 3, -1, 3)))
    assert not advanced(None, (GroupProgress("0", -1, -1, -1),))


# -- the judge --------------------------------------------------------------------------------------


def judge() -> Judge:
    return Judge(KB, JudgeSettings(hang_timeout=30.0, startup_timeout=600.0), start=0.0)


def g(completed: int, enqueued: int | None = None, group: str = "0") -> tuple[GroupProgress, ...]:
    return (GroupProgress(group, completed, -1, completed if enqueued is None else enqueued, "gloo:all_reduce"),)


def test_completing_collectives_keep_a_silent_job_alive() -> None:
    j = judge()
    for r in range(2):
        j.observe_line(LogLine(RankKey(N, r), "step 1 loss 1.5 step_time 1s", 1.0, 1.0, f"rank-{r}.log", 1))
    for i, t in enumerate(range(5, 200, 5)):
        for r in range(2):
            assert j.observe_collectives(RankKey(N, r), g(10 + i), float(t))
        assert j.verdict(t + 1.0).label is Label.HEALTHY
    assert j.max_step == 1  # a collective is not a training step
    assert j.rank_summaries(196.0)[0]["state"] == "progressing"


def steady(j: Judge, ranks: int, upto: int = 30) -> None:
    """A training loop's collectives: completing in STEADY_COLLECTIVES readings of every rank."""
    for i in range(STEADY_COLLECTIVES):
        for r in range(ranks):
            j.observe_collectives(RankKey(N, r), g(upto - STEADY_COLLECTIVES + i), 1.0 + i)


def test_collectives_that_stop_advancing_are_a_hang_after_the_timeout() -> None:
    j = judge()
    for t in (5.0, 8.0, 10.0):
        for r in range(2):
            j.observe_collectives(RankKey(N, r), g(int(t)), t)
    for r in range(2):  # the same readings again: nothing completed
        assert not j.observe_collectives(RankKey(N, r), g(10), 20.0)
    assert j.verdict(39.0).label is Label.HEALTHY
    v = j.verdict(41.0)
    assert v.label is Label.COLLECTIVE_HANG and v.action is Action.RESTART
    assert "hang timeout" in v.reason  # collectives count like progress: the hang timeout, not startup


def test_the_rank_behind_on_collectives_is_the_culprit() -> None:
    j = judge()
    steady(j, 4)
    for r in range(4):
        j.observe_collectives(RankKey(N, r), g(40, 40 if r == 3 else 42), 10.0)
    v = j.verdict(50.0)
    assert v.label is Label.COLLECTIVE_HANG
    assert v.culprit == RankKey(N, 3) and v.culprit_source == "flight_recorder"
    assert "node-a/rank3 is 2 collectives behind the other 3 ranks of group 0 (flight recorder)" in v.reason


def test_no_culprit_when_the_ranks_disagree_among_themselves() -> None:
    j = judge()
    steady(j, 3)
    for r, seq in enumerate((40, 41, 42)):
        j.observe_collectives(RankKey(N, r), g(seq), 10.0)
    v = j.verdict(50.0)
    assert v.label is Label.COLLECTIVE_HANG and "flight recorder" not in v.reason


# -- NCCL's layout ----------------------------------------------------------------------------------
# What ProcessGroupNCCL's recorder dumps (torch/csrc/distributed/c10d/FlightRecorder*.{hpp,cpp};
# the entry fields of torch's own test/distributed/flight_recorder/test_fr_analysis.py): the same
# document as gloo's, but NCCL moves ``state`` from "scheduled" to "started" to "completed" as the
# CUDA events fire, fills ``time_discovered_*_ns``, and pg_status follows the same ids.


def nccl_dump(rank: int, enqueued: int, completed: int) -> dict[str, Any]:
    def entry(seq: int, state: str) -> dict[str, Any]:
        return {
            "record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": str(seq),
            "p2p_seq_id": "0", "op_id": seq, "profiling_name": "nccl:all_reduce",
            "time_created_ns": 1_795_451_782_410_578_700 + seq,
            "input_sizes": [[2177]], "input_dtypes": ["Float"], "output_sizes": [[2177]], "output_dtypes": ["Float"],
            "state": state, "time_discovered_started_ns": 1 if state != "scheduled" else None,
            "time_discovered_completed_ns": 2 if state == "completed" else None, "retired": state == "completed",
            "timeout_ms": 600000, "is_p2p": False, "frames": [],
        }
    entries = [entry(s, "completed") for s in range(max(0, completed - 3), completed + 1)]
    if enqueued > completed:
        entries.append(entry(enqueued, "started"))  # in flight: waiting for the peer that never came
    return {
        "version": "2.10", "rank": rank,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_enqueued_collective": str(enqueued), "last_started_collective": str(enqueued),
                            "last_completed_collective": str(completed)}},
        "nccl_comm_state": {}, "entries": entries,
    }


def test_an_nccl_dump_names_the_rank_that_never_entered_the_collective_the_others_are_in() -> None:
    j = judge()
    steady(j, 4)
    for r in range(4):  # ranks 0, 1, 3 started all-reduce 42 and wait in it; rank 2 is still at 41
        doc = nccl_dump(r, 41 if r == 2 else 42, 41)
        (p,) = summarize(doc)
        assert (p.completed, p.enqueued, p.op) == (41, 41 if r == 2 else 42, "nccl:all_reduce")
        assert p.state == ("completed" if r == 2 else "started")
        j.observe_collectives(RankKey(N, r), (p,), 10.0)
    v = j.verdict(50.0)
    assert v.culprit == RankKey(N, 2) and v.culprit_source == "flight_recorder", v.reason
    assert "rank2 is 1 collective behind the other 3 ranks of group 0" in v.reason


def test_torchs_own_flight_recorder_analysis_reads_these_nccl_dumps_and_names_the_same_rank() -> None:
    """The NCCL-layout dumps above are what torch's own analysis (``torch.distributed.flight_recorder``,
    the ``torchfrtrace`` tool's ``build_db``) accepts, and it names rank 2 as the missing rank of the
    collective the others are in: the rule agrees with torch's on torch's own reading."""
    import argparse

    from torch.distributed.flight_recorder.components.builder import build_db

    details = {f"rank{r}": nccl_dump(r, 41 if r == 2 else 42, 41) for r in range(4)}
    args = argparse.Namespace(verbose=False, just_print_entries=False, allow_incomplete_ranks=False,
                              mismatch_cap=10, selected_ranks=None, pg_filters=None, print_stack_trace=False,
                              best_effort=False)
    db = build_db(details, args, "2.10")
    missing = {int(c.collective_seq_id): c.missing_ranks for c in db.collectives if c.missing_ranks}
    assert missing == {42: {2}}, db.collectives


def test_the_collectives_of_start_up_do_not_end_start_up() -> None:
    """DDP broadcasts its parameters at construction; the first torch.compile / XLA compile comes
    after it and before any step: that silence is start-up (the startup timeout), not a hang."""
    j = judge()  # hang timeout 30 s, startup 600 s
    for r in range(2):
        j.observe_collectives(RankKey(N, r), g(1), 5.0)  # the broadcast completed
    assert j.timeout_in_force() == (600.0, "startup")
    assert j.verdict(5.0 + 300.0).label is Label.HEALTHY  # compiling in-process for 5 minutes
    v = j.verdict(5.0 + 601.0)
    assert v.label is Label.COLLECTIVE_HANG and "startup" in v.reason


# -- a collective stuck before the first progress --------------------------------------------------
# The toy's --hang-at 1 under torchrun (gloo, 2 ranks): both ranks complete the parameters' broadcast
# (collective 0 of group 0), rank 0 enters step 1's all_reduce (1) and waits in it; rank 1 never does.


def first_step_hang(j: Judge, entered: float = 5.0, ranks: int = 2, outside: int | None = 1,
                    started: bool = False) -> None:
    for r in range(ranks):
        j.observe_collectives(RankKey(N, r), g(0), 3.0)  # the broadcast completed
    for r in range(ranks):
        top = 0 if r == outside else 1  # NCCL says the collective started (gloo: -1)
        j.observe_collectives(RankKey(N, r), (GroupProgress("0", 0, top if started else -1, top, "x"),), entered)


def cpu(j: Judge, t: float, seconds: dict[int, float]) -> None:
    j.observe_workers([WorkerSample(RankKey(N, r), c, False, t) for r, c in seconds.items()], t)


def test_a_rank_that_never_enters_the_first_collective_is_the_culprit_at_the_hang_timeout() -> None:
    j = judge()  # hang timeout 30 s, startup 600 s
    first_step_hang(j)
    for t in range(0, 60, 5):  # neither rank burns CPU: rank 0 waits in the all_reduce, rank 1 sleeps
        cpu(j, float(t), {0: 2.0, 1: 2.0})
    assert j.verdict(5.0 + 29.0).label is Label.HEALTHY  # never before the hang timeout
    v = j.verdict(5.0 + 31.0)
    assert v.label is Label.COLLECTIVE_HANG and v.action is Action.RESTART
    assert v.culprit == RankKey(N, 1) and v.culprit_source == "flight_recorder"
    assert "node-a/rank1 never entered collective 1 of group 0, which the other rank entered and waits in" in v.reason
    assert "hang timeout 30s" in v.reason
    # meanwhile the status says neither progresses (each completed the start-up broadcast once: not a
    # loop of collectives, which is what makes a silent rank progressing)
    assert [r["state"] for r in j.rank_summaries(5.0 + 20.0)] == ["starting", "starting"]


def test_status_of_a_stuck_first_collective_says_the_hang_timeout_and_when() -> None:
    """While a collective is seen stuck before the first step, the timeout in force is the hang timeout the
    first-collective rule judges it at (kind ``first_collective``), with its clock: not the startup timeout
    (the trial: status said ``hang timeout 600s (startup)`` until the verdict came at 30 s)."""
    j = judge()  # hang timeout 30 s, startup 600 s
    first_step_hang(j)  # rank 0 entered collective 1 at 5 s, rank 1 never did
    assert j.timeout_in_force(5.0 + 4.0) == (600.0, "startup")  # rank 1's CPU not seen yet: startup stays
    assert j.first_collective_stall(5.0 + 4.0) is None
    cpu(j, 6.0, {0: 2.0, 1: 2.0})
    cpu(j, 11.0, {0: 2.0, 1: 2.0})
    assert j.timeout_in_force(5.0 + 12.0) == (30.0, "first_collective")
    stall = j.first_collective_stall(5.0 + 12.0)
    assert stall is not None and stall.timeout == 30.0 and stall.what == "hang timeout"
    assert stall.stalled_for == pytest.approx(11.0)  # from rank 1's first CPU reading (6 s): its clock's start
    assert "node-a/rank1 never entered collective 1 of group 0" in stall.how
    assert j.verdict(6.0 + 29.0).label is Label.HEALTHY
    assert j.verdict(6.0 + 31.0).label is Label.COLLECTIVE_HANG  # what status announced, when it said
    # the collective completes (rank 1 joined): no stall in view, the startup timeout again
    for r in range(2):
        j.observe_collectives(RankKey(N, r), g(1), 40.0)
    assert j.timeout_in_force(41.0) == (600.0, "startup") and j.first_collective_stall(41.0) is None


def test_a_first_step_slow_on_one_rank_while_the_others_wait_is_not_a_hang() -> None:
    j = judge()
    first_step_hang(j)
    for t in range(0, 300, 5):  # rank 1 computes its first step for minutes: its CPU keeps growing
        cpu(j, float(t), {0: 2.0, 1: 2.0 + t})
        assert j.verdict(float(t) + 1.0).label is Label.HEALTHY, t
    for r in range(2):  # then it enters the all_reduce and both complete it
        j.observe_collectives(RankKey(N, r), g(1), 300.0)
    cpu(j, 305.0, {0: 2.0, 1: 297.0})
    assert j.verdict(300.0 + 100.0).label is Label.HEALTHY  # start-up again: its timeout applies
    # ... and the clock of the stall runs from the last growth of the rank outside
    j2 = judge()
    first_step_hang(j2)
    for t in range(0, 105, 5):
        cpu(j2, float(t), {0: 2.0, 1: 2.0 + min(t, 60)})  # it stops computing at 60 s
    assert j2.verdict(60.0 + 29.0).label is Label.HEALTHY
    assert j2.verdict(60.0 + 40.0).culprit == RankKey(N, 1)


def test_a_rank_still_setting_up_keeps_the_startup_timeout_for_everyone() -> None:
    j = judge()
    for r in (0, 1):  # ranks 0 and 1 broadcast and enter a barrier; rank 2 entered no collective yet
        j.observe_collectives(RankKey(N, r), g(-1, 0), 5.0)
    j.observe_collectives(RankKey(N, 2), (), 5.0)
    cpu(j, 5.0, {0: 1.0, 1: 1.0, 2: 1.0})
    cpu(j, 100.0, {0: 1.0, 1: 1.0, 2: 1.0})
    assert j.verdict(100.0).label is Label.HEALTHY
    v = j.verdict(602.0)
    assert v.label is Label.COLLECTIVE_HANG and "startup" in v.reason


def test_the_rank_outside_unseen_keeps_the_startup_timeout() -> None:
    j = judge()
    first_step_hang(j)  # no process samples: whether rank 1 computes is not known
    assert j.verdict(100.0).label is Label.HEALTHY


def test_every_rank_stuck_in_the_first_collective_is_a_hang_without_a_culprit() -> None:
    j = Judge(KB, JudgeSettings(startup_timeout=1800.0), start=0.0)  # no --hang-timeout: the first steps' grace
    first_step_hang(j, ranks=3, outside=None, started=True)  # NCCL: started on every rank, none completed
    assert j.verdict(5.0 + j.settings.calibration.floor + 1.0).label is Label.HEALTHY  # not the floor: NCCL's set-up
    assert j.verdict(5.0 + j.settings.calibration.default - 1.0).label is Label.HEALTHY
    v = j.verdict(5.0 + j.settings.calibration.default + 1.0)
    assert v.label is Label.COLLECTIVE_HANG and v.culprit is None
    assert "every rank entered collective 1 of group 0 and none completed it" in v.reason
    assert "uncalibrated hang timeout 900s" in v.reason


def test_gloo_ranks_all_reading_a_collective_not_completed_are_not_judged_before_the_startup_timeout() -> None:
    """gloo marks completion lazily: in the recorded dumps rank 1, back from barrier 6 (it went on and never
    joined rank 0's all_reduce), still reads completed 4, enqueued 6. Ranks all busy after a barrier read
    the same as ranks all stuck in it, so that reading alone is never a hang before the first step."""
    r1 = summarize(dump(1))[0]
    assert r1.started == -1 and r1.completed < r1.enqueued  # gloo's own reading of a rank outside
    j = judge()
    first_step_hang(j, ranks=2, outside=None)  # gloo: started -1, every rank at 1, completed 0
    cpu(j, 6.0, {0: 2.0, 1: 2.0})
    cpu(j, 200.0, {0: 2.0, 1: 2.0})
    assert j.verdict(200.0).label is Label.HEALTHY
    assert "startup" in j.verdict(5.0 + 601.0).reason


def test_a_compile_before_the_first_step_is_waited_for_not_judged() -> None:
    j = judge()
    first_step_hang(j)
    cpu(j, 6.0, {0: 2.0, 1: 2.0})
    cpu(j, 60.0, {0: 2.0, 1: 2.0})
    line = ("2024-02-01 10:00:00.000001: INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: ['neuronx-cc', "
            "'--target=trn1', 'compile', '--framework', 'XLA', '/tmp/w/model.hlo.pb', '--output', '/tmp/w/graph.neff']")
    j.observe_line(LogLine(RankKey(N, 1), line, 7.0, 7.0, "rank-1.log", 1))
    assert j.verdict(60.0).label is Label.COMPILING


# -- a rank out of step: a different collective at the same sequence id ----------------------------
# Recorded from a real run (torch 2.13, gloo, 4 ranks, DDP): every rank averages its loss with an
# explicit all_reduce after backward; rank 2 skipped it at step 4 and went on into the next step's
# gradient all_reduce. gloo aborted rank 1 ("Received data size doesn't match expected size. Is there
# a distributed collective mismatch in your code?"); ranks 0, 2 and 3 dumped their recorders.


def mismatch_dump(rank: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"gloo-mismatch-rank{rank}.json").read_text())
    return doc


def test_a_real_mismatch_dump_keeps_the_newest_collectives_shape() -> None:
    (p0,) = summarize(mismatch_dump(0))
    (p2,) = summarize(mismatch_dump(2))
    assert (p0.seq, p0.op, p0.shape) == (13, "gloo:all_reduce", "[[]] Float")  # the loss: a 0-d tensor
    assert (p2.seq, p2.op, p2.shape) == (13, "gloo:all_reduce", "[[2177]] Float")  # DDP's gradient bucket


def crash_of_rank1(j: Judge) -> None:
    line = ("[rank1]   what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
            "op.preamble.length <= op.nbytes. 1092 vs 4. Received data size doesn't match expected size. "
            "Is there a distributed collective mismatch in your code?")
    j.observe_line(LogLine(RankKey(N, 1), line, 11.0, 11.0, "rank-1.log", 9))
    j.observe_exit(RankExit(RankKey(N, 1), -6, 11.5))


def test_the_rank_out_of_step_is_the_culprit_of_the_crash_it_caused_on_a_peer() -> None:
    j = judge()
    steady(j, 4)
    for r in (0, 2, 3):
        j.observe_collectives(RankKey(N, r), summarize(mismatch_dump(r)), 11.2)
    crash_of_rank1(j)
    v = j.verdict(12.0)
    assert v.label is Label.OTHER_CRASH and v.action is Action.RESTART
    assert v.culprit == RankKey(N, 2) and v.culprit_source == "flight_recorder", v.reason
    assert ("node-a/rank2 ran gloo:all_reduce of [[2177]] Float as collective 13 of group 0 where the other 2 "
            "ranks with a record of it ran gloo:all_reduce of [[]] Float") in v.reason


def test_without_the_recorders_the_rank_that_reported_the_mismatch_is_not_blamed_for_it() -> None:
    # only rank 0 left its recorder: one rank's word tells nobody out of step
    j = judge()
    steady(j, 4)
    j.observe_collectives(RankKey(N, 0), summarize(mismatch_dump(0)), 11.2)
    crash_of_rank1(j)
    v = j.verdict(12.0)
    assert v.label is Label.OTHER_CRASH and v.culprit is None, v.reason
    assert "node-a/rank1: torch.c10d.collective_mismatch" in v.reason
    assert "a rank is out of step with its peers; their flight recorders do not show which" in v.reason


def test_ranks_that_agree_on_the_op_but_not_on_a_list_collectives_shapes_are_not_a_mismatch() -> None:
    j = judge()
    steady(j, 3)
    for r in range(3):  # all_to_all's splits differ between ranks by design
        j.observe_collectives(RankKey(N, r), (GroupProgress("0", 40, -1, 41, "gloo:all_to_all", "scheduled", 0.0, 41,
                                                            f"[[{r + 1}]] Float"),), 10.0)
    v = j.verdict(50.0)
    assert "out of step" not in v.reason


def test_a_hang_after_a_different_collective_names_the_rank_out_of_step() -> None:
    j = judge()
    steady(j, 4)
    for r in range(4):  # NCCL: rank 3 entered a broadcast where the others entered all_reduce 41
        op = "nccl:broadcast" if r == 3 else "nccl:all_reduce"
        j.observe_collectives(RankKey(N, r), (GroupProgress("0", 40, 41, 41, op, "started", 0.0, 41,
                                                            "[[1024]] Float"),), 10.0)
    v = j.verdict(50.0)
    assert v.label is Label.COLLECTIVE_HANG
    assert v.culprit == RankKey(N, 3) and v.culprit_source == "flight_recorder"
    assert ("node-a/rank3 ran nccl:broadcast of [[1024]] Float as collective 41 of group 0 where the other 3 ranks "
            "with a record of it ran nccl:all_reduce of [[1024]] Float: it is out of step") in v.reason
