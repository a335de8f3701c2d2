"""Each rank's progress kept where the rank is: of a classified batch, what the judge must see now.

A training rank prints a step line every step; on 1,024 nodes x 64 ranks that is 65,536 progress rows
a second (or more), each one the coordinator's judging thread took one by one, though a row that only
moves a rank's last step a second on changes no verdict. The node keeps each rank's newest progress
and sends the judge what changed:

* **at once**: every match the batch keeps (a compile, a save begun or ended, a wait, an error, a
  step that raises the batch's step: :func:`~neuron_watch.diagnosis.classify.compact_matches`), a
  rank's first lines, lines that are not progress, the rank's first progress and its first progress
  after any other match (a compile, save or wait ended), a step lower than the rank's last (a loop
  beginning again), the node's own lines (rank -1: a checkpoint that appeared), and everything held
  before an exit or a status (:meth:`ProgressPace.take`, ``everything``);
* **paced**: a rank whose lines in the batch were all steady progress (one row,
  :func:`~neuron_watch.diagnosis.classify.coalesce_progress`) goes to the judge at most once per
  ``pace`` seconds (:func:`~neuron_watch.wire.protocol.progress_pace_at`: 0 up to 256 nodes, 3 s at
  1,024); meanwhile the node holds its newest row, and sends it, with the count of progress lines it
  stands for, when the pace interval has passed (in the rank's next batch, or alone once the rank is
  quiet: :meth:`ProgressPace.due`), or before the rank's next line of another kind (as that rank's
  first match: it is older than every line of the batch).

So the judge always gets each rank's newest progress line, with its real time, at most ``pace`` later
than its batch: a hang verdict (after the hang timeout, far longer) names the same last progress of
every rank and the same culprit; the hang clock already waits that much longer at that size
(:func:`~neuron_watch.wire.protocol.delivery_slack_at`). The rows it does not get are the ones a later
row of the same rank supersedes, as within a batch. The ranks' lines still all go to the job's log
(``merged.log``, the tails): only the judge's share is paced (``Lines.judged``, ``Lines.held``).

Pure: no I/O, ``now`` passed in.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from neuron_watch.events import LogLine

_MONO = operator.attrgetter("mono")


@dataclass(slots=True)
class _RankPace:
    """What the node knows of one rank's progress, as the judge has it."""

    forwarded: float = -math.inf  # when the judge last got this rank's progress (a row or a match)
    #: the rank's last word the judge got was progress: its next row may wait (False: a compile, a
    #: wait, an error, plain lines before any progress; its next progress goes at once)
    steady: bool = False
    step: int | None = None  # the newest step the node saw of it
    held: LogLine | None = None  # its newest progress row, not yet sent (its newest line)
    count: int = 0  # the progress lines ``held`` stands for
    #: its newest progress the judge got: a new coordinator (its predecessor crashed) gets it again
    sent: LogLine | None = None


class PacedBatch(NamedTuple):
    """What of a batch goes to the judge (:meth:`ProgressPace.take`). ``matches``: the batch's, after the
    held rows of their ranks (older than every line of the batch); ``progress``: the rows due now;
    ``counts``: the progress lines each row stands for, by rank; ``judged``: the ranks the judge takes
    (None: every rank of the batch); ``held``: the held rows due of ranks with no line in the batch,
    each with its count."""

    matches: list[LogLine]
    progress: list[LogLine]
    counts: dict[int, int]
    judged: list[int] | None
    held: list[tuple[LogLine, int]]


class ProgressPace:
    """Each rank's progress as this node last sent it to the judge, and the rows it holds. No I/O."""

    def __init__(self) -> None:
        self._ranks: dict[int, _RankPace] = {}
        #: the oldest ``forwarded`` of a rank with a held row (inf: none held): when a row comes due
        self._oldest = math.inf

    def reset(self) -> None:
        """A judge that holds none of what was sent (a new coordinator session): everything held is
        due at once, and every rank's next progress goes at once. A rank with nothing held holds its
        newest progress the old judge got, again: the new judge learns every rank's last progress and
        its real time (a coordinator restarted after its predecessor crashed judges a hang by the
        hang timeout from it, not by the startup timeout of a judge that never saw a step). Nothing
        newer can reach the judge before it: what the link resends is older or the same line."""
        for st in self._ranks.values():
            st.forwarded, st.steady = -math.inf, False
            # (a held row carries a step; the node's own stream, rank -1, is never held)
            if st.held is None and st.sent is not None and st.sent.step is not None and st.sent.key.rank >= 0:
                st.held, st.count = st.sent, 1
        self._oldest = -math.inf if any(st.held is not None for st in self._ranks.values()) else math.inf

    def clear(self) -> None:
        """A new generation: its ranks start anew (the old one's rows went before its stop)."""
        self._ranks.clear()
        self._oldest = math.inf

    @property
    def holding(self) -> int:
        """How many ranks' rows are held."""
        return sum(st.held is not None for st in self._ranks.values())

    def due(self, now: float, pace: float) -> bool:
        """Whether a held row is due (its rank's pace interval has passed)."""
        return now - self._oldest >= pace

    def next_due(self, pace: float) -> float | None:
        """When :meth:`due` next turns true (None: no row is held)."""
        return None if self._oldest == math.inf else self._oldest + pace

    def take(self, lines: Sequence[LogLine], matches: Sequence[LogLine], progress: Sequence[LogLine], now: float,
             pace: float, everything: bool = False) -> PacedBatch:
        """What of one classified batch (``lines`` in read order, its ``matches`` and its ``progress`` rows:
        :func:`~neuron_watch.diagnosis.classify.classify_batch`) the judge must see at ``now``, and what
        held rows are due, with rows paced at ``pace`` seconds (``everything``: every held row goes now)."""
        n_lines: dict[int, int] = {}
        for ln in lines:
            rank = ln.key.rank
            n_lines[rank] = n_lines.get(rank, 0) + 1
        by_rank: dict[int, list[LogLine]] = {}
        for m in matches:
            by_rank.setdefault(m.key.rank, []).append(m)
        rows = {p.key.rank: p for p in progress}
        ranks, lead, due_rows, counts, judged = self._ranks, [], [], {}, []
        for rank, n in n_lines.items():
            st = ranks.get(rank)
            if st is None:
                st = ranks[rank] = _RankPace()
            own, row = by_rank.get(rank), rows.get(rank)
            # (the node's own stream, rank -1, is never held: its progress is a checkpoint that appeared)
            if own is None and row is not None and rank >= 0 and not (
                    everything or not st.steady or st.step is None or row.step is None or row.step < st.step
                    or now - st.forwarded >= pace):
                # steady progress within the pace interval: held (it supersedes the row held before)
                st.held, st.count, st.step = row, st.count + n, row.step
                continue
            judged.append(rank)
            if st.held is not None and (own is not None or row is None):
                lead.append(st.held)  # before the batch's lines (it is older than all of them), as a match
                st.sent = st.held
            if row is not None:  # (a held row it supersedes, as within a batch, is counted in it)
                due_rows.append(row)
                counts[rank] = n - (0 if own is None else len(own)) + (0 if own is not None else st.count)
            st.held, st.count = None, 0
            steps = [m.step for m in own or () if m.step is not None]
            if row is not None:
                st.forwarded, st.steady, st.step = now, all(m.step is not None for m in own or ()), row.step
                st.sent = row
            elif own is not None:
                st.steady = len(steps) == len(own)  # progress alone (a step that raised the batch's)
                if steps:
                    st.forwarded, st.step = now, steps[-1]
                    st.sent = next(m for m in reversed(own) if m.step is not None)
            # (plain lines alone change nothing of its progress: a rank never heard progress from stays unsteady)
        held: list[tuple[LogLine, int]] = []
        oldest = math.inf
        for rank, st in ranks.items():
            if st.held is None or rank in n_lines:
                continue
            if everything or now - st.forwarded >= pace:
                held.append((st.held, st.count))
                st.sent, st.held, st.count, st.forwarded = st.held, None, 0, now
            else:
                oldest = min(oldest, st.forwarded)
        for rank in n_lines:
            st = ranks[rank]
            if st.held is not None:
                oldest = min(oldest, st.forwarded)
        self._oldest = oldest
        out = [*sorted(lead, key=_MONO), *matches] if lead else list(matches)
        return PacedBatch(out, due_rows, counts, None if len(judged) == len(n_lines) else judged, held)
