"""``neuron-watch torchrun ...``: torchrun as our child, its arguments passed on unchanged.

We add ``--log-dir <gen-dir>/torchrun --redirects 3`` *before* the user's arguments (argparse keeps
the last value, so a user's own ``--log-dir``/``--redirects`` still wins), so every rank's output
lands in per-rank files we tail. The job's shape (nproc, nnodes, node_rank) is read with
torchrun's own argument parser, run by torchrun's own interpreter: never re-implemented here.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from neuron_watch.errors import LauncherArgsError, PlatformError, UsageError
from neuron_watch.launchers.base import PER_GENERATION_ENV, Launcher, LaunchInfo, replace_placeholder
from neuron_watch.launchers.torchrun_args import CHECK
from neuron_watch.node.procs import StopResult, can_raise_priority_to, start_in_new_group, stop_group

log = logging.getLogger(__name__)

def _parse_snippet() -> str:
    """The program that runs torchrun's own parser (``torchrun_args``), for ``python -c``: the Python
    running torchrun may lack neuron_watch, and that program imports no torch (~1.5 CPU-s less)."""
    with open(os.path.join(os.path.dirname(__file__), "torchrun_args.py"), encoding="utf-8") as f:
        return f.read()


#: A torchrun started ahead of the next generation: it imports torchrun's module (the slow part,
#: ~1.5 CPU-s) while the job still runs, at nice 19 when it may return to our priority, so that it
#: takes only idle CPU from the ranks; then waits for its go-ahead (one JSON line on stdin: the
#: generation's arguments, environment and priority) and runs exactly what ``torchrun ARGS`` runs.
#: EOF: not needed, exit 0.
_SPARE_SNIPPET = r"""
import json, os, sys
if sys.argv[1:] == ["idle"]:
    os.nice(19)
import torch.distributed.run as run
line = sys.stdin.readline()
if not line:
    sys.exit(0)
go = json.loads(line)
os.setpriority(os.PRIO_PROCESS, 0, go["nice"])
os.environ.clear()
os.environ.update(go["env"])
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
sys.argv = [go["argv0"], *go["args"]]
sys.path[0] = go["path0"]
sys.exit(run.main(go["args"]))
"""

# torchrun's last words on a failure (ChildFailedError's report): "Root Cause (first observed
# failure):", the failed rank, then a rule of "=". Its workers are gone by then; what is left is
# half a second of interpreter teardown, and it exits with 1 (an uncaught exception).
_ROOT_CAUSE = re.compile(r"^Root Cause \(first observed failure\):\s*$")
_RULE = re.compile(r"^={20,}\s*$")

#: The stock console script: a ``torchrun`` on PATH that is anything else is never pre-started.
_CONSOLE_SCRIPT = b"from torch.distributed.run import main"


def torchrun_command(python: str | None = None) -> tuple[list[str], str]:
    """argv prefix that runs torchrun, and the Python interpreter it uses. ``python``: the interpreter the
    user named (``python3 -m torch.distributed.run ARGS``): torchrun as its module.

    Raises:
        PlatformError: that interpreter not found; or neither ``torchrun`` on PATH nor ``torch`` importable here.
    """
    if python is not None:
        found = shutil.which(python)
        if found is None:
            raise PlatformError(f"{python} not found (the interpreter of `{python} -m torch.distributed.run`)",
                                "name an interpreter on PATH or by its path, or use `neuron-watch torchrun ARGS`")
        return [found, "-m", "torch.distributed.run"], found
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

    def __init__(self, user_args: list[str], marker: str, python: str | None = None) -> None:
        super().__init__(marker)
        if not user_args:
            raise UsageError("torchrun needs arguments (at least the training script)",
                             "e.g. neuron-watch torchrun --nproc_per_node 4 train.py")
        self.user_args = user_args
        self.prefix, self.python = torchrun_command(python)
        self.spare: subprocess.Popen[bytes] | None = None
        self._spare_entry = _spare_entry(self.prefix)  # None: this torchrun is never pre-started
        self._spare_env: dict[str, str] = {}
        self._spare_broken = False  # a spare failed once: start the usual way from then on
        self._root_cause = False  # this generation's failure report has begun
        self._describing: subprocess.Popen[bytes] | None = None  # torchrun's parser, reading the job's shape

    def reports_end(self, text: str) -> bool:
        if _ROOT_CAUSE.match(text):
            self._root_cause = True
            return False
        return self._root_cause and bool(_RULE.match(text))

    # -- the spare: the next generation's torchrun, started ahead -------------------------------

    def prewarm(self, env: Mapping[str, str]) -> None:
        """Start the next generation's torchrun now, to wait for its arguments (no-op if one waits)."""
        if self._spare_entry is None or self._spare_broken or self.spare_pids():
            return
        self._discard_spare()
        self._spare_env = dict(env)
        # Without the right to return to our priority it imports at ours (~1.5 CPU-s per generation).
        idle = can_raise_priority_to(os.getpriority(os.PRIO_PROCESS, 0))
        self.spare = start_in_new_group([self.python, "-c", _SPARE_SNIPPET, *(["idle"] if idle else [])], env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def spare_pids(self) -> tuple[int, ...]:
        return (self.spare.pid,) if self.spare is not None and self.spare.poll() is None else ()

    def start(self, gen_dir: str, checkpoint: str, env: Mapping[str, str]) -> int:
        """Start a generation: hand it to the spare when one waits with the same environment."""
        self._root_cause = False
        spare, self.spare = self.spare, None
        entry = self._spare_entry
        if spare is not None and entry is not None and _same_but_generation(self._spare_env, env):
            go = {"argv0": entry[0], "path0": entry[1], "env": dict(env), "nice": os.getpriority(os.PRIO_PROCESS, 0),
                  "args": [*self.our_args(gen_dir), *replace_placeholder(self.user_args, checkpoint)]}
            assert spare.stdin is not None
            try:
                spare.stdin.write(json.dumps(go).encode() + b"\n")
                spare.stdin.close()
            except OSError:  # it died: say why, then start the usual way
                pass
            else:
                log.info("generation starts in the pre-started torchrun (pid %d)", spare.pid)
                return self._adopt(spare)
        if spare is not None:
            self._give_up_on(spare)
        return super().start(gen_dir, checkpoint, env)

    def _give_up_on(self, spare: subprocess.Popen[bytes]) -> None:
        code = stop_group(spare, 5.0) if spare.poll() is None else spare.returncode
        if code not in (0, -15):
            out = spare.stdout.read().decode("utf-8", "replace").strip() if spare.stdout else ""
            last = out.splitlines()[-1] if out else "(no output)"
            log.warning("the pre-started torchrun exited with %s (%s); torchrun starts the usual way from now on",
                        code, last)
            self._spare_broken = True
        if spare.stdout is not None:
            spare.stdout.close()

    def _discard_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            if spare.stdin is not None:
                spare.stdin.close()
            self._give_up_on(spare)

    def stop(self, grace: float, first_signal: int = signal.SIGTERM, keep_spare: bool = False) -> StopResult:
        result = super().stop(grace, first_signal, keep_spare)
        if not keep_spare:
            self._discard_spare()
        return result

    def our_args(self, gen_dir: str) -> list[str]:
        return ["--log-dir", self.log_root(gen_dir), "--redirects", "3"]

    def command(self, gen_dir: str, checkpoint: str) -> list[str]:
        return [*self.prefix, *self.our_args(gen_dir), *replace_placeholder(self.user_args, checkpoint)]

    def parse(self, gen_dir: str) -> dict[str, Any]:
        """torchrun's parsed arguments (by its own parser and its configuration check). Raises
        LauncherArgsError if it refuses them."""
        argv = self._check_argv(gen_dir)
        # Lowest CPU priority: the ranks starting at the same moment need the cores more than we
        # need the answer (nothing is lost while we wait).
        r = subprocess.run([self.python, "-c", _parse_snippet(), *argv], capture_output=True, text=True,
                           timeout=120, preexec_fn=lambda: os.nice(19))
        return _shape(r.returncode, r.stdout, r.stderr)

    def _check_argv(self, gen_dir: str) -> list[str]:
        """The reader's arguments asking for torchrun's configuration check after its parser."""
        return [CHECK, *self.our_args(gen_dir), *replace_placeholder(self.user_args, "")]

    def describe(self, gen_dir: str) -> LaunchInfo:
        return self._info(self.parse(gen_dir), gen_dir)

    def checks_after_exit(self, info: LaunchInfo) -> bool:
        # Whatever the shape: torchrun checks its configuration before its rendezvous (torchrun_args),
        # so a torchrun of several nodes that refuses it ends early as one of one node does
        return True

    def refusal(self, gen_dir: str, timeout: float) -> LauncherArgsError | None:
        """torchrun's configuration check, for a torchrun that ended before any worker started (its
        shape reader leaves the check out: it imports torch, 4.4-4.6 CPU-s, which a launch that
        starts its workers never needs). None: no refusal, or no answer by ``timeout``."""
        argv = self._check_argv(gen_dir)
        proc = start_in_new_group([self.python, "-c", _parse_snippet(), *argv], os.environ, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc, 2.0)
            proc.communicate()
            log.warning("torchrun's configuration check gave no answer in %.0fs: its exit is judged as any other",
                        timeout)
            return None
        try:
            _shape(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        except LauncherArgsError as exc:
            return exc
        return None

    def describe_later(self, gen_dir: str) -> Callable[[], LaunchInfo | None]:
        """torchrun's parser in a child of ours (nice 19, as :meth:`parse`), polled from the watch loop:
        it takes a moment under load, and rank output and exits are watched meanwhile."""
        argv = [*self.our_args(gen_dir), *replace_placeholder(self.user_args, "")]
        proc = start_in_new_group([self.python, "-c", _parse_snippet(), *argv], os.environ, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: os.nice(19))
        self._describing = proc

        def poll() -> LaunchInfo | None:
            if proc.poll() is None:
                return None
            out, err = proc.communicate()
            self._describing = None
            return self._info(_shape(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")),
                              gen_dir)

        return poll

    def close(self) -> None:
        proc, self._describing = self._describing, None
        if proc is not None:  # the shape was never needed (we stop early): end and reap its reader
            stop_group(proc, 2.0)
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
        super().close()

    def _info(self, a: dict[str, Any], gen_dir: str) -> LaunchInfo:
        warnings = []
        if str(a.get("redirects")) not in ("3", "Std.ALL"):
            warnings.append(f"--redirects {a.get('redirects')}: only redirected streams can be watched")
        host = str(a.get("master_addr") or "")
        endpoint = str(a.get("rdzv_endpoint") or "")
        if str(a.get("rdzv_backend", "static")) != "static" and endpoint:
            host = endpoint.rsplit(":", 1)[0] if ":" in endpoint else endpoint
        nproc_text = str(a.get("nproc_per_node"))
        min_text, _, nnodes_text = str(a.get("nnodes", "1")).rpartition(":")  # "N", or an elastic range "MIN:MAX"
        nproc = int(nproc_text) if nproc_text.isdigit() else None
        nnodes = int(nnodes_text) if nnodes_text.isdigit() else None
        min_nnodes = int(min_text) if min_text.isdigit() else None
        node_rank = int(str(a["node_rank"])) if str(a.get("node_rank", "")).lstrip("-").isdigit() else None
        # A static rendezvous makes node_rank the group rank, so the global ranks are known before
        # start (the same --nproc_per_node on every node, as launch scripts pass it); any other
        # rendezvous assigns them at run time and the agent reads them from the workers.
        static = str(a.get("rdzv_backend", "static")) == "static" and not a.get("standalone")
        offset = 0 if nnodes == 1 else (node_rank * nproc if static and nproc and node_rank is not None else None)
        return LaunchInfo(
            elastic=not static and (nnodes or 1) > 1,
            rendezvous_host=_is_host(str(a.get("rdzv_conf") or "")),
            nproc_per_node=nproc,
            nnodes=nnodes,
            min_nnodes=min_nnodes,
            node_rank=node_rank,
            rank_offset=offset,
            log_dir=str(a.get("log_dir") or self.log_root(gen_dir)),
            coordinator_host=host.strip("[]") or None,
            rendezvous=" ".join(f"{k}={a.get(k)}" for k in ("rdzv_backend", "rdzv_endpoint", "rdzv_id",
                                                             "master_addr", "master_port")),
            warnings=tuple(warnings),
        )


def _shape(code: int, out: str, err: str) -> dict[str, Any]:
    """The arguments torchrun's reader (``torchrun_args``) printed.

    Raises:
        LauncherArgsError: torchrun refuses its arguments (its parser or its configuration check), or reads
            no job from them (``--help`` prints the usage and exits 0).
    """
    lines = out.strip().splitlines()
    if code == 0 and lines and lines[-1].startswith("{"):
        try:
            parsed: dict[str, Any] = json.loads(lines[-1])
            return parsed
        except ValueError:
            pass
    last = (err.strip().splitlines() or lines or ["(no output)"])[-1]
    what = "rejects its arguments" if code != 0 else "reads no job from its arguments"
    raise LauncherArgsError(f"torchrun {what}: {last}", "check the arguments after `torchrun` (torchrun --help)")


def _spare_entry(prefix: list[str]) -> tuple[str, str] | None:
    """(argv0, sys.path[0]) a spare must present to run as ``prefix`` does, or None if it cannot."""
    if prefix[1:3] == ["-m", "torch.distributed.run"]:
        return "torch.distributed.run", os.getcwd()
    if len(prefix) == 1:
        try:
            with open(prefix[0], "rb") as f:
                script = f.read(4096)
        except OSError:
            return None
        if _CONSOLE_SCRIPT in script:
            return prefix[0], os.path.dirname(prefix[0])
    return None


def _same_but_generation(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two environments differ only in the per-generation variables."""
    return ({k: v for k, v in a.items() if k not in PER_GENERATION_ENV}
            == {k: v for k, v in b.items() if k not in PER_GENERATION_ENV})


def _is_host(rdzv_conf: str) -> bool | None:
    """torchrun's ``--rdzv_conf ... is_host=<bool>`` (the operator saying whether this node hosts the
    rendezvous store, where the host-name match fails: secondary NICs, CNAMEs); None if not given."""
    for item in rdzv_conf.split(","):
        key, _, value = item.partition("=")
        if key.strip() == "is_host":
            text = value.strip().lower()
            if text in ("1", "true", "t", "yes", "y", "on"):
                return True
            if text in ("0", "false", "f", "no", "n", "off"):
                return False
    return None
