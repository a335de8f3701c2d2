"""A node's lines on their way to the coordinator: queued, cut when over-long, classified once per
batch and packed into ``lines`` bodies that stay under the frame limit.

Each ``lines`` body carries, per rank, the rank's lines joined into one text, and the lines this
node's knowledge base matched: the node's own CPU classifies its lines
(:func:`neuron_watch.diagnosis.classify.classify_batch`, the one classification of a batch), so the
coordinator's work is per batch and rank, not per line. A rank that printed nothing but steps (most
ranks of a training job, most of the time) goes as its text and one progress row, its latest step:
no match, no second copy of the line. With a rank's failure go the lines around it, its error block
(:mod:`neuron_watch.node.error_context`). The lines and their matches become the body's rows in
:func:`neuron_watch.wire.protocol.lines_body`. Without a knowledge base the batch goes unclassified
and the coordinator's judge classifies it.

An urgent line (one that may make a verdict: :mod:`neuron_watch.node.urgent`) does not wait for its
batch's age: its batch is due :data:`URGENT_SETTLE` after it, with every line read before it and
the rest of its burst, unless the node's last batch that held an urgent line was taken less than a
batch age ago (then it goes at its age, as any batch).
So a rank printing a flood of tracebacks sends no more messages than steady lines do (one batch per
batch age), and a lone failure line after steady ones goes at the node's next loop turn. At 1,024
nodes the batch age is the largest stage of a hang's verdict (docs/multinode.md).

Size: a line longer than :data:`~neuron_watch.wire.protocol.MAX_LINE_BYTES` is cut, marked and
counted (``truncated_lines``), and a batch whose text would exceed
:data:`~neuron_watch.wire.protocol.MAX_BODY_BYTES` goes as several bodies (``split_batches``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

from neuron_watch.diagnosis.classify import KnowledgeBase, classify_batch, kb_fingerprint
from neuron_watch.events import LogLine
from neuron_watch.node.error_context import ErrorContext
from neuron_watch.node.link_settings import LinkCounters
from neuron_watch.node.progress_pace import ProgressPace
from neuron_watch.node.urgent import urgent_line_test
from neuron_watch.wire.protocol import (
    MAX_BODY_BYTES,
    MAX_LINE_BYTES,
    Lines,
    cut_line,
    lines_body,
    one_line_each,
    utf8_sizes,
)

#: An urgent line's batch waits this long for the rest of the failure's report: a traceback or a wrapped
#: message is printed in one burst, and the lines after the failing one (the cause, the end of a boxed
#: message: ray-39128 in tests/unit/test_live_crash_reading.py) read with it go in the same batch.
URGENT_SETTLE = 0.1
#: Weight of one line in a lines body beyond its text: the "\n" that joins it, and a match row
#: (a matched line travels twice: in its rank's text and as the match's text).
_LINE_OVERHEAD = 64
#: Lines up to this many characters cannot exceed MAX_LINE_BYTES (4 bytes a character at most).
_CUT_CHECK = MAX_LINE_BYTES // 4


class LineBatches:
    """The lines waiting for their batch, and the knowledge base that classifies them. No I/O."""

    def __init__(self, batch_lines: int, counters: LinkCounters, kb: KnowledgeBase | None = None) -> None:
        self.batch_lines = batch_lines
        #: the link's counters: cut lines and split batches are counted with the rest of its losses
        self.counters = counters
        self.pending: list[LogLine] = []
        #: when the oldest pending line was read (None: nothing pending)
        self.since: float | None = None
        #: when the last batch was taken: the next is never due sooner than the batch age after it
        self.taken_at = -math.inf
        self.kb: KnowledgeBase | None = None
        self.kb_fp = 0
        self.progress_lines = 0  # progress lines this node's knowledge base matched so far
        #: the lines around a failure that go with its batch (the error block the judge reads its cause from)
        self.context = ErrorContext()
        #: each rank's progress as the judge has it, and the rows held for it (schema 10)
        self.pace = ProgressPace()
        #: whether a line may make a verdict (node/urgent.py; None without a knowledge base)
        self._urgent_line: Callable[[str], bool] | None = None
        #: when the first urgent line pending was read (None: none pending)
        self.urgent_since: float | None = None
        #: when the last batch holding an urgent line was taken: the next goes early only a batch age after
        self.urgent_taken_at = -math.inf
        if kb is not None:
            self.set_knowledge_base(kb)

    def set_knowledge_base(self, kb: KnowledgeBase | None) -> None:
        """Classify batches with ``kb`` from now on (the coordinator's judge must use the same table
        and ``--progress-regex``: it checks the fingerprint and classifies itself otherwise)."""
        self.kb = kb
        self.kb_fp = 0 if kb is None else kb_fingerprint(kb)
        self._urgent_line = urgent_line_test(kb)

    def add(self, line: LogLine) -> bool:
        """Queue one line; a line longer than MAX_LINE_BYTES is cut (marked in its text) and counted.
        Returns whether the batch is full (take it now)."""
        if len(line.text) > _CUT_CHECK:
            text, cut = cut_line(line.text)
            if cut:
                self.counters.truncated_lines += 1
                self.counters.truncated_bytes += cut
                line = line._replace(text=text)
        if not self.pending:
            self.since = line.mono
        if self.urgent_since is None and self._urgent_line is not None and self._urgent_line(line.text):
            self.urgent_since = line.mono
        self.pending.append(line)
        return len(self.pending) >= self.batch_lines

    def written_since(self, earliest: float) -> None:
        """The pending lines were written no sooner than ``earliest`` (a read of files that are read
        only every batch age: what it finds waited there since the read before): the batch's age
        counts from then, so that a line written to a rank's file goes within one batch age, not
        two; never from before the last batch was taken (batches go at most once a batch age: the
        rate the job's size allows, :func:`~neuron_watch.wire.protocol.batch_age_at`)."""
        if self.since is not None:
            self.since = max(self.taken_at, min(self.since, earliest))

    def due(self, now: float, age: float, pace: float = 0.0) -> bool:
        """Whether the oldest pending line is ``age`` seconds old, an urgent line is pending and the last
        batch holding one was taken ``age`` ago or more, or a held progress row is due (its rank's ``pace``
        interval has passed: :class:`~neuron_watch.node.progress_pace.ProgressPace`)."""
        return ((self.since is not None and now - self.since >= age)
                or (self.urgent_since is not None
                    and now >= max(self.urgent_since + URGENT_SETTLE, self.urgent_taken_at + age))
                or (self.kb is not None and self.pace.due(now, pace)))

    def next_due(self, age: float, pace: float = 0.0) -> float | None:
        """When :meth:`due` next turns true with nothing added (None: nothing pending or held)."""
        dues = [] if self.since is None else [self.since + age]
        if self.urgent_since is not None:
            dues.append(max(self.urgent_since + URGENT_SETTLE, self.urgent_taken_at + age))
        if self.kb is not None:
            held = self.pace.next_due(pace)
            if held is not None:
                dues.append(held)
        return min(dues) if dues else None

    def take(self, now: float, wall: float, pace: float = 0.0, everything: bool = False) -> Iterator[Lines]:
        """The pending lines as ``lines`` bodies (joined per rank, classified, the judge's share paced at
        ``pace`` seconds; ``everything``: every held row goes now), one at a time: a flood split in
        several bodies is never held whole twice. The batch is empty once it starts. With no line
        pending, the held rows that are due go alone."""
        if not self.pending:
            if self.kb is not None and (everything or self.pace.due(now, pace)):
                body = self.batch((), now, wall, pace, everything)
                if body.held:
                    yield body
            return
        pending = self.pending
        self.pending = []
        self.since = None
        self.taken_at = now
        if self.urgent_since is not None:
            self.urgent_since = None
            self.urgent_taken_at = now
        for part in split_by_size(pending):
            yield self.batch(part, now, wall, pace, everything)
            if part is not pending:
                self.counters.split_batches += 1

    def batch(self, lines: Sequence[LogLine], now: float, wall: float, pace: float = 0.0,
              everything: bool = False) -> Lines:
        """The ``lines`` body of ``lines`` (this node's, in read order), classified with the knowledge
        base when there is one (:func:`~neuron_watch.diagnosis.classify.classify_batch`), the judge's
        share paced at ``pace`` seconds (:class:`~neuron_watch.node.progress_pace.ProgressPace`)."""
        lines = one_line_each(lines)
        if self.kb is None:
            return lines_body(lines, now, wall)
        found = classify_batch(self.kb, lines)
        self.progress_lines += found.progress_lines
        context = self.context
        left_out = context.left_out
        runs = context.runs(self.kb, lines, found.matches)
        self.counters.block_lines_left_out += context.left_out - left_out
        paced = self.pace.take(lines, found.matches, found.progress, now, pace, everything)
        return lines_body(lines, now, wall, paced.matches, paced.progress, self.kb_fp, runs, paced.judged,
                          paced.held, paced.counts)


def split_by_size(pending: list[LogLine]) -> list[list[LogLine]]:
    """``pending`` in consecutive parts whose lines body stays under MAX_BODY_BYTES (``[pending]``
    itself when it surely does: the usual case, decided on character counts alone)."""
    texts = [ln.text for ln in pending]
    if 8 * sum(map(len, texts)) + _LINE_OVERHEAD * len(texts) <= MAX_BODY_BYTES:
        return [pending]
    parts: list[list[LogLine]] = [[]]
    weight = 0
    for line, size in zip(pending, utf8_sizes(texts), strict=True):
        w = 2 * size + _LINE_OVERHEAD  # a matched line travels twice
        if parts[-1] and weight + w > MAX_BODY_BYTES:
            parts.append([])
            weight = 0
        parts[-1].append(line)
        weight += w
    return parts
