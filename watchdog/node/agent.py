"""The node agent: runs this node's share of the job and reports everything to the coordinator.

One per node (every ``neuron-watch torchrun``). It starts the launcher (torchrun) as a child in a
process group it owns, tails every rank's output, samples the process table for compilers, and
streams it all over its :class:`~neuron_watch.node.agent_link.AgentLink`. It decides nothing about the
job: it carries out the coordinator's commands (capture evidence, stop, launch generation G with
checkpoint C, shut down) through the :class:`~neuron_watch.node.link_commands.NodeControl` methods below.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.errors import LauncherArgsError
from neuron_watch.events import EventKind, EvidenceReport, LogLine, NodeIdentity, NodeStatus, RankKey, StopReport
from neuron_watch.iofaults import IOHealth
from neuron_watch.launchers.base import Launcher, LaunchInfo
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.node.generation import Generations, NodeCheckpoints, NodeContext, NodeGeneration
from neuron_watch.node.incident import Incidents
from neuron_watch.node.link_commands import JobRefused
from neuron_watch.node.observations import EarlyObservations, LinkObservations, ObservationSink
from neuron_watch.node.observer import Observer
from neuron_watch.node.procs import reap_children
from neuron_watch.node.stopper import Stopper
from neuron_watch.node.tail import UNATTRIBUTED
from neuron_watch.outputs.console import say
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.outputs.storage import Storage
from neuron_watch.recovery.turns import BUSY_WAIT, earliest
from neuron_watch.wire.protocol import NO_VERDICT, batch_age_at

log = logging.getLogger("neuron_watch")


class NodeAgent:
    """This node's part of the job. Call :meth:`tick` from one loop; it never blocks for long.

    Its parts: :class:`~neuron_watch.node.generation.Generations` (launch, shape, the current
    generation), :class:`~neuron_watch.node.observer.Observer` (what the generation shows, as one
    typed stream), :class:`~neuron_watch.node.incident.Incidents` (evidence and uploads) and
    :class:`~neuron_watch.node.stopper.Stopper` (the background stop); the agent keeps the link and
    the coordinator's commands.
    """

    def __init__(
        self,
        config: WatchConfig,
        launcher: Launcher,
        link: AgentLink | None,
        *,
        job_id: str,
        node: str,
        run_dir: str,
        rank_env: dict[str, str],
        storage: Storage | None = None,
        echo: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        health: IOHealth | None = None,
        place: int = -1,
        kb: KnowledgeBase | None = None,
    ) -> None:
        #: faults of this node's own files (run dir full or read-only, checkpoint dir unreadable):
        #: counted and reported, never a reason to stop the job
        self.ctx = NodeContext(config, launcher, job_id, node, place, run_dir, rank_env, health or IOHealth(node),
                               echo, clock, wall)
        launcher.tag = node  # per-node file names inside a shared run dir
        self.kb = kb  # the job's table, the coordinator's too (None: the link sends lines unclassified)
        self._link = link
        self._early = EarlyObservations()  # what was seen before the link existed, replayed at attach
        self._stream: ObservationSink = self._early if link is None else LinkObservations(link)
        self.checkpoints = NodeCheckpoints(self.ctx)
        self.generations = Generations(self.ctx, self.checkpoints)
        self.observer = Observer(self.ctx, self.generations, self.checkpoints, lambda: self._stream)
        self.incidents = Incidents(self.ctx, storage, kb)
        self.stopper = Stopper(self.ctx, self.generations, self.observer, self.incidents)

    # -- what the entry points read and set ----------------------------------------------------

    @property
    def cfg(self) -> WatchConfig:
        return self.ctx.cfg

    @property
    def launcher(self) -> Launcher:
        return self.ctx.launcher

    @property
    def node(self) -> str:
        return self.ctx.node

    @property
    def job_id(self) -> str:
        return self.ctx.job_id

    @job_id.setter
    def job_id(self, value: str) -> None:
        self.ctx.job_id = value

    @property
    def gen(self) -> NodeGeneration | None:
        return self.generations.gen

    @property
    def info(self) -> LaunchInfo | None:
        return self.generations.info

    @property
    def refused(self) -> LauncherArgsError | None:
        return self.generations.refused

    @refused.setter
    def refused(self, value: LauncherArgsError | None) -> None:
        self.generations.refused = value

    @property
    def group_rank(self) -> int | None:
        return self.observer.group_rank

    @property
    def launcher_ended(self) -> bool:
        """This generation's launcher has exited (before the link exists too)."""
        gen = self.gen
        return gen is not None and gen.exit_code is not None

    @property
    def link(self) -> AgentLink:
        if self._link is None:
            raise RuntimeError("the agent has no coordinator link yet (attach() it first)")
        return self._link

    def liveness_plan(self) -> str:
        return self.generations.liveness_plan()

    def identify(self, node: NodeIdentity) -> None:
        """This node's place in the job, once the job's shape tells it, and its name from then on
        (files of generation 0 opened before keep the name they were opened with)."""
        self.ctx.node, self.ctx.place = node.name, node.place
        self.launcher.tag = node.name
        self.ctx.health.node = node.name

    def attach(self, link: AgentLink) -> None:
        """Connect to the coordinator once it is known (the job's shape decides where it is)."""
        self._link = link
        self._stream = LinkObservations(link)  # what was seen before waits in the early record until introduce
        # Lines are classified here, on this node's CPU, with the coordinator's table (it checks).
        link.set_knowledge_base(self.kb)
        if self.gen is not None:
            link.set_generation(self.gen.number)

    # -- NodeControl (what the coordinator's commands do here) ----------------------------------

    def launch(self, generation: int, checkpoint: str) -> None:
        self.generations.launch(generation, checkpoint, self._stream.progress_lines)
        self.observer.new_generation()
        if self._link is not None:
            self._link.set_generation(generation)
        self.generations.poll_shape()

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        """Capture this node's evidence while its ranks are alive; returns its report for the coordinator.
        Blocks; the loop uses :meth:`begin_capture`.

        ``verdict``: the coordinator's pending verdict; the bundle's ``verdict.json`` and
        ``incident.md`` are completed with the final one when the stop comes (:meth:`stop`).
        """
        poll = self.begin_capture(incident, reason, verdict)
        thread = self.incidents.capture_thread
        if thread is not None:
            thread.join()
        report = poll()
        assert report is not None
        return report

    def begin_capture(self, incident: str, reason: str,
                      verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], EvidenceReport | None]:
        """Start :meth:`capture` in a thread and return its poll (the report once done, else None).

        The capture reads rank logs, copies dumps and waits on py-spy: seconds, bounded by
        ``--evidence-timeout``, that the loop spends reading output, sampling and keeping the link
        alive meanwhile. What touches the streams (the drain before it) happens here, on the loop's thread.
        """
        gen = self.gen
        if gen is None:
            nothing = EvidenceReport(error="nothing running")
            return lambda: nothing
        # Everything the ranks printed so far is in their logs before they are copied (a root-cause
        # line written just before a burst ended must be in the bundle).
        self.observer.drain(final=False, to_eof=True)
        return self.incidents.begin_capture(gen, incident, reason, verdict)

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        """Stop every process of the job on this node, then complete this node's bundles with the final
        ``verdict`` and upload them (bounded). Blocks; the loop uses :meth:`begin_stop`."""
        return self.stopper.stop(deadline, verdict)

    def begin_stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], StopReport | None]:
        """Start :meth:`stop` in a thread and return its poll (see :meth:`Stopper.begin`)."""
        return self.stopper.begin(deadline, verdict)

    def checkpoint(self) -> str:
        """The newest complete checkpoint this node sees ('' if none; see :meth:`NodeCheckpoints.newest_complete`)."""
        return self.checkpoints.newest_complete(self.gen.checkpoint if self.gen is not None else "")

    def stopping(self, why: str) -> None:
        """From now on the launcher's output is its teardown after our stop (or our forwarded signal)."""
        self.stopper.stopping(why)

    def stop_early(self, sig: int, timeout: float) -> None:
        """A signal before the link exists: stop this node's ranks now (its exit is ours, not the job's failure)."""
        self.stopper.stop_early(sig, timeout)

    def leave_on_signal(self, sig: int, timeout: float) -> None:
        """This node's wrapper got ``sig`` (``scancel`` signals every node at once): stop its ranks,
        then tell the coordinator at once (no tick follows) that the node stopped by its own signal
        and leaves. The coordinator then ends the job without waiting out this node's silence and
        the stop's deadline for an answer that would never come."""
        report = self.stopper.stop_early(sig, timeout)
        now, wall = self.ctx.clock(), self.ctx.wall()
        name = signal.Signals(sig).name
        self.link.status(NodeStatus.STOPPED, now, wall, detail=f"stopped by its own {name}: {report.rung}, "
                         f"{report.seconds or 0.0:.1f}s", checkpoint=self.checkpoint(), report=report)
        self.link.status(NodeStatus.EXITED, now, wall, detail=f"ended by its own {name}")
        self.link.send_pending(now)

    def tell_io_fault(self, kind: str, fields: dict[str, Any]) -> None:
        """An :class:`~neuron_watch.iofaults.IOHealth` listener for a node without the coordinator in
        its process: the fault (or recovery) of this node's files reaches the job's merged log."""
        what = "degraded" if kind == "watchdog_degraded" else "recovered"
        now, wall = self.ctx.clock(), self.ctx.wall()
        self._stream.observe(LogLine(RankKey(self.node, UNATTRIBUTED),
                                     f"neuron-watch: watchdog {what} on {self.node}: "
                                     f"{fields.get('path')}: {fields.get('error')}", now, wall,
                                     str(fields.get("path") or ""), 0))

    # -- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        """Launch generation 0 from the newest complete checkpoint (before the link exists)."""
        self.launch(0, self.checkpoint())

    def introduce(self) -> None:
        """Tell the coordinator who we are and that generation 0 runs."""
        now, wall = self.ctx.clock(), self.ctx.wall()
        self.link.hello(os.uname().nodename, os.getpid(), (), now, wall, place=self.ctx.place)
        self.link.status(NodeStatus.LAUNCHED, now, wall, checkpoint=self.gen.checkpoint if self.gen else "")
        self._early.replay(self.link)

    def watch_early(self) -> bool:
        """Before the link exists (the job's shape decides where the coordinator is): read rank and
        launcher output, sample workers and notice the launcher's exit as they happen, stamped with
        their real times and replayed to the coordinator at :meth:`introduce`. Returns whether the
        job's shape is known."""
        known = self.generations.poll_shape()
        self.observer.drain(final=False)
        if self.gen is not None:
            self.observer.check_exit(self.gen, self.ctx.clock(), self.ctx.wall())
        reap_children()
        return known

    def tick(self, reap: bool = True) -> int | None:
        """One turn: forward output, samples and exits; carry out commands. Returns an exit code at shutdown.

        ``reap``: reap exited orphans this turn (the loop asks when SIGCHLD came, and on a slow
        sweep: a look at every child's state is the costliest part of a quiet turn)."""
        now, wall = self.ctx.clock(), self.ctx.wall()
        self.generations.poll_shape()
        link = self.link
        self.observer.read_every = batch_age_at(link.job_nodes, link.settings.batch_age)
        read_before = self.observer.last_read
        self.observer.drain(final=False)
        if self.observer.last_read != read_before:  # the rank files were read: their lines waited there
            link.batches.written_since(read_before)
        gen = self.gen
        stopping = link.stop_running  # the stop's thread owns the launcher's end meanwhile
        if gen is not None and not stopping:
            self.observer.check_exit(gen, now, wall)
            self.observer.maybe_prewarm(gen, now)
        if reap:
            reap_children()
        if not stopping:
            self.incidents.retry_held(now)
        commands = self.link.tick(now, wall)
        try:
            busy = stopping or self.link.capture_running
            return self.link.dispatch(commands, self, now, wall) if commands or busy else None
        except JobRefused as exc:
            self._refused(exc)
            raise

    def next_due(self, now: float) -> float | None:
        """When :meth:`tick` next has something to do by time (monotonic; None: nothing by time):
        the observer's reads and samples, the link's batches, heartbeats and resends, the prewarm,
        a held write's retry; :data:`~neuron_watch.recovery.turns.BUSY_WAIT` from now while a stop
        or a capture runs on its thread, or the job's shape is read in the background (their ends
        have no file descriptor to wake the loop: it turns as often as it always did). What
        arrives (commands, acks, the launcher's output, signals, SIGCHLD) wakes the loop by itself."""
        link = self.link
        if link.stop_running or link.capture_running or self.generations.shape_pending:
            return now + BUSY_WAIT
        dues = [self.observer.next_due(), link.next_due(now), self.incidents.next_retry()]
        gen = self.gen
        cfg = self.ctx.cfg
        if (gen is not None and not gen.prewarmed and gen.exit_code is None and gen.trained_since is not None
                and not cfg.no_prewarm):
            dues.append(gen.trained_since + cfg.prewarm_after)
        return earliest(dues)

    def activity_ago(self, now: float) -> float | None:
        """Seconds since this node's ranks last showed work (see :meth:`Observer.activity_ago`)."""
        return self.observer.activity_ago(now)

    def rebase(self, gap: float) -> None:
        """Our loop was paused ``gap`` seconds: shift the clocks that measure silence (ours and the link's)."""
        self.observer.rebase(gap)
        if self.gen is not None:
            self.gen.started += gap
        if self._link is not None:
            self._link.rebase(gap)

    def _refused(self, exc: JobRefused) -> None:
        """The coordinator refused us (another job's, or ours because another live agent holds this
        node's name or place): say so, and record it in this node's events (the coordinator we reach
        does not take them)."""
        if exc.same_job:
            say(f"refused by the job's coordinator: {exc.reason}; stopping this node's ranks")
        else:
            say(f"the coordinator port {self.link.address} is held by job {exc.coordinator_job}, not this node's job "
                f"{exc.agent_job} (refused): stopping this node's ranks; give this job its own coordinator port")
        run_dir = self.ctx.run_dir
        try:
            events = EventLog(os.path.join(run_dir, "events.jsonl"))
            try:
                events.emit(EventKind.JOB_REFUSED, self.gen.number if self.gen else 0, job=exc.agent_job,
                            other_job=exc.coordinator_job, node=self.node, address=self.link.address,
                            reason=exc.reason if exc.same_job else
                            "refused by the coordinator of another job with the same secret")
            finally:
                events.close()
        except OSError as err:  # the console line above stands; the run dir is not usable
            log.warning("cannot record the refusal in %s: %s", run_dir, err)

    def close(self, timeout: float) -> dict[str, Any] | None:
        """Stop what runs (one deadline), retry failed uploads (bounded), release everything.

        Returns the retry's summary when uploads had failed during the run, else None.
        """
        self.stopper.close(timeout)
        self.incidents.settle()
        gen = self.gen
        running = gen is not None and gen.exit_code is None and self.launcher.poll() is None
        if running:
            self.stopping("neuron-watch is exiting")
        result = self.launcher.stop(timeout)
        self.observer.drain(final=True)
        if running and gen is not None:
            self.stopper.say_stopped(gen, f"{result.rung}, {result.seconds:.1f}s")
        summary = self.incidents.retry_uploads()
        self.launcher.close()
        self.generations.close()
        return summary
