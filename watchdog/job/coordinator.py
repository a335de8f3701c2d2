"""The job's coordinator: receives every node's lines, judges the whole job, drives recovery.

    neuron-watch coordinator --bind HOST:PORT --run-dir DIR [--job-id ID] [--nodes N]

A :class:`Coordinator` is a service object with a ``poll(timeout)`` / ``tick(now)`` shape:
``poll`` has its :class:`~neuron_watch.job.endpoint.Endpoint` drain the socket (authenticate,
decode, de-duplicate) and hand each fresh message back to be ingested; ``tick`` does what is due
at ``now`` (acks, silence checks, the verdict, recovery steps, flushing files). The command and
the node-0 wrapper both run the same loop (:meth:`Coordinator.serve`).

Into its run dir it writes ``merged.log`` (every rank of every node, one line each:
``<ISO wall> <node>/rank<r> | <text>``, in arrival order; kept by its job log, in every entry
point a writer process off the judging thread: :mod:`.linewriter`) and ``events.jsonl`` (the job's events
for all nodes; same contract as the single-node wrapper), and ``coordinator.json`` (the
summary, rewritten atomically on each tick).

Trust: only messages signed with the job's agent key are ingested (the endpoint checks them);
anything else is dropped and counted in the summary, never acted on. A node not heard from for
``silence`` seconds is ``unobserved`` (never ``healthy``) until it speaks again.

Recovery, when the judge's verdict asks for a restart: every node is told to
capture evidence, then to stop (SIGTERM, deadline, SIGKILL, reap on each), then the
checkpoint is chosen once, here, and every node is told to launch generation G+1 from it.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from neuron_watch.events import (
    EventKind,
    JobState,
    Label,
    RankKey,
    Verdict,
    iso_utc,
)
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.endpoint import COORDINATOR_NODE, SHED_BEHIND, Endpoint
from neuron_watch.job.heapfreeze import HeapFreeze
from neuron_watch.job.incidentrecord import verdict_document, write_incident_record
from neuron_watch.job.ingest import Ingest
from neuron_watch.job.intake import UrgentGate
from neuron_watch.job.joblog import JobLog, JobLogLike, gap_line
from neuron_watch.job.jobreport import JobReport, progressed_for
from neuron_watch.job.judgelike import JudgeLike
from neuron_watch.job.latecomers import Latecomers
from neuron_watch.job.linewriter import JobLogFactory, told_by_writer
from neuron_watch.job.nodes import NodeRegistry, NodeView
from neuron_watch.job.pacing import VerdictPacing
from neuron_watch.job.relaunch import LaunchOnNodes, Relauncher, newest_reported_checkpoint, relaunch_checkpoint
from neuron_watch.job.settings import PAUSE_JUMP, CoordinatorSettings, coordinator_settings
from neuron_watch.job.statusbook import StatusBook
from neuron_watch.job.statusdoc import NodeState, first_collective_fields, status_document, status_head
from neuron_watch.job.statusfiles import StatusFiles
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.outputs.status import FULL_RANKS
from neuron_watch.recovery.checkpoints import CheckpointChoice
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
    StopJob,
)
from neuron_watch.recovery.coordcrash import ResumeAction, launch_confirmed
from neuron_watch.recovery.machine import Facts, Progress, Recovery, RecoverySettings, resume_relaunch, resume_stop
from neuron_watch.recovery.policy import RestartPolicy
from neuron_watch.recovery.turns import BUSY_WAIT, earliest, wait_for
from neuron_watch.wire.protocol import (
    NO_VERDICT,
    Body,
    CaptureEvidence,
    Msg,
    Shutdown,
    Stop,
    delivery_slack_at,
)
from neuron_watch.wire.waker import Waitable, Waker

log = logging.getLogger("neuron_watch")

#: A standalone coordinator serves this long after the job's end for every node to say it exited.
NODES_EXIT_GRACE = 10.0

#: The recovery steps are the job states of :mod:`neuron_watch.recovery.policy` (one state machine for all).
Phase = JobState


class Coordinator:
    """One job's coordinator. Single-threaded: call :meth:`poll` and :meth:`tick` from one loop.

    Args:
        bind: ``HOST:PORT`` (port 0 = any free one; read :attr:`endpoint`) or a ZeroMQ URL.
        secret: the job secret (:func:`neuron_watch.wire.auth.load_secret`).
        run_dir: where ``merged.log``, ``events.jsonl`` and ``coordinator.json`` go.
        job: the job id every message must carry.
        judge_factory: ``(generation, now) -> judge`` for each generation; None = ingest only.
        pick_checkpoint: returns the checkpoint every node relaunches from ('' = from scratch);
            default: the newest one any node reported in its status.
        policy: the restart policy (:class:`neuron_watch.recovery.policy.RestartPolicy`); default: one with
            ``max_restarts``.
        relauncher: how a new generation starts (:class:`Relauncher`); default: every node is sent
            ``launch`` (:class:`LaunchOnNodes`). ``neuron-watch srun`` starts a new srun step instead.
        generation: the first generation (a requeued Slurm job goes on counting).
        job_log: ``(run_dir, tail_lines, counters, tell) -> job log``: who keeps merged.log and the
            tails (:class:`.linewriter.LineWriter`: a writer process); default: this process.
    """

    def __init__(self, bind: str, secret: bytes, run_dir: str, *, job: str,
                 settings: CoordinatorSettings | None = None,
                 judge_factory: Callable[[int, float], JudgeLike] | None = None,
                 pick_checkpoint: Callable[..., str | CheckpointChoice] | None = None,
                 policy: RestartPolicy | None = None,
                 max_restarts: int = 3, session: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 announce: bool = True,
                 relauncher: Relauncher | None = None,
                 generation: int = 0,
                 health: IOHealth | None = None,
                 job_log: JobLogFactory | None = None) -> None:
        self.settings = settings or CoordinatorSettings()
        self.relauncher: Relauncher = relauncher or LaunchOnNodes(self.broadcast)
        self.latecomers = Latecomers()  # the nodes the running generation was launched on
        self._relaunching = False
        self.job = job
        self.clock = clock
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.registry = NodeRegistry(self.settings.silence)
        self.nodes: dict[str, NodeView] = self.registry.views
        #: the socket side: frames, trust, sessions, acks; it hands each fresh message to :meth:`received`
        self.wire = Endpoint(bind, secret, job, registry=self.registry, receiver=self, clock=clock,
                             ack_interval=self.settings.ack_interval, session=session)
        self.endpoint, self.session, self.counters = self.wire.endpoint, self.wire.session, self.wire.counters
        self.sock, self.tracker = self.wire.sock, self.wire.tracker
        self.lane = UrgentGate()  # whether the messages that may make a verdict go first (job/intake.py)
        self.judge_factory = judge_factory
        now = clock()
        self.judge = self._new_judge(generation, now)
        self.pick_checkpoint = pick_checkpoint or newest_reported_checkpoint
        st = self.settings
        #: every step from a verdict to the next generation (pure: it only returns commands)
        self.recovery = Recovery(
            RecoverySettings(evidence_timeout=st.evidence_timeout, stop_timeout=st.stop_timeout,
                             upload_timeout=st.upload_timeout, settle=st.settle,
                             finishing_grace=st.finishing_grace, lost_node_wait=st.lost_node_wait,
                             absent_grace=st.absent_grace),
            policy or RestartPolicy(max_restarts=max_restarts),
            fresh_agents_per_generation=self.relauncher.replaces_agents, generation=generation,
            phase_since=now)
        self.wall = wall
        # The watchdog's own files never stop the job: a full or read-only disk degrades them (counted,
        # reported as watchdog_degraded/_recovered, written again when the disk takes writes).
        self.health = health or IOHealth()
        self.events = EventLog(os.path.join(run_dir, "events.jsonl"), wall=wall,  # one wall clock for all times
                               health=self.health)
        self.health.listeners.append(self._io_fault)
        #: merged.log and each rank's recent lines (what the operator and the incident read): in this
        #: process, or kept by a writer process off the judging path (``job_log``, :mod:`.linewriter`)
        self.joblog: JobLogLike = (
            JobLog(run_dir, self.health, self.settings.tail_lines, gap=self._merged_gap) if job_log is None
            else job_log(run_dir, self.settings.tail_lines, self.counters, told_by_writer(self.health, self._io_fault)))
        # (a writer process decodes each batch's frame itself: the judging thread decodes the judge's part)
        self.wire.judged_only = self.joblog.decodes_frames
        #: each fresh message into the judge, the job log and the node's view
        self.ingest = Ingest(self, self.nodes, self.joblog, self.events, self.counters)
        #: what the judge found that the operator must hear while the job runs (progress, warnings)
        self.report = JobReport(self.events, clock, wall)
        self._io_told = False  # faults seen before this coordinator existed are told at the first tick
        self.last_verdict: Verdict | None = None
        self.exit_code: int | None = None  # set when the job is over (shutdown sent)
        #: when a verdict is due (its interval, its cost, our own pauses)
        self.pacing = VerdictPacing(st.verdict_interval, st.pause_jump, st.pause_grace)
        self.announce = announce  # standalone: coordinator_started/_stopped frame the job's events
        self.status_files = StatusFiles(run_dir, self.health)
        self.status_book = StatusBook()  # a big job's status.json, kept by changes
        #: a big job's per-rank state out of the collector's full walks once every rank is known
        self.heap = HeapFreeze()
        self._status_at = -math.inf  # the last turn that wrote status.json
        #: called with each status document written (once a second): the --progress line
        self.status_listeners = self.status_files.listeners
        if announce:
            self.events.emit(EventKind.COORDINATOR_STARTED, 0, endpoint=self.endpoint, job=job)

    def _merged_gap(self, lines: int, nbytes: int, error: str) -> str:
        return gap_line(self.wall(), COORDINATOR_NODE, lines, nbytes, error)

    def _io_fault(self, kind: str, fields: dict[str, Any]) -> None:
        """A file of the watchdog failed or works again: an event (it reaches MQTT and the console
        even when events.jsonl is the file that fails)."""
        self.events.emit(kind, self.generation, **fields)

    # -- the wire (its endpoint does the work) ------------------------------------------------

    def poll(self, timeout: float, budget: float = 0.05) -> int:
        """Handle the nodes' messages for up to ``budget`` seconds (:meth:`.Endpoint.poll`)."""
        return self.wire.poll(timeout, budget)

    def handle(self, routing_id: bytes, frames: list[bytes], now: float) -> None:
        """One message off the socket (:meth:`.Endpoint.handle`)."""
        self.wire.handle(routing_id, frames, now)

    def send(self, node: str, body: Body) -> bool:
        """One signed command to ``node`` (:meth:`.Endpoint.send`)."""
        return self.wire.send(node, body)

    def broadcast(self, body: Body) -> list[str]:
        """``body`` to every node (:meth:`.Endpoint.broadcast`): the nodes it could not be handed to."""
        return self.wire.broadcast(body)

    @property
    def heard(self) -> int:
        """Messages ingested (fresh, authenticated, in order): orders the nodes' answers."""
        return self.ingest.heard

    @property
    def behind(self) -> float:
        """Seconds the nodes' newest messages waited in our queues (:attr:`.Endpoint.behind`)."""
        return self.wire.behind

    def received(self, view: NodeView, msg: Msg, now: float, frame: bytes = b"") -> None:
        """A fresh message of ``view``'s session: a silent node is heard again, then it is ingested."""
        if view.state is NodeState.UNOBSERVED:
            view.state = NodeState.CONNECTED
            if self.judge:
                self.judge.mark_observed(view.node)
            self.events.emit(EventKind.NODE_OBSERVED, self.generation, node=view.node)
        self.ingest.message(view, msg, now, frame)

    def tail(self, key: RankKey, n: int | None = None) -> list[str]:
        """The last ``n`` (default ``tail_lines``) lines of a rank, oldest first (:meth:`.JobLog.tail`)."""
        return self.joblog.tail(key, n)

    # -- the clock ---------------------------------------------------------------------------

    def tick(self, now: float) -> Verdict | None:
        """Acks, silence, verdict and recovery steps due at ``now``; returns the verdict if judged."""
        gap = self.pacing.turn(now)
        if gap is not None:
            self._paused(gap, now)
        if not self._io_told:  # after job_started, the first event of a job
            self._io_told = True
            for path, error in sorted(self.health.degraded.items()):
                self.events.emit(EventKind.WATCHDOG_DEGRADED, self.generation, node=self.health.node, path=path,
                                 operation="write", error=error, faults=self.health.faults)
        nodes = self.job_nodes
        joined = self.registry.enough(self.settings.expected_nodes)
        self.wire.urgent_first = self.lane.open(self.judge, self.nodes, joined, now)
        if self.wire.ack(now, nodes) and self.judge is not None and hasattr(self.judge, "delivery_slack"):
            setattr(self.judge, "delivery_slack", delivery_slack_at(nodes))  # noqa: B010  (a test's judge may lack it)
        for view in self.registry.newly_silent(now):
            if self.judge:
                self.judge.mark_unobserved(view.node, now)
            self.events.emit(EventKind.NODE_UNOBSERVED, self.generation, node=view.node,
                             silent_for=round(now - view.last_heard, 3))
        verdict = None
        self.status_files.kept.turn(self.recovery, self.pacing, self.registry.enough(self.settings.expected_nodes), now,
                                    partial(runs, self))
        if self.judge is not None and self.registry.enough(self.settings.expected_nodes) and self.pacing.due(now):
            spent = time.perf_counter()
            verdict = self.judge.verdict(now)
            if self.recovery.state in (JobState.STARTING, JobState.RUNNING) and not self.recovery.interrupted:
                # Once an incident or a signal stops the ranks, what the judge makes of their end
                # (exits, "other_crash") is not what the job is: the status keeps the verdict in force.
                self.last_verdict = verdict
            self.report.after_verdict(self.judge, self.generation, self.recovery.state is JobState.RUNNING, now)
            self.pacing.judged(now, time.perf_counter() - spent)
        if self._relaunching:
            self._relaunch_done(now)
        else:
            resume_owed(self, now)
            self._execute(self.recovery.tick(now, self._facts(verdict)), now)
        self.status_files.kept.record(self.recovery, partial(runs, self))  # this turn's doing, before the next
        self.joblog.flush()
        self.events.flush()  # events kept while the disk was full go out once it takes writes
        if self.status_files.turn(now, self.behind >= SHED_BEHIND, self.write_status):
            self.counters.status_writes_shed += 1
        turn_heap_freeze(self, now)
        return verdict

    def _paused(self, gap: float, now: float) -> None:
        """We did not run for ``gap`` seconds (SIGSTOP of the wrapper, a console pipe nobody read):
        re-baseline. The nodes were not silent, we were deaf: their last-heard times move by the
        gap; and no verdict is given until what they buffered meanwhile has arrived (a verdict on
        stale clocks would call a healthy job hung)."""
        self.registry.rebase(gap, now)
        message = (f"the coordinator was not running for {gap:.0f}s (paused?): no verdict for "
                   f"{self.settings.pause_grace:.0f}s while the nodes' buffered output arrives")
        self.events.emit(EventKind.WARNING, self.generation, kind="coordinator_paused", message=message,
                         seconds=round(gap, 3))
        log.warning("%s", message)

    @property
    def job_nodes(self) -> int:
        """The job's size as the acks announce it: the nodes heard from, or expected if more."""
        return self.registry.size(self.settings.expected_nodes)

    @property
    def phase(self) -> JobState:
        return self.recovery.state

    @property
    def generation(self) -> int:
        return self.recovery.generation

    @property
    def restarts(self) -> int:
        return self.recovery.policy.restarts

    # -- carrying out recovery's commands ------------------------------------------------------

    def _facts(self, verdict: Verdict | None) -> Facts:
        return Facts(nodes=self.nodes, heard=self.heard, verdict=verdict,
                     enough_nodes=self.registry.enough(self.settings.expected_nodes),
                     progress=Progress(**self.report.progress_fields(self.judge),
                                       progressed_for=progressed_for(self.judge)),
                     launcher_gone=self.relauncher.gone())

    def _execute(self, commands: list[Command], now: float) -> None:
        """Carry out recovery's commands in order; what an execution answers goes back to it at once. The record
        is written first (write-ahead: a successor finds the stop or relaunch the commands act on even if this
        process dies before their events or messages are out; docs/multinode.md, "A crash mid-recovery")."""
        if commands:
            self.status_files.kept.record(self.recovery, partial(runs, self))
        queue = collections.deque(commands)
        while queue:
            cmd = queue.popleft()
            if isinstance(cmd, Emit):
                self.events.emit(cmd.kind, cmd.generation, **cmd.fields)
                if cmd.kind is EventKind.WARNING:
                    log.warning("%s", cmd.fields.get("message", ""))
            elif isinstance(cmd, Capture):
                self.broadcast(CaptureEvidence(f"incident-{cmd.incident}", cmd.verdict.reason,
                                               verdict_document(self.job, self.generation, cmd.verdict, cmd.incident)))
            elif isinstance(cmd, RecordIncident):
                self.last_verdict = self.recovery.pending  # the incident's final verdict
                write_incident_record(self.run_dir, self.job, cmd.incident, cmd.reports, self.joblog,
                                      self.recovery.pending, self.health)
            elif isinstance(cmd, StopJob):
                final = cmd.verdict
                doc = (NO_VERDICT if final is None or cmd.incident is None
                       else verdict_document(self.job, self.generation, final, cmd.incident))
                self.broadcast(Stop(cmd.reason, cmd.timeout, doc))
            elif isinstance(cmd, Drain):
                self.relauncher.drain(cmd.node, cmd.verdict, self.events)
            elif isinstance(cmd, ChooseCheckpoint):
                choice = relaunch_checkpoint(self.pick_checkpoint, self.nodes, cmd.avoid)
                queue.extendleft(reversed(self.recovery.checkpoint_chosen(choice.path, now, self.heard,
                                                                          choice.passed_over)))
            elif isinstance(cmd, Relaunch):
                self._new_generation(cmd.generation, now)
                self.latecomers.relaunched(cmd.generation, self.nodes, self.relauncher.replaces_agents)
                self.relauncher.begin(cmd.generation, cmd.checkpoint, cmd.verdict)
                self._relaunching = True
            elif isinstance(cmd, Finish):
                self._finish(cmd, now)

    def _relaunch_done(self, now: float) -> None:
        """While a relaunch is under way: its answer, once it has one."""
        outcome = self.relauncher.poll(now)
        if outcome is None:
            return
        self._relaunching = False
        if isinstance(outcome, Relaunched) and outcome.fresh_agents:
            self.nodes.clear()  # the new step's agents join afresh (new sessions)
        self._execute(self.recovery.relaunched(outcome, now), now)

    def _new_generation(self, generation: int, now: float) -> None:
        """What the coordinator keeps per generation starts afresh: the judge, what was reported."""
        if self.judge_factory:
            self.judge = self._new_judge(generation, now)
        self.report = JobReport(self.events, self.clock, self.wall)
        for v in self.nodes.values():
            v.launcher_exit = None
            v.recorder.clear()  # the new ranks start their own servers

    def _new_judge(self, generation: int, now: float) -> JudgeLike | None:
        """The judge of ``generation`` (None without a factory). The launchers' exits stay in the
        node views, kept once: the judge reads them there."""
        if self.judge_factory is None:
            return None
        judge = self.judge_factory(generation, now)
        judge.launchers = self.registry
        return judge

    def interrupt(self, signum: int, now: float) -> None:
        """SIGTERM/SIGINT to the job's wrapper: stop every node (one deadline), then shut down.
        Once is enough: a second signal, or one after the end, changes nothing."""
        self._execute(self.recovery.interrupt(signum, now, self.heard), now)

    @property
    def interrupted(self) -> bool:
        return self.recovery.interrupted

    def _finish(self, cmd: Finish, now: float) -> None:
        self.exit_code = cmd.code
        self.broadcast(Shutdown(cmd.reason, cmd.code))
        fields: dict[str, Any] = {"exit_code": cmd.code, "restarts": self.recovery.policy.restarts,
                                  "state": cmd.state.value, "incidents": self.recovery.incident,
                                  "reason": cmd.reason, **self.report.progress_fields(self.judge),
                                  "dropped_lines": sum(v.reported_dropped_lines for v in self.nodes.values()),
                                  "watchdog_io": self.health.summary()}
        closing = {"time": iso_utc(self.wall()), "event": EventKind.JOB_FINISHED.value,
                   "generation": self.generation, **fields}
        try:
            from neuron_watch.outputs.goodput import compute_goodput

            fields["goodput"] = compute_goodput([*self.events.history, closing])
        except Exception as exc:  # figures are a report, never a reason to lose the final event
            log.warning("goodput figures failed: %s", exc)
        self.events.emit(EventKind.JOB_FINISHED, self.generation, **fields)
        self.write_status(now)

    # -- reporting ---------------------------------------------------------------------------

    def summary(self, now: float) -> dict[str, Any]:
        """Per node: state, last heard, sequence gaps and drops; plus refused-frame counters."""
        nodes = {}
        for name, v in sorted(self.nodes.items()):
            st = self.tracker.stats(name)
            nodes[name] = v.summary(now, st.to_dict() if st else {})
        return {"job": self.job, "endpoint": self.endpoint, "generation": self.generation, "phase": self.phase.value,
                "restarts": self.restarts, "nodes": nodes, **self.counters.summary(),
                "paused": list(self.pacing.pauses),
                "verdict": self.last_verdict.to_dict() if self.last_verdict else None,
                "watchdog_io": self.health.summary()}

    def write_status(self, now: float) -> None:
        """``status.json``: the job's state and every rank's, for ``neuron-watch status`` (atomic);
        a big job's summarised, kept by changes (:mod:`.statusbook`), every rank's row only when
        ``ranks.json`` is due or a listener takes the documents."""
        judge = self.judge
        self._status_at = now
        if judge is not None and len(getattr(judge, "ranks", ())) > FULL_RANKS and hasattr(judge, "take_touched"):
            self.status_files.write_summary(self.status_summary(now), now, lambda: self.status_doc(now))
        else:
            self.status_files.write(self.status_doc(now), now)

    def status_doc(self, now: float) -> dict[str, Any]:
        """The job's state and every rank's (the ``status.json`` document, :mod:`.statusdoc`)."""
        ranks: list[dict[str, Any]] = list(self.judge.rank_summaries(now)) if self.judge is not None else []
        return status_document(**self._status_head_fields(now), live=self.recovery.live, ranks=ranks)

    def status_summary(self, now: float) -> dict[str, Any]:
        """The job's state and its ranks summarised (per state, per node, the outliers), kept by
        changes: what :func:`~neuron_watch.outputs.status.summarise` makes of :meth:`status_doc`."""
        judge: Any = self.judge
        self.status_book.refresh(judge, now)
        return {**status_head(**self._status_head_fields(now)),
                **self.status_book.summary(now, self.nodes, judge.unobserved, self.recovery.live, self.phase.value)}

    def _status_head_fields(self, now: float) -> dict[str, Any]:
        timeout, kind = self.judge.timeout_in_force(now) if self.judge is not None else (None, None)
        stall = self.judge.first_collective_stall(now) if self.judge is not None else None
        return {"job_id": self.job, "generation": self.generation, "restarts": self.restarts,
                "state": self.phase.value, "label": self.last_verdict.label.value if self.last_verdict else None,
                "wall": self.wall(), "now": now, "hang_timeout": timeout, "hang_timeout_kind": kind,
                "first_collective": None if stall is None else first_collective_fields(stall),
                # last_progress (ISO time of its line), last_step
                "progress": self.report.progress_fields(self.judge), "nodes": self.nodes,
                "watchdog_io": self.health.summary()}

    def write_summary(self, now: float) -> None:
        self.health.write_json(os.path.join(self.run_dir, "coordinator.json"), self.summary(now))

    def serve(self, stop: Callable[[], bool], interval: float = 0.05, waker: Waker | None = None,
              watch: Sequence[Waitable] = ()) -> int:
        """Run ``poll``/``tick`` until ``stop()`` or until the job is over; returns the exit code
        (:func:`serve_until`)."""
        return serve_until(self, stop, interval, waker, watch)

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
            self.events.emit(EventKind.COORDINATOR_STOPPED, self.generation, lines=self.counters.lines,
                             refused=self.counters.bad_total())
        self.wire.close()
        self.joblog.close()
        self.events.close()
        self.heap.release()


def runs(coord: Coordinator, generation: int) -> bool:
    """Whether ``generation`` is known to run (:func:`~neuron_watch.recovery.coordcrash.launch_confirmed`):
    until then a relaunch is still recorded as under way, for a successor to finish."""
    return launch_confirmed(generation, launched=coord.relauncher.running_generation(),
                            nodes_at=tuple(v.generation for v in coord.nodes.values()),
                            all_back=coord.registry.enough(coord.settings.expected_nodes))


def resume_owed(coord: Coordinator, now: float) -> None:
    """Started again after a predecessor died mid-recovery (:mod:`.memory`): once what runs is
    known, finish its recovery (:func:`neuron_watch.recovery.coordcrash.resume`), saying so."""
    kept = coord.status_files.kept
    if kept.owed is None:
        return
    decided = kept.resumption(now, launched=coord.relauncher.running_generation(),
                              nodes_at=tuple(v.generation for v in coord.nodes.values()),
                              all_back=coord.registry.enough(coord.settings.expected_nodes))
    if decided is None:
        return
    resumption, verdict = decided
    coord.events.emit(EventKind.WARNING, coord.generation, kind="coordinator_resumed",
                      action=resumption.action.value, message=resumption.message)
    log.warning("%s", resumption.message)
    if resumption.action is ResumeAction.STOP_AND_RESTART:
        coord._execute(resume_stop(coord.recovery, verdict, now, coord.heard), now)
    elif resumption.action is ResumeAction.RELAUNCH:
        coord._execute(resume_relaunch(coord.recovery, verdict, now, coord.heard), now)


def serve_until(coord: Coordinator, stop: Callable[[], bool], interval: float = 0.05,
                waker: Waker | None = None, watch: Sequence[Waitable] = ()) -> int:
    """Run ``coord``'s ``poll``/``tick`` until ``stop()`` or until the job is over; returns the exit
    code. ``waker``: each turn sleeps on it until the next thing due (:func:`wait_turn`: the socket,
    ``watch``, the signals behind ``stop``), not ``interval``."""
    last_summary = -1e18
    while not stop() and coord.exit_code is None:
        if waker is None:
            coord.poll(interval)
        else:
            wait_turn(coord, waker, last_summary + 1.0, watch=watch)
        now = coord.clock()
        coord.tick(now)
        if now - last_summary >= 1.0:
            last_summary = now
            coord.write_summary(now)
    if coord.exit_code is not None:
        coord.linger_for_nodes(NODES_EXIT_GRACE, interval)
    coord.write_summary(coord.clock())
    return coord.exit_code or 0


def turn_heap_freeze(coord: Coordinator, now: float) -> None:
    """Once a second, whether the judge now holds every rank the nodes announced (the heap freeze's turn,
    :class:`~.heapfreeze.HeapFreeze`): never in the turn that wrote status.json, so a freeze's full
    collection and a new judge's first status document are two turns, not one long one."""
    if coord._status_at != now and coord.heap.due(now):
        held = len(getattr(coord.judge, "ranks", ()))
        coord.heap.turn(coord.judge, held, sum(len(v.ranks) for v in coord.nodes.values()))


def next_due(coord: Coordinator, now: float) -> float | None:
    """When ``coord``'s :meth:`~Coordinator.tick` next has something to do by time (monotonic): the
    next verdict, the next acks; :data:`~neuron_watch.recovery.turns.BUSY_WAIT` from now while
    recovery moves (a capture, a stop, a relaunch, a signal's stop: their steps and deadlines are
    checked as often as they always were). What the nodes send wakes the loop on the socket.
    None: nothing by time (the loop's ceiling still bounds its wait). Now while messages taken off the
    socket wait to be handled (the socket does not wake the loop for them)."""
    if coord.wire.waiting:
        return now
    recovery = coord.recovery
    if coord._relaunching or recovery.interrupted or recovery.state not in (JobState.STARTING, JobState.RUNNING):
        return now + BUSY_WAIT
    dues = [coord.wire.next_ack()]
    if coord.judge is not None and coord.registry.enough(coord.settings.expected_nodes):
        dues.append(coord.pacing.next_due())
    return earliest(dues)


def wait_turn(coord: Coordinator, waker: Waker, *dues: float | None, watch: Sequence[Waitable] = ()) -> None:
    """Sleep on ``waker`` until something arrives on ``coord``'s socket or on ``watch``, a signal
    comes, or the next thing is due (:func:`next_due`, ``dues``); then take in what arrived."""
    now = coord.clock()
    # (messages taken off the socket and not yet handled: no wait, the signals' pipe read all the same)
    waker.wait(0.0 if coord.wire.waiting else wait_for(now, [next_due(coord, now), *dues]),
               [coord.wire.sock.sock, *watch])
    coord.poll(0)


__all__ = ["PAUSE_JUMP", "Coordinator", "CoordinatorSettings", "Label", "NodeState", "NodeView", "Phase", "Relauncher",
           "coordinator_settings", "next_due", "wait_turn"]
