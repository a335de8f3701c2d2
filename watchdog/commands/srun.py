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
and excluded from the next step while enough nodes remain; otherwise the job is requeued with
``ExcNodeList`` (:mod:`neuron_watch.slurm.requeue`) and this process exits. Under HyperPod with
``--auto-resume=1`` the evidence is captured and the restart is left to HyperPod.
``SLURM_RESTART_COUNT`` counts against ``--max-restarts``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuron_watch import __version__
from neuron_watch.config import OPTIONS, WatchConfig
from neuron_watch.errors import ExitCode, PlatformError, UsageError
from neuron_watch.events import EventKind, Verdict
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.job.hosting import HostedCoordinator, HostLink
from neuron_watch.node.procs import MARKER_ENV, become_subreaper, lifeline, stop_everything
from neuron_watch.node.signal_latch import SignalLatch
from neuron_watch.outputs.console import say
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.recovery.commands import Relaunched, RelaunchEnded, RelaunchOutcome
from neuron_watch.recovery.policy import RestartPolicy
from neuron_watch.recovery.turns import BUSY_WAIT, wait_for
from neuron_watch.redact import mask_value
from neuron_watch.runtime import (
    checkpoint_chooser,
    host_name,
    hosted_coordinator,
    knowledge_base,
    resolve_job_id,
    resolve_run_dir,
)
from neuron_watch.slurm import hyperpod, requeue, slurmtext, srunplan
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
    """One watched Slurm job seen from the batch host: what Slurm gave it (read the same way by the
    batch step and by its coordinator's process), and the current srun step (the batch step's)."""

    def __init__(self, config: WatchConfig, srun_args: list[str], cmd: list[str],
                 env: Mapping[str, str]) -> None:
        self.cfg = config
        self.env = dict(env)
        self.slurm_job = env.get("SLURM_JOB_ID", "")
        if not self.slurm_job:
            raise UsageError("`neuron-watch srun` runs inside a Slurm allocation (no SLURM_JOB_ID here)",
                             "call it from an sbatch script, or inside `salloc`")
        self.job_id = resolve_job_id(config, env)
        self.run_dir = resolve_run_dir(config, self.job_id)
        self.srun_args, self.user_exclude = srunplan.without_exclude(srun_args)
        self.given_srun_args = list(srun_args)
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
        self.owner = hyperpod.restart_owner(hyperpod.detect(), hyperpod.auto_resume_requested(srun_args, env))
        self.step: subprocess.Popen[bytes] | None = None
        self.step_log: Path = Path(self.run_dir) / "steps"
        self.host: HostedCoordinator | None = None
        self.address = ""
        #: the step as the coordinator was last told (:func:`step_state`)
        self.told: dict[str, Any] = {}
        #: an end of the step under way: the thread ending it, its result, the request it answers
        self._ending: tuple[threading.Thread, dict[str, Any], str] | None = None

    # -- the steps (the batch step's process) -----------------------------------------------------

    def step_argv(self, generation: int) -> list[str]:
        exclude = [*self.user_exclude, *([slurmtext.join_nodelist(self.bad)] if self.bad else [])]
        return ["srun", *self.srun_args, *([f"--exclude={','.join(exclude)}"] if exclude else []),
                sys.executable, "-m", "neuron_watch.cli", "--coordinator", self.address, "--run-dir", self.run_dir,
                "--job-id", self.job_id, *agent_options(self.cfg), "agent", "--generation", str(generation),
                *(["--task-is-rank"] if self.task_ranks else []), "--", *self.cmd]

    def start_step(self, generation: int, checkpoint: str, answer: str = "") -> None:
        """Start generation ``generation`` as a new srun step (our child, its own process group) and
        tell the coordinator (``answer``: the request this answers)."""
        argv = self.step_argv(generation)
        env = dict(self.env)
        env.update({"NEURON_WATCH_SECRET": self.secret, "NEURON_WATCH_CHECKPOINT": checkpoint,
                    "NEURON_WATCH_RESTART_COUNT": str(generation), MARKER_ENV: self.marker})
        self.step_log.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.step_log / f"gen-{generation}.log", "ab") as out:
                self.step = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=lifeline())  # srun cancels the step on SIGTERM
        except OSError as exc:
            self._tell_step(step_state(generation, answer=answer, error=f"srun did not start: {exc}",
                                       exclude=self.bad, checkpoint=checkpoint))
            return
        self._tell_step(step_state(generation, answer=answer, pid=self.step.pid, argv=argv, exclude=self.bad,
                                   checkpoint=checkpoint))

    def _tell_step(self, state: dict[str, Any]) -> None:
        self.told = state
        if self.host is not None:
            self.host.remember("step", json.dumps(state))

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

    def _asked(self, word: str, text: str) -> None:
        """A request of the coordinator: start the next step, or end the one that runs (in a thread:
        the loop goes on watching the coordinator). Each is answered by the step's state."""
        try:
            request = json.loads(text)
        except ValueError:
            log.warning("the coordinator asked %r, not understood: ignored", (word + " " + text)[:200])
            return
        answer = str(request.get("id", ""))
        generation = int(request.get("generation", self.told.get("generation", 0)))
        if word == "step-start":
            self.bad = [str(n) for n in request.get("exclude", self.bad)]
            if self.step is not None and self.step.poll() is None:
                # a coordinator started again asks for what already runs: it is told, not given a second one
                self._tell_step({**self.told, "answer": answer})
            else:
                self.start_step(generation, str(request.get("checkpoint", "")), answer)
        elif word == "step-end":
            if self._ending is not None:
                self._ending = (self._ending[0], self._ending[1], answer)  # answered when it is done
                return
            if self.step is None:
                self._tell_step({**self.told, "running": False, "answer": answer})
                return
            ending: dict[str, Any] = {}
            grace = float(request.get("grace", STEP_END_GRACE))

            def work() -> None:
                try:
                    ending["ended"] = self.end_step(grace)
                except Exception as exc:  # said to the coordinator; the relaunch must not wait forever
                    log.exception("ending the srun step failed")
                    ending["error"] = str(exc)

            thread = threading.Thread(target=work, name="neuron-watch-end-step", daemon=True)
            thread.start()
            self._ending = (thread, ending, answer)
        else:
            log.warning("the coordinator asked %r, not understood: ignored", word)

    def _watch_step(self) -> None:
        """The step's end, asked (its thread done) or by itself, told to the coordinator."""
        if self._ending is not None:
            thread, ending, answer = self._ending
            if thread.is_alive():
                return
            self._ending = None
            self._tell_step({**self.told, "running": False, "asked": True, "answer": answer,
                             "exit_code": (ending.get("ended") or {}).get("exit_code"), **ending})
            return
        step = self.step
        if step is not None and self.told.get("running") and step.poll() is not None:
            self._tell_step({**self.told, "running": False, "asked": False, "exit_code": step.returncode})

    # -- the batch step: the coordinator in its own process, the steps here ------------------------

    def run(self) -> int:
        os.makedirs(self.run_dir, exist_ok=True)
        knowledge_base(self.cfg)  # a bad table or regex fails here, before anything starts
        port = int(self.cfg.coordinator.rsplit(":", 1)[1]) if self.cfg.coordinator else 0
        try:
            remembered = [n for n in self.drainer.excluded_nodes() if n in self.allocation]
        except PlatformError as exc:
            remembered = []
            log.warning("remembered drains not read: %s", exc)
        self.bad.extend(n for n in remembered if n not in self.bad)
        plan = srunplan.plan_restart(self.allocation, self.bad, self.needed, False)
        if plan.how != "exclude":
            raise UsageError(plan.why, "resume the nodes (`scontrol update nodename=N state=resume`) or "
                                       "allocate more nodes")
        checkpoint = checkpoint_chooser(self.cfg)({}).path
        # The coordinator in a process of its own (docs/multinode.md, "The coordinator's own process"):
        # its crash (a libzmq abort) is not this process's, whose steps are the job; it is started again.
        self.host = host = hosted_coordinator(
            self.cfg, bind=f"0.0.0.0:{port}", run_dir=self.run_dir, job_id=self.job_id, nodes=self.agents,
            node=host_name(), env={**self.env, "NEURON_WATCH_SECRET": self.secret},
            job_started=dict(job_id=self.job_id, node=host_name(), version=__version__,
                             command=mask_value(["srun", *self.srun_args, *self.cmd]),
                             checkpoint=checkpoint or None, config=self.cfg.redacted(), nodes=self.needed,
                             agents=self.agents, tasks_are_ranks=self.task_ranks,
                             slurm_job=self.slurm_job, slurm_restart_count=self.restart_count,
                             allocation=self.allocation, restart_owner=self.owner.owner),
            entry={"kind": "srun", "srun_args": self.given_srun_args, "cmd": self.cmd, "bad": self.bad})
        become_subreaper()
        signals = SignalLatch()
        old = signals.install()
        try:
            endpoint = host.start()
            self.address = f"{advertised_host(self.env)}:{endpoint.rsplit(':', 1)[1]}"
            say(f"coordinator on {self.address}; each generation's srun output: {self.step_log}/gen-<G>.log")
            self.start_step(self.restart_count, checkpoint)
            return self._loop(host, signals)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            if self._ending is not None:
                self._ending[0].join()
            self.end_step(0.0 if signals.received else STEP_END_GRACE)
            host.close()

    def _loop(self, host: HostedCoordinator, signals: SignalLatch) -> int:
        """Until the job is over: the coordinator's requests (the next step, the end of this one)
        answered, the step's end told to it, a coordinator that died started again (within the
        bound of :mod:`neuron_watch.recovery.coordcrash`), a signal forwarded to it (it stops every
        node and ends the job with 128+signal). Recovery is the coordinator's."""
        forwarded: int | None = None
        with Waker() as waker:  # a turn when the coordinator speaks or ends, a signal or the step's SIGCHLD comes
            while True:
                now = time.monotonic()
                due = [now + BUSY_WAIT] if self._ending is not None else []  # the step's end: its thread
                waker.wait(wait_for(now, due), [host.fd] if host.fd >= 0 else [])
                said = host.poll()
                if said is not None:
                    log.warning("%s", said)
                for word, text in host.take_requests():
                    self._asked(word, text)
                self._watch_step()
                if host.proc is None and host.over:  # it ended the job, said so, and exited
                    return host.over_code if host.over_code is not None else int(ExitCode.JOB_FAILED)
                sig = signals.received
                if host.gave_up:
                    # nobody judges: the step runs on, unobserved (said by the poll), to its own end
                    if sig is not None:
                        return 128 + sig
                    if self.step is None or self.step.poll() is not None:
                        code = self.step.returncode if self.step is not None else int(ExitCode.UNOBSERVED)
                        say(f"the srun step ended ({code}) with no coordinator watching it")
                        return code
                elif sig is not None and host.alive and forwarded != host.pid:
                    log.info("received %s: stopping the job on every node", signal.Signals(sig).name)
                    host.interrupt(sig)  # again to a coordinator started after the first one died
                    forwarded = host.pid


def step_state(generation: int, *, answer: str = "", pid: int | None = None, argv: list[str] | None = None,
               exclude: list[str] | None = None, checkpoint: str = "", error: str = "") -> dict[str, Any]:
    """The srun step as the batch step tells its coordinator (a line ``step <json>``): its generation,
    whether it runs, its pid and argv; once ended ``exit_code``, ``asked`` (ended on request) and
    the ``srun_step_ended`` fields (``ended``) or ``error``; ``answer``: the request it answers."""
    state: dict[str, Any] = {"generation": generation, "running": pid is not None, "pid": pid, "argv": argv or [],
                             "exclude": list(exclude or []), "checkpoint": checkpoint, "answer": answer}
    if error:
        state["error"] = error
    return state


class HostedSteps:
    """The coordinator's relauncher of srun steps, in the coordinator's own process: it asks the
    batch step (its wrapper, which keeps the steps: a coordinator that dies does not take the job
    with it) to end a step or start the next one, over :class:`~neuron_watch.job.hosting.HostLink`,
    and reads the step's state it is told. A coordinator started again is told its predecessor's
    last step first (:meth:`HostedCoordinator.remember`) and says nothing of it."""

    replaces_agents = True  # a generation is a new srun step: new agents join

    def __init__(self, job: SrunJob, link: HostLink, *, restarted: bool) -> None:
        self.job, self.link = job, link
        self.coord: Coordinator | None = None
        self.state: dict[str, Any] = {}
        self._quiet = restarted  # the first state read is the predecessor's: announced already
        self._asked_id: str | None = None  # the request whose answer is awaited
        self._asked_count = 0
        #: a relaunch under way: (generation, checkpoint, phase: "ending" | "starting")
        self._relaunch: tuple[int, str, str] | None = None

    # -- the batch step's word -------------------------------------------------------------------

    def read(self) -> None:
        """Take in what the batch step said (never waits)."""
        for word, text in self.link.lines():
            if word != "step":
                log.warning("the batch step said %r, not understood: ignored", word)
                continue
            try:
                state = json.loads(text)
            except ValueError:
                log.warning("the batch step's word on its step not understood: ignored")
                continue
            self._learn(state)

    def _learn(self, state: dict[str, Any]) -> None:
        before, self.state = self.state, state
        answered = bool(state.get("answer")) and state.get("answer") == self._asked_id
        if answered:
            self._asked_id = None
        if self._quiet:
            self._quiet = False
            self.job.bad = [str(n) for n in state.get("exclude", self.job.bad)]
            return
        coord = self.coord
        if coord is None:
            return
        generation = int(state.get("generation", coord.generation))
        if state.get("running") and state.get("pid") != before.get("pid"):
            coord.events.emit(EventKind.SRUN_STEP, generation, argv=state.get("argv", []), pid=state["pid"],
                              exclude=list(state.get("exclude", [])), checkpoint=state.get("checkpoint") or None)
        elif answered and state.get("ended"):
            coord.events.emit(EventKind.SRUN_STEP_ENDED, generation, **state["ended"])

    def _ask(self, word: str, **request: Any) -> None:
        self._asked_count += 1
        self._asked_id = f"{os.getpid()}-{self._asked_count}"
        if not self.link.tell(word, json.dumps({"id": self._asked_id, **request})):
            log.error("the batch step did not take the request %s (it is gone or not reading)", word)

    @property
    def waiting(self) -> bool:
        return self._asked_id is not None

    # -- the relauncher --------------------------------------------------------------------------

    def begin(self, generation: int, checkpoint: str, verdict: Verdict) -> None:
        """The old step's ranks are stopped: tell its agents to shut down and ask the batch step to
        end the step; :meth:`poll` then asks for the next one (or requeues)."""
        coord = self.coord
        assert coord is not None
        if self.job.owner.leave_to_hyperpod:
            # The step fails (its tasks exit 1): the restart is HyperPod's, not ours.
            coord.broadcast(Shutdown("restart left to HyperPod auto-resume", int(ExitCode.JOB_FAILED)))
        else:
            coord.broadcast(Shutdown("generation over: a new srun step follows", 0))
        self._relaunch = (generation, checkpoint, "ending")
        self._ask("step-end", grace=STEP_END_GRACE)

    def poll(self, now: float) -> RelaunchOutcome | None:
        """Once the old step has ended: ask for the next one in the same allocation (bad nodes
        excluded), or requeue the job, or end it (HyperPod's, too few nodes)."""
        self.read()
        if self._relaunch is None or self.waiting:
            return None
        generation, checkpoint, phase = self._relaunch
        coord = self.coord
        assert coord is not None
        if phase == "starting":
            self._relaunch = None
            if self.state.get("running"):
                return Relaunched(fresh_agents=True)
            return RelaunchEnded(int(ExitCode.JOB_FAILED), str(self.state.get("error", "the srun step did not start")))
        if "error" in self.state:
            self._relaunch = None
            return RelaunchEnded(int(ExitCode.JOB_FAILED), f"ending the srun step failed: {self.state['error']}")
        if self.job.owner.leave_to_hyperpod:
            self._relaunch = None
            coord.events.emit(EventKind.LEFT_TO_HYPERPOD, generation, reason=self.job.owner.why)
            return RelaunchEnded(int(ExitCode.JOB_FAILED), "restart left to HyperPod auto-resume")
        plan = srunplan.plan_restart(self.job.allocation, self.job.bad, self.job.needed, self._requeue_allowed())
        coord.events.emit(EventKind.RESTART_PLAN, generation, how=plan.how, exclude=list(plan.exclude),
                          usable=list(plan.usable), reason=plan.why)
        if plan.how == "exclude":
            self._relaunch = (generation, checkpoint, "starting")
            self._ask("step-start", generation=generation, checkpoint=checkpoint, exclude=self.job.bad)
            return None
        self._relaunch = None
        if plan.how == "requeue":
            return RelaunchEnded(*self._requeue(plan, generation))
        return RelaunchEnded(int(ExitCode.NOT_RESTARTABLE), plan.why)

    def gone(self) -> int | None:
        """The step's exit code when it ended without being told to (None while it runs or is being ended)."""
        self.read()
        if self._relaunch is not None or self.waiting or self.state.get("running", True) or self.state.get("asked"):
            return None
        code = self.state.get("exit_code")
        return int(code) if isinstance(code, int) else None

    def running_generation(self) -> int | None:
        self.read()
        if not self.state:
            return None
        return int(self.state.get("generation", 0)) if self.state.get("running") else -1

    def finish(self, grace: float, timeout: float) -> None:
        """At the job's end: ask the batch step to end the step (``grace`` for it to end by itself)
        and wait for its answer, at most ``timeout`` (its ``srun_step_ended`` is then emitted)."""
        if not self.state.get("running") and self._relaunch is None:
            return
        self._ask("step-end", grace=grace)
        end = time.monotonic() + timeout
        while self.waiting and not self.link.closed and time.monotonic() < end:
            select.select([self.link.fd], [], [], min(1.0, max(0.0, end - time.monotonic())))
            self.read()

    def drain(self, node: str, verdict: Verdict, events: EventLog) -> None:
        """Drain the Slurm node behind a faulty agent (caps respected); keep it out of the next steps."""
        job = self.job
        slurm = srunplan.slurm_node(node)
        mine = [e for e in verdict.evidence if e.key == verdict.culprit] or list(verdict.evidence)
        evidence = srunplan.short_evidence(mine[0].key.rank, mine[0].text) if mine else verdict.reason
        outcome = job.drainer.drain(slurm, job.slurm_job, verdict.label.value, evidence)
        events.emit(EventKind.DRAIN, self.coord.generation if self.coord else 0, node=slurm,
                    drained=outcome.drained, reason=outcome.reason, message=outcome.message)
        if slurm not in job.bad:
            job.bad.append(slurm)

    def _requeue_allowed(self) -> bool:
        try:
            r = self.job.drainer._run("show", "job", self.job.slurm_job)
        except PlatformError:
            return False
        jobs = slurmtext.parse_jobs(r.stdout)
        return bool(jobs) and jobs[0].requeue

    def _requeue(self, plan: srunplan.RestartPlan, generation: int) -> tuple[int, str]:
        assert self.coord is not None
        slurm_job = self.job.slurm_job
        excluded = slurmtext.join_nodelist(plan.exclude)
        # Written before the requeue: Slurm ends this batch step right after it (SIGTERM, KillWait, SIGKILL).
        self.coord.events.emit(EventKind.REQUEUE, generation, exclude=list(plan.exclude), reason=plan.why)
        outcome = requeue.requeue_without(self.job.drainer._run, slurm_job, plan.exclude)
        if not outcome.requeued:
            self.coord.events.emit(EventKind.REQUEUE_FAILED, generation, error="; ".join(outcome.errors))
            return int(ExitCode.NOT_RESTARTABLE), outcome.errors[0]
        if not outcome.excluded:
            self.coord.events.emit(EventKind.REQUEUE_UPDATE_FAILED, generation,
                                   error=f"{outcome.errors[0]}; the requeued job may run on {excluded} again")
        return int(ExitCode.JOB_FAILED), f"requeued without {excluded}"


def hosted_steps(config: WatchConfig, entry: dict[str, Any], link: HostLink, *,
                 restarted: bool) -> tuple[HostedSteps, RestartPolicy, int]:
    """For the coordinator's own process of a ``neuron-watch srun`` job (:mod:`neuron_watch.commands.hosted`):
    its relauncher, its restart policy and its first generation. Requeues of this job so far count
    against the budget (they were restarts too), and a requeued job goes on counting generations
    (rank logs land in new gen-<G> dirs; a fault injected "in generation 0 only" stays in the first run)."""
    job = SrunJob(config, list(entry["srun_args"]), list(entry["cmd"]), os.environ)
    job.bad = [str(n) for n in entry.get("bad", [])]
    policy = RestartPolicy(max_restarts=config.max_restarts, can_exclude_nodes=True)
    policy.restarts = policy.consecutive_failures = job.restart_count
    return HostedSteps(job, link, restarted=restarted), policy, job.restart_count


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
