"""The agent's side of the coordinator link: the session, heartbeats, sending and resending.

What a node's wrapper calls (all times passed in: ``now`` is ``time.monotonic()``, ``wall``
is ``time.time()``)::

    link = AgentLink(address, secret, job="1234", node="node1", session=new_session(time.time()))
    link.hello(hostname, pid, ranks, now, wall)
    link.set_knowledge_base(kb)                                   # classify batches here (see below)
    link.add_line(line)                                           # a LogLine, as lines are read
    link.add_compilers([...]); link.add_exits([...]); link.status("launched", ...)
    for cmd in link.tick(now, wall):                              # every ~50 ms
        ...  # Stop / Launch / CaptureEvidence / Shutdown, already authenticated

Its parts: the lines' batches (:mod:`~neuron_watch.node.line_batches`: cut, classified, packed,
split), the process readings' pace (:mod:`~neuron_watch.node.proc_readings`), the bounded resend
buffer (:mod:`~neuron_watch.wire.outbox`) and the commands carried out
(:mod:`~neuron_watch.node.link_commands`). The link only transports.

Delivery: every message (lines, heartbeats, ...) gets the next sequence number and stays in
the :class:`~neuron_watch.wire.outbox.Outbox` until the coordinator acknowledges it. While the
coordinator is away (``send`` refused: the DEALER has ``IMMEDIATE`` set) messages accumulate in the
outbox; when it answers again, or when no ack came for ``resend_after`` seconds, everything
unacknowledged is sent again in order (go-back-N; the coordinator drops duplicates by sequence
number). The outbox is bounded (``max_lines`` lines, ``max_msgs`` messages): beyond that the
*oldest* messages are dropped and counted, and the counts travel in every heartbeat and status, so
the coordinator learns what was lost when it comes back. Nothing is lost silently. The outbox
is bounded in bytes too (``max_bytes``), and at most ``window_bytes`` of it are in flight
unacknowledged (libzmq would otherwise copy a flood of megabyte batches into its own queue).

Size: every frame stays under the schema's :data:`~neuron_watch.wire.protocol.MAX_FRAME_BYTES` (a
bigger one is refused by the coordinator, and would be resent forever): lines are cut and batches
split before (:mod:`~neuron_watch.node.line_batches`), and a message that still does not fit is
dropped and counted (``oversize_dropped``).

Replay protection: every message echoes the coordinator session last heard from (0 before the
first answer); the coordinator ignores messages that do not echo its own session and answers them
with a challenge (``ack`` -1 from its session), upon which everything unacknowledged is resent.
A coordinator of another job with the same secret answers ``refused``: :meth:`AgentLink.dispatch`
raises :class:`~neuron_watch.node.link_commands.JobRefused` naming both jobs.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable

from neuron_watch import __version__
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.events import EvidenceReport, LauncherExit, LogLine, NodeStatus, StopReport
from neuron_watch.node.bulk_shed import judged_part, sheds_bulk
from neuron_watch.node.line_batches import LineBatches
from neuron_watch.node.link_commands import CommandRunner, NodeControl
from neuron_watch.node.link_settings import LinkCounters, LinkSettings
from neuron_watch.node.proc_readings import ProcReadings, Reading, Sample
from neuron_watch.node.urgent import is_urgent, urgent_signatures
from neuron_watch.recovery.turns import earliest
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.outbox import Outbox
from neuron_watch.wire.protocol import (
    MAX_BODY_BYTES,
    Ack,
    Body,
    Disposition,
    ExitInfo,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Lines,
    Msg,
    Procs,
    ProtocolError,
    SequenceTracker,
    Status,
    WorkerActivity,
    batch_age_at,
    decode,
    encode_body,
    encode_header,
    kind_of,
    progress_pace_at,
    window_bytes_at,
)
from neuron_watch.wire.transport import AgentSocket

COORDINATOR_SENDER = "coordinator"


def new_session(wall: float) -> int:
    """A session id that grows with start time: microseconds since the epoch, 12 random low bits."""
    return (int(wall * 1_000_000) << 12) | secrets.randbelow(4096)


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
        self.batches = LineBatches(self.settings.batch_lines, self.counters, kb)
        #: the signatures whose matches flag a batch urgent (node/urgent.py): the coordinator takes it first
        self._urgent_ids = urgent_signatures(kb)
        self.readings = ProcReadings()
        self.runner = CommandRunner()
        self._last_sent = -1e18
        self._max_sent = -1
        #: the job's size and how far behind the coordinator is, as its last ack said (see Ack)
        self.job_nodes = 0
        self.coordinator_behind = 0.0
        self._shed_owed = 0  # lines shed of a batch that sent nothing: counted in the next lines body
        self._last_progress: float | None = None  # last ack progress (or empty outbox)
        self._last_rewind = -1e18
        self.last_heard: float | None = None  # last authenticated message from the coordinator
        self.coordinator_session: int | None = None
        self._hello: Hello | None = None

    def set_knowledge_base(self, kb: KnowledgeBase | None) -> None:
        """Classify batches with ``kb`` from now on (see :meth:`LineBatches.set_knowledge_base
        <neuron_watch.node.line_batches.LineBatches.set_knowledge_base>`)."""
        self.batches.set_knowledge_base(kb)
        self._urgent_ids = urgent_signatures(kb)

    @property
    def progress_lines(self) -> int:
        """Progress lines this node's knowledge base matched so far."""
        return self.batches.progress_lines

    # -- producing ---------------------------------------------------------------------------

    def _enqueue(self, body: Body, now: float, wall: float, rank: int = -1, urgent: bool = False) -> None:
        h = Header(kind=kind_of(body), job=self.job, node=self.node, session=self.session,
                   generation=self.generation, seq=0, mono=now, wall=wall, rank=rank,
                   urgent=urgent or is_urgent(body, self._urgent_ids))
        data = encode_body(body)
        lines = body.n_lines if isinstance(body, Lines) else 0
        if len(data) > MAX_BODY_BYTES:  # batches are split and lines cut before: not expected, but never resent forever
            self.counters.oversize_dropped += 1
            self.outbox.dropped_msgs += 1
            self.outbox.dropped_lines += lines
            return
        seq = self.outbox.add(h, data, lines).seq
        if isinstance(body, Procs):
            self.readings.enqueued(seq)

    def hello(self, hostname: str, pid: int, ranks: Iterable[int], now: float, wall: float, place: int = -1) -> None:
        """Announce this agent session and its place in the job (sent again whenever a new
        coordinator session answers)."""
        self._hello = Hello(hostname, pid, tuple(ranks), __version__, place)
        self._enqueue(self._hello, now, wall)

    def add_line(self, line: LogLine) -> None:
        """Queue one line of this node for the next batch (sent by :meth:`tick` or when the batch is
        full). A line longer than MAX_LINE_BYTES is cut (marked in its text) and counted."""
        if self.batches.add(line):
            self.flush_lines(line.mono, line.wall)

    def flush_lines(self, now: float, wall: float, everything: bool = False) -> None:
        """Turn the pending lines into ``lines`` messages (joined per rank, classified, split by size), the
        judge's share of steady progress paced by the job's size (:func:`progress_pace_at`; ``everything``:
        every row held goes now: what an exit or a status must follow)."""
        for whole in self.batches.take(now, wall, progress_pace_at(self.job_nodes), everything):
            body = self.to_send(whole)
            if body is not None:
                self._enqueue(body, now, wall, rank=body.ranks[0].rank if len(body.ranks) == 1 else -1)

    def to_send(self, body: Lines) -> Lines | None:
        """What of batch ``body`` goes: all of it, or while the coordinator's acks say it is behind
        (:func:`~neuron_watch.node.bulk_shed.sheds_bulk`) its judged part alone, the other ranks' lines
        counted in it (``Lines.shed``) and here (``bulk_lines_shed``); None: nothing goes now (its count
        goes with the next body)."""
        shedding = sheds_bulk(self.coordinator_behind)
        if not shedding and not self._shed_owed:
            return body
        part, left_out = (judged_part(body, self._shed_owed) if shedding
                          else (dataclasses.replace(body, shed=body.shed + self._shed_owed), 0))
        self.counters.bulk_lines_shed += left_out
        self._shed_owed = self._shed_owed + left_out if part is None else 0
        return part

    def add_compilers(self, samples: Iterable[Sample], now: float, wall: float,
                      locks: Iterable[str] = (), always: bool = False,
                      workers: Iterable[tuple[int, int]] = (),
                      collectives: Iterable[Reading] = (),
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
        body = self.readings.add(samples, now, self.job_nodes, locks, always, workers, collectives, activity)
        if body is not None:
            # (a reading that goes at once -- a rank's last words, a compiler seen -- may decide a verdict's culprit)
            self._enqueue(body, now, wall, urgent=not always)

    def _flush_procs(self, now: float, wall: float, due: bool = False) -> None:
        """Send the held reading (``due``: only once procs_every has passed)."""
        body = self.readings.flush(now, self.job_nodes, due)
        if body is not None:
            self._enqueue(body, now, wall)

    def add_exits(self, exits: Iterable[tuple[int, int, float]], now: float, wall: float,
                  presumed: bool = False) -> None:
        """``(rank, exit_code, mono)`` of processes that exited (rank -1: the node's launcher);
        ``presumed``: code 0 presumed from each rank's record of a normal interpreter exit."""
        e = tuple(ExitInfo(r, c, max(0.0, now - m), presumed) for r, c, m in exits)
        if e:
            self.flush_lines(now, wall, everything=True)  # lines printed before an exit must arrive before it
            self._flush_procs(now, wall)  # and the processes seen before it
            self._enqueue(Exits(e), now, wall)

    def status(self, state: NodeStatus, now: float, wall: float, detail: str = "", checkpoint: str = "",
               report: EvidenceReport | StopReport | LauncherExit | None = None) -> None:
        """Report the node's state, with the typed report of ``evidence_done`` and ``stopped``."""
        self.flush_lines(now, wall, everything=True)
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
        if self.batches.due(now, batch_age_at(self.job_nodes, s.batch_age), progress_pace_at(self.job_nodes)):
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

    def next_due(self, now: float) -> float | None:
        """When :meth:`tick` next has something to do by time (monotonic): the pending batch's age,
        a held progress row's pace, the held process reading, a heartbeat, a resend round; ``now``
        when a message waits for the socket to take it (a refused send is retried at the batch age).
        Commands and acks wake the loop on the socket."""
        s = self.settings
        age = batch_age_at(self.job_nodes, s.batch_age)
        dues: list[float | None] = [self.batches.next_due(age, progress_pace_at(self.job_nodes)),
                                    self.readings.next_due(self.job_nodes)]
        if len(self.outbox) == 0:
            dues.append(self._last_sent + s.heartbeat)
        else:
            wait = s.resend_after + self.coordinator_behind
            last_progress = now if self._last_progress is None else self._last_progress
            dues.append(max(last_progress + wait, self._last_rewind + wait))
            waits_for_challenge = not self.coordinator_session and self.outbox.in_flight
            if self.outbox.unsent() is not None and not waits_for_challenge:
                dues.append(now + age)
        return earliest(dues)

    def send_pending(self, now: float) -> None:
        """Send what the outbox holds (its window permitting) without waiting for the next tick: the
        ``exited`` status a shutdown enqueues is the last thing this node says, and no tick follows it
        (the coordinator otherwise waits out its grace for a node that has left)."""
        self._send_due(now)

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
                if new_coordinator:  # it holds none of our readings: the next one goes whole
                    self.readings.reset()
                    self.batches.pace.reset()  # nor our ranks' progress: what is held goes, the next rows at once
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
                if msg.body.seq >= 0:
                    self.readings.acked(msg.body.seq)
                continue
            out.append(msg)
        return out

    def dispatch(self, commands: Iterable[Msg], node: NodeControl, now: float, wall: float) -> int | None:
        """Carry out commands on this node through ``node``, each step's status reported here; the
        exit code of a shutdown, None while the job goes on (see
        :meth:`CommandRunner.dispatch <neuron_watch.node.link_commands.CommandRunner.dispatch>`).
        Call it every loop turn while :attr:`stop_running` or :attr:`capture_running`."""
        return self.runner.dispatch(self, commands, node, now, wall)

    @property
    def stop_running(self) -> bool:
        """A stop runs in the background (see :meth:`dispatch`)."""
        return self.runner.stop_running

    @property
    def capture_running(self) -> bool:
        """A capture runs in the background (see :meth:`dispatch`)."""
        return self.runner.capture_running

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
                "oversize_dropped": c.oversize_dropped, "block_lines_left_out": c.block_lines_left_out,
                "bulk_lines_shed": c.bulk_lines_shed}

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
        if generation != self.generation:  # a new generation's judge holds none of our readings
            self.readings.reset()
            self.batches.pace.clear()
        self.generation = generation

    def close(self) -> None:
        self.sock.close()
