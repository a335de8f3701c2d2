"""Pure data shared by the judge, the policy, the event log and the wire.

Nothing here does I/O. Times are plain floats: ``mono`` values come from ``time.monotonic()``
(durations, judging) and ``wall`` values from ``time.time()`` (reported timestamps only).
"""

from __future__ import annotations

import datetime as _dt
import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Label(str, enum.Enum):
    """Failure categories: one label per verdict."""

    COMPILING = "compiling"
    COLLECTIVE_HANG = "collective_hang"
    COMM_TIMEOUT_TRANSIENT = "comm_timeout_transient"
    COMM_ERROR = "comm_error"
    HARDWARE_ERROR = "hardware_error"
    CONFIG_ERROR = "config_error"
    NUMERICAL_ERROR = "numerical_error"
    OOM = "oom"
    COMPILE_ERROR = "compile_error"
    HEALTHY = "healthy"
    OTHER_CRASH = "other_crash"
    #: Not a failure category: the watchdog could not see (part of) the job. Never "healthy".
    UNOBSERVED = "unobserved"


class Action(str, enum.Enum):
    """What a verdict asks the runner to do."""

    WAIT = "wait"  # keep waiting (healthy, compiling, transient)
    RESTART = "restart"  # stop everything, restart from the last complete checkpoint
    DRAIN_AND_RESTART = "drain_and_restart"  # exclude the node, then restart without it
    STOP = "stop"  # stop, do not restart (configuration, numerical, compile errors)


class EventKind(str, enum.Enum):
    """Every kind of event the job's stream holds (README "Events": a public contract)."""

    JOB_STARTED = "job_started"
    PROGRESS = "progress"
    VERDICT = "verdict"
    INCIDENT = "incident"
    STOPPED = "stopped"
    UPLOAD = "upload"
    RESTART = "restart"
    GAVE_UP = "gave_up"
    WARNING = "warning"
    RECOMPILE = "recompile"
    COMPILE_REPORT = "compile_report"
    JOB_FINISHED = "job_finished"
    WATCHDOG_DEGRADED = "watchdog_degraded"
    WATCHDOG_RECOVERED = "watchdog_recovered"
    # how the coordinator got there (for operators and tests)
    COORDINATOR_STARTED = "coordinator_started"
    COORDINATOR_STOPPED = "coordinator_stopped"
    COORDINATOR_BEHIND = "coordinator_behind"
    COORDINATOR_CAUGHT_UP = "coordinator_caught_up"
    NODE_JOINED = "node_joined"
    NODE_REJOINED = "node_rejoined"
    NODE_REFUSED = "node_refused"
    NODE_HELLO = "node_hello"
    NODE_STATUS = "node_status"
    NODE_UNOBSERVED = "node_unobserved"
    NODE_OBSERVED = "node_observed"
    AGENT_DROPPED = "agent_dropped"
    LINES_TRUNCATED = "lines_truncated"
    RANK_EXIT = "rank_exit"
    COMMAND = "command"
    RECOVERY_PHASE = "recovery_phase"
    JOB_REFUSED = "job_refused"
    # neuron-watch srun
    SRUN_STEP = "srun_step"
    SRUN_STEP_ENDED = "srun_step_ended"
    DRAIN = "drain"
    RESTART_PLAN = "restart_plan"
    REQUEUE = "requeue"
    REQUEUE_FAILED = "requeue_failed"
    REQUEUE_UPDATE_FAILED = "requeue_update_failed"
    LEFT_TO_HYPERPOD = "left_to_hyperpod"


class NodeStatus(str, enum.Enum):
    """A node's state as its agent reports it (the wire's ``Status.state``)."""

    NONE = ""  # nothing said yet (or nothing since the coordinator last asked)
    LAUNCHED = "launched"  # this generation's ranks were started
    FINISHING = "finishing"  # some ranks ended, the launcher has not yet
    FINISHED = "finished"  # the launcher exited 0
    FAILED = "failed"  # the launcher exited with an error
    EVIDENCE_DONE = "evidence_done"  # the evidence of the incident asked for is captured
    STOPPED = "stopped"  # the node stopped its ranks as told
    EXITED = "exited"  # the agent shut down as told

    @classmethod
    def parse(cls, text: str) -> NodeStatus | None:
        """The status named ``text``; None for a word this version does not know."""
        try:
            return cls(text)
        except ValueError:
            return None


class JobState(str, enum.Enum):
    """The job's state (status.json, events, metrics); the moves between them are recovery/policy.py's."""

    STARTING = "starting"
    RUNNING = "running"
    CAPTURING = "capturing"
    STOPPING = "stopping"
    RESTARTING = "restarting"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


def _ranks(value: Any, convert: Any) -> dict[int, Any]:
    """``{rank: value}`` from a wire map keyed by rank numbers as text (msgpack maps take text keys)."""
    if not isinstance(value, dict):
        return {}
    return {int(r): convert(v) for r, v in value.items() if str(r).lstrip("-").isdigit()}


@dataclass(frozen=True)
class EvidenceReport:
    """A node's answer to ``capture_evidence`` (status ``evidence_done``): where its bundle is and,
    per rank, what tells who held the job up -- its process state in ``/proc`` when that explains a
    silence (``T``, ``t``, ``D``, ``Z`` or ``gone``), the top frame of its stack, whether that stack
    waits in a collective. ``manifest`` is the node's bundle manifest; ``error`` why there is none."""

    bundle: str = ""
    seconds: float = 0.0
    missing: int = 0
    proc_states: dict[int, str] = field(default_factory=dict)
    stack_tops: dict[int, str] = field(default_factory=dict)
    in_collective: dict[int, bool] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None
    error: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "seconds": self.seconds, "missing": self.missing,
                "proc_states": {str(r): s for r, s in self.proc_states.items()},
                "stack_tops": {str(r): t for r, t in self.stack_tops.items()},
                "in_collective": {str(r): w for r, w in self.in_collective.items()},
                "manifest": self.manifest, "error": self.error}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> EvidenceReport:
        """The report a node sent (fields it did not send take their defaults)."""
        manifest = d.get("manifest")
        return cls(bundle=str(d.get("bundle") or ""), seconds=float(d.get("seconds") or 0.0),
                   missing=int(d.get("missing") or 0), proc_states=_ranks(d.get("proc_states"), str),
                   stack_tops=_ranks(d.get("stack_tops"), str), in_collective=_ranks(d.get("in_collective"), bool),
                   manifest=manifest if isinstance(manifest, dict) else None, error=str(d.get("error") or ""))


@dataclass(frozen=True)
class StopReport:
    """A node's answer to ``stop`` (status ``stopped``): the rung of the ladder its stop reached
    (``already_gone``, ``sigterm``, ``sigint``, ``sigkill``), how long it took, the pids that
    survived it, the stopped (state ``T``) pids it continued, the uploads of its bundles (None:
    nothing to upload), ``error`` when the stop itself failed. ``own_signal``: the node stopped on a
    signal of its own, not as told (``scancel`` signals every node at once), and leaves; 0 otherwise."""

    rung: str | None = None
    seconds: float | None = None
    survivors: tuple[int, ...] = ()
    continued: tuple[int, ...] = ()
    killed_stopped: tuple[int, ...] = ()  # stopped (state T) pids killed at once (SIGTERM waits for nothing)
    uploads: tuple[dict[str, Any], ...] | None = None
    error: str = ""
    own_signal: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {"rung": self.rung, "seconds": self.seconds, "survivors": list(self.survivors),
                "continued": list(self.continued), "killed_stopped": list(self.killed_stopped),
                "uploads": None if self.uploads is None else list(self.uploads),
                "error": self.error, "own_signal": self.own_signal}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> StopReport:
        uploads = d.get("uploads")
        return cls(rung=None if d.get("rung") is None else str(d["rung"]),
                   seconds=None if d.get("seconds") is None else float(d["seconds"]),
                   survivors=tuple(int(p) for p in d.get("survivors") or ()),
                   continued=tuple(int(p) for p in d.get("continued") or ()),
                   killed_stopped=tuple(int(p) for p in d.get("killed_stopped") or ()),
                   uploads=None if uploads is None else tuple(u for u in uploads if isinstance(u, dict)),
                   error=str(d.get("error") or ""),
                   own_signal=int(d.get("own_signal") or 0))


@dataclass(frozen=True)
class LauncherExit:
    """A node's launcher exited by itself (status ``finished`` or ``failed``) with ``code``."""

    code: int

    def to_wire(self) -> dict[str, Any]:
        return {"exit_code": self.code}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> LauncherExit | None:
        code = d.get("exit_code")
        return cls(code) if isinstance(code, int) else None


@dataclass(frozen=True)
class NodeIdentity:
    """A node (an agent) as the job knows it: its ``place`` -- torchrun's ``node_rank``, Slurm's
    ``SLURM_PROCID``, SageMaker's host index (-1: not known) -- and a ``name`` for people, unique in
    the job (bundle paths and S3 keys carry it). ``hostname`` is the machine's, which need not be
    unique (containers, several nodes of one job on one host)."""

    place: int
    name: str
    hostname: str


@dataclass(frozen=True, slots=True)
class RankKey:
    """A rank as the watchdog knows it: the node it runs on and its global rank (-1 if unknown)."""

    node: str
    rank: int

    def __str__(self) -> str:
        return f"{self.node}/rank{self.rank}" if self.rank >= 0 else f"{self.node}/rank?"


class LogLine(NamedTuple):
    """One line a rank printed: the one record of a line from the tail to the judge and its evidence.

    ``key``: whose line (the node's name and the global rank, see :attr:`node`, :attr:`rank`);
    ``text``; ``mono``/``wall``: when it was read; ``source``/``lineno``: the stream it was read
    from (the rank's log file) and its line number there, for evidence ("file:line"). Once a
    knowledge base classified it: ``signature``, the id of the signature that matched ("" for
    none), and the ``step`` and ``loss`` a progress signature read. (A named tuple, not a
    dataclass: the coordinator builds one per matched line of every batch, and a tuple is built
    in C.)
    """

    key: RankKey
    text: str
    mono: float
    wall: float
    source: str = ""
    lineno: int = 0
    signature: str = ""
    step: int | None = None
    loss: float | None = None

    @property
    def node(self) -> str:
        return self.key.node

    @property
    def rank(self) -> int:
        return self.key.rank

    def evidence(self, signature: str) -> Evidence:
        """This line as the evidence of a verdict, read by ``signature``."""
        return Evidence(self.key, self.text, signature, self.source, self.lineno, self.mono)


class RankSpan(NamedTuple):
    """One rank's lines in a batch, as the judge takes them
    (:meth:`~neuron_watch.diagnosis.judge.Judge.observe_batch`): ``key``, the first and the newest
    line's monotonic times, and the newest line's text."""

    key: RankKey
    first: float
    last: float
    text: str


class ProgressColumns(NamedTuple):
    """A batch's progress rows (see :meth:`~neuron_watch.diagnosis.judge.Judge.observe_columns`) as
    parallel columns, one entry a row: ``chunk`` is the row's rank (an index into the batch's
    ranks); its newest line's monotonic and wall times, text, stream and line number; the progress
    signature that read it and the step. (Columns, not a record per row: a batch of a large job
    carries one row per rank, 65,536 a second on 1,024 nodes.)"""

    chunk: Sequence[int]
    mono: Sequence[float]
    wall: Sequence[float]
    text: Sequence[str]
    source: Sequence[str]
    lineno: Sequence[int]
    signature: Sequence[str]
    step: Sequence[int]


#: a batch without progress rows
NO_PROGRESS = ProgressColumns((), (), (), (), (), (), (), ())


class BatchColumns(NamedTuple):
    """A classified batch as the judge takes it, by column: per rank (``keys``, in the order each
    rank's first line was read) the first and the newest line's monotonic times and the newest
    line's text; the matched lines (:class:`LogLine`, in line order); the progress rows."""

    keys: Sequence[RankKey]
    first: Sequence[float]
    last: Sequence[float]
    text: Sequence[str]
    matches: Sequence[LogLine]
    progress: ProgressColumns = NO_PROGRESS


@dataclass(frozen=True, slots=True)
class CompilerSample:
    """A live compiler process seen in the process table: whose it is and its CPU time so far."""

    key: RankKey
    pid: int
    cpu_seconds: float
    mono: float


@dataclass(frozen=True, slots=True)
class WorkerSample:
    """A rank process seen in the process table: CPU seconds of it and everything under it (its
    compile workers, the compilers they run), and whether a signal stopped it (state ``T``)."""

    key: RankKey
    tree_cpu_seconds: float
    stopped: bool
    mono: float


@dataclass(frozen=True, slots=True)
class RankExit:
    """A rank process (or the whole launcher on a node, rank=-1) exited.

    ``presumed``: ``exit_code`` 0 is presumed from the rank's own record of a normal interpreter exit
    (no exit status was read: see ``wire.protocol.ExitInfo``); an exit status reported later replaces it."""

    key: RankKey
    exit_code: int
    mono: float
    presumed: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    """A log line that supports a verdict."""

    key: RankKey
    text: str
    signature: str
    source: str = ""
    lineno: int = 0
    mono: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.key.node,
            "rank": self.key.rank,
            "text": self.text,
            "signature": self.signature,
            "file": self.source,
            "line": self.lineno,
        }


class LazyEvidence(tuple[RankKey, str, str, str, int, float]):
    """The fields of an :class:`Evidence` (``key, text, signature, source, lineno, mono``), held until
    a verdict reads them (:meth:`build`). A batch of a large job gives its judge a progress line per
    rank that progressed, 65,536 a second on 1,024 nodes, and a verdict reads a few of them: these
    are built in C by column (:func:`lazy_evidence_rows`), where an :class:`Evidence` (its frozen
    ``__init__``, or its six slots set one by one) costs several times the rest of the row's work.
    Equal to the :class:`Evidence` it builds (and to another of the same fields), so the states that
    hold one compare as if they held the other."""

    __slots__ = ()

    def build(self) -> Evidence:
        """The :class:`Evidence` of these fields."""
        return Evidence(*self)

    @property
    def signature(self) -> str:
        return self[2]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyEvidence):
            return tuple.__eq__(self, other)
        return isinstance(other, Evidence) and self.build() == other  # (a plain tuple is not evidence)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # (what it stands for is hashed as the Evidence it builds)


def lazy_evidence_rows(keys: Sequence[RankKey], texts: Sequence[str], signatures: Sequence[str],
                       sources: Sequence[str], linenos: Sequence[int], monos: Sequence[float]) -> list[LazyEvidence]:
    """One :class:`LazyEvidence` per row of these columns (each equal to ``Evidence(key, text, ...)``
    of its row), built in C: no Python call per row.

    Raises:
        ValueError: the columns differ in length.
    """
    columns = (keys, texts, signatures, sources, linenos, monos)
    if len(set(map(len, columns))) != 1:
        raise ValueError(f"evidence columns of {' and '.join(sorted({str(len(c)) for c in columns}))} rows")
    return list(map(tuple.__new__, itertools.repeat(LazyEvidence), zip(*columns, strict=True)))


@dataclass(frozen=True)
class Verdict:
    """The judge's view of the whole job at one moment."""

    label: Label
    action: Action
    ranks: tuple[RankKey, ...] = ()
    culprit: RankKey | None = None
    evidence: tuple[Evidence, ...] = ()
    reason: str = ""
    advice: str = ""
    step: int | None = None  # last step the culprit (or the job) reached, for crash-loop detection
    #: how the culprit was found: "failure" (its own error line or exit), "process_state" (/proc),
    #: "flight_recorder", "stacks", "progress" (first to stop printing progress); None: no culprit
    culprit_source: str | None = None
    #: the failure (or the silence) came after the job said its training had finished: shutting
    #: down, not training; it is not restarted (a restart would redo finished work)
    after_training: bool = False

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"after_training": True} if self.after_training else {}
        return {
            "label": self.label.value,
            "action": self.action.value,
            "ranks": [str(k) for k in self.ranks],
            "culprit": None if self.culprit is None else {"node": self.culprit.node, "rank": self.culprit.rank},
            "evidence": [e.to_dict() for e in self.evidence],
            "reason": self.reason,
            "advice": self.advice,
            "step": self.step,
            "culprit_source": self.culprit_source,
            **extra,
        }


def iso_utc(wall: float) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2026-11-21T13:05:01.123Z``."""
    return _dt.datetime.fromtimestamp(wall, tz=_dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


@dataclass
class JobEvent:
    """One line of ``events.jsonl`` (the public contract documented in the README)."""

    event: str
    generation: int
    wall: float
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": iso_utc(self.wall), "event": self.event, "generation": self.generation}
        out.update(self.fields)
        return out
