"""The rank probe: torch's own worker server in every rank, read by the agent (I/O).

``rank_bootstrap/sitecustomize.py`` (on the ranks' ``PYTHONPATH``) starts
``torch._C._distributed_c10d._WorkerServer`` on ``<probe dir>/r<RANK>.sock`` once the job has
imported ``torch.distributed`` and ``import torch`` has returned. :class:`RankProbe` polls each
live rank's ``fr_trace_json`` handler from one background thread (short timeouts: a rank whose
server does not answer costs the thread at most ``timeout`` seconds, never the agent's loop) and
keeps the newest summary per rank for the agent to send (:meth:`RankProbe.take`).

Cost: a dump is serialized by the rank. torch 2.13 records gloo collectives with a 2000-entry
buffer even when nothing is set, and such a dump costs the rank ~75 ms of CPU for ~1 MB of JSON
(64 entries: ~2 ms; tests/benchmarks/bench_rank_probe.py). So the agent sets
``TORCH_FR_BUFFER_SIZE`` to :data:`DEFAULT_BUFFER` when the user set neither it nor
``TORCH_NCCL_TRACE_BUFFER_SIZE`` (the C++ recorder reads both, the first first; see also
torch/distributed/distributed_c10d.py), and a rank whose dump is slow is polled less often
(:data:`MAX_SHARE`).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from neuron_watch.diagnosis.flight_recorder import FlightRecorderError, GroupProgress, summarize

log = logging.getLogger("neuron_watch")

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent / "rank_bootstrap")
DIR_ENV = "NEURON_WATCH_PROBE_DIR"
#: entries kept per process group when the user set no size: the summary needs only the newest
DEFAULT_BUFFER = "64"
POLL_EVERY = 5.0  # seconds between two readings of one rank
TIMEOUT = 2.0  # connect + read bound for one rank's answer
#: a rank is polled no more often than its last dump took / MAX_SHARE (its server's CPU is the job's)
MAX_SHARE = 0.01
#: the bootstrap's stack handler (its ``_stacks``: faulthandler's text, without the thread-list race
#: of torch's ``dump_traceback`` that can kill a rank)
STACKS_HANDLER = "neuron_watch_stacks"

#: one lock per rank socket (its path): a request to a rank waits for the one in flight
_socket_locks: dict[str, threading.Lock] = {}
_socket_locks_guard = threading.Lock()


def rank_socket(probe_dir: str, rank: int) -> str:
    """Where rank ``rank``'s worker server listens (the bootstrap's ``r<RANK>.sock``)."""
    return os.path.join(probe_dir, f"r{rank}.sock")


def probe_env(env: dict[str, str], probe_dir: str) -> dict[str, str]:
    """The variables to add to the ranks' environment ``env`` (which it does not change).

    The bootstrap goes first on ``PYTHONPATH`` (its ``sitecustomize`` chains the job's own).
    """
    out = {DIR_ENV: probe_dir,
           "PYTHONPATH": os.pathsep.join(p for p in (BOOTSTRAP_DIR, env.get("PYTHONPATH", "")) if p)}
    if "TORCH_FR_BUFFER_SIZE" not in env and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env:
        out["TORCH_FR_BUFFER_SIZE"] = DEFAULT_BUFFER
    return out


def make_probe_root() -> str:
    """A short private directory for the sockets (AF_UNIX paths are limited to 107 bytes)."""
    return tempfile.mkdtemp(prefix="nw-", dir="/tmp" if os.path.isdir("/tmp") else None)


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _socket_lock(path: str) -> threading.Lock:
    with _socket_locks_guard:
        return _socket_locks.setdefault(path, threading.Lock())


def call_handler(path: str, handler: str, timeout: float = TIMEOUT) -> bytes:
    """POST ``/handler/<handler>`` on a worker server's unix socket (the method torch's own
    frontend uses, torch/distributed/debug/_frontend.py). Raises OSError (TimeoutError when
    another request to this socket held it for ``timeout``) or HTTPException.

    One request in flight per rank from this process: the probe's ``fr_trace_json`` polls and an
    evidence capture's stacks take turns (each handler runs on its own server thread in the rank,
    and a thread that takes the GIL beside a stack dump is what killed ranks; see the bootstrap's
    ``_stacks``). A caller waits at most ``timeout`` for the turn, then at most ``timeout`` per
    socket operation of its own request: a capture behind a poll waits for that poll, which a
    rank answers in milliseconds (a ~1 MB dump of a big recorder: ~75 ms) and which gives up at
    :data:`TIMEOUT` a step."""
    lock = _socket_lock(path)
    if not lock.acquire(timeout=timeout):
        raise TimeoutError(f"another request to {path} was still in flight after {timeout:g} s")
    try:
        return _post(path, handler, timeout)
    finally:
        lock.release()


def _post(path: str, handler: str, timeout: float) -> bytes:
    conn = _UnixHTTP(path, timeout)
    try:
        conn.request("POST", f"/handler/{handler}", body=b"", headers={"Connection": "close"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise http.client.HTTPException(f"{handler}: HTTP {resp.status} {body[:200]!r}")
        return body
    finally:
        conn.close()


@dataclass(frozen=True)
class Reading:
    """One rank's newest reading: ``groups`` or, when there is none, ``problem`` says why."""

    rank: int
    groups: tuple[GroupProgress, ...]
    problem: str
    mono: float
    seconds: float = 0.0  # how long the rank took to answer


def read_status(probe_dir: str, rank: int) -> dict[str, object]:
    """The bootstrap's status file of ``rank`` ({} when it wrote none: no bootstrap ran there)."""
    try:
        with open(os.path.join(probe_dir, f"r{rank}.json"), encoding="utf-8") as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def read_rank(probe_dir: str, rank: int, clock: Callable[[], float] = time.monotonic,
              timeout: float = TIMEOUT) -> Reading:
    """Read one rank's flight recorder now (blocking up to ``timeout``)."""
    t0 = clock()
    status = read_status(probe_dir, rank)
    state = status.get("state")
    if not status:
        return Reading(rank, (), "no probe status (the bootstrap did not run in this rank: not Python, "
                       "or PYTHONPATH replaced)", t0)
    if state == "failed":
        return Reading(rank, (), f"no recorder: {status.get('error', '')}", t0)
    if state == "exited":  # its last words: the recorder as the rank left it (the bootstrap's atexit)
        try:
            with open(os.path.join(probe_dir, f"r{rank}.fr.json"), "rb") as f:
                return Reading(rank, summarize(json.loads(f.read())), "", t0, clock() - t0)
        except (OSError, ValueError, FlightRecorderError) as exc:
            return Reading(rank, (), f"exited; its last recorder dump is unreadable: {exc}"[:300], t0)
    if state != "listening":
        return Reading(rank, (), "torch.distributed not imported (yet)", t0)
    try:
        raw = call_handler(rank_socket(probe_dir, rank), "fr_trace_json", timeout)
        groups = summarize(json.loads(raw))
    except (OSError, http.client.HTTPException, ValueError, FlightRecorderError) as exc:
        return Reading(rank, (), f"no answer: {type(exc).__name__}: {exc}"[:300], t0, clock() - t0)
    return Reading(rank, groups, "", t0, clock() - t0)


class RankProbe:
    """Polls this node's ranks from one daemon thread. Thread-safe: :meth:`set_ranks`, :meth:`take`."""

    def __init__(self, poll_every: float = POLL_EVERY, timeout: float = TIMEOUT) -> None:
        self.poll_every = poll_every
        self.timeout = timeout
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._ranks: tuple[int, ...] = ()
        self._fresh: dict[int, Reading] = {}
        self.latest: dict[int, Reading] = {}
        self._next: dict[int, float] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def set_ranks(self, probe_dir: str | None, ranks: Iterable[int]) -> None:
        """Which ranks to poll, and where their sockets are (None: poll nothing)."""
        rs = tuple(sorted(ranks))
        with self._lock:
            if probe_dir != self._dir:
                self._fresh.clear()
                self.latest.clear()
                self._next.clear()
            self._dir, self._ranks = probe_dir, rs
        if rs and probe_dir and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="neuron-watch-rank-probe", daemon=True)
            self._thread.start()

    def take(self) -> list[Reading]:
        """The readings taken since the last call (newest per rank)."""
        with self._lock:
            out = sorted(self._fresh.values(), key=lambda r: r.rank)
            self._fresh.clear()
        return out

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                d, ranks = self._dir, self._ranks
            now = time.monotonic()
            for rank in ranks:
                if self._stop.is_set() or d is None:
                    break
                if now < self._next.get(rank, 0.0):
                    continue
                r = read_rank(d, rank, timeout=self.timeout)
                # A slow dump (a big buffer the user asked for) is read less often: its cost is the rank's.
                self._next[rank] = now + max(self.poll_every, r.seconds / MAX_SHARE)
                with self._lock:
                    if d == self._dir:
                        self._fresh[rank] = r
                        self.latest[rank] = r
            self._wake.wait(min(1.0, self.poll_every))


def remove_probe_dir(path: str | None) -> None:
    """Remove a probe directory (stale sockets of ended ranks); errors are ignored (it is /tmp).
    The locks of its sockets go with it (a generation's sockets are not asked again)."""
    if path:
        shutil.rmtree(path, ignore_errors=True)
        with _socket_locks_guard:
            for sock in [s for s in _socket_locks if os.path.dirname(s) == path]:
                del _socket_locks[sock]
