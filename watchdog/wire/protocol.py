"""The coordinator/agent wire format: pure encode/decode, no sockets, no I/O.

A message is two msgpack frames, ``[header, body]`` (never pickle); :mod:`neuron_watch.wire.auth`
appends a third, the HMAC signature, and :mod:`neuron_watch.wire.transport` moves the frames.

    header = [version, kind, job, node, session, generation, seq, base, mono, wall, rank, target, sent, echo]

* ``version`` is checked first, so a future header layout still reports "version mismatch".
* ``node`` + ``session`` name the sender: ``session`` is a per-process integer that starts with
  the process's start time in microseconds, so a restarted agent (or coordinator) has a larger
  session than the one it replaces (see :class:`SequenceTracker`).
* ``seq`` counts the sender's messages; ``base`` is the oldest ``seq`` the sender still holds for
  a resend (agents) -- what lies before it and was never received is lost and is counted.
* ``mono``/``wall`` are the sender's clocks when the message was assembled; lines, samples and
  exits carry their ages relative to them. ``sent`` is the sender's monotonic clock when this
  copy was sent (a resend updates it), so the receiver places every line on its own monotonic
  clock as ``receive time - (sent - mono) - age`` without comparing clocks across hosts.
* ``rank`` is -1 when the message is about the whole node; ``target`` is the agent session a
  command is addressed to (0 on agent messages).
* ``echo`` (agent messages): the coordinator session the agent last heard from (0: none yet). A
  coordinator acts only on messages that echo its own session, so a frame captured before it
  started (another coordinator session, or an agent's first messages) changes nothing when
  replayed; it answers such a frame with a *challenge* (an ``ack`` of seq -1 that tells its
  session) and the agent resends. Within a session, ``seq`` refuses replays.

Size: no frame exceeds :data:`MAX_FRAME_BYTES` (a constant of this schema, so both sides know it).
An agent cuts a line longer than :data:`MAX_LINE_BYTES` (and counts it: ``truncated_lines`` of
heartbeat and status) and splits its batches so that a lines body stays under
:data:`MAX_BODY_BYTES`.

Agent -> coordinator kinds: hello, lines, heartbeat, procs, exits, status.
Coordinator -> agent kinds (commands): ack, capture_evidence, stop, launch, shutdown, refused.

:func:`decode` raises :class:`ProtocolError` naming the problem for any frame it cannot trust
(wrong version, truncated, garbage, wrong types); it never returns half a message.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import msgpack

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.errors import TransportError
from neuron_watch.events import NO_PROGRESS, BatchColumns, LogLine, ProgressColumns, RankKey, RankSpan

#: Bumped on any incompatible change of the header or a body layout: a peer of another version is
#: refused by its version (read before the signature, since signing keys may change with it).
#: What each version changed: docs/multinode.md, "Schema versions".
SCHEMA_VERSION = 12

#: The verdict of a capture or a stop that carries none.
NO_VERDICT: Mapping[str, Any] = MappingProxyType({})

#: Upper bound for one frame, known to both sides (a constant of this schema): a bigger frame is
#: refused before it is unpacked (and libzmq drops the connection of a peer sending one: MAXMSGSIZE).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: An agent's lines body stays below this (it splits batches; the rest is room for the header).
MAX_BODY_BYTES = MAX_FRAME_BYTES - (1 << 20)
#: A longer line (UTF-8 bytes) is cut by the agent to this length, marked and counted as truncated.
#: Even a batch of one such line stays far below MAX_BODY_BYTES when it is also a match (sent twice).
MAX_LINE_BYTES = 8 * 1024 * 1024
#: A rank's output line is kept whole up to this many bytes; the node's tail cuts a longer one there
#: (marked, counted with the lines cut to MAX_LINE_BYTES): what a node holds for a line is bounded.
RANK_LINE_BYTES = 1 << 20


class ProtocolError(TransportError):
    """A frame could not be trusted. ``problem`` is a short code used for drop counters."""

    def __init__(self, problem: str, message: str) -> None:
        super().__init__(message, "check that every node runs the same neuron-watch version and job secret")
        self.problem = problem


class Kind(str, enum.Enum):
    """Message kinds. The first six travel agent -> coordinator, the rest are commands."""

    HELLO = "hello"
    LINES = "lines"
    HEARTBEAT = "heartbeat"
    PROCS = "procs"
    EXITS = "exits"
    STATUS = "status"
    ACK = "ack"
    CAPTURE_EVIDENCE = "capture_evidence"
    STOP = "stop"
    LAUNCH = "launch"
    SHUTDOWN = "shutdown"
    REFUSED = "refused"  # coordinator -> an agent of another job that holds the same secret
    STATUS_QUERY = "status_query"  # an operator's `neuron-watch status --coordinator` (read-only)
    STATUS_REPLY = "status_reply"

    @property
    def is_command(self) -> bool:
        return self in COMMAND_KINDS


COMMAND_KINDS = frozenset({Kind.ACK, Kind.CAPTURE_EVIDENCE, Kind.STOP, Kind.LAUNCH, Kind.SHUTDOWN,
                           Kind.REFUSED, Kind.STATUS_REPLY})
AGENT_KINDS = frozenset(Kind) - COMMAND_KINDS
_KINDS = {k.value: k for k in Kind}


@dataclass(frozen=True, slots=True)
class Header:
    """Who sent a message, in which job/generation, its place in the sender's sequence, and when."""

    kind: Kind
    job: str
    node: str
    session: int
    generation: int
    seq: int
    base: int = 0
    mono: float = 0.0
    wall: float = 0.0
    rank: int = -1
    target: int = 0
    sent: float = 0.0
    echo: int = 0
    version: int = SCHEMA_VERSION
    #: (schema 12) the body may make a verdict (a failure's line, an exit, the node's status): the
    #: coordinator takes it, and its node's messages before it, ahead of the steady ones (job/intake.py).
    #: A hint for ordering only, read before the signature: it moves nothing else.
    urgent: bool = False


# ---- the job's size: how often agents send -------------------------------------------------

#: A coordinator's budget of ``lines`` messages a second, all nodes together: its cost is per
#: message (~50-100 us: signature, decode, sequence, ack) and per rank in a batch, so beyond this
#: many nodes the agents' batches grow older instead of more numerous (tests/benchmarks/bench_scale.py).
LINES_MSGS_PER_SECOND = 1000
#: ... and of ``procs`` messages a second (each is every rank process of a node: ~7 us a worker).
PROCS_MSGS_PER_SECOND = 256
#: The coarsest the agents go: a batch a second, a process reading every 5 seconds.
MAX_BATCH_AGE = 1.0
MAX_PROCS_EVERY = 5.0


def batch_age_at(nodes: int, floor: float) -> float:
    """The agents' batch age in a job of ``nodes`` nodes: ``floor`` (the configured age: one
    node's latency) up to 1,000 lines messages a second in all, older beyond (``nodes`` / 1,000
    seconds), at most :data:`MAX_BATCH_AGE`: 50 ms up to 50 nodes, 128 ms at 128, 1 s at 1,000."""
    return max(floor, min(MAX_BATCH_AGE, nodes / LINES_MSGS_PER_SECOND))


def procs_every_at(nodes: int, floor: float = 1.0) -> float:
    """Seconds between two ``procs`` messages of a node in a job of ``nodes`` nodes: ``floor``
    (the agents' sampling interval) up to 256 nodes, ``nodes`` / 256 beyond, at most
    :data:`MAX_PROCS_EVERY`: 4 s at 1,024 nodes."""
    return max(floor, min(MAX_PROCS_EVERY, nodes / PROCS_MSGS_PER_SECOND))


def progress_pace_at(nodes: int) -> float:
    """Seconds a node may hold a rank's steady progress before the judge sees it, in a job of ``nodes``
    nodes: the process readings' growth (``procs_every_at(nodes) - 1``): 0 up to 256 nodes (every row
    goes with its batch), 3 s at 1,024. The judge's hang clock already waits that much longer
    (:func:`delivery_slack_at` counts the same growth), so a row held that long is never taken for
    silence (see :class:`Lines`, ``judged`` and ``held``)."""
    return procs_every_at(nodes) - 1.0


#: What every node together may have sent the coordinator and not yet had acknowledged: its receive
#: queues (libzmq bounds them in messages, not bytes) never hold more than this, plus one message a
#: node and the copies of a resend round (which waits while the coordinator is behind).
COORDINATOR_QUEUE_BYTES = 512 << 20


def window_bytes_at(nodes: int, ceiling: int) -> int:
    """An agent's bytes in flight unacknowledged in a job of ``nodes`` nodes: its share of
    :data:`COORDINATOR_QUEUE_BYTES`, at most ``ceiling`` (its own setting): 512 KiB at 1,024 nodes
    (a second of 64 ranks at 10 lines a second is ~100 KB). A message bigger than the window still
    goes, alone."""
    return min(ceiling, COORDINATOR_QUEUE_BYTES // max(1, nodes))


def delivery_slack_at(nodes: int, floor: float = 0.05) -> float:
    """How much later a line or a process reading may reach the coordinator in a job of ``nodes``
    nodes than at the pace of a small one (batches of ``floor`` seconds, readings every second):
    0 up to 50 nodes, ~4 s at 1,024. The judge's hang clock waits that much longer."""
    return batch_age_at(nodes, floor) - floor + procs_every_at(nodes) - 1.0


# ---- bodies ---------------------------------------------------------------------------------


class RankLines(NamedTuple):
    """One rank's lines of a batch, as one text: ``text`` is the lines joined by "\\n".

    Ages are relative to the header's ``mono``/``wall``: ``d_first`` is the first line's (when it
    was read), ``d_last`` the newest line's (the smallest age), ``d_wall`` the first line's on
    the wall clock. No line contains "\\n" (the sender replaces it), so ``text`` holds exactly
    ``n_lines - 1`` of them. (A named tuple, not a dataclass: the coordinator decodes thousands
    a second, and a tuple is built in C.)
    """

    rank: int
    n_lines: int
    d_first: float
    d_last: float
    d_wall: float
    text: str


class LineMatch(NamedTuple):
    """A line the sender's knowledge base matched: which rank (index into ``Lines.ranks``),
    which signature, the progress step/loss it read, the line's age, origin and text."""

    chunk: int
    signature: str
    step: int | None
    loss: float | None
    d_mono: float
    text: str
    source: str = ""
    lineno: int = 0


class RankProgress(NamedTuple):
    """A rank whose lines in the batch were all progress lines with a step, coalesced to its latest
    one: the last line of ``Lines.ranks[chunk]`` (its text, ``d_last`` old) read ``step`` and
    ``loss`` with ``signature``. Its first and last times are the rank's row's; the text
    travels once, in the row (see :func:`neuron_watch.diagnosis.classify.coalesce_progress`).
    ``stands_for`` (schema 10): the progress lines it stands for, this batch's and those the node held
    since the rank's last row (for the record: the judge reads the newest line only)."""

    chunk: int
    signature: str
    step: int
    loss: float | None
    source: str = ""
    lineno: int = 0
    stands_for: int = 1


class HeldProgress(NamedTuple):
    """A rank's newest line, a progress line the node held (schema 10: see ``Lines.held``), sent in a
    batch where the rank has no line: the rank (its number, not an index into ``Lines.ranks``), the
    match (``signature``, ``step``, ``loss``), its age on the header's monotonic and wall clocks, its
    stream and line number, its text, and ``stands_for``, the progress lines it stands for."""

    rank: int
    signature: str
    step: int
    loss: float | None
    d_mono: float
    d_wall: float
    text: str
    source: str = ""
    lineno: int = 0
    stands_for: int = 1


class RankBlock(NamedTuple):
    """Consecutive lines of one rank's stream around a line that reports a failure: its error block, that the
    judge reads the failure's cause from (:mod:`neuron_watch.diagnosis.errorblock`), as offline ``diagnose``
    reads it from the rank's log. ``chunk``: the rank (index into ``Lines.ranks``); ``source``: the stream;
    ``d_mono``: the age of the newest line; ``linenos``: each line's number in its stream; ``text``: the
    lines joined by "\\n" (``len(linenos) - 1`` of them). The sender bounds it (node/error_context.py)."""

    chunk: int
    source: str
    d_mono: float
    linenos: tuple[int, ...]
    text: str


class LoggedRanks(NamedTuple):
    """What a body decoded for the judge alone (:attr:`Lines.logged`) keeps of the rows it did not decode:
    every rank of the batch in the body's order (the job log's keys), the batch's lines, and the
    judged ranks' places among them (the rows ``Lines.ranks`` holds)."""

    ranks: tuple[int, ...]
    n_lines: int
    judged: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Hello:
    """First message of an agent session: what it runs, and its ``place`` in the job (torchrun's
    ``node_rank``, Slurm's ``SLURM_PROCID``, SageMaker's host index; -1: not known). The
    coordinator knows nodes by their place: two agents claiming one are refused."""

    hostname: str
    pid: int
    ranks: tuple[int, ...] = ()
    agent_version: str = ""
    place: int = -1


@dataclass(frozen=True, slots=True)
class Lines:
    """A batch of lines of the sender's node: per rank one joined text, plus what matched.

    ``ranks``: one :class:`RankLines` per rank, in the order each rank's first line was read
    (a rank's lines keep their order; lines of different ranks are grouped per rank).
    ``matches``: the lines the sender's knowledge base matched, in the order they were read --
    all of them, or the ones :func:`neuron_watch.diagnosis.classify.compact_matches` keeps. ``classified``
    is :func:`neuron_watch.diagnosis.classify.kb_fingerprint` of that knowledge base; 0 = the sender did not
    classify (the receiver classifies the text itself). ``progress``: the ranks that printed only
    steps, each coalesced to its latest step (:class:`RankProgress`), instead of a match each.
    ``blocks``: the error blocks around the failures among ``matches`` (:class:`RankBlock`); a body without
    them travels in the layout it had before it could carry them (five items).

    ``judged`` and ``held`` (schema 10): the node keeps each rank's progress and sends the judge what
    changed (:mod:`neuron_watch.node.progress_pace`). ``judged``: the indices into ``ranks`` of the ranks
    the judge takes this batch (their times and newest line); ``None``: every rank (a body without
    ``judged`` or ``held`` keeps its five or six items). A rank left out printed nothing but steady
    progress the node holds: its lines are the job log's (``merged.log``, the tails), not the judge's,
    until its row is due. Every rank of ``matches`` and ``progress`` is judged. ``held``: the rows the
    node held of ranks with no line in this batch, now due (:class:`HeldProgress`).

    ``logged``: set on a body decoded for the judge alone (``decode_body(..., judged_only=True)``): ``ranks``
    then holds the judged ranks only (``matches``, ``progress`` and ``blocks`` index them, ``judged`` is
    None), and ``logged`` names every rank of the batch and counts its lines (the job log's, whose writer
    decodes the frame itself). Such a body is never encoded again.

    ``shed`` (schema 11): lines of the sender's node left out of this body and of ``merged.log`` (a
    node sends a batch's judged part alone while the coordinator is behind: :mod:`neuron_watch.node.bulk_shed`;
    the ranks' own logs have them), counted; not in :attr:`n_lines`. A body that sheds nothing keeps its
    layout; one that does carries it as a ninth item.
    """

    ranks: tuple[RankLines, ...]
    matches: tuple[LineMatch, ...] = ()
    classified: int = 0
    progress: tuple[RankProgress, ...] = ()
    blocks: tuple[RankBlock, ...] = ()
    judged: tuple[int, ...] | None = None
    held: tuple[HeldProgress, ...] = ()
    logged: LoggedRanks | None = None
    shed: int = 0

    @property
    def n_lines(self) -> int:
        if self.logged is not None:
            return self.logged.n_lines
        return sum(r.n_lines for r in self.ranks)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Liveness plus the sender's loss counters (what it had to drop while the coordinator was away)."""

    buffered: int = 0
    dropped_lines: int = 0
    dropped_msgs: int = 0
    truncated_lines: int = 0  # lines the agent cut to MAX_LINE_BYTES so far (their text is marked)


@dataclass(frozen=True, slots=True)
class ProcSample:
    """A live compiler process of a rank: pid and CPU seconds so far, ``d_mono`` seconds old."""

    rank: int
    pid: int
    cpu_seconds: float
    d_mono: float = 0.0


@dataclass(frozen=True, slots=True)
class Procs:
    """All live compiler processes of the node (an empty tuple: none any more) and the fresh
    compile-cache ``*.lock`` files it sees.

    ``same_as``: -1 for a whole reading. Otherwise the reading says only what changed since the one
    of the node's procs message ``same_as`` (one the coordinator acknowledged): ``workers`` (and
    ``activity``) hold the rank processes whose pid, CPU or state changed, ``gone`` the ranks whose
    process left; ``collectives`` holds the groups whose progress changed (a reading none of whose
    groups changed is left out). The rest is as in that reading.
    """

    samples: tuple[ProcSample, ...]
    locks: tuple[str, ...] = ()
    workers: tuple[tuple[int, int], ...] = ()  # (rank, pid) of the node's rank processes
    collectives: tuple[RankCollectives, ...] = ()  # flight recorder readings taken since the last procs
    activity: tuple[WorkerActivity, ...] = ()  # what each rank process was doing (same order as workers)
    same_as: int = -1
    gone: tuple[int, ...] = ()


class WorkerActivity(NamedTuple):
    """A rank process seen in the process table: CPU seconds of it and everything under it, and
    its /proc state (``T``: stopped by a signal). (A named tuple: the coordinator decodes every
    node's 64 of them with each reading, built in C.)"""

    rank: int
    tree_cpu_seconds: float
    state: str


class RankCollectives(NamedTuple):
    """One rank's flight recorder reading, ``d_mono`` seconds old.

    ``problem``: why there is no reading (``""``: ``groups`` is the reading; an empty ``groups``
    with no problem means the recorder answered but no process group recorded a collective yet).
    (A named tuple: the coordinator decodes ~50 of them with every node's reading, built in C.)
    """

    rank: int
    groups: tuple[GroupProgress, ...]
    problem: str = ""
    d_mono: float = 0.0


@dataclass(frozen=True, slots=True)
class ExitInfo:
    """A rank (or the node's launcher, rank -1) exited with ``exit_code``, ``d_mono`` seconds ago.

    ``presumed`` (schema 9): the code is not an exit status the node read but what the rank's own
    record says: its interpreter finished normally with no uncaught exception (the rank bootstrap's
    ``exited`` status, written at its exit) and its process is gone, so 0 is presumed. A
    ``sys.exit(3)`` or an abort after that record looks the same: a launcher's report of another code
    for the rank (torchrun's failure report) replaces it. On the wire: a 4th item, 1, only when set."""

    rank: int
    exit_code: int
    d_mono: float = 0.0
    presumed: bool = False


@dataclass(frozen=True, slots=True)
class Exits:
    exits: tuple[ExitInfo, ...]


@dataclass(frozen=True, slots=True)
class Status:
    """The node's state as its agent sees it (:class:`~neuron_watch.events.NodeStatus`'s words),
    ``detail`` for people (an exit code, a reason), ``report`` the state's typed report as a map
    (``evidence_done``: :class:`~neuron_watch.events.EvidenceReport`; ``stopped``:
    :class:`~neuron_watch.events.StopReport`; {} otherwise)."""

    state: str
    detail: str = ""
    checkpoint: str = ""
    dropped_lines: int = 0
    dropped_msgs: int = 0
    truncated_lines: int = 0
    report: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Ack:
    """Coordinator -> agent: every message of the agent session up to ``seq`` arrived.

    ``nodes``: how many nodes the job has as the coordinator knows it (the agents batch and sample
    less often in a bigger job: :func:`batch_age_at`, :func:`procs_every_at`); ``behind``: how many
    seconds of the nodes' messages wait in its queues (an agent resends less eagerly meanwhile).
    """

    seq: int
    nodes: int = 0
    behind: float = 0.0


@dataclass(frozen=True, slots=True)
class CaptureEvidence:
    incident: str
    reason: str = ""
    #: the pending verdict, a map as ``verdict.json`` holds it (empty from a coordinator that sends none)
    verdict: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str = ""
    deadline: float = 15.0  # seconds from SIGTERM to SIGKILL
    #: the incident's final verdict, a map as ``verdict.json`` holds it: nodes complete their bundle
    #: with it before uploading; empty for a stop that is not an incident's (a signal, a shutdown)
    verdict: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Launch:
    """Relaunch the node's processes as ``generation`` from ``checkpoint`` ('' = from scratch)."""

    generation: int
    checkpoint: str = ""


@dataclass(frozen=True, slots=True)
class Shutdown:
    reason: str = ""
    exit_code: int = 0


@dataclass(frozen=True, slots=True)
class Refused:
    """Coordinator -> an agent whose messages are signed with the same secret but name another job:
    the agent is not taken in. ``job`` is the coordinator's job, ``agent_job`` the agent's."""

    job: str
    agent_job: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StatusQuery:
    """Operator -> coordinator: send me the job's status document (changes nothing)."""

    nonce: int


@dataclass(frozen=True, slots=True)
class StatusReply:
    """Coordinator -> operator: the job's ``status.json`` document, as JSON text."""

    nonce: int
    doc: str


Body = (Hello | Lines | Heartbeat | Procs | Exits | Status | Ack | CaptureEvidence | Stop | Launch | Shutdown
        | Refused | StatusQuery | StatusReply)

_BODY_KIND: dict[type, Kind] = {
    Hello: Kind.HELLO,
    Lines: Kind.LINES,
    Heartbeat: Kind.HEARTBEAT,
    Procs: Kind.PROCS,
    Exits: Kind.EXITS,
    Status: Kind.STATUS,
    Ack: Kind.ACK,
    CaptureEvidence: Kind.CAPTURE_EVIDENCE,
    Stop: Kind.STOP,
    Launch: Kind.LAUNCH,
    Shutdown: Kind.SHUTDOWN,
    Refused: Kind.REFUSED,
    StatusQuery: Kind.STATUS_QUERY,
    StatusReply: Kind.STATUS_REPLY,
}


@dataclass(frozen=True, slots=True)
class Msg:
    """A decoded (or to-be-encoded) message. ``header.kind`` always matches ``body``'s type."""

    header: Header
    body: Body


def kind_of(body: Body) -> Kind:
    """The :class:`Kind` of a body object."""
    return _BODY_KIND[type(body)]


# ---- encode ---------------------------------------------------------------------------------


def _body_to_wire(body: Body) -> list[Any]:
    if isinstance(body, Lines):
        if body.logged is not None:
            raise ValueError("a lines body decoded for the judge alone holds the judged ranks only: it is "
                             "never encoded again (send the frame it came in)")
        # Paths repeat on every match of a file: send each once per batch, index it per match.
        sources: dict[str, int] = {}
        matches = []
        for m in body.matches:
            idx = sources.setdefault(m.source, len(sources))
            matches.append([m.chunk, m.signature, m.step, m.loss, m.d_mono, m.text, idx, m.lineno])
        progress = [[g.chunk, g.signature, g.step, g.loss, sources.setdefault(g.source, len(sources)), g.lineno,
                     g.stands_for] for g in body.progress]
        blocks = [[k.chunk, sources.setdefault(k.source, len(sources)), k.d_mono, list(k.linenos), k.text]
                  for k in body.blocks]
        held = [[g.rank, g.signature, g.step, g.loss, g.d_mono, g.d_wall, g.text,
                 sources.setdefault(g.source, len(sources)), g.lineno, g.stands_for] for g in body.held]
        items = [body.classified, list(sources),
                 [[r.rank, r.n_lines, r.d_first, r.d_last, r.d_wall, r.text] for r in body.ranks], matches, progress]
        if body.shed:  # (only then: nine items)
            return [*items, blocks, None if body.judged is None else list(body.judged), held, body.shed]
        if body.judged is not None or held:  # (only then: a body that judges every rank keeps five or six items)
            return [*items, blocks, None if body.judged is None else list(body.judged), held]
        return [*items, blocks] if blocks else items  # (only then: a body without blocks keeps its five items)
    if isinstance(body, Hello):
        return [body.hostname, body.pid, list(body.ranks), body.agent_version, body.place]
    if isinstance(body, Heartbeat):
        return [body.buffered, body.dropped_lines, body.dropped_msgs, body.truncated_lines]
    if isinstance(body, Procs):
        return _procs_to_wire(body)
    if isinstance(body, Exits):
        return [[[e.rank, e.exit_code, e.d_mono, 1] if e.presumed else [e.rank, e.exit_code, e.d_mono]
                 for e in body.exits]]
    if isinstance(body, Status):
        return [body.state, body.detail, body.checkpoint, body.dropped_lines, body.dropped_msgs, body.truncated_lines,
                body.report]
    if isinstance(body, Ack):
        return [body.seq, body.nodes, body.behind]
    if isinstance(body, CaptureEvidence):
        return [body.incident, body.reason, dict(body.verdict)]
    if isinstance(body, Stop):
        return [body.reason, body.deadline, dict(body.verdict)]
    if isinstance(body, Launch):
        return [body.generation, body.checkpoint]
    if isinstance(body, Refused):
        return [body.job, body.agent_job, body.reason]
    if isinstance(body, StatusQuery):
        return [body.nonce]
    if isinstance(body, StatusReply):
        return [body.nonce, body.doc]
    return [body.reason, body.exit_code]  # Shutdown


def _procs_to_wire(body: Procs) -> list[Any]:
    """A procs body by column (schema 9): ``[samples, locks, workers, collectives, [same_as, gone]]``.

    ``workers``: ``[ranks, pids, tree CPU seconds, states]``, a worker without activity has ``None``
    for both; ``collectives``: ``[texts, ranks, ages, problems, groups a reading, then each group's
    name, completed, started, enqueued, op, state, wall, seq, shape]``, the group's name, op, state
    and shape as indices into ``texts`` (a message's readings repeat a few of them: every rank runs
    the same collectives). A column of each field, not a row of each worker and group: the
    coordinator unpacks ~15 lists a message instead of ~270, and each repeated text once."""
    active = {a.rank: a for a in body.activity}
    ranks = [r for r, _p in body.workers]
    acts = list(map(active.get, ranks))
    workers = [ranks, [p for _r, p in body.workers], [None if a is None else a.tree_cpu_seconds for a in acts],
               [None if a is None else a.state for a in acts]]
    texts: dict[str, int] = {}
    text = texts.setdefault
    groups = [g for c in body.collectives for g in c.groups]
    collectives = [[c.rank for c in body.collectives], [c.d_mono for c in body.collectives],
                   [c.problem for c in body.collectives], [len(c.groups) for c in body.collectives],
                   [text(g.group, len(texts)) for g in groups], [g.completed for g in groups],
                   [g.started for g in groups], [g.enqueued for g in groups], [text(g.op, len(texts)) for g in groups],
                   [text(g.state, len(texts)) for g in groups], [g.wall for g in groups], [g.seq for g in groups],
                   [text(g.shape, len(texts)) for g in groups]]
    return [[[s.rank, s.pid, s.cpu_seconds, s.d_mono] for s in body.samples], list(body.locks), workers,
            [list(texts), *collectives], [body.same_as, list(body.gone)]]


def encode_header(h: Header) -> bytes:
    """The header frame alone (an agent re-encodes only the header when it resends)."""
    out: bytes = msgpack.packb([h.version, h.kind.value, h.job, h.node, h.session, h.generation, h.seq, h.base,
                          h.mono, h.wall, h.rank, h.target, h.sent, h.echo, h.urgent], use_bin_type=True)
    return out


def encode_body(body: Body) -> bytes:
    """The body frame alone."""
    out: bytes = msgpack.packb(_body_to_wire(body), use_bin_type=True)
    return out


def encode(msg: Msg) -> list[bytes]:
    """``[header, body]`` frames for ``msg``.

    Raises:
        ProtocolError: ``header.kind`` does not match the body type (a programming error).
    """
    if kind_of(msg.body) is not msg.header.kind:
        raise ProtocolError("kind", f"header kind {msg.header.kind.value} does not match body "
                            f"{type(msg.body).__name__}")
    return [encode_header(msg.header), encode_body(msg.body)]


# ---- decode ---------------------------------------------------------------------------------


def _unpack(frame: bytes, what: str) -> Any:
    if len(frame) > MAX_FRAME_BYTES:
        raise ProtocolError("oversize", f"{what} frame is {len(frame)} bytes (limit {MAX_FRAME_BYTES})")
    try:
        return msgpack.unpackb(frame, raw=False, use_list=True, strict_map_key=True)
    except msgpack.ExtraData as exc:
        raise ProtocolError("garbage", f"{what} frame has trailing bytes after its value") from exc
    except (ValueError, msgpack.UnpackException) as exc:
        # msgpack reports a cut-off frame as "Unpack failed: incomplete input" (ValueError).
        problem = "truncated" if "incomplete" in str(exc) else "garbage"
        raise ProtocolError(problem, f"{what} frame is not valid msgpack ({problem}): {exc}") from exc
    except Exception as exc:  # the C unpacker raises assorted types (e.g. on bad UTF-8)
        raise ProtocolError("garbage", f"{what} frame is not valid msgpack: {type(exc).__name__}") from exc


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise ProtocolError("field", f"{what} must be an integer, got {type(v).__name__}")
    return v


def _float(v: Any, what: str) -> float:
    if type(v) is float or type(v) is int:
        f = float(v)
        if math.isfinite(f):
            return f
    raise ProtocolError("field", f"{what} must be a finite number, got {v!r:.40}")


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise ProtocolError("field", f"{what} must be a string, got {type(v).__name__}")
    return v


def _map(v: Any, what: str) -> dict[str, Any]:
    if type(v) is not dict or any(type(k) is not str for k in v):
        raise ProtocolError("field", f"{what} must be a map with text keys, got {type(v).__name__}")
    return v


def _list(v: Any, n: int | None, what: str) -> list[Any]:
    if type(v) is not list:
        raise ProtocolError("field", f"{what} must be an array, got {type(v).__name__}")
    if n is not None and len(v) != n:
        problem = "truncated" if len(v) < n else "field"
        raise ProtocolError(problem, f"{what} has {len(v)} fields, expected {n}")
    return v


def decode_header(frame: bytes) -> Header:
    """Decode and validate a header frame alone (the version is checked before anything else)."""
    raw = _unpack(frame, "header")
    if type(raw) is not list or not raw:
        raise ProtocolError("garbage", "header frame is not a non-empty array")
    if raw[0] != SCHEMA_VERSION:
        raise ProtocolError(
            "version",
            f"schema version mismatch: peer speaks {raw[0]!r:.20}, this neuron-watch speaks {SCHEMA_VERSION}",
        )
    _list(raw, 15, "header")
    if type(raw[14]) is not bool:
        raise ProtocolError("field", f"header urgent must be a boolean, got {type(raw[14]).__name__}")
    kind = _KINDS.get(raw[1]) if type(raw[1]) is str else None
    if kind is None:
        raise ProtocolError("kind", f"unknown message kind {raw[1]!r:.40}")
    return Header(
        kind=kind,
        job=_str(raw[2], "job"),
        node=_str(raw[3], "node"),
        session=_int(raw[4], "session"),
        generation=_int(raw[5], "generation"),
        seq=_int(raw[6], "seq"),
        base=_int(raw[7], "base"),
        mono=_float(raw[8], "mono"),
        wall=_float(raw[9], "wall"),
        rank=_int(raw[10], "rank"),
        target=_int(raw[11], "target"),
        sent=_float(raw[12], "sent"),
        echo=_int(raw[13], "echo"),
        urgent=raw[14],
    )


#: Upper bound on a lines body's ranks/matches (a batch is bounded by the sender's batch size).
MAX_BATCH_ITEMS = 1_000_000


_NUMBER = frozenset({int, float})
_FLOAT = frozenset({float})
_FLOAT_NONE = frozenset({float, type(None)})
_INT = frozenset({int})
_STR = frozenset({str})
_LIST = frozenset({list})
_STEP = frozenset({int, type(None)})


def _finite_numbers(col: tuple[Any, ...]) -> bool:
    try:
        return set(map(type, col)) <= _NUMBER and all(map(math.isfinite, col))
    except OverflowError:  # an integer beyond a float's range
        return False


#: ``n - 1`` of each line count, in C (``map(operator.sub, counts, _ONES)``; an endless iterator that
#: every call shares: ``map`` stops at the counts' end)
_ONES = itertools.repeat(1)


def _decode_lines_fast(b: list[Any]) -> Lines | None:
    """The hot path of the coordinator: every check of :func:`_decode_lines`, column by column in
    C (``map``/``set``/``zip``), with no Python step per rank or match. ``None`` when anything is
    off: :func:`_decode_lines` then names the problem."""
    if type(b) is not list or len(b) != 5:
        return None
    classified, sources, rows, mrows, prows = b
    if (type(classified) is not int or not 0 <= classified < 1 << 63 or type(sources) is not list
            or type(rows) is not list or type(mrows) is not list or not 0 < len(rows) <= MAX_BATCH_ITEMS
            or len(mrows) > MAX_BATCH_ITEMS or not set(map(type, sources)) <= _STR
            or type(prows) is not list or len(prows) > len(rows)):
        return None
    if set(map(type, rows)) != _LIST or set(map(len, rows)) != {6}:
        return None
    rank_c, n_c, df_c, dl_c, dw_c, text_c = zip(*rows, strict=True)
    times = df_c + dl_c + dw_c  # (one pass of each check over the three time columns)
    # Times must be floats here (what every agent sends); integers take the checked path.
    if not (set(map(type, rank_c + n_c)) == _INT and set(map(type, text_c)) == _STR
            and set(map(type, times)) == _FLOAT and all(map(math.isfinite, times))
            and len(set(rank_c)) == len(rank_c) and min(n_c) >= 1
            and list(map(str.count, text_c, itertools.repeat("\n"))) == list(map(operator.sub, n_c, _ONES))
            and not any(map(operator.gt, dl_c, df_c))):
        return None
    # tuple.__new__ through map: the named tuples are built in C (lengths were checked above).
    ranks: tuple[RankLines, ...] = tuple(map(tuple.__new__, itertools.repeat(RankLines), rows))
    progress: tuple[RankProgress, ...] = ()
    if prows:
        if set(map(type, prows)) != _LIST or set(map(len, prows)) != {7}:
            return None
        pchunk_c, psig_c, pstep_c, ploss_c, psi_c, plineno_c, pcount_c = zip(*prows, strict=True)
        if not (set(map(type, pchunk_c + pstep_c + psi_c + plineno_c + pcount_c)) == _INT
                and set(map(type, psig_c)) == _STR and set(map(type, ploss_c)) <= _FLOAT_NONE
                and all(map(math.isfinite, filter(None, ploss_c)))  # (None and 0.0 left out: not a float, finite)
                and min(pchunk_c) >= 0 and max(pchunk_c) < len(ranks) and len(set(pchunk_c)) == len(pchunk_c)
                and min(psi_c) >= 0 and max(psi_c) < len(sources) and min(pcount_c) >= 1):
            return None
        progress = tuple(map(tuple.__new__, itertools.repeat(RankProgress),
                             zip(pchunk_c, psig_c, pstep_c, ploss_c, map(sources.__getitem__, psi_c), plineno_c,
                                 pcount_c, strict=True)))
    if not mrows:
        return Lines(ranks, (), classified, progress)
    if set(map(type, mrows)) != _LIST or set(map(len, mrows)) != {8}:
        return None
    chunk_c, sig_c, step_c, loss_c, dm_c, mtext_c, si_c, lineno_c = zip(*mrows, strict=True)
    if not (set(map(type, chunk_c + si_c + lineno_c)) == _INT and set(map(type, sig_c + mtext_c)) == _STR
            and set(map(type, step_c)) <= _STEP and set(map(type, loss_c)) <= _FLOAT_NONE
            and set(map(type, dm_c)) == _FLOAT
            and all(map(math.isfinite, filter(None, loss_c))) and all(map(math.isfinite, dm_c))
            and min(chunk_c) >= 0 and max(chunk_c) < len(ranks) and min(si_c) >= 0 and max(si_c) < len(sources)
            and "\n".join(mtext_c).count("\n") == len(mtext_c) - 1):
        return None
    matches: tuple[LineMatch, ...] = tuple(map(
        tuple.__new__, itertools.repeat(LineMatch),
        zip(chunk_c, sig_c, step_c, loss_c, dm_c, mtext_c, map(sources.__getitem__, si_c), lineno_c, strict=True)))
    return Lines(ranks, matches, classified, progress)


def _decode_lines(b: list[Any]) -> Lines:
    shed = 0
    if type(b) is list and len(b) == 9:
        shed = _int(b[8], "shed")
        if shed < 1:
            raise ProtocolError("field", f"a lines body's shed count is positive when present, got {shed}")
        b = b[:8]
    if type(b) is list and len(b) in (6, 8):
        # the error blocks are few (a rank's failure) and checked one by one; the rest as any body's
        fast = _decode_lines_fast(b[:5])
        if fast is None:
            return dataclasses.replace(_decode_lines_checked(b), shed=shed) if shed else _decode_lines_checked(b)
        blocks = _blocks(b[5], len(fast.ranks), b[1])
        judged, held = _paced(b[6], b[7], fast, b[1]) if len(b) == 8 else (None, ())
        return Lines(fast.ranks, fast.matches, fast.classified, fast.progress, blocks, judged, held, shed=shed)
    fast = _decode_lines_fast(b)
    return fast if fast is not None else _decode_lines_checked(b)


_first, _second = operator.itemgetter(0), operator.itemgetter(1)


def _rechunked(rows: list[Any], place: dict[int, int]) -> list[Any] | None:
    """Rows whose first item is a rank index (matches, progress rows, error blocks) with that index
    turned into its rank's place among the judged ranks; None when a row is not a list starting with a
    judged rank's index (the whole body's decode then names the problem)."""
    if not rows:
        return rows
    if set(map(type, rows)) != _LIST or 0 in set(map(len, rows)):
        return None
    chunks = list(map(_first, rows))
    if not set(map(type, chunks)) <= _INT:
        return None
    places = list(map(place.get, chunks))
    if None in places:
        return None
    return [[i, *row[1:]] for i, row in zip(places, rows, strict=True)]


def _decode_lines_judged(b: list[Any]) -> Lines | None:
    """The judged part of a paced body (schema 10: a ``judged`` list) decoded alone, for a coordinator
    whose job log's writer decodes the whole frame itself: every rank's number and line count
    (checked: the job log's keys and counts), the judged ranks' rows, the matches, progress rows, error
    blocks and held rows, all checked as in the whole body's decode; the other ranks' times and texts are
    neither checked nor built (a light batch at 1,024 nodes judges one or a few of its 64 ranks). The
    result's chunks index the judged ranks (:attr:`Lines.logged`). ``None``: not such a body, most of its
    ranks judged (the whole decode costs no more), or anything off (the whole decode names it)."""
    if len(b) != 8 or type(b[6]) is not list or type(b[2]) is not list or type(b[1]) is not list:
        return None
    classified, sources, rows, mrows, prows, brows, judged, held_v = b
    if not judged or 2 * len(judged) > len(rows) or len(rows) > MAX_BATCH_ITEMS:
        return None
    if set(map(type, rows)) != _LIST or set(map(len, rows)) != {6}:
        return None
    rank_c, n_c = tuple(map(_first, rows)), tuple(map(_second, rows))
    if not (set(map(type, rank_c + n_c + tuple(judged))) == _INT and len(set(rank_c)) == len(rank_c)
            and min(n_c) >= 1 and len(set(judged)) == len(judged) and min(judged) >= 0 and max(judged) < len(rows)
            and type(mrows) is list and type(prows) is list and type(brows) is list):
        return None
    place = dict(zip(judged, range(len(judged)), strict=True))
    mrows, prows, brows = _rechunked(mrows, place), _rechunked(prows, place), _rechunked(brows, place)
    if mrows is None or prows is None or brows is None:
        return None
    part = _decode_lines_fast([classified, sources, list(map(rows.__getitem__, judged)), mrows, prows])
    if part is None or len(brows) > len(judged) * MAX_BLOCKS_PER_RANK:
        return None
    try:
        blocks, held = _blocks(brows, len(part.ranks), sources), _held(held_v, set(rank_c), sources)
    except ProtocolError:
        return None
    return Lines(part.ranks, part.matches, part.classified, part.progress, blocks, None, held,
                 LoggedRanks(rank_c, sum(n_c), tuple(judged)))


#: a held progress row's fields (HeldProgress on the wire: the source as an index into the body's sources)
_HELD_FIELDS = 10


def _paced(judged_v: Any, held_v: Any, body: Lines, sources: list[str]) -> tuple[tuple[int, ...] | None,
                                                                                tuple[HeldProgress, ...]]:
    """A schema 10 body's ``judged`` and ``held`` (``body``: its other items, checked already; ``sources``: its
    sources, checked already), checked: the judged ranks are distinct indices into ``body.ranks`` and hold
    every rank of its matches and progress rows; a held row is a rank with no line in the body, once."""
    n_ranks = len(body.ranks)
    judged: tuple[int, ...] | None = None
    if judged_v is not None:
        col = _list(judged_v, None, "judged")
        if not set(map(type, col)) <= _INT or len(set(col)) != len(col) or (
                col and (min(col) < 0 or max(col) >= n_ranks)):
            raise ProtocolError("field", "judged must be distinct indices of the body's ranks")
        named = {m.chunk for m in body.matches} | {g.chunk for g in body.progress}
        if not named <= set(col):
            raise ProtocolError("field", f"ranks {sorted(named - set(col))[:5]} of matches or progress rows "
                                         "are not judged")
        judged = tuple(col)
    return judged, _held(held_v, {r.rank for r in body.ranks}, sources)


def _held(held_v: Any, own: set[int], sources: list[str]) -> tuple[HeldProgress, ...]:
    """A schema 10 body's held rows, checked: each a rank not among ``own`` (the body's ranks), once."""
    rows = _list(held_v, None, "held")
    if len(rows) > MAX_BATCH_ITEMS:
        raise ProtocolError("field", f"a lines body holds at most {MAX_BATCH_ITEMS} held rows")
    held = []
    own = set(own)
    for row in rows:
        if type(row) is not list or len(row) != _HELD_FIELDS:
            raise ProtocolError("field", "a held row must be [rank, signature, step, loss, d_mono, d_wall, text, "
                                         "source, lineno, count]")
        rank, sig, step, loss, d_mono, d_wall, text, si, lineno, count = row
        if not (type(rank) is int and type(sig) is str and type(step) is int and type(text) is str
                and type(si) is int and type(lineno) is int and type(count) is int):
            raise ProtocolError("field", f"a held row has a field of the wrong type: {row!r:.80}")
        if rank in own or count < 1 or "\n" in text:
            raise ProtocolError("field", f"held row of rank {rank}: a rank of the body or given twice, a count "
                                         "under 1, or a text with a newline")
        own.add(rank)
        if not 0 <= si < len(sources):
            raise ProtocolError("field", f"held row source index {si} out of range")
        held.append(HeldProgress(rank, sig, step, None if loss is None else _float(loss, "loss"),
                                 _float(d_mono, "d_mono"), _float(d_wall, "d_wall"), text, sources[si], lineno, count))
    return tuple(held)


def _decode_lines_checked(b: list[Any]) -> Lines:
    """Row by row, naming the first problem (the slow path; the authority on what is valid)."""
    _list(b, len(b) if type(b) is list and len(b) in (6, 8) else 5, "lines body")
    classified = _int(b[0], "classified")
    if not 0 <= classified < 1 << 63:
        raise ProtocolError("field", "classified must be a 63-bit fingerprint or 0")
    sources = [_str(s, "source") for s in _list(b[1], None, "sources")]
    n_sources = len(sources)
    rows = _list(b[2], None, "ranks")
    # (a body of held rows alone names no rank of its own: schema 10)
    if (not rows and not (len(b) == 8 and type(b[7]) is list and b[7])) or len(rows) > MAX_BATCH_ITEMS:
        raise ProtocolError("field", f"a lines body must name 1 to {MAX_BATCH_ITEMS} ranks, got {len(rows)}")
    ranks = []
    seen: set[int] = set()
    # Per rank, not per line: the text of all of a rank's lines is one string, checked in C.
    for row in rows:
        if type(row) is not list or len(row) != 6:
            raise ProtocolError("field", "a rank's lines must be [rank, n_lines, d_first, d_last, d_wall, text]")
        rank, n, d_first, d_last, d_wall, text = row
        if not (type(rank) is int and type(n) is int and type(text) is str):
            raise ProtocolError("field", f"a rank's lines have a field of the wrong type: {row!r:.80}")
        if rank in seen:
            raise ProtocolError("field", f"rank {rank} appears twice in one batch")
        seen.add(rank)
        if n < 1 or text.count("\n") != n - 1:
            raise ProtocolError("field", f"rank {rank}: {n} lines announced, the text holds "
                                         f"{text.count(chr(10)) + 1}")
        d_first = _float(d_first, "d_first")
        d_last = _float(d_last, "d_last")
        if d_last > d_first:
            raise ProtocolError("field", f"rank {rank}: the newest line is older than the first")
        ranks.append(RankLines(rank, n, d_first, d_last, _float(d_wall, "d_wall"), text))
    n_ranks = len(ranks)
    rows = _list(b[3], None, "matches")
    if len(rows) > MAX_BATCH_ITEMS:
        raise ProtocolError("field", f"a lines body holds at most {MAX_BATCH_ITEMS} matches")
    matches = []
    for row in rows:
        if type(row) is not list or len(row) != 8:
            raise ProtocolError("field", "a match must be [rank index, signature, step, loss, d_mono, text, "
                                         "source, lineno]")
        chunk, sig, step, loss, d_mono, text, si, lineno = row
        if not (type(chunk) is int and type(sig) is str and type(text) is str and type(si) is int
                and type(lineno) is int and (step is None or type(step) is int)):
            raise ProtocolError("field", f"a match has a field of the wrong type: {row!r:.80}")
        if not 0 <= chunk < n_ranks:
            raise ProtocolError("field", f"match rank index {chunk} out of range")
        if not 0 <= si < n_sources:
            raise ProtocolError("field", f"match source index {si} out of range")
        if "\n" in text:
            raise ProtocolError("field", "a matched line contains a newline")
        matches.append(LineMatch(chunk, sig, step, None if loss is None else _float(loss, "loss"),
                                 _float(d_mono, "d_mono"), text, sources[si], lineno))
    rows = _list(b[4], None, "progress")
    if len(rows) > n_ranks:
        raise ProtocolError("field", f"a lines body holds at most one progress row per rank ({n_ranks}), "
                                     f"got {len(rows)}")
    progress = []
    coalesced: set[int] = set()
    for row in rows:
        if type(row) is not list or len(row) != 7:
            raise ProtocolError("field", "a progress row must be [rank index, signature, step, loss, source, lineno, "
                                         "count]")
        chunk, sig, step, loss, si, lineno, count = row
        if not (type(chunk) is int and type(sig) is str and type(step) is int and type(si) is int
                and type(lineno) is int and type(count) is int and count >= 1):
            raise ProtocolError("field", f"a progress row has a field of the wrong type: {row!r:.80}")
        if not 0 <= chunk < n_ranks or chunk in coalesced:
            raise ProtocolError("field", f"progress row rank index {chunk} out of range or given twice")
        coalesced.add(chunk)
        if not 0 <= si < n_sources:
            raise ProtocolError("field", f"progress row source index {si} out of range")
        progress.append(RankProgress(chunk, sig, step, None if loss is None else _float(loss, "loss"), sources[si],
                                     lineno, count))
    blocks = _blocks(b[5], n_ranks, sources) if len(b) >= 6 else ()
    body = Lines(tuple(ranks), tuple(matches), classified, tuple(progress), blocks)
    if len(b) == 8:
        judged, held = _paced(b[6], b[7], body, sources)
        return dataclasses.replace(body, judged=judged, held=held)
    return body


#: error blocks a lines body may carry per rank (the sender sends at most one per rank and batch)
MAX_BLOCKS_PER_RANK = 4


def _blocks(v: Any, n_ranks: int, sources: list[str]) -> tuple[RankBlock, ...]:
    """A lines body's error blocks, checked (``sources``: the body's, checked already)."""
    rows = _list(v, None, "blocks")
    if len(rows) > n_ranks * MAX_BLOCKS_PER_RANK:
        raise ProtocolError("field", f"a lines body holds at most {MAX_BLOCKS_PER_RANK} error blocks per rank")
    return tuple(_block(row, n_ranks, sources) for row in rows)


def _block(row: Any, n_ranks: int, sources: list[str]) -> RankBlock:
    """One error block of a lines body, checked."""
    if type(row) is not list or len(row) != 5:
        raise ProtocolError("field", "an error block must be [rank index, source, d_mono, linenos, text]")
    chunk, si, d_mono, linenos, text = row
    if not (type(chunk) is int and type(si) is int and type(linenos) is list and type(text) is str
            and set(map(type, linenos)) <= _INT):
        raise ProtocolError("field", f"an error block has a field of the wrong type: {row!r:.80}")
    if not 0 <= chunk < n_ranks:
        raise ProtocolError("field", f"error block rank index {chunk} out of range")
    if not 0 <= si < len(sources):
        raise ProtocolError("field", f"error block source index {si} out of range")
    if not linenos or text.count("\n") != len(linenos) - 1:
        raise ProtocolError("field", f"an error block announces {len(linenos)} lines, its text holds "
                                     f"{text.count(chr(10)) + 1}")
    return RankBlock(chunk, sources[si], _float(d_mono, "d_mono"), tuple(linenos), text)


#: a procs body's columns: a worker's four, a reading's texts and four, a group's nine
_WORKER_COLUMNS = 4
_READING_COLUMNS = 5
_GROUP_COLUMNS = 9


def _decode_procs_fast(b: list[Any]) -> Procs | None:
    """A procs body as every agent sends it (workers with their activity; floats where floats go),
    checked column by column in C: every node sends one every few seconds, with every rank's worker
    and ~50 flight recorder readings (256 a second on 1,024 nodes: tests/benchmarks/bench_scale.py).
    ``None`` when anything is off: :func:`_decode_procs_checked` then decides, and names the problem."""
    if len(b) != 5:
        return None
    srows, locks, wcols, ccols, delta = b
    if not (type(srows) is list and type(locks) is list and type(wcols) is list and type(ccols) is list
            and type(delta) is list and len(wcols) == _WORKER_COLUMNS
            and len(ccols) == _READING_COLUMNS + _GROUP_COLUMNS and len(delta) == 2
            and set(map(type, locks)) <= _STR and set(map(type, wcols)) == _LIST == set(map(type, ccols))):
        return None
    same_as, gone = delta
    if not (type(same_as) is int and same_as >= -1 and type(gone) is list and set(map(type, gone)) <= _INT):
        return None
    samples: tuple[ProcSample, ...] = ()
    if srows:
        if set(map(type, srows)) != _LIST or set(map(len, srows)) != {4}:
            return None
        rank_c, pid_c, cpu_c, age_c = zip(*srows, strict=True)
        if not (set(map(type, rank_c)) == _INT == set(map(type, pid_c)) and set(map(type, cpu_c)) == _FLOAT
                == set(map(type, age_c)) and _finite_numbers(cpu_c) and _finite_numbers(age_c)):
            return None
        samples = tuple(map(ProcSample, rank_c, pid_c, cpu_c, age_c))
    workers: tuple[tuple[int, int], ...] = ()
    activity: tuple[WorkerActivity, ...] = ()
    wrank_c, wpid_c, tree_c, state_c = wcols
    if len(set(map(len, wcols))) != 1:
        return None
    if wrank_c:
        if not (set(map(type, wrank_c)) == _INT == set(map(type, wpid_c)) and set(map(type, tree_c)) == _FLOAT
                and set(map(type, state_c)) == _STR and _finite_numbers(tree_c)):
            return None
        workers = tuple(zip(wrank_c, wpid_c, strict=True))
        states = map(operator.getitem, state_c, itertools.repeat(slice(0, 1)))
        activity = tuple(map(tuple.__new__, itertools.repeat(WorkerActivity),
                             zip(wrank_c, tree_c, states, strict=True)))
    texts, crank_c, cage_c, problem_c, count_c, *group_cols = ccols
    group_c, done_c, started_c, queued_c, op_c, gstate_c, wall_c, seq_c, shape_c = group_cols
    if not (len(crank_c) == len(cage_c) == len(problem_c) == len(count_c) and len(set(map(len, group_cols))) == 1
            and set(map(type, texts)) <= _STR):
        return None
    readings: tuple[RankCollectives, ...] = ()
    if crank_c:
        if not (set(map(type, crank_c)) == _INT == set(map(type, count_c)) and set(map(type, cage_c)) == _FLOAT
                and _finite_numbers(cage_c) and set(map(type, problem_c)) == _STR and min(count_c) >= 0
                and sum(count_c) == len(group_c)):
            return None
        if group_c:
            indices = group_c + op_c + gstate_c + shape_c  # (one pass of each check over the four text columns)
            if not (set(map(type, indices)) == _INT == set(map(type, done_c + started_c + queued_c + seq_c))
                    and min(indices) >= 0 and max(indices) < len(texts)
                    and set(map(type, wall_c)) == _FLOAT and _finite_numbers(wall_c)):
                return None
        # Every group of the message built at once, in C (its texts shared, not one copy a group),
        # then cut per reading.
        text = texts.__getitem__
        built = iter(map(tuple.__new__, itertools.repeat(GroupProgress),
                         zip(map(text, group_c), done_c, started_c, queued_c, map(text, op_c), map(text, gstate_c),
                             wall_c, seq_c, map(text, shape_c), strict=True)))
        groups = map(tuple, map(itertools.islice, itertools.repeat(built), count_c))
        readings = tuple(map(tuple.__new__, itertools.repeat(RankCollectives),
                             zip(crank_c, groups, problem_c, cage_c, strict=True)))
    elif group_c:
        return None
    return Procs(samples, tuple(locks), workers, readings, activity, same_as, tuple(gone))


def _decode_procs_checked(b: list[Any]) -> Procs:
    """Item by item, naming the first problem (the slow path; the authority on what is valid)."""
    _list(b, 5, "procs body [samples, locks, workers, collectives, [same_as, gone]]")
    samples = []
    for s in _list(b[0], None, "samples"):
        s = _list(s, 4, "sample")
        samples.append(ProcSample(_int(s[0], "rank"), _int(s[1], "pid"), _float(s[2], "cpu_seconds"),
                                  _float(s[3], "d_mono")))
    locks = tuple(_str(x, "lock") for x in _list(b[1], None, "locks"))
    wcols = _list(b[2], _WORKER_COLUMNS, "workers [ranks, pids, tree_cpu_seconds, states]")
    ranks, pids, cpus, states = (_list(c, None, "a workers column") for c in wcols)
    if not len(ranks) == len(pids) == len(cpus) == len(states):
        raise ProtocolError("field", "the workers' columns differ in length")
    workers, activity = [], []
    for rank, pid, cpu, state in zip(ranks, pids, cpus, states, strict=True):
        workers.append((_int(rank, "rank"), _int(pid, "pid")))
        if (cpu is None) != (state is None):
            raise ProtocolError("field", "a worker has both its tree_cpu_seconds and its state, or neither")
        if cpu is not None:
            activity.append(WorkerActivity(rank, _float(cpu, "tree_cpu_seconds"), _str(state, "state")[:1]))
    ccols = _list(b[3], _READING_COLUMNS + _GROUP_COLUMNS,
                  "collectives [texts, ranks, ages, problems, counts, and a group's nine columns]")
    texts = [_str(t, "text") for t in _list(ccols[0], None, "texts")]
    crank, ages, problems, counts = (_list(c, None, "a readings column") for c in ccols[1:_READING_COLUMNS])
    gcols = [_list(c, None, "a groups column") for c in ccols[_READING_COLUMNS:]]
    if not len(crank) == len(ages) == len(problems) == len(counts):
        raise ProtocolError("field", "the readings' columns differ in length")
    if len({len(c) for c in gcols}) != 1:
        raise ProtocolError("field", "the groups' columns differ in length")

    def text(v: Any) -> str:
        i = _int(v, "text index")
        if not 0 <= i < len(texts):
            raise ProtocolError("field", f"text index {i} out of range")
        return texts[i]

    rows = iter(zip(*gcols, strict=True))
    readings = []
    for rank, age, problem, count in zip(crank, ages, problems, counts, strict=True):
        n = _int(count, "groups of a reading")
        if not 0 <= n <= MAX_BATCH_ITEMS:
            raise ProtocolError("field", f"a reading of {n} groups")
        groups = []
        for g in itertools.islice(rows, n):
            groups.append(GroupProgress(text(g[0]), _int(g[1], "completed"), _int(g[2], "started"),
                                        _int(g[3], "enqueued"), text(g[4]), text(g[5]), _float(g[6], "wall"),
                                        _int(g[7], "seq"), text(g[8])))
        if len(groups) != n:
            raise ProtocolError("field", "the readings announce more groups than the columns hold")
        readings.append(RankCollectives(_int(rank, "rank"), tuple(groups), _str(problem, "problem"),
                                        _float(age, "d_mono")))
    if next(rows, None) is not None:
        raise ProtocolError("field", "the columns hold more groups than the readings announce")
    delta = _list(b[4], 2, "procs delta [same_as, gone]")
    same_as = _int(delta[0], "same_as")
    if same_as < -1:
        raise ProtocolError("field", f"same_as must be -1 or a message's seq, got {same_as}")
    gone_ranks = tuple(_int(r, "gone rank") for r in _list(delta[1], None, "gone"))
    return Procs(tuple(samples), locks, tuple(workers), tuple(readings), tuple(activity), same_as, gone_ranks)


def decode_body(kind: Kind, frame: bytes, judged_only: bool = False) -> Body:
    """Decode and validate a body frame of ``kind`` (after its header was decoded and the message's
    signature checked). Raises :class:`ProtocolError` like :func:`decode`.

    ``judged_only``: of a paced lines body whose judged ranks are fewer than half its ranks, decode the
    judge's part alone (:attr:`Lines.logged`): for a coordinator whose job log decodes the frame itself."""
    b = _unpack(frame, "body")
    if type(b) is not list:
        raise ProtocolError("garbage", f"{kind.value} body is not an array")
    if kind is Kind.LINES:
        if judged_only:
            part = _decode_lines_judged(b)
            if part is not None:
                return part
        return _decode_lines(b)
    if kind is Kind.HELLO:
        _list(b, 5, "hello body")
        return Hello(_str(b[0], "hostname"), _int(b[1], "pid"),
                     tuple(_int(r, "rank") for r in _list(b[2], None, "ranks")), _str(b[3], "agent_version"),
                     _int(b[4], "place"))
    if kind is Kind.HEARTBEAT:
        _list(b, 4, "heartbeat body")
        return Heartbeat(_int(b[0], "buffered"), _int(b[1], "dropped_lines"), _int(b[2], "dropped_msgs"),
                         _int(b[3], "truncated_lines"))
    if kind is Kind.PROCS:
        fast = _decode_procs_fast(b)
        return fast if fast is not None else _decode_procs_checked(b)
    if kind is Kind.EXITS:
        _list(b, 1, "exits body")
        exits = []
        for e in _list(b[0], None, "exits"):
            e = _list(e, None, "exit")
            if len(e) not in (3, 4):
                raise ProtocolError("truncated" if len(e) < 3 else "field",
                                    f"exit has {len(e)} fields, expected 3 or 4")
            presumed = len(e) == 4
            if presumed and _int(e[3], "presumed") != 1:
                raise ProtocolError("field", f"an exit's 4th item (presumed) must be 1, got {e[3]!r}")
            exits.append(ExitInfo(_int(e[0], "rank"), _int(e[1], "exit_code"), _float(e[2], "d_mono"), presumed))
        return Exits(tuple(exits))
    if kind is Kind.STATUS:
        _list(b, 7, "status body")
        return Status(_str(b[0], "state"), _str(b[1], "detail"), _str(b[2], "checkpoint"),
                      _int(b[3], "dropped_lines"), _int(b[4], "dropped_msgs"), _int(b[5], "truncated_lines"),
                      _map(b[6], "report"))
    if kind is Kind.ACK:
        _list(b, 3, "ack body")
        nodes, behind = _int(b[1], "nodes"), _float(b[2], "behind")
        if nodes < 0 or behind < 0:
            raise ProtocolError("field", f"an ack's nodes and behind are never negative, got {nodes}, {behind}")
        return Ack(_int(b[0], "seq"), nodes, behind)
    if kind is Kind.CAPTURE_EVIDENCE:
        # 2 fields: a capture without a verdict; 3: its verdict, a map
        _list(b, 3 if len(_list(b, None, "capture_evidence body")) == 3 else 2, "capture_evidence body")
        return CaptureEvidence(_str(b[0], "incident"), _str(b[1], "reason"),
                               _map(b[2], "capture_evidence verdict") if len(b) == 3 else {})
    if kind is Kind.STOP:
        _list(b, 3 if len(_list(b, None, "stop body")) == 3 else 2, "stop body")
        return Stop(_str(b[0], "reason"), _float(b[1], "deadline"),
                    _map(b[2], "stop verdict") if len(b) == 3 else {})
    if kind is Kind.LAUNCH:
        _list(b, 2, "launch body")
        return Launch(_int(b[0], "generation"), _str(b[1], "checkpoint"))
    if kind is Kind.REFUSED:
        _list(b, 3, "refused body")
        return Refused(_str(b[0], "job"), _str(b[1], "agent_job"), _str(b[2], "reason"))
    if kind is Kind.STATUS_QUERY:
        _list(b, 1, "status_query body")
        return StatusQuery(_int(b[0], "nonce"))
    if kind is Kind.STATUS_REPLY:
        _list(b, 2, "status_reply body")
        return StatusReply(_int(b[0], "nonce"), _str(b[1], "doc"))
    _list(b, 2, "shutdown body")
    return Shutdown(_str(b[0], "reason"), _int(b[1], "exit_code"))


def decode(frames: Sequence[bytes]) -> Msg:
    """The message in ``[header, body]`` frames (signature already checked and removed).

    Raises:
        ProtocolError: wrong frame count, version mismatch, truncated or garbage frames, bad fields.
    """
    if len(frames) != 2:
        problem = "truncated" if len(frames) < 2 else "garbage"
        raise ProtocolError(problem, f"a message has 2 frames (header, body), got {len(frames)}")
    header = decode_header(bytes(frames[0]))
    return Msg(header, decode_body(header.kind, bytes(frames[1])))


# ---- line records <-> a lines body ------------------------------------------------------------


def one_line_each(lines: Sequence[LogLine]) -> Sequence[LogLine]:
    """``lines`` with a "\\n" inside a text escaped, visibly (it would split the line in two on the
    other side: a rank's lines travel joined by "\\n"); ``lines`` itself when none holds one."""
    texts = [ln.text for ln in lines]
    if "\n".join(texts).count("\n") == len(texts) - 1:
        return lines
    return [ln._replace(text=ln.text.replace("\n", "\\n")) if "\n" in ln.text else ln for ln in lines]


def lines_body(lines: Sequence[LogLine], now: float, wall: float, matches: Sequence[LogLine] = (),
               progress: Sequence[LogLine] = (), classified: int = 0,
               blocks: Sequence[Sequence[LogLine]] = (), judged: Sequence[int] | None = None,
               held: Sequence[tuple[LogLine, int]] = (), counts: Mapping[int, int] | None = None) -> Lines:
    """The ``lines`` body of one node's ``lines`` (in read order, one line each: see
    :func:`one_line_each`), assembled at ``now``/``wall``: per rank one joined text, in the order
    each rank's first line was read. ``matches`` and ``progress``: lines of ``lines`` classified
    with the knowledge base of fingerprint ``classified``
    (:func:`~neuron_watch.diagnosis.classify.classify_batch`); a progress line is its rank's newest.
    ``blocks``: runs of consecutive lines of one stream of a rank that has lines in ``lines`` (one line
    each), the error blocks around its failures (node/error_context.py); :func:`block_lines` gives them back.
    The node's name travels once, in the header: :func:`line_records` and :func:`body_lines` give
    the lines back.

    Paced (:mod:`neuron_watch.node.progress_pace`): ``judged``, the rank numbers the judge takes (None:
    every rank); ``held``, each due held row of a rank with no line in ``lines`` and the progress lines it
    stands for; ``counts``, the progress lines each row of ``progress`` stands for (by rank; 1 if not given)."""
    groups: dict[int, list[Any]] = {}  # rank -> [chunk index, texts, first mono, newest mono, first wall]
    for ln in lines:
        rank, mono = ln.key.rank, ln.mono
        g = groups.get(rank)
        if g is None:
            g = groups[rank] = [len(groups), [], mono, mono, ln.wall]
        elif mono > g[3]:
            g[3] = mono
        g[1].append(ln.text)
    ranks = tuple(RankLines(rank, len(g[1]), max(0.0, now - g[2]), max(0.0, now - g[3]), wall - g[4],
                            "\n".join(g[1])) for rank, g in groups.items())
    return Lines(ranks,
                 tuple(LineMatch(groups[m.key.rank][0], m.signature, m.step, m.loss, max(0.0, now - m.mono), m.text,
                                 m.source, m.lineno) for m in matches),
                 classified,
                 tuple(RankProgress(groups[p.key.rank][0], p.signature, p.step, p.loss, p.source, p.lineno,
                                    1 if counts is None else counts.get(p.key.rank, 1))
                       for p in progress if p.step is not None),
                 tuple(RankBlock(groups[run[0].key.rank][0], run[0].source, max(0.0, now - max(ln.mono for ln in run)),
                                 tuple(ln.lineno for ln in run), "\n".join(ln.text for ln in run))
                       for run in blocks if run),
                 None if judged is None else tuple(groups[r][0] for r in judged),
                 tuple(HeldProgress(h.key.rank, h.signature, _step_of(h.step), h.loss, max(0.0, now - h.mono),
                                    wall - h.wall, h.text, h.source, h.lineno, n) for h, n in held))


def _step_of(step: int | None) -> int:
    """A held row's step (a held row is a progress line that read one)."""
    if step is None:
        raise ValueError("a held progress row without a step")
    return step


class LineRecords(NamedTuple):
    """A classified lines body as the judge takes it (:func:`line_records`)."""

    ranks: list[RankSpan]
    matches: list[LogLine]
    progress: list[LogLine]


_new_tuple = tuple.__new__


def line_records(body: Lines, keys: Sequence[RankKey], t_mono: float, wall: float,
                 key_of: Callable[[int], RankKey] | None = None) -> LineRecords:
    """The records of a lines body the sender classified: a span per judged rank, the matched lines and
    the progress lines, each line whole (its rank's key, text, times, stream, match).

    ``keys``: the key of each of ``body.ranks`` (their node is the header's, the sender's
    authenticated name: a sender speaks for its own node only); ``t_mono``: the receiver's
    monotonic time of the header's ``mono`` (ages are relative to it); ``wall``: the header's wall
    clock. A progress row is its rank's newest line (time and text). A held row (``body.held``) is
    its rank's newest line too: a span of that line and a progress line, its rank's key ``key_of(rank)``.

    Raises:
        ValueError: held rows and no ``key_of``.
    """
    cols = line_columns(body, keys, t_mono, wall, key_of)
    spans = [RankSpan(*span) for span in zip(cols.keys, cols.first, cols.last, cols.text, strict=True)]
    p = cols.progress
    progress: list[LogLine] = [
        _new_tuple(LogLine, (cols.keys[chunk], text, mono, w, source, lineno, sig, step, loss))
        for chunk, mono, w, text, source, lineno, sig, step, loss in zip(
            p.chunk, p.mono, p.wall, p.text, p.source, p.lineno, p.signature, p.step, _row_losses(body), strict=True)]
    return LineRecords(spans, list(cols.matches), progress)


def _row_losses(body: Lines) -> list[float | None]:
    """The loss of each progress row of ``body``, in :func:`line_columns`' order: the batch's rows, then the held."""
    return [g.loss for g in body.progress] + [g.loss for g in body.held]


_newest_line = operator.itemgetter(2)  # of a text's rpartition("\n"): its last line


def line_columns(body: Lines, keys: Sequence[RankKey], t_mono: float, wall: float,
                 key_of: Callable[[int], RankKey] | None = None) -> BatchColumns:
    """:func:`line_records` by column, as the coordinator's judge takes a batch
    (:meth:`~neuron_watch.diagnosis.judge.Judge.observe_columns`): the judged ranks' times and newest lines,
    and the progress rows' times, texts and steps, each column built in C (no record per rank or
    per progress row: one of each per rank and batch is what a job of 65,536 ranks cannot afford).
    A progress row is its rank's newest line; the matches are whole lines, as in :func:`line_records`.
    The ranks the node held (not in ``body.judged``) are left out; each held row (``body.held``) is a
    rank of its own (``key_of(rank)``), its line both the rank's newest line and its progress row.

    Raises:
        ValueError: held rows and no ``key_of``.
    """
    rows: Sequence[RankLines] = body.ranks
    judged, sub, repeat = body.judged, operator.sub, itertools.repeat
    matches: list[LogLine] = [_new_tuple(LogLine, (keys[chunk], text, t_mono - d_mono, wall - d_mono, source, lineno,
                                                   sig, step, loss))
                              for chunk, sig, step, loss, d_mono, text, source, lineno in body.matches]
    chunks: Sequence[int] = ()
    if judged is not None:  # the ranks the judge takes, in the body's order; a row's rank is its place among them
        place = dict(zip(judged, range(len(judged)), strict=True))
        keys, rows = list(map(keys.__getitem__, judged)), list(map(rows.__getitem__, judged))
        chunks = list(map(place.__getitem__, [g.chunk for g in body.progress]))
    elif body.progress:
        chunks = [g.chunk for g in body.progress]
    if rows:
        _rank, _n, d_first, d_last, _d_wall, texts = zip(*rows, strict=True)
    else:
        d_first = d_last = texts = ()
    first = list(map(sub, repeat(t_mono), d_first))
    last = list(map(sub, repeat(t_mono), d_last))
    newest = list(map(_newest_line, map(str.rpartition, texts, repeat("\n"))))
    progress = NO_PROGRESS
    if body.progress:
        _c, sig_c, step_c, _loss, source_c, lineno_c, _count = zip(*body.progress, strict=True)
        progress = ProgressColumns(chunks, list(map(last.__getitem__, chunks)),
                                   list(map(sub, repeat(wall), map(d_last.__getitem__, chunks))),
                                   list(map(newest.__getitem__, chunks)), source_c, lineno_c, sig_c, step_c)
    if body.held:
        if key_of is None:
            raise ValueError("a body with held rows needs the keys of their ranks (key_of)")
        keys = list(keys)
        n = len(keys)
        for g in body.held:  # (rows of quiet ranks: few, each once a pace interval)
            mono = t_mono - g.d_mono
            keys.append(key_of(g.rank))
            first.append(mono)
            last.append(mono)
            newest.append(g.text)
        h = body.held
        progress = ProgressColumns([*progress.chunk, *range(n, n + len(h))],
                                   [*progress.mono, *last[n:]], [*progress.wall, *(wall - g.d_wall for g in h)],
                                   [*progress.text, *(g.text for g in h)], [*progress.source, *(g.source for g in h)],
                                   [*progress.lineno, *(g.lineno for g in h)],
                                   [*progress.signature, *(g.signature for g in h)],
                                   [*progress.step, *(g.step for g in h)])
    return BatchColumns(keys, first, last, newest, matches, progress)


def body_lines(body: Lines, keys: Sequence[RankKey], t_mono: float, wall: float) -> list[LogLine]:
    """Every line of a lines body, unclassified (``keys``, ``t_mono``, ``wall``: see
    :func:`line_records`). A line between a rank's first and newest takes the newest one's time
    (a batch spans at most the sender's batch age)."""
    out: list[LogLine] = []
    for key, c in zip(keys, body.ranks, strict=True):
        first, last, first_wall = t_mono - c.d_first, t_mono - c.d_last, wall - c.d_wall
        for i, text in enumerate(c.text.split("\n")):
            out.append(LogLine(key, text, first if i == 0 else last,
                               first_wall if i == 0 else first_wall + last - first))
    return out


def block_lines(body: Lines, keys: Sequence[RankKey], t_mono: float, wall: float) -> list[list[LogLine]]:
    """The error blocks of a lines body, each as the run of lines it is (``keys``, ``t_mono``, ``wall``: see
    :func:`line_records`); every line of a block takes its newest line's time."""
    out: list[list[LogLine]] = []
    for chunk, source, d_mono, linenos, text in body.blocks:
        key, mono = keys[chunk], t_mono - d_mono
        out.append([LogLine(key, t, mono, wall - d_mono, source, n)
                    for t, n in zip(text.split("\n"), linenos, strict=True)])
    return out


def cut_line(text: str) -> tuple[str, int]:
    """``text`` cut to at most :data:`MAX_LINE_BYTES` UTF-8 bytes, visibly marked, and how many
    bytes were cut (0: ``text`` unchanged). The cut falls on a character boundary."""
    if len(text) <= MAX_LINE_BYTES // 4:  # a character is at most 4 bytes: surely short enough
        return text, 0
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_LINE_BYTES:
        return text, 0
    kept = data[:MAX_LINE_BYTES - 200].decode("utf-8", "ignore")
    cut = len(data) - len(kept.encode("utf-8"))
    return f"{kept} [neuron-watch: line cut, {cut} of {len(data)} bytes not sent]", cut


def utf8_sizes(texts: Sequence[str]) -> list[int]:
    """The UTF-8 size of each text (what it weighs in a frame)."""
    return [len(t.encode("utf-8", "replace")) for t in texts]


# ---- replay / loss tracking -----------------------------------------------------------------


class Disposition(str, enum.Enum):
    """What to do with a message, given the sender's sequence so far."""

    ACCEPT = "accept"
    DUPLICATE = "duplicate"  # seen already (a resend or a replay): drop
    EARLY = "early"  # a message before it is missing but the sender still holds it: drop, it resends
    STALE_SESSION = "stale_session"  # from a session older than the sender's current one: drop


@dataclass
class SenderStats:
    """Per-sender counters kept by :class:`SequenceTracker`."""

    session: int
    expected: int  # next seq to accept
    accepted: int = 0
    duplicates: int = 0
    early: int = 0
    lost: int = 0  # messages the sender dropped before we ever saw them (sequence gap)
    stale: int = 0
    sessions: int = 1

    def to_dict(self) -> dict[str, int]:
        return {"session": self.session, "next_seq": self.expected, "accepted": self.accepted,
                "duplicates": self.duplicates, "early": self.early, "lost": self.lost,
                "stale": self.stale, "sessions": self.sessions}


class SequenceTracker:
    """Replay and loss detection per sender: pure, fed with authenticated headers only.

    In order (``in_order=True``, coordinator side): a sender's messages are accepted strictly
    in sequence. A message ahead of the next expected one is dropped as ``EARLY`` while the
    sender still holds the missing ones (``base`` <= expected; it will resend them); if
    ``base`` is past them the sender has dropped them, the gap is counted as ``lost`` and
    the sequence jumps. With ``in_order=False`` (agent side, commands) gaps are normal
    (the coordinator's sequence is shared by all agents) and only replays are refused.

    Sessions: a sender restarting gets a larger session; the larger one replaces the current
    one (its first message fixes the starting point at its ``base``), a smaller or retired one
    is ``STALE_SESSION``.
    """

    def __init__(self, in_order: bool = True) -> None:
        self.in_order = in_order
        self._senders: dict[str, SenderStats] = {}

    def check(self, sender: str, session: int, seq: int, base: int) -> Disposition:
        """Classify one message and, when it is accepted, advance the sender's sequence."""
        st = self._senders.get(sender)
        if st is None or session > st.session:
            start = min(base, seq) if self.in_order else seq
            new = SenderStats(session=session, expected=start)
            if st is not None:
                new.sessions = st.sessions + 1
                new.lost, new.duplicates, new.early, new.stale = st.lost, st.duplicates, st.early, st.stale
                new.accepted = st.accepted
            self._senders[sender] = st = new
        elif session < st.session:
            st.stale += 1
            return Disposition.STALE_SESSION
        if seq < st.expected:
            st.duplicates += 1
            return Disposition.DUPLICATE
        if self.in_order and seq > st.expected:
            if base <= st.expected:
                st.early += 1
                return Disposition.EARLY
            st.lost += min(base, seq) - st.expected
            st.expected = min(base, seq)
            if seq > st.expected:
                st.early += 1
                return Disposition.EARLY
        st.expected = seq + 1
        st.accepted += 1
        return Disposition.ACCEPT

    def stats(self, sender: str) -> SenderStats | None:
        return self._senders.get(sender)

    def senders(self) -> dict[str, SenderStats]:
        return dict(self._senders)
