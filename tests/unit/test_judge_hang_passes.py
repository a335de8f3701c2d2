"""A failure's verdict looks at every rank only where it must, and answers as the passes over every rank did.

At 65,536 ranks one rank's "suspected hang in collectives" line cost its verdict ~110-190 ms of CPU
(tests/benchmarks/bench_hang_verdict.py), in four passes over every rank: the ranks that reported
nothing (a list of all but one), the ranks that left early, the recorders' collectives, the open
unexplained errors. Now the first two stop at the second candidate or read an index, the third keeps to
dict look-ups and the fourth returns at once when no rank has an open error. ``OldJudge`` below keeps
those passes as they were; both judges are fed the same random observations (secondary failures of
some ranks, clean exits and SIGTERMs, "training finished" lines, unexplained errors, flight recorder
readings whose calls agree or differ at a sequence id) and must give the same verdicts (label,
culprit, evidence, reason: the whole ``Verdict``) and the same answers of each pass.
"""

from __future__ import annotations

import math
import random

import pytest

from neuron_watch.diagnosis.classify import Effect
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import (
    _SAME_SHAPE_OPS,
    SECONDARY,
    SIGTERM_CODES,
    Judge,
    JudgeSettings,
    RankState,
    _who,
)
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Evidence, Label, LogLine, RankExit, RankKey

from .scenario_lines import BASE

KB = default_knowledge_base()
SECONDARY_LINES = [e for s in KB.signatures if s.effect is Effect.FATAL and s.category in SECONDARY
                   for e in s.examples]
PRIMARY_LINES = [e for s in KB.signatures if s.effect is Effect.FATAL and s.category not in SECONDARY
                 for e in s.examples]
END_LINES = [e for s in KB.signatures if s.effect is Effect.TRAIN_END for e in s.examples]
UNEXPLAINED_LINES = [e for s in KB.signatures if s.effect is Effect.UNEXPLAINED for e in s.examples]
OPS = ("gloo:all_reduce", "nccl:broadcast", "nccl:all_gather", "nccl:reduce_scatter")


class OldJudge(Judge):
    """The passes over every rank as they were before they were made cheaper (kept verbatim)."""

    def _left_early(self) -> list[RankState]:
        if self.training_finished() is not None:
            return []
        return [st for st in self.ranks.values()
                if st.key.rank >= 0 and st.failure is None and (st.exit_code == 0 or st.train_end is not None)]

    def _reported_nothing(self, failed: set[RankKey]) -> tuple[RankKey | None, RankKey | None]:
        quiet = [
            k for k, r in self.ranks.items() if k not in failed and k.rank >= 0 and (
                r.exit_code in (None, 0) or (r.exit_code in SIGTERM_CODES and r.train_end is not None))
        ]
        left = [r.key for r in self._left_early() if r.key in quiet]
        return (quiet[0] if len(quiet) == 1 else None), (left[0] if len(left) == 1 else None)

    def _unexplained_at_end(self) -> Evidence | None:
        progressed = [t for st in self.ranks.values() for t in (st.last_progress, st.last_collective)
                      if t is not None]
        latest = max(progressed, default=-math.inf)
        open_errors = [st.unexplained for st in self.ranks.values()
                       if st.unexplained is not None and st.unexplained.mono >= latest]
        return min(open_errors, key=lambda e: (e.mono, e.key.rank)) if open_errors else None

    def training_finished(self) -> Evidence | None:
        ends = [st.train_end_line for st in self.ranks.values() if st.train_end_line is not None]
        if not ends:
            return None
        if any(st.key.rank >= 0 and st.last_progress is not None and st.train_end_line is None
               and st.exit_code != 0 for st in self.ranks.values()):
            return None
        return max(ends, key=lambda e: e.mono)

    def _collective_mismatch(self) -> tuple[RankKey, str] | None:
        calls: dict[tuple[str, int], dict[RankKey, tuple[str, str]]] = {}
        for st in self.ranks.values():
            if st.key.rank < 0:
                continue
            for g, p in st.collectives.items():
                if p.seq >= 0 and p.op:
                    shape = p.shape if p.op.rsplit(":", 1)[-1] in _SAME_SHAPE_OPS else ""
                    calls.setdefault((g, p.seq), {})[st.key] = (p.op, shape)
        for (g, seq), by_rank in sorted(calls.items(), key=lambda kv: (len(kv[0][0]), kv[0])):
            kinds: dict[tuple[str, str], list[RankKey]] = {}
            for k, call in by_rank.items():
                kinds.setdefault(call, []).append(k)
            if len(kinds) != 2:
                continue
            (odd_call, odd), (call, agree) = sorted(kinds.items(), key=lambda kv: len(kv[1]))
            if len(odd) != 1 or len(agree) < 2:
                continue

            def said(c: tuple[str, str]) -> str:
                return f"{c[0]} of {c[1]}" if c[1] else c[0]

            return odd[0], (f"{_who(odd[0])} ran {said(odd_call)} as collective {seq} of group {g} where the "
                            f"other {len(agree)} ranks with a record of it ran {said(call)}: it is out of step "
                            "with them (flight recorder)")
        return None


def observe(judges: tuple[Judge, Judge], rng: random.Random, keys: list[RankKey], t: float, i: int) -> None:
    """One random observation, the same for both judges (each key a fresh but equal object at times,
    as the wire's are)."""
    key = rng.choice(keys)
    if rng.random() < 0.2:
        key = RankKey(key.node, key.rank)
    k = rng.random()
    if k < 0.45:
        text = f"step {100 + i // len(keys) + rng.choice((0, 0, 1))} loss 2.{rng.randrange(9999):04d}"
    elif k < 0.52:
        text = rng.choice(SECONDARY_LINES)
    elif k < 0.54:
        text = rng.choice(PRIMARY_LINES)
    elif k < 0.59:
        text = rng.choice(END_LINES)
    elif k < 0.64:
        text = rng.choice(UNEXPLAINED_LINES)
    elif k < 0.72:
        code = rng.choice((0, 0, -15, 143, 1, -9, 137))
        for j in judges:
            j.observe_exit(RankExit(key, code, t))
        return
    else:
        seq = 40 + rng.randrange(3)
        op = OPS[0] if rng.random() < 0.8 else rng.choice(OPS)
        shape = "[[4]] Float" if rng.random() < 0.85 else "[[8]] Float"
        groups = tuple(GroupProgress(g, seq - 1, seq, seq, op, "started", t, seq, shape)
                       for g in ("0", "10")[: rng.choice((1, 2))])
        for j in judges:
            j.observe_collectives(key, groups, t)
        return
    line = LogLine(key, text, t, t, "", i)
    for j in judges:
        j.observe_lines([line])


def assert_same(old: Judge, new: Judge, now: float, seen: set[str]) -> Label:
    """The passes and the verdict agree; ``seen`` gets the passes that found something (the mixture's reach)."""
    found = {
        "left_early": (new._left_early(), old._left_early()),
        "unexplained": (new._unexplained_at_end(), old._unexplained_at_end()),
        "finished": (new.training_finished(), old.training_finished()),
        "mismatch": (new._collective_mismatch(), old._collective_mismatch()),
    }
    failed = set(list(new.ranks)[::3])
    alone, left = new._reported_nothing(failed)
    found["alone"] = (alone, old._reported_nothing(failed)[0])
    found["left"] = (left, old._reported_nothing(failed)[1])
    for name, (got, was) in found.items():
        assert got == was, name
        if got:
            seen.add(name)
    v = new.verdict(now)
    assert v == old.verdict(now)
    return v.label


def _mixture(seed: int) -> tuple[set[Label], set[str], int]:
    """Twelve generations of random lines on random jobs, both judges asserted alike after each (see
    :func:`assert_same`): the labels reached, the passes that found something, the verdicts with a culprit."""
    rng = random.Random(seed)
    settings = JudgeSettings(hang_timeout=120.0, startup_timeout=400.0)
    labels: set[Label] = set()
    seen: set[str] = set()
    culprits = 0
    for _generation in range(12):  # a failure ends a generation's story: start again
        nodes, per_node = rng.choice(((1, 3), (2, 4), (3, 4), (4, 8)))
        keys = [RankKey(f"n{n}", n * per_node + r) for n in range(nodes) for r in range(per_node)]
        if rng.random() < 0.3:
            keys.append(RankKey("n0", -1))  # a node's own stream
        old, new = OldJudge(KB, settings, BASE), Judge(KB, settings, BASE)
        t = BASE
        for i in range(rng.choice((20, 60, 150))):
            t += rng.choice((0.0, 0.5, 1.0, 5.0, 30.0))
            observe((old, new), rng, keys, t, i)
            if rng.random() < 0.25:
                labels.add(assert_same(old, new, t + rng.choice((0.0, 1.0, 200.0)), seen))
        labels.add(assert_same(old, new, t + 1.0, seen))
        if rng.random() < 0.3:  # every rank says training finished (the job's end, or most of it)
            ends = [LogLine(k, rng.choice(END_LINES), t + 2.0, t + 2.0, "", 0) for k in keys if rng.random() < 0.9]
            for j in (old, new):
                j.observe_lines(ends)
            labels.add(assert_same(old, new, t + 3.0, seen))
        culprits += new.verdict(t + 1.0).culprit is not None
    return labels, seen, culprits


SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_cheaper_passes_give_the_verdicts_of_the_passes_over_every_rank(seed: int) -> None:
    labels, _, culprits = _mixture(seed)
    # the mixture reached failures with culprits and several labels
    assert culprits and len(labels) >= 4, labels


def test_the_mixtures_reach_every_pass() -> None:
    """Over the seeds, every pass found something (one seed's draw from the table's examples may miss one: the
    table grows with every round)."""
    seen = set().union(*(_mixture(seed)[1] for seed in SEEDS))
    assert seen == {"left_early", "unexplained", "finished", "mismatch", "alone", "left"}, seen


def test_one_hang_line_among_many_quiet_ranks_names_its_rank_in_both() -> None:
    """The shape bench_scale.py injects: every rank training, one prints a secondary failure."""
    settings = JudgeSettings(hang_timeout=120.0)
    old, new = OldJudge(KB, settings, BASE), Judge(KB, settings, BASE)
    keys = [RankKey(f"n{r // 8}", r) for r in range(64)]
    lines = [LogLine(k, "step 100 loss 2.5", BASE + 1, BASE + 1, "", k.rank) for k in keys]
    for j in (old, new):
        j.observe_lines(lines)
        j.observe_lines([LogLine(keys[9], SECONDARY_LINES[0], BASE + 2, BASE + 2, "", 0)])
    v = new.verdict(BASE + 3)
    assert v == old.verdict(BASE + 3)
    assert v.culprit == keys[9] and v.label in SECONDARY
