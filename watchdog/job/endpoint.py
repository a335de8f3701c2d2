"""The coordinator's side of the wire: the socket, frames, trust, agent sessions and acks.

An :class:`Endpoint` drains the coordinator's ROUTER socket, decodes and authenticates each
message, orders and de-duplicates it per agent session, refuses what must be refused (another
job sharing our secret and port, a second agent claiming a node's name or place) and hands each
fresh message of a known session to its :class:`Receiver` -- the coordinator -- which ingests
it. Commands, acks and status replies leave through it, signed and addressed to the session
they are meant for.

Trust: only messages signed with the job's agent key reach the receiver
(:mod:`neuron_watch.wire.auth`); anything else -- wrong secret, garbage, replays, commands posing
as agent messages -- is dropped and counted (:class:`Counters`), never acted on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from neuron_watch.events import EventKind
from neuron_watch.job.intake import Intake
from neuron_watch.job.nodes import NodeRegistry, NodeView
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import (
    Ack,
    Body,
    Disposition,
    Header,
    Hello,
    Kind,
    Msg,
    ProtocolError,
    Refused,
    SequenceTracker,
    StatusQuery,
    StatusReply,
    decode_body,
    decode_header,
    encode,
    kind_of,
)
from neuron_watch.wire.transport import CoordinatorSocket

log = logging.getLogger("neuron_watch")

COORDINATOR_NODE = "coordinator"
#: A message's transit (its send to our receipt) is measured against each node's shortest of a
#: window this long (see NodeView.transit): a backlog that lasts a whole window reads as shorter
#: than it is, a clock drift never as a backlog.
TRANSIT_WINDOW = 300.0
#: The nodes' messages waiting this long in our queues is said (events, console), and work off the
#: verdict's path is shed: the ranks' tails are not kept, status.json is written less often
#: (:mod:`.statusfiles`). Said again every BEHIND_REPEAT seconds while it lasts.
SHED_BEHIND = 2.0
BEHIND_REPEAT = 10.0


@dataclass
class Counters:
    """Everything the coordinator refused or failed to deliver."""

    frames: int = 0
    bad: dict[str, int] = field(default_factory=dict)  # problem -> count (auth, garbage, version, ...)
    wrong_job: int = 0  # signed with this secret for another job (refused by name)
    not_agent_kind: int = 0  # validly signed but a command kind: never acted on
    unechoed: int = 0  # not echoing this coordinator's session: a replay, or an agent not yet challenged
    challenges: int = 0  # challenges sent (ack -1: "resend, echoing my session")
    duplicates: int = 0
    early: int = 0
    stale: int = 0
    send_failed: int = 0
    lines: int = 0
    status_queries: int = 0
    unclassified_batches: int = 0  # batches the agents did not classify (classified here, per line)
    #: work shed while behind (see Coordinator.behind): lines not kept in the ranks' tails (they are in
    #: merged.log and the ranks' own files), status.json writes skipped
    tail_lines_shed: int = 0
    status_writes_shed: int = 0
    #: lines (and batches) a writer process of merged.log could not take at once: shed, never waited for
    merged_lines_shed: int = 0
    merged_batches_shed: int = 0
    #: lines the nodes left out of their batches while we were behind (each batch's judged part sent alone:
    #: node/bulk_shed.py): not in merged.log, in the ranks' own logs
    lines_shed_at_nodes: int = 0
    #: batches the writer process could not decode (a row of a rank the judge did not take, which the
    #: judging thread does not check): missing from merged.log, marked there, said
    merged_batches_unreadable: int = 0
    #: procs readings that referred to one this coordinator does not hold (sent to a coordinator
    #: before it restarted): what they say was taken, the rest of them is not known
    procs_unresolved: int = 0

    def bad_total(self) -> int:
        return sum(self.bad.values())

    def summary(self) -> dict[str, Any]:
        """What ``coordinator.json`` says of them."""
        return {"lines": self.lines, "frames": self.frames,
                "refused": {"bad": dict(self.bad), "wrong_job": self.wrong_job, "not_agent_kind": self.not_agent_kind,
                            "stale_session": self.stale, "unechoed": self.unechoed},
                "challenges": self.challenges, "duplicates": self.duplicates, "early": self.early,
                "send_failed": self.send_failed, "unclassified_batches": self.unclassified_batches,
                "merged_lines_shed": self.merged_lines_shed, "lines_shed_at_nodes": self.lines_shed_at_nodes,
                "merged_batches_unreadable": self.merged_batches_unreadable, "procs_unresolved": self.procs_unresolved}


class Receiver(Protocol):
    """What the endpoint needs of the coordinator behind it."""

    @property
    def generation(self) -> int: ...  # stamped on every header and event the endpoint sends
    @property
    def events(self) -> EventLog: ...  # where refusals, joins and commands are told

    def received(self, view: NodeView, msg: Msg, now: float, frame: bytes = b"") -> None:
        """A fresh, authenticated message of ``view``'s current session, in order; ``frame``: its
        body as it crossed the wire."""

    def status_doc(self, now: float) -> dict[str, Any]:
        """The job's status document, the answer to a status query."""


class Endpoint:
    """The coordinator's socket and the agents' sessions on it. Single-threaded, like its receiver.

    Args:
        bind: ``HOST:PORT`` (port 0 = any free one; read :attr:`endpoint`) or a ZeroMQ URL.
        secret: the job secret; job: the job id every message must carry.
        registry: the job's nodes (a new session joins it, a claim is checked against it).
        receiver: the coordinator: each fresh message goes to it, and it says the generation.
        ack_interval: seconds between acks to a node with news.
        session: this coordinator's session (default: from the start time, with random low bits).
    """

    def __init__(self, bind: str, secret: bytes, job: str, *, registry: NodeRegistry, receiver: Receiver,
                 clock: Callable[[], float], ack_interval: float, session: int | None = None) -> None:
        self.job = job
        self.signer = Signer.for_coordinator(secret, job)
        self._status_signer = Signer.for_status(secret)
        self._challenged: dict[bytes, float] = {}  # routing id -> when last challenged (rate limit)
        self._refused: dict[tuple[str, str, int], float] = {}  # (job, node, session) -> when last refused
        self.clock = clock
        # Grows with the start time (agents tell a restarted coordinator by a larger session), with
        # 12 random low bits: agents echo it, so a frame captured in another session is refused.
        self.session = session if session is not None else ((time.time_ns() // 1000) << 12) | secrets.randbelow(4096)
        self.sock = CoordinatorSocket(bind)
        self.endpoint = self.sock.endpoint
        self.registry = registry
        self.nodes = registry.views
        self.receiver = receiver
        self.tracker = SequenceTracker(in_order=True)
        self.counters = Counters()
        self.ack_interval = ack_interval
        self._cmd_seq = 0
        self._last_ack = -1e18
        #: seconds the nodes' newest messages waited in our queues (see NodeView.transit): the acks
        #: say it, agents resend that much later
        self.behind = 0.0
        self._lag = 0.0
        self._transit_since = clock()
        self._behind_since: float | None = None
        self._behind_told = -1e18
        self._node_shed_said, self._node_shed_told = 0, -1e18
        self._to_ack: dict[str, NodeView] = {}  # the nodes with news since the last acks
        #: decode a paced lines body's judged part alone (:attr:`~neuron_watch.wire.protocol.Lines.logged`): set
        #: by a receiver whose job log decodes the frames itself (the writer process)
        self.judged_only = False
        #: messages taken off the socket, not yet handled: urgent ones go first (:mod:`.intake`)
        self.intake = Intake()
        #: whether urgent messages go first (set by the coordinator: :class:`~.intake.UrgentGate`)
        self.urgent_first = False

    # -- receiving ---------------------------------------------------------------------------

    def poll(self, timeout: float, budget: float = 0.05) -> int:
        """Wait up to ``timeout`` seconds for messages, then handle what is waiting for at most
        ``budget`` seconds (so the coordinator's tick -- acks, verdicts -- runs often even under a
        flood; agents resend what is not acknowledged in time). What is waiting is taken off the socket
        first and the urgent messages handled ahead of the rest (:mod:`.intake`). Returns how many were
        handled."""
        if not self.intake and not self.sock.poll(int(timeout * 1000)):
            return 0
        start = self.clock()
        n = 0
        while True:
            self._take_waiting()
            for item in (self.intake.urgent() if self.urgent_first else ()):  # (with their nodes' earlier ones)
                self.handle(item.routing_id, item.frames, self.clock(), item.header)
                n += 1
            now = self.clock()
            if now - start >= budget:
                return n
            for _ in range(16):
                if (steady := self.intake.next()) is None:
                    return n
                self.handle(steady.routing_id, steady.frames, now, steady.header)
                n += 1

    @property
    def waiting(self) -> int:
        """Messages taken off the socket and not yet handled (the loop must not sleep on the socket)."""
        return len(self.intake)

    def _take_waiting(self) -> None:
        """Take what the socket holds into :attr:`intake` (while it has room), each with its header if it
        reads (not yet trusted: it only orders; :meth:`handle` checks it all again)."""
        intake = self.intake
        while intake.room() and (item := self.sock.recv()) is not None:
            routing_id, frames = item
            header: Header | None = None
            if len(frames) == 3:
                with contextlib.suppress(ProtocolError):  # (counted when it is handled, in its turn)
                    header = decode_header(bytes(frames[0]))
            intake.put(routing_id, frames, header)

    def _bad(self, problem: str) -> None:
        self.counters.bad[problem] = self.counters.bad.get(problem, 0) + 1

    def handle(self, routing_id: bytes, frames: list[bytes], now: float, header: Header | None = None) -> None:
        """Authenticate, decode, de-duplicate and hand over one message; anything doubtful is counted.
        ``header``: ``frames[0]`` already decoded (when the message was taken off the socket).

        Nothing about a node changes (its route, ``last_heard``, its session) before the message
        is proven fresh: signed with this job's key, echoing this coordinator's session, and the
        next one of its sender's sequence. A captured frame replayed from elsewhere is a
        duplicate (or does not echo this session) and moves nothing.
        """
        self.counters.frames += 1
        try:
            if len(frames) != 3:
                self.signer.verify(frames)  # an unsigned message is refused as such
                raise ProtocolError("truncated" if len(frames) < 3 else "garbage",
                                    f"a message has 3 frames (header, body, signature), got {len(frames)}")
            # The header is read before the signature: a peer of another schema signs with other keys,
            # and its refusal must name the version, not "bad signature". Nothing acts on it unsigned.
            h = header if header is not None else decode_header(bytes(frames[0]))
            if h.kind is Kind.STATUS_QUERY:
                body = decode_body(h.kind, self._status_signer.verify(frames)[1])
                assert isinstance(body, StatusQuery)
                self._answer_status(routing_id, h, body)
                return
            if h.job != self.job and not h.kind.is_command:
                self._foreign(routing_id, frames, h, now)
                return
            frame = self.signer.verify(frames)[1]
            body = decode_body(h.kind, frame, self.judged_only)
        except ProtocolError as exc:
            self._bad(exc.problem)
            if exc.problem == "version" and self.counters.bad["version"] == 1:
                log.warning("refusing a peer: %s", exc)  # once: an old agent keeps resending
            return
        if h.kind.is_command:
            self.counters.not_agent_kind += 1
            return
        if h.job != self.job:
            self.counters.wrong_job += 1
            return
        view = self.nodes.get(h.node)
        if h.echo != self.session:
            self.counters.unechoed += 1
            st = self.tracker.stats(h.node)
            # Challenge every session we have not taken in (a new agent, one of a previous
            # coordinator, or a second agent claiming this node that started before the holder, so
            # its session is the smaller: unchallenged it would wait forever, neither refused nor
            # heard). The session we took in already knows ours: its unechoed frame is a replay.
            if (view is None or view.session != h.session) and (st is None or h.session != st.session):
                self._challenge(routing_id, h, now)
            return
        if (view is None or view.session != h.session) and self._claim_refused(routing_id, h, body, now):
            return  # another live agent holds this node's name or place: the newcomer is refused
        disp = self.tracker.check(h.node, h.session, h.seq, h.base)
        if disp is Disposition.STALE_SESSION:
            self.counters.stale += 1
            return
        if disp is Disposition.DUPLICATE:
            self.counters.duplicates += 1
            if view is not None and view.session == h.session and view.routing_id == routing_id:
                view.need_ack = True  # a resend on the node's own connection: our ack was lost
                self._to_ack[view.node] = view
            return
        if disp is Disposition.EARLY:
            self.counters.early += 1  # the sender resends what is missing first; it proves nothing yet
            return
        if view is None or view.session != h.session:
            view = self._new_session(h, routing_id, now)
        # A fresh message of the current session proves the node is alive and tells us where to
        # reach it (a reconnect gets a new routing id).
        view.routing_id = routing_id
        view.last_heard = now
        view.need_ack = True
        self._to_ack[view.node] = view
        took = now - h.sent
        if took < view.transit_next:
            view.transit_next = took
        if took < view.transit:
            view.transit = took
        elif took - view.transit > self._lag:
            self._lag = took - view.transit
        self.receiver.received(view, Msg(h, body), now, frame)

    def _challenge(self, routing_id: bytes, h: Header, now: float) -> None:
        """Tell an agent session our session (an ack of nothing, -1): it resends, echoing it.
        At most one every half second per connection."""
        if not _due(self._challenged, routing_id, now, 0.5, 4096)[0]:
            return
        self.counters.challenges += 1
        self._send_to(routing_id, h.session, Ack(-1))

    def _foreign(self, routing_id: bytes, frames: list[bytes], h: Header, now: float) -> None:
        """A message naming another job. Signed with that job's keys and our secret: a job sharing
        our secret and port -- refused by name, on both sides. Otherwise it is
        a stranger's (counted as a bad signature)."""
        other = self.signer.other_job(h.job)
        if other is None:
            raise ProtocolError("auth", "a message of another job")
        other.verify(frames)  # raises AuthError: not our secret
        self.counters.wrong_job += 1
        due, first = _due(self._refused, (h.job, h.node, h.session), now, 1.0, 1024)
        if not due:
            return
        reason = f"this coordinator runs job {self.job}"
        hdr = self._header(Kind.REFUSED, h.session, job=h.job)
        if not self.sock.send(routing_id, other.sign(encode(Msg(hdr, Refused(self.job, h.job, reason))))):
            self.counters.send_failed += 1
        if first:
            self._emit(EventKind.JOB_REFUSED, job=self.job, other_job=h.job, node=h.node,
                       reason="the same secret and coordinator port: each job needs its own --job-id and port "
                              "(or secret)")

    def _claim_refused(self, routing_id: bytes, h: Header, body: Body, now: float) -> bool:
        """A new agent session claims node ``h.node`` (and, in its hello, a place in the job). Nodes
        are known by their place; the name is for people, and bundles and S3 keys carry it. While
        another agent session holding that name or that place is alive (heard within ``silence``,
        not exited), the newcomer is refused, with a message naming both hosts; once the holder is
        silent or gone, the newcomer takes over (an agent that restarted: a new session)."""
        place = body.place if isinstance(body, Hello) else -1
        held = self.registry.holder(h.node, h.session, place, now)
        if held is None:
            return False
        holder, by_name = held
        host = f"{body.hostname} (pid {body.pid})" if isinstance(body, Hello) else "another agent"
        what = f"node {h.node!r}" if by_name else f"place {place} in the job (node_rank / SLURM_PROCID)"
        reason = (f"{what} is already held by {holder.node!r} on {holder.hostname or '?'} (pid {holder.pid}, "
                  f"place {holder.place}); refused {h.node!r} on {host}, place {place}: give every node its own "
                  "--node_rank (torchrun) and, if you name nodes, its own NEURON_WATCH_NODE")
        due, first = _due(self._refused, (h.job, h.node, h.session), now, 1.0, 1024)
        if not due:
            return True
        self._send_to(routing_id, h.session, Refused(self.job, h.job, reason))
        if first:
            self._emit(EventKind.NODE_REFUSED, node=h.node, place=place, holder=holder.node, reason=reason)
            log.warning("%s", reason)
        return True

    def _new_session(self, h: Header, routing_id: bytes, now: float) -> NodeView:
        view, rejoined = self.registry.join(h.node, h.session, routing_id, h.generation, now)
        self._emit(EventKind.NODE_REJOINED if rejoined else EventKind.NODE_JOINED, node=h.node)
        return view

    def _answer_status(self, routing_id: bytes, h: Header, query: StatusQuery) -> None:
        """A read-only status query, authenticated by the job's secret: answer with the status document."""
        self.counters.status_queries += 1
        doc = json.dumps(self.receiver.status_doc(self.clock()), default=str)
        reply = self._header(Kind.STATUS_REPLY, h.session, numbered=False)
        self.sock.send(routing_id, self._status_signer.sign(encode(Msg(reply, StatusReply(query.nonce, doc)))))

    # -- sending -----------------------------------------------------------------------------

    def _header(self, kind: Kind, target: int, *, job: str | None = None, numbered: bool = True) -> Header:
        """The header of a message of ours to agent session ``target``; ``numbered``: it takes the
        next command number (a status reply answers a query and takes none)."""
        h = Header(kind=kind, job=self.job if job is None else job, node=COORDINATOR_NODE, session=self.session,
                   generation=self.receiver.generation, seq=self._cmd_seq if numbered else 0, target=target,
                   mono=self.clock(), wall=time.time())
        if numbered:
            self._cmd_seq += 1
        return h

    def _send_to(self, routing_id: bytes, target: int, body: Body) -> bool:
        return self.sock.send(routing_id, self.signer.sign(encode(Msg(self._header(kind_of(body), target), body))))

    def send(self, node: str, body: Body) -> bool:
        """Send one signed command to ``node``'s current session. False (and counted) if it cannot go."""
        view = self.nodes.get(node)
        ok = view is not None and self._send_to(view.routing_id, view.session, body)
        if not ok:
            self.counters.send_failed += 1
        return ok

    def broadcast(self, body: Body) -> list[str]:
        """Send ``body`` to every known node; returns the nodes it could not be handed to."""
        if not isinstance(body, Ack):
            self._emit(EventKind.COMMAND, command=kind_of(body).value, nodes=sorted(self.nodes), **_fields(body))
        return [n for n in sorted(self.nodes) if not self.send(n, body)]

    def next_ack(self) -> float | None:
        """When the next acks go (None: no node sent anything since the last ones)."""
        return self._last_ack + self.ack_interval if self._to_ack else None

    def ack(self, now: float, job_nodes: int) -> bool:
        """Acknowledge what each node sent since our last ack, once per ``ack_interval``; the ack
        carries the job's size and how far behind we are (:attr:`behind`, measured here, and said
        when it matters). Returns whether the acks were due (and :attr:`behind` is new)."""
        if now - self._last_ack < self.ack_interval:
            return False
        self._last_ack = now
        # The nodes' messages of the last ack interval waited this long in our queues, at most.
        self.behind, self._lag = self._lag, 0.0
        ack_behind = round(self.behind, 3)
        self._say_behind(now, job_nodes)
        if now - self._transit_since >= TRANSIT_WINDOW:
            self._transit_since = now
            self.registry.rotate_transit()
        # Only the nodes that sent something since the last acks: not a pass over every node of the
        # job 20 times a second (1,024 on 1,024 nodes, most of them with nothing to acknowledge).
        to_ack, self._to_ack = self._to_ack, {}
        for view in to_ack.values():
            st = self.tracker.stats(view.node)
            if view.need_ack and self.nodes.get(view.node) is view and st is not None and st.session == view.session:
                view.need_ack = False
                if self.send(view.node, Ack(st.expected - 1, job_nodes, ack_behind)):
                    view.acked = st.expected - 1
        return True

    def _say_behind(self, now: float, job_nodes: int) -> None:
        """Say on the console and in events when the nodes' messages wait in our queues, by how much
        and what was shed (again every BEHIND_REPEAT seconds while it lasts), and when it is over."""
        c = self.counters
        shed = {"tail_lines_shed": c.tail_lines_shed, "status_writes_shed": c.status_writes_shed,
                "merged_lines_shed": c.merged_lines_shed, "lines_shed_at_nodes": c.lines_shed_at_nodes,
                "duplicates": c.duplicates}
        if self.behind >= SHED_BEHIND:
            if self._behind_since is None:
                self._behind_since = now
            if now - self._behind_told >= BEHIND_REPEAT:
                self._behind_told = now
                self._emit(EventKind.COORDINATOR_BEHIND, behind=round(self.behind, 1), nodes=job_nodes, **shed)
        elif self._behind_since is not None and self.behind < SHED_BEHIND / 2:
            self._emit(EventKind.COORDINATOR_CAUGHT_UP, behind_for=round(now - self._behind_since, 1), **shed)
            self._behind_since, self._behind_told = None, -1e18
        node_shed = c.lines_shed_at_nodes
        if node_shed > self._node_shed_said and now - self._node_shed_told >= BEHIND_REPEAT:
            message = (f"merged.log: {node_shed - self._node_shed_said} line(s) left out by the nodes ({node_shed} in "
                       f"all): this coordinator was behind (now {self.behind:.1f} s), so they sent each batch's judged "
                       "part alone; the judge took every batch, each rank's own log has every line")
            self.receiver.events.emit(EventKind.WARNING, self.receiver.generation, kind="lines_shed_at_nodes",
                                      message=message, lines=node_shed, behind=round(self.behind, 1))
            log.warning("%s", message)
            self._node_shed_said, self._node_shed_told = node_shed, now

    def _emit(self, kind: EventKind, **fields: Any) -> None:
        self.receiver.events.emit(kind, self.receiver.generation, **fields)

    def close(self) -> None:
        self.sock.close()


def _due(seen: dict[Any, float], key: Any, now: float, every: float, cap: int) -> tuple[bool, bool]:
    """Whether to answer ``key`` at ``now`` (not within ``every`` seconds of the last answer: a peer
    that resends is not answered at its rate), and whether it is the first time. ``seen`` forgets
    everything beyond ``cap`` keys: memory stays bounded whatever a stranger sends."""
    last = seen.get(key)
    if last is not None and now - last < every:
        return False, False
    if len(seen) >= cap:
        seen.clear()
    seen[key] = now
    return True, last is None


def _fields(body: Body) -> dict[str, Any]:
    """A command's fields for its event: plain JSON values (a verdict map is read-only on the
    wire side and cannot be deep-copied by ``dataclasses.asdict``)."""
    return {f.name: _plain(getattr(body, f.name)) for f in dataclasses.fields(body)
            if f.name not in ("seq", "generation")}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value
