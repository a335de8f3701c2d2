"""neuron-watch's rank probe: starts torch's own worker server in each rank, with no code change.

neuron-watch prepends this directory to the ranks' ``PYTHONPATH``, so Python imports this file
at start-up (``site`` imports the first ``sitecustomize`` on ``sys.path``). It:

* runs the job's own ``sitecustomize`` (the next one on ``sys.path``), whatever happens here;
* does nothing unless ``NEURON_WATCH_PROBE_DIR`` is set and this process is a rank (``RANK`` and
  ``LOCAL_RANK`` set, as torchrun does for its workers; torchrun itself has neither; or
  ``NEURON_WATCH_RANK``, which the agent gives an srun task that is one rank);
* imports nothing heavy: a meta-path hook waits until the job has imported ``torch.distributed``
  and ``import torch`` has returned (:func:`_torch_initializing`), then starts
  ``torch._C._distributed_c10d._WorkerServer`` on ``<probe dir>/r<RANK>.sock`` (the HTTP server on
  a unix socket that torch's own ``torch.distributed.elastic.control_plane.worker_main`` starts;
  its handlers include ``fr_trace_json``, ``dump_traceback`` and ``ping``), and registers
  ``neuron_watch_stacks`` (:func:`_stacks`), the stack dump neuron-watch asks for;
* never raises into the job: what happened is written to ``<probe dir>/r<RANK>.json``
  (``{"pid", "state": "armed" | "listening" | "failed" | "exited", "error", "socket"}``; ``exited``
  also says ``uncaught``, the type of an exception that ended the rank, "" for none) for the
  agent; at exit, the Flight Recorder as the rank leaves it goes to ``<probe dir>/r<RANK>.fr.json``,
  and where it was when an exception or SIGTERM ended it to ``r<RANK>.death.txt``;
* keeps a full disk under the rank's output files from killing the rank (:func:`_guard_output`).

The Flight Recorder's size is set by the agent in the rank environment (``TORCH_FR_BUFFER_SIZE``
is read when a process group is created, so it must be in the environment before that).
"""

from __future__ import annotations

import contextlib
import errno
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import os
import stat
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_DIR_ENV = "NEURON_WATCH_PROBE_DIR"
_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "torch.distributed"
_TORCH = "torch"
#: our stack handler on torch's worker server (rank_probe.STACKS_HANDLER says the same)
_STACKS_HANDLER = "neuron_watch_stacks"
#: faulthandler's bounds (Modules/faulthandler.c, Python/traceback.c): a dump stays small
_MAX_THREADS = 100
_MAX_FRAMES = 100
#: at exit, the longest wait for the worker server's open connections to close (their requests
#: finishing with the GIL released); a stack dump takes milliseconds, this is a bound, not a pause
_DRAIN_SECONDS = 2.0
#: at exit, the shortest and the longest moment the GIL is left to torch's gloo threads (see
#: :func:`_let_gloo_threads_finish`)
_GLOO_MIN_SECONDS = 0.01
_GLOO_MAX_SECONDS = 0.2
_SLICE = 0.002


#: c10's levels (c10/util/Logging.h: INFO 0, WARNING 1, ERROR 2, FATAL 3)
_C10_WARNING, _C10_ERROR = 1, 2


@contextlib.contextmanager
def _quiet_worker_server() -> Iterator[None]:
    """Raise c10's log threshold from WARNING to ERROR while our worker server starts or stops,
    then put the job's own back.

    torch logs ``[c10d] Server listening to UNIX ...`` as the server starts and ``Server shutting
    down`` / ``Server exited`` as it stops (WorkerServer.cpp, C10D_WARNING): lines a rank would not
    print without us, in its own output. They pass c10's threshold ``FLAGS_caffe2_log_level`` (what
    ``TORCH_CPP_LOG_LEVEL`` sets; all three are logged before the call returns), so only our two
    calls run above it; the job's C++ warnings keep their level before and after. A job run with
    ``TORCH_CPP_LOG_LEVEL=INFO`` asked for every line torch logs, and gets these too. Where this
    torch build does not export the flag (a glog build), nothing changes."""
    level = None
    with contextlib.suppress(BaseException):
        import ctypes

        torch_dir = os.path.dirname(str(sys.modules["torch"].__file__))
        libc10 = ctypes.CDLL(os.path.join(torch_dir, "lib", "libc10.so"))
        level = ctypes.c_int.in_dll(libc10, "FLAGS_caffe2_log_level")
    if level is None or level.value != _C10_WARNING:
        yield
        return
    level.value = _C10_ERROR
    try:
        yield
    finally:
        level.value = _C10_WARNING


def _status(path: str, **fields: Any) -> None:
    """Write the status file atomically (temp + rename); never raises."""
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), **fields}, f)
        os.replace(tmp, path)
    except Exception:
        pass


def _stacks(_request: Any, response: Any) -> None:
    """Our ``neuron_watch_stacks`` handler: every Python thread's stack but the handler's own, in
    faulthandler's text (``Thread 0x... (most recent call first):`` then ``  File "f", line n in
    fn``, newest thread first), which is what torch's ``dump_traceback`` answers.

    Not torch's ``dump_traceback``: it calls ``faulthandler.dump_traceback(all_threads=True)``,
    which walks the interpreter's thread states without the lock that guards that list (it is
    made for a signal handler). On Python 3.11 a thread state is linked into the list before it is
    initialised (``new_threadstate``), and every C++ thread that takes the GIL without a thread
    state makes one: a second request's handler, a gloo worker dropping a tensor. A dump that meets
    one reads its NULL ``cframe``: the rank dies of SIGSEGV (cores of the ranks that
    tests/process/test_rank_probe.py's overlapping asks killed: ``dump_traceback`` in
    ``_Py_DumpTracebackThreads``, the thread state at the list's head half-initialised).
    ``sys._current_frames()`` walks the same list holding its lock."""
    import _thread

    me = _thread.get_ident()
    blocks = []
    for ident, frame in list(sys._current_frames().items())[:_MAX_THREADS]:
        if ident == me:
            continue  # this handler, on the worker server's thread: not the job's
        lines: list[str] = []
        f: Any = frame
        while f is not None and len(lines) < _MAX_FRAMES:
            line = "???" if f.f_lineno is None else f.f_lineno
            lines.append(f'  File "{f.f_code.co_filename}", line {line} in {f.f_code.co_name}\n')
            f = f.f_back
        blocks.append(f"Thread 0x{ident:016x} (most recent call first):\n{''.join(lines)}")
    response.set_content("\n".join(blocks), "text/plain")
    response.set_status(200)


#: References to :func:`_stacks` that keep it alive whatever torch does to its count: torch's
#: ``_register_handler`` keeps the function in a C++ closure that its server copies, and drops,
#: on each request without the GIL (``getHandler`` returns the closure by value), so two requests
#: at once can lose an update of the count; one lost increment too many freed the function while
#: registered (``func_dealloc`` from a handler thread: "PyThreadState_Get: the function must be
#: called with the GIL held", SIGABRT: 2 of 54 long-lived ranks asked by three askers at once,
#: ~760,000 requests; none of 30 with these, ~835,000 requests; tests/benchmarks/bench_probe_overlap.py
#: --askers stacks --depth 40 --iters 60000).
#: The node asks one request at a time (rank_probe.call_handler); these cover anyone else's.
_KEEP_ALIVE = 10_000


def _torch_initializing() -> bool:
    """Whether ``torch/__init__.py`` is still running: importlib marks the spec of a module whose
    body runs (``_initializing``, importlib/_bootstrap.py ``_load_unlocked``) until it returns."""
    torch = sys.modules.get(_TORCH)
    return bool(getattr(getattr(torch, "__spec__", None), "_initializing", False))


class _Probe:
    def __init__(self, directory: str, rank: str) -> None:
        self.socket = os.path.join(directory, f"r{rank}.sock")
        self.status = os.path.join(directory, f"r{rank}.json")
        self.server: Any = None
        self.wanted = False  # torch.distributed was imported (or its import failed part-way)
        self.torch_watched = False  # our loader runs torch's body (and starts us after it)
        self.handler_refs: tuple[Any, ...] = ()  # see _KEEP_ALIVE
        self.started = False
        self.death = self.status[: -len(".json")] + ".death.txt"
        self.death_file: Any = None
        self.death_recorded = False

    def loaded(self, name: str) -> None:
        """``torch`` or ``torch.distributed`` (``name``) has been imported: start the worker server
        once both have and ``import torch`` has returned. ``torch/__init__.py`` imports
        ``torch.distributed`` half-way through: a server started then answers while torch is
        half-executed (under three overlapping askers, 27 of 40 ranks died of SIGSEGV in ``import
        torch``, 1 of 25 after it). A ``torch`` the hook did not load (found by another finder: an
        editable install) is not waited for; a failed ``import torch`` (the job reports it) gets
        no server: starting one would import torch again."""
        if name == _TARGET:
            self.wanted = True
        if name == _TORCH and _TORCH not in sys.modules:
            _status(self.status, state="failed", socket=self.socket, error="import torch failed")
            return
        torch_running = self.torch_watched and name != _TORCH and _torch_initializing()
        if self.wanted and not torch_running:
            self.start()

    def start(self) -> None:
        """Start the worker server (once)."""
        if self.started:
            return
        self.started = True
        try:
            from torch._C._distributed_c10d import _WorkerServer

            # registered as torch registers its own Python handler (torch/distributed/debug/_handlers.py)
            with contextlib.suppress(BaseException):  # without it the node asks py-spy (a 404 here)
                import torch._C._distributed_c10d as c10d

                if _STACKS_HANDLER not in c10d._get_handler_names():  # type: ignore[attr-defined]  # not in the stubs
                    self.handler_refs = (_stacks,) * _KEEP_ALIVE
                    c10d._register_handler(_STACKS_HANDLER, _stacks)
            if os.path.exists(self.socket):  # a killed previous process of this rank left it behind
                os.unlink(self.socket)
            with _quiet_worker_server():
                self.server = _WorkerServer(self.socket)
            import atexit

            atexit.register(self.stop)
            _status(self.status, state="listening", socket=self.socket, error="")
            with contextlib.suppress(BaseException):
                self._record_death()
        except BaseException as exc:
            _status(self.status, state="failed", socket=self.socket, error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        """At interpreter exit (atexit; registered first, so it runs last): stop the server without
        deadlocking the exit, then leave the interpreter's teardown nothing that needs the GIL.

        torch's ``_WorkerServer.shutdown()`` joins the server's threads while holding the GIL (the
        binding does not release it), and a stack request being handled needs the GIL
        (``py::gil_scoped_acquire`` in torch's ``dump_traceback`` and around a Python handler such
        as our ``neuron_watch_stacks``): a shutdown while one is handled hangs the rank
        at exit for ever after "Server shutting down" (tests/process/test_rank_probe.py). A request
        on a connection accepted before the stop can still arrive after any fixed pause (and a
        loaded machine can keep a handler off the CPU past one). So: unlink the socket (no new
        connection), shut the read side of every connection the server holds (no request not yet
        read can start a handler), wait with the GIL released until the server has closed them all
        (a handler in flight gets the GIL and finishes), only then shut down: nothing left to join
        needs the GIL."""
        with contextlib.suppress(BaseException):
            self._death_by_exception(getattr(sys, "last_traceback", None))
        with contextlib.suppress(BaseException):
            self._last_words()
        try:
            if os.path.exists(self.socket):
                os.unlink(self.socket)
            server, self.server = self.server, None
            if server is not None:
                _drain_connections(self.socket, _DRAIN_SECONDS)
                with _quiet_worker_server():
                    server.shutdown()
        except BaseException:
            pass
        with contextlib.suppress(BaseException):
            _let_gloo_threads_finish()

    def _record_death(self) -> None:
        """Where this rank is when it is ended by SIGTERM (torchrun ending the rest of a failed job
        within 0.1 s, before they can say anything; a stop): Python's faulthandler writes every
        thread's stack to ``r<RANK>.death.txt`` from its C signal handler (no GIL needed), then hands
        the signal on to what it did before (``chain``): SIG_DFL ends the process by SIGTERM exactly
        as without us. Only while SIGTERM is SIG_DFL (a job's own handler is left alone; one it sets
        later replaces this); not in processes the rank forks (data-loader workers)."""
        import faulthandler
        import signal

        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        self.death_file = open(self.death, "w", encoding="utf-8")  # noqa: SIM115  # open for the rank's life
        faulthandler.register(signal.SIGTERM, file=self.death_file, all_threads=True, chain=True)
        os.register_at_fork(after_in_child=lambda: faulthandler.unregister(signal.SIGTERM))

        if sys.excepthook is sys.__excepthook__:  # a job's own hook is left alone (atexit still records)
            default_hook = sys.excepthook

            def record_then_report(kind: Any, value: Any, tb: Any) -> None:
                with contextlib.suppress(BaseException):
                    self._death_by_exception(tb)
                default_hook(kind, value, tb)

            sys.excepthook = record_then_report

    def _death_by_exception(self, tb: Any) -> None:
        """An exception that ends the rank: its traceback, innermost first, in faulthandler's format.
        Recorded when Python reports it (``sys.excepthook``, before any atexit handler runs), else
        at our atexit (``sys.last_traceback``). Once only; the SIGTERM dump is switched off first: a
        SIGTERM during the rest of the exit would only show the exit's own frames."""
        if tb is None or self.death_file is None or self.death_recorded:
            return
        self.death_recorded = True
        import faulthandler
        import signal
        import traceback

        faulthandler.unregister(signal.SIGTERM)
        frames = traceback.extract_tb(tb)
        text = "".join(f'  File "{f.filename}", line {f.lineno} in {f.name}\n' for f in reversed(frames))
        self.death_file.write(f"Current thread 0x{0:016x} (most recent call first):\n{text}")
        self.death_file.flush()

    def _last_words(self) -> None:
        """Leave the Flight Recorder as this rank exits in ``r<RANK>.fr.json`` (status ``exited``).

        A rank that exits stops answering, and which collective each rank was in when a job broke
        is how a rank that diverged from its peers is told (a skipped ``all_reduce`` ends in a
        crash within milliseconds, between two readings). Only when the server runs (the job used
        torch.distributed); costs one dump of a small ring buffer at exit."""
        if self.server is None:
            return
        import torch._C._distributed_c10d as c10d

        doc = c10d._dump_fr_trace_json(True, False)  # type: ignore[attr-defined]  # not in torch's stubs
        path = self.status[: -len(".json")] + ".fr.json"
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(doc if isinstance(doc, bytes) else str(doc).encode())
        os.replace(tmp, path)
        # Python's atexit cannot see the exit code; an uncaught exception (exit 1) it can: Python set
        # sys.last_value as it printed it. The agent reads "exited" without one as a clean exit (0
        # presumed; a sys.exit(3) looks the same, and the launcher's failure report corrects it).
        uncaught = getattr(sys, "last_value", None)
        _status(self.status, state="exited", socket=self.socket, error="", fr=path,
                uncaught="" if uncaught is None else type(uncaught).__name__)



def _server_connections(path: str) -> list[str]:
    """The inodes of the connections to the unix-socket server bound to ``path`` that the kernel
    knows of (``/proc/net/unix``: accepted ones, and ones still waiting in the listen backlog, inode
    0, carry the listener's name; the listener is the one flagged to accept, ``__SO_ACCEPTCON``).
    Only this process's server has this path."""
    found = []
    with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
        next(f, None)  # Num RefCount Protocol Flags Type St Inode Path
        for line in f:
            cols = line.split(None, 7)
            if len(cols) == 8 and cols[7].rstrip("\n") == path and not int(cols[3], 16) & 0x10000:
                found.append(cols[6])
    return found


def _shut_reading(inodes: set[str]) -> None:
    """Shut the read side of this process's sockets with these inodes (through a duplicate of the
    descriptor: the server's own is left to the server)."""
    import socket

    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
            if not (link.startswith("socket:[") and link[8:-1] in inodes):
                continue
            with socket.socket(fileno=os.dup(int(name))) as s:
                s.shutdown(socket.SHUT_RD)
        except (OSError, ValueError):
            continue  # closed meanwhile


def _drain_connections(path: str, bound: float) -> None:
    """Shut the read side of each connection the server holds, and wait (``time.sleep``: the GIL is
    free for their handlers) until the server has closed them all, at most ``bound`` seconds. A
    request already read is still answered; one still to come reads end-of-file and starts no
    handler. A connection still in the listen backlog is shut once the server accepts it: the
    wait ends when none is left at all (the socket file is gone, so no new one can come)."""
    import time

    deadline = time.monotonic() + bound
    shut: set[str] = set()
    while time.monotonic() < deadline:
        conns = set(_server_connections(path))
        if not conns:
            return
        fresh = conns - shut - {"0"}
        if fresh:
            _shut_reading(fresh)
            shut |= fresh
        time.sleep(_SLICE)


def _gloo_threads_runnable() -> bool:
    """Whether a gloo worker thread of this process (``pt_gloo_runloop``, named by torch's
    ProcessGroupGloo) is running or waiting for a CPU (state ``R``)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        name, _, rest = stat.partition("(")[2].rpartition(")")
        if name.startswith("pt_gloo_runloop") and rest.split()[:1] == ["R"]:
            return True
    return False


def _let_gloo_threads_finish() -> None:
    """Leave the GIL to torch's gloo worker threads for a moment before the interpreter's teardown.

    A gloo worker drops its reference to a finished collective's work after the rank's
    ``wait()`` has returned, and dropping a tensor Python also holds takes the GIL
    (``TensorImpl::decref_pyobject``). Once Python has begun finalizing, a thread taking the GIL is
    ended by ``pthread_exit``, whose unwinding through that noexcept destructor is
    ``std::terminate``: "terminate called without an active exception", SIGABRT, after a job that
    never destroyed its process group finished (a core of one: ``~AsyncAllreduceWork`` ->
    ``decref_pyobject`` -> ``take_gil`` -> ``PyThread_exit_thread``; pytorch/pytorch#190489). A rank
    that exits right after its last collective, without neuron-watch, dies so in about a third of
    runs (tests/benchmarks/bench_exit_abort.py: 11 of 18). This is the last atexit handler: sleeping here hands
    the GIL to a waiting worker, which drops its work while dropping is still allowed. At least
    ``_GLOO_MIN_SECONDS``, then until no gloo worker is runnable, at most ``_GLOO_MAX_SECONDS``
    (a rank that left a collective running does not wait for it)."""
    import time

    start = time.monotonic()
    while True:
        time.sleep(_SLICE)
        waited = time.monotonic() - start
        if waited >= _GLOO_MAX_SECONDS or (waited >= _GLOO_MIN_SECONDS and not _gloo_threads_runnable()):
            return


class _Loader(importlib.abc.Loader):
    """Runs the real loader of ``torch`` or ``torch.distributed``, then starts the probe if both
    are done (:meth:`_Probe.loaded`). Anything else asked of it (a resource reader,
    ``get_source``) is the real loader's."""

    def __init__(self, real: importlib.abc.Loader, probe: _Probe) -> None:
        self.real = real
        self.probe = probe

    def __getattr__(self, name: str) -> Any:
        real = self.__dict__.get("real")  # not self.real: a copy made without __init__ has none
        if real is None:
            raise AttributeError(name)
        return getattr(real, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.real.exec_module(module)
        finally:
            # Also when the import failed part-way (start() reports what is missing).
            with contextlib.suppress(BaseException):
                self.probe.loaded(module.__name__)


class _Finder(importlib.abc.MetaPathFinder):
    """Answers only for ``torch`` and ``torch.distributed``: finds them with the other finders,
    wraps their loaders."""

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in (_TORCH, _TARGET) or self.probe.started:
            return None
        if fullname == _TARGET:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)  # torch, its parent, is imported by now: nothing more to find
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None or spec.loader is None:
                return None
            spec.loader = _Loader(spec.loader, self.probe)
            self.probe.torch_watched |= fullname == _TORCH
            return spec
        except BaseException as exc:
            _status(self.probe.status, state="failed", socket=self.probe.socket,
                    error=f"hook: {type(exc).__name__}: {exc}")
            return None


def _arm() -> None:
    directory = os.environ.get(_DIR_ENV, "")
    # an srun task that is one rank is told its rank by the agent (launchers/task.py); a torchrun
    # worker has RANK and LOCAL_RANK (torchrun itself has neither)
    rank = os.environ.get("NEURON_WATCH_RANK") or (os.environ.get("RANK", "") if "LOCAL_RANK" in os.environ else "")
    if not directory or not rank.isdigit():
        return  # not a rank of a watched job (torchrun itself, a compiler, a tool)
    # Our variable, not the job's: processes this rank starts (data loader workers, compilers)
    # must not start a second server on the same socket.
    os.environ.pop(_DIR_ENV, None)
    os.environ.pop("NEURON_WATCH_RANK", None)
    probe = _Probe(directory, rank)
    _status(probe.status, state="armed", socket=probe.socket, error="")
    sys.meta_path.insert(0, _Finder(probe))
    _guard_output()


#: what a disk says when it cannot take a write: the disk's problem, not the rank's
_REFUSED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


class _GuardedFile(io.RawIOBase):
    """fd 1 or 2 of a rank, when it is a file: neuron-watch's launcher sends the ranks' output to
    files in its run dir (``torchrun --redirects``). A write that disk refuses (full, quota, I/O
    error) would raise into the job's ``print`` and kill the rank, which writing to a terminal never
    does: the bytes are dropped and counted instead, and the first write that succeeds afterwards
    says how many were lost (the tailing agent sees that line)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.lost_bytes = 0
        self.refused_with = ""  # the error of the first refused write since the last note

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: Any) -> int:
        n = len(data)
        try:
            if self.lost_bytes:
                note = (f"[neuron-watch] {self.lost_bytes} bytes of this rank's output were lost: the disk of its "
                        f"log file refused them ({self.refused_with})\n").encode()
                os.write(self.fd, note)
                self.lost_bytes, self.refused_with = 0, ""
            return os.write(self.fd, data)
        except OSError as exc:
            if exc.errno not in _REFUSED:
                raise
            self.lost_bytes += n
            self.refused_with = self.refused_with or errno.errorcode.get(exc.errno or 0, str(exc.errno))
            return n


def _guard_output() -> None:
    """Replace ``sys.stdout``/``sys.stderr`` of a rank whose fd 1/2 is a regular file by the same
    kind of stream over :class:`_GuardedFile` (same encoding, buffering and fd: nothing else changes)."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        try:
            if old is None or old.fileno() != fd or not stat.S_ISREG(os.fstat(fd).st_mode):
                continue  # a terminal or a pipe never refuses for lack of space: leave it
            old.flush()
            raw = _GuardedFile(fd)
            binary: Any = raw if old.write_through else io.BufferedWriter(raw)
            setattr(sys, name, io.TextIOWrapper(binary, encoding=old.encoding, errors=old.errors,
                                                line_buffering=old.line_buffering, write_through=old.write_through))
        except (OSError, ValueError, AttributeError):
            continue  # as it was


def _chain() -> None:
    """Import the next ``sitecustomize`` on ``sys.path`` (the job's own), as if we were not here."""
    for entry in sys.path:
        try:
            if not entry or os.path.abspath(entry) == _HERE:
                continue
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        except Exception:
            continue
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)  # the job's own errors are the job's, as without us
        return


with contextlib.suppress(BaseException):  # never into the job
    _arm()
_chain()
