"""The lines around a failure that a node sends with its batch: the error block the judge reads the cause from.

No I/O. The coordinator's judge sees only the lines a signature matched; a failure's cause is often in a
line nothing matches, or that matches only as "an error": the root of a Python exception chain above the
wrapper that ended the process, a Java ``Caused by:``, a C++ exception's ``what():``, an RPC's status under
its exception, the frames that say the exception was raised setting the program up. Offline, ``diagnose``
reads the error block (:mod:`neuron_watch.diagnosis.errorblock`) from the rank's log. Live, the node that
read the rank's output is the one that holds those lines: with a batch in which a rank's line reports a
failure (a match whose effect is ``fatal`` or ``unexplained``), it sends the run of that rank's lines from
the start of the block around it (looking back into the previous batch) to the end of the rank's lines in
the batch, and, while that block is still open at the batch's end, the lines that go on with it in the
next batches (:class:`ErrorContext`). The judge keeps the runs (diagnosis/blockcontext.py).

Bounds (per rank and failure, and per body): a run holds at most :data:`RUN_LINES` lines (a longer one
keeps its first and last halves: a chain's root and its last wrapper, the frames between them are left
out), at most :data:`LOOK_BACK` of them before the failing line; a body carries at most
:data:`BODY_CHARS` characters of runs (a run that does not fit is left out whole: its lines are the
judge's evidence, never cut). What a bound leaves out is counted (:attr:`ErrorContext.left_out`, the
link's ``block_lines_left_out``); the rank's lines themselves always go, whole, in the batch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from neuron_watch.diagnosis.classify import Effect, KnowledgeBase
from neuron_watch.diagnosis.errorblock import blocks
from neuron_watch.diagnosis.exctaxonomy import message_end
from neuron_watch.events import LogLine

#: lines of a run at most (a block holds at most errorblock.MAX_BLOCK; the head and tail of a chain decide)
RUN_LINES = 200
#: lines before the failing line a run may start at (the root of a chain is printed before its wrapper)
LOOK_BACK = 150
#: lines after the failing one read at most to find where its report ends (a traceback of distinct frames
#: is hundreds of lines; Python folds a recursion's repeats): what the node's reading costs stays bounded
READ_AFTER = 2000
#: characters of runs one body carries at most (the runs of a few failing ranks; a failure of every rank
#: of a node at once sends the first ranks' runs, the others' are counted as left out)
BODY_CHARS = 1 << 20

_FAILURE = (Effect.FATAL, Effect.UNEXPLAINED)


class ErrorContext:
    """Which runs of lines go with each batch (:meth:`runs`); keeps the previous batch and the open blocks."""

    def __init__(self) -> None:
        self.previous: Sequence[LogLine] = ()
        #: rank -> (the run's last lines sent, lines sent so far) while its block is open at a batch's end
        self.open: dict[int, tuple[list[LogLine], int]] = {}
        self.left_out = 0  # lines a bound kept out of a run (counted, never silent)

    def runs(self, kb: KnowledgeBase, lines: Sequence[LogLine], matches: Sequence[LogLine]) -> list[list[LogLine]]:
        """The runs to send with the batch ``lines`` (one node's, in read order) whose matches are ``matches``
        (classified with ``kb``): one per rank that has a failure in it or whose block went on from the last
        batch. Remembers ``lines`` as the previous batch."""
        by_id = kb.by_id
        failing: dict[int, LogLine] = {}
        for m in matches:
            sig = by_id.get(m.signature)
            if sig is not None and sig.effect in _FAILURE and m.key.rank not in failing:
                failing[m.key.rank] = m
        previous, self.previous = self.previous, lines
        if not failing and not self.open:
            return []
        wanted = set(failing) | set(self.open)
        mine = _by_rank(lines, wanted)
        before = _by_rank(previous, failing.keys())
        out: list[list[LogLine]] = []
        budget = BODY_CHARS
        for rank in sorted(wanted):
            new = mine[rank]
            if not new:
                continue  # nothing of this rank in the batch: an open block waits for its next lines
            tail: list[LogLine] = []
            if rank in failing:
                run, sent = self._around(rank, before[rank], new, failing[rank]), 0
            else:
                tail, sent = self.open.pop(rank)
                run = self._going_on(tail, new)
            run = self._bounded(run, RUN_LINES - sent)
            size = sum(len(ln.text) for ln in run)
            if size > budget:
                self.left_out += len(run)
                continue
            budget -= size
            out.append(run)
            self._note_open(rank, [*tail, *run], sent + len(run))
        return out

    def _around(self, rank: int, previous: list[LogLine], new: list[LogLine], failure: LogLine) -> list[LogLine]:
        """The rank's lines of the report its first failing line is in: from the start of its block (looked
        for in its ``previous`` batch's lines too) to the end of the blocks that follow it at once."""
        self.open.pop(rank, None)
        at = next((i for i, ln in enumerate(new) if ln.lineno == failure.lineno and ln.text == failure.text), 0)
        source = new[at].source
        before = [ln for ln in previous if ln.source == source][-LOOK_BACK:]
        window = [*before, *[ln for ln in new[:at + READ_AFTER] if ln.source == source]]
        at = len(before) + sum(1 for ln in new[:at] if ln.source == source)
        start, end = _report(window, at)
        # an exception's message wrapped over the lines after it (a box-drawn traceback) is read whole
        # (exctaxonomy.exception_message), whether or not the block reads on that far
        end = max(end, message_end([ln.text for ln in window], at))
        return window[max(start, at - LOOK_BACK):end + 1]

    @staticmethod
    def _going_on(tail: list[LogLine], new: list[LogLine]) -> list[LogLine]:
        """The rank's ``new`` lines that go on with the report whose lines sent last are ``tail``."""
        window = [*tail, *[ln for ln in new[:READ_AFTER] if ln.source == tail[-1].source]]
        _start, end = _report(window, len(tail) - 1)
        return window[len(tail):end + 1]

    def _bounded(self, run: list[LogLine], room: int) -> list[LogLine]:
        """``run`` within ``room`` lines: its first and last halves."""
        if room <= 0:
            self.left_out += len(run)
            return []
        if len(run) > room:
            self.left_out += len(run) - room
            run = run[:room // 2] + run[len(run) - (room - room // 2):]
        return run

    def _note_open(self, rank: int, run: list[LogLine], sent: int) -> None:
        """Keep ``rank``'s block open when ``run`` (the lines sent last, after those its block was read on
        with) ends inside a block, blank lines aside: the next batch's lines of the rank may go on with it."""
        if not run or sent >= RUN_LINES:
            return
        texts = [ln.text for ln in run]
        found = blocks(texts)
        last = len(texts) - 1
        while last >= 0 and not texts[last].strip():
            last -= 1
        if found and found[-1].end >= last:
            # the block's lines (at most LOOK_BACK of them) are what the next lines are read on with
            self.open[rank] = (run[-max(1, min(len(run) - found[-1].start, LOOK_BACK)):], sent)


def _by_rank(lines: Sequence[LogLine], ranks: Collection[int]) -> dict[int, list[LogLine]]:
    """The lines of each of ``ranks`` among ``lines``, in order (one pass)."""
    mine: dict[int, list[LogLine]] = {r: [] for r in ranks}
    for ln in lines:
        got = mine.get(ln.key.rank)
        if got is not None:
            got.append(ln)
    return mine


def _report(lines: Sequence[LogLine], at: int) -> tuple[int, int]:
    """(first, last) index of the report line ``at`` of ``lines`` is in, as errorblock.cause_from reads it: the
    block that holds the line (or that it comes right after), and each block that follows at once (blank
    lines aside), each with the line right after it (a process's end reported under its report). A line of
    other output between two blocks ends the report: what the process printed after it went on."""
    texts = [ln.text for ln in lines]
    start = end = at
    for block in blocks(texts):
        if block.end + 1 < at:
            continue
        if any(texts[i].strip() for i in range(end + 1, block.start)):
            break
        start = min(start, block.start)
        end = min(max(end, block.end + 1), len(texts) - 1)
    return start, end
