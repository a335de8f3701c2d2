"""``merged.log`` and the ranks' tails in a writer process of their own, off the judging path.

The coordinator's thread judges; what every rank printed (its joined text, a large part of every
``lines`` message) is written and kept elsewhere. A :class:`LineWriter` keeps the job log's
contract (:class:`~neuron_watch.job.joblog.JobLogLike`) for the coordinator: it hands each batch's
body frame, as it crossed the wire and unparsed, with the sender's name and time, to a writer
process (:func:`main`, ``python -m neuron_watch.job.linewriter``) that decodes it and owns
``merged.log`` and the tails (:class:`~neuron_watch.job.joblog.JobLog`). The coordinator reads
only what the judge needs of the batch.

The bulk channel never makes the judge wait: a batch the channel cannot take at once (the writer
is :data:`BULK_HWM` batches behind) is shed, counted (``merged_lines_shed``), marked in
``merged.log`` where it is missing, and said on the console and in events (a ``merged_log_shed``
warning, again every :data:`SHED_REPEAT` seconds while it goes on). Each rank's own log still has
every line. A tail for evidence is asked of the writer (:meth:`LineWriter.tail`), on a control
channel the writer serves before the bulk. The writer's disk faults come back on that channel and
are told like the coordinator's own.

The channels are ZeroMQ sockets on paths in a directory only this user can open. The writer is a
process group we own (the ``start`` given: a new group, on a lifeline to this process), stopped
against one deadline and reaped by :meth:`LineWriter.close`; it leaves by itself if this process
goes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import operator
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
import zmq

from neuron_watch.events import EventKind, RankKey, iso_utc
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.job.endpoint import COORDINATOR_NODE, Counters
from neuron_watch.job.joblog import MERGED_LOG, JobLog, JobLogLike, gap_line
from neuron_watch.wire.protocol import Header, Kind, Lines, ProtocolError, decode_body

log = logging.getLogger("neuron_watch")

_RANK, _N_LINES = operator.itemgetter(0), operator.itemgetter(1)  # a RankLines row's rank and line count

#: Batches the bulk channel holds on each side (ZeroMQ counts messages): up to twice this many
#: wait for the writer before a batch is shed. At 1,024 nodes a batch is at most a second of 64
#: ranks' lines (~85 kB at 10 lines a second): ~90 MB.
BULK_HWM = 512
#: How long a tail asked of the writer may take before the evidence goes without it.
TAIL_TIMEOUT = 2.0
#: The writer's whole stop: asked to finish (it writes what is queued), then SIGTERM, SIGKILL.
CLOSE_DEADLINE = 10.0
#: A shed bulk channel is said again this often while it sheds.
SHED_REPEAT = 10.0
#: Sets of ranks whose keys are remembered (a node's batches name the same ranks again and again).
MAX_ROW_KEYS = 65_536
#: The writer writes merged.log out at least this often (seconds).
FLUSH_EVERY = 0.2
#: Reports the writer keeps for the coordinator while its control socket takes none (more are left out:
#: each is also in the writer's log and, for a batch, marked in merged.log)
MAX_REPORTS = 1024

#: ``(argv, env) -> process``: starts the writer as the leader of a process group we own.
Start = Callable[[Sequence[str], Mapping[str, str]], "subprocess.Popen[bytes]"]
#: ``(process, grace) -> exit code``: SIGTERM to its group, SIGKILL at the deadline, reaped.
Stop = Callable[["subprocess.Popen[bytes]", float], int]
#: ``(event kind, fields)``: an event of the job (the coordinator stamps its generation).
Tell = Callable[[str, dict[str, Any]], None]
#: ``(run_dir, tail_lines, counters, tell) -> job log``: what the coordinator is given to keep its job log.
JobLogFactory = Callable[[str, int, Counters, Tell], JobLogLike]


def told_by_writer(health: IOHealth, tell: Tell) -> Tell:
    """What the writer process tells, as the coordinator takes it: its disk faults are this watchdog's
    own, so they count in ``health`` (``watchdog_io`` of status.json and job_finished) as an
    in-process job log's would, and reach the events through it; its other warnings go to ``tell``
    as they come."""

    def told(kind: str, fields: dict[str, Any]) -> None:
        path = str(fields.get("path", ""))
        if kind == EventKind.WATCHDOG_DEGRADED and path:
            health.failed(str(fields.get("operation", "write")), path, str(fields.get("error", "")))
        elif kind == EventKind.WATCHDOG_RECOVERED and path:
            lines, nbytes = int(fields.get("lost_lines", 0)), int(fields.get("lost_bytes", 0))
            health.lost(lines, nbytes)
            health.ok(path, lines, nbytes)
        else:
            tell(kind, fields)

    return told


class LineWriter:
    """The job log kept by a writer process (the coordinator's side of it).

    Args:
        run_dir: where the writer writes ``merged.log``.
        tail_lines: lines of each rank the writer keeps for evidence.
        counters: the coordinator's counters (``merged_lines_shed``, ``merged_batches_shed``).
        tell: events of the writer (its disk faults, what was shed).
        start, stop: how the writer's process group is started and stopped.
    """

    def __init__(self, run_dir: str, tail_lines: int, *, counters: Counters, tell: Tell, start: Start, stop: Stop,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tail_lines, self.counters, self.tell, self._stop, self.clock = tail_lines, counters, tell, stop, clock
        # merged.log is there from the coordinator's start, not from the writer's first line: the writer
        # is another process, up and scheduled when the machine lets it (seconds under load). A fault
        # is told as the writer's own are (it opens the same file again, and tells when it works).
        health = IOHealth(node=COORDINATOR_NODE)
        health.listeners.append(tell)
        merged = AppendFile(os.path.join(run_dir, MERGED_LOG), health)
        merged.create()
        merged.close()
        self._dir = tempfile.mkdtemp(prefix="nw-lines-")  # mode 0700: nobody else reaches the sockets
        self._ctx = zmq.Context()
        self._bulk = self._ctx.socket(zmq.PUSH)
        self._ctl = self._ctx.socket(zmq.DEALER)
        for sock in (self._bulk, self._ctl):
            sock.setsockopt(zmq.LINGER, 0)
        self._bulk.setsockopt(zmq.SNDHWM, BULK_HWM)
        # Connected before the writer binds: the batches of its start-up wait in the queue.
        bulk, ctl = f"ipc://{self._dir}/bulk", f"ipc://{self._dir}/control"
        self._bulk.connect(bulk)
        self._ctl.connect(ctl)
        self._keys: dict[tuple[str, int], RankKey] = {}
        self._row_keys: dict[tuple[str, tuple[int, ...]], list[RankKey]] = {}
        self._unmarked = 0  # lines shed since the last batch handed over: the writer marks the gap
        self._shed_said, self._shed_told = 0, -1e18
        self._request = 0
        argv = [sys.executable, "-m", "neuron_watch.job.linewriter", "--run-dir", run_dir,
                "--tail-lines", str(tail_lines), "--bulk", bulk, "--control", ctl]
        self.proc = start(argv, os.environ)
        self.closed = False
        self._gone_told = False

    #: the writer decodes each batch's frame itself: the coordinator decodes only the judge's part of it
    decodes_frames = True

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, h: Header, body: Lines, keep_tails: bool, frame: bytes = b"") -> tuple[list[RankKey], int]:
        """Hand batch ``frame`` (``body`` as it crossed the wire) to the writer, or shed it at once."""
        # A node sends the same ranks batch after batch: their keys are looked up once per set of
        # ranks, and nothing here steps through the rows in Python. (A body decoded for the judge
        # alone names every rank of the batch in ``logged``.)
        ranks = tuple(map(_RANK, body.ranks)) if body.logged is None else body.logged.ranks
        rank_keys = self._row_keys.get((h.node, ranks))
        if rank_keys is None:
            if len(self._row_keys) >= MAX_ROW_KEYS:
                self._row_keys.clear()
            rank_keys = self._row_keys[(h.node, ranks)] = [self._key(h.node, r) for r in ranks]
        n = sum(map(_N_LINES, body.ranks)) if body.logged is None else body.logged.n_lines
        meta = msgpack.packb([h.node, h.wall, keep_tails, self._unmarked])
        try:
            self._bulk.send_multipart([meta, frame], zmq.NOBLOCK, copy=False)
            self._unmarked = 0
        except zmq.Again:
            self._unmarked += n
            self.counters.merged_lines_shed += n
            self.counters.merged_batches_shed += 1
        return rank_keys, n

    def _key(self, node: str, rank: int) -> RankKey:
        key = self._keys.get((node, rank))
        if key is None:
            key = self._keys[(node, rank)] = RankKey(node, rank)
        return key

    def tail(self, key: RankKey, n: int | None = None) -> list[str]:
        """A rank's last ``n`` (default ``tail_lines``) lines, as the writer holds them now ([] when
        it does not answer within :data:`TAIL_TIMEOUT`)."""
        self._request += 1
        want = self._request
        self._ctl.send(msgpack.packb(["tail", want, key.node, key.rank, self.tail_lines if n is None else n]))
        end = self.clock() + TAIL_TIMEOUT
        while (left := end - self.clock()) > 0:
            if not self._ctl.poll(int(left * 1000) + 1):
                break
            reply = msgpack.unpackb(self._ctl.recv())
            if reply[0] == "tail" and reply[1] == want:
                return list(reply[2])
            self._report(reply)
        log.warning("the job log's writer did not answer for the tail of %s within %.0fs", key, TAIL_TIMEOUT)
        return []

    def flush(self) -> None:
        """The writer's reports (its disk faults) told; what was shed said, at most every SHED_REPEAT s.
        (The writer writes merged.log out itself.)"""
        while True:
            try:
                reply = msgpack.unpackb(self._ctl.recv(zmq.NOBLOCK))
            except zmq.Again:
                break
            self._report(reply)
        if not self.closed and not self._gone_told and self.proc.poll() is not None:
            # Nothing takes the batches any more: the queue fills, then every batch is shed (counted).
            self._gone_told = True
            message = (f"merged.log: its writer process (pid {self.proc.pid}) exited with code {self.proc.returncode}; "
                       "the batches queued to it are missing there and every later one is shed (counted); the "
                       "judge takes every batch, each rank's own log has every line")
            self.tell(EventKind.WARNING, {"kind": "merged_log_writer_gone", "message": message,
                                          "exit_code": self.proc.returncode})
            log.warning("%s", message)
        shed = self.counters.merged_lines_shed
        now = self.clock()
        if shed > self._shed_said and now - self._shed_told >= SHED_REPEAT:
            message = (f"merged.log: {shed - self._shed_said} line(s) shed ({shed} in all): its writer fell "
                       f"{BULK_HWM}+ batches behind; the judge took every batch, each rank's own log has every line")
            self.tell(EventKind.WARNING, {"kind": "merged_log_shed", "message": message, "lines": shed,
                                          "batches": self.counters.merged_batches_shed})
            log.warning("%s", message)
            self._shed_said, self._shed_told = shed, now

    def _report(self, reply: list[Any]) -> None:
        if reply[0] == "io":
            self.tell(str(reply[1]), dict(reply[2]))
        elif reply[0] == "unreadable":  # (each is said: an agent that builds bodies this version cannot read)
            self.counters.merged_batches_unreadable += 1
            message = (f"merged.log: a batch of {reply[1]} could not be decoded by its writer ({reply[2]}): its lines "
                       "are missing there (marked where); each rank's own log has them")
            self.tell(EventKind.WARNING, {"kind": "merged_log_unreadable", "message": message, "node": reply[1],
                                          "batches": self.counters.merged_batches_unreadable})
            log.warning("%s", message)

    def close(self) -> None:
        """The writer writes what is queued and leaves; at the deadline its group is stopped. Reaped."""
        if self.closed:
            return
        self.closed = True
        try:  # behind the last batch, so that the writer writes every batch handed over before it
            self._bulk.send(b"", zmq.NOBLOCK)
        except zmq.Again:  # the channel is full: asked on the control channel, it writes what it received
            with contextlib.suppress(zmq.ZMQError):
                self._ctl.send(msgpack.packb(["close"]), zmq.NOBLOCK)
        try:
            self.proc.wait(CLOSE_DEADLINE - 1.0)
        except subprocess.TimeoutExpired:
            log.warning("the job log's writer (pid %d) did not finish within %.0fs: stopped", self.proc.pid,
                        CLOSE_DEADLINE - 1.0)
        self._stop(self.proc, 1.0)
        self.flush()
        self._bulk.close()
        self._ctl.close()
        self._ctx.term()
        shutil.rmtree(self._dir, ignore_errors=True)


# -- the writer process --------------------------------------------------------------------------


def serve(run_dir: str, tail_lines: int, bulk_url: str, control_url: str) -> int:
    """The writer: batches into ``merged.log`` and the tails, tails answered, until asked to close
    (or SIGTERM, or this process's parent is gone)."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    parent = os.getppid()
    ctx = zmq.Context()
    bulk, ctl = ctx.socket(zmq.PULL), ctx.socket(zmq.DEALER)
    bulk.setsockopt(zmq.RCVHWM, BULK_HWM)
    for sock in (bulk, ctl):
        sock.setsockopt(zmq.LINGER, 0)
    bulk.bind(bulk_url)
    ctl.bind(control_url)
    # What the coordinator must hear (disk faults, batches that could not be decoded) waits here until its
    # control socket has connected: a DEALER with no peer yet takes nothing (a writer that started first).
    reports: list[list[Any]] = []

    def report(item: list[Any]) -> None:
        if len(reports) < MAX_REPORTS:
            reports.append(item)

    health = IOHealth(node=COORDINATOR_NODE)
    health.listeners.append(lambda kind, fields: report(["io", kind, fields]))
    joblog = JobLog(run_dir, health, tail_lines,
                    gap=lambda lines, nbytes, error: gap_line(time.time(), COORDINATOR_NODE, lines, nbytes, error))
    poller = zmq.Poller()
    poller.register(ctl, zmq.POLLIN)
    poller.register(bulk, zmq.POLLIN)
    flushed = time.monotonic()
    closing = False
    while not closing and not stopping and os.getppid() == parent:
        ready = dict(poller.poll(int(FLUSH_EVERY * 1000)))
        if ctl in ready:  # before the bulk: a tail is evidence someone waits for
            closing = _control(ctl, joblog)
        if bulk in ready or closing:
            closing = _batches(bulk, joblog, report, limit=None if closing else 64) or closing
        while reports and _send(ctl, reports[0]):
            del reports[0]
        if time.monotonic() - flushed >= FLUSH_EVERY:
            joblog.flush()
            flushed = time.monotonic()
    joblog.close()
    bulk.close()
    ctl.close()
    ctx.term()
    return 0


def _send(sock: zmq.Socket[bytes], item: list[Any]) -> bool:
    """``item`` to the coordinator if its socket takes it now (False: no peer yet, or its queue is full)."""
    try:
        sock.send(msgpack.packb(item), zmq.NOBLOCK)
    except zmq.Again:
        return False
    return True


def _control(ctl: zmq.Socket[bytes], joblog: JobLog) -> bool:
    """The coordinator's requests waiting: tails answered. Returns whether it asked to close."""
    while True:
        try:
            req = msgpack.unpackb(ctl.recv(zmq.NOBLOCK))
        except zmq.Again:
            return False
        if req[0] == "close":
            return True
        if req[0] == "tail":
            _send(ctl, ["tail", req[1], joblog.tail(RankKey(req[2], req[3]), req[4])])


def _batches(bulk: zmq.Socket[bytes], joblog: JobLog, report: Callable[[list[Any]], None], limit: int | None) -> bool:
    """Up to ``limit`` queued batches (None: all) into the job log; a batch that cannot be decoded is
    marked in merged.log and ``report``-ed to the coordinator (which counts it). Returns whether the
    last batch was handed over (the coordinator closes)."""
    done = 0
    while limit is None or done < limit:
        try:
            parts = bulk.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return False
        if len(parts) != 2:  # the empty message behind the last batch
            return True
        done += 1
        meta, frame = parts
        node, wall, keep_tails, shed_before = msgpack.unpackb(meta)
        if shed_before:  # (shed from any node: the count is the coordinator's since its last batch handed over)
            joblog.merged.write(f"{iso_utc(time.time())} {COORDINATOR_NODE} | neuron-watch: {shed_before} line(s) "
                                "of the job's output are missing here: shed while this log's writer was behind (the "
                                "ranks' own logs have them)\n")
        try:
            body = decode_body(Kind.LINES, frame)
        except ProtocolError as exc:
            # Authenticated; the coordinator decoded the part its judge takes (a light batch's judged ranks:
            # Lines.logged), not the other ranks' rows: a fault there is found here, marked and counted.
            log.warning("merged.log: a batch of %s could not be decoded: %s", node, exc)
            joblog.merged.write(f"{iso_utc(time.time())} {COORDINATOR_NODE} | neuron-watch: a batch of {node} is "
                                f"missing here: it could not be decoded ({exc}); the ranks' own logs have its lines\n")
            report(["unreadable", node, str(exc)])
            continue
        assert isinstance(body, Lines)
        joblog.write_rows(node, wall, body, keep_tails)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="neuron-watch's job log writer (started by the coordinator)")
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--tail-lines", type=int, required=True)
    ap.add_argument("--bulk", required=True)
    ap.add_argument("--control", required=True)
    a = ap.parse_args(argv)
    return serve(a.run_dir, a.tail_lines, a.bulk, a.control)


if __name__ == "__main__":
    sys.exit(main())
