"""``neuron-watch torchrun ...``: torchrun as our child, its arguments passed on unchanged.

We add ``--log-dir <gen-dir>/torchrun --redirects 3`` *before* the user's arguments (argparse keeps
the last value, so a user's own ``--log-dir``/``--redirects`` still wins), so every rank's output
lands in per-rank files we tail. The job's shape (nproc, nnodes, node_rank) is read with
torchrun's own argument parser, run by torchrun's own interpreter: never re-implemented here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import PlatformError, UsageError
from neuron_watch.launchers.base import Launcher, LaunchInfo, replace_placeholder

_PARSE_SNIPPET = r"""
import json, sys
from torch.distributed.run import get_args_parser
a = get_args_parser().parse_args(sys.argv[1:])
print(json.dumps({k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                  for k, v in vars(a).items()}))
"""


def torchrun_command() -> tuple[list[str], str]:
    """argv prefix that runs torchrun, and the Python interpreter it uses.

    Raises:
        PlatformError: neither ``torchrun`` on PATH nor ``torch`` importable here.
    """
    exe = shutil.which("torchrun")
    if exe:
        python = sys.executable
        try:
            with open(exe, "rb") as f:
                first = f.readline().decode("utf-8", "replace").strip()
            if first.startswith("#!") and "python" in first:
                python = first[2:].strip().split()[0]
        except OSError:
            pass
        return [exe], python
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is not None:
            return [sys.executable, "-m", "torch.distributed.run"], sys.executable
    except (ImportError, ValueError):
        pass
    raise PlatformError(
        "torchrun not found: it is not on PATH and torch is not installed for this Python",
        "activate the environment that has torch (pip install torch), or put torchrun on PATH",
    )


class TorchrunLauncher(Launcher):
    name = "torchrun"

    def __init__(self, user_args: list[str], marker: str) -> None:
        super().__init__(marker)
        if not user_args:
            raise UsageError("torchrun needs arguments (at least the training script)",
                             "e.g. neuron-watch torchrun --nproc_per_node 4 train.py")
        self.user_args = user_args
        self.prefix, self.python = torchrun_command()

    def our_args(self, gen_dir: str) -> list[str]:
        return ["--log-dir", self.log_root(gen_dir), "--redirects", "3"]

    def command(self, gen_dir: str, checkpoint: str) -> list[str]:
        return [*self.prefix, *self.our_args(gen_dir), *replace_placeholder(self.user_args, checkpoint)]

    def parse(self, gen_dir: str) -> dict[str, Any]:
        """torchrun's parsed arguments (by its own parser). Raises UsageError if it refuses them."""
        argv = [*self.our_args(gen_dir), *replace_placeholder(self.user_args, "")]
        # Lowest CPU priority: importing torch takes ~1.5 CPU-s, and the ranks starting at the same
        # moment need the cores more than we need the answer (nothing is lost while we wait).
        r = subprocess.run([self.python, "-c", _PARSE_SNIPPET, *argv], capture_output=True, text=True,
                           timeout=120, preexec_fn=lambda: os.nice(19))
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UsageError(f"torchrun rejects its arguments: {last}", "check the arguments after `torchrun`")
        parsed: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
        return parsed

    def describe(self, gen_dir: str) -> LaunchInfo:
        a = self.parse(gen_dir)
        warnings = []
        if str(a.get("redirects")) not in ("3", "Std.ALL"):
            warnings.append(f"--redirects {a.get('redirects')}: only redirected streams can be watched")
        host = str(a.get("master_addr") or "")
        endpoint = str(a.get("rdzv_endpoint") or "")
        if str(a.get("rdzv_backend", "static")) != "static" and endpoint:
            host = endpoint.rsplit(":", 1)[0] if ":" in endpoint else endpoint
        nproc_text, nnodes_text = str(a.get("nproc_per_node")), str(a.get("nnodes", "1")).split(":")[-1]
        nproc = int(nproc_text) if nproc_text.isdigit() else None
        nnodes = int(nnodes_text) if nnodes_text.isdigit() else None
        node_rank = int(str(a["node_rank"])) if str(a.get("node_rank", "")).lstrip("-").isdigit() else None
        # A static rendezvous makes node_rank the group rank, so the global ranks are known before
        # start (the same --nproc_per_node on every node, as launch scripts pass it); any other
        # rendezvous assigns them at run time and the agent reads them from the workers.
        static = str(a.get("rdzv_backend", "static")) == "static" and not a.get("standalone")
        offset = 0 if nnodes == 1 else (node_rank * nproc if static and nproc and node_rank is not None else None)
        return LaunchInfo(
            nproc_per_node=nproc,
            nnodes=nnodes,
            node_rank=node_rank,
            rank_offset=offset,
            log_dir=str(a.get("log_dir") or self.log_root(gen_dir)),
            coordinator_host=host.strip("[]") or None,
            warnings=tuple(warnings),
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:  # pragma: no cover - verbatim command
    """torchrun's arguments are passed through verbatim (see cli.SUBCOMMANDS)."""


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    from neuron_watch.supervisor import run_supervised

    return run_supervised(config, lambda marker: TorchrunLauncher(list(args.launcher_args), marker))
