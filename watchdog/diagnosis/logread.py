"""Bounded reads of rank logs: what evidence, the timeline and reports read, in memory that does not
grow with a log's size.

A rank that floods its output leaves ``rank-<R>.log`` files of hundreds of megabytes; reading one
whole (``read_text().splitlines()``) costs several times its size in memory and seconds of a core.
Here a log is read in chunks of :data:`CHUNK` bytes, its lines cut at
:data:`~neuron_watch.diagnosis.logtext.MAX_LINE` characters (counted), its tail found by seeking from the
end, and its line numbers and write times taken from the time index ``rank-<R>.times`` that
:class:`~neuron_watch.node.tail.RankStreams` writes beside it (``N WALL``: N lines were written by WALL).
Every long loop takes a ``deadline`` (a ``clock()`` value) and stops there, saying so.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from neuron_watch.diagnosis.logtext import MAX_LINE

#: Bytes read at a time.
CHUNK = 1 << 20


def time_index_path(log_path: str) -> str:
    """``rank-R.times`` beside ``rank-R.log``."""
    return (log_path[: -len(".log")] if log_path.endswith(".log") else log_path) + ".times"


def read_time_index(log_path: str) -> list[tuple[int, float]]:
    """The entries ``(lines, wall)`` of a rank log's time index, in order; [] without one.

    A torn or garbled entry (the writer stopped mid-line, a full disk) is skipped: the index only
    dates lines, and the entries around it still do.
    """
    out: list[tuple[int, float]] = []
    try:
        with open(time_index_path(log_path), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) != 2:
                    continue
                try:
                    n, wall = int(parts[0]), float(parts[1])
                except ValueError:
                    continue
                if not out or n >= out[-1][0]:
                    out.append((n, wall))
    except OSError:
        return []
    return out


@dataclass
class TimeIndex:
    """When each line of a rank log was written, from its time index (see :func:`read_time_index`)."""

    entries: list[tuple[int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._counts = [n for n, _t in self.entries]

    def time_of(self, lineno: int) -> float | None:
        """Wall time by which line ``lineno`` (1-based) was written; None past the index's end."""
        i = bisect.bisect_left(self._counts, lineno)
        return self.entries[i][1] if i < len(self.entries) else None


@dataclass
class ReadNote:
    """What a bounded read left out: bytes skipped before ``start``, a deadline, cut lines."""

    path: str
    size: int = 0
    start: int = 0  # byte offset the read began at (0: the whole log)
    first_line: int | None = 1  # the line number of the first line read (None: not known in time)
    lines: int = 0
    cut_lines: int = 0  # lines longer than MAX_LINE, cut to it
    stopped_at: int | None = None  # byte offset where the deadline stopped the read

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stopped_at is None

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "size": self.size, "skipped_bytes": self.start, "first_line": self.first_line,
                "lines": self.lines, "cut_lines": self.cut_lines,
                "unread_bytes": 0 if self.stopped_at is None else self.size - self.stopped_at}


def count_lines(path: str, end: int, deadline: float | None = None,
                clock: Callable[[], float] = time.monotonic) -> int | None:
    """Newlines in the first ``end`` bytes of ``path`` (chunked); None when the deadline passes first."""
    n = 0
    with open(path, "rb") as f:
        pos = 0
        while pos < end:
            if deadline is not None and clock() >= deadline:
                return None
            chunk = f.read(min(CHUNK * 4, end - pos))
            if not chunk:
                break
            n += chunk.count(b"\n")
            pos += len(chunk)
    return n


def iter_lines(note: ReadNote, max_bytes: int | None = None, deadline: float | None = None,
               clock: Callable[[], float] = time.monotonic, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines of ``note.path``, decoded, each at most ``max_line`` characters; memory: one chunk.

    ``max_bytes``: read only the last ``max_bytes`` of the log, from the first line start in them
    (``note.start``; ``note.first_line`` is that line's number, counted when the deadline allows).
    ``deadline``: stop there (``note.stopped_at``). ``note`` is filled as the read goes.

    Raises:
        OSError: the log cannot be opened or read.
    """
    with open(note.path, "rb") as f:
        size = note.size = os.fstat(f.fileno()).st_size
        start = 0
        if max_bytes is not None and size > max_bytes:
            f.seek(size - max_bytes)
            head = f.read(min(CHUNK, max_bytes))
            nl = head.find(b"\n")
            start = size - max_bytes + (nl + 1 if nl >= 0 else len(head))
            note.first_line = None
            counted = count_lines(note.path, start, deadline, clock)
            note.first_line = None if counted is None else counted + 1
        note.start = start
        f.seek(start)
        pos = start
        carry = b""
        dropping = False  # inside a line longer than max_line, past its kept head
        while True:
            if deadline is not None and clock() >= deadline:
                note.stopped_at = pos
                break
            chunk = f.read(CHUNK)
            pos += len(chunk)
            if not chunk:
                if carry and not dropping:
                    note.lines += 1
                    yield _decode(carry, max_line)
                break
            parts = (carry + chunk).split(b"\n")  # in C: the lines of a chunk cost no Python loop but ours
            carry = parts.pop()
            if dropping and parts:  # the rest of a cut line ends here
                parts.pop(0)
                dropping = False
            note.lines += len(parts)
            for part in parts:
                if len(part) > max_line:
                    note.cut_lines += 1
                yield _decode(part, max_line)
            if dropping:
                carry = b""
            elif len(carry) > max_line:  # a line longer than the bound: its head now, the rest skipped
                note.cut_lines += 1
                note.lines += 1
                yield _decode(carry, max_line)
                carry, dropping = b"", True


def _decode(raw: bytes, max_line: int) -> str:
    """``raw`` as text, at most ``max_line`` characters (cut bytes decode as replacement characters)."""
    return raw[: max_line * 4].decode("utf-8", errors="replace")[:max_line]


def tail_bytes(path: str, lines: int, max_bytes: int) -> tuple[bytes, int]:
    """The last ``lines`` lines of ``path``, at most its last ``max_bytes`` bytes (cut at a line
    start when one is in them); and how many bytes before them were left out. Reads only the end.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        chunks: list[bytes] = []
        pos, got, newlines = end, 0, 0
        while pos > 0 and newlines <= lines and got < max_bytes:
            step = min(64 * 1024, pos, max_bytes - got)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            chunks.append(chunk)
            got += len(chunk)
            newlines += chunk.count(b"\n")
    data = b"".join(reversed(chunks))
    if data.count(b"\n") > lines:
        kept = b"\n".join(data.split(b"\n")[-lines - 1:])
        return kept, end - len(kept)
    if pos > 0:  # the byte bound cut a line: begin at the next line start when there is one
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1:]
    return data, end - len(data)
