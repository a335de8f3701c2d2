"""What a node observes, as one typed stream: lines, losses, exits, statuses and process samples.

The observer (:mod:`neuron_watch.node.observer`) writes every observation to an
:class:`ObservationSink`: the link once it exists (:class:`LinkObservations`), before that an
:class:`EarlyObservations` that keeps them, in order and with the times they were seen, and hands
them to the link when it is attached. Each observation is one small typed record (a line is its
:class:`~neuron_watch.events.LogLine`, the node's name on it); :func:`deliver` is the one place that
turns it into the link's call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.events import LauncherExit, LogLine, NodeStatus
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.wire.protocol import WorkerActivity

#: A rank's flight recorder reading: (rank, its groups' progress, why there is none, monotonic time).
Reading = tuple[int, tuple[GroupProgress, ...], str, float]
#: A live compiler process: (rank, pid, cpu seconds, monotonic time of the sample).
Compiler = tuple[int, int, float, float]


@dataclass(frozen=True)
class LinesCut:
    """Lines the tail cut to its bound (travel with the link's own ``truncated_lines``)."""

    lines: int
    nbytes: int


@dataclass(frozen=True)
class LinesLost:
    """Lines of a flood never read (travel in the node's drop count)."""

    lines: int


@dataclass(frozen=True)
class RanksExited:
    """Processes that exited: ``(rank, exit code, monotonic time)``. ``presumed``: their code 0 is
    presumed from their own record of a normal interpreter exit (``protocol.ExitInfo.presumed``)."""

    exits: tuple[tuple[int, int, float], ...]
    now: float
    wall: float
    presumed: bool = False


@dataclass(frozen=True)
class StatusSeen:
    """A change of the node's state as the node itself sees it (finishing, finished, failed)."""

    state: NodeStatus
    now: float
    wall: float
    detail: str = ""
    checkpoint: str = ""
    report: LauncherExit | None = None


@dataclass(frozen=True)
class ProcessesSeen:
    """A sample of the node's processes: every live compiler, fresh cache locks, the workers, the
    flight recorder readings taken since the last one and each rank's CPU and state.
    ``always``: sent even when empty (an absent compiler is how a compile's end is learned)."""

    compilers: tuple[Compiler, ...]
    now: float
    wall: float
    locks: tuple[str, ...] = ()
    always: bool = False
    workers: tuple[tuple[int, int], ...] = ()
    collectives: tuple[Reading, ...] = ()
    activity: tuple[WorkerActivity, ...] = ()


Observation = LogLine | LinesCut | LinesLost | RanksExited | StatusSeen | ProcessesSeen


class ObservationSink(Protocol):
    """Where the observer's stream goes."""

    @property
    def progress_lines(self) -> int: ...

    def observe(self, seen: Observation) -> None: ...


def deliver(link: AgentLink, seen: Observation) -> None:
    """Hand one observation to the link."""
    if isinstance(seen, LogLine):
        link.add_line(seen)
    elif isinstance(seen, LinesCut):
        link.count_truncated(seen.lines, seen.nbytes)
    elif isinstance(seen, LinesLost):
        link.count_lost(seen.lines)
    elif isinstance(seen, RanksExited):
        link.add_exits(seen.exits, seen.now, seen.wall, seen.presumed)
    elif isinstance(seen, StatusSeen):
        link.status(seen.state, seen.now, seen.wall, detail=seen.detail, checkpoint=seen.checkpoint,
                    report=seen.report)
    else:
        link.add_compilers(seen.compilers, seen.now, seen.wall, locks=seen.locks, always=seen.always,
                           workers=seen.workers, collectives=seen.collectives, activity=seen.activity)


class LinkObservations:
    """The stream into a live link."""

    def __init__(self, link: AgentLink) -> None:
        self.link = link

    @property
    def progress_lines(self) -> int:
        return self.link.progress_lines

    def observe(self, seen: Observation) -> None:
        deliver(self.link, seen)


class EarlyObservations:
    """What the agent saw before its link existed, in order, with the times it was seen.

    The link waits for the job's shape (single node: a coordinator here; several: where node 0
    is), which torchrun's own parser takes seconds to tell under load; nothing seen meanwhile is
    lost or re-stamped late: it is replayed into the link (ages are computed from these times).
    A loss is kept in order with the rest: a status replayed after it carries it.
    """

    progress_lines = 0

    def __init__(self) -> None:
        self.seen: list[Observation] = []
        self.procs: ProcessesSeen | None = None

    def observe(self, seen: Observation) -> None:
        if isinstance(seen, ProcessesSeen):
            self.procs = seen  # a snapshot of live processes: only the newest one counts
        else:
            self.seen.append(seen)

    def replay(self, link: AgentLink) -> None:
        seen, self.seen = self.seen, []
        for one in seen:
            deliver(link, one)
        if self.procs is not None:
            deliver(link, self.procs)
            self.procs = None
