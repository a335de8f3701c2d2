"""The job's coordinator: receives every node's lines, judges the whole job, drives recovery.

    neuron-watch coordinator --bind HOST:PORT --run-dir DIR [--job-id ID] [--nodes N]

A :class:`Coordinator` is a service object with a ``poll(timeout)`` / ``tick(now)`` shape:
``poll`` drains the socket (authenticate, decode, de-duplicate, ingest), ``tick`` does what is
due at ``now`` (acks, silence checks, the verdict, recovery steps, flushing files). The
command and the node-0 wrapper both run the same loop (:meth:`Coordinator.serve`).

Into its run dir it writes ``merged.log`` (every rank of every node, one line each:
``<ISO wall> <node>/rank<r> | <text>``, in arrival order) and ``events.jsonl`` (the job's events
for all nodes; same contract as the single-node wrapper), and ``coordinator.json`` (the
summary, rewritten atomically on each tick).

Trust: only messages signed with the job's agent key are ingested (:mod:`neuron_watch.auth`);
anything else -- wrong secret, garbage, replays, commands posing as agent messages -- is
dropped and counted in the summary, never acted on. A node not heard from for ``silence``
seconds is ``unobserved`` (never ``healthy``) until it speaks again.

Recovery (DESIGN.md §6), when the judge's verdict asks for a restart: every node is told to
capture evidence, then to stop (SIGTERM, deadline, SIGKILL, reap on each), then the
checkpoint is chosen once, here, and every node is told to launch generation G+1 from it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import enum
import json
import logging
import os
import re
import secrets
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from neuron_watch.auth import Signer, load_secret, write_secret_file
from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, TransportError
from neuron_watch.eventlog import EventLog, write_json_atomic
from neuron_watch.events import (
    Action,
    CompilerSample,
    Label,
    LogLine,
    RankExit,
    RankKey,
    Verdict,
    WorkerSample,
    iso_utc,
)
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.policy import Decision, JobState, JobStateMachine, RestartPolicy
from neuron_watch.protocol import (
    MAX_LINE_BYTES,
    Ack,
    Body,
    CaptureEvidence,
    Disposition,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Kind,
    Launch,
    Lines,
    Msg,
    Procs,
    ProtocolError,
    Refused,
    SequenceTracker,
    Shutdown,
    Status,
    StatusQuery,
    StatusReply,
    Stop,
    decode,
    decode_body,
    decode_header,
    encode,
    kind_of,
)
from neuron_watch.stacks import odd_one_out, stack_culprit
from neuron_watch.transport import CoordinatorSocket

log = logging.getLogger("neuron_watch")

COORDINATOR_NODE = "coordinator"
#: A loop turn this much later than the previous one means this process was paused (SIGSTOP, a
#: suspended VM): the gap is our own absence, not silence of the job or of its nodes.
PAUSE_JUMP = 5.0
#: A standalone coordinator serves this long after the job's end for every node to say it exited.
NODES_EXIT_GRACE = 10.0
#: How long a recompile's console line waits for the failed guard that follows its announcement.
RECOMPILE_REASON_WAIT = 2.0
_RECOMPILED_FUNCTION = re.compile(r"Recompiling function (\S+) in (\S+)")


class JudgeLike(Protocol):
    """What the coordinator needs of :class:`neuron_watch.judge.Judge`."""

    def observe_lines(self, lines: Any) -> Any: ...
    def observe_compilers(self, samples: Any, now: float, node: str | None = None) -> None: ...
    def observe_exit(self, ex: RankExit) -> None: ...
    def mark_unobserved(self, node: str, now: float) -> None: ...
    def mark_observed(self, node: str) -> None: ...
    def verdict(self, now: float) -> Verdict: ...


class NodeState(str, enum.Enum):
    CONNECTED = "connected"
    UNOBSERVED = "unobserved"  # silent for longer than `silence`: not healthy, not known dead


@dataclass
class NodeView:
    """What the coordinator knows of one node's agent."""

    node: str
    session: int
    routing_id: bytes
    first_heard: float
    last_heard: float
    state: NodeState = NodeState.CONNECTED
    hostname: str = ""
    pid: int = 0
    ranks: tuple[int, ...] = ()
    status: str = ""
    status_detail: str = ""
    checkpoint: str = ""
    generation: int = 0
    lines: int = 0
    reported_dropped_lines: int = 0  # the agent's own count (buffer overflow while we were away)
    reported_dropped_msgs: int = 0
    reported_truncated_lines: int = 0  # lines the agent cut to the wire's line limit (marked in their text)
    acked: int = -1
    need_ack: bool = False
    launcher_code: int | None = None  # the node's launcher exit code in this generation, once it exited
    status_since: float = 0.0  # when `status` was last set
    locks: set[str] = field(default_factory=set)  # fresh compile-cache locks this node sees
    worker_pids: dict[int, int] = field(default_factory=dict)  # rank -> pid, as the agent last saw them
    recorder: dict[int, str] = field(default_factory=dict)  # rank -> "on" or why its flight recorder is not read
    #: this incident's `evidence_done` detail (kept apart: a later `failed`/`finished` status of a
    #: node whose launcher ended by itself must not hide that it answered, nor lose its bundle)
    evidence_detail: str | None = None


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

    def bad_total(self) -> int:
        return sum(self.bad.values())


@dataclass(frozen=True)
class CoordinatorSettings:
    silence: float = 10.0  # seconds without a message -> node unobserved
    ack_interval: float = 0.05  # seconds between acks to a node with news
    verdict_interval: float = 0.1  # seconds between verdicts
    evidence_timeout: float = 60.0  # wait this long for every node's `evidence_done`
    stop_timeout: float = 15.0  # SIGTERM -> SIGKILL deadline sent with `stop`
    expected_nodes: int | None = None  # wait for this many nodes before judging
    settle: float = 3.0  # after a non-hang failure, wait this long for the root cause to arrive
    finishing_grace: float = 45.0  # ranks are ending: the launcher's own exit decides, up to this long
    tail_lines: int = 200  # per-rank tail kept in memory for evidence
    #: a tick this much later than the previous one means the coordinator itself was paused (SIGSTOP,
    #: a stuck console): the gap is not the nodes' silence, and verdicts wait ``pause_grace`` seconds
    #: for what the nodes buffered meanwhile (an agent resends within its ``resend_after``, 3 s).
    #: None: off (a caller that drives ``tick`` with a fast-forwarded clock); the wrappers set it.
    pause_jump: float | None = None
    pause_grace: float = 6.0
    upload_timeout: float = 0.0  # the nodes upload their bundles within their stop: wait that much longer
    #: a node silent at a restart (its wrapper killed, its host down) is not relaunched onto: wait
    #: this long for it to answer the stop, then end the job (exit 3) instead
    lost_node_wait: float = 600.0


def coordinator_settings(config: WatchConfig, expected_nodes: int | None, **overrides: Any) -> CoordinatorSettings:
    """The coordinator's settings from the one configuration: the same for every entry point (the
    wrapper of ``torchrun``, the ``srun`` launcher, the standalone coordinator), so that a setting
    added here reaches all of them. ``overrides``: what only one entry point decides (the standalone
    coordinator's ``--silence``)."""
    return CoordinatorSettings(stop_timeout=config.stop_timeout, evidence_timeout=config.evidence_timeout,
                               expected_nodes=expected_nodes, lost_node_wait=config.coordinator_loss_timeout,
                               pause_jump=PAUSE_JUMP,
                               upload_timeout=config.upload_timeout if config.artifacts else 0.0, **overrides)


#: The recovery steps are the job states of :mod:`neuron_watch.policy` (one state machine for all).
Phase = JobState

PROGRESS_EVENT_EVERY = 30.0  # seconds between `progress` events (the first of a generation at once)


def _json_detail(detail: str) -> dict[str, Any]:
    """An agent's status detail: JSON from a node agent, plain text from older or simpler agents."""
    try:
        d = json.loads(detail) if detail.startswith("{") else {}
    except ValueError:
        d = {}
    return d if isinstance(d, dict) else {}


class Coordinator:
    """One job's coordinator. Single-threaded: call :meth:`poll` and :meth:`tick` from one loop.

    Args:
        bind: ``HOST:PORT`` (port 0 = any free one; read :attr:`endpoint`) or a ZeroMQ URL.
        secret: the job secret (:func:`neuron_watch.auth.load_secret`).
        run_dir: where ``merged.log``, ``events.jsonl`` and ``coordinator.json`` go.
        job: the job id every message must carry.
        judge_factory: ``(generation, now) -> judge`` for each generation; None = ingest only.
        pick_checkpoint: returns the checkpoint every node relaunches from ('' = from scratch);
            default: the newest one any node reported in its status.
        policy: the restart policy (:class:`neuron_watch.policy.RestartPolicy`); default: one with
            ``max_restarts``.
        relaunch: for launchers where a restart is a new set of agents (``neuron-watch srun``: a new
            srun step): ``(generation, checkpoint, verdict) -> None`` once the old generation is
            stopped; it starts the new agents (the old nodes are forgotten, the new ones join), or
            returns ``(exit_code, reason)`` to end the job instead (requeued, given up). None: every
            node is sent ``launch``.
    """

    def __init__(self, bind: str, secret: bytes, run_dir: str, *, job: str,
                 settings: CoordinatorSettings | None = None,
                 judge_factory: Callable[[int, float], JudgeLike] | None = None,
                 pick_checkpoint: Callable[..., str] | None = None,
                 policy: RestartPolicy | None = None,
                 max_restarts: int = 3, session: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 announce: bool = True,
                 relaunch: Callable[[int, str, Verdict], tuple[int, str] | None] | None = None,
                 health: IOHealth | None = None) -> None:
        self.settings = settings or CoordinatorSettings()
        self.relaunch = relaunch
        self.job = job
        self.signer = Signer.for_coordinator(secret, job)
        self._status_signer = Signer.for_status(secret)
        self._challenged: dict[bytes, float] = {}  # routing id -> when last challenged (rate limit)
        self._refused: dict[tuple[str, str, int], float] = {}  # (job, node, session) -> when last refused
        self.clock = clock
        # Grows with the start time (agents tell a restarted coordinator by a larger session), with
        # 12 random low bits: agents echo it, so a frame captured in another session is refused.
        self.session = session if session is not None else ((time.time_ns() // 1000) << 12) | secrets.randbelow(4096)
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.sock = CoordinatorSocket(bind)
        self.endpoint = self.sock.endpoint
        self.nodes: dict[str, NodeView] = {}
        self.tracker = SequenceTracker(in_order=True)
        self.counters = Counters()
        self.generation = 0
        self.judge_factory = judge_factory
        now = clock()
        self.judge: JudgeLike | None = judge_factory(0, now) if judge_factory else None
        self.pick_checkpoint = pick_checkpoint or _newest_reported_checkpoint
        #: the checkpoint the current generation started from, and those a generation could not
        #: start from (failed before its first step): never chosen again (issue 16, finding 10)
        self.launched_from = ""
        self.avoid_checkpoints: set[str] = set()
        self.policy = policy or RestartPolicy(max_restarts=max_restarts)
        self.restarts = 0
        self.wall = wall
        self.sm = JobStateMachine()
        self.incident_no = 0
        self._pending: Verdict = Verdict(Label.HEALTHY, Action.WAIT)
        self._failure_seen: float | None = None
        self._last_label: Label | None = None
        self._last_explained = False  # the last wait verdict sent was a healthy one naming a rank (a long save)
        self._progress_step: int | None = None
        self._progress_at: float | None = None
        self._progress_line_wall: float | None = None
        self._blind_said = False  # the "no progress recognised" warning of this generation was given
        self._storms_said: set[RankKey] = set()  # ranks whose recompile storm was reported this generation
        self._unexplained_said = 0  # the judge's unexplained error lines of this generation warned about
        self._recompiles_said = 0  # the judge's recompile notes of this generation said on the console
        self._compile_reports_said = 0  # the judge's compile-time reports of this generation sent as events
        self._interrupt: tuple[int, float] | None = None
        self._last_status = -1e18
        # Per rank, its last batches' joined texts (each holds >= 1 line); read with tail().
        self.tails: dict[RankKey, _Tail] = {}
        self._fp_kb: object = None
        self._fp = 0
        # The watchdog's own files never stop the job: a full or read-only disk degrades them (counted,
        # reported as watchdog_degraded/_recovered, written again when the disk takes writes).
        self.health = health or IOHealth()
        self.merged = AppendFile(os.path.join(run_dir, "merged.log"), self.health, gap=self._merged_gap)
        self.events = EventLog(os.path.join(run_dir, "events.jsonl"), wall=wall,  # one wall clock for all times
                               health=self.health)
        self.health.listeners.append(self._io_fault)
        self._io_told = False  # faults seen before this coordinator existed are told at the first tick
        self.phase_since = now
        self.incident = ""
        self.last_verdict: Verdict | None = None
        self.exit_code: int | None = None  # set when the job is over (shutdown sent)
        self._cmd_seq = 0
        self._last_ack = -1e18
        self._last_verdict_at = -1e18
        self._stamp_sec, self._stamp_prefix = -1, ""
        self._keys: dict[tuple[str, int], RankKey] = {}
        self.announce = announce  # standalone: coordinator_started/_stopped frame the job's events
        self._last_tick: float | None = None
        self._hold_verdicts_until = -1e18  # after a pause of our own: the nodes' buffered news comes first
        self.pauses: list[float] = []  # our own pauses seen (seconds), for the summary
        self._lost_since: float | None = None  # a restart waits for lost nodes since
        self._lost_said = -1e18
        #: called with each status document written (once a second): the --progress line
        self.status_listeners: list[Callable[[dict[str, Any]], None]] = []
        if announce:
            self.events.emit("coordinator_started", 0, endpoint=self.endpoint, job=job)

    def _merged_gap(self, lines: int, nbytes: int, error: str) -> str:
        return (f"{iso_utc(self.wall())} {COORDINATOR_NODE} | neuron-watch: {lines} line(s) ({nbytes} bytes) of the "
                f"job's output are missing here: {error} (each rank's own log still has them)")

    def _io_fault(self, kind: str, fields: dict[str, Any]) -> None:
        """A file of the watchdog failed or works again: an event (it reaches MQTT and the console
        even when events.jsonl is the file that fails)."""
        self.events.emit(kind, self.generation, **fields)

    # -- receiving ---------------------------------------------------------------------------

    def poll(self, timeout: float, budget: float = 0.05) -> int:
        """Wait up to ``timeout`` seconds for messages, then ingest what is waiting for at most
        ``budget`` seconds (so :meth:`tick` -- acks, verdicts -- runs often even under a flood;
        agents resend what is not acknowledged in time). Returns how many messages were handled."""
        if not self.sock.poll(int(timeout * 1000)):
            return 0
        now = start = self.clock()
        n = 0
        while (item := self.sock.recv()) is not None:
            self.handle(item[0], item[1], now)
            n += 1
            if n % 16 == 0:
                now = self.clock()
                if now - start >= budget:
                    break
        return n

    def _bad(self, problem: str) -> None:
        self.counters.bad[problem] = self.counters.bad.get(problem, 0) + 1

    def handle(self, routing_id: bytes, frames: list[bytes], now: float) -> None:
        """Authenticate, decode, de-duplicate and ingest one message; anything doubtful is counted.

        Nothing about a node changes (its route, ``last_heard``, its session) before the message
        is proven fresh: signed with this job's key, echoing this coordinator's session, and the
        next one of its sender's sequence. A captured frame replayed from elsewhere is a
        duplicate (or does not echo this session) and moves nothing (issue 16, finding 4).
        """
        self.counters.frames += 1
        try:
            if len(frames) != 3:
                self.signer.verify(frames)  # an unsigned message is refused as such
                raise ProtocolError("truncated" if len(frames) < 3 else "garbage",
                                    f"a message has 3 frames (header, body, signature), got {len(frames)}")
            # The header is read before the signature: a peer of another schema signs with other keys,
            # and its refusal must name the version, not "bad signature". Nothing acts on it unsigned.
            h = decode_header(bytes(frames[0]))
            if h.kind is Kind.STATUS_QUERY:
                body = decode_body(h.kind, self._status_signer.verify(frames)[1])
                assert isinstance(body, StatusQuery)
                self._answer_status(routing_id, h, body)
                return
            if h.job != self.job and not h.kind.is_command:
                self._foreign(routing_id, frames, h, now)
                return
            body = decode_body(h.kind, self.signer.verify(frames)[1])
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
            # Challenge only a session we have not taken in yet (a new agent, or one of a previous
            # coordinator): one whose messages we accepted already knows our session, so its
            # unechoed frame is a replay and gets nothing.
            if (view is None or view.session != h.session) and (st is None or h.session > st.session):
                self._challenge(routing_id, h, now)
            return
        disp = self.tracker.check(h.node, h.session, h.seq, h.base)
        if disp is Disposition.STALE_SESSION:
            self.counters.stale += 1
            return
        if disp is Disposition.DUPLICATE:
            self.counters.duplicates += 1
            if view is not None and view.session == h.session and view.routing_id == routing_id:
                view.need_ack = True  # a resend on the node's own connection: our ack was lost
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
        if view.state is NodeState.UNOBSERVED:
            view.state = NodeState.CONNECTED
            if self.judge:
                self.judge.mark_observed(h.node)
            self.events.emit("node_observed", self.generation, node=h.node)
        self._ingest(view, Msg(h, body), now)

    def _challenge(self, routing_id: bytes, h: Header, now: float) -> None:
        """Tell an agent session our session (an ack of nothing, -1): it resends, echoing it.
        At most one every half second per connection."""
        last = self._challenged.get(routing_id)
        if last is not None and now - last < 0.5:
            return
        if len(self._challenged) >= 4096:
            self._challenged.clear()
        self._challenged[routing_id] = now
        self.counters.challenges += 1
        self._send_to(routing_id, h.session, Ack(-1))

    def _foreign(self, routing_id: bytes, frames: list[bytes], h: Header, now: float) -> None:
        """A message naming another job. Signed with that job's keys and our secret: a job sharing
        our secret and port (issue 16, finding 5) -- refused by name, on both sides. Otherwise it is
        a stranger's (counted as a bad signature)."""
        other = self.signer.other_job(h.job)
        if other is None:
            raise ProtocolError("auth", "a message of another job")
        other.verify(frames)  # raises AuthError: not our secret
        self.counters.wrong_job += 1
        key = (h.job, h.node, h.session)
        last = self._refused.get(key)
        if last is not None and now - last < 1.0:
            return
        if len(self._refused) >= 1024:
            self._refused.clear()
        self._refused[key] = now
        hdr = Header(kind=Kind.REFUSED, job=h.job, node=COORDINATOR_NODE, session=self.session,
                     generation=self.generation, seq=self._cmd_seq, target=h.session, mono=self.clock(),
                     wall=time.time())
        self._cmd_seq += 1
        reason = f"this coordinator runs job {self.job}"
        if not self.sock.send(routing_id, other.sign(encode(Msg(hdr, Refused(self.job, h.job, reason))))):
            self.counters.send_failed += 1
        if last is None:
            self.events.emit("job_refused", self.generation, job=self.job, other_job=h.job, node=h.node,
                             reason="the same secret and coordinator port: each job needs its own "
                                    "--job-id and port (or secret)")

    def _send_to(self, routing_id: bytes, target: int, body: Body) -> bool:
        h = Header(kind=kind_of(body), job=self.job, node=COORDINATOR_NODE, session=self.session,
                   generation=self.generation, seq=self._cmd_seq, target=target, mono=self.clock(), wall=time.time())
        self._cmd_seq += 1
        return self.sock.send(routing_id, self.signer.sign(encode(Msg(h, body))))

    def _new_session(self, h: Header, routing_id: bytes, now: float) -> NodeView:
        old = self.nodes.get(h.node)
        view = NodeView(node=h.node, session=h.session, routing_id=routing_id, first_heard=now, last_heard=now,
                        generation=h.generation)
        if old is not None:
            view.lines = old.lines
        self.nodes[h.node] = view
        self.events.emit("node_joined" if old is None else "node_rejoined", self.generation, node=h.node)
        return view

    def _ingest(self, view: NodeView, msg: Msg, now: float) -> None:
        h, body = msg.header, msg.body
        # The sender's clock is never compared with ours: an item `age` seconds old when the
        # sender assembled the message, sent (sent - mono) later, is placed at now - both.
        lag = max(0.0, h.sent - h.mono)
        if isinstance(body, Lines):
            self._lines(view, h, body, now - lag)
        elif isinstance(body, Hello):
            view.hostname, view.pid, view.ranks = body.hostname, body.pid, body.ranks
            self.events.emit("node_hello", self.generation, node=h.node, hostname=body.hostname,
                             ranks=list(body.ranks), agent_version=body.agent_version)
        elif isinstance(body, Heartbeat):
            self._loss_report(view, body.dropped_lines, body.dropped_msgs, body.truncated_lines)
        elif isinstance(body, Status):
            if h.generation != self.generation and body.state in ("finished", "failed"):
                return  # a late word about a generation already replaced
            view.status, view.status_detail, view.generation = body.state, body.detail, h.generation
            if body.state == "evidence_done":
                view.evidence_detail = body.detail
            view.status_since = now
            if body.state in ("finished", "failed"):
                view.launcher_code = int(body.detail) if body.detail.lstrip("-").isdigit() else None
            if body.checkpoint:
                view.checkpoint = body.checkpoint
                if body.state == "launched" and h.generation == 0 == self.generation and not self.launched_from:
                    self.launched_from = body.checkpoint  # generation 0: each node's own choice at start
            self._loss_report(view, body.dropped_lines, body.dropped_msgs, body.truncated_lines)
            # Capture details carry the node's whole manifest: the event keeps a short form.
            detail = body.detail if len(body.detail) <= 400 else body.detail[:400] + f"... ({len(body.detail)} chars)"
            if self.sm.live:  # after job_finished (the last event of a job) nodes only acknowledge the end
                self.events.emit("node_status", h.generation, node=h.node, state=body.state, detail=detail)
        elif isinstance(body, Procs):
            if body.workers:
                view.worker_pids = dict(body.workers)
            if self.judge and h.generation == self.generation:
                self.judge.observe_compilers(
                    [CompilerSample(RankKey(h.node, s.rank), s.pid, s.cpu_seconds, now - lag - s.d_mono)
                     for s in body.samples], now, node=h.node)
                observe_workers = getattr(self.judge, "observe_workers", None)
                if callable(observe_workers) and body.activity:
                    observe_workers([WorkerSample(RankKey(h.node, a.rank), a.tree_cpu_seconds, a.state == "T",
                                                  now - lag) for a in body.activity], now)
                observe_locks = getattr(self.judge, "observe_cache_locks", None)
                if callable(observe_locks):
                    view.locks = set(body.locks)
                    observe_locks(sorted(set().union(*(v.locks for v in self.nodes.values()))), now)
                observe_fr = getattr(self.judge, "observe_collectives", None)
                for c in body.collectives:
                    if view.recorder.get(c.rank) != "on":  # once read, available (an ending rank stops answering)
                        view.recorder[c.rank] = c.problem or "on"
                    if callable(observe_fr) and not c.problem:
                        observe_fr(RankKey(h.node, c.rank), c.groups, now - lag - c.d_mono)
        elif isinstance(body, Exits):
            for e in body.exits:
                ex = RankExit(RankKey(h.node, e.rank), e.exit_code, now - lag - e.d_mono)
                if self.judge and h.generation == self.generation:
                    self.judge.observe_exit(ex)
                self.events.emit("rank_exit", h.generation, node=h.node, rank=e.rank, exit_code=e.exit_code)

    def _lines(self, view: NodeView, h: Header, body: Lines, t_mono: float) -> None:
        """One batch: merged.log in one write, per-rank tails, the judge. Per rank and per match,
        never per line: the agent joined each rank's lines and classified them on its own CPU.

        ``t_mono``: our monotonic time of the sender's ``mono`` (ages are relative to it).
        """
        node, keys, tails, stamp = h.node, self._keys, self.tails, self._stamp
        n = 0
        parts: list[str] = []
        ranks: list[tuple[RankKey, float, float, str]] = []
        for c in body.ranks:
            key = keys.get((node, c.rank))
            if key is None:
                key = keys[(node, c.rank)] = RankKey(node, c.rank)
            # "<time> <node>/rank<r> | " before every line: one C-level replace per rank, not a loop.
            prefix = f"{stamp(h.wall - c.d_wall)} {key} | "
            text = c.text
            parts += (prefix, text.replace("\n", "\n" + prefix) if c.n_lines > 1 else text, "\n")
            t = tails.get(key)
            if t is None:
                t = tails[key] = _Tail(self.settings.tail_lines)
            t.texts.append((text, c.n_lines))  # _Tail.add, inlined: this runs for every rank of every batch
            t.count += c.n_lines
            if t.count - t.texts[0][1] >= t.limit:
                t.trim()
            ranks.append((key, t_mono - c.d_first, t_mono - c.d_last, text.rpartition("\n")[2]))
            n += c.n_lines
        self.merged.write("".join(parts))
        view.lines += n
        self.counters.lines += n
        judge = self.judge
        if judge is None or view.generation != self.generation:
            return
        observe_batch = getattr(judge, "observe_batch", None)
        if body.classified and observe_batch is not None and body.classified == self._kb_fingerprint(judge):
            matches = [(LogLine(ranks[m.chunk][0], m.text, t_mono - m.d_mono, h.wall - m.d_mono, m.source, m.lineno),
                        m.signature, m.step, m.loss) for m in body.matches]
            try:
                observe_batch(ranks, matches)
                return
            except ValueError as exc:  # a signature we do not know: classify here instead
                log.debug("classifying a batch of %s here: %s", node, exc)
        # Not classified by the agent (no knowledge base, another table, an older judge): do it
        # here, per line. Line times inside a rank's batch are its first and newest line's (a
        # batch spans at most the agent's batch age).
        self.counters.unclassified_batches += 1
        lines = []
        for (key, first, last, _text), c in zip(ranks, body.ranks, strict=True):
            wall = h.wall - c.d_wall
            for i, text in enumerate(c.text.split("\n")):
                lines.append(LogLine(key, text, first if i == 0 else last, wall if i == 0 else wall + last - first))
        judge.observe_lines(lines)

    def _kb_fingerprint(self, judge: JudgeLike) -> int:
        """The fingerprint of ``judge``'s knowledge base (0: it has none), computed once per table."""
        kb = getattr(judge, "kb", None)
        if kb is None:
            return 0
        if self._fp_kb is not kb:
            from neuron_watch.judge import kb_fingerprint

            self._fp_kb, self._fp = kb, kb_fingerprint(kb)
        return self._fp

    def tail(self, key: RankKey, n: int | None = None) -> list[str]:
        """The last ``n`` (default ``tail_lines``) lines of a rank, oldest first."""
        t = self.tails.get(key)
        want = self.settings.tail_lines if n is None else n
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

    def _loss_report(self, view: NodeView, lines: int, msgs: int, truncated: int = 0) -> None:
        if lines > view.reported_dropped_lines or msgs > view.reported_dropped_msgs:
            if self.sm.live:
                self.events.emit("agent_dropped", self.generation, node=view.node, lines=lines, messages=msgs)
            else:  # job_finished is the last event (issue 16, #10); the loss still counts in status.json
                log.warning("node %s reported %d line(s) / %d message(s) it could not buffer, after the job's end",
                            view.node, lines, msgs)
        view.reported_dropped_lines = max(view.reported_dropped_lines, lines)
        view.reported_dropped_msgs = max(view.reported_dropped_msgs, msgs)
        if truncated > view.reported_truncated_lines:
            self.events.emit("lines_truncated", self.generation, node=view.node, lines=truncated,
                             limit_bytes=MAX_LINE_BYTES)
            view.reported_truncated_lines = truncated

    # -- sending -----------------------------------------------------------------------------

    def send(self, node: str, body: Body) -> bool:
        """Send one signed command to ``node``'s current session. False (and counted) if it cannot go."""
        view = self.nodes.get(node)
        if view is None:
            self.counters.send_failed += 1
            return False
        h = Header(kind=kind_of(body), job=self.job, node=COORDINATOR_NODE, session=self.session,
                   generation=self.generation, seq=self._cmd_seq, target=view.session, mono=self.clock(),
                   wall=time.time())
        self._cmd_seq += 1
        ok = self.sock.send(view.routing_id, self.signer.sign(encode(Msg(h, body))))
        if not ok:
            self.counters.send_failed += 1
        return ok

    def broadcast(self, body: Body) -> list[str]:
        """Send ``body`` to every known node; returns the nodes it could not be handed to."""
        if not isinstance(body, Ack):
            self.events.emit("command", self.generation, command=kind_of(body).value, nodes=sorted(self.nodes),
                             **_fields(body))
        return [n for n in sorted(self.nodes) if not self.send(n, body)]

    # -- the clock ---------------------------------------------------------------------------

    def tick(self, now: float) -> Verdict | None:
        """Acks, silence, verdict and recovery steps due at ``now``; returns the verdict if judged."""
        jump = self.settings.pause_jump
        if jump is not None and self._last_tick is not None and now - self._last_tick > jump:
            self._paused(now - self._last_tick, now)
        self._last_tick = now
        if not self._io_told:  # after job_started, the first event of a job
            self._io_told = True
            for path, error in sorted(self.health.degraded.items()):
                self.events.emit("watchdog_degraded", self.generation, node=self.health.node, path=path,
                                 operation="write", error=error, faults=self.health.faults)
        if now - self._last_ack >= self.settings.ack_interval:
            self._last_ack = now
            for view in self.nodes.values():
                st = self.tracker.stats(view.node)
                if view.need_ack and st is not None and st.session == view.session:
                    view.need_ack = False
                    if self.send(view.node, Ack(st.expected - 1)):
                        view.acked = st.expected - 1
        for view in self.nodes.values():
            if view.state is NodeState.CONNECTED and now - view.last_heard > self.settings.silence:
                view.state = NodeState.UNOBSERVED
                if self.judge:
                    self.judge.mark_unobserved(view.node, now)
                self.events.emit("node_unobserved", self.generation, node=view.node,
                                 silent_for=round(now - view.last_heard, 3))
        verdict = None
        if (self.judge is not None and self._enough_nodes() and now >= self._hold_verdicts_until
                and now - self._last_verdict_at >= self.settings.verdict_interval):
            # A verdict walks every rank (2,048 on 64 nodes): often enough for sub-second
            # latency, not on every loop turn.
            self._last_verdict_at = now
            verdict = self.judge.verdict(now)
            self.last_verdict = verdict
            self._progress_event(now)
            self._blind_check(now)
            self._storm_check()
            self._recompile_check(now)
            self._compile_report_check()
            self._unexplained_check()
        if self._interrupt is not None:
            self._interrupting(now)
        else:
            self._recovery(verdict, now)
        self.merged.flush()
        self.events.flush()  # events kept while the disk was full go out once it takes writes
        if now - self._last_status >= 1.0:
            self._last_status = now
            self.write_status(now)
        return verdict

    def _paused(self, gap: float, now: float) -> None:
        """We did not run for ``gap`` seconds (SIGSTOP of the wrapper, a console pipe nobody read):
        re-baseline. The nodes were not silent, we were deaf: their last-heard times move by the
        gap; and no verdict is given until what they buffered meanwhile has arrived (a verdict on
        stale clocks would call a healthy job hung)."""
        self.pauses.append(round(gap, 3))
        for view in self.nodes.values():
            view.last_heard = min(now, view.last_heard + gap)
        self._hold_verdicts_until = now + self.settings.pause_grace
        self._last_verdict_at = now
        message = (f"the coordinator was not running for {gap:.0f}s (paused?): no verdict for "
                   f"{self.settings.pause_grace:.0f}s while the nodes' buffered output arrives")
        self.events.emit("warning", self.generation, kind="coordinator_paused", message=message,
                         seconds=round(gap, 3))
        log.warning("%s", message)

    def _waiting_for_lost_nodes(self, now: float) -> bool:
        """At a restart: nodes silent for longer than ``silence`` that did not answer the stop are not
        relaunched onto (a killed wrapper, a dead host). Wait for them, bounded, saying so; then end
        the job with exit 3. True while waiting."""
        lost = sorted(n for n, v in self.nodes.items()
                      if v.status != "stopped" and v.state is NodeState.UNOBSERVED)
        if not lost or self.relaunch is not None:
            if self._lost_since is not None:
                log.info("every node answers again: the restart goes ahead")
            self._lost_since = None
            return False
        if self._lost_since is None:
            self._lost_since = now
        waited = now - self._lost_since
        left = self.settings.lost_node_wait - waited
        if left <= 0:
            return False
        if now - self._lost_said >= 60.0:
            self._lost_said = now
            silent = ", ".join(f"{n} ({now - self.nodes[n].last_heard:.0f}s)" for n in lost)
            message = (f"not relaunching generation {self.generation + 1}: node(s) {silent} silent and did not "
                       f"answer the stop (wrapper killed or host down?); waiting {left:.0f}s more for them, "
                       "then the job ends with exit 3")
            self.events.emit("warning", self.generation, kind="node_lost", message=message, nodes=lost,
                             waited=round(waited, 3))
            log.warning("%s", message)
        return True

    def _enough_nodes(self) -> bool:
        want = self.settings.expected_nodes
        return want is None or len(self.nodes) >= want

    def _move(self, state: JobState, now: float) -> None:
        previous = self.sm.state
        self.sm.move(state, now)
        self.phase_since = now
        self.events.emit("recovery_phase", self.generation, phase=state.value, previous=previous.value)

    @property
    def phase(self) -> JobState:
        return self.sm.state

    def _all_status(self, *states: str) -> bool:
        return bool(self.nodes) and all(v.status in states for v in self.nodes.values())

    def _reset_status(self) -> None:
        for v in self.nodes.values():
            v.status, v.status_detail = "", ""
            v.evidence_detail = None

    def _progress_event(self, now: float) -> None:
        """A ``progress`` event for a new step (or, for progress lines without a step such as the
        HF Trainer's ``{'loss': ...}``, for newer progress), dated by the line that showed it:
        the event may be sent up to PROGRESS_EVENT_EVERY later, and a batch may arrive late."""
        if self.sm.state is not JobState.RUNNING:
            return
        step = getattr(self.judge, "max_step", None)
        at = self._progress_wall()
        if step is None and at is None:
            return
        if step is not None and step == self._progress_step:
            return
        if step is None and at == self._progress_line_wall:
            return
        if self._progress_at is not None and now - self._progress_at < PROGRESS_EVENT_EVERY:
            return
        self._progress_step, self._progress_at, self._progress_line_wall = step, now, at
        self.events.emit("progress", self.generation, at=at, step=step)

    def _progress_wall(self) -> float | None:
        """Wall time of the line that first showed the newest step (any progress line without steps)."""
        if getattr(self.judge, "max_step", None) is not None:
            wall: float | None = getattr(self.judge, "max_step_wall", None)
        else:
            wall = getattr(self.judge, "last_progress_wall", None)
        return wall

    def _progress_fields(self) -> dict[str, Any]:
        at = self._progress_wall()
        if at is None:  # a judge that does not keep line times: convert its monotonic time
            times = getattr(self.judge, "step_times", None) or []
            at = self.wall() - (self.clock() - times[-1]) if times else None
        return {
            "last_progress": None if at is None else iso_utc(at),
            "last_step": getattr(self.judge, "max_step", None),
        }

    def _unexplained_check(self) -> None:
        """A ``warning`` event for each error line no signature explains (the judge keeps the first
        few of a generation): while the ranks go on it is not a failure, but the operator should know."""
        seen = getattr(self.judge, "unexplained", None) or []
        for ev in seen[self._unexplained_said:]:
            message = (f"{ev.key}: an error line no signature recognises (not acted on while the job goes on): "
                       f"{ev.text[:300]}")
            self.events.emit("warning", self.generation, kind="unrecognised_error", message=message,
                             node=ev.key.node, rank=ev.key.rank, line=ev.text[:300], file=ev.source, lineno=ev.lineno)
            log.warning("%s", message)
        self._unexplained_said = len(seen)

    def _blind_check(self, now: float) -> None:
        """Say once per generation when no progress line was recognised (the judge decides)."""
        if self._blind_said or self.sm.state is not JobState.RUNNING:
            return
        blind = getattr(self.judge, "blind", None)
        warning = blind(now) if callable(blind) else None
        if warning is None:
            return
        self._blind_said = True
        message = warning.message()
        self.events.emit("warning", self.generation, kind="no_progress_recognised", message=message,
                         seconds=warning.seconds, lines=list(warning.lines), ranks=warning.ranks)
        # The console sink for events (eventlog) will print this; until it lands, log it here.
        log.warning("%s", message)

    def _storm_check(self) -> None:
        """Report once per rank and generation a rank that recompiles again and again (the judge
        decides): slow, not hung, and not to be left unsaid."""
        storms = getattr(self.judge, "recompile_storms", None)
        for key, count, line in storms() if callable(storms) else []:
            if key in self._storms_said:
                continue
            self._storms_said.add(key)
            by = "torch.compile" if line.signature.startswith("torch.") else "a graph compiler, after the first step"
            message = (f"{key} recompiled its graph {count} time(s) this generation ({by}): each new "
                       f"input shape or code path pays a compile while the other ranks wait. Last: "
                       f"{line.text.strip()[:200]}")
            self.events.emit("warning", self.generation, kind="recompile_storm", message=message,
                             node=key.node, rank=key.rank, recompiles=count, line=line.text.strip()[:500])
            log.warning("%s", message)

    def _recompile_check(self, now: float) -> None:
        """A ``recompile`` event (a console line) for each recompile a rank announced, with the guard
        that failed. The reason comes on the lines after the announcement: a note still without one
        waits a moment (the rest of dynamo's message is on its way), then goes out without it."""
        notes = getattr(self.judge, "recompile_notes", None) or []
        for note in notes[self._recompiles_said:]:
            if note.reason is None and now - note.announced.mono < RECOMPILE_REASON_WAIT:
                break
            ev = note.announced
            found = _RECOMPILED_FUNCTION.search(ev.text)
            self.events.emit("recompile", self.generation, node=ev.key.node, rank=ev.key.rank,
                             function=found.group(1) if found else "", where=found.group(2) if found else "",
                             reason=note.reason or "", line=ev.text.strip()[:500])
            self._recompiles_said += 1

    def _compile_report_check(self) -> None:
        """A ``compile_report`` event for each compile-time figure a rank printed by the compiler's
        own account (torch-xla's metrics report): goodput takes the newest of each generation."""
        reports = getattr(self.judge, "compile_reports", None) or []
        for key, compiles, seconds in reports[self._compile_reports_said:]:
            self.events.emit("compile_report", self.generation, node=key.node, rank=key.rank, compiles=compiles,
                             seconds=round(seconds, 3), source="torch_xla metrics")
        self._compile_reports_said = len(reports)

    def _progressed_for(self) -> float:
        times = getattr(self.judge, "step_times", None) or []
        return times[-1] - times[0] if len(times) > 1 else 0.0

    def _recovery(self, verdict: Verdict | None, now: float) -> None:
        state = self.sm.state
        if state in (JobState.STARTING, JobState.RUNNING):
            if state is JobState.STARTING and self._enough_nodes():
                self._move(JobState.RUNNING, now)
            if self._enough_nodes() and self._all_status("finished"):
                if verdict is not None and verdict.action is not Action.WAIT and verdict.label is not self._last_label:
                    # A failure was seen but the job ended by itself first: report it, keep its exit code.
                    self.events.emit("verdict", self.generation, **verdict.to_dict(), **self._progress_fields())
                self._finish(0, "every node finished", now)
                return
            if verdict is None:
                return
            if verdict.action is Action.WAIT:
                self._failure_seen = None
                # A healthy verdict naming a rank is a wait the judge explains (a synced save longer
                # than the hang timeout): the operator gets a line when it begins and when it ends.
                explained = verdict.label is Label.HEALTHY and verdict.culprit is not None
                if (verdict.label is not self._last_label or explained != self._last_explained) and not (
                    self._last_label is None and verdict.label is Label.HEALTHY and not explained
                ):
                    self._last_label, self._last_explained = verdict.label, explained
                    self.events.emit("verdict", self.generation, **verdict.to_dict(), **self._progress_fields())
                return
            # A failure. Unless it is a hang, give the rest of the story a moment to arrive (the
            # launcher's exit, the root-cause rank's exit code): peers report "connection closed"
            # before the launcher reports which rank died first.
            settled = self._all_status("finished", "failed")
            if verdict.label is Label.COLLECTIVE_HANG and not settled and any(
                v.status == "finishing" and now - v.status_since < self.settings.finishing_grace
                for v in self.nodes.values()
            ):
                return  # ranks are ending (training done, or a crash the launcher is about to report)
            if verdict.label is not Label.COLLECTIVE_HANG and not settled:
                if self._failure_seen is None:
                    self._failure_seen = now
                    return
                if now - self._failure_seen < self.settings.settle:
                    return
            self._failure_seen = None
            self._pending = verdict
            self.incident_no += 1
            self.incident = f"incident-{self.incident_no}"
            self._reset_status()
            self.broadcast(CaptureEvidence(self.incident, verdict.reason, self._verdict_doc(verdict)))
            self._move(JobState.CAPTURING, now)
        elif state is JobState.CAPTURING:
            # a node silent past `silence` cannot answer in time: its evidence is missing, not awaited
            answered = bool(self.nodes) and all(v.evidence_detail is not None or v.state is NodeState.UNOBSERVED
                                                for v in self.nodes.values())
            if answered or now - self.phase_since >= self.settings.evidence_timeout + 5:
                verdict = self._culprit_from_evidence(self._pending)
                self._pending = verdict
                self._last_label = verdict.label
                details = {n: _json_detail(v.evidence_detail or "") for n, v in sorted(self.nodes.items())}
                self.events.emit("verdict", self.generation, **verdict.to_dict(), **self._progress_fields())
                culprit = None if verdict.culprit is None else {"node": verdict.culprit.node,
                                                                "rank": verdict.culprit.rank}
                bundles = {n: str(d["bundle"]) for n, d in details.items() if d.get("bundle")}
                # one node: the incident directory; several: where each node's part is
                artifacts: str | dict[str, str] = (
                    os.path.dirname(next(iter(bundles.values()))) if len(self.nodes) == 1 and bundles else bundles
                )
                self._write_incident_manifest(details)
                self.events.emit(
                    "incident", self.generation, incident=self.incident_no, label=verdict.label.value,
                    culprit=culprit,
                    artifacts=artifacts,
                    capture_seconds=max((float(d.get("seconds", 0.0)) for d in details.values()), default=0.0),
                    missing_items=sum(int(d.get("missing", 0)) for d in details.values()),
                    nodes_without_evidence=sorted(n for n, v in self.nodes.items() if v.evidence_detail is None),
                )
                self._reset_status()
                # the final verdict (culprit included) completes every node's bundle before it uploads
                self.broadcast(Stop(self.incident, self.settings.stop_timeout, self._verdict_doc(verdict)))
                self._move(JobState.STOPPING, now)
        elif state is JobState.STOPPING and (
            self._all_status("stopped")
            or all(v.status == "stopped" or v.state is NodeState.UNOBSERVED for v in self.nodes.values())
            or now - self.phase_since >= self.settings.stop_timeout + self.settings.upload_timeout + 10
        ):
            if self._waiting_for_lost_nodes(now):
                return
            lost = sorted(n for n, v in self.nodes.items() if v.status != "stopped" and v.state is NodeState.UNOBSERVED)
            for n, v in sorted(self.nodes.items()):
                d = _json_detail(v.status_detail)
                self.events.emit("stopped", self.generation, node=n, rung=d.get("rung"), seconds=d.get("seconds"),
                                 survivors=d.get("survivors", []), continued=d.get("continued", []),
                                 killed_stopped=d.get("killed_stopped", []), answered=v.status == "stopped")
                for up in d.get("uploads", []):
                    self.events.emit("upload", self.generation, node=n, **up)
            if lost and self.relaunch is None:
                reason = (f"node(s) {', '.join(lost)} lost (silent, no answer to the stop for "
                          f"{self.settings.lost_node_wait:.0f}s): not relaunching onto them")
                self.events.emit("gave_up", self.generation, reason=reason, label=self._pending.label.value,
                                 exit_code=int(ExitCode.UNOBSERVED))
                self._finish(int(ExitCode.UNOBSERVED), reason, now, JobState.FAILED)
                return
            codes = [v.launcher_code for v in self.nodes.values() if v.launcher_code not in (None, 0)]
            # A generation that started from checkpoint C and failed before its first step may
            # have failed *because of* C (truncated, written by another version): the next one
            # starts from the previous complete checkpoint, once; the same failure again is a loop.
            suspect = (self.launched_from if self._pending.step is None and self.launched_from
                       and not self.avoid_checkpoints else "")
            outcome = self.policy.on_failure(self._pending, self._progressed_for(), codes[0] if codes else None,
                                             fallback=bool(suspect))
            self.restarts = self.policy.restarts
            if outcome.decision is Decision.RESTART:
                self._move(JobState.RESTARTING, now)
                reason = outcome.reason
                if suspect:
                    self.avoid_checkpoints.add(suspect)
                    reason += (f"; generation {self.generation} failed before its first step from {suspect}: "
                               "falling back to the previous complete checkpoint")
                checkpoint = (self.pick_checkpoint(self.nodes, avoid=frozenset(self.avoid_checkpoints))
                              if self.avoid_checkpoints else self.pick_checkpoint(self.nodes))
                self.launched_from = checkpoint
                self.generation += 1
                self.events.emit("restart", self.generation, checkpoint=checkpoint or None,
                                 restarts=self.policy.restarts, reason=reason,
                                 avoided=sorted(self.avoid_checkpoints) or None)
                if self.judge_factory:
                    self.judge = self.judge_factory(self.generation, now)
                self._last_label, self._last_explained = None, False
                self._progress_step, self._progress_at, self._progress_line_wall = None, None, None
                self._blind_said = False
                self._storms_said = set()
                self._recompiles_said = 0
                self._compile_reports_said = 0
                self._unexplained_said = 0
                for v in self.nodes.values():
                    v.launcher_code = None
                    v.recorder.clear()  # the new ranks start their own servers
                self._reset_status()
                if self.relaunch is None:
                    self.broadcast(Launch(self.generation, checkpoint))
                else:
                    ended = self.relaunch(self.generation, checkpoint, self._pending)
                    if ended is not None:
                        self._finish(ended[0], ended[1], now, JobState.FAILED)
                        return
                    self.nodes.clear()  # the new step's agents join afresh (new sessions)
                self._move(JobState.STARTING, now)
            else:
                self.events.emit("gave_up", self.generation, reason=outcome.reason,
                                 label=self._pending.label.value, exit_code=outcome.exit_code)
                self._finish(outcome.exit_code, outcome.reason, now, JobState.FAILED)

    def _verdict_doc(self, verdict: Verdict) -> str:
        """The verdict as the bundles' ``verdict.json`` holds it."""
        return json.dumps({"incident": self.incident_no, "job_id": self.job, "generation": self.generation,
                           **verdict.to_dict()}, sort_keys=True)

    def _write_incident_manifest(self, details: dict[str, dict[str, Any]]) -> None:
        """The job's manifest of this incident: every node's part, and the nodes that sent none."""
        from neuron_watch.evidence import merge_manifests

        per_node = {n: d.get("manifest") if isinstance(d.get("manifest"), dict) else None
                    for n, d in details.items()}
        path = os.path.join(self.run_dir, "incidents", f"incident-{self.incident_no}", "manifest.json")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_json_atomic(path, merge_manifests(self.job, self.incident_no, per_node))
        except OSError as exc:
            self.health.failed("write the incident manifest", path, exc)

    def _culprit_from_evidence(self, verdict: Verdict) -> Verdict:
        """Name the culprit of a hang from what the nodes captured, strongest evidence first.

        A rank's process state (stopped, in uninterruptible I/O, gone) explains its silence by
        itself; then the one rank whose stack sets it apart from the others waiting in a collective
        (:func:`stack_culprit`); the judge's own guess (the first rank to stop printing progress)
        is kept only when neither tells. A culprit the judge found from a failure or the flight
        recorder stays, unless a process state contradicts it.
        """
        details = {n: _json_detail(v.evidence_detail or "") for n, v in sorted(self.nodes.items())}
        if verdict.label is not Label.COLLECTIVE_HANG:
            if verdict.culprit is not None or verdict.action is Action.WAIT:
                return verdict
            # a failure whose culprit the judge could not tell (a collective mismatch seen by a
            # peer): the one rank that ended somewhere else than all the others
            ended = odd_one_out({RankKey(n, int(r)): str(t) for n, d in details.items()
                                 for r, t in (d.get("stack_tops") or {}).items() if str(r).lstrip("-").isdigit()})
            if ended is None:
                return verdict
            return dataclasses.replace(verdict, culprit=ended[0], culprit_source="stacks",
                                       reason=f"{verdict.reason}; {ended[1]} (stacks)")
        states = {RankKey(n, int(r)): str(s) for n, d in details.items()
                  for r, s in (d.get("proc_states") or {}).items() if str(r).lstrip("-").isdigit()}
        telling = [(k, s) for k, s in sorted(states.items(), key=lambda kv: kv[0].rank) if s != "Z"]
        if telling:
            what = {"T": "is stopped (state T)", "t": "is stopped by a tracer (state t)",
                    "D": "is in uninterruptible I/O (state D)", "gone": "has no process any more"}
            # a stopped rank is the strongest reason; uninterruptible I/O next; a vanished pid last
            order = {"T": 0, "t": 0, "D": 1, "gone": 2}
            key, state = min(telling, key=lambda kv: (order.get(kv[1], 3), kv[0].rank))
            others = [k for k, s in telling if k != key and order.get(s, 3) == order.get(state, 3)]
            clause = f"{key} {what.get(state, f'is in state {state}')}"
            if others:
                clause += f" (also: {', '.join(str(k) for k in others)})"
            return dataclasses.replace(verdict, culprit=key, culprit_source="process_state",
                                       reason=f"{verdict.reason}; {clause}")
        if verdict.culprit is not None and verdict.culprit_source in ("failure", "flight_recorder"):
            return verdict
        tops: dict[RankKey, str | None] = {}
        waiting: dict[RankKey, bool | None] = {}
        for n, d in details.items():
            for r, t in (d.get("stack_tops") or {}).items():
                tops[RankKey(n, int(r))] = str(t)
            for r, w in (d.get("in_collective") or {}).items():
                waiting[RankKey(n, int(r))] = bool(w)
        found = stack_culprit(tops, waiting)
        if found is not None:
            key, clause = found
            return dataclasses.replace(verdict, culprit=key, culprit_source="stacks",
                                       reason=f"{verdict.reason}; {clause} (stacks)")
        if verdict.culprit is not None and verdict.culprit_source == "progress":
            return dataclasses.replace(verdict, reason=f"{verdict.reason}; {verdict.culprit} was the first to stop "
                                       "printing progress (its stack does not tell more)")
        return verdict

    def interrupt(self, signum: int, now: float) -> None:
        """SIGTERM/SIGINT to the job's wrapper: stop every node (one deadline), then shut down."""
        if self._interrupt is not None or not self.sm.live:
            return
        self._interrupt = (signum, now)
        self._reset_status()
        self.broadcast(Stop(f"signal {signum}", self.settings.stop_timeout))

    def _interrupting(self, now: float) -> None:
        assert self._interrupt is not None
        signum, since = self._interrupt
        if self.sm.live and (self._all_status("stopped") or now - since >= self.settings.stop_timeout + 10):
            self._finish(128 + signum, f"stopped by signal {signum}", now, JobState.INTERRUPTED)

    def _finish(self, code: int, reason: str, now: float, state: JobState = JobState.FINISHED) -> None:
        if state is JobState.FINISHED and self.sm.state is JobState.STARTING:
            self._move(JobState.RUNNING, now)
        self.exit_code = code
        self.broadcast(Shutdown(reason, code))
        self._move(state, now)
        fields: dict[str, Any] = {"exit_code": code, "restarts": self.policy.restarts, "state": state.value,
                                  "incidents": self.incident_no, "reason": reason, **self._progress_fields(),
                                  "dropped_lines": sum(v.reported_dropped_lines for v in self.nodes.values()),
                                  "watchdog_io": self.health.summary()}
        closing = {"time": iso_utc(self.wall()), "event": "job_finished", "generation": self.generation, **fields}
        try:
            from neuron_watch.goodput import compute_goodput

            fields["goodput"] = compute_goodput([*self.events.history, closing])
        except Exception as exc:  # figures are a report, never a reason to lose the final event
            log.warning("goodput figures failed: %s", exc)
        self.events.emit("job_finished", self.generation, **fields)
        self.write_status(now)


    # -- reporting ---------------------------------------------------------------------------

    def summary(self, now: float) -> dict[str, Any]:
        """Per node: state, last heard, sequence gaps and drops; plus refused-frame counters."""
        nodes = {}
        for name, v in sorted(self.nodes.items()):
            st = self.tracker.stats(name)
            nodes[name] = {
                "state": v.state.value, "last_heard_ago": round(now - v.last_heard, 3), "hostname": v.hostname,
                "ranks": list(v.ranks), "status": v.status, "generation": v.generation, "lines": v.lines,
                "seq": st.to_dict() if st else {}, "agent_dropped_lines": v.reported_dropped_lines,
                "agent_dropped_msgs": v.reported_dropped_msgs, "agent_truncated_lines": v.reported_truncated_lines,
            }
        c = self.counters
        return {"job": self.job, "endpoint": self.endpoint, "generation": self.generation, "phase": self.phase.value,
                "restarts": self.restarts, "nodes": nodes, "lines": c.lines, "frames": c.frames,
                "refused": {"bad": dict(c.bad), "wrong_job": c.wrong_job, "not_agent_kind": c.not_agent_kind,
                            "stale_session": c.stale, "unechoed": c.unechoed},
                "challenges": c.challenges,
                "duplicates": c.duplicates, "early": c.early, "send_failed": c.send_failed,
                "unclassified_batches": c.unclassified_batches, "paused": list(self.pauses),
                "verdict": self.last_verdict.to_dict() if self.last_verdict else None,
                "watchdog_io": self.health.summary()}

    def _answer_status(self, routing_id: bytes, h: Header, query: StatusQuery) -> None:
        """A read-only status query, authenticated by the job's secret: answer with the status document."""
        self.counters.status_queries += 1
        doc = json.dumps(self.status_doc(self.clock()), default=str)
        reply = Header(kind=Kind.STATUS_REPLY, job=self.job, node=COORDINATOR_NODE, session=self.session,
                       generation=self.generation, seq=0, target=h.session, mono=self.clock(), wall=time.time())
        self.sock.send(routing_id, self._status_signer.sign(encode(Msg(reply, StatusReply(query.nonce, doc)))))

    def write_status(self, now: float) -> None:
        """``status.json``: the job's state and every rank's, for ``neuron-watch status`` (atomic)."""
        doc = self.status_doc(now)
        self.health.write_json(os.path.join(self.run_dir, "status.json"), doc)
        for listener in self.status_listeners:
            listener(doc)

    def status_doc(self, now: float) -> dict[str, Any]:
        """The job's state and every rank's (the ``status.json`` document)."""
        ranks: list[dict[str, Any]] = []
        summaries = getattr(self.judge, "rank_summaries", None)
        if callable(summaries):
            ranks = list(summaries(now))
        for r in ranks:
            view = self.nodes.get(str(r.get("node")))
            r["pid"] = None if view is None else view.worker_pids.get(int(str(r.get("rank"))))
        for view in self.nodes.values():
            if view.state is NodeState.UNOBSERVED:
                for r in ranks:
                    if r.get("node") == view.node:
                        r["state"] = "unobserved"
        if not self.sm.live:  # the job is over: its ranks are what the job is, not what they last did
            for r in ranks:
                if r.get("state") != "failed":
                    r["state"] = self.sm.state.value
        timeout_in_force = getattr(self.judge, "timeout_in_force", None)
        timeout, kind = timeout_in_force() if callable(timeout_in_force) else (
            getattr(self.judge, "hang_timeout", lambda: None)(), None)
        doc = {
            "job_id": self.job,
            "generation": self.generation,
            "restarts": self.policy.restarts,
            "state": self.sm.state.value,
            "label": self.last_verdict.label.value if self.last_verdict else None,
            "updated": iso_utc(self.wall()),
            "updated_unix": self.wall(),
            "hang_timeout": timeout,
            "hang_timeout_kind": kind,
            "nodes": {n: {"state": v.state.value, "status": v.status, "last_heard_ago": round(now - v.last_heard, 3)}
                      for n, v in sorted(self.nodes.items())},
            "ranks": ranks,
            "liveness": self.liveness(),
            "watchdog_io": self.health.summary(),
        }
        return doc

    def liveness(self) -> dict[str, Any]:
        """Which liveness signals this generation has: ``flight_recorder`` = ranks whose recorder was
        read, ``no_flight_recorder`` = ``{"node/rank": why}`` for the others that reported."""
        on = sorted(f"{n}/{r}" for n, v in self.nodes.items() for r, why in v.recorder.items() if why == "on")
        off = {f"{n}/{r}": why for n, v in sorted(self.nodes.items()) for r, why in sorted(v.recorder.items())
               if why != "on"}
        return {"output": True, "flight_recorder": len(on), "no_flight_recorder": off}

    def write_summary(self, now: float) -> None:
        self.health.write_json(os.path.join(self.run_dir, "coordinator.json"), self.summary(now))

    def serve(self, stop: Callable[[], bool], interval: float = 0.05) -> int:
        """Run ``poll``/``tick`` until ``stop()`` or until the job is over; returns the exit code."""
        last_summary = -1e18
        while not stop() and self.exit_code is None:
            self.poll(interval)
            now = self.clock()
            self.tick(now)
            if now - last_summary >= 1.0:
                last_summary = now
                self.write_summary(now)
        if self.exit_code is not None:
            self.linger_for_nodes(NODES_EXIT_GRACE, interval)
        self.write_summary(self.clock())
        return self.exit_code or 0

    def linger_for_nodes(self, grace: float, interval: float = 0.05) -> None:
        """After the job's end, serve until every node said it exited or ``grace`` passed: the
        shutdown must reach the nodes (and be resent if lost) before this process leaves; a node
        that never hears it waits for a coordinator that is gone."""
        end = self.clock() + grace
        while self.clock() < end and not all(v.status == "exited" for v in self.nodes.values()):
            self.poll(interval)
            self.tick(self.clock())

    def close(self) -> None:
        if self.announce:
            self.events.emit("coordinator_stopped", self.generation, lines=self.counters.lines,
                             refused=self.counters.bad_total())
        self.sock.close()
        self.merged.close()
        self.events.close()


class _Tail:
    """A rank's last batches as joined texts: just enough of them to hold ``limit`` lines."""

    __slots__ = ("count", "limit", "texts")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.texts: collections.deque[tuple[str, int]] = collections.deque()
        self.count = 0

    def add(self, text: str, n: int) -> None:
        self.texts.append((text, n))
        self.count += n
        self.trim()

    def trim(self) -> None:
        """Forget the oldest batches that the newer ones no longer need to hold ``limit`` lines."""
        texts = self.texts
        while len(texts) > 1 and self.count - texts[0][1] >= self.limit:
            self.count -= texts.popleft()[1]


def query_status(address: str, secret: bytes, timeout: float = 5.0) -> dict[str, Any]:
    """Ask the coordinator at ``address`` for the job's status document (``neuron-watch status``).

    Raises:
        TransportError: no authenticated answer within ``timeout`` (wrong address, secret or port).
    """
    from neuron_watch.transport import AgentSocket

    signer = Signer.for_status(secret)
    sock = AgentSocket(address, linger_ms=0)
    nonce = secrets.randbits(62)
    session = (time.time_ns() // 1000) << 12
    try:
        h = Header(kind=Kind.STATUS_QUERY, job="", node="status-client", session=session, generation=0, seq=0,
                   mono=time.monotonic(), wall=time.time())
        deadline = time.monotonic() + timeout
        sent = False
        while time.monotonic() < deadline:
            if not sent:
                sent = sock.send(signer.sign(encode(Msg(h, StatusQuery(nonce)))))
            frames = sock.recv() if sock.poll(20) else None
            if frames is None:
                continue
            try:
                msg = decode(signer.verify(frames))
            except ProtocolError:
                continue
            if isinstance(msg.body, StatusReply) and msg.body.nonce == nonce and msg.header.target == session:
                doc: dict[str, Any] = json.loads(msg.body.doc)
                return doc
    finally:
        sock.close()
    raise TransportError(
        f"no answer from a coordinator at {address} within {timeout:.0f}s",
        "check the address (node 0 of the job, default port 29510) and that NEURON_WATCH_SECRET or "
        "--secret-file is the job's secret",
    )


def _fields(body: Body) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(body).items() if k not in ("seq", "generation")}


def _newest_reported_checkpoint(nodes: dict[str, NodeView], avoid: frozenset[str] = frozenset()) -> str:
    """The checkpoint to relaunch from when no chooser is given: the newest name any node reported."""
    reported = sorted({v.checkpoint for v in nodes.values() if v.checkpoint and v.checkpoint not in avoid})
    return reported[-1] if reported else ""


def default_judge_factory(config: WatchConfig) -> Callable[[int, float], JudgeLike]:
    """A :class:`neuron_watch.judge.Judge` per generation, from the watch options."""
    from neuron_watch.judge import Judge, JudgeSettings
    from neuron_watch.kb import default_knowledge_base

    kb = default_knowledge_base(config.progress_regex)
    settings = JudgeSettings(hang_timeout=config.hang_timeout, startup_timeout=config.startup_timeout,
                             compile_timeout=config.compile_timeout, save_timeout=config.save_timeout)

    def make(generation: int, now: float) -> JudgeLike:
        return Judge(kb, settings, now)

    return make


# -- the command --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bind", metavar="HOST:PORT", help="address to listen on (port 0: any free port)")
    parser.add_argument("--nodes", type=int, default=None, metavar="N", help="judge only once N nodes joined")
    parser.add_argument("--silence", type=float, default=10.0, metavar="SECONDS",
                        help="a node silent this long is `unobserved` (default 10)")
    parser.add_argument("--new-secret", metavar="FILE",
                        help="write a fresh job secret to FILE (mode 0600) and exit")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """``neuron-watch coordinator``: serve until SIGTERM/SIGINT or until the job is over."""
    from neuron_watch.errors import UsageError

    if args.new_secret:
        write_secret_file(args.new_secret)
        print(f"wrote a new job secret to {args.new_secret} (mode 0600)")
        return 0
    if not args.bind:
        raise UsageError("--bind HOST:PORT is required", "e.g. `neuron-watch coordinator --bind 0.0.0.0:29400`")
    _host, _, port = args.bind.rpartition(":")
    if not _host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--bind {args.bind!r} is not HOST:PORT with a port in 0..65535",
                         "e.g. `neuron-watch coordinator --bind 0.0.0.0:29400` (port 0: any free port)")
    secret = load_secret(os.environ, config.secret_file)
    job = config.job_id or os.environ.get("SLURM_JOB_ID") or time.strftime("job-%Y%m%d-%H%M%S")
    run_dir = config.run_dir or os.path.join("neuron-watch-runs", job)
    from neuron_watch.iofaults import check_run_dir

    check_run_dir(run_dir)
    settings = coordinator_settings(config, args.nodes, silence=args.silence)
    coord = Coordinator(args.bind, secret, run_dir, job=job, settings=settings,
                        judge_factory=default_judge_factory(config),
                        policy=RestartPolicy(max_restarts=config.max_restarts))
    from neuron_watch.console import status_line_for
    from neuron_watch.wiring import attach_sinks

    status_line = status_line_for(config)
    attach_sinks(coord.events, config, job, status_line)
    if status_line is not None:
        coord.status_listeners.append(status_line.update)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    from neuron_watch.console import hang_timeout_source, say

    # The banner on stdout is read by scripts (the endpoint of port 0); the console line is for operators.
    print(f"neuron-watch coordinator for job {job} on {coord.endpoint} ({socket.gethostname()}), "
          f"run dir {run_dir}", flush=True)
    say(f"start: coordinator for job {job} on {coord.endpoint}, waiting for {args.nodes or 'any number of'} "
        f"node(s); hang timeout {hang_timeout_source(config, os.environ)}")
    from neuron_watch.nbconsole import nonblocking_console

    try:
        with nonblocking_console():  # a stalled console must not stall the coordinator (nbconsole.py)
            code = coord.serve(lambda: bool(stopping))
    finally:
        coord.close()
        for s, h in old.items():
            signal.signal(s, h)
    if stopping:
        return int(ExitCode.SIGNAL_BASE) + stopping[0]
    return code


__all__ = ["Coordinator", "CoordinatorSettings", "JudgeLike", "Label", "NodeState", "NodeView", "Phase"]
