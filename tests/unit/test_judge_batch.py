"""Pre-classified batches (``Judge.observe_batch``) leave the judge exactly as line-by-line ingest does.

The agents classify their own lines and send only the matches the judge needs
(``compact_matches``); the coordinator applies them per batch. Both ways are fed the same lines
here and compared field by field: every rank's state (in creation order), step times, hints,
verdicts and rank summaries.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from neuron_watch.diagnosis.classify import Effect, classify_batch, compact_matches, kb_fingerprint
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label, LogLine, RankKey, RankSpan

from .scenario_lines import (
    BASE,
    Scenario,
    compile_then_train,
    crash_then_closed,
    hardware_then_hangs,
    log_lines,
    mid_compile,
    rx_nobody_compiling,
    rx_while_other_compiles,
)

KB = default_knowledge_base()


def batch_args(judge: Judge, lines: list[LogLine], compact: bool = True) -> tuple[
        list[RankSpan], list[LogLine], list[LogLine]]:
    """What an agent sends for ``lines`` (one batch), as the coordinator hands it to the judge:
    with ``compact``, what :func:`classify_batch` keeps (the matches :func:`compact_matches` keeps
    and the ranks that printed only steps as progress lines, :func:`coalesce_progress`), else
    every match."""
    order: dict[RankKey, list[float | str]] = {}
    for ln in lines:
        r = order.get(ln.key)
        if r is None:
            order[ln.key] = [ln.mono, ln.mono, ln.text]
        else:
            r[1] = max(float(r[1]), ln.mono)
            r[2] = ln.text
    ranks = [RankSpan(k, float(v[0]), float(v[1]), str(v[2])) for k, v in order.items()]
    if compact:
        found = classify_batch(judge.kb, lines)
        return ranks, found.matches, found.progress
    return ranks, [lines[i]._replace(signature=m.signature.id, step=m.step, loss=m.loss)
                   for i, m in judge.kb.scan([ln.text for ln in lines])], []


def assert_same(a: Judge, b: Judge, now: float) -> None:
    assert list(a.ranks) == list(b.ranks)  # same ranks, created in the same order
    for key in a.ranks:
        assert a.ranks[key] == b.ranks[key], key
    assert (a.step_times, a.max_step, a.hints) == (b.step_times, b.max_step, b.hints)
    for t in (now, now + 60, now + 600, now + 4000):
        assert a.verdict(t) == b.verdict(t)
        assert a.rank_summaries(t) == b.rank_summaries(t)


def feed_both(lines: list[LogLine], sizes: Callable[[], int], settings: JudgeSettings | None = None,
              compact: bool = True) -> tuple[Judge, Judge]:
    start = min(ln.mono for ln in lines)
    a = Judge(KB, settings or JudgeSettings(), start)
    b = Judge(KB, settings or JudgeSettings(), start)
    i = 0
    while i < len(lines):
        batch = lines[i : i + sizes()]
        i += len(batch)
        a.observe_lines(batch)
        b.observe_batch(*batch_args(b, batch, compact))
        assert_same(a, b, batch[-1].mono)
    return a, b


SCENARIOS: list[Callable[[], Scenario]] = [compile_then_train, mid_compile, rx_while_other_compiles,
                                           rx_nobody_compiling, hardware_then_hangs, crash_then_closed]


@pytest.mark.parametrize("make", SCENARIOS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("size", [1, 3, 50])
def test_scenarios_agree(make: Callable[[], Scenario], size: int) -> None:
    feed_both(log_lines(make(), node="n0"), lambda: size)


def _mixed(seed: int, n: int = 3000) -> list[LogLine]:
    """Every example line of the table, progress lines with rising, repeated and missing steps,
    and plain chatter, over 6 ranks on 2 nodes, interleaved at random."""
    rng = random.Random(seed)
    examples = [e for s in KB.signatures for e in s.examples]
    out = []
    t = BASE
    step = 0
    for i in range(n):
        t += rng.choice((0.0, 0.0, 0.01, 0.5, 30.0))
        key = RankKey(f"n{rng.randrange(2)}", rng.randrange(3))
        k = rng.random()
        if k < 0.45:
            step += rng.choice((0, 0, 1, 1, -3))
            text = f"step {step} loss 2.{rng.randrange(9999):04d} lr 1e-4"
        elif k < 0.5:
            text = f"step loss 2.{rng.randrange(9999):04d}"  # no step number: appends a step time
        elif k < 0.8:
            text = rng.choice(examples)
        else:
            text = f"chatter {i} nothing to see"
        out.append(LogLine(key, text, t - rng.choice((0.0, 0.0, 0.2)), t, f"/logs/{key.rank}.log", i))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("compact", [True, False])
def test_random_mixtures_agree(seed: int, compact: bool) -> None:
    rng = random.Random(seed * 7 + 1)
    a, _b = feed_both(_mixed(seed), lambda: rng.choice((1, 2, 7, 40, 300)), compact=compact)
    assert a.ranks and a.step_times  # the mixture did exercise progress


@pytest.mark.parametrize("seed", range(3))
def test_one_key_object_per_rank_agrees(seed: int) -> None:
    """The coordinator names a rank with one key object batch after batch (the judge finds its state
    by that object's identity); a batch with an equal key of another object, mixed in at random,
    still reaches the same state. Either way the result is line by line's."""
    shared: dict[RankKey, RankKey] = {}
    rng = random.Random(seed)
    lines = [ln._replace(key=shared.setdefault(ln.key, ln.key) if rng.random() < 0.9
                         else RankKey(ln.key.node, ln.key.rank))
             for ln in _mixed(seed)]
    _a, b = feed_both(lines, lambda: rng.choice((1, 7, 40, 300)))
    assert len(b.ranks) == len(shared)  # an equal key of another object made no second state


def test_compaction_drops_most_matches_of_a_training_log() -> None:
    lines = [LogLine(RankKey("n0", r), f"step {s} loss 2.5 lr 1e-4", float(s), float(s), "", s)
             for s in range(1, 17) for r in range(32)]
    found = KB.scan([ln.text for ln in lines])
    assert len(found) == len(lines) and all(m.signature.effect is Effect.PROGRESS for _, m in found)
    kept = compact_matches([(lines[i].key, m) for i, m in found])
    # each new step once (it raises the job's step) + each rank's last progress line
    assert len(kept) <= 16 + 32


def test_ranks_that_print_only_steps_go_as_progress_rows() -> None:
    # 32 ranks print steps 1..16, four batches: each rank is one progress row a batch, but for the
    # first rank to show a new step (a match: it times the job's step)
    lines = [LogLine(RankKey("n0", r), f"step {s} loss 2.5 lr 1e-4", s + r / 100, s + r / 100, "/l", s)
             for s in range(1, 17) for r in range(32)]
    a = Judge(KB, JudgeSettings(), 0.0)
    b = Judge(KB, JudgeSettings(), 0.0)
    for k in range(0, len(lines), 128):
        ranks, matches, progress = batch_args(b, lines[k:k + 128])
        assert len(progress) == 31 and len(matches) == 4  # rank 0: a new step in each of its 4 lines
        a.observe_lines(lines[k:k + 128])
        b.observe_batch(ranks, matches, progress)
    assert_same(a, b, 17.0)
    assert b.ranks[RankKey("n0", 31)].step == 16 and b.ranks[RankKey("n0", 31)].last_progress == 16.31


def test_a_rank_with_another_line_is_not_coalesced() -> None:
    said = [(0, "step 5 loss 2.5"), (1, "step 5 loss 2.5"), (1, "chatter"), (2, "step 5 loss 2.4"),
            (2, "step 6 loss 2.4"), (3, "step 5 loss 2.3")]
    lines = [LogLine(RankKey("n0", r), text, 1.0 + i / 10, 1.0 + i / 10) for i, (r, text) in enumerate(said)]
    _ranks, _matches, progress = batch_args(Judge(KB, JudgeSettings(), 0.0), lines)
    # rank 0 raises the batch's step, rank 1 printed chatter, rank 2's last line raises it: only rank 3
    assert [p.rank for p in progress] == [3]


def test_a_progress_row_of_another_kind_is_refused() -> None:
    j = Judge(KB, JudgeSettings(), 0.0)
    line = LogLine(RankKey("n0", 0), "step 3 loss 1.0", 1.0, 1.0)
    rx = next(s.id for s in KB.signatures if s.effect is Effect.COMM_WAIT)
    with pytest.raises(ValueError, match="not a progress signature"):
        j.observe_batch([RankSpan(line.key, 1.0, 1.0, line.text)], [], [line._replace(signature=rx, step=3, loss=1.0)])
    assert j.ranks == {} and j.max_step is None


def test_unknown_signature_changes_nothing() -> None:
    j = Judge(KB, JudgeSettings(), 0.0)
    line = LogLine(RankKey("n0", 0), "step 3 loss 1.0", 1.0, 1.0)
    with pytest.raises(ValueError, match=r"no\.such"):
        j.observe_batch([RankSpan(line.key, 1.0, 1.0, line.text)],
                        [line._replace(signature="no.such.signature", step=3, loss=1.0)])
    assert j.ranks == {} and j.max_step is None


def test_fingerprint_tells_knowledge_bases_apart() -> None:
    assert kb_fingerprint(KB) == kb_fingerprint(default_knowledge_base())
    assert kb_fingerprint(KB) != kb_fingerprint(default_knowledge_base(r"it=(?P<step>\d+)"))
    assert 0 < kb_fingerprint(KB) < 1 << 63


#: A compile the program announces in its own words (form.compile_running: XLA's slow-compile alarm,
#: google-deepmind/tapnet#53), then the compiler's own pipeline line (neuronx-cc's "Running <pass>").
ANNOUNCED_BUILD = ("[Compiling module jit_apply_fn] Very slow compile? If you want to file a bug, run with envvar "
                   "XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.")
COMPILER_PASS = "2023-12-12T17:28:24Z Running birverifier"


@pytest.mark.parametrize("after", [COMPILER_PASS, ANNOUNCED_BUILD, "."])
def test_an_announced_compile_followed_by_another_compiler_line_of_its_rank_is_kept(after: str) -> None:
    """The announcement opens a compile the judge waits on (``RankState.phase_running``); another
    compiler line of the same rank after it in the batch does not (it is a beat): leaving the
    announcement out would miss a compile still running. A second announcement sets it again, later."""
    key = RankKey("n0", 1)
    said = [(0, "step 5 loss 2.5"), (1, "step 5 loss 2.5"), (1, ANNOUNCED_BUILD), (0, "chatter"), (1, after)]
    lines = [LogLine(RankKey("n0", r), text, 5.0 + i / 10, 5.0 + i / 10, f"/l/{r}", i)
             for i, (r, text) in enumerate(said)]
    found = KB.scan([ln.text for ln in lines])
    kept = {found[i][0] for i in compact_matches([(lines[i].key, m) for i, m in found])}
    a, b = feed_both(lines, lambda: len(lines))  # one batch; every state and verdict alike
    assert b.ranks[key].phase_running == (5.4 if after == ANNOUNCED_BUILD else 5.2)
    assert (2 in kept) is (after != ANNOUNCED_BUILD)
    assert a.verdict(5.0 + 600).label is Label.COMPILING  # past the beat window: the announcement holds it
