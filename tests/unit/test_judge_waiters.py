"""The ranks a live verdict names as waiting on a peer: those that printed a wait since the job's newest work.

The judge looks at none of its waiters when no rank printed a wait since the newest work (its newest wait
is older: ``Judge._newest_wait``), and orders only those that did. Both are shortcuts: the verdicts must be
the ones a pass over every waiter gives. The wait is the Neuron runtime's RX timeout (bench_wire's line).
"""

from __future__ import annotations

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey

KB = default_knowledge_base()
RX = "2026-Nov-21 13:05:03.000000 4000:{r} CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"
STEP = "2026-11-21 13:05:03.000000 INFO step {s} loss 2.0{r} lr 1.0e-04 grad_norm 0.8813 throughput 123.4 seq/s"
T0 = 1000.0


def _line(rank: int, text: str, t: float) -> LogLine:
    return LogLine(RankKey("n0", rank), text, T0 + t, T0 + t, f"rank-{rank}.log", int(t * 10))


def _steps(judge: Judge, step: int, t: float, ranks: range = range(4)) -> None:
    judge.observe_lines([_line(r, STEP.format(s=step, r=r), t) for r in ranks])


def test_only_the_ranks_that_waited_since_the_newest_work_are_named_in_the_order_of_the_ranks() -> None:
    judge = Judge(KB, JudgeSettings(), T0)
    for k in range(5):
        _steps(judge, 100 + k, 1.0 + k)
    # a wait before the newest step: the job went on after it
    judge.observe_lines([_line(2, RX.format(r=2), 4.5)])
    _steps(judge, 105, 6.0)
    assert judge.verdict(T0 + 7.0).label is Label.HEALTHY
    # waits after it, rank 3's first: named in the ranks' order, the older wait of rank 2 not among them
    judge.observe_lines([_line(3, RX.format(r=3), 7.0), _line(1, RX.format(r=1), 7.5)])
    v = judge.verdict(T0 + 8.0)
    assert (v.label, v.action) == (Label.COMM_TIMEOUT_TRANSIENT, Action.WAIT)
    assert v.ranks == (RankKey("n0", 1), RankKey("n0", 3))
    assert [e.key for e in v.evidence] == [RankKey("n0", 1), RankKey("n0", 3)]
    # progress again: no rank has waited since
    _steps(judge, 106, 9.0)
    assert judge.verdict(T0 + 10.0).label is Label.HEALTHY


def test_a_wait_after_the_newest_work_is_named_whatever_waits_came_before() -> None:
    judge = Judge(KB, JudgeSettings(), T0)
    for k in range(5):
        _steps(judge, 100 + k, 1.0 + k)
    judge.observe_lines([_line(r, RX.format(r=r), 2.5) for r in range(4)])  # older than the newest steps
    assert judge.verdict(T0 + 6.0).label is Label.HEALTHY
    judge.observe_lines([_line(0, RX.format(r=0), 6.0)])
    v = judge.verdict(T0 + 6.5)
    assert v.label is Label.COMM_TIMEOUT_TRANSIENT and v.ranks == (RankKey("n0", 0),)
