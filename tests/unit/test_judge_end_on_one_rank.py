"""The end of training said on one rank only (rank 0, as most programs print it) while the other
ranks, at the same final step, shut down: their silence is the teardown, not a rank that left a
collective. And the real uneven-data hang (one rank said done and left, the others wait for it in
a collective) is still a hang with its culprit. On a fake clock (``now`` is an argument).

Real last words, each printed by rank 0 only in its framework's source:
the PyTorch DDP tutorial's shape (examples/frameworks/ddp_plain.py: ``if RANK == 0: print(...)``),
Hugging Face Trainer's final metrics (``Trainer.log`` -> ``on_log`` prints on the world's process
zero only), Lightning's ``rank_zero_info("`Trainer.fit` stopped: ...")`` (fit_loop.py), Megatron's
``print_datetime('after training is done')`` (a barrier, then ``print_rank_0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from neuron_watch.diagnosis.judge import TEARDOWN_FLOOR, TEARDOWN_GRACE, Judge, JudgeSettings, teardown_grace
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey

KB = default_knowledge_base()
N = "vm"
HANG = 6.0  # the --hang-timeout of tests/process/test_frameworks.py
R0, R1 = RankKey(N, 0), RankKey(N, 1)


def ln(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey(N, rank), text, t, 1_800_000_000.0 + t, f"rank-{rank}.log", int(t))


def judge() -> Judge:
    j = Judge(KB, JudgeSettings(hang_timeout=HANG), start=0.0)
    j.expect([R0, R1], 0.0)
    return j


# -- the failure seen in tests/process/test_frameworks.py [ddp_plain] -----------------------------
# Generation 2 of that run, as its console showed it (epochs 18-23, 4 steps each, an epoch ~1.3 s
# apart under load; rank 0 saves a snapshot every 2 epochs and alone says "training done"). The
# epoch line is printed as the epoch *begins*: the end comes an epoch after the last of them.
EPOCH = 1.3
DONE_AT = 6 * EPOCH + 1.4  # rank 0's last line, after epoch 23 ran


def ddp_plain_generation_2() -> Judge:
    j = judge()
    t = 0.0
    for epoch in range(18, 24):
        for rank in (1, 0):
            j.observe_line(ln(rank, f"[GPU{rank}] Epoch {epoch} | Batchsize: 32 | Steps: 4", t + 0.01 * rank))
        if epoch % 2 == 0:
            j.observe_line(ln(0, f"Epoch {epoch} | Training snapshot saved at ckpt/snapshot.pt", t + 0.5))
        t += EPOCH
    j.observe_line(ln(0, "training done after epoch 23", DONE_AT))
    return j


def test_the_ddp_tutorials_end_on_rank_0_with_rank_1_still_shutting_down_is_healthy() -> None:
    """Rank 1 printed its last epoch line and, after that epoch, tears down (destroy_process_group,
    interpreter exit) longer than the hang timeout after its last line under load; neither rank's
    exit is seen yet (torchrun reports no clean exit). Was: collective_hang, culprit rank 0 "left
    without a collective (uneven data)", restarted twice, then given up as a crash loop."""
    j = ddp_plain_generation_2()
    assert j.training_finished() is None  # rank 1 printed progress and no end: not every rank said it
    last_line = 5 * EPOCH + 0.01
    now = DONE_AT + HANG - 0.5  # more than a hang timeout after rank 1's last line
    assert now - last_line > HANG
    v = j.verdict(now)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    assert "vm/rank1" in v.reason and "shutting down" in v.reason, v.reason
    # a loaded machine's exit (7.6-11.4 s after the end line measured at load 9-10 on 2 cores) too
    assert j.verdict(DONE_AT + 12.0).label is Label.HEALTHY


# -- the same end in the words of several frameworks, each said by rank 0 only ----------------------
ENDS = {
    "ddp_tutorial": "training done after epoch 9",
    "hf_trainer": ("{'train_runtime': '4.715', 'train_samples_per_second': '67.86', 'train_steps_per_second': "
                   "'4.241', 'train_loss': '4.55', 'epoch': '1.25'}"),
    "lightning": "`Trainer.fit` stopped: `max_steps=40` reached.",
    "megatron": "[after training is done] datetime: 2024-05-02 11:47:13 ",
    "torchtitan": "[rank0]:[titan] 2025-01-09 10:21:12,345 - root - INFO - Training completed",
}
STEPS = 10
END_AT = STEPS + 0.5


@dataclass(frozen=True)
class Case:
    """Ranks ``0..ranks-1`` print ``step n`` at t = n (n = 1..STEPS, except ``behind``: one step
    fewer), rank 0 alone then says the end at ``END_AT``; ``then`` is applied to the judge after."""

    ranks: int = 2
    behind: tuple[int, ...] = ()
    then: str = ""


def said_on_rank_0(end_line: str, case: Case = Case()) -> Judge:
    j = Judge(KB, JudgeSettings(hang_timeout=HANG), start=0.0)
    j.expect([RankKey(N, r) for r in range(case.ranks)], 0.0)
    for n in range(1, STEPS + 1):
        for r in range(case.ranks):
            if not (r in case.behind and n == STEPS):
                j.observe_line(ln(r, f"step {n} loss 1.5", n + 0.01 * r))
    j.observe_line(ln(0, end_line, END_AT))
    if case.then == "rank 1 waits on a peer":  # the Neuron runtime's words for a peer that does not come
        j.observe_line(ln(1, "2024-Jun-06 19:42:28.0596 1402:1481 WARN  NRT:nrt_exec_collectives "
                              "Timeout waiting for RX (waited 120 sec) - retrying", END_AT + 1.0))
    elif case.then == "rank 1 is stopped":
        j.observe_worker_columns([R1], [5.0], [True], [END_AT + 1.0], END_AT + 1.0)
    elif case.then == "rank 0 exited":
        j.observe_exit(RankExit(R0, 0, END_AT + 0.5))
    return j


GRACE_END = END_AT + teardown_grace(HANG)  # the quiet ranks' teardown is over by then


@pytest.mark.parametrize("timeout, grace", [(6.0, TEARDOWN_FLOOR), (15.0, TEARDOWN_FLOOR),
                                            (180.0, 180.0 * TEARDOWN_GRACE), (1800.0, 1800.0 * TEARDOWN_GRACE)])
def test_the_teardown_grace_is_hang_timeouts_with_a_floor_for_short_ones(timeout: float, grace: float) -> None:
    assert teardown_grace(timeout) == grace


@pytest.mark.parametrize("end_line", ENDS.values(), ids=ENDS.keys())
@pytest.mark.parametrize("ranks", [2, 4])
def test_an_end_said_on_rank_0_gives_the_others_at_its_step_a_teardown_grace(end_line: str, ranks: int) -> None:
    j = said_on_rank_0(end_line, Case(ranks=ranks))
    assert j.training_finished() is None
    v = j.verdict(GRACE_END - 0.5)  # well past a hang timeout after the last progress (t = 10)
    assert (v.label, v.action, v.culprit) == (Label.HEALTHY, Action.WAIT, R0), v.reason
    assert set(v.ranks) == {RankKey(N, r) for r in range(1, ranks)}, v.ranks
    assert "reached the same final step" in v.reason and "shutting down" in v.reason, v.reason
    if ranks > 2:
        assert f"vm/rank1 and {ranks - 2} more rank(s)" in v.reason, v.reason
    # the grace is bounded: past it the silence is a hang, and the verdict says it cannot tell which
    v = j.verdict(GRACE_END + 0.5)
    assert (v.label, v.action, v.culprit) == (Label.COLLECTIVE_HANG, Action.RESTART, R0), v.reason
    assert "did not exit within the teardown grace" in v.reason and "no reading tells which" in v.reason, v.reason


def test_a_teardown_that_ends_in_the_grace_ends_healthy() -> None:
    j = said_on_rank_0(ENDS["ddp_tutorial"])
    for r in (0, 1):
        j.observe_exit(RankExit(RankKey(N, r), 0, GRACE_END - 1.0))
    assert j.verdict(GRACE_END + 10.0).label is Label.HEALTHY


def test_once_the_rank_that_said_it_exited_the_others_get_one_hang_timeout() -> None:
    """Its own teardown is over and measured: the others' is the same work."""
    j = said_on_rank_0(ENDS["ddp_tutorial"], Case(then="rank 0 exited"))
    exited = END_AT + 0.5
    v = j.verdict(exited + HANG - 0.5)
    assert (v.label, v.action) == (Label.HEALTHY, Action.WAIT), v.reason
    v = j.verdict(exited + HANG + 0.5)  # before GRACE_END
    assert (v.label, v.culprit, v.culprit_source) == (Label.COLLECTIVE_HANG, R0, "process_state"), v.reason
    assert "no reading tells which" in v.reason, v.reason


@pytest.mark.parametrize("case, culprit", [
    # rank 1 is a step behind the end: it waits in a collective of a step rank 0 never ran (uneven data)
    (Case(behind=(1,)), R0),
    # rank 1 says it waits on a peer after the end was said: it is in a collective, not tearing down
    (Case(then="rank 1 waits on a peer"), R0),
    # a stopped process computes nothing, and tears nothing down
    (Case(then="rank 1 is stopped"), R1),
], ids=["a rank behind the end's step", "a rank waiting on a peer", "a stopped rank"])
def test_near_misses_get_no_grace_and_are_a_hang_at_the_hang_timeout(case: Case, culprit: RankKey) -> None:
    j = said_on_rank_0(ENDS["ddp_tutorial"], case)
    v = j.verdict(STEPS + HANG + 1.0)
    assert (v.label, v.action, v.culprit) == (Label.COLLECTIVE_HANG, Action.RESTART, culprit), v.reason
    assert "teardown grace" not in v.reason, v.reason


def test_the_uneven_data_hang_is_still_named_when_every_rank_prints_its_end() -> None:
    """DDP's uneven inputs in a program that prints its end on every rank (tests/process/ranks/
    ddp_faults.py --fault uneven): rank 1 had one batch fewer, said it was done at the step rank 0
    had reached and exited; rank 0 waits for it in the next step's all-reduce. Judged a hang one
    hang timeout after rank 1's exit, rank 1 named."""
    j = judge()
    for n in range(1, 8):
        for r in (0, 1):
            j.observe_line(ln(r, f"step {n} loss 1.5", n + 0.01 * r))
    j.observe_line(ln(1, "training done at step 7", 7.5))
    j.observe_exit(RankExit(R1, 0, 7.6))
    assert j.verdict(7.6 + HANG - 0.5).label is Label.HEALTHY  # as long as a teardown could take
    v = j.verdict(7.6 + HANG + 0.5)
    assert (v.label, v.action, v.culprit, v.culprit_source) == (
        Label.COLLECTIVE_HANG, Action.RESTART, R1, "process_state"), v.reason
    assert "it left without a collective they are in (uneven data" in v.reason, v.reason


def test_two_ranks_that_said_it_and_two_at_their_step_get_the_grace_and_then_an_unsure_hang() -> None:
    """A program that prints its end on the first rank of each node: ranks 0 and 2 say it."""
    j = said_on_rank_0(ENDS["ddp_tutorial"], Case(ranks=4))
    j.observe_line(ln(2, ENDS["ddp_tutorial"], END_AT + 0.2))
    v = j.verdict(GRACE_END - 0.5)
    assert (v.label, set(v.ranks)) == (Label.HEALTHY, {R1, RankKey(N, 3)}), v.reason
    v = j.verdict(GRACE_END + 0.5)
    assert (v.label, v.action) == (Label.COLLECTIVE_HANG, Action.RESTART), v.reason
    assert "no reading tells which" in v.reason, v.reason
