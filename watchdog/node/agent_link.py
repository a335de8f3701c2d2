"""The agent's side of the coordinator link: batching, heartbeats, a bounded resend buffer.

What a node's wrapper calls (all times passed in: ``now`` is ``time.monotonic()``, ``wall``
is ``time.time()``)::

    link = AgentLink(address, secret, job="1234", node="node1", session=new_session(time.time()))
    link.hello(hostname, pid, ranks, now, wall)
    link.set_knowledge_base(kb)                                   # classify batches here (see below)
    link.add_line(line)                                           # a LogLine, as lines are read
    link.add_compilers([...]); link.add_exits([...]); link.status("launched", ...)
    for cmd in link.tick(now, wall):                              # every ~50 ms
        ...  # Stop / Launch / CaptureEvidence / Shutdown, already authenticated

Delivery: every message (lines, heartbeats, ...) gets the next sequence number and stays in
the :class:`Outbox` until the coordinator acknowledges it. While the coordinator is away
(``send`` refused: the DEALER has ``IMMEDIATE`` set) messages accumulate in the outbox; when it
answers again, or when no ack came for ``resend_after`` seconds, everything unacknowledged is
sent again in order (go-back-N; the coordinator drops duplicates by sequence number). The
outbox is bounded (``max_lines`` lines, ``max_msgs`` messages): beyond that the *oldest*
messages are dropped and counted, and the counts travel in every heartbeat and status, so
the coordinator learns what was lost when it comes back. Nothing is lost silently. The outbox
is bounded in bytes too (``max_bytes``), and at most ``window_bytes`` of it are in flight
unacknowledged (libzmq would otherwise copy a flood of megabyte batches into its own queue).

Size: every frame stays under the schema's :data:`~neuron_watch.wire.protocol.MAX_FRAME_BYTES` (a
bigger one is refused by the coordinator, and would be resent forever): a line longer than
:data:`~neuron_watch.wire.protocol.MAX_LINE_BYTES` is cut, marked and counted (``truncated_lines``,
reported in every heartbeat and status), and a batch whose text would exceed
:data:`~neuron_watch.wire.protocol.MAX_BODY_BYTES` is split into several messages.

Replay protection: every message echoes the coordinator session last heard from (0 before the
first answer); the coordinator ignores messages that do not echo its own session and answers them
with a challenge (``ack`` -1 from its session), upon which everything unacknowledged is resent.
A coordinator of another job with the same secret answers ``refused``: :meth:`AgentLink.dispatch`
raises :class:`JobRefused` naming both jobs.

Batches: each ``lines`` message carries, per rank, the rank's lines joined into one text, and
the lines this node's knowledge base matched: the node's own CPU classifies its lines
(:func:`neuron_watch.diagnosis.classify.classify_batch`, the one classification of a batch), so
the coordinator's work is per batch and rank, not per line. A rank that printed nothing but steps
(most ranks of a training job, most of the time) goes as its text and one progress row, its latest
step: no match, no second copy of the line. The link only transports: the lines and their matches
become the body's rows in :func:`neuron_watch.wire.protocol.lines_body`. Without a knowledge base
the batch goes unclassified and the coordinator's judge classifies it.
"""

from __future__ import annotations

import collections
import dataclasses
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from neuron_watch import __version__
from neuron_watch.diagnosis.classify import KnowledgeBase, classify_batch, kb_fingerprint
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.errors import ConfigError
from neuron_watch.events import EvidenceReport, LauncherExit, LogLine, NodeStatus, StopReport
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import (
    MAX_BODY_BYTES,
    MAX_LINE_BYTES,
    NO_VERDICT,
    Ack,
    Body,
    CaptureEvidence,
    Disposition,
    ExitInfo,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Launch,
    Lines,
    Msg,
    Procs,
    ProcSample,
    ProtocolError,
    RankCollectives,
    Refused,
    SequenceTracker,
    Shutdown,
    Status,
    Stop,
    WorkerActivity,
    batch_age_at,
    cut_line,
    decode,
    encode_body,
    encode_header,
    kind_of,
    lines_body,
    one_line_each,
    procs_every_at,
    utf8_sizes,
    window_bytes_at,
)
from neuron_watch.wire.transport import AgentSocket

COORDINATOR_SENDER = "coordinator"
#: Weight of one line in a lines body beyond its text: the "\n" that joins it, and a match row
#: (a matched line travels twice: in its rank's text and as the match's text).
_LINE_OVERHEAD = 64


class JobRefused(ConfigError):
    """The coordinator refused us: it belongs to another job with the same secret, or another live
    agent of this job already holds this node's name or place (``reason`` says which, naming both)."""

    def __init__(self, coordinator_job: str, agent_job: str, address: str = "", reason: str = "") -> None:
        at = f" at {address}" if address else ""
        self.same_job = coordinator_job == agent_job
        if self.same_job:
            super().__init__(f"the coordinator{at} refused this node: {reason}",
                             "give every node of the job its own --node_rank (a static rendezvous) and its own "
                             "NEURON_WATCH_NODE, if set")
        else:
            super().__init__(
                f"the coordinator{at} runs job {coordinator_job!r}, this node belongs to job {agent_job!r}: refused "
                "(two jobs share a coordinator port and a secret)",
                "give each job its own --job-id and coordinator port (--coordinator HOST:PORT), or its own secret",
            )
        self.coordinator_job = coordinator_job
        self.agent_job = agent_job
        self.reason = reason


class NodeControl(Protocol):
    """What :meth:`AgentLink.dispatch` needs of a node's wrapper (the supervisor)."""

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        """Capture this node's evidence for ``incident`` before anything is stopped; returns its report.
        ``verdict``: the pending verdict (empty when the coordinator sent none)."""

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        """Stop every process of the job on this node (SIGTERM, ``deadline``, SIGKILL, reap); its report.
        ``verdict``: the incident's final verdict, to complete this node's bundle with."""

    def checkpoint(self) -> str:
        """The newest complete checkpoint this node sees ('' if none)."""

    def launch(self, generation: int, checkpoint: str) -> None:
        """Start this node's processes as ``generation`` from ``checkpoint`` ('' = from scratch)."""


class StopsInBackground(Protocol):
    """A :class:`NodeControl` whose stop runs without blocking the loop (see :meth:`AgentLink.dispatch`)."""

    def begin_stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], StopReport | None]:
        """Start stopping; returns a poll that gives the stop's report once it is done (None until then)."""

    def begin_capture(self, incident: str, reason: str,
                      verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], EvidenceReport | None]:
        """Start capturing; returns a poll that gives the evidence report once it is done (None until then)."""


def _stop_words(report: StopReport) -> str:
    """A stop's report in a few words (the ``stopped`` status's detail, for people)."""
    if report.error:
        return f"stop failed: {report.error}"
    return f"{report.rung or 'stopped'}, {report.seconds or 0.0:.1f}s" + (
        f", {len(report.survivors)} survivor(s)" if report.survivors else "")


def new_session(wall: float) -> int:
    """A session id that grows with start time: microseconds since the epoch, 12 random low bits."""
    return (int(wall * 1_000_000) << 12) | secrets.randbelow(4096)


@dataclass(frozen=True)
class LinkSettings:
    """Batching, heartbeat and buffer bounds of an agent link."""

    # Send a batch when this many lines are pending (a flood; normally batch_age decides) ... The
    # coordinator's cost is per batch and rank: 4,000 lines of 32 ranks is ~125 lines a rank
    # (bench_wire.py: 2x the coordinator throughput of 500-line batches).
    batch_lines: int = 4000
    batch_age: float = 0.05  # ... or when the oldest pending line is this old (seconds)
    heartbeat: float = 1.0  # seconds between heartbeats when nothing else is sent
    resend_after: float = 3.0  # no ack progress for this long -> resend everything unacknowledged
    max_lines: int = 200_000  # outbox bound, in lines
    max_msgs: int = 20_000  # outbox bound, in messages
    max_bytes: int = 512 << 20  # outbox bound, in encoded bytes (a flood of megabyte lines)
    window_bytes: int = 128 << 20  # at most this much sent and not yet acknowledged


@dataclass
class _Pending:
    header: Header
    body: bytes
    lines: int


class Outbox:
    """Sequence numbers, the bounded unacknowledged buffer, and the go-back-N cursor. No I/O."""

    def __init__(self, max_lines: int, max_msgs: int, max_bytes: int = 1 << 62) -> None:
        self.max_lines = max_lines
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        self.next_seq = 0
        self._q: collections.deque[_Pending] = collections.deque()
        self._lines = 0
        self._bytes = 0
        self._cursor = 0  # index in _q of the next message to (re)send
        self.in_flight = 0  # bytes of the messages before the cursor (sent, not acknowledged)
        self.dropped_lines = 0
        self.dropped_msgs = 0

    def add(self, header: Header, body: bytes, lines: int) -> Header:
        """Queue a message; assigns ``header.seq``; drops the oldest messages beyond the bounds."""
        header = dataclasses.replace(header, seq=self.next_seq)
        self.next_seq += 1
        self._q.append(_Pending(header, body, lines))
        self._lines += lines
        self._bytes += len(body)
        while len(self._q) > 1 and (len(self._q) > self.max_msgs or self._lines > self.max_lines
                                    or self._bytes > self.max_bytes):
            self.drop_oldest()
        return header

    def drop_oldest(self) -> None:
        """Give up the oldest message (counted)."""
        old = self._q.popleft()
        self._lines -= old.lines
        self._bytes -= len(old.body)
        self.dropped_msgs += 1
        self.dropped_lines += old.lines
        if self._cursor > 0:
            self._cursor -= 1
            self.in_flight -= len(old.body)

    @property
    def base(self) -> int:
        """Oldest sequence number still held (= next_seq when empty)."""
        return self._q[0].header.seq if self._q else self.next_seq

    def ack(self, seq: int) -> int:
        """Forget messages up to ``seq``; returns how many were released."""
        n = 0
        while self._q and self._q[0].header.seq <= seq:
            old = self._q.popleft()
            self._lines -= old.lines
            self._bytes -= len(old.body)
            if n < self._cursor:
                self.in_flight -= len(old.body)
            n += 1
        self._cursor = max(0, self._cursor - n)
        if self._cursor == 0:
            self.in_flight = 0
        return n

    def rewind(self) -> None:
        """Go back: the next :meth:`unsent` starts at the oldest unacknowledged message."""
        self._cursor = 0
        self.in_flight = 0

    def unsent(self) -> _Pending | None:
        return self._q[self._cursor] if self._cursor < len(self._q) else None

    def mark_sent(self) -> None:
        self.in_flight += len(self._q[self._cursor].body)
        self._cursor += 1

    def __len__(self) -> int:
        return len(self._q)

    @property
    def lines(self) -> int:
        return self._lines


@dataclass
class LinkCounters:
    """What the agent refused or lost; reported in :meth:`AgentLink.summary`."""

    sent: int = 0
    resent: int = 0
    resend_rounds: int = 0
    send_refused: int = 0  # sends refused while the coordinator was away (retried later)
    bad_frames: int = 0  # unauthenticated / undecodable frames from the socket, dropped
    bad_by_problem: dict[str, int] = dataclasses.field(default_factory=dict)
    wrong_target: int = 0  # commands for another agent session or job, dropped
    replayed: int = 0  # duplicate or stale-session commands, dropped
    challenges: int = 0  # the coordinator asked for a resend with its session echoed
    truncated_lines: int = 0  # lines cut to MAX_LINE_BYTES (each marked in its text)
    truncated_bytes: int = 0
    split_batches: int = 0  # batches sent as several messages to stay under the frame limit
    oversize_dropped: int = 0  # messages that could not be made to fit (never expected; counted as dropped)


class AgentLink:
    """One node's link to the coordinator. Not thread-safe: call it from one loop."""

    def __init__(self, address: str, secret: bytes, *, job: str, node: str, session: int,
                 generation: int = 0, settings: LinkSettings | None = None,
                 socket: AgentSocket | None = None, kb: KnowledgeBase | None = None) -> None:
        self.settings = settings or LinkSettings()
        self.job, self.node, self.session, self.generation = job, node, session, generation
        self.signer = Signer.for_agent(secret, job)
        self.address = address
        self.sock = socket or AgentSocket(address)
        self.outbox = Outbox(self.settings.max_lines, self.settings.max_msgs, self.settings.max_bytes)
        self.counters = LinkCounters()
        self._commands = SequenceTracker(in_order=False)
        self._pending: list[LogLine] = []
        self._pending_since: float | None = None
        self._last_sent = -1e18
        self._max_sent = -1
        #: the job's size and how far behind the coordinator is, as its last ack said (see Ack)
        self.job_nodes = 0
        self.coordinator_behind = 0.0
        #: a periodic process reading held until procs_every has passed (a bigger job's pace): the
        #: arguments of add_compilers, and the flight recorder readings of the readings it replaced
        self._held_procs: tuple[list[tuple[int, int, float, float]], dict[str, Any]] | None = None
        self._held_readings: list[tuple[int, tuple[GroupProgress, ...], str, float]] = []
        self._last_procs = -1e18
        self._last_progress: float | None = None  # last ack progress (or empty outbox)
        self._last_rewind = -1e18
        self.last_heard: float | None = None  # last authenticated message from the coordinator
        self.coordinator_session: int | None = None
        self._hello: Hello | None = None
        self._kb: KnowledgeBase | None = None
        self._kb_fp = 0
        self.progress_lines = 0  # progress lines this node's knowledge base matched so far
        #: a stop running in the background: its poll; commands received meanwhile wait in _deferred
        self._stopping: Callable[[], StopReport | None] | None = None
        #: a capture running in the background: its poll (commands received meanwhile wait in _deferred)
        self._capturing: Callable[[], EvidenceReport | None] | None = None
        self._deferred: list[Msg] = []
        if kb is not None:
            self.set_knowledge_base(kb)

    def set_knowledge_base(self, kb: KnowledgeBase | None) -> None:
        """Classify batches with ``kb`` from now on (the coordinator's judge must use the same table
        and ``--progress-regex``: it checks the fingerprint and classifies itself otherwise)."""
        self._kb = kb
        self._kb_fp = 0 if kb is None else kb_fingerprint(kb)

    # -- producing ---------------------------------------------------------------------------

    def _enqueue(self, body: Body, now: float, wall: float, rank: int = -1) -> None:
        h = Header(kind=kind_of(body), job=self.job, node=self.node, session=self.session,
                   generation=self.generation, seq=0, mono=now, wall=wall, rank=rank)
        data = encode_body(body)
        lines = body.n_lines if isinstance(body, Lines) else 0
        if len(data) > MAX_BODY_BYTES:  # batches are split and lines cut before: not expected, but never resent forever
            self.counters.oversize_dropped += 1
            self.outbox.dropped_msgs += 1
            self.outbox.dropped_lines += lines
            return
        self.outbox.add(h, data, lines)

    def hello(self, hostname: str, pid: int, ranks: Iterable[int], now: float, wall: float, place: int = -1) -> None:
        """Announce this agent session and its place in the job (sent again whenever a new
        coordinator session answers)."""
        self._hello = Hello(hostname, pid, tuple(ranks), __version__, place)
        self._enqueue(self._hello, now, wall)

    def add_line(self, line: LogLine) -> None:
        """Queue one line of this node for the next batch (sent by :meth:`tick` or when the batch is
        full). A line longer than MAX_LINE_BYTES is cut (marked in its text) and counted."""
        if len(line.text) > _CUT_CHECK:
            text, cut = cut_line(line.text)
            if cut:
                self.counters.truncated_lines += 1
                self.counters.truncated_bytes += cut
                line = line._replace(text=text)
        if not self._pending:
            self._pending_since = line.mono
        self._pending.append(line)
        if len(self._pending) >= self.settings.batch_lines:
            self.flush_lines(line.mono, line.wall)

    def flush_lines(self, now: float, wall: float) -> None:
        """Turn the pending lines into one ``lines`` message (joined per rank, classified)."""
        if not self._pending:
            return
        pending = self._pending
        self._pending = []
        self._pending_since = None
        for part in _split_by_size(pending):
            body = self.batch(part, now, wall)
            self._enqueue(body, now, wall, rank=body.ranks[0].rank if len(body.ranks) == 1 else -1)
            if part is not pending:
                self.counters.split_batches += 1

    def batch(self, lines: Sequence[LogLine], now: float, wall: float) -> Lines:
        """The ``lines`` body of ``lines`` (this node's, in read order), classified with the knowledge
        base when there is one (:func:`~neuron_watch.diagnosis.classify.classify_batch`)."""
        lines = one_line_each(lines)
        if self._kb is None:
            return lines_body(lines, now, wall)
        found = classify_batch(self._kb, lines)
        self.progress_lines += found.progress_lines
        return lines_body(lines, now, wall, found.matches, found.progress, self._kb_fp)

    def add_compilers(self, samples: Iterable[tuple[int, int, float, float]], now: float, wall: float,
                      locks: Iterable[str] = (), always: bool = False,
                      workers: Iterable[tuple[int, int]] = (),
                      collectives: Iterable[tuple[int, tuple[GroupProgress, ...], str, float]] = (),
                      activity: Iterable[WorkerActivity] = ()) -> None:
        """``(rank, pid, cpu_seconds, mono)`` of *all* live compiler processes, and fresh cache locks.

        ``always``: send even when there is nothing (the coordinator learns that compilers ended).
        ``collectives``: ``(rank, groups, problem, mono)`` flight recorder readings taken since the
        last call (see :class:`~neuron_watch.wire.protocol.RankCollectives`). ``activity``: each rank
        process's CPU (its whole tree) and state.

        Such a periodic reading (``always``) goes at most every :func:`~neuron_watch.wire.protocol.procs_every_at`
        seconds of the job's size: one held meanwhile is replaced by the next (a reading is a snapshot
        of live processes), its flight recorder readings kept and sent with it, each with its own
        time. Any other reading (a rank's last words) goes at once, with what was held.
        """
        samples, collectives = list(samples), list(collectives)
        if always and now - self._last_procs < procs_every_at(self.job_nodes):
            self._held_readings += collectives
            self._held_procs = (samples, {"locks": tuple(locks), "workers": tuple(workers),
                                          "activity": tuple(activity)})
            return
        self._send_procs(samples, now, wall, locks, always, workers, collectives, activity)

    def _flush_procs(self, now: float, wall: float, due: bool = False) -> None:
        """Send the held reading (``due``: only once procs_every has passed)."""
        if self._held_procs is None or (due and now - self._last_procs < procs_every_at(self.job_nodes)):
            return
        samples, kw = self._held_procs
        self._send_procs(samples, now, wall, kw["locks"], True, kw["workers"], [], kw["activity"])

    def _send_procs(self, samples: list[tuple[int, int, float, float]], now: float, wall: float,
                    locks: Iterable[str], always: bool, workers: Iterable[tuple[int, int]],
                    collectives: list[tuple[int, tuple[GroupProgress, ...], str, float]],
                    activity: Iterable[WorkerActivity]) -> None:
        held = self._held_procs
        collectives = self._held_readings + collectives
        self._held_procs, self._held_readings = None, []
        if held is not None and not always:  # a rank's last words: the held snapshot is the newest one
            samples, locks, workers, activity = held[0], held[1]["locks"], held[1]["workers"], held[1]["activity"]
            always = True
        if always:
            self._last_procs = now
        s = tuple(ProcSample(r, p, c, max(0.0, now - m)) for r, p, c, m in samples)
        lk, wk = tuple(locks), tuple(workers)
        fr = tuple(RankCollectives(r, g, why, max(0.0, now - m)) for r, g, why, m in collectives)
        if s or lk or wk or fr or always:
            self._enqueue(Procs(s, lk, wk, fr, tuple(activity)), now, wall)

    def add_exits(self, exits: Iterable[tuple[int, int, float]], now: float, wall: float) -> None:
        """``(rank, exit_code, mono)`` of processes that exited (rank -1: the node's launcher)."""
        e = tuple(ExitInfo(r, c, max(0.0, now - m)) for r, c, m in exits)
        if e:
            self.flush_lines(now, wall)  # lines printed before an exit must arrive before it
            self._flush_procs(now, wall)  # and the processes seen before it
            self._enqueue(Exits(e), now, wall)

    def status(self, state: NodeStatus, now: float, wall: float, detail: str = "", checkpoint: str = "",
               report: EvidenceReport | StopReport | LauncherExit | None = None) -> None:
        """Report the node's state, with the typed report of ``evidence_done`` and ``stopped``."""
        self.flush_lines(now, wall)
        self._flush_procs(now, wall)
        self._enqueue(Status(state.value, detail, checkpoint, self.outbox.dropped_lines, self.outbox.dropped_msgs,
                             self.counters.truncated_lines, {} if report is None else report.to_wire()), now, wall)

    # -- the loop ----------------------------------------------------------------------------

    def tick(self, now: float, wall: float) -> list[Msg]:
        """Receive commands, flush due batches, send heartbeats and (re)send; returns new commands.

        Acks are handled here; the returned messages are authenticated, addressed to this
        session, not replays, and of kinds capture_evidence / stop / launch / shutdown.
        """
        commands = self._receive(now, wall)
        s = self.settings
        if self._pending_since is not None and now - self._pending_since >= batch_age_at(self.job_nodes, s.batch_age):
            self.flush_lines(now, wall)
        self._flush_procs(now, wall, due=True)
        if len(self.outbox) == 0 and now - self._last_sent >= s.heartbeat:
            self._enqueue(Heartbeat(len(self.outbox), self.outbox.dropped_lines, self.outbox.dropped_msgs,
                                    self.counters.truncated_lines), now, wall)
        if len(self.outbox) == 0 or self._last_progress is None:
            self._last_progress = now
        elif now - self._last_progress >= (wait := s.resend_after + self.coordinator_behind) and (
                now - self._last_rewind >= wait):
            # A coordinator `behind` seconds has our messages in its queue: resending them sooner only
            # queues copies behind them (it drops duplicates, after paying for their signature).
            self._rewind(now)
            # Something new after the resends: the coordinator takes a new route (a reconnect) only
            # from a message it has not seen (a replayed copy must not move it), and acks it.
            self._enqueue(Heartbeat(len(self.outbox), self.outbox.dropped_lines, self.outbox.dropped_msgs,
                                    self.counters.truncated_lines), now, wall)
        self._send_due(now)
        return commands

    def _rewind(self, now: float) -> None:
        self.outbox.rewind()
        self._last_rewind = now
        self.counters.resend_rounds += 1

    def _send_due(self, now: float) -> None:
        window = window_bytes_at(self.job_nodes, self.settings.window_bytes)
        echo = self.coordinator_session or 0
        while (p := self.outbox.unsent()) is not None:
            if self.outbox.in_flight and self.outbox.in_flight + len(p.body) > window:
                return  # the rest goes as acks come back (or at the next resend round)
            if not echo and self.outbox.in_flight:
                # Until the coordinator told us its session it ingests nothing we send: one message
                # asks for the challenge, the rest waits (no megabytes sent twice).
                return
            h = dataclasses.replace(p.header, base=self.outbox.base, sent=now, echo=echo)
            if not self.sock.send(self.signer.sign([encode_header(h), p.body])):
                self.counters.send_refused += 1
                return
            if p.header.seq <= self._max_sent:
                self.counters.resent += 1
            else:
                self.counters.sent += 1
                self._max_sent = p.header.seq
            self.outbox.mark_sent()
            self._last_sent = now

    def _receive(self, now: float, wall: float) -> list[Msg]:
        out: list[Msg] = []
        while (frames := self.sock.recv()) is not None:
            try:
                msg = decode(self.signer.verify(frames))
            except ProtocolError as exc:
                self.counters.bad_frames += 1
                self.counters.bad_by_problem[exc.problem] = self.counters.bad_by_problem.get(exc.problem, 0) + 1
                continue
            h = msg.header
            if not h.kind.is_command or h.job != self.job or h.target != self.session:
                self.counters.wrong_target += 1
                continue
            if self._commands.check(COORDINATOR_SENDER, h.session, h.seq, h.seq) is not Disposition.ACCEPT:
                self.counters.replayed += 1
                continue
            self.last_heard = now
            if self.coordinator_session != h.session:
                new_coordinator = self.coordinator_session is not None
                self.coordinator_session = h.session
                # The coordinator ignored what we sent without its session echoed: resend it all.
                self._rewind(now)
                if new_coordinator and self._hello is not None:
                    # A restarted coordinator knows nothing of us: introduce ourselves again.
                    self._enqueue(self._hello, now, wall)
            if isinstance(msg.body, Ack):
                if msg.body.seq < 0:
                    self.counters.challenges += 1
                else:
                    self.job_nodes, self.coordinator_behind = msg.body.nodes, msg.body.behind
                if self.outbox.ack(msg.body.seq):
                    self._last_progress = now
                continue
            out.append(msg)
        return out

    def dispatch(self, commands: Iterable[Msg], node: NodeControl, now: float, wall: float) -> int | None:
        """Carry out commands on this node through ``node`` and report each step's status.

        capture_evidence -> ``node.capture(incident, reason)``, then status ``evidence_done``;
        stop -> ``node.stop(deadline)`` (SIGTERM, deadline, SIGKILL, reap), then ``stopped`` with
        the newest complete checkpoint this node sees; launch -> ``node.launch(generation,
        checkpoint)``, then ``launched``; shutdown -> returns its exit code (the caller stops and
        exits with it). Returns None while the job goes on.

        A ``node`` with ``begin_stop`` (:class:`StopsInBackground`) stops without blocking: the
        stop (its SIGTERM deadline, its uploads) runs while the caller's loop keeps turning
        (heartbeats, status, console), ``stopped`` is reported once it is done, and the commands
        received meanwhile are carried out after it, in order. Call this every loop turn (with no
        commands too) while :attr:`stop_running`. A ``node`` with ``begin_capture`` captures the same
        way (reading rank logs, waiting on py-spy: seconds the loop must not lose), ``evidence_done``
        once it is done; call this every turn while :attr:`capture_running` too.
        """
        if self._capturing is not None:
            self._deferred.extend(commands)
            evidence = self._capturing()
            if evidence is None:
                return None
            self._capturing = None
            self.status(NodeStatus.EVIDENCE_DONE, now, wall, detail=evidence.bundle or evidence.error, report=evidence)
        if self._stopping is not None:
            self._deferred.extend(commands)
            stopped = self._stopping()
            if stopped is None:
                return None
            self._stopping = None
            self.status(NodeStatus.STOPPED, now, wall, detail=_stop_words(stopped), checkpoint=node.checkpoint(),
                        report=stopped)
        if self._deferred:
            commands, self._deferred = [*self._deferred, *commands], []
        commands = list(commands)
        for i, msg in enumerate(commands):
            body = msg.body
            if isinstance(body, CaptureEvidence):
                begin_capture = getattr(node, "begin_capture", None)
                if callable(begin_capture):
                    self._capturing = begin_capture(body.incident, body.reason, body.verdict)
                    self._deferred = commands[i + 1:]
                    return None
                evidence = node.capture(body.incident, body.reason, body.verdict)
                self.status(NodeStatus.EVIDENCE_DONE, now, wall, detail=evidence.bundle or evidence.error,
                            report=evidence)
            elif isinstance(body, Stop):
                begin = getattr(node, "begin_stop", None)
                if callable(begin):
                    self._stopping = begin(body.deadline, body.verdict)
                    self._deferred = commands[i + 1:]
                    return None
                stopped = node.stop(body.deadline, body.verdict)
                self.status(NodeStatus.STOPPED, now, wall, detail=_stop_words(stopped), checkpoint=node.checkpoint(),
                            report=stopped)
            elif isinstance(body, Launch):
                self.set_generation(body.generation)
                node.launch(body.generation, body.checkpoint)
                self.status(NodeStatus.LAUNCHED, now, wall, checkpoint=body.checkpoint)
            elif isinstance(body, Shutdown):
                self.status(NodeStatus.EXITED, now, wall, detail=body.reason)
                return body.exit_code
            elif isinstance(body, Refused):
                raise JobRefused(body.job, self.job, self.address, body.reason)
        return None

    @property
    def stop_running(self) -> bool:
        """A stop runs in the background (see :meth:`dispatch`)."""
        return self._stopping is not None

    @property
    def capture_running(self) -> bool:
        """A capture runs in the background (see :meth:`dispatch`)."""
        return self._capturing is not None

    def rebase(self, gap: float) -> None:
        """Our own loop was away ``gap`` seconds (paused): that time is not the coordinator's silence."""
        if self.last_heard is not None:
            self.last_heard += gap
        if self._last_progress is not None:
            self._last_progress += gap

    def coordinator_silence(self, now: float) -> float | None:
        """Seconds since the coordinator was last heard (None: never heard)."""
        return None if self.last_heard is None else now - self.last_heard

    def summary(self) -> dict[str, object]:
        """Counters for the node's own summary (buffer, drops, refused frames)."""
        c = self.counters
        return {"buffered_msgs": len(self.outbox), "buffered_lines": self.outbox.lines,
                "dropped_msgs": self.outbox.dropped_msgs, "dropped_lines": self.outbox.dropped_lines,
                "sent": c.sent, "resent": c.resent, "resend_rounds": c.resend_rounds,
                "send_refused": c.send_refused, "bad_frames": c.bad_frames, "bad_by_problem": dict(c.bad_by_problem),
                "wrong_target": c.wrong_target, "replayed": c.replayed, "next_seq": self.outbox.next_seq,
                "challenges": c.challenges, "truncated_lines": c.truncated_lines,
                "truncated_bytes": c.truncated_bytes, "split_batches": c.split_batches,
                "oversize_dropped": c.oversize_dropped}

    def count_truncated(self, lines: int, nbytes: int) -> None:
        """Lines this node cut before they reached the link (longer than the tail keeps): reported
        with the link's own cut lines (``truncated_lines``, ``truncated_bytes``)."""
        self.counters.truncated_lines += lines
        self.counters.truncated_bytes += nbytes

    def count_lost(self, lines: int) -> None:
        """Lines this node lost before they reached the link (a flood's skipped backlog): reported
        with the outbox's own drops, in every heartbeat and status."""
        self.outbox.dropped_lines += lines

    def set_generation(self, generation: int) -> None:
        """Messages from now on belong to ``generation`` (after a Launch command)."""
        self.generation = generation

    def close(self) -> None:
        self.sock.close()


#: Lines up to this many characters cannot exceed MAX_LINE_BYTES (4 bytes a character at most).
_CUT_CHECK = MAX_LINE_BYTES // 4


def _split_by_size(pending: list[LogLine]) -> list[list[LogLine]]:
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
