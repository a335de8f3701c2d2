"""A launcher for a command that is itself one rank: an srun task of ``neuron-watch srun``.

Megatron-LM, NeMo and many Slurm scripts start one process per rank with srun itself
(``srun --ntasks-per-node 8 python train.py``) and read the rank from ``SLURM_PROCID``, instead of
one task per node running torchrun. Each such task is a rank: its output is that rank's output,
its process is that rank's process, its exit that rank's exit. This launcher runs the command as
our child in a process group we own, with its stdout and stderr in one file laid out like
torchrun's per-rank files (``<log root>/task/attempt_0/0/stdout.log``), so the agent tails it,
attributes it and judges it exactly as it does torchrun's ranks. The rank is told to the agent's
process sampler and to the rank probe by ``NEURON_WATCH_RANK`` in the task's environment
(never ``RANK``: the job's own variables are left as they are).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from neuron_watch.errors import UsageError
from neuron_watch.launchers.base import Launcher, LaunchInfo, replace_placeholder
from neuron_watch.node.procs import start_in_new_group

#: The task's rank, for our process sampler and the rank probe (the job's RANK is not touched).
RANK_ENV = "NEURON_WATCH_RANK"


class TaskLauncher(Launcher):
    """Runs ``argv`` (``{checkpoint}`` replaced) as rank ``rank``."""

    name = "task"

    def __init__(self, argv: list[str], marker: str, rank: int) -> None:
        super().__init__(marker)
        if not argv:
            raise UsageError("no command to run in the task", "e.g. neuron-watch srun -n 8 python train.py")
        self.argv = argv
        self.rank = rank
        self._out: int | None = None

    @property
    def own_rank(self) -> int | None:
        return self.rank

    def command(self, gen_dir: str, checkpoint: str) -> list[str]:
        return replace_placeholder(self.argv, checkpoint)

    def describe(self, gen_dir: str) -> LaunchInfo:
        # One rank per task: local rank 0 of its file is global rank `rank`.
        return LaunchInfo(nproc_per_node=1, rank_offset=self.rank, log_dir=self.log_root(gen_dir))

    def output_file(self, gen_dir: str) -> str:
        return os.path.join(self.log_root(gen_dir), "task", "attempt_0", "0", "stdout.log")

    def start(self, gen_dir: str, checkpoint: str, env: Mapping[str, str]) -> int:
        path = self.output_file(gen_dir)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        child_env = {**env, RANK_ENV: str(self.rank)}
        with open(path, "ab") as out:  # the child keeps its own descriptor
            self.proc = start_in_new_group(self.command(gen_dir, checkpoint), child_env, stdin=subprocess.DEVNULL,
                                           stdout=out, stderr=subprocess.STDOUT)
        return self.proc.pid

    @property
    def pid(self) -> int | None:
        """The process whose children are the ranks: this agent (its one child, the task, is the rank)."""
        return None if self.proc is None else os.getpid()
