"""``neuron-watch [WATCH OPTIONS] srun [SRUN ARGS] CMD ...``: the batch side of a watched Slurm job.

Run from an sbatch script on the batch host. It hosts the job's
:class:`~neuron_watch.job.coordinator.Coordinator` (bound on ``0.0.0.0``, reached by the nodes at this
host's address) and runs each generation as one srun step::

    srun [SRUN ARGS] [--exclude=<bad nodes>] <python> -m neuron_watch.cli --coordinator ADDR \\
        --run-dir D --job-id J [WATCH OPTIONS] agent --generation G -- CMD ...

so every task runs a :mod:`neuron_watch.commands.srun_agent` around CMD (one task per node, CMD a per-node
script that runs torchrun). The job secret is made here and reaches the tasks only through the
step's environment (``NEURON_WATCH_SECRET``; never printed or logged).

Recovery is the coordinator's (judge, capture, stop, restart policy). A restart is a new srun
step in the same allocation from the checkpoint the coordinator chose. A node with a hardware
verdict (``drain_and_restart``) is drained (:class:`~neuron_watch.slurm.drain.Drainer`, caps respected)
and excluded from the next step while enough nodes remain; otherwise the job is requeued held
(``scontrol requeuehold``), given ``ExcNodeList`` and ``StartTime=now``, released, and this process
exits. Under HyperPod with ``--auto-resume=1`` the evidence is captured and the restart is left to HyperPod.
``SLURM_RESTART_COUNT`` counts against ``--max-restarts``.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from neuron_watch import __version__
from neuron_watch.config import OPTIONS, WatchConfig
from neuron_watch.errors import ExitCode, PlatformError, UsageError
from neuron_watch.events import EventKind, Verdict
from neuron_watch.job.coordinator import Coordinator, wait_turn
from neuron_watch.node.procs import MARKER_ENV, become_subreaper, lifeline, stop_everything
from neuron_watch.outputs.console import say, status_line_for
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.recovery.commands import Relaunched, RelaunchEnded, RelaunchOutcome
from neuron_watch.recovery.policy import RestartPolicy
from neuron_watch.redact import mask_value
from neuron_watch.runtime import (
    SignalLatch,
    build_coordinator,
    checkpoint_chooser,
    close_coordinator,
    knowledge_base,
    resolve_job_id,
    resolve_run_dir,
)
from neuron_watch.slurm import hyperpod, slurmtext, srunplan
from neuron_watch.slurm.drain import DrainCaps, Drainer
from neuron_watch.wire.protocol import Shutdown
from neuron_watch.wire.waker import Waker

log = logging.getLogger("neuron_watch")

#: How long after the coordinator's shutdown the step may take to end by itself.
STEP_END_GRACE = 10.0
#: Watch options the batch side sets itself for the agents (the rest are passed on as given).
_OWN = {"coordinator", "run_dir", "job_id", "secret_file", "dry_run", "mqtt", "drain_state", "drain_per_job",
        "drain_per_hour", "progress"}


def agent_options(config: WatchConfig) -> list[str]:
    """The watch options the agents need, as flags (only those that differ from the defaults)."""
    out: list[str] = []
    for opt in OPTIONS:
        if opt.dest in _OWN:
            continue
        value = getattr(config, opt.dest)
        if value == opt.default or value is None:
            continue
        out.extend([opt.flag] if opt.is_flag else [opt.flag, str(value)])
    return out


def advertised_host(env: dict[str, str] | os._Environ[str]) -> str:
    """This host's address as the nodes see it: SLURM_LAUNCH_NODE_IPADDR, else the resolved hostname."""
    if env.get("SLURM_LAUNCH_NODE_IPADDR"):
        return env["SLURM_LAUNCH_NODE_IPADDR"]
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


class SrunJob:
    """One watched Slurm job seen from the batch host: the coordinator and the current srun step."""

    def __init__(self, config: WatchConfig, srun_args: list[str], cmd: list[str], env: dict[str, str]) -> None:
        self.cfg = config
        self.env = env
        self.slurm_job = env.get("SLURM_JOB_ID", "")
        if not self.slurm_job:
            raise UsageError("`neuron-watch srun` runs inside a Slurm allocation (no SLURM_JOB_ID here)",
                             "call it from an sbatch script, or inside `salloc`")
        self.job_id = resolve_job_id(config, env)
        self.run_dir = resolve_run_dir(config, self.job_id)
        self.srun_args, self.user_exclude = srunplan.without_exclude(srun_args)
        self.cmd = cmd
        self.allocation = slurmtext.expand_nodelist(env.get("SLURM_JOB_NODELIST", env.get("SLURM_NODELIST", "")))
        self.needed = srunplan.nodes_wanted(self.srun_args, len(self.allocation))
        #: each task is a rank (``srun --ntasks-per-node 8 python train.py``): one agent per task,
        #: its rank SLURM_PROCID; else one agent per node around a launcher (torchrun inside)
        tasks = srunplan.tasks_wanted(self.srun_args, self.needed)
        self.task_ranks = srunplan.tasks_are_ranks(cmd, tasks, self.needed)
        self.agents = tasks if self.task_ranks else self.needed
        self.restart_count = int(env.get("SLURM_RESTART_COUNT", "0") or "0")
        self.marker = f"{self.job_id}-batch-{secrets.token_hex(4)}"
        self.secret = secrets.token_hex(32)
        self.bad: list[str] = []  # nodes this job keeps out of its steps
        self.drainer = Drainer(config.drain_state, DrainCaps(per_job=config.drain_per_job,
                                                             per_hour=config.drain_per_hour), env=env)
        owner = hyperpod.restart_owner(hyperpod.detect(), hyperpod.auto_resume_requested(srun_args, env))
        self.owner = owner
        self.step: subprocess.Popen[bytes] | None = None
        self.step_log: Path = Path(self.run_dir) / "steps"
        self.step_started: dict[int, float] = {}
        self.coord: Coordinator | None = None
        self.address = ""
        #: a relaunch under way: (generation, checkpoint, the thread ending the old step, its result)
        self._relaunch: tuple[int, str, threading.Thread, dict[str, Any]] | None = None

    # -- the steps -------------------------------------------------------------------------------

    def step_argv(self, generation: int) -> list[str]:
        exclude = [*self.user_exclude, *([slurmtext.join_nodelist(self.bad)] if self.bad else [])]
        return ["srun", *self.srun_args, *([f"--exclude={','.join(exclude)}"] if exclude else []),
                sys.executable, "-m", "neuron_watch.cli", "--coordinator", self.address, "--run-dir", self.run_dir,
                "--job-id", self.job_id, *agent_options(self.cfg), "agent", "--generation", str(generation),
                *(["--task-is-rank"] if self.task_ranks else []), "--", *self.cmd]

    def start_step(self, generation: int, checkpoint: str) -> None:
        """Start generation ``generation`` as a new srun step (our child, its own process group)."""
        argv = self.step_argv(generation)
        env = dict(self.env)
        env.update({"NEURON_WATCH_SECRET": self.secret, "NEURON_WATCH_CHECKPOINT": checkpoint,
                    "NEURON_WATCH_RESTART_COUNT": str(generation), MARKER_ENV: self.marker})
        self.step_log.mkdir(parents=True, exist_ok=True)
        with open(self.step_log / f"gen-{generation}.log", "ab") as out:
            self.step = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=lifeline())  # srun cancels the step on SIGTERM
        self.step_started[generation] = time.monotonic()
        assert self.coord is not None
        self.coord.events.emit(EventKind.SRUN_STEP, generation, argv=argv, pid=self.step.pid,
                               exclude=list(self.bad), checkpoint=checkpoint or None)

    def end_step(self, grace: float) -> dict[str, Any] | None:
        """Let the step end by itself within ``grace`` (its agents were shut down), then SIGTERM,
        deadline, SIGKILL, reap: srun and every local process carrying our marker. Blocks; returns
        the fields of its ``srun_step_ended`` event (None: no step)."""
        step = self.step
        if step is None:
            return None
        deadline = time.monotonic() + grace
        while step.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        result = stop_everything(self.marker, step, self.cfg.stop_timeout)
        self.step = None
        return {"exit_code": step.returncode, "rung": result.rung, "survivors": result.survivors}

    def _end_step_now(self, grace: float) -> None:
        """:meth:`end_step` on the loop's thread (the job is over), its event emitted."""
        ended = self.end_step(grace)
        if ended is not None and self.coord is not None:
            self.coord.events.emit(EventKind.SRUN_STEP_ENDED, self.coord.generation, **ended)

    # -- the coordinator's relauncher ------------------------------------------------------------

    replaces_agents = True  # a generation is a new srun step: new agents join

    def begin(self, generation: int, checkpoint: str, verdict: Verdict) -> None:
        """The old step's ranks are stopped: tell its agents to shut down and end the step in a
        thread (its grace and stop deadline), while the coordinator's loop keeps serving; then
        :meth:`poll` starts the next step (or requeues) on the loop's thread."""
        coord = self.coord
        assert coord is not None
        if self.owner.leave_to_hyperpod:
            # The step fails (its tasks exit 1): the restart is HyperPod's, not ours.
            coord.broadcast(Shutdown("restart left to HyperPod auto-resume", int(ExitCode.JOB_FAILED)))
        else:
            coord.broadcast(Shutdown("generation over: a new srun step follows", 0))
        ending: dict[str, Any] = {}

        def work() -> None:
            try:
                ending["ended"] = self.end_step(STEP_END_GRACE)
            except Exception as exc:  # said at the poll; the relaunch must not wait forever
                log.exception("ending the srun step failed")
                ending["error"] = str(exc)

        thread = threading.Thread(target=work, name="neuron-watch-end-step", daemon=True)
        thread.start()
        self._relaunch = (generation, checkpoint, thread, ending)

    def poll(self, now: float) -> RelaunchOutcome | None:
        """Once the old step has ended: start the next one in the same allocation (bad nodes
        excluded), or requeue the job, or end it (HyperPod's, too few nodes)."""
        if self._relaunch is None or self._relaunch[2].is_alive():
            return None
        generation, checkpoint, _thread, ending = self._relaunch
        self._relaunch = None
        coord = self.coord
        assert coord is not None
        if ending.get("ended"):
            coord.events.emit(EventKind.SRUN_STEP_ENDED, generation, **ending["ended"])
        if "error" in ending:
            return RelaunchEnded(int(ExitCode.JOB_FAILED), f"ending the srun step failed: {ending['error']}")
        if self.owner.leave_to_hyperpod:
            coord.events.emit(EventKind.LEFT_TO_HYPERPOD, generation, reason=self.owner.why)
            return RelaunchEnded(int(ExitCode.JOB_FAILED), "restart left to HyperPod auto-resume")
        plan = srunplan.plan_restart(self.allocation, self.bad, self.needed, self._requeue_allowed())
        coord.events.emit(EventKind.RESTART_PLAN, generation, how=plan.how, exclude=list(plan.exclude),
                          usable=list(plan.usable), reason=plan.why)
        if plan.how == "exclude":
            self.start_step(generation, checkpoint)
            return Relaunched(fresh_agents=True)
        if plan.how == "requeue":
            return RelaunchEnded(*self._requeue(plan, generation))
        return RelaunchEnded(int(ExitCode.NOT_RESTARTABLE), plan.why)

    def drain(self, node: str, verdict: Verdict, events: EventLog) -> None:
        """Drain the Slurm node behind a faulty agent (caps respected); keep it out of the next steps."""
        slurm = srunplan.slurm_node(node)
        mine = [e for e in verdict.evidence if e.key == verdict.culprit] or list(verdict.evidence)
        evidence = srunplan.short_evidence(mine[0].key.rank, mine[0].text) if mine else verdict.reason
        outcome = self.drainer.drain(slurm, self.slurm_job, verdict.label.value, evidence)
        events.emit(EventKind.DRAIN, self.coord.generation if self.coord else 0, node=slurm,
                    drained=outcome.drained, reason=outcome.reason, message=outcome.message)
        if slurm not in self.bad:
            self.bad.append(slurm)

    def gone(self) -> int | None:
        """The step's exit code when it ended without being told to (None while it runs or is being ended)."""
        step = self.step
        if step is None or self._relaunch is not None:
            return None
        return step.poll()

    def _requeue_allowed(self) -> bool:
        try:
            r = self.drainer._run("show", "job", self.slurm_job)
        except PlatformError:
            return False
        jobs = slurmtext.parse_jobs(r.stdout)
        return bool(jobs) and jobs[0].requeue

    def _requeue(self, plan: srunplan.RestartPlan, generation: int) -> tuple[int, str]:
        assert self.coord is not None
        excluded = slurmtext.join_nodelist(plan.exclude)
        # Written before the requeue: Slurm ends this batch step right after it (SIGTERM, KillWait, SIGKILL).
        self.coord.events.emit(EventKind.REQUEUE, generation, exclude=list(plan.exclude), reason=plan.why)
        # Requeued held: a plain requeue leaves the job pending, and slurmctld may start it again
        # (on the node to exclude) before the exclusion below is set; held, it waits for our release.
        r = self.drainer._run("requeuehold", self.slurm_job)
        if r.returncode != 0:
            msg = f"`scontrol requeuehold {self.slurm_job}` exited {r.returncode}: {r.stderr.strip()}"
            self.coord.events.emit(EventKind.REQUEUE_FAILED, generation, error=msg)
            return int(ExitCode.NOT_RESTARTABLE), msg
        # A running job's ExcNodeList cannot be changed; the requeued (pending) one's can. A drained
        # node is not allocated anyway: the exclusion also covers a drain the caps refused.
        # Slurm is SIGTERMing this batch step right now: these calls ignore SIGTERM (an ignored
        # signal stays ignored across exec) and are done long before KillWait's SIGKILL. The release
        # comes last and is tried whatever came before: a job left held never runs again.
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            for args in (("update", f"jobid={self.slurm_job}", f"ExcNodeList={excluded}"),
                         ("update", f"jobid={self.slurm_job}", "StartTime=now"),
                         ("release", self.slurm_job)):
                r = self.drainer._run(*args)
                if r.returncode != 0:
                    then = (f"; the job is held: release it with `scontrol release {self.slurm_job}`"
                            if args[0] == "release" else "")
                    self.coord.events.emit(
                        EventKind.REQUEUE_UPDATE_FAILED, generation,
                        error=f"`scontrol {' '.join(args)}` exited {r.returncode}: {r.stderr.strip()}{then}")
        finally:
            signal.signal(signal.SIGTERM, previous)
        return int(ExitCode.JOB_FAILED), f"requeued without {excluded}"

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> int:
        os.makedirs(self.run_dir, exist_ok=True)
        kb = knowledge_base(self.cfg)  # a bad table or regex fails here, before anything starts
        port = int(self.cfg.coordinator.rsplit(":", 1)[1]) if self.cfg.coordinator else 0
        policy = RestartPolicy(max_restarts=self.cfg.max_restarts, can_exclude_nodes=True)
        # Requeues of this job so far count against the budget (they were restarts too).
        policy.restarts = policy.consecutive_failures = self.restart_count
        # A requeued job goes on counting generations (rank logs land in new gen-<G> dirs; a fault
        # injected "in generation 0 only" stays in the first run).
        self.coord = coord = build_coordinator(
            self.cfg, kb, bind=f"0.0.0.0:{port}", secret=self.secret.encode(), run_dir=self.run_dir, job_id=self.job_id,
            nodes=self.agents, status_line=status_line_for(self.cfg), relauncher=self,
            generation=self.restart_count, policy=policy)
        self.address = f"{advertised_host(self.env)}:{coord.endpoint.rsplit(':', 1)[1]}"
        try:
            remembered = [n for n in self.drainer.excluded_nodes() if n in self.allocation]
        except PlatformError as exc:
            remembered = []
            log.warning("remembered drains not read: %s", exc)
        self.bad.extend(n for n in remembered if n not in self.bad)
        checkpoint = checkpoint_chooser(self.cfg)({})
        coord.events.emit(EventKind.JOB_STARTED, self.restart_count, job_id=self.job_id,
                          node=socket.gethostname().split(".")[0], version=__version__,
                          command=mask_value(["srun", *self.srun_args, *self.cmd]),
                          checkpoint=checkpoint or None, config=self.cfg.redacted(), nodes=self.needed,
                          agents=self.agents, tasks_are_ranks=self.task_ranks,
                          slurm_job=self.slurm_job, slurm_restart_count=self.restart_count,
                          allocation=self.allocation, restart_owner=self.owner.owner)
        say(f"coordinator on {self.address}; each generation's srun output: {self.step_log}/gen-<G>.log")
        plan = srunplan.plan_restart(self.allocation, self.bad, self.needed, False)
        if plan.how != "exclude":
            coord.close()
            raise UsageError(plan.why, "resume the nodes (`scontrol update nodename=N state=resume`) or "
                                       "allocate more nodes")
        become_subreaper()
        signals = SignalLatch()
        old = signals.install()
        try:
            self.start_step(self.restart_count, checkpoint)
            return self._loop(coord, signals)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self._end_step_now(0.0 if signals.received else STEP_END_GRACE)
            close_coordinator(coord, kb)

    def _loop(self, coord: Coordinator, signals: SignalLatch) -> int:
        """Serve the coordinator until the job is over. Recovery (:mod:`neuron_watch.recovery.machine`)
        decides everything, this step included: a step that ended by itself (:meth:`gone`), a
        signal (stop every node; the step gone means nobody is left to answer)."""
        with Waker() as waker:  # a turn when a node speaks, a signal or the step's SIGCHLD comes, or a verdict is due
            while True:
                wait_turn(coord, waker)
                now = time.monotonic()
                if signals.received is not None and not coord.interrupted:
                    log.info("received %s: stopping the job on every node", signal.Signals(signals.received).name)
                    coord.interrupt(signals.received, now)
                coord.tick(now)
                if coord.exit_code is not None:
                    self._end_step_now(STEP_END_GRACE)
                    return coord.exit_code


def add_arguments(parser: argparse.ArgumentParser) -> None:  # pragma: no cover - verbatim command
    """srun's arguments are passed through verbatim (see cli.SUBCOMMANDS)."""


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    srun_args, cmd = srunplan.split_srun_args(list(args.launcher_args))
    job = SrunJob(config, srun_args, cmd, dict(os.environ))
    if config.dry_run:
        job.address = "BATCH-HOST:PORT"
        print("command of generation 0:")
        print("  " + " ".join(job.step_argv(0)))
        return 0
    code = job.run()
    say(f"exit code {code}; events in {os.path.join(job.run_dir, 'events.jsonl')}")
    return code
