"""Process control and the process table: start in our own group, stop against one deadline, reap.

Everything neuron-watch starts for a job carries ``NEURON_WATCH_INSTANCE=<id>`` in its
environment. torchrun puts every worker in a session of its own (``start_new_session=True`` in
``torch.distributed.elastic``), so a process-group kill of torchrun alone can miss workers; the
marker finds them all, including compiler children, wherever they are in the tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import re
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger("neuron_watch")

MARKER_ENV = "NEURON_WATCH_INSTANCE"
_PR_SET_CHILD_SUBREAPER = 36
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


_CAP_SYS_NICE = 23


def can_raise_priority_to(nice: int) -> bool:
    """Whether a process of ours at nice 19 could set its nice value back to ``nice``
    (CAP_SYS_NICE, or an RLIMIT_NICE that allows it: see setpriority(2))."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            cap = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    except (OSError, ValueError):
        cap = 0
    if cap >> _CAP_SYS_NICE & 1:
        return True
    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    return soft == resource.RLIM_INFINITY or 20 - nice <= soft


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to us (so we can reap them). Linux only; False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_PDEATHSIG = 1


def lifeline(then: Callable[[], object] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGTERM when this process dies (``PR_SET_PDEATHSIG``).

    The guardian cleans up after a wrapper killed alone; killed *together* (``kill -9`` of both, an
    OOM kill of the cgroup's biggest, ``pkill -9 -f neuron-watch``) would leave torchrun and its
    workers running. With the lifeline the kernel itself sends torchrun SIGTERM, and
    torchrun stops its workers (torch/distributed/elastic/multiprocessing/api.py: its SIGTERM handler
    raises SignalException, ``close()`` sends SIGTERM to every worker and SIGKILL after 30 s).
    The signal fires when the *thread* that forked the child ends (prctl(2)), not the process:
    every launch happens on the main thread, which ends only with the process. A start from any
    other thread gets no lifeline, and says so: its child would be sent SIGTERM as that thread
    ends, a healthy job stopped (the guardian still cleans up after a wrapper killed alone). If we
    died between fork and prctl (the parent already changed), the child stops itself at once.
    Linux only: where prctl is missing the lifeline is skipped and the guardian remains the only cleanup.
    """
    parent = os.getpid()
    try:
        prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None
    thread = threading.current_thread()
    if prctl is not None and thread is not threading.main_thread():
        log.warning("a process started from thread %r has no lifeline (its SIGTERM would come when that thread "
                    "ends, not when neuron-watch dies); the guardian still stops it if neuron-watch is killed",
                    thread.name)
        prctl = None

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
        if then is not None:
            then()

    return preexec


def dies_with_parent() -> None:
    """A ``preexec_fn`` (after :func:`lifeline`'s): the child gets SIGKILL, not SIGTERM, when this
    process dies. For a child whose SIGTERM means something else (a hosted coordinator stops the
    whole job on it): it must die with the wrapper as it died inside it, saying nothing to anyone."""
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def start_in_new_group(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None, **kwargs: object
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session/process group that we own, on a
    :func:`lifeline` to this process (a ``preexec_fn`` given runs after it)."""
    then = kwargs.pop("preexec_fn", None)
    proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
        list(argv), env=dict(env), cwd=cwd, start_new_session=True,
        preexec_fn=lifeline(then if callable(then) else None), **kwargs
    )
    protect(proc.pid)
    return proc


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone is the only tolerated failure
        os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as exc:  # not ours: never silently
        log.warning("cannot signal process group %d: %s", pgid, exc)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    state: str
    cpu_seconds: float
    children_cpu_seconds: float = 0.0  # of its children it has reaped (cutime + cstime)


def read_stat(pid: int) -> ProcInfo | None:
    """Parse ``/proc/<pid>/stat``; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        state, ppid, pgid = rest[0], int(rest[1]), int(rest[2])
        utime, stime, cutime, cstime = int(rest[11]), int(rest[12]), int(rest[13]), int(rest[14])
    except (IndexError, ValueError):
        return None
    return ProcInfo(pid, ppid, pgid, state, (utime + stime) / _CLK_TCK, (cutime + cstime) / _CLK_TCK)


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (``kill -0`` is true for zombies)."""
    info = read_stat(pid)
    return info is not None and info.state not in ("Z", "X")


def read_environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return out


def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def marked_pids(marker: str, exclude: Iterable[int] = ()) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``NEURON_WATCH_INSTANCE=<marker>``."""
    needle = f"{MARKER_ENV}={marker}".encode()
    skip = set(exclude) | {os.getpid()}
    out = []
    for pid in all_pids():
        if pid in skip:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                raw = f.read()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if (needle + b"\0" in raw or raw.endswith(needle)) and alive(pid):
            out.append(pid)
    return out


#: Children whose exit status belongs to someone else (a Popen that will wait() for it).
_PROTECTED: set[int] = set()


def protect(pid: int) -> None:
    """Keep :func:`reap_children` away from ``pid`` (its Popen owner collects the exit status)."""
    _PROTECTED.add(pid)


def _my_children() -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        return out
    except (OSError, ValueError):  # kernel without CONFIG_PROC_CHILDREN: scan the table
        me = os.getpid()
        return [p for p in all_pids() if (info := read_stat(p)) is not None and info.ppid == me]


def reap_children() -> list[tuple[int, int]]:
    """Reap exited children that nobody else waits for: orphans re-parented to us as a subreaper.

    Never ``waitpid(-1)``: that would steal the exit status of the launcher we are watching.
    """
    reaped = []
    for pid in _my_children():
        if pid in _PROTECTED:
            continue
        info = read_stat(pid)
        if info is None or info.state not in ("Z", "X"):
            continue
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if got:
            reaped.append((got, status))
    return reaped


@dataclass
class StopResult:
    """How a stop went: the rung reached and anything that would not die."""

    rung: str  # "already_gone" | "sigterm" | "sigkill"
    seconds: float
    survivors: list[int] = field(default_factory=list)
    #: launchers that were stopped (state T, e.g. SIGSTOP) and were sent SIGCONT so the signal could act
    continued: list[int] = field(default_factory=list)
    #: job processes (ranks, their children) that were stopped and were sent SIGKILL at once
    killed_stopped: list[int] = field(default_factory=list)
    #: the deadline was cut short (a second Ctrl-C): SIGKILL before it
    hurried: bool = False


def stop_everything(
    marker: str,
    leader: subprocess.Popen[bytes] | None,
    grace: float,
    first_signal: int = signal.SIGTERM,
    poll: float = 0.05,
    spare: Iterable[int] = (),
    hurry: Callable[[], bool] | None = None,
) -> StopResult:
    """SIGTERM the leader's group and every marked process but ``spare``, SIGKILL what remains at one
    deadline, reap.

    Tolerates only processes that are already gone. ``grace`` is the one deadline for the whole stop;
    ``hurry`` (asked at each poll) ends it early: the user's second Ctrl-C, which wants the stop now
    (rung ``sigkill``, ``hurried`` in the result), never at the price of a process left behind.
    """
    t0 = time.monotonic()
    deadline = t0 + grace
    spare = tuple(spare)
    targets = set(marked_pids(marker, spare))
    leader_alive = leader is not None and leader.poll() is None
    if not targets and not leader_alive:
        reap_children()
        return StopResult("already_gone", 0.0)
    # A stopped process (SIGSTOP, a frozen container, a debugger) keeps a signal pending and never
    # exits. A stopped rank gets SIGKILL at once: continued, it would go on training until its
    # job's own SIGTERM handler let it end (Lightning's waits the whole --stop-timeout), and a job
    # already judged hung has nothing to save from it. Its peers, waiting for it in a collective,
    # get the first signal and see it gone. The launcher is continued instead: it
    # must forward the signal and reap its workers.
    killed_stopped = _stopped(targets)
    for pid in killed_stopped:
        _signal_pid(pid, signal.SIGKILL)
    if leader is not None and leader_alive:
        _signal_group(leader.pid, first_signal)
    for pid in targets.difference(killed_stopped):
        _signal_pid(pid, first_signal)
    continued = _continue_stopped({leader.pid} if leader is not None and leader_alive else set())
    rung = signal.Signals(first_signal).name.lower()
    ended = hurried = False
    while time.monotonic() < deadline:
        reap_children()
        if leader is not None:
            leader.poll()
        if not marked_pids(marker, spare) and (leader is None or leader.returncode is not None):
            ended = True
            break
        if hurry is not None and hurry():
            hurried = True
            break
        time.sleep(poll)
    if not ended:
        rung = "sigkill"
        if leader is not None and leader.poll() is None:
            _signal_group(leader.pid, signal.SIGKILL)
        for pid in marked_pids(marker, spare):
            _signal_pid(pid, signal.SIGKILL)
    # After SIGKILL the kernel needs a moment; wait (bounded) and reap.
    kill_deadline = time.monotonic() + 5.0
    survivors = marked_pids(marker, spare)
    while survivors and time.monotonic() < kill_deadline:
        reap_children()
        time.sleep(poll)
        survivors = marked_pids(marker, spare)
    if leader is not None:
        try:
            leader.wait(timeout=max(0.1, kill_deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            survivors.append(leader.pid)
    reap_children()
    if survivors:
        log.error("processes survived SIGKILL: %s", survivors)
    return StopResult(rung, time.monotonic() - t0, survivors, continued, killed_stopped, hurried)


def _stopped(pids: Iterable[int]) -> list[int]:
    """The processes of ``pids`` in state T (stopped) or t (traced-stop)."""
    return [pid for pid in sorted(pids) if (info := read_stat(pid)) is not None and info.state in ("T", "t")]


def _continue_stopped(pids: Iterable[int]) -> list[int]:
    """SIGCONT every process of ``pids`` in state T (stopped) or t (traced-stop); returns those pids."""
    out = _stopped(pids)
    for pid in out:
        _signal_pid(pid, signal.SIGCONT)
    return out


def stop_group(leader: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM one group we own, SIGKILL it at the deadline, reap the leader; returns its exit code."""
    if leader.poll() is None:
        _signal_group(leader.pid, signal.SIGTERM)
        try:
            leader.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(leader.pid, signal.SIGKILL)
            leader.wait()
    return int(leader.returncode)


#: Grace between SIGTERM and SIGKILL for a tool that overran (:func:`run_bounded`).
KILL_GRACE_S = 1.0


def run_bounded(argv: Sequence[str], timeout: float) -> tuple[int, str, str, bool]:
    """Run ``argv`` in a new session; SIGTERM its group at ``timeout``, SIGKILL after a grace; reap.

    Returns ``(returncode, stdout, stderr, timed_out)``.
    """
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True, text=True, errors="replace",
    )
    try:
        out, err = proc.communicate(timeout=max(0.01, timeout))
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:  # pragma: no cover - SIGKILL always ends communicate(None)
            out, err = "", ""
        return proc.returncode if proc.returncode is not None else -9, out or "", err or "", True


def forward_signal(leader: subprocess.Popen[bytes], sig: int) -> None:
    """Forward a signal to the leader's whole group (tolerates a leader that is already gone)."""
    if leader.poll() is None:
        _signal_group(leader.pid, sig)


def errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "?")


@dataclass(frozen=True)
class WorkerProc:
    pid: int
    local_rank: int
    rank: int
    cpu_seconds: float
    #: CPU seconds of the rank and everything under it, live or reaped (inductor's compile workers
    #: and the compilers they run): grows while the rank computes or compiles anything
    tree_cpu_seconds: float = 0.0
    state: str = "R"  # /proc state: "T" is stopped by a signal (SIGSTOP, Ctrl-Z)
    #: the node's place its launcher's rendezvous gave it (torchrun's ``GROUP_RANK``); None: not told
    group_rank: int | None = None


@dataclass(frozen=True)
class CompilerProc:
    pid: int
    rank: int  # global rank of the worker it belongs to, -1 if unknown
    cpu_seconds: float


#: Programs a graph compiler runs under a rank: the system C/C++ compiler and its passes
#: (inductor's C++ kernels on CPU, ``torch.utils.cpp_extension``), and NVIDIA's (Triton's and
#: inductor's GPU kernels: ``ptxas``, ``nvcc`` and its ``cicc``).
NATIVE_COMPILERS = frozenset({
    "cc", "c++", "gcc", "g++", "clang", "clang++", "cc1", "cc1plus", "as", "ld", "collect2",
    "nvcc", "cicc", "ptxas", "nvlink", "fatbinary",
})
def is_compiler(argv: Sequence[str]) -> bool:
    """A process that compiles the job's graphs: ``neuronx-cc compile ...`` (a console script: argv
    is ``python .../neuronx-cc compile ...``) or a native compiler (:data:`NATIVE_COMPILERS`). Only
    descendants of a rank are asked, and only CPU time that keeps growing counts (the judge).

    Not inductor's compile workers (torch/_inductor/compile_worker): they live as long as the rank,
    so their last CPU growth would keep a stopped rank "compiling" for the whole CPU-stall window;
    the compilers they run (g++, ptxas) are their children and are seen, and dynamo's
    ``Recompiling function`` line covers the in-process part."""
    if not argv:
        return False
    names = [os.path.basename(a) for a in argv[:3]]
    if "neuronx-cc" in names and "compile" in argv[1:4]:
        return True
    # x86_64-linux-gnu-g++-12: the target prefix and the version suffix are not the program
    program = re.sub(r"-\d+(?:\.\d+)*$", "", names[0]).rsplit("-", 1)[-1]
    return names[0] in NATIVE_COMPILERS or program in NATIVE_COMPILERS


class ProcessSampler:
    """Finds the workers of a launcher (children carrying LOCAL_RANK) and compiler descendants."""

    def __init__(self) -> None:
        self._env_cache: dict[int, tuple[int, int, int | None]] = {}  # pid -> (local rank, rank, group rank)

    def sample(self, launcher_pid: int) -> tuple[list[WorkerProc], list[CompilerProc]]:
        stats: dict[int, ProcInfo] = {}
        for pid in all_pids():
            info = read_stat(pid)
            if info is not None and info.state != "X":
                stats[pid] = info  # zombies too: their CPU time counts until their parent reaps it
        children: dict[int, list[int]] = {}
        for info in stats.values():
            children.setdefault(info.ppid, []).append(info.pid)
        workers: list[WorkerProc] = []
        compilers: list[CompilerProc] = []
        for wpid in children.get(launcher_pid, []):
            if stats[wpid].state == "Z":
                continue  # a rank that ended (its launcher has not reaped it yet) is no worker
            ranks = self._ranks(wpid)
            if ranks is None:
                continue
            local_rank, rank, group_rank = ranks
            tree_cpu = stats[wpid].cpu_seconds + stats[wpid].children_cpu_seconds
            stack = list(children.get(wpid, []))
            while stack:
                pid = stack.pop()
                stack.extend(children.get(pid, []))
                tree_cpu += stats[pid].cpu_seconds + stats[pid].children_cpu_seconds
                # A compiler stopped by a signal (state T) computes nothing and holds the rank as long as it
                # stays stopped: not a live compiler (its CPU-stall window would keep the rank "compiling"
                # for minutes); it counts again once continued.
                if stats[pid].state not in ("Z", "T") and is_compiler(read_cmdline(pid)):
                    compilers.append(CompilerProc(pid, rank, stats[pid].cpu_seconds))
            workers.append(WorkerProc(wpid, local_rank, rank, stats[wpid].cpu_seconds, tree_cpu, stats[wpid].state,
                                      group_rank))
        live = set(stats)
        for pid in [p for p in self._env_cache if p not in live]:
            del self._env_cache[pid]
        return workers, compilers

    def _ranks(self, pid: int) -> tuple[int, int, int | None] | None:
        cached = self._env_cache.get(pid)
        if cached is not None:
            return cached
        env = read_environ(pid)
        try:
            # a task that is one rank (launchers/task.py) is told by us, whatever its own RANK says
            own = env.get("NEURON_WATCH_RANK")
            group = env.get("GROUP_RANK", "")
            group_rank = int(group) if group.isdigit() and own is None else None
            ranks = (0, int(own), None) if own is not None else (int(env["LOCAL_RANK"]), int(env["RANK"]), group_rank)
        except (KeyError, ValueError):
            # Not cached: caught between fork and exec, a worker still shows the launcher's
            # environment (no RANK yet); the same pid has it a moment later.
            return None
        self._env_cache[pid] = ranks
        return ranks


def cgroup_memory_events(pid: int | str = "self") -> tuple[str, int] | None:
    """``(file, oom_kill count)`` of ``pid``'s memory cgroup; None where it cannot be read.

    The kernel counts every process its OOM killer killed in the cgroup: cgroup v2's
    ``memory.events`` and cgroup v1's ``memory.oom_control`` both have an ``oom_kill`` line
    (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst). A rank killed by SIGKILL is
    ``oom`` only when this count rose (or the kernel log says so). In a container the hierarchy is
    often mounted at the container's own cgroup, so the mount's root is tried after the full path.
    """
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    candidates: list[str] = []
    for line in lines:
        _id, controllers, rel = [*line.split(":", 2), "", ""][:3]
        rel = rel.lstrip("/")
        if _id == "0" and controllers == "":
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                candidates += [os.path.join(root, rel, "memory.events"), os.path.join(root, "memory.events")]
        elif "memory" in controllers.split(","):
            root = "/sys/fs/cgroup/memory"
            candidates = [os.path.join(root, rel, "memory.oom_control"), os.path.join(root, "memory.oom_control"),
                          *candidates]  # v1's memory controller is where the limits are
    for path in dict.fromkeys(candidates):
        try:
            with open(path, encoding="utf-8") as f:
                for entry in f:
                    key, _, value = entry.partition(" ")
                    if key == "oom_kill":
                        return path, int(value)
        except (OSError, ValueError):
            continue
    return None
