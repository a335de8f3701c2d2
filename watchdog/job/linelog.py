"""The job's log: ``merged.log`` and the ranks' in-memory tails, written off the judging thread.

The coordinator's judging thread hands each batch's rank rows over as they were decoded (no
formatting, no file write, no tail kept on its side) to a :class:`LineLog`; a thread of the
LineLog's own formats them (``<ISO wall> <node>/rank<r> | <text>``), appends them to
``merged.log`` and keeps every rank's last lines for evidence. The hand-over is bounded in bytes
(``queue_bytes``): a batch offered while the writer is that far behind is dropped, counted, and
said in ``merged.log`` itself when the writer next writes; the judging thread never waits. The
tails are bounded per rank (``tail_lines``) and in total (``tail_chars`` over every rank: the
oldest texts of the job go first), and what the total bound trims is counted.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from neuron_watch.events import RankKey, iso_utc
from neuron_watch.wire.protocol import RankLines


class LogFile(Protocol):
    """Where merged.log goes (:class:`neuron_watch.iofaults.AppendFile`: a full disk degrades it, counted)."""

    def write(self, text: str) -> None: ...

    def flush(self) -> object: ...

    def close(self) -> None: ...


@dataclass
class LineLogCounters:
    """What the job's log took, dropped and trimmed (read by the coordinator's summary and events)."""

    batches: int = 0  # batches written to merged.log
    dropped_batches: int = 0  # offered while ``queue_bytes`` were waiting: not written, not kept
    dropped_lines: int = 0
    tail_trimmed_lines: int = 0  # forgotten from the tails by the total bound (``tail_chars``)


class _Text:
    """One batch's joined text of a rank, its line count, and whether its tail still holds it."""

    __slots__ = ("kept", "n", "text")

    def __init__(self, text: str, n: int) -> None:
        self.text, self.n, self.kept = text, n, True


class _Tail:
    """A rank's last batches as joined texts: just enough of them to hold ``limit`` lines."""

    __slots__ = ("count", "limit", "texts")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.texts: collections.deque[_Text] = collections.deque()
        self.count = 0


class LineLog:
    """``merged.log`` and the per-rank tails, owned by one writer thread.

    Args:
        merged: the open ``merged.log`` (written by the writer thread only, once started).
        tail_lines: lines kept per rank.
        tail_chars: characters kept in all tails together (the oldest batches of any rank go first).
        queue_bytes: bytes of rank texts that may wait for the writer; more is dropped and counted.
        wall: the wall clock (for the note of a drop in ``merged.log``).
    """

    def __init__(self, merged: LogFile, *, tail_lines: int, tail_chars: int, queue_bytes: int,
                 wall: Callable[[], float] = time.time) -> None:
        self.merged = merged
        self.tail_lines, self.tail_chars, self.queue_bytes = tail_lines, tail_chars, queue_bytes
        self.wall = wall
        self.counters = LineLogCounters()
        self._cond = threading.Condition()
        self._queue: collections.deque[tuple[str, float, Sequence[RankLines], int, bool]] = collections.deque()
        self._queued_bytes = 0
        self._offered = 0  # batches taken into the queue; _done: of those, written
        self._done = 0
        self._unsaid_drops = 0  # lines dropped and not yet said in merged.log
        self._stop = False
        self.cpu_seconds = 0.0  # the writer thread's CPU time so far
        self._tails: dict[RankKey, _Tail] = {}
        self._keys: dict[tuple[str, int], RankKey] = {}
        # every text kept, oldest first, for the total bound (with texts their ranks let go since:
        # _stale of them, dropped from here once they are half)
        self._kept: collections.deque[tuple[_Tail, _Text]] = collections.deque()
        self._kept_chars = 0
        self._stale = 0
        self._stamp_sec, self._stamp_prefix = -1, ""
        self._thread = threading.Thread(target=self._run, name="neuron-watch-linelog", daemon=True)
        self._thread.start()

    # -- the judging thread's side: O(1), never waits ---------------------------------------------

    def offer(self, node: str, wall: float, rows: Sequence[RankLines], nbytes: int, lines: int,
              keep_tails: bool = True) -> bool:
        """Hand one batch of ``node`` (sent at the sender's ``wall``; ``nbytes`` of text, ``lines``
        lines) to the writer. False: the writer is ``queue_bytes`` behind, the batch is dropped
        (counted, and said in merged.log)."""
        with self._cond:
            if self._stop or (self._queued_bytes + nbytes > self.queue_bytes and self._queue):
                self.counters.dropped_batches += 1
                self.counters.dropped_lines += lines
                self._unsaid_drops += lines
                return False
            self._queue.append((node, wall, rows, nbytes, keep_tails))
            self._queued_bytes += nbytes
            self._offered += 1
            self._cond.notify()
        return True

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until every batch offered so far is written (flushed) and kept. False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._offered
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    def tail(self, key: RankKey, n: int) -> list[str]:
        """The last ``n`` lines of a rank, oldest first, of the batches written so far."""
        lines: list[str] = []
        with self._cond:
            t = self._tails.get(key)
            if t is None or n <= 0:
                return []
            for x in reversed(t.texts):  # newest batch first; stop once enough lines are in hand
                lines[:0] = x.text.split("\n")
                if len(lines) >= n:
                    break
        return lines[-n:]

    def tail_sizes(self) -> tuple[int, int]:
        """(texts, characters) held in all tails."""
        with self._cond:
            return len(self._kept) - self._stale, self._kept_chars

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is queued (up to ``timeout`` seconds), stop the writer, close merged.log.
        False: the writer did not finish in time (what it still had queued is counted as dropped)."""
        done = self.sync(timeout)
        with self._cond:
            self._stop = True
            if not done:
                lost = sum(c.n_lines for _n, _w, rows, _b, _k in self._queue for c in rows)
                self.counters.dropped_batches += len(self._queue)
                self.counters.dropped_lines += lost
                self._queue.clear()
            self._cond.notify()
        self._thread.join(timeout)
        if not self._thread.is_alive():  # (a writer stuck in a write keeps the file: closing it under it races)
            self.merged.close()
        return done

    # -- the writer thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop and not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._queued_bytes = 0
                dropped, self._unsaid_drops = self._unsaid_drops, 0
            c0 = time.thread_time()
            text = self._format(batch, dropped)
            self.merged.write(text)
            self.merged.flush()
            spent = time.thread_time() - c0
            with self._cond:
                self.cpu_seconds += spent
                self._done += len(batch)
                self.counters.batches += len(batch)
                self._cond.notify_all()

    def _format(self, batch: list[tuple[str, float, Sequence[RankLines], int, bool]], dropped: int) -> str:
        parts: list[str] = []
        if dropped:
            parts.append(f"{iso_utc(self.wall())} coordinator | neuron-watch: {dropped} line(s) of the job's output "
                         "dropped here: the coordinator's log writer was behind (each rank's own log has them)\n")
        keys, stamp = self._keys, self._stamp
        kept: list[tuple[RankKey, str, int]] = []
        for node, wall, rows, _nbytes, keep_tails in batch:
            for c in rows:
                key = keys.get((node, c.rank))
                if key is None:
                    key = keys[(node, c.rank)] = RankKey(node, c.rank)
                # "<time> <node>/rank<r> | " before every line: one C-level replace per rank, not a loop.
                prefix = f"{stamp(wall - c.d_wall)} {key} | "
                text = c.text
                parts += (prefix, text.replace("\n", "\n" + prefix) if c.n_lines > 1 else text, "\n")
                if keep_tails:
                    kept.append((key, text, c.n_lines))
        with self._cond:  # tail() reads them from other threads
            self._keep(kept)
        return "".join(parts)

    def _keep(self, kept: list[tuple[RankKey, str, int]]) -> None:
        tails, limit, order = self._tails, self.tail_lines, self._kept
        for key, text, n in kept:
            t = tails.get(key)
            if t is None:
                t = tails[key] = _Tail(limit)
            entry = _Text(text, n)
            t.texts.append(entry)
            t.count += n
            order.append((t, entry))
            self._kept_chars += len(text)
            texts = t.texts
            while len(texts) > 1 and t.count - texts[0].n >= limit:  # the rank's own bound
                old = texts.popleft()
                old.kept = False
                t.count -= old.n
                self._kept_chars -= len(old.text)
                self._stale += 1
        # the total bound: the job's oldest texts go first, whichever rank holds them
        while self._kept_chars > self.tail_chars and order:
            t, entry = order.popleft()
            if not entry.kept:
                self._stale -= 1
                continue
            t.texts.remove(entry)  # the oldest kept text of the job is its rank's oldest: O(1)
            entry.kept = False
            t.count -= entry.n
            self._kept_chars -= len(entry.text)
            self.counters.tail_trimmed_lines += entry.n
        if self._stale > len(order) // 2:
            self._kept = collections.deque(x for x in order if x[1].kept)
            self._stale = 0

    def _stamp(self, wall: float) -> str:
        """``iso_utc(wall)``, with the seconds part formatted once per second (every line has one)."""
        sec = int(wall)
        if sec != self._stamp_sec:
            self._stamp_sec, self._stamp_prefix = sec, iso_utc(sec)[:-5]  # drop ".000Z"
        return f"{self._stamp_prefix}.{int((wall - sec) * 1000):03d}Z"
