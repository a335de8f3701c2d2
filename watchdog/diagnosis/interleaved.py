"""Another process's progress inside a failure's lines: the sign that an unnamed stream holds two processes.

Pure: no I/O. Offline, a stream whose lines name no process (a pasted console, a job's combined output,
a launcher's and its workers' stdout) is read as one process, so a line of progress after an error
withdraws the error (the process went on from it). Where the stream is several processes, the progress
may be another's. One sign says so without any prefix: a line of progress *inside* an error block
(:mod:`neuron_watch.diagnosis.errorblock`: a traceback, a logger's record and the throwable it carries, a
C++ exception's ``what():``, glog's ``E``/``F`` records and their frames). A process prints its error
block in one go -- ``sys.excepthook``, ``traceback.print_exc``, ``Throwable.printStackTrace``,
libstdc++'s terminate handler each write every line of it before the program does anything else -- so a
step printed between two lines of one block is another process's step. Its *convention* (the progress
signature it matched: an HF Trainer dict, a Lightning bar, a Megatron iteration line) is then that other
process's, and that convention's progress after the block says nothing of the process that failed.

Open MPI's help messages (and PMIx's and PRRTE's, which share its code: opal/util/show_help.c renders the
message whole between two rules of 74 dashes, its ``dash_line``, and writes it in one call) are such a unit
too: ``It looks like orte_init failed for some reason``, ``A requested component was not found``, the
``plm_rsh_agent`` path not found. A step between a rule and the next rule at most :data:`MAX_BOX_LINES`
lines after it is another process's.

:class:`InterleavedProgress` finds such blocks as the lines go by (only a block's first line and the
progress pending inside it are kept per stream); :func:`judge_offline
<neuron_watch.diagnosis.offline_reading.judge_offline>` reads the log again without that progress when
the first reading was calm.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from neuron_watch.diagnosis.errorblock import BlockFeed
from neuron_watch.events import LogLine, RankKey

#: Open MPI's rule around a help message (opal/util/show_help.c ``dash_line``: 74 dashes)
_RULE = re.compile(r"-{74}\s*$")
#: how a plain line that may be a rule starts (a cheap test before the pattern)
RULE_START = "-" * 20
#: the most non-blank lines between two rules that are one help message (Open MPI's help texts are a few tens
#: of lines); a rule with no other within them is not a box's (a table's, a cut message's)
MAX_BOX_LINES = 60


class ForeignProgress(NamedTuple):
    """Progress of another process found inside an error block (or a help message) of one unnamed stream."""

    at: int  # the index (among the lines read) of the first line of the first such block or message
    block: LogLine  # that block's first line
    line: LogLine  # the first line of progress found inside it
    conventions: frozenset[str]  # the progress signatures found inside the stream's error blocks


class _Pending(NamedTuple):
    """The progress read while a block was open, before the stream's next other line says whether the
    block goes on: the first such line and the signatures of all (bounded: a set, not the lines)."""

    first: LogLine
    conventions: frozenset[str]


class _Box(NamedTuple):
    """An open help message: its first rule, the lines read in it, the progress read in it."""

    at: int
    rule: LogLine
    lines: int
    pending: _Pending | None


class InterleavedProgress:
    """Feed every line of the unnamed streams in order (:meth:`observe`); :attr:`found` holds, per stream,
    the progress found inside its error blocks."""

    def __init__(self) -> None:
        self.found: dict[RankKey, ForeignProgress] = {}
        self._feeds: dict[RankKey, BlockFeed] = {}
        self._opened: dict[RankKey, tuple[int, LogLine]] = {}  # each stream's open block: its first line
        self._pending: dict[RankKey, _Pending] = {}
        self._boxes: dict[RankKey, _Box] = {}  # each stream's open help message
        #: the streams with a block open now (empty: a plain line needs no reading, :meth:`observe_plain`)
        self.open: set[RankKey] = set()

    def observe_plain(self, at: int, line: LogLine) -> None:
        """Line ``at`` of the lines read, which no signature or form matched: read only inside an open block
        (a frame, a message's next line). A block's first line (a traceback's header, an exception, an error
        record) is a line the table or the forms read (1,475 of the corpus's 1,479), so a plain line outside a
        block is passed over without the block reader's patterns: most of a log's lines cost a lookup."""
        if line.key in self.open or line.text.startswith(RULE_START):
            self.observe(at, line, None)

    def observe(self, at: int, line: LogLine, progress: str | None) -> None:
        """Line ``at`` of the lines read, which a signature or a form matched (or any line: see
        :meth:`observe_plain`); ``progress``: the id of the progress signature it matched, if any."""
        key = line.key
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = BlockFeed()
        box = self._boxes.get(key)
        if progress is not None:
            if feed.open_at is not None:
                self._pending[key] = _pend(self._pending.get(key), line, progress)
            if box is not None:
                self._boxes[key] = box._replace(pending=_pend(box.pending, line, progress))
            return
        if not line.text.strip():
            feed.feed(at, line.text)  # a blank line inside a block is the block's only if it goes on
            self._note_open(key, feed)
            return
        self._box_line(key, at, line, box)
        before = feed.open_at
        joined = feed.feed(at, line.text)
        self._note_open(key, feed)
        pending = self._pending.pop(key, None)
        if joined is None:
            return
        if joined != before:
            self._opened[key] = (at, line)
            return
        if pending is not None:
            # the block went on after the progress: the progress was printed inside it, by another process
            start, first = self._opened[key]
            self._found(key, start, first, pending)

    def _box_line(self, key: RankKey, at: int, line: LogLine, box: _Box | None) -> None:
        """A non-blank line other than progress, for the stream's help message: a rule opens or closes one."""
        if _RULE.match(line.text) is None:
            if box is not None:
                self._boxes[key] = box._replace(lines=box.lines + 1)
                if box.lines >= MAX_BOX_LINES:
                    del self._boxes[key]  # no rule closed it in time: not a help message
            return
        if box is None or box.lines == 0:
            # a rule with nothing between it and the last: a message's closing rule right before the next's
            # opening one opens that next one
            self._boxes[key] = _Box(at, line, 0, None)
            return
        del self._boxes[key]
        if box.pending is not None:
            self._found(key, box.at, box.rule, box.pending)

    def _found(self, key: RankKey, start: int, first: LogLine, pending: _Pending) -> None:
        seen = self.found.get(key)
        self.found[key] = (ForeignProgress(start, first, pending.first, pending.conventions) if seen is None
                           else seen._replace(conventions=seen.conventions | pending.conventions))

    def _note_open(self, key: RankKey, feed: BlockFeed) -> None:
        if feed.open_at is None and key not in self._boxes:
            self.open.discard(key)
        else:
            self.open.add(key)


def _pend(pending: _Pending | None, line: LogLine, progress: str) -> _Pending:
    """``pending`` with the progress ``line`` (of the signature ``progress``) read after it."""
    if pending is None:
        return _Pending(line, frozenset((progress,)))
    return pending._replace(conventions=pending.conventions | {progress})
