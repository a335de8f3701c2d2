"""Recovery: one pure state machine from a verdict to the next generation.

    facts and ``now`` in  ->  commands out

The coordinator calls :meth:`Recovery.tick` on each turn of its loop with what it knows (the
judge's verdict of this turn, every node's last status, how far the job got) and carries out the
commands it gets back: :class:`Capture`, :class:`StopJob`, :class:`ChooseCheckpoint`,
:class:`Relaunch`, :class:`Drain`, :class:`Finish`, :class:`Emit`. What a command's execution
tells (the checkpoint chosen, whether a relaunch started) comes back through
:meth:`Recovery.checkpoint_chosen` and :meth:`Recovery.relaunched`; a signal to the wrapper
through :meth:`Recovery.interrupt`. The machine holds every timer (settle, finishing grace,
evidence and stop deadlines, the wait for lost nodes), the pending verdict, incident numbering,
the interrupt, the checkpoints a generation could not start from, and the restart policy
(:class:`~neuron_watch.recovery.policy.RestartPolicy`: budget and crash loops). It does no I/O and reads no
clock: tests drive it with a fake one (tests/unit/test_recovery.py).

States and moves are :class:`~neuron_watch.recovery.policy.JobState` and its table::

    STARTING -> RUNNING -> CAPTURING -> STOPPING -> RESTARTING -> STARTING ...
        \\          |  \\                     |            |
         +---------+---+-> FINISHED         +-> FAILED   +-> FAILED (a relaunch that could not start)
    every live state -> INTERRUPTED (a signal to the wrapper), FAILED (the launcher gone, srun)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from neuron_watch.diagnosis.culprit import culprit_from_evidence
from neuron_watch.errors import ExitCode
from neuron_watch.events import (
    Action,
    EventKind,
    EvidenceReport,
    JobState,
    Label,
    NodeStatus,
    StopReport,
    Verdict,
)
from neuron_watch.recovery.commands import (
    Capture,
    ChooseCheckpoint,
    Command,
    Drain,
    Emit,
    Finish,
    RecordIncident,
    Relaunch,
    Relaunched,
    RelaunchEnded,
    RelaunchOutcome,
    StopJob,
)
from neuron_watch.recovery.incident_summary import incident_artifacts, missing_by_item
from neuron_watch.recovery.policy import Decision, JobStateMachine, RestartPolicy


@dataclass(frozen=True)
class RecoverySettings:
    """Every bound of recovery, in seconds (the coordinator's settings carry them)."""

    evidence_timeout: float = 60.0  # wait this long for every node's evidence
    stop_timeout: float = 15.0  # SIGTERM -> SIGKILL deadline sent with the stop
    upload_timeout: float = 0.0  # the nodes upload their bundles within their stop: wait that much longer
    settle: float = 3.0  # after a failure that is not a hang, wait this long for its root cause
    finishing_grace: float = 45.0  # ranks are ending: the launcher's own exit decides, up to this long
    lost_node_wait: float = 600.0  # a node silent at a restart: wait this long for it, then end the job
    launcher_gone_grace: float = 5.0  # the srun step ended by itself: judge what its agents last said
    #: every node that joined has a failed launcher while others never joined: wait this long for
    #: them (a wrapper reads its job's shape for up to ~25 s on a loaded node before it joins, and
    #: with every node the judge can name the failure), then end the job without them
    absent_grace: float = 60.0
    #: how often the wait for lost nodes is said again
    lost_said_every: float = 60.0


class NodeFacts(Protocol):
    """What recovery reads of one node (the coordinator's view of it implements this)."""

    @property
    def status(self) -> NodeStatus: ...
    @property
    def status_since(self) -> float: ...  # when it was said (the coordinator's clock)
    @property
    def status_heard(self) -> int: ...  # the coordinator's message count when it was said (orders it)
    @property
    def observed(self) -> bool: ...  # heard from within the silence bound (unobserved: False)
    @property
    def launcher_code(self) -> int | None: ...  # its launcher's exit code in this generation, once it exited
    @property
    def evidence(self) -> EvidenceReport | None: ...  # its last evidence report (None: none yet)
    @property
    def evidence_heard(self) -> int | None: ...  # the coordinator's message count when that report came
    @property
    def stop_report(self) -> StopReport | None: ...  # its answer to the last stop (None: none yet)


@dataclass(frozen=True)
class Progress:
    """How far the current generation got, for events and the policy."""

    last_progress: str | None = None  # ISO time of the line that showed the newest progress
    last_step: int | None = None
    progressed_for: float = 0.0  # seconds between this generation's first and newest progress


@dataclass(frozen=True)
class Facts:
    """What the coordinator knows at one tick."""

    nodes: Mapping[str, NodeFacts]
    #: messages the coordinator has taken in so far: what a node said after the nodes were asked
    #: something answers it (a count, not a time: the order of messages is what tells)
    heard: int = 0
    verdict: Verdict | None = None  # the judge's verdict of this tick; None: not judged this tick
    enough_nodes: bool = True  # as many nodes joined as the job expects
    progress: Progress = Progress()
    #: ``neuron-watch srun``: the step ended by itself with this exit code (None: running, or no step)
    launcher_gone: int | None = None


_HEALTHY_WAIT = Verdict(Label.HEALTHY, Action.WAIT)


def _end_before_all_joined(launcher_code: int, joined: list[str], trained: int | None) -> tuple[int, str]:
    """The exit code and reason of a job whose joined nodes' launchers all ended, one failing with
    ``launcher_code``, before every node joined; ``trained``: the last step its ranks reached."""
    nodes = ", ".join(joined)
    if trained is None:
        return launcher_code, (f"the launcher ended (exit {launcher_code}) on {nodes} before every node of the job "
                               "joined: the job cannot start without them (a rendezvous that timed out waiting for "
                               "them?)")
    # The ranks trained, so the launchers' rendezvous had the whole job: the nodes not heard ran ranks
    # this coordinator never saw (their wrappers could not reach it, or were lost before their hello).
    # What failed cannot be judged without them: unobserved, not a rendezvous that timed out.
    return int(ExitCode.UNOBSERVED), (
        f"the launcher ended (exit {launcher_code}) on {nodes} after its ranks trained (step {trained}) while the "
        "job's other node(s) never reached the coordinator: they ran ranks it could not observe, so the failure "
        "cannot be judged")


@dataclass
class Recovery:
    """The job's recovery. Call :meth:`tick` every turn; carry out the commands in order."""

    settings: RecoverySettings = RecoverySettings()
    policy: RestartPolicy = field(default_factory=lambda: RestartPolicy(max_restarts=3))
    #: a relaunch starts new agents (srun): nodes silent at a restart are not waited for
    fresh_agents_per_generation: bool = False
    generation: int = 0
    sm: JobStateMachine = field(default_factory=JobStateMachine)
    phase_since: float = 0.0
    incident: int = 0
    pending: Verdict = _HEALTHY_WAIT  # the failure being handled (the final verdict once captured)
    launched_from: str = ""  # the checkpoint the current generation started from
    avoid: set[str] = field(default_factory=set)  # checkpoints a generation could not start from
    _failure_seen: float | None = None  # a failure that is not a hang, waiting for its root cause
    _ended_alone: float | None = None  # every node that joined ended, failing, before the rest joined
    _last_label: Label | None = None  # the label of the last verdict emitted
    _last_explained = False  # ... and whether it was a healthy wait naming a rank (a long save)
    _interrupt: tuple[int, float] | None = None  # (signal, when)
    #: a signal came while the nodes captured an incident: its verdict and incident are still owed
    #: to the record (recorded once the nodes' evidence is in, or at the end of the stop)
    _owed_incident = False
    _capture_asked = -1  # the message count when the nodes were asked for the incident's evidence
    _lost_since: float | None = None
    _lost_said: float = -1e18
    _gone_since: float | None = None
    _restart_reason = ""
    #: the message count when the nodes were last asked something (capture, stop, launch): only
    #: what they said after it answers
    _asked: int = -1
    exit_code: int | None = None

    # -- inputs --------------------------------------------------------------------------------

    @property
    def state(self) -> JobState:
        return self.sm.state

    @property
    def live(self) -> bool:
        return self.sm.live

    @property
    def interrupted(self) -> bool:
        return self._interrupt is not None

    def started(self, checkpoint: str) -> None:
        """Generation 0 started from ``checkpoint`` (each node's own choice at start)."""
        if self.generation == 0 and not self.launched_from:
            self.launched_from = checkpoint

    def interrupt(self, signum: int, now: float, heard: int) -> list[Command]:
        """A signal to the wrapper (SIGTERM, SIGINT, SIGHUP): stop every node with one deadline,
        then end the job with 128+signum. A second signal, or one after the end, changes nothing.
        ``heard``: the coordinator's message count now (:attr:`Facts.heard`)."""
        if self._interrupt is not None or not self.live:
            return []
        self._interrupt = (signum, now)
        # The nodes carry out the capture before the stop (their commands run in order), so their
        # evidence still comes: the incident it belongs to is recorded with it, not forgotten.
        self._owed_incident = self.sm.state is JobState.CAPTURING
        self._asked = heard
        return [StopJob(f"signal {signum}", self.settings.stop_timeout)]

    def tick(self, now: float, facts: Facts) -> list[Command]:
        """Whatever is due at ``now`` given ``facts``."""
        if not self.live:
            return []
        # (not while restarting: the agents being replaced are ended by us, signals included)
        if (self._interrupt is None and self.sm.state is not JobState.RESTARTING
                and (left := self._left_on_signal(facts))):
            # A node's wrapper got a signal of its own and left: the scheduler ends the job (scancel
            # signals every node at once), so the job ends as on a signal to this coordinator
            name, signum = left[0]
            said = self._emit(EventKind.WARNING, kind="node_left_on_signal", node=name, signal=signum,
                              message=f"node {name} stopped its ranks on its own signal {signum} and left: "
                              "stopping the job on every node")
            return [said, *self.interrupt(signum, now, facts.heard)]
        if self._interrupt is not None:
            return self._interrupting(now, facts)
        gone = self._launcher_gone(now, facts)
        if gone is not None:
            return gone
        state = self.sm.state
        if state in (JobState.STARTING, JobState.RUNNING):
            return self._watching(now, facts)
        if state is JobState.CAPTURING:
            return self._capturing(now, facts)
        if state is JobState.STOPPING:
            return self._stopping(now, facts)
        return []  # RESTARTING: waiting for the checkpoint or the relaunch's answer

    def checkpoint_chosen(self, checkpoint: str, now: float, heard: int,
                          passed_over: tuple[str, ...] = ()) -> list[Command]:
        """The answer to :class:`ChooseCheckpoint`: the next generation starts from ``checkpoint``;
        ``passed_over``: newer entries not chosen because they are incomplete (a save the crash tore)."""
        if self.sm.state is not JobState.RESTARTING:
            return []
        self.launched_from = checkpoint
        self.generation += 1
        self._last_label, self._last_explained = None, False
        self._asked = heard
        restart = self._emit(EventKind.RESTART, checkpoint=checkpoint or None, restarts=self.policy.restarts,
                             reason=self._restart_reason, avoided=sorted(self.avoid) or None,
                             passed_over=list(passed_over) or None)
        return [restart, Relaunch(self.generation, checkpoint, self.pending)]

    def relaunched(self, outcome: RelaunchOutcome, now: float) -> list[Command]:
        """The answer to :class:`Relaunch`."""
        if self.sm.state is not JobState.RESTARTING:
            return []
        if isinstance(outcome, RelaunchEnded):
            return self._finish(outcome.code, outcome.reason, now, JobState.FAILED)
        return self._move(JobState.STARTING, now)

    # -- the states ----------------------------------------------------------------------------

    def _watching(self, now: float, facts: Facts) -> list[Command]:
        out: list[Command] = []
        if self.sm.state is JobState.STARTING and facts.enough_nodes:
            out += self._move(JobState.RUNNING, now)
        if not facts.enough_nodes:
            return self._ended_before_all_joined(now, facts)
        verdict = facts.verdict
        if facts.enough_nodes and self._all(facts, NodeStatus.FINISHED):
            if verdict is not None and verdict.action is not Action.WAIT and verdict.label is not self._last_label:
                # A failure was seen but the job ended by itself first: report it, keep its exit code.
                out.append(self._verdict_event(verdict, facts))
            return out + self._finish(0, "every node finished", now)
        if verdict is None:
            return out
        if verdict.action is Action.WAIT:
            self._failure_seen = None
            # A healthy verdict naming a rank is a wait the judge explains (a synced save longer
            # than the hang timeout): the operator gets a line when it begins and when it ends.
            explained = verdict.label is Label.HEALTHY and verdict.culprit is not None
            changed = verdict.label is not self._last_label or explained != self._last_explained
            first_plain_healthy = self._last_label is None and verdict.label is Label.HEALTHY and not explained
            if changed and not first_plain_healthy:
                self._last_label, self._last_explained = verdict.label, explained
                out.append(self._verdict_event(verdict, facts))
            return out
        # A failure. Unless it is a hang, give the rest of the story a moment to arrive (the
        # launcher's exit, the root-cause rank's exit code): peers report "connection closed"
        # before the launcher reports which rank died first.
        settled = self._all(facts, NodeStatus.FINISHED, NodeStatus.FAILED)
        if verdict.label is Label.COLLECTIVE_HANG and not settled and any(
            self._has(n, NodeStatus.FINISHING) and now - n.status_since < self.settings.finishing_grace
            for n in facts.nodes.values()
        ):
            return out  # ranks are ending (training done, or a crash the launcher is about to report)
        if verdict.label is not Label.COLLECTIVE_HANG and not settled:
            if self._failure_seen is None:
                self._failure_seen = now
                return out
            if now - self._failure_seen < self.settings.settle:
                return out
        self._failure_seen = None
        self.pending = verdict
        self.incident += 1
        self._asked = self._capture_asked = facts.heard
        return [*out, Capture(self.incident, verdict), *self._move(JobState.CAPTURING, now)]

    def _ended_before_all_joined(self, now: float, facts: Facts) -> list[Command]:
        """The job's nodes have not all joined, and the launcher of every node that did has ended,
        one failing (torchrun's rendezvous timed out waiting for the others, or it died at start):
        no verdict can come (the judge waits for every node) and nothing is left running to wait
        for, so the job ends with that launcher's code, saying why, rather than wait on silently.
        (A relaunch that starts new agents, srun's, reports its step's end itself.)"""
        codes = [n.launcher_code for n in facts.nodes.values()]
        ended = bool(facts.nodes) and all(self._has(n, NodeStatus.FINISHED, NodeStatus.FAILED) for n in
                                          facts.nodes.values())
        failed = [c for c in codes if c not in (None, 0)]
        if self.fresh_agents_per_generation or not ended or not failed:
            self._ended_alone = None
            return []
        code, reason = _end_before_all_joined(failed[0], sorted(facts.nodes), facts.progress.last_step)
        if self._ended_alone is None:
            self._ended_alone = now
            wait = self.settings.absent_grace
            return [self._emit(EventKind.WARNING, kind="nodes_missing", nodes=sorted(facts.nodes),
                               message=f"{reason}; waiting {wait:.0f}s for the others to join, then the job ends "
                                       f"with exit {code}")]
        if now - self._ended_alone < self.settings.absent_grace:
            return []  # a node that joins now still lets the judge name the failure
        return self._finish(code, reason, now, JobState.FAILED)

    def _capturing(self, now: float, facts: Facts) -> list[Command]:
        # a node silent past the silence bound cannot answer in time: its evidence is missing, not awaited
        reports = self._reports(facts)
        answered = bool(facts.nodes) and all(reports[name] is not None or not n.observed
                                             for name, n in facts.nodes.items())
        if not answered and now - self.phase_since < self.settings.evidence_timeout + 5:
            return []
        out = self._record_incident(reports, facts)
        # the final verdict (culprit included) completes every node's bundle before it uploads
        return [*out, StopJob(f"incident-{self.incident}", self.settings.stop_timeout, self.incident, self.pending),
                *self._move(JobState.STOPPING, now)]

    def _reports(self, facts: Facts, asked: int | None = None) -> dict[str, EvidenceReport | None]:
        """Each node's evidence report said after ``asked`` (default: the nodes' last ask); None: not given."""
        since = self._asked if asked is None else asked
        return {name: self._evidence(n, since) for name, n in sorted(facts.nodes.items())}

    def _record_incident(self, reports: Mapping[str, EvidenceReport | None], facts: Facts,
                         interrupted_by: int | None = None) -> list[Command]:
        """The incident's final verdict (its culprit refined by the evidence), its manifest and its
        ``incident`` event. ``interrupted_by``: the signal that cut the capture short."""
        verdict = self.pending
        # A signal that cut the capture short reached the ranks too, so a rank read as gone or
        # stopped may be the signal's work, not the hang's: the culprit the judge named stays.
        if interrupted_by is None or verdict.culprit is None:
            verdict = culprit_from_evidence(verdict, {k: v for k, v in reports.items() if v is not None})
        self.pending = verdict
        self._last_label = verdict.label
        culprit = None if verdict.culprit is None else {"node": verdict.culprit.node, "rank": verdict.culprit.rank}
        incident = self._emit(
            EventKind.INCIDENT, incident=self.incident, label=verdict.label.value, culprit=culprit,
            artifacts=incident_artifacts(reports, len(facts.nodes)),
            capture_seconds=max((r.seconds for r in reports.values() if r is not None), default=0.0),
            missing_items=sum(r.missing for r in reports.values() if r is not None),
            missing=missing_by_item(reports),
            nodes_without_evidence=sorted(n for n, r in reports.items() if r is None),
            **({} if interrupted_by is None else {"interrupted_by": interrupted_by}))
        self._asked = facts.heard
        return [self._verdict_event(verdict, facts), RecordIncident(self.incident, dict(reports)), incident]

    def _stopping(self, now: float, facts: Facts) -> list[Command]:
        s = self.settings
        nodes = facts.nodes
        stopped = {name for name, n in nodes.items() if self._has(n, NodeStatus.STOPPED)}
        lost = sorted(name for name, n in nodes.items() if name not in stopped and not n.observed)
        all_answered = bool(nodes) and len(stopped) == len(nodes)
        if not (all_answered or len(stopped) + len(lost) == len(nodes)
                or now - self.phase_since >= s.stop_timeout + s.upload_timeout + 10):
            return []
        out: list[Command] = []
        if lost and not self.fresh_agents_per_generation:
            waiting = self._wait_for_lost(now, lost, nodes)
            if waiting is not None:
                return waiting
        elif self._lost_since is not None:
            self._lost_since = None
        for name, n in sorted(nodes.items()):
            report = (n.stop_report if name in stopped else None) or StopReport()
            out.append(self._emit(EventKind.STOPPED, node=name, rung=report.rung, seconds=report.seconds,
                                  survivors=list(report.survivors), continued=list(report.continued),
                                  killed_stopped=list(report.killed_stopped), answered=name in stopped))
            out += [self._emit(EventKind.UPLOAD, node=name, **up) for up in report.uploads or ()]
        if lost and not self.fresh_agents_per_generation:
            reason = (f"node(s) {', '.join(lost)} lost (silent, no answer to the stop for "
                      f"{s.lost_node_wait:.0f}s): not relaunching onto them")
            out.append(self._emit(EventKind.GAVE_UP, reason=reason, label=self.pending.label.value,
                                  exit_code=int(ExitCode.UNOBSERVED)))
            return out + self._finish(int(ExitCode.UNOBSERVED), reason, now, JobState.FAILED)
        codes = [n.launcher_code for n in nodes.values() if n.launcher_code not in (None, 0)]
        # A generation that started from checkpoint C and failed before its first step may have
        # failed *because of* C (truncated, written by another version): the next one starts from
        # the previous complete checkpoint, once; the same failure again is a loop.
        suspect = self.launched_from if self.pending.step is None and self.launched_from and not self.avoid else ""
        outcome = self.policy.on_failure(self.pending, facts.progress.progressed_for, codes[0] if codes else None,
                                         fallback=bool(suspect))
        if outcome.decision is not Decision.RESTART:
            out.append(self._emit(EventKind.GAVE_UP, reason=outcome.reason, label=self.pending.label.value,
                                  exit_code=outcome.exit_code))
            return out + self._finish(outcome.exit_code, outcome.reason, now, JobState.FAILED)
        out += self._move(JobState.RESTARTING, now)
        self._restart_reason = outcome.reason
        if suspect:
            self.avoid.add(suspect)
            self._restart_reason += (f"; generation {self.generation} failed before its first step from {suspect}: "
                                     "falling back to the previous complete checkpoint")
        if self.pending.action is Action.DRAIN_AND_RESTART and self.pending.culprit is not None:
            out.append(Drain(self.pending.culprit.node, self.pending))
        return [*out, ChooseCheckpoint(frozenset(self.avoid))]

    def _wait_for_lost(self, now: float, lost: list[str], nodes: Mapping[str, NodeFacts]) -> list[Command] | None:
        """At a restart: nodes silent past the silence bound that did not answer the stop are not
        relaunched onto (a killed wrapper, a dead host). Wait for them, bounded, saying so; then the
        job ends with exit 3. Commands while waiting, None once the wait is over."""
        if self._lost_since is None:
            self._lost_since = now
        waited = now - self._lost_since
        left = self.settings.lost_node_wait - waited
        if left <= 0:
            return None
        if now - self._lost_said < self.settings.lost_said_every:
            return []
        self._lost_said = now
        silent = ", ".join(lost)
        message = (f"not relaunching generation {self.generation + 1}: node(s) {silent} silent and did not "
                   f"answer the stop (wrapper killed or host down?); waiting {left:.0f}s more for them, "
                   "then the job ends with exit 3")
        return [self._emit(EventKind.WARNING, kind="node_lost", message=message, nodes=lost, waited=round(waited, 3))]

    def _interrupting(self, now: float, facts: Facts) -> list[Command]:
        assert self._interrupt is not None
        signum, since = self._interrupt
        # a node that stopped on its own signal and left answers no stop: its own stop is its answer
        left = {name for name, _ in self._left_on_signal(facts)}
        reports: dict[str, EvidenceReport | None] | None = None
        if self._owed_incident:  # the capture's reports, asked before the stop
            reports = self._reports(facts, self._capture_asked)
        # A node whose launcher ended after the stop was asked has nothing left to stop: its answer is awaited for
        # the settle time, not the stop's deadline (the coordinator's host forwards its signal to its launcher
        # before the stop reaches it), unless its evidence is still owed (it comes first, within the deadline).
        settle = self.settings.settle
        ended = {name for name, n in facts.nodes.items()
                 if self._has(n, NodeStatus.FINISHED, NodeStatus.FAILED) and now - n.status_since >= settle
                 and (reports is None or reports[name] is not None)}
        stopped = bool(facts.nodes) and all(name in left or name in ended or self._has(n, NodeStatus.STOPPED)
                                            for name, n in facts.nodes.items())
        # the srun step is gone: nobody is left to answer the stop (scancel signalled its tasks too)
        expired = now - since >= self.settings.stop_timeout + 10
        over = stopped or facts.launcher_gone is not None or expired
        out: list[Command] = []
        if reports is not None:
            # Each node answers the capture before the stop, so a node that stopped (or is silent)
            # has nothing more to give; the rest are awaited until the stop's own bound.
            given = all(reports[name] is not None or not n.observed or self._has(n, NodeStatus.STOPPED)
                        or name in left for name, n in facts.nodes.items())
            if given or over:
                self._owed_incident = False
                asked = self._asked  # (recording moves it; the stop's answers still count from the signal)
                out = self._record_incident(reports, facts, interrupted_by=signum)
                self._asked = asked
        if over:
            reason = f"stopped by signal {signum}"
            if left:
                reason += f"; node(s) {', '.join(sorted(left))} stopped on their own signal and left"
            if ended:
                reason += f"; node(s) {', '.join(sorted(ended))} had no launcher left to stop (it ended)"
            if expired and not stopped and facts.launcher_gone is None:
                silent = sorted(name for name, n in facts.nodes.items()
                                if name not in left and not self._has(n, NodeStatus.STOPPED))
                reason += f"; the stop's deadline passed without an answer from node(s) {', '.join(silent)}"
            return out + self._finish(128 + signum, reason, now, JobState.INTERRUPTED)
        return out

    @staticmethod
    def _left_on_signal(facts: Facts) -> list[tuple[str, int]]:
        """The nodes that stopped on a signal of their own and left (their stop's ``own_signal``,
        their last word ``stopped`` or ``exited``), with that signal, by name."""
        # (every tick asks: the few such nodes are sorted, not the job's 1,024: that sort was 3.5 % of a
        # 512-node coordinator's CPU in tests/benchmarks/bench_scale.py, py-spy)
        return sorted((name, n.stop_report.own_signal) for name, n in facts.nodes.items()
                      if n.stop_report is not None and n.stop_report.own_signal
                      and n.status in (NodeStatus.STOPPED, NodeStatus.EXITED))

    def _launcher_gone(self, now: float, facts: Facts) -> list[Command] | None:
        """``neuron-watch srun``: the step ended without being told to (a task died, a node failed).
        Give the judge a moment on what its agents last said, then end the job with the step's code."""
        if facts.launcher_gone is None or self.sm.state is JobState.RESTARTING:
            self._gone_since = None
            return None
        if self._gone_since is None:
            self._gone_since = now
        if now - self._gone_since <= max(self.settings.launcher_gone_grace, self.settings.settle + 2):
            return None
        code = facts.launcher_gone if facts.launcher_gone != 0 else int(ExitCode.UNOBSERVED)
        reason = f"the srun step ended by itself (exit {facts.launcher_gone})"
        ended = self._emit(EventKind.SRUN_STEP_ENDED, exit_code=facts.launcher_gone, unexpected=True)
        return [ended, *self._finish(code, reason, now, JobState.FAILED)]

    # -- helpers -------------------------------------------------------------------------------

    def _move(self, state: JobState, now: float) -> list[Command]:
        previous = self.sm.state
        self.sm.move(state, now)
        self.phase_since = now
        return [self._emit(EventKind.RECOVERY_PHASE, phase=state.value, previous=previous.value)]

    def _finish(self, code: int, reason: str, now: float, state: JobState = JobState.FINISHED) -> list[Command]:
        out: list[Command] = []
        if state is JobState.FINISHED and self.sm.state is JobState.STARTING:
            out += self._move(JobState.RUNNING, now)
        self.exit_code = code
        # the phase first, then the end: job_finished is the job's last event
        return [*out, *self._move(state, now), Finish(code, reason, state)]

    def _emit(self, event: EventKind, /, **fields: Any) -> Emit:
        return Emit(event, fields, self.generation)

    def _verdict_event(self, verdict: Verdict, facts: Facts) -> Emit:
        return self._emit(EventKind.VERDICT, **verdict.to_dict(), last_progress=facts.progress.last_progress,
                          last_step=facts.progress.last_step)

    def _has(self, n: NodeFacts, *states: NodeStatus) -> bool:
        """The node's status is one of ``states``, said since the nodes were last asked something."""
        return n.status in states and n.status_heard > self._asked

    def _all(self, facts: Facts, *states: NodeStatus) -> bool:
        return bool(facts.nodes) and all(self._has(n, *states) for n in facts.nodes.values())

    @staticmethod
    def _evidence(n: NodeFacts, asked: int) -> EvidenceReport | None:
        """The node's evidence report said after message count ``asked`` (None: it did not answer yet)."""
        heard = n.evidence_heard
        return n.evidence if heard is not None and heard > asked else None



# -- a coordinator started again mid-recovery (docs/multinode.md, "A crash mid-recovery") ----------------


def resume_stop(rec: Recovery, verdict: Verdict, now: float, heard: int) -> list[Command]:
    """A coordinator started again after its predecessor died capturing or stopping for ``verdict``
    (its incident numbered, its restart not yet counted): the verdict stands; what is left of the
    generation is stopped (nodes already stopped answer at once) and the restart goes on from there
    as any, counted once at the stop's end. The evidence captured stays the incident's; what was
    not captured is not asked again (the ranks may be stopped already)."""
    if rec.sm.state not in (JobState.STARTING, JobState.RUNNING) or rec.interrupted:
        return []
    rec.pending, rec._last_label, rec._asked = verdict, verdict.label, heard
    return [*_resume_to(rec, JobState.STOPPING, now),
            StopJob(f"incident-{rec.incident}", rec.settings.stop_timeout, rec.incident, verdict)]


def resume_relaunch(rec: Recovery, verdict: Verdict, now: float, heard: int) -> list[Command]:
    """A coordinator started again after its predecessor died relaunching: the restart was counted
    and the generation (:attr:`Recovery.generation`) and its checkpoint (:attr:`Recovery.launched_from`)
    chosen, and it does not run: relaunch it, counting nothing again."""
    if rec.sm.state not in (JobState.STARTING, JobState.RUNNING) or rec.interrupted:
        return []
    rec.pending, rec._asked = verdict, heard
    return [*_resume_to(rec, JobState.RESTARTING, now), Relaunch(rec.generation, rec.launched_from, verdict)]


def _resume_to(rec: Recovery, state: JobState, now: float) -> list[Command]:
    """The machine moved along its table to ``state`` (the predecessor's moves before it), said as one move."""
    previous = rec.sm.state
    for step in (JobState.CAPTURING, JobState.STOPPING, JobState.RESTARTING):
        if rec.sm.state is not state:
            rec.sm.move(step, now)
    rec.phase_since = now
    return [rec._emit(EventKind.RECOVERY_PHASE, phase=state.value, previous=previous.value, resumed=True)]


__all__ = [
    "Capture", "ChooseCheckpoint", "Command", "Drain", "Emit", "Facts", "Finish", "NodeFacts", "Progress",
    "RecordIncident", "Recovery", "RecoverySettings", "Relaunch", "RelaunchEnded", "RelaunchOutcome",
    "Relaunched", "StopJob",
]
