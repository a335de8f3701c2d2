"""What a coordinator must know of the job to take it up after its predecessor crashed.

Node 0's wrapper runs the job's coordinator as a child process and starts it again when it dies
(:mod:`neuron_watch.job.hosting`). The nodes tell a new coordinator who they are (their hellos)
and what they run (their statuses, their lines); what only the coordinator knew is here: the
generation, the restart budget spent and the failures it counted (a crash loop is still one),
the incidents numbered (a new one must not overwrite ``incidents/incident-1``), the checkpoint the
generation started from. The coordinator writes it to ``coordinator-state.json`` in its run dir
(atomically) each time it changes; the next one reads it.

A recovery under way is kept too (``under_way``, the verdict it acts on): a coordinator that died
after its verdict, during the capture, the stop or the relaunch, is replaced by one that finishes
it -- neither lost nor done twice, and no healthy new generation stopped
(:func:`neuron_watch.recovery.coordcrash.resume` decides, once it knows what runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from neuron_watch.events import Action, JobState, Label, RankKey, Verdict
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.pacing import VerdictPacing
from neuron_watch.recovery.coordcrash import ResumeAction, Resumption, UnderWay, resume
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
    #: the recovery under way ("" none; :class:`UnderWay`) and the verdict it acts on (:func:`verdict_record`)
    under_way: str = ""
    verdict: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failures": [list(f) for f in self.failures]}

    @property
    def owed(self) -> UnderWay | None:
        try:
            return UnderWay(self.under_way) if self.under_way else None
        except ValueError:
            return None

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
        under_way, verdict = data.get("under_way"), data.get("verdict")
        return cls(generation=num("generation"), restarts=num("restarts"),
                   consecutive_failures=num("consecutive_failures"), failures=tuple(failures),
                   incidents=num("incidents"), launched_from=launched if isinstance(launched, str) else "",
                   under_way=under_way if isinstance(under_way, str) else "",
                   verdict=verdict if isinstance(verdict, dict) else {})


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    """What a successor needs of the verdict a recovery acts on (its evidence stays in the incident's files)."""
    culprit = verdict.culprit
    return {"label": verdict.label.value, "action": verdict.action.value, "reason": verdict.reason,
            "advice": verdict.advice, "step": verdict.step, "culprit_source": verdict.culprit_source,
            "culprit": None if culprit is None else [culprit.node, culprit.rank]}


def verdict_from_record(data: dict[str, Any]) -> Verdict | None:
    """The verdict of :func:`verdict_record`; None when it cannot be read (the recovery is then not resumed)."""
    try:
        culprit, step, source = data.get("culprit"), data.get("step"), data.get("culprit_source")
        return Verdict(Label(data["label"]), Action(data["action"]),
                       culprit=RankKey(str(culprit[0]), int(culprit[1])) if culprit else None,
                       reason=str(data.get("reason", "")), advice=str(data.get("advice", "")),
                       step=step if isinstance(step, int) else None,
                       culprit_source=source if isinstance(source, str) else None)
    except (KeyError, ValueError, TypeError, IndexError):
        return None


#: the recovery states a successor finishes, by what is owed
_UNDER_WAY = {JobState.CAPTURING: UnderWay.CAPTURE, JobState.STOPPING: UnderWay.STOP,
              JobState.RESTARTING: UnderWay.RELAUNCH}
#: the states in which a generation runs (a relaunch done, or not yet confirmed by the nodes)
_WATCHING = (JobState.STARTING, JobState.RUNNING)


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


def memory_of(recovery: Recovery, launch_unconfirmed: bool = False) -> JobMemory:
    """What a successor of this coordinator could not learn from the nodes. ``launch_unconfirmed``:
    the generation was relaunched but not every node says it runs it yet (:class:`Takeover`): the
    relaunch is still owed to a successor, which relaunches it if the nodes are back in the old one
    and goes on if they run the new one."""
    policy = recovery.policy
    # a signal's stop is not a restart: a successor of a coordinator that died stopping for one owes none
    owed = None if recovery.interrupted else _UNDER_WAY.get(recovery.state)
    if owed is None and launch_unconfirmed and not recovery.interrupted and recovery.state in _WATCHING:
        owed = UnderWay.RELAUNCH
    return JobMemory(generation=recovery.generation, restarts=policy.restarts,
                     consecutive_failures=policy.consecutive_failures, failures=tuple(policy.failures),
                     incidents=recovery.incident, launched_from=recovery.launched_from,
                     under_way=owed.value if owed is not None else "",
                     verdict=verdict_record(recovery.pending) if owed is not None else {})


class Takeover:
    """A coordinator's side of it: what it last wrote (written again when it changes), and, when it
    took up a predecessor's job, whether its nodes are all back yet."""

    def __init__(self, run_dir: str, health: IOHealth) -> None:
        self.run_dir, self.health = run_dir, health
        self._written: JobMemory | None = None
        self._waiting = False  # a predecessor's job taken up, its nodes not all back yet
        #: a predecessor's recovery still to finish, and the verdict it acts on
        self.owed: tuple[UnderWay, Verdict] | None = None
        self._since: float | None = None  # this coordinator's first turn, after a restore
        self._owed_generation = 0
        #: the newest generation known to run on every node (or the srun step): a later one was
        #: relaunched and its ``launch`` may not have arrived yet (:func:`launch_confirmed`)
        self._confirmed = 0

    def turn(self, recovery: Recovery, pacing: VerdictPacing, enough: bool, now: float,
             runs: Callable[[int], bool] | None = None) -> None:
        """Once a coordinator's turn, before its verdict (``enough``: every node of the job joined).
        The record is written when it changed (what the last turn did; a fault is counted and tried
        again). At the first turn with every node back after a :meth:`restore`, no verdict for the
        pause grace, as after a pause of the coordinator's own: what the nodes buffered for it
        meanwhile (their ranks' newest progress among it) arrives first -- a verdict on part of it
        names no culprit, or the wrong one."""
        self.record(recovery, runs)
        if self._since is None:
            self._since = now
        if self._waiting and enough:
            self._waiting = False
            pacing.hold_until = max(pacing.hold_until, now + pacing.pause_grace)

    def record(self, recovery: Recovery, runs: Callable[[int], bool] | None = None) -> None:
        """The record written if it changed (also at the end of a turn: what the turn's commands did
        is on disk before the next turn, so a crash loses at most the commands of one turn).
        ``runs(generation)``: whether the nodes (or the srun step) say they run ``generation``
        (:func:`launch_confirmed`); asked only from a relaunch until it says yes, and without it a
        relaunch counts as confirmed once done."""
        unconfirmed = False
        if recovery.generation > self._confirmed and recovery.state in _WATCHING:
            if runs is None or runs(recovery.generation):
                self._confirmed = recovery.generation
            else:
                unconfirmed = True
        memory = memory_of(recovery, unconfirmed)
        if memory != self._written and remember(self.run_dir, memory, self.health):
            self._written = memory

    def resumption(self, now: float, *, launched: int | None, nodes_at: tuple[int, ...],
                   all_back: bool) -> tuple[Resumption, Verdict] | None:
        """What to do now about the recovery a predecessor left (:func:`resume`); None when nothing is
        owed or it still waits for the nodes. Once decided, it is not asked again."""
        if self.owed is None:
            return None
        under_way, verdict = self.owed
        since = self._since if self._since is not None else now
        decided = resume(under_way, self._owed_generation, launched=launched, nodes_at=nodes_at,
                         all_back=all_back, waited=now - since)
        if decided.action is ResumeAction.WAIT:
            return None
        self.owed = None
        return decided, verdict

    def restore(self, recovery: Recovery, memory: JobMemory) -> None:
        """``recovery`` goes on from ``memory``: its generation, budget spent, failures, incidents.
        Before the coordinator's first tick (its judge is the same for every generation)."""
        policy = recovery.policy
        recovery.generation, recovery.incident, recovery.launched_from = (
            memory.generation, memory.incidents, memory.launched_from)
        policy.restarts, policy.consecutive_failures = memory.restarts, memory.consecutive_failures
        policy.failures = list(memory.failures)
        self._waiting = True
        # a relaunch recorded as owed is confirmed (or done again) by the resumption; else the
        # recorded generation ran when it was written
        self._confirmed = memory.generation - 1 if memory.owed is UnderWay.RELAUNCH else memory.generation
        verdict = verdict_from_record(memory.verdict)
        owed = memory.owed
        if owed is not None and verdict is not None:
            self.owed, self._owed_generation = (owed, verdict), memory.generation
            recovery.pending = verdict
