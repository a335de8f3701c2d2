"""Per-rank states for `status`, the timeout in force, line-dated progress and the "blind" warning,
on a fake clock (``now`` is an argument)."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

import pytest

from neuron_watch.diagnosis.judge import BLIND_AFTER, SILENT_FLOOR, Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import LogLine, RankExit, RankKey

KB = default_knowledge_base()
N = "node-a"
W0 = 1_800_000_000.0  # wall clock at mono 0
# A custom trainer's lines that no built-in progress rule knows (the DDP tutorial's own "Epoch N |
# Batchsize | Steps" line is known now, so this stands for any format of a user's own).
DDP_EPOCH = "[train] it 120 | 0.53 s/it | lr 3.0e-04"
DDP_SAVED = "Training snapshot saved at snapshot.pt"
CC_START = "2024-04-12 07:13:06.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile --target=trn1 --framework=XLA /tmp/u/w/model.MODULE_1+d41d8cd9.hlo_module.pb --output /tmp/u/w/model.neff --verbose=35"
RX = "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"
HF_LOG = "{'loss': 1.2345, 'grad_norm': 0.873, 'learning_rate': 4.9e-05, 'epoch': 0.02}"


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, W0 + t, f"rank-{rank}.log", int(t))


def judge(**kw: object) -> Judge:
    return Judge(KB, JudgeSettings(**kw), start=0.0)  # type: ignore[arg-type]


def states(j: Judge, now: float) -> list[str]:
    return [str(r["state"]) for r in j.rank_summaries(now)]


def steps(j: Judge, times: list[float], ranks: range = range(2), first: int = 1) -> None:
    for n, t in enumerate(times, start=first):
        for r in ranks:
            j.observe_line(ln(r, f"step {n} loss 1.5 step_time 1s", t))


# -- states ------------------------------------------------------------------------------------


def test_starting_before_the_first_line_then_silent_after_the_startup_timeout() -> None:
    j = judge(startup_timeout=1800.0)
    j.expect([RankKey(N, 0), RankKey(N, 1)], 0.0)
    assert states(j, 5.0) == ["starting", "starting"]
    assert states(j, 1800.1) == ["silent", "silent"]


def test_a_rank_that_stops_printing_is_silent_after_a_few_normal_step_intervals() -> None:
    j = judge()
    steps(j, [10.0 * i for i in range(1, 21)])  # a step every 10 s -> silent after max(60, 3 x 10)
    assert j.silent_after() == SILENT_FLOOR
    last = 200.0
    j.observe_line(ln(1, "step 21 loss 1.5 step_time 1s", last + 100.0))  # rank 1 goes on
    assert states(j, last + 100.0) == ["silent", "progressing"]  # rank 0: 100 s without a line
    assert states(j, last + 59.0) == ["progressing", "progressing"]


def test_the_silent_limit_follows_the_step_interval() -> None:
    j = judge()
    steps(j, [100.0 * i for i in range(1, 12)])  # a step every 100 s
    assert j.silent_after() == 300.0
    last = 1100.0
    assert states(j, last + 161.0) == ["progressing", "progressing"]  # within 3 normal intervals
    assert states(j, last + 301.0) == ["silent", "silent"]


def test_a_rank_silent_for_161_s_is_not_progressing() -> None:
    # the incident: a rank silent for 161 s showed "progressing" (the hang-timeout floor was used)
    j = judge()
    steps(j, [1.0 * i for i in range(1, 30)])
    assert states(j, 29.0 + 161.0) == ["silent", "silent"]


def test_printing_without_recognised_progress_is_not_progressing() -> None:
    j = judge()
    for i in range(0, 400, 20):
        j.observe_line(ln(0, DDP_EPOCH, float(i)))
    assert states(j, 100.0) == ["starting"]  # within the grace after its first line
    assert states(j, 390.0) == ["printing"]  # output keeps coming, none of it is progress
    assert states(j, 390.0 + SILENT_FLOOR + 1) == ["silent"]


@pytest.mark.parametrize(
    ("text", "state"),
    [(CC_START, "compiling"), (RX, "waiting"), ("[2026-11-21 10:12:33,481.481: I neuronx_distributed/trainer/checkpoint.py:612] synced saving of checkpoint step_1200 began", "saving")],
)
def test_work_and_waits_show_as_such(text: str, state: str) -> None:
    j = judge()
    steps(j, [1.0, 2.0], ranks=range(1))
    j.observe_line(ln(0, text, 3.0))
    assert states(j, 4.0) == [state]


def test_an_exited_rank_is_exited() -> None:
    j = judge()
    steps(j, [1.0])
    j.observe_exit(RankExit(RankKey(N, 1), 0, 2.0))
    assert states(j, 3.0) == ["progressing", "exited"]


# -- the timeout in force ------------------------------------------------------------------------


def test_timeout_in_force_names_its_kind() -> None:
    j = judge(startup_timeout=1800.0)
    j.expect([RankKey(N, 0)], 0.0)
    assert j.timeout_in_force() == (1800.0, "startup")  # the incident: 900 s was shown here
    steps(j, [1.0, 2.0], ranks=range(1))
    assert j.timeout_in_force() == (900.0, "default")  # calibrating: the long grace
    steps(j, [float(t) for t in range(3, 12)], ranks=range(1), first=3)
    assert j.timeout_in_force() == (180.0, "calibrated")
    fixed = judge(hang_timeout=600.0)
    steps(fixed, [1.0], ranks=range(1))
    assert fixed.timeout_in_force() == (600.0, "fixed")


# -- progress is dated by its line -----------------------------------------------------------------


def test_a_step_keeps_the_wall_time_of_the_line_that_first_showed_it() -> None:
    j = judge()
    j.observe_line(ln(0, "step 7 loss 1.5 step_time 1s", 10.0))
    j.observe_line(ln(1, "step 7 loss 1.5 step_time 1s", 40.0))  # a late rank (or a late batch)
    j.observe_line(ln(0, "step 6 loss 1.5 step_time 1s", 41.0))  # an old step arriving late
    assert (j.max_step, j.max_step_wall) == (7, W0 + 10.0)
    assert j.last_progress_wall == W0 + 41.0


def test_progress_without_a_step_is_dated_too() -> None:
    j = judge()
    j.observe_line(ln(0, HF_LOG, 12.0))
    assert (j.max_step, j.max_step_wall, j.last_progress_wall) == (None, None, W0 + 12.0)


# -- blind: nothing recognised as progress ----------------------------------------------------------


def test_blind_warning_after_the_threshold_names_what_the_ranks_print() -> None:
    j = judge()
    for i in range(0, 200, 5):
        j.observe_line(ln(i % 2, DDP_EPOCH if i % 3 else DDP_SAVED, 10.0 + i))
    assert j.blind(10.0 + BLIND_AFTER - 1) is None
    w = j.blind(10.0 + BLIND_AFTER)
    assert w is not None and w.ranks == 2 and w.seconds == BLIND_AFTER
    assert set(w.lines) == {DDP_EPOCH, DDP_SAVED}
    assert "--progress-regex" in w.message() and DDP_EPOCH in w.message()


def test_no_blind_warning_once_progress_is_seen_or_while_compiling() -> None:
    j = judge()
    j.observe_line(ln(0, "loading data", 0.0))
    j.observe_line(ln(0, "step 1 loss 1.5 step_time 1s", 100.0))
    assert j.blind(1000.0) is None
    c = judge()
    c.observe_line(ln(0, CC_START, 0.0))
    assert c.blind(BLIND_AFTER + 1) is None
    quiet = judge()
    quiet.expect([RankKey(N, 0)], 0.0)
    assert quiet.blind(10_000.0) is None  # never printed: silence, not blindness


def test_blind_lines_are_shortened_and_few() -> None:
    j = judge()
    for i in range(10):
        j.observe_line(ln(0, f"line {i} " + "x" * 500, float(i)))
    w = j.blind(BLIND_AFTER + 1)
    assert w is not None and len(w.lines) == 4 and all(len(t) <= 120 for t in w.lines)
    assert w.lines[-1].startswith("line 9 ")
