"""Stack dumps pasted in a log, found by their layouts, and what the dumped ranks were doing. Pure.

A user who finds a job stuck dumps its stacks and pastes them: the dump *is* the report of the hang,
however quiet the log is around it. Three layouts, each read as its tool prints it:

* **py-spy dump** (py-spy's ``src/dump.rs``, ``print_trace``): ``Thread <id> (<status>): "<name>"``
  (the name may be absent: ``Thread 8294 (idle)``), the status ``idle``, ``active``, ``gil``..., the
  id decimal (the OS thread id) or hex; then one frame a line, innermost first, indented four
  spaces: ``<function> (<file>:<line>)`` (``(<file>)`` when the line is unknown); ``--locals``
  adds ``<name> = <value>`` lines indented eight. The main thread is the one named ``MainThread``.
* **Python's faulthandler** (CPython ``Python/traceback.c``, ``_Py_DumpTracebackThreads`` and
  ``dump_frame``): ``Thread 0x<id> (most recent call first):`` or ``Current thread 0x<id> ...``
  (``Stack (most recent call first):`` for one thread), then ``  File "<file>", line <n> in <function>``
  innermost first (no comma before ``in``: a raised exception's traceback, ``Traceback (most recent
  call last):`` with ``, in``, outermost first, is not a dump and is not read here). The main
  thread is the one ``threading`` did not start (its outermost frame is not ``threading.py``'s
  ``_bootstrap``), as :func:`neuron_watch.diagnosis.stacks.main_thread` reads torch's worker
  server's dumps. Modules/faulthandler.c heads a dump on a fatal signal ``Fatal Python error: ...``
  (a crash, not a hang) and one of ``dump_traceback_later`` ``Timeout (0:05:00)!`` (a hang).
* **gdb's backtrace** (gdb ``stack.c``, ``print_frame_info``; ``thread apply all bt``):
  ``Thread <n> (Thread 0x<id> (LWP <lwp>) "<name>"):`` then ``#<level>  0x<pc> in <function> (<args>)
  at <file>:<line>`` or ``... from <library>``, innermost (``#0``) first. gdb numbers an inferior's
  first thread 1: the main thread. A lone ``bt`` has no thread header; its frames are the thread
  gdb stopped in. A dump under gdb's ``received signal SIGSEGV`` (or, of a core file, corelow.c's ``Program
  terminated with signal SIGABRT``) is a crash, not a hang.
* **lldb's backtrace** (lldb/docs/use/formatting.rst, the default thread-stop-format and frame-format; ``bt all``):
  ``* thread #<n>, name = '<name>', stop reason = <reason>`` (``*`` marks the selected thread), then ``frame #<n>:
  0x<pc> <module>`<function> + <offset> at <file>:<line>:<column>``, innermost (``#0``) first. lldb numbers a
  process's threads from 1 in the order they were created: #1 is the main thread. A function lldb could not name is
  ``___lldb_unnamed_symbol<N>$$<module>``. A thread stopped by ``signal SIGSEGV`` (``SIGABRT``, ...) crashed.

Each thread is reduced to its innermost frames (:data:`INNERMOST`), and the first of them, from
the innermost out, that names an activity says what the thread does: a compile, a save, data
loading, or a wait on peers or the device (the frames :mod:`~neuron_watch.diagnosis.stacks` knows:
:data:`~neuron_watch.diagnosis.stacks.COLLECTIVE_FRAMES` and
:data:`~neuron_watch.diagnosis.stacks.DEVICE_WAIT_FRAMES`). A dump speaks through its main thread
only: a helper thread in a collective (a gradient hook's reducer) while the main thread loads data
or sleeps says nothing. A native dump (gdb's, lldb's) pasted without its main thread, cut by the user to the
threads that matter, speaks through the first thread shown that waits or compiles: Horovod runs every collective
from its background thread (horovod/common/operations.cc, BackgroundThreadLoop and RunLoopOnce) and waits for the
device from its GPU finalizer (GPUContext::impl::WaitForEvents), so a pasted Horovod hang shows those threads
(round issue23-heldout-18: horovod-1182's coordinator in PMPI_Gather, NVIDIA/nccl#788's finalizer in
cudaEventSynchronize, shown in lldb's layout).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from neuron_watch.diagnosis.stacks import COLLECTIVE_FRAMES, DEVICE_WAIT_FRAMES
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict

#: frames of a thread read from the innermost out: a wait sits a few library frames under the call
#: that made it (gdb: futex, pthread_cond_wait, the condition variable, c10d's Work::wait)
INNERMOST = 8
#: dumps kept (the rest are counted, :attr:`DumpScanner.dropped`)
MAX_DUMPS = 256
#: non-blank lines before a dump in which a crash report heads it (the report, then gdb's stop line or
#: its prompt)
_CRASH_WINDOW = 3
#: gdb's name for a frame whose function it could not find (no symbols for its address)
_UNNAMED = "??"
#: the first characters of a line that can start a dump (a thread header, gdb's ``#0``): every other
#: line of a long log is passed over without a regular expression
_HEAD_FIRST = frozenset("TCS#")


class Activity(enum.Enum):
    """What a thread's innermost frames say it is doing."""

    WAIT = "waiting in a collective or on the device"
    COMPILE = "compiling"
    SAVE = "saving a checkpoint"
    DATA = "loading data"
    OTHER = "nothing a frame names"


#: A compiler at work, by its modules: torch.compile's (torch/_dynamo, torch/_inductor), XLA's
#: compile behind torch_xla and the Neuron wrapper that runs neuronx-cc (libneuronxla's
#: neuron_cc_wrapper.py, torch_neuronx's trace), JAX's (jax/_src/compiler.py ``backend_compile``,
#: ``compile_or_get_cached``), TensorFlow's XLA JIT (``tf2xla``), Triton's (triton/compiler) and
#: torch's C++ extension builds (torch/utils/cpp_extension.py ``_jit_compile``), and neuronx-cc itself.
_COMPILE = re.compile(
    r"torch/_dynamo/|torch/_inductor/|/libneuronxla/|/neuronxcc/|torch_neuronx/xla_impl/trace|"
    r"jax/_src/compiler\.py|triton/compiler/|torch/utils/cpp_extension\.py|"
    r"\b(?:backend_compile|compile_or_get_cached|_jit_compile|neuron_cc_wrapper|compile_fx\w*|"
    r"neuronx_cc\w*|XlaCompil\w*|PjRtStreamExecutorClient::Compile\w*)\b"
)
#: A save, by its modules: torch.save (torch/serialization.py), torch.distributed.checkpoint,
#: safetensors, and the checkpoint writers of DeepSpeed, Accelerate, Lightning and NeuronX Distributed.
_SAVE = re.compile(
    r"torch/serialization\.py|torch/distributed/checkpoint/|safetensors/|neuronx_distributed/trainer/checkpoint|"
    r"core/dist_checkpointing/|"
    r"\b(?:save_checkpoint|_save_checkpoint|save_state|save_model|save_pretrained|_save_to_state_dict)\b"
)
#: A native collective call a thread is blocked in: NCCL's API (src/collectives.cc, src/group.cc: ncclAllReduce,
#: ncclAllGather, ncclReduceScatter, ncclBroadcast, ncclBcast, ncclReduce, ncclAllToAll, ncclSend, ncclRecv,
#: ncclGroupEnd) and MPI's blocking collectives and completions, by the C bindings of the MPI standard and their
#: profiling names (PMPI_Allreduce, PMPI_Gather, PMPI_Barrier, PMPI_Wait...): a thread inside one waits on its
#: peers (round issue23-heldout-18: horovod-1799's background thread in ncclAllReduce, horovod-1182's coordinator in
#: PMPI_Gather). NCCL's own service threads (ncclProxyProgress, ncclProxyService) are not among them.
_NATIVE_COLLECTIVE = re.compile(
    r"\b(?:nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Bcast|Reduce|AllToAll|Send|Recv|GroupEnd)|"
    r"P?MPI_(?:Allreduce|Allgatherv?|Alltoall[vw]?|Barrier|Bcast|Gatherv?|Reduce|Reduce_scatter\w*|Scatterv?|"
    r"Wait\w*|Recv|Sendrecv\w*|Probe))\b")
#: A kernel launch (the driver's cuLaunchKernel, the runtime's cudaLaunchKernel) ...
_KERNEL_LAUNCH = re.compile(r"\bcu(?:da)?LaunchKernel\b")
#: ... that sits over a blocking primitive (a condition variable, a futex, a semaphore, a poll): launches are
#: asynchronous and block only when the device's launch queue is full, the device not draining its work (a kernel
#: that never ends, as a collective waiting for a peer): the thread waits on its device (round issue23-heldout-18:
#: horovod-2944's thread in pthread_cond_timedwait under cuLaunchKernel). A launch sampled while it runs, with no
#: such frame under it, says nothing.
_BLOCKING = re.compile(r"\b(?:__)?(?:pthread_cond_(?:timed)?wait|futex\w*|sem_(?:timed)?wait|poll|epoll_wait|"
                       r"nanosleep|sched_yield)\b")
#: Data loading, by torch's DataLoader (torch/utils/data/), datasets and tf.data: a worker waiting for
#: its next index, or the main thread waiting for a batch.
_DATA = re.compile(r"torch/utils/data/|/datasets/|tensorflow/python/data/|\b(?:_next_data|_worker_loop)\b")


#: The standard library's waits (threading, subprocess, queue, selectors, socket, multiprocessing,
#: concurrent.futures): a thread blocked in one waits for whatever its caller waits for (a compile
#: subprocess, a data worker, a peer), so these frames say nothing and the next frame out decides.
_GENERIC_WAIT = re.compile(r"(?:^|/)(?:threading|subprocess|queue|selectors|socket|multiprocessing/\w+|"
                           r"concurrent/futures/\w+)\.py$")

#: The Python frames that call torch's C++ autograd engine (``Variable._execution_engine.run_backward``):
#: ``backward``/``grad`` in torch/autograd/__init__.py (torch < 2.3 calls the engine there) and
#: ``_engine_run_backward`` in torch/autograd/graph.py. A thread whose innermost frame is one of them is
#: inside the engine, and py-spy's ``idle`` says it is not computing but blocked there.
_ENGINE_ENTRY_FILE = re.compile(r"(?:^|/)torch/autograd/(?:__init__|graph)\.py$")
_ENGINE_ENTRY_FUNCTIONS = frozenset({"backward", "grad", "_engine_run_backward"})
#: A backward run by a data-parallel engine whose gradient hooks reduce across ranks (DeepSpeed's ZeRO
#: and engine, torch's DDP and FSDP, fairscale, Horovod, apex's DDP): its engine blocked is a rank
#: waiting on the others' gradients (DeepSpeed#3032: ``backward (torch/autograd/__init__.py:199)`` idle
#: under ``backward (deepspeed/runtime/zero/stage_1_and_2.py)``). The same idle frame under a plain
#: trainer names no peer (a single process's test that hangs in backward).
_DATA_PARALLEL = re.compile(r"(?:^|/)(?:deepspeed/runtime|torch/nn/parallel|torch/distributed|fairscale|horovod|"
                            r"apex/parallel)/")


@dataclass(frozen=True)
class Frame:
    """One frame of a dump: its function and file as printed, and the line it was read from."""

    function: str
    file: str
    line: LogLine

    @property
    def text(self) -> str:
        """``function (file)``: the form :mod:`~neuron_watch.diagnosis.stacks` matches frames in."""
        return f"{self.function} ({self.file})"


def activity(frame: Frame) -> Activity:
    """What one frame names: a compile, a save, data loading, a wait on peers or the device, or nothing.
    A compile and a save are asked before a wait: both run inside torch.distributed and torch_xla frames."""
    if _GENERIC_WAIT.search(frame.file):
        return Activity.OTHER  # a wait on something its caller names (subprocess's _wait, a queue's get)
    text = frame.text
    if _COMPILE.search(text):
        return Activity.COMPILE
    if _SAVE.search(text):
        return Activity.SAVE
    if _DATA.search(text):
        return Activity.DATA
    if COLLECTIVE_FRAMES.search(text) or DEVICE_WAIT_FRAMES.search(text) or _NATIVE_COLLECTIVE.search(text):
        return Activity.WAIT
    return Activity.OTHER


@dataclass
class Thread:
    """One thread of a dump: its tool, its header line, whether it is the main thread, its innermost frames."""

    tool: str
    header: LogLine
    main: bool | None  # None: the layout does not say (faulthandler: decided when the dump ends)
    frames: list[Frame] = field(default_factory=list)  # innermost first, at most INNERMOST
    outermost: Frame | None = None
    #: py-spy's thread status (``idle``, ``active``, ``active+gil``...); '' for layouts that print none
    status: str = ""

    def add(self, frame: Frame) -> None:
        # A frame gdb could not name ("#0  0x... in ?? () from /lib64/libcuda.so.1": a stripped library, as the
        # CUDA driver ships) names no activity and does not use up the window: a thread blocked in the driver
        # shows a dozen of them under the API call that entered it (round issue23-heldout-17, pytorch-95944:
        # twelve "??" frames of libcuda under cudaMemcpyAsync).
        if len(self.frames) < INNERMOST and frame.function != _UNNAMED:
            self.frames.append(frame)
        self.outermost = frame

    def doing(self) -> tuple[Activity, Frame | None]:
        """The activity of the innermost frame that names one, and that frame; or a wait, when py-spy
        shows the thread idle inside the autograd engine of a data-parallel backward
        (:func:`blocked_in_reducing_backward`)."""
        if blocked_in_reducing_backward(self):
            return Activity.WAIT, self.frames[0]
        blocked = False
        for frame in self.frames:
            found = activity(frame)
            if found is not Activity.OTHER:
                return found, frame
            if blocked and _KERNEL_LAUNCH.search(frame.function):
                return Activity.WAIT, frame
            blocked = blocked or _BLOCKING.search(frame.function) is not None
        return Activity.OTHER, None


@dataclass(frozen=True)
class Dump:
    """A dump read whole: its tool, whether a crash report heads it, its main thread (None when the
    layout names none), and what that thread does, with the frame that says so."""

    tool: str
    key: RankKey
    first: LogLine
    crash: bool
    main: Thread | None
    doing: Activity
    frame: Frame | None


#: py-spy: ``Thread 4886 (idle): "MainThread"``, ``Thread 0x7F3A (active+gil)``; its frames indented four spaces, its
#: locals eight, or one fewer each when a launcher's prefix took the space that followed it (``[default0]: ``, the
#: rank prefix ``logtext.split_rank_prefix`` removes with one space after it)
_PYSPY_THREAD = re.compile(r'^Thread (?:0[xX][0-9A-Fa-f]+|\d+) \(([a-z+]+)\)(?:: "(.*)")?\s*$')
_PYSPY_FRAME = re.compile(r"^ {3,4}(\S.*?) \(([^()]*?)(?::\d+)?\)\s*$")
_PYSPY_LOCAL = re.compile(r"^ {7,8}\S")
_PYSPY_PROCESS = re.compile(r"^Process \d+: ")
#: faulthandler: ``Thread 0x00007f57caf71740 (most recent call first):``, ``Current thread 0x...``
_FH_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+(?: \[[^\]]*\])? \(most recent call first\):\s*$"
                        r"|^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^\s+File "([^"]*)", line (?:\d+|\?\?\?) in (\S.*?)\s*$')
_FH_OTHER = re.compile(r"^\s+(?:<no Python frame>|\.\.\.)\s*$")
#: gdb: ``Thread 1 (Thread 0x7f... (LWP 42) "python"):``, ``Thread 2.1 (LWP 7):``; gstack (gdb's script):
#: ``Thread 1 (process 24745):``
_GDB_THREAD = re.compile(r"^Thread (\d+)(?:\.(\d+))? \((?:Thread 0x[0-9a-fA-F]+ )?\(?(?:LWP|process) \d+\)?.*\):\s*$")
_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-fA-F]+ in )?(\S.*?)(?: \(.*\))?(?: at (\S+?):\d+| from (\S+))?\s*$")
#: gdb: the rest of a wrapped frame (indented), and its pager's prompt
_GDB_WRAPPED = re.compile(r"^\s{2,}\S")
_GDB_PAGER = re.compile(r"^-+Type <(?:return|RET)> to continue")
#: reports that head a dump of a process that crashed: faulthandler's fatal error (Modules/faulthandler.c
#: ``faulthandler_fatal_error``, CPython's ``Py_FatalError``) and gdb's signal stop (infrun.c
#: ``print_signal_received_reason``: ``Thread 1 "python" received signal SIGSEGV``)
_CRASH = re.compile(r"^Fatal Python error: |\breceived signal SIG(?:SEGV|ABRT|BUS|FPE|ILL|KILL|TERM)\b|"
                    r"^Program terminated with signal SIG")
#: lldb: ``* thread #1, name = 'python', stop reason = signal SIGSTOP``, ``  thread #149, name = 'python'``
_LLDB_THREAD = re.compile(r"^\s*(?:\*\s+)?thread #(\d+)(?:, |\s*$)")
_LLDB_FRAME = re.compile(r"^\s*(?:\*\s+)?frame #(\d+): (?:0x[0-9a-fA-F]+ )?(?:([^`\s]+)`)?(\S.*?)(?: \+ \d+)?"
                         r"(?: at (\S+?):\d+(?::\d+)?)?\s*$")
#: lldb's name for a function it could not find, and a thread it found stopped by a fatal signal
_LLDB_UNNAMED = "___lldb_unnamed_symbol"
_LLDB_CRASH = re.compile(r"\bstop reason = signal SIG(?:SEGV|ABRT|BUS|FPE|ILL)\b")
#: the layouts of native debuggers, whose dumps a user cuts to the threads that matter
_NATIVE_TOOLS = frozenset({"gdb", "lldb"})


class _Open:
    """The dump being read in one stream."""

    def __init__(self, tool: str, first: LogLine, crash: bool) -> None:
        self.tool = tool
        self.first = first
        self.crash = crash
        self.threads: list[Thread] = []


def _lldb_thread(dump: _Open, line: LogLine, header: re.Match[str]) -> None:
    """An lldb thread header: the thread (#1 is the main thread), and a crash when a fatal signal stopped it."""
    dump.crash = dump.crash or _LLDB_CRASH.search(line.text) is not None
    dump.threads.append(Thread("lldb", line, header.group(1) == "1"))


class DumpScanner:
    """Reads each stream's lines in order and keeps the dumps found in them (bounded, counted)."""

    def __init__(self) -> None:
        self.dumps: list[Dump] = []
        self.dropped = 0
        self._open: dict[RankKey, _Open] = {}
        #: streams where a crash report was among the last non-blank lines: how many lines it still heads
        self._crash_left: dict[RankKey, int] = {}

    def observe(self, line: LogLine) -> None:
        """One line of a stream (its rank prefix already removed, as the judge reads it)."""
        text = line.text
        key = line.key
        current = self._open.get(key)
        if not text.strip():
            return  # faulthandler and gdb put blank lines between threads
        if current is not None and self._continues(current, line):
            return
        if current is not None:
            self._close(key)
        if (text[:1] in _HEAD_FIRST or "thread #" in text) and self._starts(line):
            return
        if "Fatal Python error" in text or "received signal" in text or "terminated with signal" in text:
            if _CRASH.search(text):
                self._crash_left[key] = _CRASH_WINDOW
        elif key in self._crash_left:
            self._crash_left[key] -= 1
            if self._crash_left[key] <= 0:
                del self._crash_left[key]

    def finish(self) -> list[Dump]:
        """Close every stream's dump; the dumps found, in the order they ended."""
        for key in list(self._open):
            self._close(key)
        return self.dumps

    def _crashed(self, key: RankKey) -> bool:
        return key in self._crash_left

    def _starts(self, line: LogLine) -> bool:
        text = line.text
        m = _PYSPY_THREAD.match(text)
        if m:
            self._begin(line, "py-spy").threads.append(
                Thread("py-spy", line, m.group(2) == "MainThread", status=m.group(1)))
            return True
        if _FH_THREAD.match(text):
            self._begin(line, "faulthandler").threads.append(Thread("faulthandler", line, None))
            return True
        g = _GDB_THREAD.match(text)
        if g:
            main = (g.group(2) or g.group(1)) == "1"
            self._begin(line, "gdb").threads.append(Thread("gdb", line, main))
            return True
        ll = _LLDB_THREAD.match(text)
        if ll:
            _lldb_thread(self._begin(line, "lldb"), line, ll)
            return True
        f = _GDB_FRAME.match(text)
        if f and f.group(1) == "0":
            # a lone ``bt``: the thread gdb stopped in, and the only one shown
            dump = self._begin(line, "gdb")
            thread = Thread("gdb", line, True)
            thread.add(Frame(f.group(2), f.group(3) or f.group(4) or "", line))
            dump.threads.append(thread)
            return True
        return False

    def _begin(self, line: LogLine, tool: str) -> _Open:
        dump = _Open(tool, line, self._crashed(line.key))
        self._open[line.key] = dump
        return dump

    def _continues(self, dump: _Open, line: LogLine) -> bool:
        """Whether ``line`` belongs to ``dump`` (a frame of its last thread, or its next thread)."""
        text = line.text
        thread = dump.threads[-1]
        if dump.tool == "py-spy":
            m = _PYSPY_THREAD.match(text)
            if m:
                if m.group(2) == "MainThread" and any(t.main for t in dump.threads):
                    return False  # a second MainThread: the next process's dump
                dump.threads.append(Thread("py-spy", line, m.group(2) == "MainThread", status=m.group(1)))
                return True
            f = _PYSPY_FRAME.match(text)
            if f:
                thread.add(Frame(f.group(1), f.group(2), line))
                return True
            return _PYSPY_LOCAL.match(text) is not None
        if dump.tool == "faulthandler":
            if _FH_THREAD.match(text):
                dump.threads.append(Thread("faulthandler", line, None))
                return True
            f = _FH_FRAME.match(text)
            if f:
                thread.add(Frame(f.group(2), f.group(1), line))
                return True
            return _FH_OTHER.match(text) is not None
        if dump.tool == "lldb":
            ll = _LLDB_THREAD.match(text)
            if ll:
                _lldb_thread(dump, line, ll)
                return True
            fr = _LLDB_FRAME.match(text)
            if fr:
                function = fr.group(3).split("(", 1)[0]
                thread.add(Frame(_UNNAMED if function.startswith(_LLDB_UNNAMED) else function,
                                 fr.group(4) or fr.group(2) or "", line))
                return True
            return False
        g = _GDB_THREAD.match(text)
        if g:
            dump.threads.append(Thread("gdb", line, (g.group(2) or g.group(1)) == "1"))
            return True
        f = _GDB_FRAME.match(text)
        if f:
            thread.add(Frame(f.group(2), f.group(3) or f.group(4) or "", line))
            return True
        # gdb wraps a frame too long for the terminal before its arguments' rest, its "at" or its "from" (stack.c,
        # print_frame, through the pager's wrap_here), and its pager may stop a long dump (utils.c, the "Type
        # <return> to continue" prompt): an indented line under a frame is the frame's rest (horovod-1182:
        # "#0  0x... in mca_btl_smcuda_component_progress ()" then "   from .../mca_btl_smcuda.so")
        return ((_GDB_WRAPPED.match(text) is not None and thread.outermost is not None)
                or _GDB_PAGER.match(text) is not None)

    def _close(self, key: RankKey) -> None:
        dump = self._open.pop(key)
        self._crash_left.pop(key, None)
        if dump.tool == "faulthandler":
            # the main thread: the last one threading did not start (faulthandler lists the newest first)
            started = [t for t in dump.threads if t.frames and not _by_threading(t)]
            for t in dump.threads:
                t.main = bool(started) and t is started[-1]
        main = next((t for t in dump.threads if t.main and t.frames), None)
        speaker = main
        if speaker is None and dump.tool in _NATIVE_TOOLS:
            # a native dump pasted without its main thread: the first thread shown that waits or compiles speaks
            speaker = next((t for t in dump.threads
                            if t.frames and t.doing()[0] in (Activity.WAIT, Activity.COMPILE)), None)
        doing, frame = speaker.doing() if speaker is not None else (Activity.OTHER, None)
        if len(self.dumps) >= MAX_DUMPS:
            self.dropped += 1
            return
        self.dumps.append(Dump(dump.tool, key, dump.first, dump.crash, main, doing, frame))


def blocked_in_reducing_backward(thread: Thread) -> bool:
    """py-spy shows the thread ``idle`` with its innermost frame the call into the autograd engine, and a
    data-parallel engine's frame among the innermost: the backward waits on the gradient reduction. An
    ``active`` thread there is computing its backward, and is not read so."""
    if thread.status != "idle" or not thread.frames:
        return False
    inner = thread.frames[0]
    return (inner.function in _ENGINE_ENTRY_FUNCTIONS and _ENGINE_ENTRY_FILE.search(inner.file) is not None
            and any(_DATA_PARALLEL.search(f.file) for f in thread.frames[1:]))


def _by_threading(thread: Thread) -> bool:
    out = thread.outermost
    return out is not None and out.function == "_bootstrap" and out.file.endswith("threading.py")


@dataclass(frozen=True)
class DumpFinding:
    """What the dumps of a log say of the job: compiling, or waiting on its peers; with the frame."""

    doing: Activity
    dump: Dump
    frame: Frame


def finding(dumps: list[Dump]) -> DumpFinding | None:
    """Compiling when a dump's main thread compiles (one rank compiling is why the others wait, as
    the live judge reads a job); else waiting, when a dump's main thread waits on its peers or its
    device; else a save that does not complete, when py-spy shows the main thread blocked in one
    (:func:`blocked_in_save`); else None. Dumps headed by a crash report (the process died) say nothing
    of a hang."""
    live = [d for d in dumps if not d.crash and d.frame is not None]
    for wanted in (Activity.COMPILE, Activity.WAIT):
        for d in live:
            if d.doing is wanted and d.frame is not None:
                return DumpFinding(wanted, d, d.frame)
    for d in live:
        if d.doing is Activity.SAVE and d.frame is not None and blocked_in_save(d):
            return DumpFinding(Activity.SAVE, d, d.frame)
    return None


def blocked_in_save(dump: Dump) -> bool:
    """py-spy shows the main thread ``idle`` inside a checkpoint save: not writing, but blocked in it, on
    the writer it waits for (an asynchronous save's process it joins) or the peers the save gathers from
    (round issue23-heldout-34, Megatron-LM#2422: ``join (multiprocessing/process.py)`` under
    ``close (core/dist_checkpointing/strategies/async_utils.py)``, the files written empty). An ``active``
    thread in a save is writing, and other layouts print no status: neither is read so."""
    return dump.tool == "py-spy" and dump.main is not None and dump.main.status == "idle"


#: the evidence's signature: the frame is a form, not a rule of the table
DUMP_SIGNATURE = "form.stack_dump"


def dump_verdict(dumps: list[Dump], latest_progress: float | None) -> Verdict | None:
    """The verdict a log's dumps give (see :func:`finding`), with the deciding frame as evidence; None
    when they say nothing, or when any rank made progress after the dump (the job moved on after it:
    a dump of a live process, taken to look, not to report a hang)."""
    found = finding(dumps)
    if found is None:
        return None
    if latest_progress is not None and latest_progress > found.dump.first.mono:
        return None
    frame, key = found.frame, found.dump.key
    line = frame.line
    evidence = (Evidence(key, line.text, DUMP_SIGNATURE, line.source, line.lineno, line.mono),)
    where = f"{frame.function} ({frame.file})" if frame.file else frame.function
    if found.doing is Activity.SAVE:
        return Verdict(
            Label.COLLECTIVE_HANG, Action.RESTART, ranks=(key,), culprit=key, evidence=evidence,
            reason=f"a py-spy stack dump shows the main thread blocked (idle) in a checkpoint save: {where}, "
                   "and no progress after it",
            advice="The save does not complete: its writer or a peer it waits for is stuck. Check the storage and "
                   "every rank's stacks, then restart from the last complete checkpoint.",
            culprit_source="stacks")
    if found.doing is Activity.COMPILE:
        return Verdict(
            Label.COMPILING, Action.WAIT, ranks=(key,), culprit=key, evidence=evidence,
            reason=f"a {found.dump.tool} stack dump shows the main thread in a compile: {where}",
            advice="A compile is in progress; waiting is correct. Precompile (neuron_parallel_compile, a warm "
                   "compile cache) to avoid this delay.",
            culprit_source="stacks")
    return Verdict(
        Label.COLLECTIVE_HANG, Action.RESTART, ranks=(key,), culprit=key, evidence=evidence,
        reason=f"a {found.dump.tool} stack dump shows the main thread {Activity.WAIT.value}: {where}, "
               "and no progress after it",
        advice="The ranks wait on a collective that does not complete: dump every rank's stacks to find the one "
               "not waiting (it holds the others up), then restart from the last complete checkpoint.",
        culprit_source="stacks")
