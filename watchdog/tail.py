"""Tail the per-rank output files torchrun writes (``--log-dir D --redirects 3``).

torchrun keeps one ``stdout.log`` and ``stderr.log`` per local rank under
``D/<run_id>_<random>/attempt_<n>/<local_rank>/``. :class:`RankStreams` reads what is new in
each, splits it into lines, writes every line to ``<gen-dir>/rank-<R>.log`` and hands
:class:`LogLine` records to the supervisor. A partial line made only of dots is passed on at
once: neuronx-cc prints its progress dots without a newline, and they are a compile heartbeat.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import IO

from neuron_watch.events import LogLine, RankKey
from neuron_watch.logtext import logical_lines, split_rank_prefix

log = logging.getLogger(__name__)

#: Bytes read from one file per poll; bounds memory when a rank floods its output.
MAX_READ = 4 << 20
#: A partial line longer than this is passed on as a line of its own (a megabyte-long line must not grow forever).
MAX_PARTIAL = 1 << 20
#: Seconds between looks for new rank files (torchrun creates them all at once when workers start).
DISCOVER_EVERY = 1.0

#: The rank of lines whose global rank could not be learned (RankKey's "unknown").
UNATTRIBUTED = -1

_PATH = re.compile(r"attempt_(\d+)/(\d+)/(stdout|stderr)\.log$")


class FileTail:
    """Reads complete lines appended to one file since the last call.

    The file stays open between calls (one ``pread`` per call: polling 64 rank files 50 times a
    second costs ~0.3% of a core this way, ~3% when each call opens the file); :meth:`close` it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.bytes_read = 0
        self._fd: int | None = None

    def read_lines(self, final: bool = False) -> list[str]:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return []
        data = os.pread(self._fd, MAX_READ, self.offset)
        self.offset += len(data)
        self.bytes_read += len(data)
        buf = self.partial + data
        parts = buf.split(b"\n")
        self.partial = parts.pop()
        if self.partial and (final or len(self.partial) > MAX_PARTIAL or not self.partial.strip(b".")):
            parts.append(self.partial)
            self.partial = b""
        return [p.rstrip(b"\r").decode("utf-8", "replace") for p in parts]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class RankStreams:
    """All rank output of one generation on one node."""

    def __init__(
        self,
        node: str,
        gen_dir: str,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.node = node
        self.gen_dir = gen_dir
        self.echo = echo
        self.log_root: str | None = None
        self.rank_offset: int | None = None  # global rank = local rank + offset (torchrun: contiguous)
        self._tails: dict[str, tuple[FileTail, int]] = {}  # path -> (tail, local rank)
        self._out: dict[int, IO[str]] = {}
        self._lineno: dict[int, int] = {}
        self._pending: list[tuple[int, str]] = []  # (local rank, text) until the offset is known
        self.lines_seen = 0
        self.unattributed_lines = 0  # lines sent without a global rank (see poll)
        self._last_discover = -1e18

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
            if path not in self._tails:
                m = _PATH.search(path)
                if m:
                    self._tails[path] = (FileTail(path), int(m.group(2)))

    def poll(self, mono: float, wall: float, final: bool = False) -> list[LogLine]:
        """New lines from every rank since the last poll (``final``: flush partial lines too)."""
        self.discover(mono, force=final)
        raw: list[tuple[int, str]] = list(self._pending) if self.rank_offset is not None else []
        if self.rank_offset is not None:
            self._pending.clear()
        for tail, local_rank in self._tails.values():
            for text in tail.read_lines(final):
                raw.append((local_rank, text))
        if self.rank_offset is None and not final:
            self._pending.extend(raw)
            return []
        if self.rank_offset is None:
            # The generation ended before any worker told us its rank (it died at once): the lines
            # still go out, marked with the local rank, on the node's unattributed stream.
            raw = self._pending + raw
            self._pending = []
            self.unattributed_lines += len(raw)
            log.warning("%d line(s) of node %s sent without their global rank (no worker was seen); "
                        "they are marked [local_rank N] in %s", len(raw), self.node, self.rank_log(UNATTRIBUTED))
            ranked = [(UNATTRIBUTED, f"[local_rank {local_rank}] {text}") for local_rank, text in raw]
        else:
            ranked = [(local_rank + self.rank_offset, text) for local_rank, text in raw]
        out: list[LogLine] = []
        echo_lines: list[str] = []
        for rank, text in ranked:
            f = self._out.get(rank)
            if f is None:
                f = self._out[rank] = open(self.rank_log(rank), "a", encoding="utf-8")  # noqa: SIM115
            f.write(text + "\n")
            n = self._lineno[rank] = self._lineno.get(rank, 0) + 1
            # The judge sees what `neuron-watch diagnose` sees: escapes and redrawn bars removed,
            # torch's own "[rankN]:" prefix dropped (the file already says which rank it is).
            for part in logical_lines(text):
                out.append(LogLine(RankKey(self.node, rank), split_rank_prefix(part)[1], mono, wall,
                                   self.rank_log(rank), n))
            if self.echo is not None:
                echo_lines.append(f"[rank{rank}] {text}")
        for f in self._out.values():
            f.flush()
        if echo_lines and self.echo is not None:
            self.echo("\n".join(echo_lines))
        self.lines_seen += len(out)
        return out

    def close(self) -> None:
        for f in self._out.values():
            f.close()
        self._out.clear()
        for tail, _local_rank in self._tails.values():
            tail.close()


def console_echo(text: str) -> None:
    """Print rank lines on our stdout (the user's console)."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `neuron-watch ... | head` must not kill the job
        pass
