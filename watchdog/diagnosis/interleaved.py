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

:class:`InterleavedProgress` finds such blocks as the lines go by (only a block's first line and the
progress pending inside it are kept per stream); :func:`judge_offline
<neuron_watch.diagnosis.offline_reading.judge_offline>` reads the log again without that progress when
the first reading was calm.
"""

from __future__ import annotations

from typing import NamedTuple

from neuron_watch.diagnosis.errorblock import BlockFeed
from neuron_watch.events import LogLine, RankKey


class ForeignProgress(NamedTuple):
    """Progress of another process found inside an error block of one unnamed stream."""

    at: int  # the index (among the lines read) of the first line of the first such block
    block: LogLine  # that block's first line
    line: LogLine  # the first line of progress found inside it
    conventions: frozenset[str]  # the progress signatures found inside the stream's error blocks


class _Pending(NamedTuple):
    """The progress read while a block was open, before the stream's next other line says whether the
    block goes on: the first such line and the signatures of all (bounded: a set, not the lines)."""

    first: LogLine
    conventions: frozenset[str]


class InterleavedProgress:
    """Feed every line of the unnamed streams in order (:meth:`observe`); :attr:`found` holds, per stream,
    the progress found inside its error blocks."""

    def __init__(self) -> None:
        self.found: dict[RankKey, ForeignProgress] = {}
        self._feeds: dict[RankKey, BlockFeed] = {}
        self._opened: dict[RankKey, tuple[int, LogLine]] = {}  # each stream's open block: its first line
        self._pending: dict[RankKey, _Pending] = {}
        #: the streams with a block open now (empty: a plain line needs no reading, :meth:`observe_plain`)
        self.open: set[RankKey] = set()

    def observe_plain(self, at: int, line: LogLine) -> None:
        """Line ``at`` of the lines read, which no signature or form matched: read only inside an open block
        (a frame, a message's next line). A block's first line (a traceback's header, an exception, an error
        record) is a line the table or the forms read (1,475 of the corpus's 1,479), so a plain line outside a
        block is passed over without the block reader's patterns: most of a log's lines cost a lookup."""
        if line.key in self.open:
            self.observe(at, line, None)

    def observe(self, at: int, line: LogLine, progress: str | None) -> None:
        """Line ``at`` of the lines read, which a signature or a form matched (or any line: see
        :meth:`observe_plain`); ``progress``: the id of the progress signature it matched, if any."""
        key = line.key
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = BlockFeed()
        if progress is not None:
            if feed.open_at is not None:
                pending = self._pending.get(key)
                self._pending[key] = (_Pending(line, frozenset((progress,))) if pending is None
                                      else pending._replace(conventions=pending.conventions | {progress}))
            return
        if not line.text.strip():
            feed.feed(at, line.text)  # a blank line inside a block is the block's only if it goes on
            self._note_open(key, feed)
            return
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
            seen = self.found.get(key)
            self.found[key] = (ForeignProgress(start, first, pending.first, pending.conventions) if seen is None
                               else seen._replace(conventions=seen.conventions | pending.conventions))

    def _note_open(self, key: RankKey, feed: BlockFeed) -> None:
        if feed.open_at is None:
            self.open.discard(key)
        else:
            self.open.add(key)
