"""The process sampler finds a launcher's workers by the RANK in their environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from neuron_watch.node.procs import ProcessSampler, is_compiler
from tests.fixtures.procs import kill_group, pids_in_group


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_a_worker_seen_before_its_exec_is_recognised_after_it(tmp_path: Path) -> None:
    # A worker caught between fork and exec still has its launcher's environment (no RANK); the
    # sampler must not remember it as "not a worker". The child here waits on stdin, then execs
    # with the rank variables, keeping its pid, as torchrun's workers do.
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    code = "import os,sys; sys.stdin.readline(); os.execve(sys.executable, [sys.executable, '-c', " \
           "'import sys; sys.stdin.readline()'], dict(os.environ, LOCAL_RANK='1', RANK='5'))"
    launcher = subprocess.Popen([sys.executable, "-c", f"import subprocess,sys; subprocess.run([sys.executable, '-c', "
                                 f"{code!r}])"], stdin=subprocess.PIPE, env=env, start_new_session=True)
    try:
        sampler = ProcessSampler()
        worker_pid = _wait_for_child(launcher.pid)
        # the child first execs into the waiting program (under load this takes a moment), then, on
        # "go", into the worker: wait for each exec by what the command line says, not by any change
        _wait(lambda: b"execve" in _cmdline(worker_pid))
        assert sampler.sample(launcher.pid)[0] == []
        assert launcher.stdin is not None
        launcher.stdin.write(b"go\n")
        launcher.stdin.flush()
        # (mid-exec, /proc/<pid>/cmdline reads empty for a moment: that is not the new program yet)
        _wait(lambda: _cmdline(worker_pid) not in (b"",) and b"execve" not in _cmdline(worker_pid))
        workers, _ = sampler.sample(launcher.pid)
        assert [(w.pid, w.local_rank, w.rank) for w in workers] == [(worker_pid, 1, 5)]
    finally:
        kill_group(launcher)


def _wait_for_child(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    _wait(lambda: bool(children.read_text().split()))
    return int(children.read_text().split()[0])


def _wait(cond: Callable[[], bool]) -> None:
    """Poll a condition on another process (not a sleep to make time pass)."""
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting on the child process"
        time.sleep(0.01)


# Real command lines (inductor's C++ kernel build as torch 2.13 runs it on CPU, a distribution's
# prefixed compiler, NVIDIA's assembler, neuronx-cc's console script).
COMPILERS = [
    ["g++", "/tmp/torchinductor_u/4d/c4dphjjxkweid7unlczxrrsvx2bnlszsmgxq47w4lr23x5cixt6d.main.cpp", "-D",
     "TORCH_INDUCTOR_CPP_WRAPPER", "-O3", "-DNDEBUG", "-shared", "-fPIC", "-o", "/tmp/torchinductor_u/4d/x.so"],
    ["/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", "-quiet", "-D_GNU_SOURCE", "/tmp/torchinductor_u/4d/x.main.cpp"],
    ["/usr/bin/x86_64-linux-gnu-g++-12", "-c", "kernel.cpp"],
    ["ptxas", "-lineinfo", "-v", "--gpu-name=sm_90a", "/tmp/tmpk1.ptx", "-o", "/tmp/tmpk1.ptx.o"],
    ["/opt/venv/bin/python3", "/opt/venv/bin/neuronx-cc", "compile", "--framework=XLA", "model.hlo_module.pb"],
]
NOT_COMPILERS = [
    ["/opt/venv/bin/python3", "-u", "train.py", "--compile"],
    ["gcc-ar", "rcs", "lib.a"],
    ["/bin/bash", "-c", "g++ --version"],  # a shell that may run one: its child is what counts
    ["/opt/venv/bin/python3", "/opt/venv/bin/neuronx-cc", "--version"],
    # inductor's worker pool lives as long as the rank: its children (g++, ptxas) are the compiles
    ["/opt/venv/bin/python", "/opt/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py",
     "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler", "--workers=8"],
    [],
]


def test_compilers_are_recognised_by_their_command_line() -> None:
    assert [is_compiler(a) for a in COMPILERS] == [True] * len(COMPILERS)
    assert [is_compiler(a) for a in NOT_COMPILERS] == [False] * len(NOT_COMPILERS)


#: a worker that runs the system C++ compiler, which waits for its source on stdin (the worker's)
_WORKER_RUNNING_GXX = ("import os, subprocess, sys; "
                       "p = subprocess.Popen(['g++', '-x', 'c++', '-O2', '-c', '-', '-o', os.devnull], "
                       "stdin=subprocess.PIPE); sys.stdin.readline(); p.stdin.close(); p.wait()")


def _launcher_of_gxx_worker() -> subprocess.Popen[bytes]:
    """A launcher whose worker (RANK=3) runs g++ (:data:`_WORKER_RUNNING_GXX`)."""
    env = dict(os.environ, LOCAL_RANK="1", RANK="3")
    return subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                             f"{_WORKER_RUNNING_GXX!r}])"], stdin=subprocess.PIPE, env=env, start_new_session=True)


def _compilers_by_name(sampler: ProcessSampler, launcher_pid: int) -> dict[str, tuple[int, int]]:
    """The compilers the sampler finds under the launcher: program name -> (pid, rank)."""
    _, compilers = sampler.sample(launcher_pid)
    return {os.path.basename(_cmdline(c.pid).split(b"\0")[0].decode()): (c.pid, c.rank) for c in compilers}


def test_a_real_gxx_under_a_rank_is_that_ranks_compiler() -> None:
    """A launcher's worker (RANK=3) runs the system C++ compiler, which waits for its source on
    stdin: the sampler names g++ and its cc1plus pass as rank 3's compilers."""
    launcher = _launcher_of_gxx_worker()
    try:
        sampler = ProcessSampler()
        found: dict[str, tuple[int, int]] = {}

        def compilers_seen() -> bool:
            found.clear()
            found.update(_compilers_by_name(sampler, launcher.pid))
            return "cc1plus" in found

        _wait(compilers_seen)
        assert {rank for _, rank in found.values()} == {3}
        assert {"g++", "cc1plus"} <= set(found), found
    finally:
        kill_group(launcher)


def test_a_stopped_compiler_is_no_live_compiler_until_it_is_continued() -> None:
    """SIGSTOP of the g++ driver under a rank (the rank waits for it): a stopped compiler computes nothing
    and holds its rank as long as it stays stopped, so it is not sampled as a live compiler (its
    CPU-stall window would keep the rank "compiling" for minutes); its cc1plus, not stopped, still is.
    Continued, it is a compiler again."""
    launcher = _launcher_of_gxx_worker()
    try:
        sampler = ProcessSampler()
        _wait(lambda: {"g++", "cc1plus"} <= set(_compilers_by_name(sampler, launcher.pid)))
        gxx, _rank = _compilers_by_name(sampler, launcher.pid)["g++"]
        os.kill(gxx, signal.SIGSTOP)
        _wait(lambda: Path(f"/proc/{gxx}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T")
        assert set(_compilers_by_name(sampler, launcher.pid)) == {"cc1plus"}
        os.kill(gxx, signal.SIGCONT)
        _wait(lambda: "g++" in _compilers_by_name(sampler, launcher.pid))
    finally:
        kill_group(launcher)


def test_a_workers_tree_cpu_counts_what_its_children_burn_and_a_stopped_worker_says_so() -> None:
    """The worker itself waits; a child of it (an inductor compile worker, say) burns the CPU: the
    worker's tree CPU grows while its own does not. SIGSTOP shows as state T."""
    burner = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
              "sys.stdin.readline()")
    worker = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burner!r}])"
    env = dict(os.environ, LOCAL_RANK="0", RANK="2")
    launcher = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                 f"{worker!r}])"], stdin=subprocess.PIPE, env=env, start_new_session=True)
    try:
        sampler = ProcessSampler()
        seen: list[tuple[float, float, str]] = []

        def burned() -> bool:
            workers, _ = sampler.sample(launcher.pid)
            seen[:] = [(w.cpu_seconds, w.tree_cpu_seconds, w.state) for w in workers]
            return bool(seen) and seen[0][1] - seen[0][0] >= 0.3

        _wait(burned)
        (own, tree, state), = seen
        assert tree >= own + 0.3 and state != "T", seen
        os.kill(_wait_for_child(launcher.pid), signal.SIGSTOP)
        _wait(lambda: sampler.sample(launcher.pid)[0][0].state == "T")
    finally:
        kill_group(launcher)
    _wait(lambda: pids_in_group(launcher.pid) == [])  # the stopped worker and its child too


def test_a_task_that_is_a_rank_is_known_by_the_rank_we_gave_it_not_its_own_rank_variables() -> None:
    # An srun task that is one rank (launchers/task.py) may set RANK/LOCAL_RANK itself from Slurm's
    # variables; its file is local rank 0 of global rank NEURON_WATCH_RANK, so that is what counts.
    env = dict(os.environ, NEURON_WATCH_RANK="5", RANK="9", LOCAL_RANK="1")
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE,
                             env=env, start_new_session=True)
    try:
        _wait(lambda: b"readline" in _cmdline(child.pid))
        workers, _ = ProcessSampler().sample(os.getpid())
        assert [(w.pid, w.local_rank, w.rank) for w in workers if w.pid == child.pid] == [(child.pid, 0, 5)]
    finally:
        kill_group(child)
