"""The job's log on the coordinator's host: ``merged.log`` and every rank's recent lines.

A lines batch from a node is written here whole: one ``merged.log`` write per batch (every line
as ``<ISO wall> <node>/rank<r> | <text>``, in arrival order), and each rank's last batches kept as
joined texts for evidence (:meth:`JobLog.tail`). Per rank and per batch, never per line: the agent
joined each rank's lines. The judge never reads from here; this is what the operator and the
incident read.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Protocol

from neuron_watch.events import RankKey, Verdict, iso_utc
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.wire.protocol import Header, Kind, Lines, decode_body


class JobLogLike(Protocol):
    """The job log's contract, kept in this process (:class:`JobLog`) or by a writer process
    (:class:`neuron_watch.job.linewriter.LineWriter`). ``frame``: the batch's body as it crossed
    the wire (what a writer process takes, unparsed, instead of the decoded body). ``decodes_frames``:
    the job log decodes each batch's frame itself, so the judging thread decodes only the judge's part."""

    decodes_frames: bool

    def write(self, h: Header, body: Lines, keep_tails: bool, frame: bytes = b"") -> tuple[list[RankKey], int]: ...
    def tail(self, key: RankKey, n: int | None = None) -> list[str]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def gap_line(wall: float, node: str, lines: int, nbytes: int, error: str) -> str:
    """The line ``merged.log`` gets where lines of the job's output could not be written."""
    return (f"{iso_utc(wall)} {node} | neuron-watch: {lines} line(s) ({nbytes} bytes) of the "
            f"job's output are missing here: {error} (each rank's own log still has them)")


#: The job's log in its run dir: every rank of every node, one line each.
MERGED_LOG = "merged.log"

#: An incident's ``tails.log`` holds the tails of at most this many of the verdict's ranks.
INCIDENT_TAIL_RANKS = 8


def incident_tails(joblog: JobLogLike, verdict: Verdict) -> str:
    """The tails of the verdict's culprit, then of its other ranks (at most
    :data:`INCIDENT_TAIL_RANKS`), as ``merged.log`` has them: what an incident's ``tails.log`` holds."""
    keys = list(dict.fromkeys([*([verdict.culprit] if verdict.culprit else []), *verdict.ranks]))
    parts = []
    for key in keys[:INCIDENT_TAIL_RANKS]:
        lines = joblog.tail(key)
        parts.append(f"==> {key}: its last {len(lines)} line(s) <==\n" + "".join(ln + "\n" for ln in lines))
    if len(keys) > INCIDENT_TAIL_RANKS:
        parts.append(f"==> {len(keys) - INCIDENT_TAIL_RANKS} more rank(s) of the verdict not listed <==\n")
    return "\n".join(parts)


class JobLog:
    """``merged.log`` in ``run_dir`` and each rank's last ``tail_lines`` lines.

    Args:
        gap: the line written into ``merged.log`` where lines could not be (see :class:`AppendFile`).
    """

    #: the coordinator decodes each batch whole and hands this log the decoded body
    decodes_frames = False

    def __init__(self, run_dir: str, health: IOHealth, tail_lines: int,
                 gap: Callable[[int, int, str], str]) -> None:
        self.merged = AppendFile(os.path.join(run_dir, MERGED_LOG), health, gap=gap)
        self.merged.create()  # there from the start, before the first line (a fault is counted and told)
        self.tail_lines = tail_lines
        # Per rank, its last batches' joined texts (each holds >= 1 line); read with tail().
        self.tails: dict[RankKey, _Tail] = {}
        self._keys: dict[tuple[str, int], RankKey] = {}
        self._stamp_sec, self._stamp_prefix = -1, ""

    def write(self, h: Header, body: Lines, keep_tails: bool, frame: bytes = b"") -> tuple[list[RankKey], int]:
        """One batch of node ``h.node`` into ``merged.log`` and, when ``keep_tails``, the tails.
        Returns each row's rank key (in the body's order) and the number of lines.

        The node is the header's, the sender's authenticated name: a node speaks for itself only.
        A body decoded for the judge alone (``Lines.logged``: for a job log that decodes the frames
        itself) is decoded whole again from ``frame``.
        """
        if body.logged is not None:
            whole = decode_body(Kind.LINES, frame)
            assert isinstance(whole, Lines)
            body = whole
        return self.write_rows(h.node, h.wall, body, keep_tails)

    def write_rows(self, node: str, wall: float, body: Lines, keep_tails: bool) -> tuple[list[RankKey], int]:
        """:meth:`write` of a batch node ``node`` sent at ``wall`` (its header's)."""
        keys, tails, stamp = self._keys, self.tails, self._stamp
        n = 0
        parts: list[str] = []
        rank_keys: list[RankKey] = []
        for c in body.ranks:
            key = keys.get((node, c.rank))
            if key is None:
                key = keys[(node, c.rank)] = RankKey(node, c.rank)
            rank_keys.append(key)
            # "<time> <node>/rank<r> | " before every line: one C-level replace per rank, not a loop.
            prefix = f"{stamp(wall - c.d_wall)} {key} | "
            text = c.text
            parts += (prefix, text.replace("\n", "\n" + prefix) if c.n_lines > 1 else text, "\n")
            if keep_tails:
                t = tails.get(key)
                if t is None:
                    t = tails[key] = _Tail(self.tail_lines)
                t.texts.append((text, c.n_lines))  # inline, not a method call: this runs for every rank of every batch
                t.count += c.n_lines
                if t.count - t.texts[0][1] >= t.limit:
                    t.trim()
            n += c.n_lines
        if body.shed:  # the node sent this batch's judged part alone: say where the rest is missing
            parts.append(f"{stamp(wall)} {node} | neuron-watch: {body.shed} line(s) of {node} are missing here: left "
                         "out at the node while the coordinator was behind (each rank's own log has them)\n")
        self.merged.write("".join(parts))
        return rank_keys, n

    def tail(self, key: RankKey, n: int | None = None) -> list[str]:
        """The last ``n`` (default ``tail_lines``) lines of a rank, oldest first."""
        t = self.tails.get(key)
        want = self.tail_lines if n is None else n
        if t is None or want <= 0:
            return []
        lines: list[str] = []
        for text, _n in reversed(t.texts):  # newest batch first; stop once enough lines are in hand
            lines[:0] = text.split("\n")
            if len(lines) >= want:
                break
        return lines[-want:]

    def _stamp(self, wall: float) -> str:
        """``iso_utc(wall)``, with the seconds part formatted once per second (hot path: every line)."""
        sec = int(wall)
        if sec != self._stamp_sec:
            self._stamp_sec, self._stamp_prefix = sec, iso_utc(sec)[:-5]  # drop ".000Z"
        return f"{self._stamp_prefix}.{int((wall - sec) * 1000):03d}Z"

    def flush(self) -> None:
        self.merged.flush()

    def close(self) -> None:
        self.merged.close()


class _Tail:
    """A rank's last batches as joined texts: just enough of them to hold ``limit`` lines."""

    __slots__ = ("count", "limit", "texts")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.texts: collections.deque[tuple[str, int]] = collections.deque()
        self.count = 0

    def trim(self) -> None:
        """Forget the oldest batches that the newer ones no longer need to hold ``limit`` lines."""
        texts = self.texts
        while len(texts) > 1 and self.count - texts[0][1] >= self.limit:
            self.count -= texts.popleft()[1]
