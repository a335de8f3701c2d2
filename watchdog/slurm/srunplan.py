"""Pure decisions for ``neuron-watch srun``: split the command line, plan the next srun step.

No I/O: the caller passes the allocation, the bad nodes and the environment values it read.

* :func:`split_srun_args`: ``[SRUN ARGS] CMD ...`` -> (srun args, command). srun's options are
  recognised up to the first word that is neither an option nor an option's value; ``--``
  ends srun's options explicitly (use it, or ``--opt=value``, for options this table lacks).
* :func:`nodes_wanted`: how many nodes a step needs (``-N``/``--nodes`` among the srun args,
  else the allocation's size).
* :func:`tasks_wanted` and :func:`tasks_are_ranks`: whether each srun task is itself a rank (the
  Megatron/NeMo way) or a per-node launcher running torchrun (the Neuron way).
* :func:`plan_restart`: exclude the bad nodes from the next step when enough others remain
  in the allocation, otherwise requeue the job (when it may be requeued) with them excluded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from neuron_watch.errors import UsageError

#: srun short options that take a value as the next word (``-N 2``).
_SHORT_WITH_VALUE = frozenset("ABCDGJLMNSTWcdeilmnopqrtuwxz")
#: srun long options that take a value as the next word when written without ``=``.
_LONG_WITH_VALUE = frozenset({
    "--account", "--acctg-freq", "--auto-resume", "--begin", "--bcast", "--chdir", "--clusters",
    "--comment", "--constraint", "--container", "--core-spec", "--cores-per-socket", "--cpu-bind",
    "--cpu-freq", "--cpus-per-gpu", "--cpus-per-task", "--deadline", "--dependency", "--distribution",
    "--error", "--exclude", "--export", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gres",
    "--gres-flags", "--input", "--job-name", "--jobid", "--kill-on-bad-exit", "--licenses", "--mem",
    "--mem-bind", "--mem-per-cpu", "--mem-per-gpu", "--mpi", "--network", "--nice", "--nodefile",
    "--nodelist", "--nodes", "--ntasks", "--ntasks-per-core", "--ntasks-per-gpu", "--ntasks-per-node",
    "--ntasks-per-socket", "--output", "--partition", "--prolog", "--qos", "--reservation",
    "--signal", "--slurmd-debug", "--sockets-per-node", "--task-epilog", "--task-prolog",
    "--threads-per-core", "--time", "--time-min", "--tmp", "--uid", "--gid", "--wait",
    "--wckey", "--workdir",
})


def split_srun_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``[SRUN ARGS] CMD ...`` -> (srun args, command).

    Raises:
        UsageError: no command follows srun's options.
    """
    srun: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        srun.append(a)
        takes_next = (a in _LONG_WITH_VALUE) or (
            len(a) == 2 and a[0] == "-" and a[1] in _SHORT_WITH_VALUE
        )
        if takes_next and i + 1 < len(argv):
            srun.append(argv[i + 1])
            i += 1
        i += 1
    cmd = list(argv[i:])
    if not cmd:
        raise UsageError("`neuron-watch srun` needs a command after srun's options",
                         "e.g. neuron-watch srun -N 2 --ntasks-per-node 1 ./run-node.sh "
                         "(put `--` before the command if an srun option is not recognised)")
    return srun, cmd


def option_value(srun_args: Sequence[str], short: str | None, long: str) -> str | None:
    """The last value given for an option (``-N 2``, ``-N2``, ``--nodes 2``, ``--nodes=2``), or None."""
    value = None
    for i, a in enumerate(srun_args):
        if a == long or (short is not None and a == short):
            if i + 1 < len(srun_args):
                value = srun_args[i + 1]
        elif a.startswith(long + "="):
            value = a.split("=", 1)[1]
        elif short is not None and a.startswith(short) and len(a) > len(short) and not a.startswith("--"):
            value = a[len(short):]
    return value


def nodes_wanted(srun_args: Sequence[str], allocation_size: int) -> int:
    """Nodes one step needs: ``-N``/``--nodes`` (the minimum of ``MIN-MAX``), else the allocation.

    Raises:
        UsageError: a ``-N`` value that is not a node count.
    """
    raw = option_value(srun_args, "-N", "--nodes")
    if raw is None:
        return allocation_size
    first = raw.split("-", 1)[0]
    if not first.isdigit() or int(first) < 1:
        raise UsageError(f"srun -N {raw!r} is not a node count", "use e.g. -N 2")
    return int(first)


def tasks_wanted(srun_args: Sequence[str], nodes: int) -> int:
    """Tasks one step runs: ``-n``/``--ntasks``, else ``--ntasks-per-node`` x ``nodes``, else one per
    node (srun's default when only ``-N`` is given).

    Raises:
        UsageError: a task count that is not a positive number.
    """
    for short, long, per_node in (("-n", "--ntasks", False), (None, "--ntasks-per-node", True)):
        raw = option_value(srun_args, short, long)
        if raw is None:
            continue
        if not raw.isdigit() or int(raw) < 1:
            raise UsageError(f"srun {long} {raw!r} is not a task count", f"use e.g. {long} 8")
        return int(raw) * nodes if per_node else int(raw)
    return nodes


#: Interpreters whose script is the rank itself (``python3.11 train.py``)
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)*)?$")
#: torch's launchers: a task that runs one is a per-node launcher, whatever else holds
_LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})


def tasks_are_ranks(cmd: Sequence[str], tasks: int, nodes: int) -> bool:
    """Whether each srun task is one rank of the job (``SLURM_PROCID`` its rank), or a per-node
    launcher whose ranks are torchrun's workers.

    torchrun needs one task per node, so more tasks than nodes means each task is a rank
    (``srun --ntasks-per-node 8 python train.py``, Megatron-LM and NeMo on Slurm). With one task per
    node, the command tells: a Python interpreter running a script is the rank itself; torchrun (or
    ``python -m torch.distributed.run``) and anything else (a per-node shell script that runs
    torchrun) is a launcher.
    """
    program = cmd[0].rsplit("/", 1)[-1] if cmd else ""
    if program == "torchrun" or any(a in _LAUNCHER_MODULES for a in cmd[1:3]):
        return False
    if tasks > nodes:
        return True
    return bool(_PYTHON.match(program))


def without_exclude(srun_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """srun args without ``-x``/``--exclude`` (returned apart, so ours can be merged in)."""
    out: list[str] = []
    excluded: list[str] = []
    skip = False
    for i, a in enumerate(srun_args):
        if skip:
            skip = False
            continue
        if a in ("-x", "--exclude"):
            if i + 1 < len(srun_args):
                excluded.append(srun_args[i + 1])
            skip = True
        elif a.startswith("--exclude="):
            excluded.append(a.split("=", 1)[1])
        elif a.startswith("-x") and len(a) > 2:
            excluded.append(a[2:])
        else:
            out.append(a)
    return out, excluded


@dataclass(frozen=True)
class RestartPlan:
    """What the next step does: ``exclude`` (a new step in this allocation), ``requeue`` or ``give_up``."""

    how: str
    exclude: tuple[str, ...]  # nodes kept out of the next step / the requeued job
    usable: tuple[str, ...]  # allocation nodes the next step may use
    why: str


def plan_restart(allocation: Sequence[str], bad: Sequence[str], needed: int, requeue_allowed: bool) -> RestartPlan:
    """Where the next generation runs.

    Args:
        allocation: the job's nodes (expanded ``SLURM_JOB_NODELIST``).
        bad: nodes that must not run the job again (hardware verdicts, remembered drains).
        needed: nodes one step needs.
        requeue_allowed: the job may be requeued (``scontrol show job`` says ``Requeue=1``).
    """
    bad_in = tuple(n for n in allocation if n in set(bad))
    usable = tuple(n for n in allocation if n not in set(bad))
    if len(usable) >= needed:
        why = (f"a new srun step on {len(usable)} usable node(s), excluding {', '.join(bad_in)}" if bad_in
               else "a new srun step in the same allocation")
        return RestartPlan("exclude", bad_in, usable, why)
    excl = tuple(dict.fromkeys(bad))
    if requeue_allowed:
        return RestartPlan("requeue", excl, usable,
                           f"only {len(usable)} usable node(s) left of {len(allocation)} and {needed} needed: "
                           f"requeue the job without {', '.join(excl)}")
    return RestartPlan("give_up", excl, usable,
                       f"only {len(usable)} usable node(s) left of {len(allocation)} and {needed} needed, and the "
                       "job cannot be requeued (submit it with `sbatch --requeue`, or allocate a spare node)")


_STAMP = re.compile(r"^\s*(?:\[?[\d\-/A-Za-z]+[ T])?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s+(?:\d+:\d+\s+)?")


def short_evidence(rank: int | None, text: str) -> str:
    """The evidence part of a drain reason: ``rank R: <line>`` without its timestamp and pid:tid
    prefix (Slurm keeps a node's reason short; the incident bundle has the whole line)."""
    line = _STAMP.sub("", text, count=1).strip()
    return f"rank {rank}: {line}" if rank is not None else line


def slurm_node(agent_node: str) -> str:
    """The Slurm node name behind an agent's node name (``n2-t1`` -> ``n2``)."""
    head, sep, tail = agent_node.rpartition("-t")
    return head if sep and tail.isdigit() else agent_node
