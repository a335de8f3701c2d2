"""How the coordinator starts a job's next generation: the :class:`Relauncher` contract and its
default, :class:`LaunchOnNodes` (every node's agent relaunches its own ranks); and the checkpoint it starts
from (:func:`relaunch_checkpoint`).

``neuron-watch srun`` gives the coordinator another relauncher, one that starts a new srun step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from neuron_watch.events import Verdict
from neuron_watch.job.nodes import NodeView
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.recovery.checkpoints import CheckpointChoice
from neuron_watch.recovery.commands import Relaunched, RelaunchOutcome
from neuron_watch.wire.protocol import Body, Launch


class Relauncher(Protocol):
    """How a new generation of the job starts, once recovery has stopped the old one.

    The coordinator calls :meth:`begin` when recovery says relaunch, then :meth:`poll` on each turn
    of its loop (its sockets keep being served meanwhile) until it answers. ``replaces_agents``:
    a relaunch starts new agents (a new srun step), so nodes silent at a restart are not waited for.
    """

    replaces_agents: bool

    def begin(self, generation: int, checkpoint: str, verdict: Verdict) -> None: ...

    def poll(self, now: float) -> RelaunchOutcome | None:
        """The relaunch's outcome once known, else None."""

    def drain(self, node: str, verdict: Verdict, events: EventLog) -> None:
        """Keep ``node`` out of the next generation (recovery asked: a faulty node)."""

    def gone(self) -> int | None:
        """The launcher's exit code when it ended by itself (the srun step), else None."""

    def running_generation(self) -> int | None:
        """The generation this relauncher knows to run (the srun step's), -1 when nothing runs, None
        when it cannot know (each node's agent launches): what a coordinator started again resumes
        from (:func:`neuron_watch.recovery.coordcrash.resume`)."""


class LaunchOnNodes:
    """The default relaunch: every node's agent starts the next generation itself (``launch``).

    ``broadcast``: sends a command to every node (the coordinator's).
    """

    replaces_agents = False

    def __init__(self, broadcast: Callable[[Body], object]) -> None:
        self._broadcast = broadcast
        self._started = False

    def begin(self, generation: int, checkpoint: str, verdict: Verdict) -> None:
        self._broadcast(Launch(generation, checkpoint))
        self._started = True

    def poll(self, now: float) -> RelaunchOutcome | None:
        if not self._started:
            return None
        self._started = False
        return Relaunched()

    def drain(self, node: str, verdict: Verdict, events: EventLog) -> None:
        """Nodes cannot be excluded here: the policy gives up on a faulty node (exit 4) instead."""

    def gone(self) -> int | None:
        return None

    def running_generation(self) -> int | None:
        return None  # each node's agent says its own


def relaunch_checkpoint(pick: Callable[..., str | CheckpointChoice], nodes: dict[str, NodeView],
                        avoid: frozenset[str]) -> CheckpointChoice:
    """What ``pick`` chooses for the relaunch (``avoid``: checkpoints that failed to load, when any), as a
    :class:`CheckpointChoice` (a picker may still return the path alone: nothing passed over said)."""
    chosen = pick(nodes, avoid=avoid) if avoid else pick(nodes)
    return chosen if isinstance(chosen, CheckpointChoice) else CheckpointChoice(chosen)


def newest_reported_checkpoint(nodes: dict[str, NodeView], avoid: frozenset[str] = frozenset()) -> str:
    """The checkpoint to relaunch from when no chooser is given: the newest name any node reported."""
    reported = sorted({v.checkpoint for v in nodes.values() if v.checkpoint and v.checkpoint not in avoid})
    return reported[-1] if reported else ""
