"""The judge's verdict looks only at the ranks that can change it, and answers as a pass over every rank does.

A verdict over 65,536 ranks (1,024 nodes x 64) cost ~0.3 s as a pass over every rank, every 0.1 s
(tests/benchmarks/bench_scale.py); the judge keeps indexes of the ranks in each state that matters
(compiling, waiting on a lock or a peer, failed, exited, recompiling) and the job's newest sign of
work. Here two judges are fed the same observations -- every example line of the knowledge base,
progress with rising, repeated and missing steps, compiler and worker readings, flight recorder
readings, exits, times that sometimes go back -- and one of them has its indexes widened to every
rank before each verdict (``Judge._widen``: what a pass over every rank sees). Their verdicts,
storm reports, timeouts and silence limits must agree at every step.
"""

from __future__ import annotations

import random

import pytest

from neuron_watch.diagnosis.classify import Effect
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import CompilerSample, Label, LogLine, RankExit, RankKey, WorkerSample

from .scenario_lines import BASE

KB = default_knowledge_base()
# Lines that fail a rank end the story (the verdict is that failure from then on): rare here.
FATAL = [e for s in KB.signatures if s.effect is Effect.FATAL for e in s.examples]
OTHERS = [e for s in KB.signatures if s.effect is not Effect.FATAL for e in s.examples]
KEYS = [RankKey(f"n{n}", r) for n in range(3) for r in range(4)]


def observe(judges: tuple[Judge, Judge], rng: random.Random, t: float, i: int) -> None:
    """One random observation, the same for both judges."""
    key = rng.choice(KEYS)
    k = rng.random()
    if k < 0.55:
        text = (f"step {1000 + i // 7 + rng.choice((0, 0, 1, -2))} loss 2.{rng.randrange(9999):04d}"
                if rng.random() < 0.5 else rng.choice(FATAL if rng.random() < 0.002 else OTHERS))
        lines = [LogLine(key, text, t - rng.choice((0.0, 0.0, 3.0)), t, "", i)]
        for j in judges:
            j.observe_lines(lines)
    elif k < 0.7:
        node = f"n{rng.randrange(3)}"
        samples = [CompilerSample(RankKey(node, r), 500 + r, float(i // rng.choice((1, 4))), t)
                   for r in range(4) if rng.random() < 0.3]
        for j in judges:
            j.observe_compilers(samples, t, node=node)
    elif k < 0.82:
        samples2 = [WorkerSample(key, float(i // rng.choice((1, 3, 50))), rng.random() < 0.15, t)]
        for j in judges:
            j.observe_workers(samples2, t)
    elif k < 0.95:
        done = i // rng.choice((1, 5, 40))
        groups = (GroupProgress("0", done, done, done, "gloo:all_reduce", "completed", t, done, "[[4]] Float"),)
        for j in judges:
            j.observe_collectives(key, groups, t)
    elif k < 0.96:
        code = rng.choice((0, -15, 143, 0, 1, -9, 137)[: 7 if rng.random() < 0.05 else 4])
        for j in judges:
            j.observe_exit(RankExit(key, code, t))
    else:
        locks = ["/cache/a.lock"] if rng.random() < 0.5 else []
        for j in judges:
            j.observe_cache_locks(locks, t)


def assert_agree(a: Judge, b: Judge, now: float) -> None:
    b._widen()
    va, vb = a.verdict(now), b.verdict(now)
    assert va == vb
    assert a.recompile_storms() == b.recompile_storms()
    assert a.timeout_in_force() == b.timeout_in_force()
    assert a.silent_after() == b.silent_after()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("hang_timeout", [None, 200.0])
def test_indexed_verdicts_agree_with_a_pass_over_every_rank(seed: int, hang_timeout: float | None) -> None:
    rng = random.Random(seed)
    settings = JudgeSettings(hang_timeout=hang_timeout, startup_timeout=400.0, compile_timeout=900.0,
                             save_timeout=600.0)
    labels = set()
    for _generation in range(6):  # a failure ends a generation's story: start again, a few times
        t = asked = BASE
        a, b = Judge(KB, settings, BASE), Judge(KB, settings, BASE)
        for i in range(400):
            t += rng.choice((0.0, 0.1, 1.0, 1.0, 5.0, 40.0, 150.0, 700.0))
            observe((a, b), rng, t, i)
            if rng.random() < 0.3:
                asked = max(asked, t + rng.choice((0.0, 0.0, 30.0, 400.0, 2000.0)))  # as the coordinator asks
                assert_agree(a, b, asked)
                labels.add(a.verdict(asked).label)
    # the mixture did reach the states the indexes are about
    assert {Label.COMPILING, Label.HEALTHY, Label.COLLECTIVE_HANG} <= labels and len(labels) >= 4, labels


def test_an_earlier_time_asked_after_a_later_one_still_sees_the_compile() -> None:
    """A verdict forgets a compile that is over at its ``now``; asked about an earlier time, the
    judge must still see it (verdict is a question about a time, not a step of a clock)."""
    judge = Judge(KB, JudgeSettings(hang_timeout=60.0), BASE)
    key = RankKey("n0", 0)
    judge.observe_lines([LogLine(key, "step 1 loss 2.5", BASE, BASE)])
    judge.observe_lines([LogLine(RankKey("n0", 1), "step 1 loss 2.5", BASE, BASE)])
    judge.observe_compilers([CompilerSample(key, 77, 1.0, BASE + 1)], BASE + 1, node="n0")
    assert judge.verdict(BASE + 100).label is Label.COMPILING  # the compiler's CPU grew within the stall
    assert judge.verdict(BASE + 10_000).label is Label.COLLECTIVE_HANG  # long silent, the compiler stalled
    assert judge.verdict(BASE + 100).label is Label.COMPILING


def test_a_progress_time_that_goes_back_moves_the_hang_clock_back() -> None:
    """The job's newest progress is kept as lines arrive; a rank's newest progress replaced by an
    older one (a line read late) makes it the other ranks' newest again, as a pass over them says."""
    judge = Judge(KB, JudgeSettings(hang_timeout=100.0), BASE)
    a, b = RankKey("n0", 0), RankKey("n0", 1)
    judge.observe_lines([LogLine(b, "step 1 loss 2.5", BASE + 10, BASE + 10)])
    judge.observe_lines([LogLine(a, "step 2 loss 2.5", BASE + 50, BASE + 50)])
    assert judge.verdict(BASE + 140).label is not Label.COLLECTIVE_HANG  # 90 s since rank 0's step
    judge.observe_lines([LogLine(a, "step 2 loss 2.4", BASE + 20, BASE + 20)])  # rank 0's newest is now at 20
    v = judge.verdict(BASE + 140)
    assert v.label is Label.COLLECTIVE_HANG and "120s" in v.reason  # since rank 0's 20, not 50


def test_a_recompile_whose_rank_uses_the_cpu_again_is_compiling_again() -> None:
    """A recompile counts while the rank's process tree keeps using the CPU; a verdict in a pause of
    that growth forgets the rank, and the next reading that shows growth makes it compiling again."""
    judge = Judge(KB, JudgeSettings(hang_timeout=60.0), BASE)
    key = RankKey("n0", 0)
    for r in (0, 1):
        judge.observe_lines([LogLine(RankKey("n0", r), "step 1 loss 2.5", BASE, BASE)])
    recompiling = ("[rank0]:V1123 20:06:40.110000 8461 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] "
                   "Recompiling function inner in /opt/train.py:67")  # the signature's example, from a real run
    judge.observe_lines([LogLine(key, recompiling, BASE + 1, BASE + 1)])
    judge.observe_workers([WorkerSample(key, 10.0, False, BASE + 1)], BASE + 1)
    assert judge.verdict(BASE + 5).label is Label.COMPILING
    assert judge.verdict(BASE + 40).label is Label.HEALTHY  # no CPU growth for 39 s: the recompile is not evidence
    judge.observe_workers([WorkerSample(key, 20.0, False, BASE + 45)], BASE + 45)
    assert judge.verdict(BASE + 50).label is Label.COMPILING
