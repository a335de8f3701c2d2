"""``neuron-watch agent``: the per-task agent that ``neuron-watch srun`` starts in each srun step.

    (internal) srun ... python -m neuron_watch.cli --coordinator HOST:PORT --run-dir D --job-id J \\
        agent --generation G -- CMD ...

One srun step is one generation: the agent launches CMD (:class:`~neuron_watch.launchers.command.CommandLauncher`)
as generation G from ``$NEURON_WATCH_CHECKPOINT``, links to the batch host's coordinator with the
job secret from ``$NEURON_WATCH_SECRET`` (never passed on to the command), streams everything, and
carries out the coordinator's commands until it is told to shut down (or loses the coordinator).
A restart is a new step, so this agent never launches a second generation itself. When each task
is a rank (``--task-is-rank``: ``srun --ntasks-per-node 8 python train.py``), CMD is that rank
(:class:`~neuron_watch.launchers.task.TaskLauncher`): its output, process and exit are rank
``SLURM_PROCID``'s, judged like torchrun's ranks.

Its place in the job is ``$SLURM_PROCID``; its name ``$SLURMD_NODENAME`` (``<node>-t<localid>``
for a second task on a node: :func:`~neuron_watch.runtime.slurm_task_node`); its run dir is
``<run dir>/nodes/<name>``. Everything else is wired by :mod:`neuron_watch.runtime`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time

from neuron_watch import __version__
from neuron_watch.config import WatchConfig
from neuron_watch.errors import ExitCode, UsageError
from neuron_watch.launchers.base import Launcher
from neuron_watch.launchers.command import CommandLauncher
from neuron_watch.launchers.task import TaskLauncher
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.guardian import release, start_guardian
from neuron_watch.node.procs import become_subreaper
from neuron_watch.node.signal_latch import SignalLatch
from neuron_watch.runtime import (
    build_agent,
    knowledge_base,
    rank_environment,
    run_node_loop,
    slurm_task_node,
)
from neuron_watch.wire.auth import load_secret


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--generation", type=int, default=0, metavar="G", help="the generation this step runs")
    parser.add_argument("--task-is-rank", action="store_true",
                        help="the command is one rank (its rank SLURM_PROCID), not a per-node launcher")
    parser.add_argument("node_command", nargs=argparse.REMAINDER, metavar="-- CMD", help="the per-node command")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    cmd = list(args.node_command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("`neuron-watch agent` needs `-- CMD ...`", "it is started by `neuron-watch srun`")
    if not config.coordinator or not config.run_dir or not config.job_id:
        raise UsageError("`neuron-watch agent` needs --coordinator, --run-dir and --job-id",
                         "it is started by `neuron-watch srun`, which passes them")
    env = os.environ
    secret = load_secret(env, config.secret_file)
    node = slurm_task_node(env)
    run_dir = os.path.join(os.path.abspath(config.run_dir), "nodes", node.name)
    os.makedirs(run_dir, exist_ok=True)
    marker = f"{config.job_id}-{node.name}-{secrets.token_hex(4)}"
    ranks = rank_environment(config, env, run_dir, config.job_id, marker)
    launcher: Launcher = (TaskLauncher(cmd, marker, node.place) if args.task_is_rank and node.place >= 0
                          else CommandLauncher(cmd, marker))
    print(f"neuron-watch {__version__}: agent for job {config.job_id} on {node.name} (task {node.place}), "
          f"generation {args.generation}, coordinator {config.coordinator}", file=sys.stderr)
    become_subreaper()
    agent = build_agent(config, launcher, knowledge_base(config), job_id=config.job_id, node=node, run_dir=run_dir,
                        rank_env=ranks.env)
    guardian, guardian_fd = start_guardian(marker, min(config.stop_timeout, 5.0))
    signals = SignalLatch()
    launcher.hurry = signals.repeated  # a second Ctrl-C cuts any stop of the job short (SIGKILL, reaped)
    old = signals.install()
    code = int(ExitCode.JOB_FAILED)
    try:
        agent.launch(args.generation, env.get("NEURON_WATCH_CHECKPOINT", ""))
        agent.attach(AgentLink(config.coordinator, secret, job=config.job_id, node=node.name,
                               session=new_session(time.time())))
        agent.introduce()
        code = run_node_loop(agent, None, signals, config.coordinator)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        agent.close(config.stop_timeout)
        if agent._link is not None:
            agent.link.close()
        release(guardian, guardian_fd)
    return code
