"""The contract between the supervisor and a way of starting a job on one node."""

from __future__ import annotations

import abc
import fcntl
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from neuron_watch.errors import LauncherArgsError
from neuron_watch.node.procs import StopResult, forward_signal, start_in_new_group, stop_everything

#: What changes in the ranks' environment from one generation to the next (nothing else may).
# NEURON_WATCH_PROBE_DIR: each generation's ranks get fresh worker-server sockets (rank_probe.py).
PER_GENERATION_ENV = frozenset({"NEURON_WATCH_CHECKPOINT", "NEURON_WATCH_RESTART_COUNT", "NEURON_WATCH_GENERATION",
                                "NEURON_WATCH_PROBE_DIR"})


@dataclass(frozen=True)
class LaunchInfo:
    """What the launcher knows about the job's shape (None = unknown)."""

    nproc_per_node: int | None = None
    nnodes: int | None = None  # the most nodes the job runs on (an elastic range's maximum)
    #: an elastic range's minimum (torchrun's ``--nnodes 1:4``: the job runs once 1 node joined);
    #: None: ``nnodes``
    min_nnodes: int | None = None
    node_rank: int | None = None
    # Global rank of this node's local rank 0, when the launcher fixes it before start (torchrun's
    # static rendezvous: node_rank * nproc_per_node); None when a rendezvous assigns it at run time.
    rank_offset: int | None = None
    log_dir: str | None = None  # where per-rank output files appear
    coordinator_host: str | None = None  # where node 0 runs (MASTER_ADDR / rendezvous host)
    #: what names this job's rendezvous on every node alike (torchrun: backend, endpoint or master
    #: address and port, rdzv id); two jobs running at once cannot share it. "" = unknown.
    rendezvous: str = ""
    #: the rendezvous gives each node its place at run time (torchrun's c10d, etcd: ``node_rank``
    #: means nothing to them); False when the launch arguments fix it (a static rendezvous)
    elastic: bool = False
    #: the launcher was told whether this node hosts its rendezvous (torchrun's ``--rdzv_conf
    #: is_host=``); None: not told
    rendezvous_host: bool | None = None
    warnings: tuple[str, ...] = ()

    @property
    def nodes_to_judge(self) -> int | None:
        """How many nodes must have joined before the job is judged: the job runs with that many
        (an elastic range's minimum; waiting for its maximum never judged a job that runs below it)."""
        return self.min_nnodes if self.min_nnodes is not None else self.nnodes


def _never() -> bool:
    return False


class Launcher(abc.ABC):
    """Starts one generation of the job on this node as a child in a process group we own.

    Subclasses say which command to run (:meth:`command`) and where rank output appears
    (:meth:`describe`); start/poll/signal/stop are shared.
    """

    name = "launcher"
    #: The exit code a launcher that :meth:`reports_end` of a failed generation exits with.
    gave_up_code = 1

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.tag = ""  # the node's name: per-node paths inside a run dir nodes may share
        #: asked again and again while a stop waits: a second Ctrl-C (SignalLatch.repeated) ends its
        #: deadline at once, SIGKILL and reap (every stop of this launcher, in whichever thread it runs)
        self.hurry: Callable[[], bool] = _never
        self.proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._output_ended = False

    @abc.abstractmethod
    def command(self, gen_dir: str, checkpoint: str) -> list[str]:
        """The exact argv for one generation."""

    def log_root(self, gen_dir: str) -> str:
        """Where this node's per-rank files appear for a generation (torchrun's --log-dir)."""
        return os.path.join(gen_dir, "torchrun", self.tag) if self.tag else os.path.join(gen_dir, "torchrun")

    @abc.abstractmethod
    def describe(self, gen_dir: str) -> LaunchInfo:
        """The job's shape as the launcher's own argument parser sees it (may be slow; called once)."""

    def describe_later(self, gen_dir: str) -> Callable[[], LaunchInfo | None]:
        """Start reading the job's shape without blocking; the returned poll gives None until it is
        known, then the :class:`LaunchInfo` (or raises what :meth:`describe` raises). Default: at once."""
        info = self.describe(gen_dir)
        return lambda: info

    def checks_after_exit(self, info: LaunchInfo) -> bool:
        """Whether :meth:`describe_later` left the launcher's configuration check out for a job of
        this shape, to :meth:`refusal` after an end before any worker started. Default: no."""
        return False

    def refusal(self, gen_dir: str, timeout: float) -> LauncherArgsError | None:
        """Why the launcher refused its arguments, asked after it ended before any worker started,
        where :meth:`describe_later` leaves that check out (a check too costly for every launch).
        Default: None (its shape reader checks whatever it can)."""
        return None

    def start(self, gen_dir: str, checkpoint: str, env: Mapping[str, str]) -> int:
        """Start a generation; returns the child's pid."""
        argv = self.command(gen_dir, checkpoint)
        return self._adopt(start_in_new_group(
            argv, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ))

    def _adopt(self, proc: subprocess.Popen[bytes]) -> int:
        """Make ``proc`` (its output on a pipe) this generation's launcher process."""
        self.proc = proc
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._buf = b""
        self._output_ended = False  # its pipe reached its end (read_output)
        return proc.pid

    def reports_end(self, text: str) -> bool:
        """Whether this line of the launcher's own output completes its report that the generation
        failed, after which it only exits (with :attr:`gave_up_code`). Called on every line, in order."""
        return False

    def prewarm(self, env: Mapping[str, str]) -> None:  # noqa: B027 - optional for a launcher
        """Get the next generation's start ready while this one runs (optional; see TorchrunLauncher)."""

    def spare_pids(self) -> tuple[int, ...]:
        """Processes :meth:`prewarm` started for the next generation (kept by a generation's stop)."""
        return ()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def own_rank(self) -> int | None:
        """The rank this launcher's own process is (a task that is a rank), else None: its ranks
        are its children (torchrun's workers)."""
        return None

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def output_fd(self) -> int | None:
        """The pipe of the launcher's own output while it can still bring lines (None: none, or
        its launcher ended: a pipe at its end is always readable and would wake a loop at once)."""
        proc = self.proc
        if (proc is None or proc.stdout is None or proc.stdout.closed or proc.returncode is not None
                or self._output_ended):
            return None
        return proc.stdout.fileno()

    def read_output(self, final: bool = False) -> list[str]:
        """Lines the launcher itself printed since the last call (non-blocking)."""
        if self.proc is None or self.proc.stdout is None or self.proc.stdout.closed:
            return []
        chunks = []
        while True:
            try:
                data = os.read(self.proc.stdout.fileno(), 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                break
            if not data:
                self._output_ended = True
                break
            chunks.append(data)
        buf = self._buf + b"".join(chunks)
        parts = buf.split(b"\n")
        self._buf = parts.pop()
        if final and self._buf:
            parts.append(self._buf)
            self._buf = b""
        return [p.rstrip(b"\r").decode("utf-8", "replace") for p in parts]

    def send_signal(self, sig: int) -> None:
        if self.proc is not None:
            forward_signal(self.proc, sig)

    def stop(self, grace: float, first_signal: int = signal.SIGTERM, keep_spare: bool = False) -> StopResult:
        """Stop this generation everywhere on the node: one deadline, SIGKILL after it, reap.

        ``keep_spare``: a relaunch follows, so what :meth:`prewarm` started stays.
        """
        return stop_everything(self.marker, self.proc, grace, first_signal,
                               spare=self.spare_pids() if keep_spare else (), hurry=self.hurry)

    def close(self) -> None:
        """Release the output pipe of a generation that has ended (read what is left first)."""
        if self.proc is not None and self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()


def replace_placeholder(args: Sequence[str], checkpoint: str) -> list[str]:
    """``{checkpoint}`` in any argument becomes the chosen checkpoint path ('' when there is none)."""
    return [a.replace("{checkpoint}", checkpoint) for a in args]
