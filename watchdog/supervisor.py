"""``neuron-watch torchrun``: this node's agent, and the job's coordinator where this node hosts it.

Every node runs a :class:`~neuron_watch.agent.NodeAgent` (launch, tail, sample, capture, stop).
The job's brain is one :class:`~neuron_watch.coordinator.Coordinator` (judge, restart policy,
events): for a single-node job it runs in this process on loopback; for a multi-node job the node
with ``node_rank`` 0 hosts it (``--coordinator HOST:PORT``, default ``<MASTER_ADDR>:29510``) and
every node's agent connects to it. One loop; signal handlers only record the signal.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shlex
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from neuron_watch import __version__
from neuron_watch.agent import NodeAgent
from neuron_watch.agent_link import AgentLink, new_session
from neuron_watch.auth import load_secret
from neuron_watch.checkpoint_scan import find_checkpoint
from neuron_watch.checkpoints import newest_complete
from neuron_watch.config import WatchConfig
from neuron_watch.console import StatusLine, say, status_line_for
from neuron_watch.coordinator import (
    PAUSE_JUMP,
    Coordinator,
    NodeView,
    coordinator_settings,
    default_judge_factory,
)
from neuron_watch.envpolicy import HostFacts, plan_environment
from neuron_watch.errors import ExitCode, UsageError
from neuron_watch.eventlog import EventLog
from neuron_watch.guardian import release, start_guardian
from neuron_watch.iofaults import IOHealth, check_checkpoint_dir, check_run_dir
from neuron_watch.judge import HangCalibration
from neuron_watch.kb import default_knowledge_base
from neuron_watch.launchers.base import Launcher
from neuron_watch.lostlink import CoordinatorLoss, LocalFacts, LossAction, LossSettings, loop_jump
from neuron_watch.mqtt import parse_mqtt_url
from neuron_watch.nbconsole import console_dropped, nonblocking_console
from neuron_watch.policy import RestartPolicy
from neuron_watch.procs import MARKER_ENV, become_subreaper
from neuron_watch.redact import mask_value
from neuron_watch.tail import console_echo
from neuron_watch.timeline import write_timeline
from neuron_watch.wiring import artifact_storage, attach_sinks, s3_core_dump_prefix

log = logging.getLogger("neuron_watch")

DEFAULT_COORDINATOR_PORT = 29510
#: How long the hosting node keeps serving after shutdown so every node receives it.
SHUTDOWN_GRACE = 3.0
#: After a signal that came before the job's shape was known: how long to wait for it, so that the
#: run's events still end with `job_finished` (the ranks are stopped at once regardless).
#: Short: torchrun's parser runs at nice 19 and took 15-25 s on a loaded node, so a SIGTERM during
#: start-up took as long (issue 16, finding 8); past this the end is recorded without the shape.
EARLY_SIGNAL_WAIT = 3.0
#: After a signal, how long the hosting node waits for its own agent to join before stopping "every node".
JOIN_WAIT = 5.0


def make_job_id(env: dict[str, str] | os._Environ[str]) -> str:
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    return time.strftime("nw-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def host_facts() -> HostFacts:
    import shutil

    return HostFacts(
        kernel_release=os.uname().release,
        has_neuron_det=shutil.which("neuron-det") is not None,
        has_neuron_device=os.path.exists("/dev/neuron0"),
    )


def checkpoint_chooser(config: WatchConfig, health: IOHealth | None = None) -> Callable[..., str]:
    """The coordinator's choice for every node: the newest complete checkpoint in --checkpoint-dir
    as the coordinator sees it (shared storage), else the newest any node reported (also when the
    directory cannot be read now: each node reports the newest it saw before, never 'from scratch'
    because of an ESTALE/EIO/loop at the moment of the restart; the fault is reported); never one in
    ``avoid`` (checkpoints a generation could not start from)."""

    def choose(nodes: dict[str, NodeView], avoid: frozenset[str] = frozenset()) -> str:
        if config.checkpoint_dir:
            found = find_checkpoint(config.checkpoint_dir, config.checkpoint_glob, config.checkpoint_marker)
            if found.error is None and not found.missing:
                if health is not None:
                    health.ok(config.checkpoint_dir)
                chosen = newest_complete(found, avoid)
                return "" if chosen is None else chosen.path
            if found.error is not None and health is not None:
                health.failed("read the checkpoint directory", config.checkpoint_dir, found.error)
        reported = sorted({v.checkpoint for v in nodes.values() if v.checkpoint and v.checkpoint not in avoid})
        return reported[-1] if reported else ""

    return choose


class SignalLatch:
    """Signal handlers only record; the loop acts."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.at: float | None = None  # time.monotonic() of the first signal

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            self.at = time.monotonic()

    def install(self) -> dict[int, Any]:
        """Catch SIGTERM, SIGINT and SIGHUP; returns the previous handlers (to restore at the end).

        A SIGHUP or SIGINT that was *ignored* when we started stays ignored: ``nohup neuron-watch``
        and a shell's background ``&`` (no job control) ask for exactly that, and a handler of ours
        would let the hang-up stop the job (issue 16, finding 8).
        """
        old: dict[int, Any] = {}
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if s != signal.SIGTERM and signal.getsignal(s) is signal.SIG_IGN:
                continue
            old[s] = signal.signal(s, self)
        return old


def run_supervised(config: WatchConfig, make_launcher: Callable[[str], Launcher]) -> int:
    """Entry point for ``neuron-watch torchrun``: set up, run, and always clean up.

    The console (stdout, stderr) is written by a thread from here on: a stalled reader (Ctrl-S, a
    stuck ssh) costs dropped, counted console lines, never a stalled watchdog (nbconsole.py).
    """
    with nonblocking_console(enabled=not config.dry_run):
        return _run_supervised(config, make_launcher)


def _run_supervised(config: WatchConfig, make_launcher: Callable[[str], Launcher]) -> int:
    env = os.environ
    job_id = config.job_id or make_job_id(env)
    run_dir = os.path.abspath(config.run_dir or os.path.join("neuron-watch-runs", job_id))
    # Slurm's node name where there is one (unique in the job, even for several slurmd on one host)
    node = env.get("NEURON_WATCH_NODE") or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    marker = f"{job_id}-{secrets.token_hex(4)}"
    launcher = make_launcher(marker)

    rank_env = dict(env)
    plan_lines: list[str] = []
    if not config.no_neuron_env:
        plan = plan_environment(
            env,
            host_facts(),
            core_dump_dir=os.path.join(run_dir, "core-dumps"),
            s3_core_dump_prefix=s3_core_dump_prefix(config, job_id),
            ndet_dir=os.path.join(run_dir, "ndet"),
        )
        rank_env.update(plan.to_set())
        plan_lines = plan.describe()
    if "PYTHONUNBUFFERED" not in env:
        rank_env["PYTHONUNBUFFERED"] = "1"
        plan_lines.append("set          PYTHONUNBUFFERED=1  # rank output reaches the watchdog as it is printed")
    rank_env.update({"NEURON_WATCH_RUN_DIR": run_dir, MARKER_ENV: marker})
    rank_env.pop("NEURON_WATCH_SECRET", None)  # the job's secret is ours, not the ranks'

    if config.dry_run:
        print("neuron-watch --dry-run: environment added for the ranks:")
        for line in plan_lines:
            print(f"  {line}")
        print("  set          NEURON_WATCH_CHECKPOINT, NEURON_WATCH_RESTART_COUNT  # per generation")
        print("command:")
        print("  " + shlex.join(launcher.command(os.path.join(run_dir, "gen-0"), "")))
        launcher.describe(os.path.join(run_dir, "gen-0"))  # lets torchrun's parser reject bad arguments
        return 0

    default_knowledge_base(config.progress_regex)  # a bad table or regex fails here, before anything starts
    if config.mqtt:
        parse_mqtt_url(config.mqtt)  # a bad URL exits 2 before anything starts
    storage = artifact_storage(config, run_dir)
    check_run_dir(run_dir)  # unusable (read-only, full, a file): a usage error now, not a traceback later
    if config.checkpoint_dir:
        check_checkpoint_dir(config.checkpoint_dir)
    say(f"neuron-watch {__version__}: job {job_id} on {node}, run dir {run_dir}")
    for line in plan_lines:
        say(f"env: {line}")
    become_subreaper()
    status_line = status_line_for(config)
    echo = None if config.quiet else status_line.echo if status_line is not None else console_echo
    health = IOHealth(node)  # the watchdog's own file faults, shared by this node's agent and coordinator
    agent = NodeAgent(config, launcher, None, job_id=job_id, node=node, run_dir=run_dir, rank_env=rank_env,
                      storage=storage, echo=echo, health=health)
    guardian, guardian_fd = start_guardian(marker, min(config.stop_timeout, 5.0))
    signals = SignalLatch()
    old = signals.install()
    coord: Coordinator | None = None
    code = int(ExitCode.JOB_FAILED)
    try:
        agent.start()  # torchrun starts now; its shape (torchrun's own parser) decides the topology
        # The shape is read in the background; meanwhile every rank line, exit and launcher line is
        # watched as it happens and kept for the coordinator (never a blind start).
        early_signal_at: float | None = None
        while not agent.watch_early():
            if signals.received is not None and early_signal_at is None:
                # Stop the ranks at once; the job's end is still recorded the usual way (the
                # coordinator, once the shape is known, finishes it as interrupted).
                early_signal_at = time.monotonic()
                agent.stop_early(signals.received, config.stop_timeout)
            if early_signal_at is not None and time.monotonic() - early_signal_at > EARLY_SIGNAL_WAIT:
                code = 128 + (signals.received or signal.SIGTERM)
                _record_end_before_shape(config, run_dir, job_id, node, launcher, code, signals.received)
                return code
            time.sleep(0.02)
        info = agent.info
        assert info is not None
        multi = (info.nnodes or 1) > 1 or config.coordinator is not None
        if multi:
            secret = load_secret(env, config.secret_file)
            address = config.coordinator or f"{info.coordinator_host or '127.0.0.1'}:{DEFAULT_COORDINATOR_PORT}"
            if not config.job_id and not env.get("SLURM_JOB_ID"):
                # Every node must speak of the same job; without --job-id or Slurm's, what all nodes
                # share is where the coordinator is and the launcher's rendezvous (two jobs running at
                # once cannot share that: the coordinator address alone merged two jobs, issue 16).
                job_id = "nw-" + hashlib.sha256(f"{address}\0{info.rendezvous}".encode()).hexdigest()[:12]
                agent.job_id = job_id
            if info.node_rank == 0 and env.get("NEURON_WATCH_HOST_COORDINATOR", "1") != "0":
                coord = _coordinator(config, f"0.0.0.0:{address.rsplit(':', 1)[1]}", secret, run_dir, job_id,
                                     info.nnodes, status_line, health)
        else:
            secret = secrets.token_bytes(32)
            coord = _coordinator(config, "127.0.0.1:0", secret, run_dir, job_id, 1, status_line, health)
            address = coord.endpoint.replace("tcp://", "")
        if coord is None:  # this node's file faults reach the coordinator as lines of the node
            health.listeners.append(agent.tell_io_fault)
        if coord is not None:
            coord.events.emit("job_started", 0, job_id=job_id, node=node, version=__version__,
                              command=mask_value(launcher.command(os.path.join(run_dir, "gen-0"),
                                                                  agent.gen.checkpoint if agent.gen else "")),
                              checkpoint=(agent.gen.checkpoint if agent.gen else "") or None,
                              config=config.redacted(), nodes=info.nnodes or 1, liveness=agent.liveness_plan())
        agent.attach(AgentLink(address, secret, job=job_id, node=node, session=new_session(time.time())))
        agent.introduce()
        code = run_node_loop(agent, coord, signals, address)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        retried = agent.close(config.stop_timeout)
        if retried is not None and coord is not None:
            coord.events.emit("upload", coord.generation, node=node, retry_at_exit=True, **retried)
        if agent._link is not None:
            agent.link.close()
        if coord is not None:
            if console_dropped():
                coord.events.emit("warning", coord.generation, kind="console_dropped", lines=console_dropped(),
                                  message=f"{console_dropped()} console line(s) dropped: the console was not read")
            coord.close()
            try:
                write_timeline(Path(run_dir), default_knowledge_base(config.progress_regex))
            except Exception as exc:  # a picture, never a reason to fail the run
                log.warning("timeline.json not written: %s", exc)
        release(guardian, guardian_fd)
    if coord is not None:
        say(f"exit code {code}; events in {os.path.join(run_dir, 'events.jsonl')}")
    else:
        say(f"node {node} done: exit code {code} (the job's decisions are on the coordinator's console)")
    return code


def _record_end_before_shape(config: WatchConfig, run_dir: str, job_id: str, node: str, launcher: Launcher,
                             code: int, signum: int | None) -> None:
    """A signal stopped the ranks before the job's shape (and so its coordinator) was known: record
    the run's start and end in this node's events.jsonl, so that its events still end with
    ``job_finished`` (state ``interrupted``), and stop reading the shape."""
    name = signal.Signals(signum).name if signum else "a signal"
    try:
        events = EventLog(os.path.join(run_dir, "events.jsonl"))
    except OSError as exc:
        log.warning("events.jsonl not written (%s): the job was stopped by %s during start-up", exc, name)
        return
    attach_sinks(events, config, job_id)
    try:
        events.emit("job_started", 0, job_id=job_id, node=node, version=__version__,
                    command=mask_value(launcher.command(os.path.join(run_dir, "gen-0"), "")), checkpoint=None,
                    config=config.redacted(), nodes=None)
        events.emit("job_finished", 0, exit_code=code, restarts=0, state="interrupted", incidents=0,
                    reason=f"stopped by {name} during start-up, before the job's shape was known",
                    last_progress=None, last_step=None)
    finally:
        events.close()


def _coordinator(config: WatchConfig, bind: str, secret: bytes, run_dir: str, job_id: str,
                 nodes: int | None, status_line: StatusLine | None = None,
                 health: IOHealth | None = None) -> Coordinator:
    settings = coordinator_settings(config, nodes)
    coord = Coordinator(bind, secret, run_dir, job=job_id, settings=settings,
                        judge_factory=default_judge_factory(config),
                        pick_checkpoint=checkpoint_chooser(config, health),
                        policy=RestartPolicy(max_restarts=config.max_restarts), announce=False, health=health)
    attach_sinks(coord.events, config, job_id, status_line)
    if status_line is not None:
        coord.status_listeners.append(status_line.update)
    return coord


def run_node_loop(agent: NodeAgent, coord: Coordinator | None, signals: SignalLatch, address: str) -> int:
    """Run until the coordinator shuts this node down, a signal arrives, or the coordinator is lost
    for good (the policy of :mod:`neuron_watch.lostlink`: never while this node's ranks work)."""
    started = time.monotonic()
    cfg = agent.cfg
    loss = CoordinatorLoss(LossSettings(silence=cfg.coordinator_silence, loss_timeout=cfg.coordinator_loss_timeout,
                                        hang_window=cfg.hang_timeout or HangCalibration().default), address)
    last_turn: float | None = None
    while True:
        now = time.monotonic()
        gap = loop_jump(last_turn, now, PAUSE_JUMP)
        last_turn = now
        if gap:
            started += gap
            agent.rebase(gap)
            say(f"neuron-watch on {agent.node} was not running for {gap:.0f}s (paused?): that time is not "
                "counted as silence of the ranks or of the coordinator")
        if coord is not None:
            coord.poll(0.02)
            coord.tick(time.monotonic())
        else:
            time.sleep(0.02)
        code = agent.tick()
        if code is not None:
            if coord is not None:  # keep serving briefly so every node receives the shutdown
                end = time.monotonic() + SHUTDOWN_GRACE
                while time.monotonic() < end and not all(v.status == "exited" for v in coord.nodes.values()):
                    agent.link.tick(time.monotonic(), time.time())  # our own "exited" must go out too
                    coord.poll(0.05)
                    coord.tick(time.monotonic())
            return code
        if signals.received is not None:
            sig = signals.received
            if coord is not None:
                # A signal during start-up (before our own hello reached the coordinator): a stop
                # broadcast now would reach no node, and the job would end only at the stop's
                # deadline + 10 s (25 s, issue 16 finding 8). Our hello is on loopback: wait for it, briefly.
                if not coord.nodes and now - max(started, signals.at or started) < JOIN_WAIT:
                    continue
                if coord.recovery.live and not coord.interrupted:
                    log.info("received %s: stopping the job on every node", signal.Signals(sig).name)
                    agent.stopping(f"{signal.Signals(sig).name} forwarded")
                    agent.launcher.send_signal(sig)  # forwarded as it came; the stop that follows is bounded
                    coord.interrupt(sig, now)
                continue  # the coordinator stops every node, then shuts us down with 128+sig
            log.info("received %s: stopping this node's ranks", signal.Signals(sig).name)
            agent.stopping(f"{signal.Signals(sig).name} forwarded")
            agent.launcher.stop(agent.cfg.stop_timeout, first_signal=sig)
            return 128 + sig
        if coord is None:
            now = time.monotonic()
            silence = agent.link.coordinator_silence(now)
            quiet_for = now - started if silence is None else silence
            gen = agent.gen
            ended = gen is not None and gen.exit_code is not None
            facts = LocalFacts(active_ago=agent.activity_ago(now), ended=ended,
                               buffered_lines=agent.link.outbox.lines,
                               dropped_lines=agent.link.outbox.dropped_lines)
            action, message = loss.step(now, quiet_for, facts)
            if action is LossAction.SAY:
                say(message)
            elif action is LossAction.GIVE_UP:
                log.error("%s", message)
                agent.stopping("the coordinator was lost")
                agent.launcher.stop(agent.cfg.stop_timeout)
                raise _Unobserved(address, quiet_for)


class _Unobserved(UsageError):
    exit_code = ExitCode.UNOBSERVED

    def __init__(self, address: str, seconds: float) -> None:
        super().__init__(
            f"lost the coordinator at {address}: nothing heard for {seconds:.0f}s and this node's ranks "
            "showed no work (or ended); they were stopped",
            "check that node 0's neuron-watch is running and reachable (firewall, --coordinator, NEURON_WATCH_SECRET)",
        )
