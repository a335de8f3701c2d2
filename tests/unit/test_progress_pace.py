"""Each rank's progress kept on its node (:mod:`neuron_watch.node.progress_pace`): the judge that gets only
what changed (rows paced, held rows sent when due) reaches the same rank states, verdicts, culprits and
evidence as the judge that gets every row, through the real node path (:class:`LineBatches`), the wire
and the coordinator's columns (:func:`line_columns`)."""

from __future__ import annotations

import random

import pytest

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label, LogLine, RankKey
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.node.progress_pace import ProgressPace
from neuron_watch.wire.protocol import (
    Header,
    Kind,
    Lines,
    Msg,
    decode,
    encode,
    line_columns,
    procs_every_at,
    progress_pace_at,
)
from tests.unit.test_judge_batch import _mixed, assert_same

KB = default_knowledge_base()
PACE = 3.0
RX = "2023-Aug-01 16:14:43.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX " \
     "(waited 120 sec) - retrying"


class Side:
    """One node's batches (at ``pace``) into one judge, over the wire, as the coordinator takes them."""

    def __init__(self, node: str, pace: float, start: float, settings: JudgeSettings | None = None) -> None:
        self.node, self.pace = node, pace
        self.batches = LineBatches(10_000, LinkCounters(), KB)
        self.judge = Judge(KB, settings or JudgeSettings(), start)
        self.keys: dict[int, RankKey] = {}
        self.rows = 0  # progress rows and held rows the judge took
        self.paced = 0  # bodies that left ranks out or carried held rows

    def _key(self, rank: int) -> RankKey:
        return self.keys.setdefault(rank, RankKey(self.node, rank))

    def send(self, lines: list[LogLine], now: float, everything: bool = False) -> None:
        for line in lines:
            self.batches.add(line)
        for body in self.batches.take(now, now + 1e6, self.pace, everything):
            h = Header(kind=Kind.LINES, job="j", node=self.node, session=1, generation=0, seq=0, mono=now,
                       wall=now + 1e6)
            msg = decode(encode(Msg(h, body)))
            assert isinstance(msg.body, Lines) and msg.body == body
            self.paced += body.judged is not None or bool(body.held)
            cols = line_columns(msg.body, [self._key(c.rank) for c in msg.body.ranks], now, h.wall, self._key)
            self.rows += len(cols.progress.chunk)
            self.judge.observe_columns(cols)


def _training(ranks: int, seconds: int, stops: dict[int, float], t0: float = 1000.0) -> list[tuple[float, LogLine]]:
    """``ranks`` ranks printing a step a second (rank r a little after rank r - 1), rank r stopping at
    ``stops[r]`` seconds (a hang: the first to stop is the culprit); each line with its batch's time."""
    out = []
    for s in range(seconds):
        for r in range(ranks):
            if s >= stops.get(r, seconds):
                continue
            t = t0 + s + r / (10 * ranks)
            out.append((t0 + s + 1.0, LogLine(RankKey("n0", r), f"step {s} loss 2.{r}{s % 10} lr 1e-4", t, t + 1e6,
                                             f"/logs/rank-{r}.log", s + 1)))
    return out


def _feed(sides: list[Side], timed: list[tuple[float, LogLine]], until: float) -> None:
    """Every batch (a second of lines) to each side, then the node's ticks up to ``until`` (held rows due)."""
    batches: dict[float, list[LogLine]] = {}
    for at, line in timed:
        batches.setdefault(at, []).append(line)
    for at in sorted(batches):
        for side in sides:
            side.send(batches[at], at)
    t = max(batches)
    while t < until:
        t += 0.5
        for side in sides:
            side.send([], t)


def test_the_pace_grows_with_the_job_as_the_hang_clock_does() -> None:
    assert progress_pace_at(8) == progress_pace_at(256) == 0.0  # small jobs: every row goes with its batch
    assert progress_pace_at(1024) == 3.0 and progress_pace_at(100_000) == 4.0
    for nodes in (1, 256, 512, 1024, 4096):
        assert progress_pace_at(nodes) == procs_every_at(nodes) - 1.0  # within delivery_slack_at's growth


def test_a_hang_names_the_same_culprit_and_real_last_progress() -> None:
    """Steady training at 1 line a second, rows paced at 3 s: the judge takes a third of the rows; when the
    ranks stop (rank 2 first), the held rows arrive within the pace interval, and the hang verdict names the
    same culprit with every rank's real last progress line and time."""
    timed = _training(4, 60, {2: 40, 0: 45, 1: 45, 3: 45})
    start = timed[0][1].mono
    every, paced = Side("n0", 0.0, start), Side("n0", PACE, start)
    _feed([every, paced], timed, until=1070.0)
    assert paced.paced and paced.rows < every.rows / 2  # most rows were held, superseded by later ones
    assert_same(every.judge, paced.judge, 1070.0)
    hung = paced.judge.verdict(2500.0)
    assert hung.label is Label.COLLECTIVE_HANG and hung.culprit == RankKey("n0", 2)
    assert hung == every.judge.verdict(2500.0)
    last = {ev.key.rank: (ev.text, ev.mono) for ev in hung.evidence}
    assert last[2][0].startswith("step 39 ") and last[0][0].startswith("step 44 ")
    assert last[2][1] == timed[0][1].mono + 39 + 2 / 40  # the line's own time, not its row's arrival


def test_what_changes_goes_at_once() -> None:
    """A rank's first lines, a wait, the progress after it, and a step going back are not held."""
    pace = ProgressPace()
    key = RankKey("n0", 0)

    def step(n: int, t: float) -> LogLine:
        return LogLine(key, f"step {n}", t, t, "", 0, "progress.step", n)

    first = pace.take([step(1, 1.0)], [], [step(1, 1.0)], 1.0, PACE)
    assert first.judged is None and first.progress  # its first progress
    held = pace.take([step(2, 2.0)], [], [step(2, 2.0)], 2.0, PACE)
    assert held.judged == [] and not held.progress and pace.holding == 1
    rx = LogLine(key, RX, 2.5, 2.5, "", 0, "ccom.rx_timeout")
    waited = pace.take([rx], [rx], [], 2.5, PACE)
    assert waited.judged is None and [m.text for m in waited.matches] == ["step 2", RX]  # held row first
    assert pace.take([step(3, 3.0)], [], [step(3, 3.0)], 3.0, PACE).progress  # the wait ended
    assert not pace.take([step(4, 4.0)], [], [step(4, 4.0)], 4.0, PACE).progress
    assert pace.take([step(0, 4.5)], [], [step(0, 4.5)], 4.5, PACE).progress  # a loop begins again
    assert not pace.take([step(1, 5.0)], [], [step(1, 5.0)], 5.0, PACE).progress
    assert not pace.due(7.0, PACE) and pace.due(7.5, PACE)
    quiet = pace.take([], [], [], 7.5, PACE)
    assert [(h.text, n) for h, n in quiet.held] == [("step 1", 1)] and pace.holding == 0
    assert not pace.take([step(2, 8.0)], [], [step(2, 8.0)], 8.0, PACE).progress  # the pace runs from 7.5
    assert pace.holding == 1
    pace.reset()  # a new coordinator: what is held is due, the next row goes at once
    assert pace.due(8.0, PACE) and pace.take([step(3, 8.5)], [], [step(3, 8.5)], 8.5, PACE).progress


@pytest.mark.parametrize("seed", range(4))
def test_random_mixtures_end_the_same(seed: int) -> None:
    """Every example line of the table, steps rising, repeated and going back, chatter, on two nodes: a
    paced judge, once the held rows are due, holds what the judge of every row holds, and says the same."""
    lines = _mixed(seed, 2000)
    start = min(ln.mono for ln in lines)
    rng = random.Random(seed)
    judges = {}
    for pace in (0.0, PACE):
        sides = {n: Side(n, pace, start) for n in ("n0", "n1")}
        judge = Judge(KB, JudgeSettings(), start)
        for side in sides.values():
            side.judge = judge  # one judge for both nodes, as the coordinator's
        i = 0
        rng.seed(seed)
        while i < len(lines):
            node = f"n{rng.randrange(2)}"
            batch = [ln for ln in lines[i:i + rng.choice((1, 5, 40))] if ln.node == node]
            i += max(1, len(batch))
            if batch:
                sides[node].send(batch, max(ln.mono for ln in batch) + 0.5)
        end = max(ln.mono for ln in lines) + 1.0
        for side in sides.values():
            side.send([], end + PACE)
        judges[pace] = judge
    assert_same(judges[0.0], judges[PACE], end + PACE)
