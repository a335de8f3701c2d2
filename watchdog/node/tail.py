"""Tail the per-rank output files torchrun writes (``--log-dir D --redirects 3``).

torchrun keeps one ``stdout.log`` and ``stderr.log`` per local rank under
``D/<run_id>_<random>/attempt_<n>/<local_rank>/``. :class:`RankStreams` reads what is new in
each, splits it into lines, writes every line to ``<gen-dir>/rank-<R>.log`` and hands each line on
as its :class:`LogLine` (the one record of a line, the node's name on it). A partial line made only
of dots is passed on at once: neuronx-cc prints its progress dots without a newline, and they are a
compile heartbeat.
A line redrawn with ``\\r`` (tqdm, Rich, Hugging Face, Lightning bars, which end a line only at
the end of an epoch) is passed on as it moves: its newest state once per poll; the rank log and
the console get a redraw every :data:`REDRAW_LOG_EVERY` seconds and the line's final state.

No output is lost uncounted: a file's last read (``final``, or ``to_eof``
when a rank exited) goes to its end; a rank that prints faster than the watchdog reads has its
backlog beyond :data:`BACKLOG_MAX` skipped down to the newest :data:`BACKLOG_KEEP` bytes (the
watchdog stays current, and a process's last lines are always read), and what was skipped is
counted, line by line, and said in the rank's log, the merged log and the agent's drop count.
The rank logs are :class:`~neuron_watch.iofaults.AppendFile` s: a full disk degrades them, never
the job.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from neuron_watch.diagnosis.envelopes import EnvelopeReader
from neuron_watch.diagnosis.logtext import ERROR_LIKE, logical_lines, split_rank_prefix, strip_ansi
from neuron_watch.events import LogLine, RankKey
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.wire.protocol import RANK_LINE_BYTES

log = logging.getLogger(__name__)

#: Bytes read from one file per poll; bounds memory when a rank floods its output.
MAX_READ = 4 << 20
#: A line is kept whole up to this many bytes; a longer one is cut: its first MAX_PARTIAL bytes are passed
#: on at once, marked (:func:`cut_note`), the rest skipped as it comes, never held, and counted
#: (``cut_lines``, ``cut_bytes``). A rank printing a 10 MB tensor costs a megabyte, once, not ten.
MAX_PARTIAL = RANK_LINE_BYTES
#: Bytes read from all the files of one node in one poll (the files take turns): memory and the loop's
#: turn stay bounded per node however many ranks print long lines at once.
NODE_READ_BUDGET = 16 << 20
#: Unread bytes of one file beyond which the backlog is skipped (counted) down to BACKLOG_KEEP: a rank that
#: floods its output must not leave the judge minutes behind.
BACKLOG_MAX = 32 << 20
#: The newest bytes of a skipped backlog that are still read (a process's last lines are its root cause).
BACKLOG_KEEP = 4 << 20
#: Seconds between looks for new rank files (torchrun creates them all at once when workers start).
DISCOVER_EVERY = 1.0
#: Seconds between redraws of a bar written to a rank log and the console (the judge gets the newest
#: every poll; a reader wants the bar moving, not ten copies a second; its final state is always written).
REDRAW_LOG_EVERY = 10.0

#: The rank of lines whose global rank could not be learned (RankKey's "unknown").
UNATTRIBUTED = -1

_PATH = re.compile(r"attempt_(\d+)/(\d+)/(stdout|stderr)\.log$")


@dataclass(frozen=True)
class Record:
    """One record of a rank's output: a line, or the newest state of a line redrawn with ``\\r``.

    ``text`` is what the terminal would show: for a line holding ``\\r`` redraws, its last
    non-blank segment (what :func:`~neuron_watch.diagnosis.logtext.logical_lines` keeps offline).
    ``redraw``: an intermediate state of a line still being redrawn (a tqdm/Rich/Lightning bar);
    at most one per file and poll, the newest. ``seen``: a line whose final state the reader
    already got as a redraw (write it to the rank log; do not judge it twice).
    """

    text: str
    redraw: bool = False
    seen: bool = False


def _blank(seg: bytes) -> bool:
    """A segment that shows nothing (spaces, or only terminal escapes: tqdm's clearing writes)."""
    s = seg.strip()
    return not s or (b"\x1b" in s and not strip_ansi(s.decode("utf-8", "replace")).strip())


def _last_nonblank(body: bytes) -> tuple[bytes | None, bool]:
    """The last non-blank ``\\r`` segment of ``body``, and whether it is the first segment."""
    end = len(body)
    while True:
        cr = body.rfind(b"\r", 0, end)
        seg = body[cr + 1 : end]
        if not _blank(seg):
            return seg, cr < 0
        if cr < 0:
            return None, False
        end = cr


def _text(seg: bytes) -> str:
    return seg.decode("utf-8", "replace")


def cut_note(path: str) -> str:
    """What ends a line cut at :data:`MAX_PARTIAL` bytes (in the rank log, the merged log, the judge's copy)."""
    return (f" [neuron-watch: this line is longer than {MAX_PARTIAL} bytes: cut here, the rest skipped and "
            f"counted; all of it is in {path}]")


class FileTail:
    """Reads what was appended to one file since the last call, as :class:`Record` s.

    A line ends at ``\\n``. Inside a line, ``\\r`` starts a redraw (tqdm writes ``"\\r" + bar``
    and a newline only when the bar closes, which may be an epoch later): each call hands out
    the newest non-blank state of such a line once (one record however many redraws were
    read), and the line's final state when its ``\\n`` comes. Work per call is linear in the
    bytes read, and memory holds one unfinished segment plus the newest finished one.

    The file stays open between calls (one ``pread`` per call: polling 64 rank files 50 times a
    second costs ~0.3% of a core this way, ~3% when each call opens the file); :meth:`close` it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""  # the unfinished segment of the current line (plus a "\r" held back)
        self.bytes_read = 0
        self._fd: int | None = None
        self._cr = False  # the current line has been redrawn (held a "\r")
        self._last: bytes | None = None  # its newest finished non-blank segment
        self._last_sent = False  # ... already handed out as a redraw
        self._shown = -1  # length of the unfinished segment handed out as a redraw (-1: none)
        self.behind = False  # the last read filled MAX_READ: there is probably more
        self.skipped_lines = 0  # lines of a flood not read (counted: see _skip_backlog)
        self.skipped_bytes = 0
        self._cut_counted = False  # a skip ended inside the current line and counted it already
        self._cutting = False  # inside a line longer than MAX_PARTIAL, past its kept head: skipping to its end
        self.cut_lines = 0  # lines longer than MAX_PARTIAL, cut (see MAX_PARTIAL)
        self.cut_bytes = 0  # their bytes not kept

    def read_lines(self, final: bool = False, to_eof: bool = False) -> list[str]:
        """The texts of :meth:`read_records` the reader has not seen yet."""
        return [r.text for r in self.read_records(final, to_eof) if not r.seen]

    def read_records(self, final: bool = False, to_eof: bool = False, limit: int = MAX_READ) -> list[Record]:
        """New records since the last call: up to ``limit`` bytes (at most :data:`MAX_READ`), or to the
        end of the file with ``to_eof`` or ``final`` (``final``: the file is complete; flush its last
        line). A backlog beyond :data:`BACKLOG_MAX` is skipped first (a record says how many lines)."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return []
        out: list[Record] = []
        while True:
            if self.behind or final or to_eof:
                self._skip_backlog(out)
            want = MAX_READ if (final or to_eof) else max(1, min(limit, MAX_READ))
            data = os.pread(self._fd, want, self.offset)
            self.behind = len(data) == want
            more = self.behind and (final or to_eof)
            self._consume(data, final and not more, out)
            if not more:
                return out

    def _skip_backlog(self, out: list[Record]) -> None:
        """Skip what lies beyond BACKLOG_MAX unread bytes, to the first line start of the newest
        BACKLOG_KEEP bytes; count its lines (reading it, in MAX_READ chunks: no line uncounted)."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size - self.offset <= BACKLOG_MAX:
            return
        start, target = self.offset, size - BACKLOG_KEEP
        # Lines counted: each one ending in the skipped bytes, and the one the skip ends inside (each
        # line once, however many skips it takes to pass a 200 MB line).
        lines = 1 - self._cut_counted
        pos = start
        while pos < target:
            chunk = os.pread(self._fd, min(MAX_READ, target - pos), pos)
            if not chunk:
                break
            lines += chunk.count(b"\n")
            pos += len(chunk)
        head = os.pread(self._fd, BACKLOG_KEEP, pos)
        nl = head.find(b"\n")
        self._cut_counted = nl < 0
        if nl >= 0:  # resume at a line start
            pos += nl + 1
        self.offset = pos
        self.skipped_lines += lines
        self.skipped_bytes += pos - start + len(self.partial)
        # the current line's state is gone with its bytes
        self.partial, self._cr, self._last, self._last_sent, self._shown = b"", False, None, False, -1
        # a skip that ends inside a line leaves the rest of it to skip too (counted already: never
        # passed on as a line of its own, nor as pieces)
        self._cutting = nl < 0
        what = f"{lines} line(s)" if lines else "more of one long line"
        out.append(Record(f"neuron-watch: {what} ({pos - start} bytes) of this output skipped unread: written "
                          f"faster than the watchdog reads; all of it is in {self.path}"))

    def _consume(self, data: bytes, final: bool, out: list[Record]) -> None:
        """Split ``data`` (the bytes after the last read) into records."""
        self.offset += len(data)
        self.bytes_read += len(data)
        if self._cutting:  # the rest of an over-long line: counted, not kept
            nl = data.find(b"\n")
            skip = len(data) if nl < 0 else nl + 1
            if not self._cut_counted:  # (a line a backlog skip ended inside is counted as skipped)
                self.cut_bytes += skip - (nl >= 0)
            data = data[skip:]
            if nl < 0:
                return
            self._cutting = self._cut_counted = False
        buf = self.partial + data
        pos = 0
        while (nl := buf.find(b"\n", pos)) >= 0:
            if nl - pos > MAX_PARTIAL:
                self._cut(buf[pos : pos + MAX_PARTIAL], nl - pos - MAX_PARTIAL, out)
            else:
                self._finish(buf[pos:nl], out)
            pos = nl + 1
        rest = buf[pos:]
        hold = b""
        if rest.endswith(b"\r") and not final:
            rest, hold = rest[:-1], b"\r"  # maybe the first half of "\r\n": decide when more comes
        cr = rest.rfind(b"\r")
        if cr >= 0:
            self._cr = True
            seg, first = _last_nonblank(rest[:cr])
            if seg is not None:
                self._keep_hidden_errors(rest[:cr], out)
                self._last, self._last_sent = seg, first and len(seg) == self._shown
            rest = rest[cr + 1 :]
            self._shown = -1
        self.partial = rest + hold
        if final:
            if self.partial or self._last is not None:
                self._finish(self.partial, out)
                self.partial = b""
        elif len(self.partial) > MAX_PARTIAL:
            # a megabyte-long line must not grow forever: its head now, the rest skipped as it comes
            self._cut(self.partial[:MAX_PARTIAL], len(self.partial) - MAX_PARTIAL, out)
            self.partial = b""
            self._cutting = True
        elif self.partial and not self.partial.strip(b"."):
            # compiler dots are a heartbeat now
            self._finish(self.partial, out)
            self.partial = b""
        elif self._cr:
            if not _blank(rest) and self._shown != len(rest):
                # the newest redraw, though unfinished: a bar drawn before a 10-minute step must
                # count now, not when the next redraw comes (a torn write is redrawn in full later)
                out.append(Record(_text(rest), redraw=True))
                self._shown = len(rest)
                self._last_sent = True  # superseded: an older state is never sent after it
            elif self._last is not None and not self._last_sent:
                out.append(Record(_text(self._last), redraw=True))
                self._last_sent = True

    def _cut(self, head: bytes, dropped: int, out: list[Record]) -> None:
        """The current line is longer than MAX_PARTIAL: ``head`` (its first bytes) goes out marked, the
        ``dropped`` bytes after it are counted (and so will be the rest, see :meth:`_consume`)."""
        self.cut_lines += 1
        self.cut_bytes += dropped
        self._cr = False  # a redraw's state ends with the line
        self._finish(head, out, cut_note(self.path))

    def _finish(self, chunk: bytes, out: list[Record], note: str = "") -> None:
        """The current line ends with ``chunk`` (its bytes since the last finished segment)."""
        body = chunk[:-1] if chunk.endswith(b"\r") else chunk
        seg, first = _last_nonblank(body) if (self._cr or b"\r" in body) else (body, True)
        if seg is not None and (self._cr or b"\r" in body):
            self._keep_hidden_errors(body, out)
        if seg is not None:
            out.append(Record(_text(seg) + note, seen=first and len(seg) == self._shown and not note))
        elif self._last is not None:
            out.append(Record(_text(self._last) + note, seen=self._last_sent and not note))
        else:
            out.append(Record(_text(body.rsplit(b"\r", 1)[-1]) + note))  # a blank line, as it was
        self._cr, self._last, self._last_sent, self._shown = False, None, False, -1

    def _keep_hidden_errors(self, body: bytes, out: list[Record]) -> None:
        """The last non-blank ``\\r`` segment of ``body`` is now the line's state: what it hides that
        reads as an error (the line's older state, the segments of ``body`` before it) becomes a record
        of its own. A terminal shows the redraw; the rank log, the judge and the evidence keep the error."""
        last = self._last
        if not ERROR_LIKE.search(body) and (last is None or not ERROR_LIKE.search(last)):
            return
        parts = body.split(b"\r")
        now_shown = max((i for i, p in enumerate(parts) if not _blank(p)), default=0)
        hidden = [(last, self._last_sent)] if last is not None else []
        # the first part continues the unfinished segment, handed out as a redraw if it had this length
        hidden += [(p, i == 0 and len(p) == self._shown) for i, p in enumerate(parts[:now_shown])]
        for h, sent in hidden:
            if not _blank(h) and ERROR_LIKE.search(h):
                out.append(Record(_text(h), seen=sent))  # seen: the judge had it as a redraw

    def replaced(self) -> bool:
        """The path names another file than the one open: torchrun removes an attempt's log dir and makes
        it again when it restarts its workers without counting a restart (a member joined or left an
        elastic job: torch's ``DefaultLogsSpecs.reify``, ``shutil.rmtree`` then ``os.makedirs``), so the
        same paths hold the new workers' output in new files."""
        if self._fd is None:
            return False
        try:
            named = os.stat(self.path)
        except OSError:
            return False
        held = os.fstat(self._fd)
        return (named.st_ino, named.st_dev) != (held.st_ino, held.st_dev)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


#: Seconds a rank's first lines may be held back while its envelope is undecided (lines that some
#: envelope would open, while fewer than DETECT_LINES lines are in): no longer than a new rank's
#: first lines already wait to be found (DISCOVER_EVERY). A rank whose lines no envelope opens is
#: never held (its first plain lines decide it: see envelopes.detect).
HOLD_UNDECIDED = DISCOVER_EVERY

#: ``rank-R.log`` gets a time index ``rank-R.times``: one ``N WALL`` line (N lines of the log were
#: written by wall time WALL, seconds since the epoch) at most this often, and the last at close.
#: ``neuron-watch diagnose`` dates the rank's lines by it (rank output rarely carries its own stamps).
TIME_INDEX_EVERY = 1.0


class RankStreams:
    """All rank output of one generation on one node."""

    def __init__(
        self,
        node: str,
        gen_dir: str,
        echo: Callable[[str], None] | None = None,
        health: IOHealth | None = None,
    ) -> None:
        self.node = node
        self.health = health or IOHealth(node)
        self.gen_dir = gen_dir
        self.echo = echo
        self.log_root: str | None = None
        self.rank_offset: int | None = None  # global rank = local rank + offset (torchrun: contiguous)
        self._tails: dict[str, tuple[FileTail, int]] = {}  # path -> (tail, local rank)
        self._out: dict[int, AppendFile] = {}
        self._lineno: dict[int, int] = {}
        #: rank -> the envelope its output comes in (a JSON logger's records, say), read as diagnose reads it
        self._envelopes: dict[int, EnvelopeReader[int]] = {}
        self._held_since: dict[int, float] = {}  # rank -> when its envelope reader began to hold lines (holding only)
        self._pending: list[tuple[int, Record]] = []  # (local rank, record) until the offset is known
        self._redraw_logged: dict[int, float] = {}  # rank -> when a redraw was last written
        self._times: dict[int, AppendFile] = {}  # rank -> its time index (see TIME_INDEX_EVERY)
        self._timed: dict[int, float] = {}  # rank -> wall time of its last index entry
        self._untimed: dict[int, tuple[int, float]] = {}  # rank -> (lines, wall) not yet in its index
        self._turn = 0  # which file reads first (see poll)
        self.lines_seen = 0
        self.unattributed_lines = 0  # lines sent without a global rank (see poll)
        self._last_discover = -1e18
        #: tails whose path now names a new file (:meth:`FileTail.replaced`): their last bytes, then closed
        self._replaced: list[tuple[FileTail, int]] = []

    def set_log_root(self, path: str) -> None:
        self.log_root = path

    def rank_log(self, rank: int) -> str:
        name = f"unattributed-{self.node}.log" if rank == UNATTRIBUTED else f"rank-{rank}.log"
        return os.path.join(self.gen_dir, name)

    def rank_logs(self) -> dict[int, str]:
        return {r: self.rank_log(r) for r in sorted(self._out)}

    def discover(self, mono: float = 0.0, force: bool = True) -> None:
        """Find new per-rank files (unless ``force``: at most every :data:`DISCOVER_EVERY` seconds once
        some exist)."""
        if self.log_root is None or (not force and self._tails and mono - self._last_discover < DISCOVER_EVERY):
            return
        self._last_discover = mono
        for path in glob.glob(os.path.join(self.log_root, "*", "attempt_*", "*", "std*.log")):
            known = self._tails.get(path)
            if known is not None and known[0].replaced():
                self._replaced.append(known)  # read to its end at the next poll, then closed
                known = None
            if known is None:
                m = _PATH.search(path)
                if m:
                    self._tails[path] = (FileTail(path), int(m.group(2)))

    @property
    def skipped_lines(self) -> int:
        """Lines of a flood that were skipped, never read (see :meth:`FileTail._skip_backlog`)."""
        return sum(t.skipped_lines for t, _r in self._tails.values())

    @property
    def cut_lines(self) -> int:
        """Lines longer than MAX_PARTIAL that were cut (their heads marked, see :func:`cut_note`)."""
        return sum(t.cut_lines for t, _r in self._tails.values())

    @property
    def cut_bytes(self) -> int:
        """Bytes of those lines not kept."""
        return sum(t.cut_bytes for t, _r in self._tails.values())

    @property
    def behind(self) -> bool:
        """Some file had more to read than one poll takes."""
        return any(t.behind for t, _r in self._tails.values())

    def poll(self, mono: float, wall: float, final: bool = False, to_eof: bool = False) -> list[LogLine]:
        """New lines from every rank since the last poll (``final``: flush partial lines too; ``final``
        or ``to_eof``: read every file to its end)."""
        self.discover(mono, force=final or to_eof)
        raw: list[tuple[int, Record]] = list(self._pending) if self.rank_offset is not None else []
        if self.rank_offset is not None:
            self._pending.clear()
        # The files take turns at the node's budget (a different one first each poll): one rank's
        # long lines cannot starve the others, and ranks printing megabyte lines at once cost the
        # node NODE_READ_BUDGET a poll, not MAX_READ times their number.
        tails = list(self._tails.values())
        if tails:
            self._turn = (self._turn + 1) % len(tails)
            tails = tails[self._turn:] + tails[:self._turn]
        for tail, local_rank in self._replaced:
            raw.extend((local_rank, rec) for rec in tail.read_records(final=True))
            raw.append((local_rank, Record(f"neuron-watch: {tail.path} was made anew (torchrun restarted its "
                                           "workers): reading the new file from its start")))
            tail.close()
        self._replaced.clear()
        budget = NODE_READ_BUDGET
        for tail, local_rank in tails:
            if budget <= 0 and not (final or to_eof):
                tail.behind = True  # not read this poll: there may be more
                continue
            before = tail.bytes_read
            for rec in tail.read_records(final, to_eof, limit=budget):
                raw.append((local_rank, rec))
            budget -= tail.bytes_read - before
        if self.rank_offset is None and not final:
            self._pending.extend(raw)
            return []
        if self.rank_offset is None:
            # The generation ended before any worker told us its rank (it died at once): the lines
            # still go out, marked with the local rank, on the node's unattributed stream.
            raw = self._pending + raw
            self._pending = []
            self.unattributed_lines += len(raw)
            if raw:
                log.warning("%d line(s) of node %s sent without their global rank (no worker was seen); "
                            "they are marked [local_rank N] in %s", len(raw), self.node, self.rank_log(UNATTRIBUTED))
            ranked = [(UNATTRIBUTED, f"[local_rank {local_rank}] {rec.text}", rec) for local_rank, rec in raw]
        else:
            ranked = [(local_rank + self.rank_offset, rec.text, rec) for local_rank, rec in raw]
        out: list[LogLine] = []
        echo_lines: list[str] = []
        judged: dict[int, list[tuple[int, str]]] = {}  # rank -> (line number, text) for the judge, in order
        for rank, text, rec in ranked:
            f = self._out.get(rank)
            if f is None:
                f = self._out[rank] = AppendFile(self.rank_log(rank), self.health, gap=_rank_log_gap)
            # A bar's redraws reach the rank log and the console every REDRAW_LOG_EVERY seconds;
            # lines (a bar's final state included) always. A redraw not written carries the number
            # of the line written before it.
            write = not rec.redraw or mono - self._redraw_logged.get(rank, -1e18) >= REDRAW_LOG_EVERY
            if write:
                if rec.redraw:
                    self._redraw_logged[rank] = mono
                f.write(text + "\n")
                n = self._lineno[rank] = self._lineno.get(rank, 0) + 1
                if self.echo is not None:
                    echo_lines.append(f"[rank{rank}] {text}")
            else:
                n = self._lineno.get(rank, 0)
            if rec.seen:
                continue  # the judge had this state as a redraw already
            judged.setdefault(rank, []).append((n, text))
        for rank, items in judged.items():
            self._judge_lines(rank, items, mono, wall, out)
        self._settle_envelopes(mono, wall, final, to_eof, out)
        self._index(ranked, wall)
        for f in self._out.values():
            f.flush()
        if echo_lines and self.echo is not None:
            self.echo("\n".join(echo_lines))
        self.lines_seen += len(out)
        return out

    def _judge_lines(self, rank: int, items: list[tuple[int, str]], mono: float, wall: float,
                     out: list[LogLine]) -> None:
        """The judge's records of one rank's new lines: what `neuron-watch diagnose` reads in its log,
        the envelope opened (see :meth:`_settle_envelopes`), escapes and redrawn bars removed, torch's
        own "[rankN]:" prefix dropped (the file already says which rank it is)."""
        envelope = self._envelopes.get(rank)
        if envelope is None:
            envelope = self._envelopes[rank] = EnvelopeReader[int]()
        if envelope.plain:
            self._emit(rank, items, mono, wall, out)
            return
        self._emit(rank, [(n, t) for n, t, _, _ in envelope.read(items)], mono, wall, out)
        if not envelope.holding:
            self._held_since.pop(rank, None)
        elif rank not in self._held_since:
            self._held_since[rank] = mono

    def _settle_envelopes(self, mono: float, wall: float, final: bool, to_eof: bool, out: list[LogLine]) -> None:
        """Lines a rank's envelope reader holds until its first lines decide the envelope go out when
        it is decided, or at the latest :data:`HOLD_UNDECIDED` seconds after the first was held (a
        rank quiet after its first lines, compiling), when the rank's files are read to their end
        (``to_eof``: a rank ended; its last lines are its root cause), or at the end (``final``: the
        envelope decided as for the whole log, a line still in pieces ended)."""
        if final:
            for rank, envelope in self._envelopes.items():
                if not envelope.plain:
                    self._emit(rank, [(n, t) for n, t, _, _ in envelope.read([], final=True)], mono, wall, out)
            self._held_since.clear()
            return
        for rank, since in list(self._held_since.items()):  # only the ranks holding lines: a poll's cost stays
            if to_eof or mono - since >= HOLD_UNDECIDED:
                self._emit(rank, [(n, t) for n, t, _, _ in self._envelopes[rank].release()], mono, wall, out)
                del self._held_since[rank]

    def _emit(self, rank: int, items: list[tuple[int, str]], mono: float, wall: float, out: list[LogLine]) -> None:
        for n, message in items:
            for part in logical_lines(message):
                out.append(LogLine(RankKey(self.node, rank), split_rank_prefix(part)[1], mono, wall,
                                   self.rank_log(rank), n))

    def _index(self, ranked: list[tuple[int, str, Record]], wall: float, final: bool = False) -> None:
        """Note in each rank's time index how many lines its log holds at ``wall`` (at most every
        TIME_INDEX_EVERY seconds; an entry not written yet keeps the time its lines were written)."""
        for rank in {r for r, _t, _rec in ranked}:
            if rank in self._lineno:
                self._untimed[rank] = (self._lineno[rank], wall)
        for rank, (n, at) in list(self._untimed.items()):
            if final or wall - self._timed.get(rank, -1e18) >= TIME_INDEX_EVERY:
                f = self._times.get(rank)
                if f is None:
                    f = self._times[rank] = AppendFile(self.rank_log(rank)[: -len(".log")] + ".times", self.health)
                f.write(f"{n} {at:.3f}\n")
                f.flush()
                self._timed[rank] = wall
                del self._untimed[rank]

    def close(self) -> None:
        self._index([], 0.0, final=True)
        for f in self._times.values():
            f.close()
        self._times.clear()
        for f in self._out.values():
            f.close()
        self._out.clear()
        for tail, _local_rank in [*self._tails.values(), *self._replaced]:
            tail.close()


def _rank_log_gap(lines: int, nbytes: int, error: str) -> str:
    return (f"neuron-watch: {lines} line(s) ({nbytes} bytes) are missing here: {error} "
            "(torchrun's own file of this rank, under gen-<G>/torchrun/, has them)")

