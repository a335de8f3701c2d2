"""A node first heard after the generation that runs was launched is a member of that generation.

Pure: no I/O. An elastic node (``torchrun --nnodes MIN:MAX``) connects to the coordinator once torchrun's
rendezvous has placed it. When it joins a job the watchdog has already restarted, its agent, started by
its own wrapper and never sent a launch, counts its launcher as generation 0 while the job runs
generation N: torchrun's rendezvous made it a member of the running workers (a scale-up), or its
launcher failed joining them. Read as generation 0, its words were all late: its ranks were never judged,
its launcher's end (a failure, or training done) never counted, and the job waited for the node's end in
generation N for ever (found by hand: torch 2.13's scale-up with its shared TCPStore fails, the watchdog
restarts node 0 alone, and the new node's torchrun times out only then; both wrappers waited for ever).

So a node whose words come in an older generation than the job's, that no relaunch was sent to, is
*adopted* by the running generation: its words of its own generation are that generation's, until a
relaunch reaches it (its words then carry the job's generation). Not for srun's relaunch, whose every
generation is a new step of new agents.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Latecomers:
    """The generation that runs and the nodes its launch was sent to."""

    generation: int = 0
    launched_on: set[str] = field(default_factory=set)

    def relaunched(self, generation: int, nodes: Iterable[str], new_agents: bool) -> None:
        """Generation ``generation`` is launched on ``nodes`` (``new_agents``: by new agents, srun's step;
        no agent of an older one takes part in it, none is adopted)."""
        if not new_agents:
            self.generation, self.launched_on = generation, set(nodes)

    def adopts(self, node: str, own_generation: int) -> int | None:
        """The generation that adopts ``node``, whose words come in its ``own_generation``; None when it
        is no newcomer (the job never relaunched, a relaunch reached it, or it counts as the job does)."""
        if self.generation == 0 or node in self.launched_on or own_generation >= self.generation:
            return None
        return self.generation
