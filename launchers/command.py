"""A launcher for an arbitrary per-node command (the task of ``neuron-watch srun``).

The Neuron pattern is one srun task per node running a per-node script that itself runs
``torchrun``. The command runs as our child in a process group we own. To see every rank the
way ``neuron-watch torchrun`` does, a ``torchrun`` shim is put first on the command's PATH: it
records its pid (``<gen-dir>/torchrun.pid``) and execs the real torchrun with
``--log-dir <gen-dir>/torchrun --redirects 3`` *before* the script's own arguments (a script's
own ``--log-dir``/``--redirects`` still wins: argparse keeps the last value). The agent tails
those per-rank files and samples torchrun's workers (:attr:`CommandLauncher.pid` is torchrun's
pid once the shim ran). The command's own stdout/stderr is the launcher output (``launcher.log``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from neuron_watch.errors import PlatformError, UsageError
from neuron_watch.launchers.base import Launcher, LaunchInfo, replace_placeholder

SHIM_DIR = "bin"
PID_FILE = "torchrun.pid"


def shim_text(real_torchrun: list[str], gen_dir: str, log_dir: str | None = None) -> str:
    """The ``torchrun`` shim: record our pid, exec the real torchrun with our log dir first."""
    log_dir = log_dir or os.path.join(gen_dir, "torchrun")
    return (
        "#!/bin/sh\n"
        "# neuron-watch: per-rank files for the watchdog, then the real torchrun (exec keeps this pid)\n"
        f"echo $$ > {shlex.quote(os.path.join(gen_dir, PID_FILE))}\n"
        f"exec {shlex.join(real_torchrun)} --log-dir {shlex.quote(log_dir)} --redirects 3 \"$@\"\n"
    )


class CommandLauncher(Launcher):
    """Runs ``argv`` (``{checkpoint}`` replaced) with a torchrun shim first on its PATH."""

    name = "command"

    def __init__(self, argv: list[str], marker: str, real_torchrun: list[str] | None = None) -> None:
        super().__init__(marker)
        if not argv:
            raise UsageError("no command to run on the node", "e.g. neuron-watch srun -N 2 ./run-node.sh")
        self.argv = argv
        self.real_torchrun = real_torchrun
        self.gen_dir: str | None = None

    def _torchrun(self) -> list[str] | None:
        if self.real_torchrun is None:
            from neuron_watch.launchers.torchrun import torchrun_command

            try:
                self.real_torchrun = torchrun_command()[0]
            except PlatformError:
                return None  # no torchrun here: the command runs without the shim
        return self.real_torchrun

    def command(self, gen_dir: str, checkpoint: str) -> list[str]:
        return replace_placeholder(self.argv, checkpoint)

    def describe(self, gen_dir: str) -> LaunchInfo:
        # Shape unknown up front (the script decides); ranks are numbered from torchrun's workers.
        return LaunchInfo(log_dir=self.log_root(gen_dir))

    def start(self, gen_dir: str, checkpoint: str, env: Mapping[str, str]) -> int:
        self.gen_dir = gen_dir
        child_env = dict(env)
        real = self._torchrun()
        if real is not None:
            shim_dir = os.path.join(gen_dir, SHIM_DIR)
            os.makedirs(shim_dir, exist_ok=True)
            shim = os.path.join(shim_dir, "torchrun")
            with open(shim, "w", encoding="utf-8") as f:
                f.write(shim_text(real, gen_dir, self.log_root(gen_dir)))
            os.chmod(shim, 0o755)
            child_env["PATH"] = shim_dir + os.pathsep + env.get("PATH", os.defpath)
        return super().start(gen_dir, checkpoint, child_env)

    @property
    def pid(self) -> int | None:
        """torchrun's pid once the shim ran and while it lives (its children are the ranks), else the command's."""
        if self.proc is None:
            return None
        if self.gen_dir is not None:
            try:
                with open(os.path.join(self.gen_dir, PID_FILE), encoding="utf-8") as f:
                    pid = int(f.read().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if pid > 0 and os.path.exists(f"/proc/{pid}"):
                return pid
        return self.proc.pid
