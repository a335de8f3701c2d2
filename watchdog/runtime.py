"""The composition root: every way a job starts is wired here, once.

    neuron-watch torchrun ...      supervisor.py: one node's agent (+ the coordinator on node_rank 0)
    neuron-watch srun ...          srun.py: the coordinator and a relauncher of srun steps;
                                   srun_agent.py: an agent per task
    neuron-watch coordinator       the job's coordinator alone (:func:`serve_coordinator`)
    SageMaker                      examples/sagemaker/entry.py execs ``neuron-watch torchrun``

Each of those modules knows how it launches ranks; everything else comes from here:

* the job's **identity**, resolved in one place: its id (:func:`resolve_job_id`), its run dir
  (:func:`resolve_run_dir`), the node's **place in the job** and its name
  (:class:`NodeIdentity`: torchrun's ``node_rank`` or, elastic, its rendezvous's ``GROUP_RANK``,
  Slurm's ``SLURM_PROCID``, SageMaker's host index -- the coordinator refuses two agents claiming
  one place or one name);
* what the ranks get (:func:`rank_environment`);
* the **knowledge base**, built once per process (:func:`knowledge_base`) and handed to the judge,
  the agent's link and the timeline;
* the **coordinator** with its settings, judge, checkpoint chooser, restart policy, event sinks
  (events.jsonl, MQTT, console, Prometheus and CloudWatch metrics) and status line (:func:`build_coordinator`);
* the **agent** with its artifact storage (:func:`build_agent`);
* the loops (:func:`run_node_loop`, :func:`serve_coordinator`) and the signal latch.

A feature added here reaches every entry point (``--mqtt`` and ``--artifacts`` once reached only
``neuron-watch torchrun``; a standalone coordinator once named its job differently from its agents).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.judge import HangCalibration
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.errors import ExitCode, UsageError
from neuron_watch.events import EventKind, NodeIdentity
from neuron_watch.iofaults import IOHealth
from neuron_watch.job.coordinator import (
    PAUSE_JUMP,
    Coordinator,
    NodeView,
    Relauncher,
    coordinator_settings,
)
from neuron_watch.job.coordinator import next_due as coordinator_due
from neuron_watch.job.endpoint import Counters
from neuron_watch.job.hosting import HostedCoordinator
from neuron_watch.job.judgelike import JudgeLike
from neuron_watch.job.linewriter import LineWriter, Tell
from neuron_watch.launchers.base import Launcher
from neuron_watch.node.agent import NodeAgent
from neuron_watch.node.procs import MARKER_ENV, dies_with_parent, start_in_new_group, stop_group
from neuron_watch.node.signal_latch import SignalLatch, say_hurried, stop_bound
from neuron_watch.outputs.console import StatusLine, attach_console, console_echo, say
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.outputs.mqtt import MqttSink, parse_mqtt_url
from neuron_watch.outputs.nbconsole import console_dropped
from neuron_watch.outputs.notify import NotifySink
from neuron_watch.outputs.storage import Storage, open_storage
from neuron_watch.outputs.timeline import write_timeline
from neuron_watch.recovery.checkpoint_scan import find_checkpoint
from neuron_watch.recovery.checkpoints import CheckpointChoice, newest_complete, passed_over
from neuron_watch.recovery.envpolicy import HostFacts, plan_environment
from neuron_watch.recovery.lostlink import CoordinatorLoss, LocalFacts, LossAction, LossSettings, loop_jump
from neuron_watch.recovery.policy import RestartPolicy
from neuron_watch.recovery.turns import REAP_SWEEP_EVERY, Every, wait_for
from neuron_watch.wire.waker import Waitable, Waker

log = logging.getLogger("neuron_watch")

#: How long the hosting node keeps serving after shutdown so every node receives it.
SHUTDOWN_GRACE = 3.0
#: After a signal, how long the hosting node waits for its own agent to join before stopping "every node".
JOIN_WAIT = 5.0
#: Environment variables that are ours, never the ranks': the job's secret, the MQTT URL (its password).
PRIVATE_ENV = ("NEURON_WATCH_SECRET", "NEURON_WATCH_MQTT")


# -- identity ------------------------------------------------------------------------------------


def resolve_job_id(config: WatchConfig, env: Mapping[str, str], *, address: str | None = None,
                   rendezvous: str | None = None) -> str:
    """The job's id, the same on every node and for every entry point: ``--job-id``; else
    ``slurm-<SLURM_JOB_ID>``; else, for a multi-node job (``address`` and ``rendezvous`` given),
    one derived from what every node shares -- where the coordinator is and the launcher's
    rendezvous (two jobs running at once cannot share both; the address alone once merged two
    jobs); else a new time-based one."""
    if config.job_id:
        return config.job_id
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    if address is not None and rendezvous is not None:
        return "nw-" + hashlib.sha256(f"{address}\0{rendezvous}".encode()).hexdigest()[:12]
    return time.strftime("nw-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def resolve_run_dir(config: WatchConfig, job_id: str) -> str:
    """``--run-dir``, else ``./neuron-watch-runs/<job id>`` (absolute)."""
    return os.path.abspath(config.run_dir or os.path.join("neuron-watch-runs", job_id))


def host_name() -> str:
    return socket.gethostname().split(".")[0]


def base_node_name(env: Mapping[str, str]) -> tuple[str, bool]:
    """This node's name before its place is known, and whether that name is unique by itself:
    ``NEURON_WATCH_NODE`` (the operator's or the SageMaker entry's: taken as unique), Slurm's
    ``SLURMD_NODENAME`` (unique in a cluster), else the host name (not necessarily unique)."""
    if env.get("NEURON_WATCH_NODE"):
        return env["NEURON_WATCH_NODE"], True
    if env.get("SLURMD_NODENAME"):
        return env["SLURMD_NODENAME"], True
    return host_name(), False


def torchrun_node(env: Mapping[str, str], node_rank: int | None, multi_node: bool) -> NodeIdentity:
    """A ``neuron-watch torchrun`` node: its place is torchrun's ``node_rank``. In a multi-node job
    whose name is only the host name, the place is part of the name (``<host>-n<node_rank>``): two
    nodes of one job may share a host name (containers; several nodes on one machine), and their
    bundles must not overwrite each other."""
    name, unique = base_node_name(env)
    place = node_rank if node_rank is not None else (0 if not multi_node else -1)
    if multi_node and not unique and place >= 0:
        name = f"{name}-n{place}"
    return NodeIdentity(place, name, host_name())


def elastic_torchrun_node(env: Mapping[str, str], group_rank: int | None, pid: int) -> NodeIdentity:
    """A ``neuron-watch torchrun`` node of an elastic rendezvous (c10d, etcd): its place is the
    ``GROUP_RANK`` the rendezvous gave its first generation's workers (``node_rank`` means nothing
    to torchrun there, and every wrapper's parser says 0). A name that is only the host name gets
    the place (``<host>-n<place>``); where the rendezvous placed nobody (torchrun ended before it),
    the wrapper's pid (``<host>-p<pid>``): two wrappers on one host share the host name. The name
    stays for the whole run, though a later generation's rendezvous may number the nodes anew."""
    name, unique = base_node_name(env)
    place = -1 if group_rank is None else group_rank
    if not unique:
        name = f"{name}-n{place}" if place >= 0 else f"{name}-p{pid}"
    return NodeIdentity(place, name, host_name())


def on_this_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine: loopback, or an address a socket
    can be bound to here (only this host's own addresses can; a network namespace has its own)."""
    if host in ("", "localhost"):
        return True
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _type, _proto, _name, sockaddr in found:
        address = str(sockaddr[0])
        if address.startswith("127.") or address == "::1":
            return True
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, 0))
        except OSError:
            continue
        return True
    return False


def slurm_task_node(env: Mapping[str, str]) -> NodeIdentity:
    """A ``neuron-watch srun`` task's agent: its place is ``SLURM_PROCID`` (the task's rank in the
    step); its name the Slurm node's, ``-t<SLURM_LOCALID>`` for a second task on the same node."""
    name, _ = base_node_name(env)
    local = env.get("SLURM_LOCALID", "0")
    if local not in ("", "0"):
        name = f"{name}-t{local}"
    procid = env.get("SLURM_PROCID", "")
    return NodeIdentity(int(procid) if procid.isdigit() else -1, name, host_name())


# -- where events and artifacts go ------------------------------------------------------------


def attach_sinks(events: EventLog, config: WatchConfig, job_id: str, status_line: StatusLine | None = None) -> None:
    """The coordinator's event sinks: the console, the broker of ``--mqtt``, the webhook of ``--notify``."""
    attach_console(events, config, status_line=status_line)
    if config.mqtt:
        events.attach(MqttSink(parse_mqtt_url(config.mqtt), job_id))  # every event, also those before it
    if config.notify:
        events.attach(NotifySink(config.notify, job_id))


def attach_metrics(coord: Coordinator, address: str, final_wait: float = 0.0) -> None:
    """``--metrics``: the coordinator's events and status documents served to Prometheus on
    ``address``, until the coordinator closes its event log (and its scrapers fetched the final
    values, for up to ``final_wait`` seconds: ``--metrics-final-wait``). An address that cannot be
    bound is said and costs only the metrics: the job is already running on some entry points."""
    from neuron_watch.outputs.metrics_http import MetricsSink

    try:
        sink = MetricsSink(address, coord.job, final_wait=final_wait)
    except OSError as exc:
        coord.events.emit(EventKind.WARNING, coord.generation, kind="metrics_unavailable", address=address,
                          message=f"--metrics {address}: cannot listen there ({exc}); no metrics for this job "
                                  "(choose a free port of this host)")
        return
    log.info("metrics for Prometheus at http://%s:%d/metrics", address.rpartition(":")[0], sink.port)
    coord.events.attach(sink)
    coord.status_listeners.append(sink.status)


def attach_cloudwatch(coord: Coordinator, namespace: str, interval: float, env: Mapping[str, str] = os.environ) -> None:
    """``--cloudwatch``: the coordinator's events and status documents sent to CloudWatch from a
    thread of the sink's, until the coordinator closes its event log. Failures are said from the
    loop (a ``warning`` event) and cost only the metrics."""
    from neuron_watch.outputs.cloudwatch_put import CloudWatchSink

    def warn(**fields: Any) -> None:
        coord.events.emit(EventKind.WARNING, coord.generation, **fields)

    sink = CloudWatchSink(namespace, coord.job, env, interval=interval, warn=warn)
    log.info("metrics to CloudWatch: namespace %s at %s, every %gs", namespace, sink.where, interval)
    coord.events.attach(sink)
    coord.status_listeners.append(sink.status)


def artifact_storage(config: WatchConfig, run_dir: str, env: Mapping[str, str] = os.environ) -> Storage | None:
    """Where a node uploads its bundles; None when they stay where they are captured (the default)."""
    if not config.artifacts:
        return None
    if not config.artifacts.startswith("s3://") and os.path.abspath(config.artifacts) == os.path.join(
        run_dir, "incidents"
    ):
        return None
    return open_storage(config.artifacts, env)


def s3_core_dump_prefix(config: WatchConfig, job_id: str) -> str | None:
    """Where the Neuron runtime uploads core dumps itself (``--artifacts s3://...``), else None."""
    if config.artifacts and config.artifacts.startswith("s3://"):
        return config.artifacts.rstrip("/") + f"/{job_id}/core-dumps"
    return None


# -- what the ranks get ----------------------------------------------------------------------------


def host_facts() -> HostFacts:
    return HostFacts(
        kernel_release=os.uname().release,
        has_neuron_det=shutil.which("neuron-det") is not None,
        has_neuron_device=os.path.exists("/dev/neuron0"),
    )


@dataclass(frozen=True)
class RankEnvironment:
    """The ranks' environment and the lines that say what was set and why (printed at start)."""

    env: dict[str, str]
    said: list[str]


def rank_environment(config: WatchConfig, env: Mapping[str, str], run_dir: str, job_id: str,
                     marker: str) -> RankEnvironment:
    """The ranks' environment: ours plus the Neuron debugging environment (never overwriting what
    the user set; off with ``--no-neuron-env``), ``PYTHONUNBUFFERED=1`` so output arrives as it is
    printed, where the run dir is, and our marker; never the job's secret."""
    rank_env = {k: v for k, v in env.items() if k not in PRIVATE_ENV}
    said: list[str] = []
    if not config.no_neuron_env:
        plan = plan_environment(env, host_facts(), core_dump_dir=os.path.join(run_dir, "core-dumps"),
                                s3_core_dump_prefix=s3_core_dump_prefix(config, job_id),
                                ndet_dir=os.path.join(run_dir, "ndet"))
        rank_env.update(plan.to_set())
        said = plan.describe()
    if "PYTHONUNBUFFERED" not in env:
        rank_env["PYTHONUNBUFFERED"] = "1"
        said.append("set          PYTHONUNBUFFERED=1  # rank output reaches the watchdog as it is printed")
    rank_env.update({"NEURON_WATCH_RUN_DIR": run_dir, MARKER_ENV: marker})
    return RankEnvironment(rank_env, said)


# -- the parts --------------------------------------------------------------------------------------


def checkpoint_chooser(config: WatchConfig, health: IOHealth | None = None) -> Callable[..., CheckpointChoice]:
    """The coordinator's choice for every node: the newest complete checkpoint in --checkpoint-dir
    as the coordinator sees it (shared storage), else the newest any node reported (also when the
    directory cannot be read now: each node reports the newest it saw before, never 'from scratch'
    because of an ESTALE/EIO/loop at the moment of the restart; the fault is reported); never one in
    ``avoid`` (checkpoints a generation could not start from)."""

    def choose(nodes: Mapping[str, NodeView], avoid: frozenset[str] = frozenset()) -> CheckpointChoice:
        if config.checkpoint_dir:
            found = find_checkpoint(config.checkpoint_dir, config.checkpoint_glob, config.checkpoint_marker)
            if found.error is None and not found.missing:
                if health is not None:
                    health.ok(config.checkpoint_dir)
                chosen = newest_complete(found, avoid)
                return CheckpointChoice("" if chosen is None else chosen.path, passed_over(found, chosen))
            if found.error is not None and health is not None:
                health.failed("read the checkpoint directory", config.checkpoint_dir, found.error)
        reported = sorted({v.checkpoint for v in nodes.values() if v.checkpoint and v.checkpoint not in avoid})
        return CheckpointChoice(reported[-1] if reported else "")

    return choose


def knowledge_base(config: WatchConfig) -> KnowledgeBase:
    """The job's knowledge base: the packaged table and ``--progress-regex``. Built once by each entry
    point, before anything starts (a bad table or regex fails there), and handed to every part."""
    return default_knowledge_base(config.progress_regex)


def default_judge_factory(config: WatchConfig, kb: KnowledgeBase | None = None) -> Callable[[int, float], JudgeLike]:
    """A :class:`neuron_watch.diagnosis.judge.Judge` per generation, from the watch options, all with
    ``kb`` (the entry point's; one built from ``config`` when none is given)."""
    from neuron_watch.diagnosis.crashreading import CrashReader
    from neuron_watch.diagnosis.judge import Judge, JudgeSettings

    table = kb if kb is not None else knowledge_base(config)
    if config.progress_regex and "step" not in re.compile(config.progress_regex).groupindex:
        # a legitimate choice (progress without a step number), said once so that it is a choice
        log.info("--progress-regex has no (?P<step>...) group: its lines count as progress without a step "
                 "number (restarts, crash loops and reports see no step); add (?P<step>\\d+) to read one")
    settings = JudgeSettings(hang_timeout=config.hang_timeout, startup_timeout=config.startup_timeout,
                             compile_timeout=config.compile_timeout, save_timeout=config.save_timeout)

    def make(generation: int, now: float) -> JudgeLike:
        judge = Judge(table, settings, now)
        # a crash is read as offline ``diagnose`` reads it, from the lines the nodes sent around it
        judge.crash_reader = CrashReader(judge.blocks.around).read
        return judge

    return make


def build_coordinator(config: WatchConfig, kb: KnowledgeBase, *, bind: str, secret: bytes, run_dir: str,
                      job_id: str, nodes: int | None, health: IOHealth | None = None,
                      status_line: StatusLine | None = None,
                      relauncher: Relauncher | None = None, generation: int = 0,
                      policy: RestartPolicy | None = None, announce: bool = False,
                      **settings: Any) -> Coordinator:
    """The job's coordinator, the same for every entry point: its settings from the config
    (``settings``: what one entry point decides itself, e.g. the standalone ``--silence``), a judge
    per generation, the checkpoint chooser, the restart policy, the event sinks (the console, MQTT)
    and the ``--progress`` line."""
    coord = Coordinator(bind, secret, run_dir, job=job_id, settings=coordinator_settings(config, nodes, **settings),
                        judge_factory=default_judge_factory(config, kb),
                        pick_checkpoint=checkpoint_chooser(config, health),
                        policy=policy or RestartPolicy(max_restarts=config.max_restarts), announce=announce,
                        relauncher=relauncher, generation=generation, health=health, job_log=line_writer)
    attach_sinks(coord.events, config, job_id, status_line)
    if config.metrics:
        attach_metrics(coord, config.metrics, config.metrics_final_wait)
    if config.cloudwatch:
        attach_cloudwatch(coord, config.cloudwatch, config.cloudwatch_interval)
    if status_line is not None:
        coord.status_listeners.append(status_line.update)
    return coord


def line_writer(run_dir: str, tail_lines: int, counters: Counters, tell: Tell) -> LineWriter:
    """The job log of every entry point's coordinator: merged.log and the tails kept by a writer
    process of their own (a group we own, on a lifeline to this one), off the judging thread."""
    return LineWriter(run_dir, tail_lines, counters=counters, tell=tell, start=start_in_new_group, stop=stop_group)


def build_agent(config: WatchConfig, launcher: Launcher, kb: KnowledgeBase, *, job_id: str, node: NodeIdentity,
                run_dir: str,
                rank_env: dict[str, str], health: IOHealth | None = None,
                echo: Callable[[str], None] | None = None) -> NodeAgent:
    """A node's agent, the same for every entry point: its artifact storage (``--artifacts``), the
    echo of rank output on the console (off with ``--quiet``), the knowledge base its link classifies with."""
    if echo is None and not config.quiet:
        echo = console_echo
    return NodeAgent(config, launcher, None, job_id=job_id, node=node.name, run_dir=run_dir, rank_env=rank_env,
                     storage=artifact_storage(config, run_dir), echo=echo, health=health, place=node.place, kb=kb)


def close_coordinator(coord: Coordinator, kb: KnowledgeBase) -> None:
    """The end of a coordinator, the same for every entry point: a last word on console lines that
    were dropped, its files closed, and the run's ``timeline.json`` (Chrome trace) written."""
    dropped = console_dropped()
    if dropped:
        coord.events.emit(EventKind.WARNING, coord.generation, kind="console_dropped", lines=dropped,
                          message=f"{dropped} console line(s) dropped: the console was not read")
    coord.close()
    try:
        write_timeline(Path(coord.run_dir), kb)
    except Exception as exc:  # a picture, never a reason to fail the run
        log.warning("timeline.json not written: %s", exc)


# -- the coordinator in a process of its own --------------------------------------------------------


def hosted_coordinator(config: WatchConfig, **spec: Any) -> HostedCoordinator:
    """The job's coordinator as a child process of the node that hosts it (:mod:`neuron_watch.job.hosting`):
    a process group we own, on a lifeline that kills it with this process (its SIGTERM would stop the job)."""

    def start(argv: list[str], env: Mapping[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
        return start_in_new_group(argv, env, preexec_fn=dies_with_parent, **kwargs)

    return HostedCoordinator(config, start=start, stop=stop_group, **spec)


# -- the loops -----------------------------------------------------------------------------------------


def run_node_loop(agent: NodeAgent, coord: Coordinator | None, signals: SignalLatch, address: str,
                  host: HostedCoordinator | None = None) -> int:
    """One node's loop, for every entry point with an agent: its agent, and the job's coordinator
    where this node hosts it (``coord``: in this process; ``host``: a child process, started again
    when it dies). Runs until the coordinator shuts this node down, a signal arrives, or the
    coordinator is lost for good (the policy of :mod:`neuron_watch.recovery.lostlink`: never while
    this node's ranks work)."""
    with Waker() as waker:
        return _node_loop(agent, coord, signals, address, host, waker)


def _wait_turn(waker: Waker, agent: NodeAgent, coord: Coordinator | None, reap: Every) -> bool:
    """Sleep until something can have happened or is due (:mod:`neuron_watch.recovery.turns`): the
    coordinator's and the agent's sockets, the launcher's pipe, a signal, SIGCHLD, the next thing
    the agent, the coordinator or the orphans' sweep is due for. Returns whether orphans are to be
    reaped this turn (SIGCHLD came, or the sweep is due)."""
    now = time.monotonic()
    dues = [agent.next_due(now), reap.next_due()]
    watch: list[Waitable] = [agent.link.sock.sock]
    fd = agent.launcher.output_fd()
    if fd is not None:
        watch.append(fd)
    if coord is not None:
        dues.append(coordinator_due(coord, now))
        watch.append(coord.wire.sock.sock)
    # (the coordinator's messages taken off its socket and not yet handled: no wait)
    waker.wait(0.0 if coord is not None and coord.wire.waiting else wait_for(now, dues), watch)
    now = time.monotonic()
    if reap.due(now, asked=waker.take_child()):
        reap.done(now)
        return True
    return False


def _node_loop(agent: NodeAgent, coord: Coordinator | None, signals: SignalLatch, address: str,
               host: HostedCoordinator | None, waker: Waker) -> int:
    started = time.monotonic()
    forwarded: int | None = None  # the hosted coordinator (pid) a signal went to: it stops every node, then us
    cfg = agent.cfg
    loss = CoordinatorLoss(LossSettings(silence=cfg.coordinator_silence, loss_timeout=cfg.coordinator_loss_timeout,
                                        hang_window=cfg.hang_timeout or HangCalibration().default), address)
    last_turn: float | None = None
    reap = Every(REAP_SWEEP_EVERY)
    while True:
        reap_now = _wait_turn(waker, agent, coord, reap)
        now = time.monotonic()
        gap = loop_jump(last_turn, now, PAUSE_JUMP)
        last_turn = now
        if gap:
            started += gap
            agent.rebase(gap)
            say(f"neuron-watch on {agent.node} was not running for {gap:.0f}s (paused?): that time is not "
                "counted as silence of the ranks or of the coordinator")
        if coord is not None:
            coord.poll(0)
            coord.tick(time.monotonic())
        if host is not None:
            said = host.poll()
            if said is not None:
                log.warning("%s", said)
        code = agent.tick(reap=reap_now)
        if code is not None:
            if coord is not None:  # keep serving briefly so every node receives the shutdown
                end = time.monotonic() + SHUTDOWN_GRACE
                while time.monotonic() < end and not all(v.status == "exited" for v in coord.nodes.values()):
                    agent.link.tick(time.monotonic(), time.time())  # our own "exited" must go out too
                    coord.poll(0.05)
                    coord.tick(time.monotonic())
            else:
                # our "exited" goes out now (the socket's linger delivers it as we close): the
                # coordinator lingers for it before it ends
                agent.link.send_pending(time.monotonic())
            return code
        if signals.received is not None:
            sig = signals.received
            say_hurried(signals)
            if coord is not None:
                # A signal during start-up (before our own hello reached the coordinator): a stop
                # broadcast now would reach no node, and the job would end only at the stop's
                # deadline + 10 s. Our hello is on loopback: wait for it, briefly.
                if not coord.nodes and now - max(started, signals.at or started) < JOIN_WAIT:
                    continue
                if coord.recovery.live and not coord.interrupted:
                    log.info("received %s: stopping the job on every node%s", signal.Signals(sig).name,
                             stop_bound(agent.cfg))
                    agent.stopping(f"{signal.Signals(sig).name} forwarded")
                    agent.launcher.send_signal(sig)  # forwarded as it came; the stop that follows is bounded
                    coord.interrupt(sig, now)
                continue  # the coordinator stops every node, then shuts us down with 128+sig
            if host is not None and host.alive:
                if forwarded == host.pid:
                    continue  # our coordinator stops every node, then shuts us down with 128+sig
                # as above: a stop broadcast before our hello reached it would reach no node
                if agent.link.coordinator_session is None and now - max(started, signals.at or started) < JOIN_WAIT:
                    continue
                if forwarded is None:
                    log.info("received %s: stopping the job on every node%s", signal.Signals(sig).name,
                             stop_bound(agent.cfg))
                    agent.stopping(f"{signal.Signals(sig).name} forwarded")
                    agent.launcher.send_signal(sig)
                host.interrupt(sig)  # again to a coordinator started after the first one died
                forwarded = host.pid
                continue
            log.info("received %s: stopping this node's ranks%s", signal.Signals(sig).name, stop_bound(agent.cfg))
            agent.leave_on_signal(sig, agent.cfg.stop_timeout)
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
                raise CoordinatorLost(address, quiet_for)


class CoordinatorLost(UsageError):
    exit_code = ExitCode.UNOBSERVED

    def __init__(self, address: str, seconds: float) -> None:
        super().__init__(
            f"lost the coordinator at {address}: nothing heard for {seconds:.0f}s and this node's ranks "
            "showed no work (or ended); they were stopped",
            "check that node 0's neuron-watch is running and reachable (firewall, --coordinator, NEURON_WATCH_SECRET)",
        )


def serve_coordinator(coord: Coordinator, signals: SignalLatch, *, stop_job_on_signal: bool,
                      watch: Sequence[Waitable] = ()) -> int:
    """A coordinator without an agent of its own: serve until the job is over. A signal either stops
    every node first and ends the job with 128+signal (``stop_job_on_signal``: the ``srun`` batch
    side, whose step the job is), or only ends this process (the standalone coordinator: its agents
    keep their ranks running while they work, as when any coordinator is lost). ``watch``: what
    else wakes its loop (a hosted coordinator's socket to its wrapper)."""
    with Waker() as waker:  # the signals wake its loop as its socket does
        if not stop_job_on_signal:
            code = coord.serve(lambda: signals.received is not None, waker=waker, watch=watch)
            return 128 + signals.received if signals.received is not None else code

        def forward() -> bool:
            if signals.received is not None and not coord.interrupted:
                log.info("received %s: stopping the job on every node", signal.Signals(signals.received).name)
                coord.interrupt(signals.received, time.monotonic())
            return False

        return coord.serve(forward, waker=waker, watch=watch)
