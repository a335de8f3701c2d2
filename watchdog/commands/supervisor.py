"""``neuron-watch torchrun``: this node's agent, and the job's coordinator where this node hosts it.

Every node runs a :class:`~neuron_watch.node.agent.NodeAgent` (launch, tail, sample, capture, stop).
The job's brain is one :class:`~neuron_watch.job.coordinator.Coordinator` (judge, restart policy,
events): for a single-node job it runs in this process on loopback; for a multi-node job it listens
at ``--coordinator HOST:PORT`` (default ``<MASTER_ADDR or rendezvous host>:29510``) and every
node's agent connects to it. Who hosts it:

* a static rendezvous: the node with ``node_rank`` 0 (its place is fixed by the arguments);
* an elastic one (c10d, etcd: torchrun ignores ``node_rank`` and gives each node its place at the
  rendezvous): the first wrapper on the coordinator's host to bind its port -- the bind is the
  lock, so two wrappers on one host never both host it, and neither waits on the other (torchrun
  elects the host of its own c10d store the same way). A node takes its place and name from the
  ``GROUP_RANK`` the rendezvous gives its workers, before it introduces itself.

One loop; signal handlers only record the signal.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shlex
import signal
import time
from collections.abc import Callable
from typing import Any

from neuron_watch import __version__
from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode
from neuron_watch.events import Action, EventKind, Label, NodeIdentity, Verdict
from neuron_watch.iofaults import IOHealth, check_checkpoint_dir, check_run_dir, claim_run_dir
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.job.hosting import HostedCoordinator
from neuron_watch.launchers.base import Launcher, LaunchInfo
from neuron_watch.launchers.torchrun import TorchrunLauncher
from neuron_watch.node.agent import NodeAgent
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.guardian import release, start_guardian
from neuron_watch.node.procs import become_subreaper
from neuron_watch.node.signal_latch import SignalLatch, say_hurried
from neuron_watch.outputs.console import console_echo, say, status_line_for
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.outputs.mqtt import parse_mqtt_url
from neuron_watch.outputs.nbconsole import nonblocking_console
from neuron_watch.redact import mask_value
from neuron_watch.runtime import (
    attach_sinks,
    base_node_name,
    build_agent,
    build_coordinator,
    close_coordinator,
    elastic_torchrun_node,
    host_name,
    hosted_coordinator,
    knowledge_base,
    on_this_host,
    rank_environment,
    resolve_job_id,
    resolve_run_dir,
    run_node_loop,
    torchrun_node,
)
from neuron_watch.wire.auth import load_secret
from neuron_watch.wire.transport import PortInUse

log = logging.getLogger("neuron_watch")

DEFAULT_COORDINATOR_PORT = 29510
#: After a signal that came before the job's shape was known: how long to wait for it, so that the
#: run's events still end with `job_finished` (the ranks are stopped at once regardless).
#: Short: torchrun's parser runs at nice 19 and can take many seconds on a loaded node, and a
#: SIGTERM during start-up must not wait as long; past this the end is recorded without the shape.
EARLY_SIGNAL_WAIT = 3.0
#: torchrun reads its arguments with the same parser as its shape reader, at our priority (the reader
#: runs at nice 19), so a torchrun that refuses them has exited by the time the refusal is known, or
#: soon after; one still running this long after accepted them after all and is watched as a job.
#: Also the bound on waiting for a job's first worker or early end, where its configuration check is
#: left to that end: a torchrun still without workers then is watched as a job. torchrun checks its
#: configuration as soon as it has imported torch (3-12 s here at load 4-20), before it waits in the
#: rendezvous of a job of several nodes, so by then it has passed the check. The price: a static job
#: whose nodes join late gets its coordinator up to this much later (an elastic node already waits
#: for its place); nothing is lost meanwhile, as there is no worker yet and launcher lines are kept.
REFUSAL_WAIT = 30.0
#: torchrun's configuration check after its early end imports torch: seconds on a loaded node
REFUSAL_CHECK_TIMEOUT = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:  # pragma: no cover - verbatim command
    """torchrun's arguments are passed through verbatim (see cli.SUBCOMMANDS)."""


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """``neuron-watch torchrun ARGS``: torchrun as our child, its arguments unchanged."""
    python = getattr(args, "torchrun_python", None)  # `PYTHON -m torch.distributed.run ARGS`
    return run_supervised(config, lambda marker: TorchrunLauncher(list(args.launcher_args), marker, python))


def run_supervised(config: WatchConfig, make_launcher: Callable[[str], Launcher]) -> int:
    """Entry point for ``neuron-watch torchrun``: set up, run, and always clean up.

    The console (stdout, stderr) is written by a thread from here on: a stalled reader (Ctrl-S, a
    stuck ssh) costs dropped, counted console lines, never a stalled watchdog (nbconsole.py).
    """
    with nonblocking_console(enabled=not config.dry_run):
        return _run_supervised(config, make_launcher)


def _run_supervised(config: WatchConfig, make_launcher: Callable[[str], Launcher]) -> int:
    env = os.environ
    # The job id may still change for a multi-node job without --job-id or Slurm's (see below)
    job_id = resolve_job_id(config, env)
    run_dir = resolve_run_dir(config, job_id)
    # The node's name before its place is known (the job's shape decides it)
    name, unique = base_node_name(env)
    marker = f"{job_id}-{secrets.token_hex(4)}"
    launcher = make_launcher(marker)
    ranks = rank_environment(config, env, run_dir, job_id, marker)

    if config.dry_run:
        print("neuron-watch --dry-run: environment added for the ranks:")
        for line in ranks.said:
            print(f"  {line}")
        print("  set          NEURON_WATCH_CHECKPOINT, NEURON_WATCH_RESTART_COUNT  # per generation")
        print("command:")
        print("  " + shlex.join(launcher.command(os.path.join(run_dir, "gen-0"), "")))
        launcher.describe(os.path.join(run_dir, "gen-0"))  # lets torchrun's parser reject bad arguments
        return 0

    kb = knowledge_base(config)  # a bad table or regex fails here, before anything starts
    if config.mqtt:
        parse_mqtt_url(config.mqtt)  # a bad URL exits 2 before anything starts
    check_run_dir(run_dir)  # unusable (read-only, full, a file): a usage error now, not a traceback later
    # Another wrapper of this node name in this run dir (two jobs of one Slurm allocation): refused before
    # anything starts where the name is final already (a host name alone may still get the node's place)
    claim = claim_run_dir(run_dir, name, job_id) if unique else None
    if config.checkpoint_dir:
        check_checkpoint_dir(config.checkpoint_dir)
    say(f"neuron-watch {__version__}: job {job_id} on {name}, run dir {run_dir}")
    for line in ranks.said:
        say(f"env: {line}")
    become_subreaper()
    status_line = status_line_for(config)
    echo = None if config.quiet else status_line.echo if status_line is not None else console_echo
    health = IOHealth(name)  # the watchdog's own file faults, shared by this node's agent and coordinator
    agent = build_agent(config, launcher, kb, job_id=job_id, node=NodeIdentity(-1, name, host_name()), run_dir=run_dir,
                        rank_env=ranks.env, health=health, echo=echo)
    guardian, guardian_fd = start_guardian(marker, min(config.stop_timeout, 5.0))
    signals = SignalLatch()
    launcher.hurry = signals.repeated  # a second Ctrl-C cuts any stop of the job short (SIGKILL, reaped)
    old = signals.install()
    coord: Coordinator | None = None
    host: HostedCoordinator | None = None  # the job's coordinator as this node's child process
    code = int(ExitCode.JOB_FAILED)
    try:
        agent.start()  # torchrun starts now; its shape (torchrun's own parser) decides the topology
        # The shape is read in the background; meanwhile every rank line, exit and launcher line is
        # watched as it happens and kept for the coordinator (never a blind start).
        early_signal_at: float | None = None
        placed_at: float | None = None
        while True:
            if _placed(agent):
                placed_at = time.monotonic() if placed_at is None else placed_at
                # A job whose configuration check is left to after torchrun's early end: torchrun
                # starting its workers passed it; a torchrun ending before any did is asked about it.
                # Several nodes too: torchrun's check comes before its rendezvous (torchrun_args), so
                # one refusing ends as early as one of one node, and this wait needs no other node.
                # Reading the check at every start instead imported torch in each node's shape
                # reader (4.4-4.6 CPU-s) for the rare launch that is refused.
                if (signals.received is not None or not _check_pending(agent)
                        or time.monotonic() - placed_at > REFUSAL_WAIT):
                    break
            say_hurried(signals)
            if signals.received is not None and early_signal_at is None:
                # Stop the ranks at once; the job's end is still recorded the usual way (the
                # coordinator, once the shape is known, finishes it as interrupted).
                early_signal_at = time.monotonic()
                agent.stop_early(signals.received, config.stop_timeout)
            if early_signal_at is not None and time.monotonic() - early_signal_at > EARLY_SIGNAL_WAIT:
                code = 128 + (signals.received or signal.SIGTERM)
                how = signal.Signals(signals.received).name if signals.received else "a signal"
                before = "the rendezvous placed this node" if agent.info is not None else "the job's shape was known"
                _record_without_coordinator(config, run_dir, job_id, name, launcher, code, "interrupted",
                                            f"stopped by {how} during start-up, before {before}")
                return code
            time.sleep(0.02)
        if signals.received is None and _ended_before_workers(agent):
            assert agent.gen is not None
            agent.refused = launcher.refusal(agent.gen.gen_dir, REFUSAL_CHECK_TIMEOUT)
        if agent.refused is not None:
            refused = _await_refusal(agent, signals)
            if refused is not None:
                # its own words went to the console as it printed them; the verdict and the end
                # are said by the event log's console sink
                _record_without_coordinator(
                    config, run_dir, job_id, name, launcher, refused, "failed" if refused else "finished",
                    f"{agent.refused.message}; a configuration error, not restarted",
                    verdict=Verdict(Label.CONFIG_ERROR, Action.STOP, reason=agent.refused.message,
                                    advice=f"Next step: {agent.refused.hint}."))
                say(f"exit code {refused} ({launcher.name}'s own); next step: {agent.refused.hint}; "
                    f"events in {os.path.join(run_dir, 'events.jsonl')}")
                return refused
        info = agent.info
        assert info is not None
        multi = (info.nnodes or 1) > 1 or config.coordinator is not None
        if info.elastic:  # its place: what the rendezvous gave it
            agent.identify(elastic_torchrun_node(env, agent.group_rank, os.getpid()))
        else:  # its place in the job: node_rank
            agent.identify(torchrun_node(env, info.node_rank, multi))
        if not unique:  # the name is final now: refused before this job's coordinator writes there
            claim = claim_run_dir(run_dir, agent.node, job_id)  # (the ranks started meanwhile are stopped below)
        if multi:
            secret = load_secret(env, config.secret_file)
            address = config.coordinator or f"{info.coordinator_host or '127.0.0.1'}:{DEFAULT_COORDINATOR_PORT}"
            job_id = resolve_job_id(config, env, address=address, rendezvous=info.rendezvous)
            agent.job_id = job_id
            if env.get("NEURON_WATCH_HOST_COORDINATOR", "1") != "0" and _may_host(config, info, address):
                try:
                    # the coordinator in a process of its own: its crash (a libzmq abort) is not this
                    # node's, and this wrapper starts it again (docs/multinode.md)
                    host = hosted_coordinator(config, bind=f"0.0.0.0:{address.rsplit(':', 1)[1]}", run_dir=run_dir,
                                             job_id=job_id, nodes=info.nodes_to_judge, node=agent.node,
                                             job_started=_job_started(agent, launcher, config, run_dir, job_id,
                                                                      info.nnodes or 1))
                    host.start()
                except PortInUse:
                    host = None
                    if not info.elastic:
                        raise  # node_rank 0 hosts it: a port held by anything else is the operator's to free
                    # Another wrapper on this host bound it first: a node of this job (it hosts the
                    # coordinator, this node joins it), or another job (its coordinator refuses this
                    # node, naming both jobs).
                    say(f"node {agent.node}: the coordinator port {address} is taken on this host: joining "
                        "whoever holds it as an agent (another node of this job; another job's coordinator "
                        "would refuse this node, and that is said)")
        else:
            secret = secrets.token_bytes(32)
            coord = build_coordinator(config, kb, bind="127.0.0.1:0", secret=secret, run_dir=run_dir, job_id=job_id,
                                      nodes=1, health=health, status_line=status_line)
            address = coord.endpoint.replace("tcp://", "")
        if coord is None:  # this node's file faults reach the coordinator as lines of the node
            health.listeners.append(agent.tell_io_fault)
        if coord is not None:
            coord.events.emit(EventKind.JOB_STARTED, 0,
                              **_job_started(agent, launcher, config, run_dir, job_id, info.nnodes or 1))
        agent.attach(AgentLink(address, secret, job=job_id, node=agent.node, session=new_session(time.time())))
        agent.introduce()
        code = run_node_loop(agent, coord, signals, address, host)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        retried = agent.close(config.stop_timeout)
        if retried is not None and coord is not None:
            coord.events.emit(EventKind.UPLOAD, coord.generation, node=agent.node, retry_at_exit=True, **retried)
        if agent._link is not None:
            agent.link.close()
        if coord is not None:
            close_coordinator(coord, kb)
        if host is not None:
            host.close()
        if claim is not None:
            claim.close()
        release(guardian, guardian_fd)
    if coord is not None or host is not None:
        say(f"exit code {code}; events in {os.path.join(run_dir, 'events.jsonl')}")
    else:
        say(f"node {agent.node} done: exit code {code} (the job's decisions are on the coordinator's console)")
    return code


def _job_started(agent: NodeAgent, launcher: Launcher, config: WatchConfig, run_dir: str, job_id: str,
                 nodes: int) -> dict[str, Any]:
    """The ``job_started`` event's fields, written by the job's coordinator (here or its own process)."""
    checkpoint = agent.gen.checkpoint if agent.gen else ""
    return {"job_id": job_id, "node": agent.node, "version": __version__,
            "command": mask_value(launcher.command(os.path.join(run_dir, "gen-0"), checkpoint)),
            "checkpoint": checkpoint or None, "config": config.redacted(), "nodes": nodes,
            "liveness": agent.liveness_plan()}


def _placed(agent: NodeAgent) -> bool:
    """Whether this node knows the job's shape and its place in it (watching the ranks meanwhile).

    An elastic rendezvous gives the place at run time: the workers carry it (``GROUP_RANK``), so
    the node waits for them, or for its launcher's end (a rendezvous that failed places nobody).
    Workers that do not say it (a launcher that sets no ``GROUP_RANK``) end the wait too: the node
    is then named by its wrapper's pid, never left unwatched. Two wrappers on one host share the
    host name; the place tells them apart from the start."""
    if not agent.watch_early():
        return False
    info = agent.info
    workers = agent.gen is not None and bool(agent.gen.worker_pids)
    return info is None or not info.elastic or agent.group_rank is not None or agent.launcher_ended or workers


def _check_left(agent: NodeAgent) -> bool:
    """Whether the launcher's configuration check was left to its early end and no worker was seen."""
    gen, info = agent.gen, agent.info
    return (agent.refused is None and gen is not None and info is not None and agent.launcher.checks_after_exit(info)
            and not gen.worker_pids and not gen.ended_pids)


def _check_pending(agent: NodeAgent) -> bool:
    """Whether the launcher's configuration check waits on its first worker or its early end."""
    return _check_left(agent) and not agent.launcher_ended


def _ended_before_workers(agent: NodeAgent) -> bool:
    """The launcher failed before any worker was seen, and its configuration check was left to now."""
    return _check_left(agent) and agent.gen is not None and agent.gen.exit_code not in (None, 0)


def _may_host(config: WatchConfig, info: LaunchInfo, address: str) -> bool:
    """Whether this node may host the coordinator: ``node_rank`` 0 of a static rendezvous; in an
    elastic one, a node on the coordinator's host (``--rdzv_conf is_host=`` decides for the
    rendezvous host, as it does for torchrun's store), which hosts it if it binds the port first."""
    if not info.elastic:
        return info.node_rank == 0
    if config.coordinator is None and info.rendezvous_host is not None:
        return info.rendezvous_host
    return on_this_host(address.rsplit(":", 1)[0].strip("[]"))


def _await_refusal(agent: NodeAgent, signals: SignalLatch) -> int | None:
    """The launcher's shape reader refused its arguments: wait for the launcher's own exit (it reads
    them the same way). Returns its exit code, or None if it still runs after :data:`REFUSAL_WAIT`
    or a signal came first (then it is watched as a job of unknown shape: never stopped on our word)."""
    gen = agent.gen
    deadline = time.monotonic() + REFUSAL_WAIT
    while gen is not None and gen.exit_code is None and signals.received is None and time.monotonic() < deadline:
        agent.watch_early()
        time.sleep(0.02)
    if gen is None or gen.exit_code is None:
        log.warning("%s; %s still runs: watched as a job whose shape is unknown", agent.refused,
                    agent.launcher.name)
        return None
    return gen.exit_code


def _record_without_coordinator(config: WatchConfig, run_dir: str, job_id: str, node: str, launcher: Launcher,
                                code: int, state: str, reason: str, verdict: Verdict | None = None) -> None:
    """The run ended before it had a coordinator (a signal before the job's shape was known, the
    launcher refusing its arguments): record its start, ``verdict`` and end in this node's
    events.jsonl, so that its events still end with ``job_finished``."""
    try:
        events = EventLog(os.path.join(run_dir, "events.jsonl"))
    except OSError as exc:
        log.warning("events.jsonl not written (%s): %s", exc, reason)
        return
    attach_sinks(events, config, job_id)
    try:
        events.emit(EventKind.JOB_STARTED, 0, job_id=job_id, node=node, version=__version__,
                    command=mask_value(launcher.command(os.path.join(run_dir, "gen-0"), "")), checkpoint=None,
                    config=config.redacted(), nodes=None)
        if verdict is not None:
            events.emit(EventKind.VERDICT, 0, **verdict.to_dict(), last_progress=None, last_step=None)
        events.emit(EventKind.JOB_FINISHED, 0, exit_code=code, restarts=0, state=state, incidents=0,
                    reason=reason, last_progress=None, last_step=None)
    finally:
        events.close()
