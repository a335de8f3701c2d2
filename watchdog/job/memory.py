"""What a coordinator must know of the job to take it up after its predecessor crashed.

Node 0's wrapper runs the job's coordinator as a child process and starts it again when it dies
(:mod:`neuron_watch.job.hosting`). The nodes tell a new coordinator who they are (their hellos)
and what they run (their statuses, their lines); what only the coordinator knew is here: the
generation, the restart budget spent and the failures it counted (a crash loop is still one),
the incidents numbered (a new one must not overwrite ``incidents/incident-1``), the checkpoint the
generation started from. The coordinator writes it to ``coordinator-state.json`` in its run dir
(atomically) each time it changes; the next one reads it.

What is not kept: a recovery under way (the capture, the stop). A coordinator that crashed in
the middle of one starts in the current generation; the nodes it had asked keep their ranks as
they are, and the judge judges them again.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from neuron_watch.iofaults import IOHealth
from neuron_watch.job.pacing import VerdictPacing
from neuron_watch.recovery.machine import Recovery

#: the file in the coordinator's run dir
STATE_FILE = "coordinator-state.json"


@dataclass(frozen=True)
class JobMemory:
    """The coordinator's own knowledge of the job, the part no node can give back."""

    generation: int = 0
    restarts: int = 0
    consecutive_failures: int = 0
    #: (label, step) of each failed generation, oldest first: the restart policy's crash-loop memory
    failures: tuple[tuple[str, int | None], ...] = field(default_factory=tuple)
    incidents: int = 0
    launched_from: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failures": [list(f) for f in self.failures]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobMemory:
        """A memory from its document; a field missing or of the wrong type is its default."""
        def num(key: str) -> int:
            value = data.get(key, 0)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

        failures = []
        for item in data.get("failures") or ():
            if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
                failures.append((item[0], item[1] if isinstance(item[1], int) else None))
        launched = data.get("launched_from")
        return cls(generation=num("generation"), restarts=num("restarts"),
                   consecutive_failures=num("consecutive_failures"), failures=tuple(failures),
                   incidents=num("incidents"), launched_from=launched if isinstance(launched, str) else "")


def remember(run_dir: str, memory: JobMemory, health: IOHealth) -> bool:
    """Write ``memory`` to the run dir (atomically; a fault is counted by ``health``). Returns success."""
    return health.write_json(os.path.join(run_dir, STATE_FILE), memory.to_dict())


def recall(run_dir: str) -> JobMemory | None:
    """The memory a predecessor left in ``run_dir``; None when there is none or it cannot be read
    (a new coordinator then starts at generation 0, as a first one does, and says so)."""
    try:
        with open(os.path.join(run_dir, STATE_FILE), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return JobMemory.from_dict(data) if isinstance(data, dict) else None


def memory_of(recovery: Recovery) -> JobMemory:
    """What a successor of this coordinator could not learn from the nodes."""
    policy = recovery.policy
    return JobMemory(generation=recovery.generation, restarts=policy.restarts,
                     consecutive_failures=policy.consecutive_failures, failures=tuple(policy.failures),
                     incidents=recovery.incident, launched_from=recovery.launched_from)


class Takeover:
    """A coordinator's side of it: what it last wrote (written again when it changes), and, when it
    took up a predecessor's job, whether its nodes are all back yet."""

    def __init__(self, run_dir: str, health: IOHealth) -> None:
        self.run_dir, self.health = run_dir, health
        self._written: JobMemory | None = None
        self._waiting = False  # a predecessor's job taken up, its nodes not all back yet

    def turn(self, recovery: Recovery, pacing: VerdictPacing, enough: bool, now: float) -> None:
        """Once a coordinator's turn, before its verdict (``enough``: every node of the job joined).
        The record is written when it changed (what the last turn did; a fault is counted and tried
        again). At the first turn with every node back after a :meth:`restore`, no verdict for the
        pause grace, as after a pause of the coordinator's own: what the nodes buffered for it
        meanwhile (their ranks' newest progress among it) arrives first -- a verdict on part of it
        names no culprit, or the wrong one."""
        memory = memory_of(recovery)
        if memory != self._written and remember(self.run_dir, memory, self.health):
            self._written = memory
        if self._waiting and enough:
            self._waiting = False
            pacing.hold_until = max(pacing.hold_until, now + pacing.pause_grace)

    def restore(self, recovery: Recovery, memory: JobMemory) -> None:
        """``recovery`` goes on from ``memory``: its generation, budget spent, failures, incidents.
        Before the coordinator's first tick (its judge is the same for every generation)."""
        policy = recovery.policy
        recovery.generation, recovery.incident, recovery.launched_from = (
            memory.generation, memory.incidents, memory.launched_from)
        policy.restarts, policy.consecutive_failures = memory.restarts, memory.consecutive_failures
        policy.failures = list(memory.failures)
        self._waiting = True
