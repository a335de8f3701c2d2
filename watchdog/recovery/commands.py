"""The commands the recovery machine returns, and what their execution tells it back.

The coordinator carries out each :data:`Command` it gets from
:meth:`~neuron_watch.recovery.machine.Recovery.tick`; a relaunch answers with a
:data:`RelaunchOutcome`. Kept apart from the machine so a reader of the coordinator sees the
whole vocabulary between them in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuron_watch.events import EventKind, EvidenceReport, JobState, Verdict


@dataclass(frozen=True)
class Emit:
    """Write one event (events.jsonl, MQTT, console) of ``generation``."""

    kind: EventKind
    fields: dict[str, Any]
    generation: int


@dataclass(frozen=True)
class Capture:
    """Tell every node to capture the evidence of ``incident`` (nothing is stopped yet)."""

    incident: int
    verdict: Verdict


@dataclass(frozen=True)
class RecordIncident:
    """Write the job's manifest of ``incident`` from every node's evidence report."""

    incident: int
    reports: dict[str, EvidenceReport | None]


@dataclass(frozen=True)
class StopJob:
    """Tell every node to stop its ranks (one deadline), completing ``incident``'s bundles with the
    final ``verdict`` (both None for an interrupt)."""

    reason: str
    timeout: float
    incident: int | None = None
    verdict: Verdict | None = None


@dataclass(frozen=True)
class ChooseCheckpoint:
    """Find the checkpoint the next generation starts from, never one in ``avoid``; answer with
    :meth:`~neuron_watch.recovery.machine.Recovery.checkpoint_chosen`."""

    avoid: frozenset[str]


@dataclass(frozen=True)
class Drain:
    """Keep ``node`` out of the next generation (a faulty node: Slurm drain and exclude)."""

    node: str
    verdict: Verdict


@dataclass(frozen=True)
class Relaunch:
    """Start generation ``generation`` from ``checkpoint`` (a judge for it first); answer with
    :meth:`~neuron_watch.recovery.machine.Recovery.relaunched`."""

    generation: int
    checkpoint: str
    verdict: Verdict


@dataclass(frozen=True)
class Finish:
    """The job is over: tell every node to shut down with ``code``; ``job_finished`` is the last event."""

    code: int
    reason: str
    state: JobState


Command = Emit | Capture | RecordIncident | StopJob | ChooseCheckpoint | Drain | Relaunch | Finish


@dataclass(frozen=True)
class Relaunched:
    """A relaunch started: ``fresh_agents`` when it started new agents (a new srun step), so the old
    nodes are forgotten and the new ones join."""

    fresh_agents: bool = False


@dataclass(frozen=True)
class RelaunchEnded:
    """A relaunch did not start the next generation, and the job ends (requeued, left to HyperPod,
    too few nodes left)."""

    code: int
    reason: str


RelaunchOutcome = Relaunched | RelaunchEnded
