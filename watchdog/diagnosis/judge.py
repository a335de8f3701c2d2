"""The judge: per-rank state from log lines, compiler samples and exits; one verdict for the job.

Pure: no I/O, ``now`` (a ``time.monotonic()`` value) is always passed in.

How compilation is told from a hang:

* A rank is *compiling* while its log shows a compiler command without the matching
  PASS/cached line, while its progress dots keep coming, or while a ``neuronx-cc compile``
  child of it keeps burning CPU. Any rank compiling makes the job ``compiling`` (the Neuron
  troubleshooting guide: RX timeouts on the others are expected), bounded by the compile budget.
* No rank progressing and none compiling for longer than the hang timeout -> ``collective_hang``.
  The timeout is fixed (``--hang-timeout``) or calibrated from step intervals after warm-up.
* A fatal signature or a failed rank -> that signature's label; the root cause is the earliest
  *primary* failure. Peer-side consequences (connection closed by peer, collective timeouts on the
  waiting ranks) only win when nothing else explains the failure. A *generic* first failure (a
  traceback header, a non-zero exit) is replaced by a specific one the same rank prints next,
  and withdrawn if the rank goes on making progress (the exception was handled).
* A rank waiting on a compile-cache lock ("Another process must be compiling") counts as
  compiling only while a compiler is alive somewhere (or while processes cannot be observed):
  a lock left by a killed compile makes every rank wait forever, which is reported, not waited on.
  Fresh ``*.lock`` files in the compile cache (:meth:`Judge.observe_cache_locks`) are job-wide
  compile evidence under the same rule.
* Info signatures (EFA not enabled, FI_EFA_FORK_SAFE, a transient memory error) never fail a job
  by themselves; they are attached as hints to a later hang or communication failure.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import NamedTuple, Protocol, cast

from neuron_watch.diagnosis.blockcontext import BlockLines
from neuron_watch.diagnosis.classify import (
    GOING_ON_SIGNATURES,
    PHASE_RUNNING,
    UNRAISABLE_SIGNATURE,
    Effect,
    KnowledgeBase,
    Match,
    sig_is_compiler_line,
)
from neuron_watch.diagnosis.errorblock import cause_from
from neuron_watch.diagnosis.errorclass import Reading, read_error
from neuron_watch.diagnosis.exctaxonomy import exception_class, frame_of, program_mistake
from neuron_watch.diagnosis.failureforms import FOLDING_ALARM, SLOW_ALARM, SLOW_ALARM_RETURNED, read_line
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.diagnosis.flight_recorder import GroupProgress, StalledCollective, stalled_collective
from neuron_watch.diagnosis.forms_severity import head_level, trt_level
from neuron_watch.diagnosis.heldout.round25b import large_allocation
from neuron_watch.diagnosis.heldout.round34c import folded_traceback
from neuron_watch.diagnosis.signature import Signature
from neuron_watch.events import (
    Action,
    BatchColumns,
    CompilerSample,
    Evidence,
    Label,
    LazyEvidence,
    LogLine,
    ProgressColumns,
    RankExit,
    RankKey,
    RankSpan,
    Verdict,
    WorkerSample,
    lazy_evidence_rows,
)

_FIRST_LINE = attrgetter("first_line")
_new_tuple = tuple.__new__  # a named tuple (LazyEvidence) built in C from its fields
_UNEXPLAINED = attrgetter("unexplained")
_BY_ORDER = attrgetter("order")  # a rank state's place in Judge.ranks (Judge._ordered)

#: Categories that usually describe what happened *to* a rank because a peer failed.
SECONDARY = frozenset({Label.COMM_ERROR, Label.COLLECTIVE_HANG, Label.COMM_TIMEOUT_TRANSIENT})

#: Dots arrive every ~20 s from neuronx-cc; a compile with no dot for this long has no heartbeat.
COMPILE_BEAT_WINDOW = 120.0
#: A graph recompile inside the rank (dynamo/inductor's own Python, its compile workers, the
#: compilers they run) keeps the rank's process tree on the CPU: no CPU growth in the whole tree for
#: this long and the compile is over (or stuck). Readings come every second or so.
IN_PROCESS_COMPILE_STALL = 30.0
#: ... and "using the CPU" is a compile's pace, not a waiting process's: a rank hung in a collective or
#: deadlocked still wakes now and then (a library's watchdog thread, a warning printer, the worker server
#: our probe asks every few seconds), a clock tick (10 ms) every 1.5 to 2.5 s, 0.4-0.7% of a core
#: (measured on the toy's ranks under neuron-watch, one stuck after announcing a build, one waiting for it
#: in the collective). Growth counts when it reaches this share of a core over at least
#: TREE_PACE_WINDOW seconds (six ticks and more): a compile using even a sliver of a loaded core passes.
IN_PROCESS_COMPILE_PACE = 0.02
TREE_PACE_WINDOW = 3.0
#: A rank's stdout and stderr are separate files, read in turn: a step line printed just before a
#: recompile announcement on the other stream can be read in the same poll as it, or after it.
STREAM_SKEW = 0.25
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def xla_duration(text: str) -> float | None:
    """Seconds of a torch-xla metrics duration (``06m09s401ms746.001us``, ``074.840us``); None if
    ``text`` is not one."""
    text = text.strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


#: A training bar without a description at its total: the Hugging Face Trainer's (its total is
#: max_steps, its count the global step) or a plain tqdm loop's, at the last step it was given
#: ("100%|##########| 30/30 [00:47<00:00,  1.53s/it]"). What follows it is the run's end: Trainer
#: saves a checkpoint at the last step whatever the step (DefaultFlowCallback: "Save the model at the
#: end"), silently at its default log level, then logs its final metrics.
_LAST_STEP_BAR = re.compile(r"^\s*100%\|[^|]*\|\s*(\d+)/(\d+) \[")
#: A tqdm bar's count and total ("| 3/30 [")
_BAR_COUNT = re.compile(r"\|\s*\d+/(\d+) \[")
#: the time a tqdm bar has run, as it prints it ("[00:47<00:00", "[1:02:03<00:00": tqdm format_interval)
_BAR_ELAPSED = re.compile(r"\[(?:(\d+):)?(\d+):(\d\d)<")
#: A bar drawn at 0 (tqdm draws a new bar at once): a loop that began again after a bar's end
_NEW_BAR = re.compile(r"^\s*0%\|[^|]*\|\s*0/\d+ \[")
#: The node's own line when a new complete checkpoint appears in --checkpoint-dir (node/observer.py):
#: the job wrote a checkpoint, so what it ran was training
CHECKPOINT_APPEARED_SIGNATURE = "progress.checkpoint_appeared"
#: progress signatures whose match is never a steady step (Judge._observe_matches): _apply has their rules
_NOT_STEADY = frozenset({UNRAISABLE_SIGNATURE, CHECKPOINT_APPEARED_SIGNATURE})


def _elapsed(text: str) -> float:
    """The seconds a tqdm bar ``text`` says it has run (``[01:02:03<...``: 3723); none read: all time
    (a bar that does not say when it began may have begun at any time)."""
    m = _BAR_ELAPSED.search(text)
    if m is None:
        return math.inf
    hours, minutes, seconds = m.groups()
    return int(hours or 0) * 3600.0 + int(minutes) * 60.0 + int(seconds)


def _bar_began(bar: Evidence) -> float:
    """When the tqdm bar whose line is ``bar`` began, by the time it says it has run."""
    return bar.mono - _elapsed(bar.text)


def _bar_total(text: str) -> int | None:
    """The total of the tqdm bar ``text`` is (``30`` in `` 10%|#   | 3/30 [...]``); None if it is none."""
    m = _BAR_COUNT.search(text)
    return None if m is None else int(m.group(1))


def _bar_at_total(text: str, step: int) -> bool:
    """Is ``text`` a description-less training bar at its total, that total being ``step``?"""
    m = _LAST_STEP_BAR.match(text)
    return m is not None and m.group(1) == m.group(2) == str(step)


#: the failed guard in dynamo's recompile message (signature torch.dynamo.recompile_reason)
_GUARD_FAILURE = re.compile(r"\] {4,}- (?:\d+/\d+: )?(\S.*)")
#: Recompiles of one rank in one generation that make a recompile storm (dynamo's own limit is 8 per
#: function, torch/_dynamo/config.py recompile_limit)
RECOMPILE_STORM = 5
#: how long after a "training finished" line a progress line may be a bar's closing redraw rather
#: than more training (transformers closes its bar milliseconds after the final metrics)
END_REDRAW_SECONDS = 5.0
#: Hang timeouts that ranks still running get, from a "training finished" line said by other ranks at
#: their final step, to exit: most programs print the end on rank 0 only (the DDP tutorial's
#: ``if rank == 0: print``, HF's final metrics, Lightning's ``rank_zero_info``, Megatron's
#: ``print_rank_0``), and the others' silence meanwhile is their teardown (destroy_process_group,
#: interpreter exit: seconds under load). One hang timeout for the silence of the last step that any
#: step gets, one for the teardown; at least TEARDOWN_FLOOR. Once every rank that said it has exited,
#: its own teardown is over and measured: the others get one hang timeout from that exit (theirs is
#: the same work).
TEARDOWN_GRACE = 2.0
#: The shortest teardown grace, seconds: a short --hang-timeout (tests, a quick job) must not make a
#: loaded machine's exit a hang. Measured on 2 cores at load 9-10: 9.5-11.4 s from the DDP job's
#: "training done" line to torchrun's exit without neuron-watch, 7.6 s to its ranks' exit under it
#: (tests/process/ranks/ddp_faults.py --fault slow_teardown --teardown-seconds 0).
TEARDOWN_FLOOR = 30.0


def teardown_grace(hang_timeout: float) -> float:
    """Seconds from a "training finished" line said on some ranks for the others, at its step, to
    exit (:data:`TEARDOWN_GRACE` hang timeouts, at least :data:`TEARDOWN_FLOOR`)."""
    return max(TEARDOWN_GRACE * hang_timeout, TEARDOWN_FLOOR)


#: Flight recorder readings with a newly completed collective after which collectives count as the
#: job's progress (the probe reads every 5 s: 15 s of collectives completing, a training loop's)
STEADY_COLLECTIVES = 3

SIGTERM_CODES = frozenset({-15, 143})
#: error lines kept per rank since its progress (RankState.errors): a bare fatal signal follows the line
#: that states its cause within a few lines (a library's error, then the abort it calls)
ERRORS_KEPT = 8
#: how many lines of its stream a bare fatal signal may follow the line that states its cause by: the stack
#: a native crash handler prints between them (glog's check failure trace, a faulthandler dump of every
#: thread) is tens of lines; an error printed further back is a part of the run the process went on from
CAUSE_BEFORE_LINES = 200


#: a graph compiler killed by SIGKILL, as the Neuron wrappers and Python's subprocess say it
#: (CPython Lib/subprocess.py CalledProcessError.__str__: "died with <Signals.SIGKILL: 9>.")
_COMPILER_SIGKILL = re.compile(r"(?:failed with|exit status) -9\b|died with <Signals\.SIGKILL: 9>|signal 9\b|SIGKILL")


#: Linux signal numbers (x86/arm64: include/uapi/asm-generic/signal.h; the ``signal`` module is a
#: system interface a pure module does not import)
_LINUX_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
                  8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
                  14: "SIGALRM", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS"}


def batch_columns(ranks: Sequence[RankSpan], matches: Sequence[LogLine],
                  progress: Sequence[LogLine] = ()) -> BatchColumns:
    """A batch given as records (:meth:`Judge.observe_batch`) by column (:meth:`Judge.observe_columns`):
    each progress line is its rank's row, found by its key among ``ranks``.

    Raises:
        ValueError: a progress line of a rank that has no span in the batch.
    """
    keys = [span.key for span in ranks]
    index = {key: i for i, key in enumerate(keys)}
    chunks = []
    for line in progress:
        i = index.get(line.key)
        if i is None:
            raise ValueError(f"a progress row of {line.key}, a rank with no lines in the batch")
        chunks.append(i)
    rows = ProgressColumns(chunks, [p.mono for p in progress], [p.wall for p in progress],
                           [p.text for p in progress], [p.source for p in progress],
                           [p.lineno for p in progress], [p.signature for p in progress],
                           [cast("int", p.step) for p in progress])
    return BatchColumns(keys, [span.first for span in ranks], [span.last for span in ranks],
                        [span.text for span in ranks], matches, rows)


def _exit_meaning(code: int | None) -> str:
    """What an exit code says: ``-N`` is a death by signal N as Python's subprocess and torchrun
    report it (torch/distributed/elastic/multiprocessing/errors/__init__.py formats "Signal N (NAME)
    received by PID"); 128+N is the same as a shell reports it (bash: "128+n" for a fatal signal n);
    anything else is the program's own status."""
    if code is None:
        return "no exit code"
    n = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else None
    if n is None:
        return f"the program's own status {code}"
    name = _LINUX_SIGNALS.get(n)
    if name is None:
        return f"killed by signal {n}"
    what = {"SIGSEGV": "segmentation fault", "SIGABRT": "aborted", "SIGKILL": "killed",
            "SIGBUS": "bus error", "SIGFPE": "floating-point exception", "SIGILL": "illegal instruction"}
    return f"killed by signal {n}, {name}" + (f": {what[name]}" if name in what else "")


#: NCCL's line prefix "<host>:<pid>:<tid> [<dev>]" (nccl src/debug.cc ncclDebugLog)
_NCCL_PROCESS = re.compile(r"([\w.-]+:\d+):\d+ \[\d+\]")


def _same_process(error: str, going_on: str) -> bool:
    """Did one process print both NCCL lines? A stream of many processes (a pasted log, one node's
    ranks in one file) shows one process's setup going on after another's error: that says nothing
    of the process that failed. A line without NCCL's prefix is nobody's."""
    a, b = _NCCL_PROCESS.search(error), _NCCL_PROCESS.search(going_on)
    return a is not None and b is not None and a.group(1) == b.group(1)


def _relayed_cause(errors: Sequence[Evidence], ev: Evidence) -> tuple[Reading, Evidence] | None:
    """The reading and the line of the first error that states a cause in the log a launcher relays after
    ``ev`` (``errors`` from ``ev`` on): the process's own error lines, from its announcement (``_LOG_RELAYED``)
    on, within :data:`RELAYED_LINES` of them. None without an announcement or a cause."""
    same = [e for e in errors if e.key == ev.key and e.source == ev.source][:RELAYED_LINES]
    start = next((i for i, e in enumerate(same) if _LOG_RELAYED.search(e.text)), None)
    for relayed in same[start + 1:] if start is not None else ():
        if (reading := read_error(relayed.text)) is not None:
            return reading, relayed
    return None


#: a tool's error record, "<tool>: error: ...", the head of each record of one report (srun, slurmstepd, sbatch)
_TOOL_ERROR = re.compile(r"^\s*([\w.-]+): error: ")


def _tool_run_cause(errors: Sequence[Evidence], ev: Evidence) -> tuple[Reading, Evidence] | None:
    """The reading and the line of the first record that states a cause among the records that follow ``ev`` on
    the next lines of its source with the same ``<tool>: error:`` head (``errors`` from ``ev`` on): one tool's
    report in several records, whose first may state no cause. srun reports a launch it could not make as
    "srun: error: JobId=<id> failed to distribute tasks (...) - this should never happen" or "srun: error:
    slurm_receive_msgs: [[<node>]:6818] failed: Socket timed out on send/recv operation", then "srun: error: Task
    launch for StepId=<id> failed on node <node>: <reason>" (snakemake-executor-plugin-slurm#225, batchtools#201).
    None when ``ev`` is no such record or no following record of the run states a cause."""
    head = _TOOL_ERROR.match(ev.text)
    if head is None:
        return None
    lineno = ev.lineno
    for e in errors:
        if e is ev or e.key != ev.key or e.source != ev.source:
            continue
        if e.lineno != lineno + 1 or not e.text.lstrip().startswith(f"{head.group(1)}: error: "):
            break
        if (reading := read_error(e.text)) is not None:
            return reading, e
        lineno = e.lineno
    return None


#: Triton's report of an assembler it ran that failed (python/triton/backends/nvidia/compiler.py make_cubin raises
#: PTXASError, whose message is "PTXAS error: <what>" then "`ptxas` stderr:" and ptxas's own output): the output
#: under it states the cause (round issue23-heldout-35 part C: "ptxas fatal : Value 'sm_121a' is not defined for
#: option 'gpu-name'" under "PTXASError: PTXAS error: Internal Triton PTX codegen error", read as a cause not
#: recognised), within the next lines of the same source. ggml's Metal back-end reports a command buffer that did not
#: complete as "<function>: error: command buffer <i> failed with status <s>" and, for MTLCommandBufferStatusError (5),
#: the error's description on the next record, "error: <localizedDescription>" (ggml-metal-context.m, llama.cpp,
#: ollama, llamafile, whisper.cpp), with GGML_ABORT's "fatal error" between them when stderr interleaves: the
#: description states the cause (round issue23-heldout-37 part B: "Insufficient Memory
#: (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)" under the status line, llamafile#881, read as a cause not
#: recognised)
_TOOL_STDERR_HEAD = re.compile(r"\bPTXAS error: |\bcommand buffer \d+ failed with status \d+")
#: how many lines under the report its tool's output may state the cause (the stderr header takes one)
TOOL_STDERR_LINES = 4


def _tool_stderr_cause(errors: Sequence[Evidence], ev: Evidence) -> tuple[Reading, Evidence] | None:
    """The reading and the line of the first error that states a cause in the tool output Triton's report ``ev``
    (or ggml-metal's status) goes on with (``errors`` from ``ev`` on): error lines of its source within
    :data:`TOOL_STDERR_LINES` under it.
    None when ``ev`` is no such report or its output states no cause."""
    if _TOOL_STDERR_HEAD.search(ev.text) is None:
        return None
    for e in errors:
        if e is ev or e.key != ev.key or e.source != ev.source or e.lineno <= ev.lineno:
            continue
        if e.lineno > ev.lineno + TOOL_STDERR_LINES:
            break
        if (reading := read_error(e.text)) is not None:
            return reading, e
    return None


#: the causes a compiler's raised exception may state that are not the compile's own: the set-up it ran in
_SETUP_LABELS = frozenset({Label.CONFIG_ERROR, Label.OOM, Label.HARDWARE_ERROR})


def _raised_setup(failure: Evidence | None, detail: Evidence | None) -> Evidence | None:
    """``detail`` when ``failure`` (a compile error's line) ends on a colon and ``detail``, the error line right
    under it in the same source, states a set-up cause (:data:`_SETUP_LABELS`): what a compiler wrapper raised
    (torch/_dynamo/exc.py BackendCompilerFailed's message is "backend='<name>' raised:" and the exception the
    backend raised prints on the next line); None otherwise."""
    if (failure is None or detail is None or not failure.text.rstrip().endswith(":")
            or detail.source != failure.source or detail.lineno != failure.lineno + 1):
        return None
    reading = read_error(detail.text)
    return detail if reading is not None and reading.label in _SETUP_LABELS else None


def _traceback_frames(texts: Sequence[str], at: int) -> tuple[list[tuple[str, str]], bool]:
    """The frames (file, function), outermost first, of the Python traceback whose exception line is
    ``texts[at]``, and whether it was read from its ``Traceback (most recent call last):`` header."""
    frames: list[tuple[str, str]] = []
    for i in range(at - 1, -1, -1):
        text = texts[i]
        frame = frame_of(text)
        if frame is not None:
            frames.append(frame)
        elif "Traceback (most recent call last)" in text:
            return frames[::-1], True
        elif not text[:1].isspace():
            break  # (a frame's source line and its markers are indented under it)
    return frames[::-1], False


def _states_configuration(text: str) -> bool:
    """The form reader reads ``text`` as a failure whose stated cause is configuration."""
    form = read_line(text)
    return form is not None and form.label is Label.CONFIG_ERROR


@dataclass(frozen=True)
class EndOnSomeRanks:
    """Training said finished by some ranks at the final step of the others, still running
    (:meth:`Judge._end_said_by_some`)."""

    end: Evidence  # the newest "training finished" line
    quiet: tuple[RankKey, ...]  # the ranks still running that did not say it
    step: int  # the step at which it was said (the quiet ranks reached it)
    until: float  # monotonic time by which the quiet ranks have to exit (teardown_grace)


#: how often, at most, status looks again for a stuck first collective while its readings stand still
#: (the rank probe reads each rank's flight recorder every 5 s)
STALL_LOOK_EVERY = 5.0


class _FirstStall(NamedTuple):
    """A collective stuck before the first progress (:meth:`Judge._first_stall`)."""

    stall: StalledCollective
    reference: float  # when its hang clock started
    timeout: float  # the hang timeout it is judged at, delivery slack included
    what: str  # that timeout's name, for the verdict's reason
    live: list[RankState]


@dataclass(frozen=True)
class FirstCollectiveStall:
    """A collective seen stuck before the job's first progress, as ``status`` shows it: the judge
    calls it a hang once ``stalled_for`` passes ``timeout`` (:meth:`Judge.first_collective_stall`)."""

    how: str  # e.g. "vm/rank1 never entered collective 5 of group 0, which the other rank entered and waits in"
    stalled_for: float  # seconds its hang clock has run
    timeout: float
    what: str  # "hang timeout" (--hang-timeout) or "uncalibrated hang timeout"


def _ranks_said(keys: Sequence[RankKey]) -> str:
    """``vm/rank1`` or ``vm/rank1 and 3 more rank(s)``: ranks named in a verdict's reason."""
    return _who(keys[0]) + (f" and {len(keys) - 1} more rank(s)" if len(keys) > 1 else "")


def _who(key: RankKey) -> str:
    """A rank for messages: ``node/rank3``, or ``rank 3`` when the node is unknown (offline)."""
    return str(key) if key.node else f"rank {key.rank}"

#: collectives whose input is the same shape on every rank (all_gather's list, scatter's and
#: all_to_all's splits may differ): only for these does a differing shape mean a mismatch
_SAME_SHAPE_OPS = frozenset({"all_reduce", "allreduce", "broadcast", "barrier", "all_reduce_coalesced",
                             "allreduce_coalesced", "_allgather_base", "all_gather_into_tensor",
                             "_reduce_scatter_base", "reduce_scatter_tensor"})
#: a rank's report that the ranks called different collectives (it is the one that noticed)
MISMATCH_SIGNATURE = "torch.c10d.collective_mismatch"
KILLED_CODES = frozenset({-9, 137})
#: The signature of "this process got SIGKILL" lines (torchrun's report, a shell's "Killed"): not OOM by itself.
KILLED_SIGNATURE = "host.killed_sigkill"
#: The last rule of the table: an error line nothing above explains (signatures.toml).
UNRECOGNISED_SIGNATURE = "host.unrecognised_error"
#: the levels of a record's head that say it failed (forms_severity.head_level: words and glog's letters)
_FAILED_LEVELS = frozenset({"ERROR", "FATAL", "CRITICAL", "E", "F"})
#: a Java throwable as Throwable.toString prints it ("java.lang.OutOfMemoryError: Java heap space"), which
#: log4j's and logback's layouts put on the line after the message of logger.error(message, throwable),
#: its "\tat" frames under it: the record's cause is the throwable's
_THROWABLE = re.compile(r"^(?:[a-z_]\w*\.)+[A-Z][\w$]*(?:Error|Exception|Throwable)(?::\s|\s*$)")
#: A launcher's announcement that the log of the tool it ran follows, under its own error prefix (pyxis,
#: src/pyxis_slurmstepd.c: "printing enroot log file:" after "failed to import docker image", then each line of
#: enroot's log as "pyxis:     <line>"): the tool's error in that log is the cause of the launcher's failure
#: lines before it, which state none ("child N failed with error code: 1"). Older releases announce it as
#: "pyxis: printing contents of log file ..." (the same function, with slurm_error, later slurm_info; round
#: issue23-heldout-32 part B: pyxis-53's squashfs write that found no space, read as a cause not recognised).
_LOG_RELAYED = re.compile(r"\bpyxis: printing (?:(?:enroot|container) log file:|contents of log file\b)")
#: how many of the process's error lines after the announcement the relayed log's cause is looked for in
RELAYED_LINES = 40
TRACEBACK_SIGNATURE = "python.traceback"
#: how long after "Exception ignored in:" its traceback may still come (the report is one write)
UNRAISABLE_REPORT_S = 5.0
#: the effects of the matches compact_matches may leave out of a node's batch
_COMPACTABLE = frozenset({Effect.PROGRESS, Effect.BENIGN, Effect.INFO, Effect.COMM_WAIT, Effect.COMPILE_BEAT})
#: A collective library's stall report that names the ranks that never joined (signatures.toml): a wait
#: while the job goes on; a rank's last word at the end of the input, the job ended inside the hang.
STALL_LIST_SIGNATURES = frozenset({"horovod.stalled_ranks"})
#: how many lines before a SIGKILL the allocator's note of a large allocation may be (the kill follows it)
ALLOCATION_KILL_LINES = 3
_NO_OOM_EVIDENCE = "no out-of-memory evidence (a kernel oom-kill line, the cgroup's oom_kill count)"

#: A rank with no output for this long is ``silent`` in status displays, at the least (see
#: :meth:`Judge.silent_after`): a few normal step intervals, never less than this.
SILENT_FLOOR = 60.0
#: ... and this many normal step intervals.
SILENT_INTERVALS = 3.0
#: No rank has shown progress by any signal although they printed for this long after their first
#: line: the judge is probably blind to this job's progress lines (:meth:`Judge.blind`). A real
#: HF/Lightning job prints its first step within seconds of its first line once the model is
#: loaded; Neuron compiles are excluded (they are work, and have their own evidence).
BLIND_AFTER = 180.0
#: distinct recent lines kept to name what the ranks print in the blind warning
BLIND_LINES = 4


@dataclass(frozen=True)
class BlindWarning:
    """No progress recognised: for how long the ranks printed, and what they print (shortened)."""

    seconds: float
    lines: tuple[str, ...]
    ranks: int

    def message(self) -> str:
        shown = "; ".join(repr(t) for t in self.lines) or "(nothing)"
        return (f"no progress line recognised in {self.seconds:.0f}s of output from {self.ranks} rank(s): "
                f"the hang detector only has the startup timeout to go by. The ranks print e.g. {shown}. "
                "If one of these marks a training step, pass --progress-regex (e.g. --progress-regex "
                "'Epoch (?P<step>\\d+)').")


@dataclass(frozen=True)
class HangCalibration:
    """Hang timeout from observed step intervals.

    The first ``warmup_steps`` intervals are ignored (they include graph compiles and cache
    loads); once ``min_samples`` intervals remain, the timeout is ``factor`` x the longest of them,
    clamped to [``floor``, ``ceiling``]. Until then ``default`` applies: the long grace of the
    first steps. Before the first step the judge uses ``JudgeSettings.startup_timeout`` instead.

    Defaults follow the strongest peer (NVRx: 5 x observed max, 5 warm-up iterations) with a floor
    that stays above the Neuron runtime's 120 s RX-timeout warnings, and a ceiling below NCCL's
    30 min default collective timeout.
    """

    warmup_steps: int = 5
    min_samples: int = 3
    factor: float = 5.0
    floor: float = 180.0
    ceiling: float = 1800.0
    default: float = 900.0

    def timeout(self, intervals: Sequence[float]) -> float:
        """The timeout for these step intervals (seconds, oldest first)."""
        usable = intervals[self.warmup_steps :]
        return self.timeout_of(len(usable), max(usable, default=0.0))

    def timeout_of(self, usable: int, longest: float) -> float:
        """The timeout for ``usable`` intervals past the warm-up, the longest of them ``longest``."""
        if usable < self.min_samples:
            return self.default
        return min(self.ceiling, max(self.floor, self.factor * longest))

    def calibrated(self, intervals: Sequence[float]) -> bool:
        """Has the warm-up passed (is :meth:`timeout` measured rather than the default)?"""
        return len(intervals) - self.warmup_steps >= self.min_samples


def _rank_progressed(st: RankState, mono: float, ev: Evidence | LazyEvidence, work_max: float | None,
                     work_stale: bool) -> tuple[float | None, bool]:
    """What a progress line ``ev`` of ``st``'s rank (read at ``mono``) does to the rank (see
    :meth:`Judge._progressed`), given the job's newest work and whether it is stale: returns them as they
    are after it. A function of its arguments, so the batch loops keep the job's pair in locals."""
    old = st.last_progress
    if work_max is None or mono >= work_max:
        work_max, work_stale = mono, False
    elif old is not None and mono < old == work_max:
        work_stale = True
    st.last_progress, st.last_progress_line = mono, ev
    st.unexplained = st.failure_detail = None
    st.errors = ()
    st.first_lock_wait = None
    return work_max, work_stale


@dataclass(frozen=True)
class JudgeSettings:
    """Timeouts in seconds. ``hang_timeout=None`` means calibrated (see :class:`HangCalibration`)."""

    hang_timeout: float | None = None
    startup_timeout: float = 1800.0
    compile_timeout: float = 7200.0
    #: longest a synced checkpoint save may hold every rank before silence counts as a hang again
    save_timeout: float = 3600.0
    #: a compiler process whose CPU time has not grown for this long is no longer evidence of work
    compiler_cpu_stall: float = 300.0
    calibration: HangCalibration = field(default_factory=HangCalibration)


@dataclass
class RecompileNote:
    """A recompile a rank announced (torch.compile), with the first guard failure that caused it."""

    announced: Evidence
    reason: str | None = None


@dataclass
class RankState:
    """What the judge knows about one rank. Times are monotonic seconds."""

    key: RankKey
    first_seen: float
    last_line: float
    last_line_text: str = ""
    first_line: float | None = None  # when its first line was seen (None: expected, not heard yet)
    last_progress: float | None = None
    #: its newest progress line as evidence; a batch's progress row leaves its fields, built when a verdict
    #: reads them (progress_line)
    last_progress_line: Evidence | LazyEvidence | None = None
    step: int | None = None
    step_mono: float | None = None  # when its line of that step was seen
    save_open: float | None = None  # a synced checkpoint save began (log) and has not completed
    save_open_line: Evidence | None = None
    last_save_end: float | None = None
    train_end: float | None = None  # the framework said training finished (no progress since)
    train_end_step: int | None = None  # the rank's step when it said so
    recompiles: int = 0  # graph recompiles this rank announced (torch.compile)
    last_recompile_line: Evidence | None = None
    recompile_limit_hit: bool = False  # dynamo gave up recompiling (a storm by its own word)
    #: a recompile announced (dynamo's "Recompiling function") that neither this rank's progress nor
    #: a later step of the job has closed yet, and the job's step when it was announced
    recompile_open: float | None = None
    recompile_step: int | None = None
    recompile_own_step: int | None = None  # this rank's own step when it announced the recompile
    #: CPU seconds of the rank's process tree (process sampling) at the reading growth is measured from,
    #: and that reading's time (see Judge.observe_worker_columns)
    tree_cpu: float | None = None
    tree_cpu_at: float = 0.0
    #: when the tree last grew at a compile's pace (IN_PROCESS_COMPILE_PACE; None: its processes are not seen)
    tree_cpu_grew: float | None = None
    stopped: bool = False  # a signal stopped the rank (SIGSTOP, Ctrl-Z): it computes nothing
    stopped_since: float | None = None  # the first reading that showed it stopped (None: not stopped)
    last_recompile_note: RecompileNote | None = None  # its newest recompile still to get its reason
    #: torch-xla's metrics report: after "Metric: CompileTime", the graphs it counted; then its total
    compile_metric_samples: int | None = None
    in_compile_metric: bool = False
    #: (graphs compiled, seconds) by this rank's own account, newest report (goodput, events)
    reported_compile: tuple[int, float] | None = None
    train_end_line: Evidence | None = None
    compile_open: float | None = None  # compile started (log) and not yet ended
    compile_open_line: Evidence | None = None
    last_compile_beat: float | None = None
    last_compiler_line: float | None = None  # the compiler's own words (a compile beat other than a dot)
    #: the newest compile the program announced in its own words (form.compile_running: a TensorRT engine
    #: build, an XLA module) while it is open: the rank's next progress line and the compile's end close it,
    #: by the order they are read in (a step printed just before it is often read in the same poll, at
    #: the same time). While no compiler process of the rank is seen after it, the compile runs in the
    #: rank's own process (see announced_compile_until; a compiler's evidence is its own CPU).
    phase_running: float | None = None
    #: the newest compile beat was such an announcement: where the rank's processes are seen, its tree's
    #: CPU bounds it (announced_compile_until), not the beat window that a compiler's dots get
    beat_announced: bool = False
    compiler_seen: float | None = None  # the newest reading that showed a compiler process of this rank
    compiles_started: int = 0  # compile start lines seen (parallel graph compiles print one each)
    compiles_ended: int = 0  # compile end lines seen (one PASS per graph)
    last_compile_end: float | None = None
    compile_seconds: float = 0.0  # finished compiles, for reports
    folding_alarm: bool = False  # XLA's last slow-operation alarm on this rank was constant folding's
    alarm_returned: bool = False  # XLA's last slow-compile record on this rank said the compile returned
    #: inside an exception Python ignored: 1 announced ("Exception ignored in:"), 2 its traceback began
    unraisable: int = 0
    unraisable_at: float = 0.0  # the announcement's line time
    last_wait: float | None = None
    last_wait_line: Evidence | None = None
    first_lock_wait: float | None = None  # "Another process must be compiling" since
    last_lock_wait: float | None = None
    last_lock_wait_line: Evidence | None = None
    failure: Evidence | None = None  # the failure that explains this rank (see _apply)
    failure_match: Match | None = None
    failure_time: float | None = None  # when this rank first failed (generic or not)
    #: the first error line no rule explains since this rank's last progress (Effect.UNEXPLAINED)
    unexplained: Evidence | None = None
    #: the first such line after a generic failure (a traceback header): the exception it names
    failure_detail: Evidence | None = None
    #: this rank's newest error lines (failures and lines no rule explains) since its last progress, oldest
    #: first, at most ERRORS_KEPT: what a bare fatal signal after them died of (Judge._cause_before)
    errors: tuple[Evidence, ...] = ()
    exit_code: int | None = None
    exit_time: float | None = None
    #: exit_code 0 is presumed from the rank's record of a normal interpreter exit (RankExit.presumed):
    #: an exit status reported for the rank later replaces it
    exit_presumed: bool = False
    compiler_cpu: dict[int, tuple[float, float]] = field(default_factory=dict)  # pid -> (cpu, mono of growth)
    last_collective: float | None = None  # a reading showed a newly completed collective (flight recorder)
    collectives: dict[str, GroupProgress] = field(default_factory=dict)  # process group -> newest reading
    collective_advances: int = 0  # readings in which a collective completed
    order: int = 0  # the judge's n-th rank: lists of ranks keep the order in which they appeared

    def progress_line(self) -> Evidence | None:
        """The rank's newest progress line as evidence (a batch's row's built now, once)."""
        line = self.last_progress_line
        if isinstance(line, LazyEvidence):
            line = self.last_progress_line = line.build()
        return line

    def compiler_active(self, now: float, stall: float) -> bool:
        """A compiler of this rank burned CPU within ``stall`` of ``now``, and the rank has not made
        progress since: a Neuron compile blocks the rank that asked for it, so a step printed after
        the compiler's last growth means that compile is over, even before the next process reading
        (one a second, maybe none before the job ends) shows the pid gone. A reading that shows it
        growing again after the step makes the rank compiling again."""
        after = self.last_progress
        return any(now - grew <= stall and (after is None or grew > after)
                   for _cpu, grew in self.compiler_cpu.values())

    def compile_opened(self) -> bool:
        """Is a compile open that the compiler itself shows: the wrapper's command line without its
        end, the compiler's own line since the last compile ended, a compiler process alive, or
        compiles that the starts and ``PASS`` lines seen do not close? Parallel graph compiles print
        a start per graph and one ``PASS`` per graph as each ends, dots meanwhile; more ``PASS``
        lines than starts mean the starts came before what was read (a log cut at its top), so the
        dots count until the rank's next progress."""
        if self.compile_open is not None or self.compiler_cpu:
            return True
        if self.last_compiler_line is not None and (
                self.last_compile_end is None or self.last_compiler_line > self.last_compile_end):
            return True
        if self.compiles_started == self.compiles_ended:
            return False
        said = self.last_compile_end if self.last_compile_end is not None else self.last_compiler_line
        return said is not None and (self.last_progress is None or said >= self.last_progress)

    def compiling(self, now: float, settings: JudgeSettings, lock_holder_alive: bool = True) -> bool:
        """Is there live evidence that this rank is compiling (or waiting on a live compile) at ``now``?

        ``lock_holder_alive``: may a compile-cache lock this rank waits on still be held by a
        working compiler (the judge decides it job-wide)?
        """
        if self.exit_code is not None or self.stopped:
            return False  # a stopped rank compiles nothing: its compilers' output waits on it
        return self.compile_evidence(now, settings, lock_holder_alive)

    def compile_evidence(self, now: float, settings: JudgeSettings, lock_holder_alive: bool = True) -> bool:
        """:meth:`compiling` whether or not the rank exited or is stopped (a compile in the rank's own
        process aside: its evidence does not count while stopped). Every piece of evidence counts within a window that
        closes as ``now`` grows: once this is false (with ``lock_holder_alive``), only a new
        observation of the rank (a line, a compiler or worker reading) makes it true again."""
        if self.compiler_active(now, settings.compiler_cpu_stall):
            return True
        if self.compile_open is not None and now - self.compile_open <= settings.compile_timeout:
            return True
        if self.announced_compile_until(now, settings) is not None:
            return True
        if self.recompiling_until(now, settings) is not None:
            return True
        if (
            self.last_compile_beat is not None
            and now - self.last_compile_beat <= COMPILE_BEAT_WINDOW
            # dots printed before the compile's PASS line belong to that finished compile
            and (self.last_compile_end is None or self.last_compile_beat > self.last_compile_end)
            # an announcement is a beat too; where the rank's processes are seen, its CPU decides instead
            and not (self.beat_announced and self.tree_cpu_grew is not None)
        ):
            return True
        return (
            lock_holder_alive
            and self.first_lock_wait is not None
            and self.last_lock_wait is not None
            and now - self.last_lock_wait <= COMPILE_BEAT_WINDOW * 5  # the wrapper repeats it every minute
            and now - self.first_lock_wait <= settings.compile_timeout
        )

    def _in_process_compile_until(self, announced: float, now: float) -> float | None:
        """Where the rank's processes are seen: the newest evidence that a compile it announced at
        ``announced`` and nothing has closed still runs in its own process tree at ``now``; None if none.

        A compile in the rank (dynamo and inductor's Python between the compilers they run, a TensorRT
        engine build, an XLA module) keeps its process tree on the CPU; a rank hung after announcing one
        (deadlocked, waiting on a peer forever, stopped) does not. So the evidence is the tree's CPU growth
        since the announcement, within :data:`IN_PROCESS_COMPILE_STALL`; the announcement itself counts
        until a reading can say otherwise."""
        if self.stopped:
            return None  # a stopped rank computes nothing
        grew = self.tree_cpu_grew
        if grew is not None and grew >= announced and now - grew <= IN_PROCESS_COMPILE_STALL:
            return grew
        return announced if now - announced <= IN_PROCESS_COMPILE_STALL else None

    def announced_compile(self) -> float | None:
        """When the compile this rank announced in its own words (:attr:`phase_running`) was announced,
        while nothing closed it (the rank's progress, the compile's end) and no compiler process of the rank
        was seen after it (the compiler's CPU is the evidence then); None if none is open."""
        running = self.phase_running
        if running is None or (self.compiler_seen is not None and self.compiler_seen >= running):
            return None
        return running

    def announced_compile_until(self, now: float, settings: JudgeSettings) -> float | None:
        """The newest evidence (monotonic time) that the compile this rank announced in its own words
        (:meth:`announced_compile`) still runs at ``now``, within the compile budget; None if none.

        Where the rank's processes are seen, its process tree's CPU (:meth:`_in_process_compile_until`):
        a rank that announced a build and then hung is judged at the hang timeout, not held for the
        compile budget. Without process readings (offline ``diagnose`` of a log), the announcement
        alone: a log that ends inside a build ends compiling, for as long as the build takes."""
        running = self.announced_compile()
        if running is None or now - running > settings.compile_timeout:
            return None
        if self.tree_cpu_grew is not None:
            return self._in_process_compile_until(running, now)
        return running

    def recompiling_until(self, now: float, settings: JudgeSettings) -> float | None:
        """The newest evidence (monotonic time) that an announced, unclosed recompile still runs at
        ``now``; None if there is none.

        Where the rank's processes are seen, the evidence is its process tree still using the CPU
        (:meth:`_in_process_compile_until`): a recompile is Python work in the rank between the
        compilers it runs, and a rank that trains on after it is closed by the job's next step.
        Without process readings (offline, no sampling), the announcement alone counts for
        :data:`COMPILE_BEAT_WINDOW`, until a compiler process ends after it."""
        if self.recompile_open is None or now - self.recompile_open > settings.compile_timeout:
            return None
        if self.tree_cpu_grew is not None:
            return self._in_process_compile_until(self.recompile_open, now)
        if now - self.recompile_open <= COMPILE_BEAT_WINDOW and (
            self.last_compile_end is None or self.recompile_open > self.last_compile_end
        ):
            return self.recompile_open
        return None

    def saving_since(self, now: float, settings: JudgeSettings) -> float | None:
        """When the synced checkpoint save this rank has open began (None: none open within its budget)."""
        if self.save_open is not None and now - self.save_open <= settings.save_timeout:
            return self.save_open
        return None

    def state_name(self, now: float, settings: JudgeSettings, lock_holder_alive: bool = True,
                   silent_after: float = SILENT_FLOOR, grace: float = BLIND_AFTER) -> str:
        """The rank's state for status displays.

        exited | failed | stopped (a signal stopped its process: state T in the node's readings; it
        computes nothing, whatever its last line said) | compiling | saving | waiting (on a peer,
        since its last progress) |
        starting (no line yet, within the startup timeout; or printing but no progress yet, within
        ``grace`` of its first line) | silent (no output for ``silent_after``; see
        :meth:`Judge.silent_after`) | progressing (output keeps coming and it has shown progress) |
        printing (output keeps coming but no line of it was ever recognised as progress).
        """
        if self.exit_code is not None:
            return "exited"
        if self.failure is not None:
            return "failed"
        if self.stopped:
            return "stopped"
        if self.compiling(now, settings, lock_holder_alive):
            return "compiling"
        if self.saving_since(now, settings) is not None:
            return "saving"
        if self.last_wait is not None and (self.last_progress is None or self.last_wait > self.last_progress):
            return "waiting"
        if self.last_collective is not None and now - self.last_collective <= silent_after and (
                self.collective_advances >= STEADY_COLLECTIVES or self.last_progress is not None):
            # its collectives keep completing (flight recorder), whatever it prints; not one start-up broadcast
            # (a trial's ranks, one of them never joining the first all_reduce, were 'progressing' for a minute)
            return "progressing"
        if self.first_line is None:
            return "starting" if now - self.first_seen <= settings.startup_timeout else "silent"
        if now - self.last_line > silent_after:
            return "silent"
        if self.last_progress is not None:
            return "progressing"
        return "starting" if now - self.first_line <= grace else "printing"


def _ends_recompile(st: RankState, mono: float, step: int | None) -> bool:
    """Does the rank's own progress line (read at ``mono``, of ``step``) end its open recompile?

    Dynamo announces a recompile (on stderr) after the rank's last step line (on stdout); the two
    streams are read separately, so that step line may arrive with or after the announcement. A
    step two past the rank's step at the announcement ends it; the next step ends it only when read
    later than the streams can skew; an older step never does."""
    own, opened = st.recompile_own_step, st.recompile_open
    later = opened is None or mono - opened > STREAM_SKEW
    if step is None or own is None:
        return later
    return step >= own + 2 or (step == own + 1 and later)


class LauncherExits(Protocol):
    """The launchers' exits of a generation as a caller keeps them (one record, read by the judge)."""

    def launcher_exit(self) -> RankExit | None:
        """The newest launcher exit, or None."""


class Judge:
    """Keeps per-rank state for one generation and answers :meth:`verdict`.

    Feed it what is seen (lines, compiler samples, cache locks, exits, unobservable nodes) with
    the monotonic time of the observation; ask :meth:`verdict` with ``now``. The same lines give
    the same verdict whether they arrive live or from saved logs (``neuron-watch diagnose``).
    """

    #: hints kept (info signatures such as "EFA not enabled"), first seen first
    MAX_HINTS = 10
    #: unexplained error lines kept for warnings (:attr:`unexplained`)
    MAX_UNEXPLAINED = 20

    def __init__(self, kb: KnowledgeBase, settings: JudgeSettings, start: float) -> None:
        self.kb = kb
        self.settings = settings
        self.start = start
        #: the failures the form reader reports (failureforms.py): their cause is read from the line
        self._form_failures = frozenset(s.id for s in kb.form_signatures if s.effect is Effect.FATAL)
        self._form_ids = frozenset(s.id for s in kb.form_signatures)
        self.ranks: dict[RankKey, RankState] = {}
        #: each rank's state by the identity of the key object it was created with: a batch names its
        #: ranks with the same key objects batch after batch (the coordinator keeps one per rank), and
        #: a look-up by id is done in C, where a RankKey's hash is a Python call (65,536 ranks a
        #: second on 1,024 nodes). The state holds its key, so an id here never names another object.
        self._by_id: dict[int, RankState] = {}
        #: the ranks whose status state may have changed since :meth:`take_touched` (by identity): a
        #: status document kept by changes re-reads these only. The usual progress row of a rank in
        #: training, a plain line, a worker's CPU and a flight recorder reading leave a progressing
        #: rank progressing, and are not noted (they come for every rank every second at scale).
        self.touched: dict[int, RankState] = {}
        self.step_times: list[float] = []  # mono time each new job-level max step was first seen
        self.max_step: int | None = None
        #: the highest step a rank's own line showed (rank >= 0): where training is. The node's word that
        #: a checkpoint of a step appeared moves max_step, not this: it may come before the line of the
        #: rank that reached that step (the node scans --checkpoint-dir before it reads the rank files
        #: of a late tick; another node sees a shared checkpoint dir on its own clock), and that line is
        #: still news (the last step's bar, see _advance)
        self.rank_step: int | None = None
        self.unobserved: dict[str, float] = {}  # node -> since
        #: where the launchers' exits are kept when the caller keeps them (the coordinator: its
        #: nodes' views); None: this judge keeps the ones it is given (:meth:`observe_exit`)
        self.launchers: LauncherExits | None = None
        self._launcher_exit: RankExit | None = None
        self.processes_observed_at: float | None = None  # last observe_compilers() call
        self.last_compiler_alive: float | None = None  # last time any compiler CPU grew, job-wide
        self.locks: dict[str, float] = {}  # fresh compile-cache lock path -> first seen
        self.last_lock_seen: float | None = None
        self.hints: list[tuple[Evidence, Match]] = []
        #: wall time of the line that first reached ``max_step``, and of the newest progress line
        #: (any step or none): what ``progress`` events are dated by, whenever they are sent
        self.max_step_wall: float | None = None
        self.last_progress_wall: float | None = None
        self.first_line: float | None = None  # the first line of any rank (mono)
        self.recent_texts: list[str] = []  # a few distinct recent lines, for the blind warning
        #: error lines no rule explains, first seen first (at most MAX_UNEXPLAINED): the live
        #: path says them as warnings; they fail a job only as described in :meth:`verdict`
        self.unexplained: list[Evidence] = []
        #: the first line per node that says memory ran out (the kernel's or the scheduler's
        #: oom-kill, an allocator's OOM), whether or not it is the failure of its rank: a SIGKILL
        #: on that node is explained by it whichever came first (slurmstepd reports the cgroup's
        #: oom_kill after the shell's "Killed", ArjunaCluster/ArjunaUsers#52)
        self.oom_lines: dict[str, Evidence] = {}
        self.open_recompiles: set[RankKey] = set()  # ranks whose announced recompile is not closed
        #: ranks that announced a compile in their own words (RankState.phase_running), at least those
        #: whose announcement no progress, compile end or compiler has closed (see _latest_work)
        self._announcers: dict[RankKey, RankState] = {}
        #: recompiles to say one by one (fewer than RECOMPILE_STORM per rank), oldest first
        self.recompile_notes: list[RecompileNote] = []
        #: compile time by the compiler's own account, as reported: (rank, graphs, seconds), oldest first
        self.compile_reports: list[tuple[RankKey, int, float]] = []
        # A verdict over tens of thousands of ranks (1,024 nodes x 64: tests/benchmarks/bench_scale.py)
        # looks only at the ranks that can change it: each index below holds at least every rank in
        # the state it names (more is harmless: each rank is checked as before), in no useful order
        # (lists of ranks are sorted by RankState.order, the order of self.ranks). A verdict forgets
        # the ranks whose evidence is over at its `now`; one asked about an earlier time first
        # takes every rank back in (_widen).
        self._asked_at = -math.inf
        self._may_compile: dict[RankKey, RankState] = {}  # compile evidence that may still count
        self._lock_waiters: dict[RankKey, RankState] = {}  # waiting on a compile-cache lock
        self._compiler_ranks: dict[RankKey, RankState] = {}  # with live compiler pids
        self._may_fail: dict[RankKey, RankState] = {}  # a failure line or an exit seen
        #: said training finished (``train_end`` set, in _apply); with _may_fail, every rank _left_early can name
        self._said_end: dict[RankKey, RankState] = {}
        self._waiters: dict[RankKey, RankState] = {}  # printed that it waits on a peer
        #: the newest ``last_wait`` of any rank (its one assignment is in _apply): no rank waits since a time after it
        self._newest_wait = -math.inf
        self._recompilers: dict[RankKey, RankState] = {}  # recompiled at least once
        self._exited = 0  # ranks with an exit code
        self._progress_seen = False  # see _started
        #: when a reading last showed a rank enter a collective it had not (flight recorder): the clock
        #: of a collective stuck before the first progress (_first_collective_hang)
        self._entered_latest: float | None = None
        #: first_collective_stall's last look: (what it depends on, when, what it found)
        self._stall_look: tuple[tuple[float | None, int, float | None], float,
                                tuple[StalledCollective, float, float, str] | None] | None = None
        #: the training bar's line at its total, the job's newest step then (see _LAST_STEP_BAR),
        #: while no other step was seen after it: the run's last configured step was reached
        self.last_step_line: Evidence | None = None
        self.last_step = 0  # the step of last_step_line (its bar's total)
        #: the highest step since a rank's count last went back to a bar of another total (a new loop
        #: began, see _advance); None while none did (the job's highest step serves)
        self.loop_step: int | None = None
        self.loop_total: int | None = None  # the total of that loop's bar
        #: the newest sign that what runs is training (see last_step_reached): a progress line with a
        #: loss, a checkpoint save that completed, the node's word that a new checkpoint appeared
        self.trained: Evidence | None = None
        self.trained_first = math.inf  # when the first such sign (or trained_collectives) was seen
        #: the first rank whose flight recorder showed collectives completing in STEADY_COLLECTIVES
        #: readings: a loop of collectives, training's (a preparation on one rank completes none)
        self.trained_collectives: RankKey | None = None
        #: the newest progress or end of work of any rank (see _latest_work); recomputed only when
        #: a rank's time that was the newest went back (a line read late, with an older time)
        self._work_max: float | None = None
        self._work_stale = False
        #: step intervals past the calibration's warm-up: how many, and the longest (hang_timeout)
        self._usable_intervals = 0
        self._longest_interval = -math.inf
        #: how much later than a node's first job-sized pace its lines may arrive (a bigger job's
        #: agents batch and sample less often: protocol.delivery_slack_at): the hang clock waits
        #: that much longer, so a step in flight is never taken for silence
        self.delivery_slack = 0.0
        #: the lines of an evidence line's stream around it, and its index among them, from whoever keeps
        #: the lines (offline ``diagnose`` keeps each rank's recent ones): the failure's error block is read
        #: from them (errorblock.py). None: the runs of lines the nodes sent around their failures
        #: (:meth:`observe_blocks`), else each error line alone.
        self.context: Callable[[Evidence], tuple[Sequence[LogLine], int] | None] | None = None
        self.blocks = BlockLines()
        #: what the entry point reads beside a crash verdict (diagnosis/crashreading.py, wired the same for
        #: the live coordinator and offline ``diagnose``): ``(verdict, progressed) -> verdict``
        self.crash_reader: Callable[[Verdict, bool], Verdict] | None = None

    # -- observations ---------------------------------------------------------------------------

    def _rank(self, key: RankKey, now: float) -> RankState:
        st = self._by_id.get(id(key)) or self.ranks.get(key)
        if st is None:
            st = self.ranks[key] = RankState(key=key, first_seen=now, last_line=now, order=len(self.ranks))
            self._by_id[id(key)] = st
            self.touched[id(st)] = st
        return st

    def _adopt(self, states: list[RankState], keys: Iterable[RankKey]) -> None:
        """Each state takes the batch's key object for its rank (an equal one: nothing else sees the
        difference), so that the next batches find it by identity."""
        by_id = self._by_id
        for st, key in zip(states, keys, strict=True):
            if st.key is not key:
                by_id.pop(id(st.key), None)
                st.key = key
                by_id[id(key)] = st

    def _widen(self) -> None:
        """Every index as a pass over every rank sees it (what the indexes save is such a pass)."""
        ranks = self.ranks
        self._may_compile, self._lock_waiters, self._may_fail = dict(ranks), dict(ranks), dict(ranks)
        self._waiters, self._recompilers, self._said_end = dict(ranks), dict(ranks), dict(ranks)
        self._compiler_ranks = {k: st for k, st in ranks.items() if st.compiler_cpu}
        self._exited = sum(st.exit_code is not None for st in ranks.values())
        self._progress_seen = any(st.last_progress is not None or st.collective_advances >= STEADY_COLLECTIVES
                                  for st in ranks.values())
        self._work_stale = True

    @staticmethod
    def _ordered(index: dict[RankKey, RankState]) -> list[RankState]:
        """The ranks of an index in the order of ``self.ranks``."""
        return sorted(index.values(), key=_BY_ORDER)

    def _worked(self, old: float | None, new: float) -> None:
        """A rank's progress or end-of-work time moved from ``old`` to ``new`` (see _latest_work)."""
        top = self._work_max
        if top is None or new >= top:
            self._work_max, self._work_stale = new, False
        elif old is not None and new < old == top:
            self._work_stale = True  # the newest time went back: another rank may now hold the newest

    def _latest_work(self) -> float | None:
        """The newest sign of work of any rank: progress (a progress line, a collective completed) or
        the end of some work (a compile, a checkpoint save, a recompile inside the rank: its process
        tree's last CPU growth). The hang clock runs from it."""
        if self._work_stale:
            self._work_stale = False
            self._work_max = max((t for st in self.ranks.values()
                                  for t in (st.last_progress, st.last_collective, st.last_compile_end, st.last_save_end)
                                  if t is not None), default=None)
        latest = self._work_max
        for key in self.open_recompiles:
            st = self.ranks.get(key)
            if st is not None and st.recompile_open is not None and st.tree_cpu_grew is not None and (
                    latest is None or st.tree_cpu_grew > latest):
                latest = st.tree_cpu_grew
        # ... and of a compile a rank announced in its own words, within the compile budget
        budget = self.settings.compile_timeout
        for key, st in list(self._announcers.items()):
            running = st.announced_compile()
            if running is None:
                del self._announcers[key]  # closed: a new announcement opens one again
            elif st.tree_cpu_grew is not None:
                grew = min(st.tree_cpu_grew, running + budget)
                if latest is None or grew > latest:
                    latest = grew
        return latest

    def _stepped(self, mono: float) -> None:
        """A new job-level step (or a progress line without one) was seen at ``mono``."""
        times = self.step_times
        times.append(mono)
        if len(times) - 1 > self.settings.calibration.warmup_steps:  # the new interval is past the warm-up
            self._usable_intervals += 1
            self._longest_interval = max(self._longest_interval, times[-1] - times[-2])

    def expect(self, keys: Iterable[RankKey], now: float) -> None:
        """Declare ranks that should exist (so silence from them is visible)."""
        for k in keys:
            self._rank(k, now)

    def observe_line(self, line: LogLine) -> Match | None:
        """Classify one line and update its rank. Returns the match (or None)."""
        return self._apply(line, self.kb.classify(line.text))

    def observe_lines(self, lines: Sequence[LogLine]) -> list[tuple[LogLine, Match]]:
        """Classify a batch (in order); returns the lines that matched a signature."""
        matched = self.kb.scan([ln.text for ln in lines])
        hit = dict(matched)
        out: list[tuple[LogLine, Match]] = []
        for i, line in enumerate(lines):
            m = hit.get(i)
            self._apply(line, m)
            if m is not None:
                out.append((line, m))
        return out

    def observe_blocks(self, runs: Iterable[Sequence[LogLine]]) -> None:
        """Runs of a rank's consecutive lines around its failures, as its node sent them with the batch
        (``Lines.blocks``): the error blocks the judge reads a failure's cause from when no :attr:`context`
        is given (the live judge; offline ``diagnose`` gives its recent lines)."""
        for run in runs:
            self.blocks.add(run)

    def observe_batch(self, ranks: Sequence[RankSpan], matches: Sequence[LogLine],
                      progress: Sequence[LogLine] = ()) -> None:
        """Take a batch another process already classified with the same knowledge base
        (:func:`~neuron_watch.diagnosis.classify.classify_batch`).

        ``ranks``: a :class:`RankSpan` for every rank with lines in the batch, in the order each
        rank's first line appears. ``matches``: the lines the sender's knowledge base matched, each
        with its match (``signature``, ``step``, ``loss``), in line order -- all of them, or only
        those :func:`~neuron_watch.diagnosis.classify.compact_matches` keeps. Leaves the judge in
        exactly the state :meth:`observe_lines` leaves it in for the same lines (same per-rank
        state, step times, hints, verdicts): a rank's plain lines only move its
        ``last_line``/``last_line_text``. Work is O(ranks + matches), not O(lines).

        ``progress``: the last line of each rank whose lines in the batch were all progress lines
        with a step (see :func:`~neuron_watch.diagnosis.classify.coalesce_progress`), with its match:
        its time and text are its rank's span's newest; applied after ``matches`` without a
        :class:`Match` of its own.

        Raises:
            ValueError: a signature id this knowledge base does not know (nothing is changed;
                the caller classifies the lines itself).
        """
        self.observe_columns(batch_columns(ranks, matches, progress))

    def observe_columns(self, batch: BatchColumns) -> None:
        """:meth:`observe_batch` of a batch given by column (what the coordinator decodes: no record
        per rank or per progress row). A progress row's rank is its ``chunk``, an index into
        ``batch.keys``.

        Raises:
            ValueError: a signature id this knowledge base does not know, or a progress row of
                another kind or without a step (nothing is changed; the caller classifies the
                lines itself).
        """
        by_id = self.kb.by_id
        resolved: list[tuple[LogLine, Signature]] = []
        for line in batch.matches:
            sig = by_id.get(line.signature)
            if sig is None:
                raise ValueError(f"unknown signature id {line.signature!r:.60} (another knowledge base?)")
            resolved.append((line, sig))
        progress = batch.progress
        for sig_id in set(progress.signature):  # (a batch's rows share one or two signatures)
            sig = by_id.get(sig_id)
            if sig is None or sig.effect is not Effect.PROGRESS:
                raise ValueError(f"{sig_id!r:.60} is not a progress signature of this knowledge base")
        if None in progress.step:
            raise ValueError("a progress row without a step")
        keys, firsts = batch.keys, batch.first
        # A batch's ranks are known ones by their key objects (the states, found in C), else ranks are
        # created in the order their first line arrived, as line by line.
        found = list(map(self._by_id.get, map(id, keys)))
        if all(found):
            states = cast("list[RankState]", found)
        else:
            rank = self._rank
            states = [rank(key, first) for key, first in zip(keys, firsts, strict=True)]
            self._adopt(states, keys)
        if not all(map(_FIRST_LINE, states)):  # (a time of 0.0 takes this loop too: it checks for None)
            for st, first in zip(states, firsts, strict=True):
                if st.first_line is None:
                    self._first_line(st, first)
        self._observe_matches(resolved)
        # A rank of these printed nothing but steps in this batch, none of them a new job-level step
        # (coalesce_progress): its latest one leaves the judge as all of them would, in any order
        # with the other ranks' matches.
        if progress.chunk:
            self._progress_rows(states, keys, progress)
        remember = not self.step_times  # (the few recent texts are kept only until a step is seen)
        for st, last, text in zip(states, batch.last, batch.text, strict=True):
            if last > st.last_line:
                st.last_line = last
            st.last_line_text = text
            if remember:
                self._remember(text)

    def _observe_matches(self, resolved: Sequence[tuple[LogLine, Signature]]) -> None:
        """A batch's matches in order, each with its signature: a steady step here, every other line through
        :meth:`_apply`.

        A steady step is a progress match of a known rank in training (no end said, no failure, no open
        recompile or announced compile, no ignored exception being reported) at a step the job has reached,
        while no last step is awaited: what :meth:`_apply` and :meth:`_advance` do for it, without their
        tests for the other kinds (a batch's matches at 10 lines a second are mostly such steps, ~24,000 a
        second on 1,024 nodes: the ranks' lines that travel as matches because another line of theirs is in
        the batch). The job's tests are read once and again after each :meth:`_apply` (the one thing here
        that changes them); the job's newest work and progress wall time are kept in locals and go back to
        the judge before each :meth:`_apply` and at the end."""
        apply, by_id, touched, progress_effect = self._apply, self._by_id, self.touched, Effect.PROGRESS
        stale = True  # the job's tests and newest times are to be read (again)
        beyond: int | None = None
        training = False
        work_max: float | None = None
        work_stale = False
        newest_wall: float | None = None
        for line, sig in resolved:
            if stale:
                # the step a line must pass to be news: the ranks', or the newest loop's (see _advance)
                beyond = self.rank_step if self.loop_step is None else self.loop_step
                training = beyond is not None and bool(self.step_times) and self.last_step_line is None
                work_max, work_stale, newest_wall = self._work_max, self._work_stale, self.last_progress_wall
                stale = False
            step = line.step
            st = by_id.get(id(line.key)) if training and sig.effect is progress_effect else None
            if (st is None or step is None or step > beyond  # type: ignore[operator]  # (training: not None)
                    or st.first_line is None or st.train_end is not None or st.failure_match is not None
                    or st.recompile_open is not None or st.phase_running is not None or st.unraisable
                    or (st.step is not None and step < st.step)
                    or sig.id in _NOT_STEADY):
                self._work_max, self._work_stale, self.last_progress_wall = work_max, work_stale, newest_wall
                apply(line, Match(sig, step, line.loss))
                stale = True
                continue
            mono, wall = line.mono, line.wall
            if mono > st.last_line:
                st.last_line = mono
            st.last_line_text = line.text
            touched[id(st)] = st
            # (its evidence held as fields, built if a verdict reads it, as a progress row's: an Evidence a
            # line cost more than the rest of this step)
            ev = _new_tuple(LazyEvidence, (line.key, line.text, sig.id, line.source, line.lineno, mono))
            work_max, work_stale = _rank_progressed(st, mono, ev, work_max, work_stale)
            self._progress_seen = True
            if newest_wall is None or wall > newest_wall:
                newest_wall = wall
            st.train_end_line = st.train_end_step = None
            st.step, st.step_mono = step, mono
            if line.loss is not None:
                trained = self.trained  # (_saw_training's test first: it keeps the newest sign, built)
                if trained is None or mono >= trained.mono or mono < self.trained_first:
                    self._saw_training(ev.build())
        if not stale:
            self._work_max, self._work_stale, self.last_progress_wall = work_max, work_stale, newest_wall

    def _progress_rows(self, states: Sequence[RankState], keys: Sequence[RankKey], progress: ProgressColumns) -> None:
        """The progress rows of a batch (see :meth:`observe_columns`; ``states`` and ``keys``: the
        batch's ranks'), each as :meth:`_advance` takes it.

        A row of a rank in training (no end said, no failure, no open recompile or announced compile) at a
        step the job has reached is the usual one, 65,536 a second on 1,024 nodes: it is applied here, with what
        :meth:`_advance` does for it (the rank's progress, step and line, the job's newest work);
        every other row goes through :meth:`_advance`.
        """
        advance = self._advance
        # the step a row must pass to be news: the ranks', or the newest loop's (never above the ranks')
        beyond = self.rank_step if self.loop_step is None else self.loop_step
        newest_wall = self.last_progress_wall
        # (what _progressed does for a row, inline, with the job's newest work kept in locals: a big job's
        # rows come here 22,000 a second at 1,024 nodes, and a call and two attribute writes a row were a
        # fifth of it. The locals go back to the judge before every _advance and come back after it.)
        work_max, work_stale = self._work_max, self._work_stale
        awaiting_last = self.last_step_line is not None
        checkpoint_rows = CHECKPOINT_APPEARED_SIGNATURE in progress.signature
        # (the row's state is the batch's, found once by its key object: no look-up per row; its
        # evidence line's fields are taken with the others', by column, and built if a verdict reads them)
        evidence = lazy_evidence_rows(list(map(keys.__getitem__, progress.chunk)), progress.text, progress.signature,
                                      progress.source, progress.lineno, progress.mono)
        for chunk, mono, wall, step, ev, sig in zip(progress.chunk, progress.mono, progress.wall, progress.step,
                                                    evidence, progress.signature, strict=True):
            st = states[chunk]
            if (beyond is None or step > beyond or awaiting_last or st.train_end is not None
                    or (st.step is not None and step < st.step)
                    or st.failure_match is not None or st.recompile_open is not None or st.phase_running is not None
                    or (checkpoint_rows and sig == CHECKPOINT_APPEARED_SIGNATURE)):
                self.last_progress_wall = newest_wall
                self._work_max, self._work_stale = work_max, work_stale
                advance(st, mono, wall, step, ev.build())
                beyond = self.rank_step if self.loop_step is None else self.loop_step
                newest_wall = self.last_progress_wall
                work_max, work_stale = self._work_max, self._work_stale
                awaiting_last = self.last_step_line is not None
                continue
            work_max, work_stale = _rank_progressed(st, mono, ev, work_max, work_stale)
            st.step, st.step_mono = step, mono
            if newest_wall is None or wall > newest_wall:
                newest_wall = wall
        self._work_max, self._work_stale = work_max, work_stale
        self.last_progress_wall = newest_wall
        self._progress_seen = True

    def _first_line(self, st: RankState, mono: float) -> None:
        """The rank's first line arrived at ``mono`` (the job's too, when it is the first of all)."""
        st.first_line = mono
        if self.first_line is None:
            self.first_line = mono

    def _remember(self, text: str) -> None:
        """Keep ``text`` among the few distinct recent lines (only while no progress was seen)."""
        recent = self.recent_texts
        if self.step_times or not text.strip() or text in recent:
            return
        recent.append(text)
        if len(recent) > BLIND_LINES:
            del recent[0]

    def _apply(self, line: LogLine, m: Match | None) -> Match | None:
        st = self._rank(line.key, line.mono)
        st.last_line = max(st.last_line, line.mono)
        st.last_line_text = line.text
        if st.first_line is None:
            self._first_line(st, line.mono)
        if not self.step_times:
            self._remember(line.text)
        if m is None:
            return None
        self.touched[id(st)] = st
        ev = line.evidence(m.signature.id)
        effect = m.signature.effect
        if m.signature.id == UNRAISABLE_SIGNATURE:
            st.unraisable, st.unraisable_at = 1, line.mono
            return m
        # Only the matches a node always sends (compact_matches) move the ignored exception's
        # state: the progress, benign, info, wait and beat lines it may leave out come from other
        # output interleaved with the report, and must leave the judge as it leaves it without them.
        # Python writes the report at once; an announcement older than that is no longer its header.
        if st.unraisable and effect not in _COMPACTABLE and line.mono - st.unraisable_at > UNRAISABLE_REPORT_S:
            st.unraisable = 0
        if st.unraisable and effect not in _COMPACTABLE:
            # the ignored exception's traceback header, then its exception line: not the rank's failure
            if st.unraisable == 1 and m.signature.id == TRACEBACK_SIGNATURE:
                st.unraisable = 2
                return m
            if effect in (Effect.FATAL, Effect.UNEXPLAINED):
                # only an exception line in Python's form ends the report as its own; a failure of another form
                # ("Killed" on a bar, a driver's record) is another process's, written between the report's lines
                ignored = st.unraisable == 2 and exception_class(line.text) is not None
                st.unraisable = 0
                if ignored:
                    return m
            # a warning of another process between the report's lines leaves the report open (round 31 part D)
        if effect is Effect.COMPILE_BEAT or effect is Effect.COMPILE_END:
            # XLA's slow-operation alarm says "The operation took <t>" when the alarmed operation
            # returns: after the constant-folding alarm (the rank's last compile beat), that is one
            # instruction folded and the compile goes on (a beat), not the compile's end. Every beat
            # sets the flag, so a beat compact_matches leaves out is followed by one that sets it.
            form = read_line(line.text) if m.signature.id in self._form_ids else None
            name = None if form is None else form.name
            if effect is Effect.COMPILE_BEAT:
                if st.alarm_returned and name == SLOW_ALARM and "slow_operation_alarm" not in line.text:
                    # the returned record repeats its alarm's banner under "The operation took <t>"
                    # (xla/service/slow_operation_alarm.cc, ~SlowOperationAlarm: LOG(ERROR) << "The operation
                    # took " << duration << "\n" << msg_fn_()): the same record, not a compile begun again; a
                    # new alarm opens with a record of its own (its "slow_operation_alarm.cc:<n>]" head)
                    return m
                st.folding_alarm = name == FOLDING_ALARM
                st.alarm_returned = False
            elif st.folding_alarm:
                st.folding_alarm = False
                if name == SLOW_ALARM_RETURNED:
                    effect = Effect.COMPILE_BEAT
            else:
                st.alarm_returned = name == SLOW_ALARM_RETURNED
        if effect is Effect.PROGRESS:
            self._advance(st, line.mono, line.wall, m.step, ev)
            if m.loss is not None:
                self._saw_training(ev)  # (after _advance: this line may be the first of training's loop)
        elif effect is Effect.COMPILE_START:
            st.compiles_started += 1
            if st.compile_open is None:
                st.compile_open, st.compile_open_line = line.mono, ev
                self._may_compile[st.key] = st
                if self.step_times:
                    # a graph compiled after training began (the warm-up's graphs are compiled before
                    # the first step): Neuron's recompile-every-step pattern counts toward a storm
                    st.recompiles += 1
                    st.last_recompile_line = ev
                    self._recompilers[st.key] = st
        elif effect is Effect.COMPILE_END:
            st.compiles_ended += 1
            if st.compile_open is not None:
                st.compile_seconds += line.mono - st.compile_open
            st.compile_open, st.compile_open_line = None, None
            st.first_lock_wait = None
            st.phase_running = None
            self._worked(st.last_compile_end, line.mono)
            st.last_compile_end = line.mono
        elif effect is Effect.SAVE_START:
            if st.save_open is None:
                st.save_open, st.save_open_line = line.mono, ev
        elif effect is Effect.SAVE_END:
            st.save_open, st.save_open_line = None, None
            self._saw_training(ev)
            self._worked(st.last_save_end, line.mono)
            st.last_save_end = line.mono
        elif effect is Effect.RECOMPILE and m.signature.severity == "warning":
            # dynamo's recompile-limit record (torch/_dynamo/convert_frame.py: log.warning("torch._dynamo hit
            # config.%s (%s) ...") then, unless fullgraph raises FailOnRecompileLimitHit, unimplemented(): the
            # frame is skipped and runs without compiling): no compile starts there, the one announced before it
            # gave up. A storm by dynamo's own word (Judge.recompile_storms), not a compile at work.
            st.recompile_open = None
            self.open_recompiles.discard(st.key)
            self._recompilers[st.key] = st
            st.recompiles += 1
            st.last_recompile_line = ev
            st.recompile_limit_hit = True
            st.last_recompile_note = None
        elif effect is Effect.RECOMPILE:
            st.recompile_open, st.recompile_step = line.mono, self.max_step  # see RankState.recompiling_until
            st.recompile_own_step = st.step
            self.open_recompiles.add(st.key)
            self._may_compile[st.key] = self._recompilers[st.key] = st
            st.recompiles += 1
            st.last_recompile_line = ev
            # said one by one up to a storm; a storm is said once, as a storm (Judge.recompile_storms)
            if m.signature.severity == "info" and st.recompiles < RECOMPILE_STORM:
                st.last_recompile_note = RecompileNote(ev)
                self.recompile_notes.append(st.last_recompile_note)
            else:
                st.last_recompile_note = None
        elif effect is Effect.COMPILE_METRIC:
            self._compile_metric(st, line.text)
        elif effect is Effect.RECOMPILE_REASON:
            note = st.last_recompile_note
            if note is not None and note.reason is None:
                found = _GUARD_FAILURE.search(line.text)
                note.reason = (found.group(1) if found else line.text).strip()[:300]
        elif effect is Effect.TRAIN_END:
            st.train_end, st.train_end_line, st.train_end_step = line.mono, ev, st.step
            self._said_end[st.key] = st
        elif effect is Effect.COMPILE_BEAT:
            if sig_is_compiler_line(m):
                st.last_compiler_line = line.mono
                if m.signature.id == PHASE_RUNNING:
                    st.phase_running = line.mono
                    self._announcers[st.key] = st
            elif not st.compile_opened():
                return m  # output, not a heartbeat: no compile is open to beat for
            st.last_compile_beat = line.mono
            st.beat_announced = m.signature.id == PHASE_RUNNING
            self._may_compile[st.key] = st
        elif effect is Effect.COMPILE_WAIT:
            if st.first_lock_wait is None:
                st.first_lock_wait = line.mono
            st.last_lock_wait, st.last_lock_wait_line = line.mono, ev
            self._may_compile[st.key] = self._lock_waiters[st.key] = st
        elif effect is Effect.COMM_WAIT:
            st.last_wait, st.last_wait_line = line.mono, ev
            if line.mono > self._newest_wait:
                self._newest_wait = line.mono
            # The rank retries the operation an error line it printed was about: NCCL warns of a
            # failed connect, then retries it (nccl src/misc/socket.cc, NVIDIA/nccl#1618: "NCCL WARN
            # socketPollConnect poll() failed ... Connection timed out", then "NCCL INFO
            # socketPollConnect: connect returned Connection timed out, retrying (1/34)"). That error
            # is the attempt being retried: a transient communication problem while the retry goes
            # on, not the rank's last word. An error after the retries, or a failure, still counts; so does
            # an error whose form states a configuration no retry changes (a program refusing its command
            # line, whose peers are then retried in vain: heldout.round37c).
            if st.unexplained is not None and not _states_configuration(st.unexplained.text):
                st.unexplained = None
            self._waiters[st.key] = st
        elif effect is Effect.BENIGN and m.signature.id in GOING_ON_SIGNATURES:
            # the process that printed an error went on setting up: that error was not its last word
            if st.unexplained is not None and _same_process(st.unexplained.text, line.text):
                st.unexplained = st.failure_detail = None
            st.errors = tuple(e for e in st.errors if not _same_process(e.text, line.text))
            if (st.failure is not None and st.failure_match is not None and st.failure_match.signature.generic
                    and _same_process(st.failure.text, line.text)):
                st.failure = st.failure_match = st.failure_time = st.failure_detail = None
        elif effect is Effect.UNEXPLAINED:
            st.errors = (*st.errors[1 - ERRORS_KEPT:], ev)
            if st.unexplained is None:
                st.unexplained = ev
            if st.failure is not None and st.failure_detail is None:
                st.failure_detail = ev
            if len(self.unexplained) < self.MAX_UNEXPLAINED:
                self.unexplained.append(ev)
        elif effect is Effect.FATAL:
            st.errors = (*st.errors[1 - ERRORS_KEPT:], ev)
            self._may_fail[st.key] = st
            if m.signature.category is Label.OOM and m.signature.id != KILLED_SIGNATURE:
                self.oom_lines.setdefault(line.key.node, ev)
            if st.failure is None:
                st.failure, st.failure_match, st.failure_time = ev, m, line.mono
            elif st.failure_match is not None and st.failure_match.signature.generic and (
                    not m.signature.generic or (st.failure_match.signature.category is Label.OTHER_CRASH
                                                and m.signature.category is not Label.OTHER_CRASH)):
                # the specific error under a traceback header explains the rank (and a vague one that
                # names a cause, a header that names none); keep the first time
                st.failure, st.failure_match = ev, m
        elif (
            effect is Effect.INFO
            and m.signature.category is not Label.HEALTHY
            and len(self.hints) < self.MAX_HINTS
            and all(h.signature != ev.signature for h, _ in self.hints)
        ):
            self.hints.append((ev, m))
        return m

    def _progressed(self, st: RankState, mono: float, ev: Evidence | LazyEvidence) -> None:
        """What every progress line ``ev`` of ``st``'s rank (read at ``mono``) does to the rank, whichever
        way it comes: line by line (:meth:`_advance`), as a batch's steady step (:meth:`_observe_matches`) or
        as a progress row (:meth:`_progress_rows`), one rule for the three. Its progress and the job's
        newest work move; the error lines it printed since its last progress are withdrawn (it went on
        from them: neither its last word nor the cause of a bare fatal signal it dies of later,
        :meth:`_cause_before`), and so is the compile lock it waited on. (The job's newest progress
        wall time is the caller's. :meth:`_worked` inline. :meth:`_progress_rows` and :meth:`_observe_matches`
        have this inline, for a big job's many rows and steady steps: the three change together, and
        tests/unit/test_judge_batch.py holds the batch's ways to line by line's states.)"""
        self._work_max, self._work_stale = _rank_progressed(st, mono, ev, self._work_max, self._work_stale)

    def _advance(self, st: RankState, mono: float, wall: float, step: int | None, ev: Evidence) -> None:
        """A progress line of ``st``'s rank at ``mono``/``wall`` (``step``: the step it read)."""
        self.touched[id(st)] = st
        self._progressed(st, mono, ev)
        self._progress_seen = True
        if self.last_progress_wall is None or wall > self.last_progress_wall:
            self.last_progress_wall = wall
        if ev.signature == CHECKPOINT_APPEARED_SIGNATURE:
            self._saw_training(ev)
        # Progress after the end: that was not the end (a second fit()), unless it is the
        # closing redraw of a bar: tqdm redraws a bar as it closes it, and transformers'
        # ProgressCallback closes the training bar right after the final metrics
        # ("{'train_runtime': ...}", then "100%|##########| 6/6 [00:00<00:00, 14.40it/s]" and
        # the save's "Writing model shards: 100%|##########| 1/1" on a real HF Trainer run,
        # where no step was seen before the end). So within END_REDRAW_SECONDS of the end a
        # line cancels it only with a step beyond the rank's step at the end; after, any does.
        end = st.train_end
        redraw = (end is not None and mono - end <= END_REDRAW_SECONDS
                  and (step is None or st.train_end_step is None or step <= st.train_end_step))
        if not redraw:
            st.train_end = st.train_end_line = st.train_end_step = None
        if st.failure_match is not None and st.failure_match.signature.generic:
            # a traceback (or exit report) the rank survived: it was handled, not fatal
            st.failure = st.failure_match = st.failure_time = None
        st.phase_running = None  # progress after a compile it announced: that compile is over
        if st.beat_announced:
            st.last_compile_beat = None  # that announcement was the newest beat: nothing beats for a compile now
        if st.recompile_open is not None and _ends_recompile(st, mono, step):
            st.recompile_open = None  # its own progress after it: that recompile is over
        if step is not None:
            # A rank whose own count went back to a bar of another total with nothing before the end of
            # its loop before that said that training ran began training's loop (its bar after a
            # data-preparation bar's end; a loss in its first lines is training's own): from
            # then on a bar's end is compared with the steps of that loop (loop_step), not with the
            # job's highest step, which the preparation may hold (1000 items tokenised, then 20
            # training steps). Once training ran, a loop that begins is not training's own (an
            # evaluation's bar between epochs): the job's highest step serves, as ever. A node's own
            # stream counts checkpoints, not a loop.
            if (st.step is not None and step < st.step and st.key.rank >= 0
                    and (st.step_mono is None or self.trained_first > st.step_mono)):
                # one of the same total is that loop again (a bar per epoch): its end is no news, as
                # before any loop began again
                total = _bar_total(ev.text)
                if total is not None and total != (self.max_step if self.loop_total is None else self.loop_total):
                    self.loop_step, self.loop_total = 0, total
            st.step, st.step_mono = step, mono
            top = self.rank_step if self.loop_step is None else self.loop_step
            if st.key.rank >= 0:
                # The last step reached (a new step of the loop at the training bar's total), or training
                # went on to another step (past it, or the next epoch's bar of a loop that draws one per
                # epoch). A line of that same step is no such news: the bar's closing redraw.
                if (top is None or step > top) and _bar_at_total(ev.text, step):
                    self.last_step_line, self.last_step = ev, step
                elif self.last_step_line is not None and step != top:
                    self.last_step_line = None
                if self.loop_step is not None and step > self.loop_step:
                    self.loop_step = step
                if self.rank_step is None or step > self.rank_step:
                    self.rank_step = step
            elif self.last_step_line is not None and top is not None and step > top:
                # the node's word that a checkpoint appeared ("checkpoint-30": step 30), before or after
                # the bar of that step: news only past the step the ranks reached (training went on)
                self.last_step_line = None
            if self.max_step is None or step > self.max_step:
                self.max_step = step
                self.max_step_wall = wall
                self._stepped(mono)
                self._close_recompiles(step)
        else:
            self._stepped(mono)

    def observe_compilers(self, samples: Sequence[CompilerSample], now: float, node: str | None = None) -> None:
        """The compiler processes alive at ``now`` (all of them: an absent pid has ended).

        ``node``: the samples are one node's (multi-node): only that node's ranks are pruned.
        """
        self.processes_observed_at = now
        seen: dict[RankKey, set[int]] = {}
        for s in samples:
            st = self._rank(s.key, now)
            self.touched[id(st)] = st
            seen.setdefault(s.key, set()).add(s.pid)
            st.compiler_seen = s.mono
            prev = st.compiler_cpu.get(s.pid)
            if prev is None or s.cpu_seconds > prev[0]:
                st.compiler_cpu[s.pid] = (s.cpu_seconds, s.mono)
                self._may_compile[s.key] = self._compiler_ranks[s.key] = st
                self.last_compiler_alive = max(self.last_compiler_alive or s.mono, s.mono)
        # Only ranks with compiler pids have any to forget (not every rank of the job: each node's
        # reading comes every second, 1,024 of them on 1,024 nodes).
        for key, st in list(self._compiler_ranks.items()):
            if node is not None and key.node != node:
                continue
            for pid in list(st.compiler_cpu):
                if pid not in seen.get(key, set()):
                    self.touched[id(st)] = st
                    del st.compiler_cpu[pid]
                    if not st.stopped:  # a stopped rank's compiler ending is no work: the rank waits for nothing
                        self._worked(st.last_compile_end, now)
                        st.last_compile_end = now
                    st.phase_running = None
            if not st.compiler_cpu:
                del self._compiler_ranks[key]

    def _compile_metric(self, st: RankState, text: str) -> None:
        """The lines of torch-xla's ``CompileTime`` metric, in the report's order: its header, its
        ``TotalSamples``, its ``Accumulator`` (any other metric's fields come without that header)."""
        if "Metric: CompileTime" in text:
            st.in_compile_metric, st.compile_metric_samples = True, None
        elif not st.in_compile_metric:
            return
        elif "TotalSamples:" in text:
            st.compile_metric_samples = int(text.split(":", 1)[1])
        else:
            st.in_compile_metric = False
            seconds = xla_duration(text.split(":", 1)[1])
            if seconds is not None and st.compile_metric_samples is not None:
                st.reported_compile = (st.compile_metric_samples, seconds)
                self.compile_reports.append((st.key, st.compile_metric_samples, seconds))

    def _close_recompiles(self, step: int) -> None:
        """The job reached ``step``: a recompile announced at an earlier step is over (every rank
        of a data-parallel step takes part in it). Progress of the step already under way when a
        recompile was announced does not close it: ranks print that step's line at slightly
        different times."""
        for key in list(self.open_recompiles):
            st = self.ranks.get(key)
            if st is None or st.recompile_open is None:
                self.open_recompiles.discard(key)
            elif st.recompile_step is None or step > st.recompile_step + 1:
                st.recompile_open = None
                self.open_recompiles.discard(key)

    def observe_workers(self, samples: Sequence[WorkerSample], now: float) -> None:
        """Rank processes seen at ``now``: their process tree's CPU time and whether they are stopped."""
        self.observe_worker_columns([s.key for s in samples], [s.tree_cpu_seconds for s in samples],
                                    [s.stopped for s in samples], [s.mono for s in samples], now)

    def observe_worker_columns(self, keys: Sequence[RankKey], tree_cpu: Sequence[float], stopped: Sequence[bool],
                               mono: Sequence[float], now: float) -> None:
        """:meth:`observe_workers` of samples given by column (a node's procs message: its 64 rank
        processes, 256 messages a second on 1,024 nodes, with no record built per sample)."""
        rank, by_id, may_compile, touched = self._rank, self._by_id, self._may_compile, self.touched
        for key, cpu, halted, t in zip(keys, tree_cpu, stopped, mono, strict=True):
            st = by_id.get(id(key)) or rank(key, now)
            # The tree grew when it used IN_PROCESS_COMPILE_PACE of a core since the reading growth is
            # measured from, over TREE_PACE_WINDOW at least; that reading moves on when it grew, or after
            # the window without (a waiting rank's occasional tick never adds up to a compile's pace).
            base, since = st.tree_cpu, t - st.tree_cpu_at
            grew = base is None or cpu - base >= IN_PROCESS_COMPILE_PACE * max(since, TREE_PACE_WINDOW)
            if st.recompile_open is not None or st.stopped != halted or (
                    grew and st.phase_running is not None and st.announced_compile() is not None):
                may_compile[key] = st  # its in-process compile's evidence may count again (compile_evidence)
                touched[id(st)] = st
            if halted and st.stopped:
                # Stopped already at the last reading: what its tree still burns is inductor's compile
                # workers and their compilers finishing what the rank gave them before it stopped. The
                # rank will not read their results: no work of the job, so no restart of the hang clock
                # (_latest_work) nor an in-process compile still running (recompiling_until); growth is
                # measured again from here once it is continued.
                st.tree_cpu, st.tree_cpu_at = max(cpu, st.tree_cpu or 0.0), t
                continue
            st.stopped, st.stopped_since = halted, (t if halted else None)
            if grew:
                st.tree_cpu, st.tree_cpu_at, st.tree_cpu_grew = cpu, t, t
            elif since >= TREE_PACE_WINDOW:
                st.tree_cpu, st.tree_cpu_at = cpu, t

    def observe_collectives(self, key: RankKey, groups: Sequence[GroupProgress], now: float) -> bool:
        """A flight recorder reading of one rank taken at ``now`` (its process groups' sequence ids).

        A rank whose completed collective sequence id advanced in any group is alive: for hang
        detection that counts like a progress line without a step (it restarts the hang clock,
        it sets no training step). The first reading counts when it shows a completed
        collective. Returns whether it advanced.
        """
        return self._reading(self._rank(key, now), groups, now)

    def observe_readings(self, keys: Sequence[RankKey], readings: Sequence[Sequence[GroupProgress]],
                         times: Sequence[float]) -> None:
        """:meth:`observe_collectives` of several ranks' readings, in order (a node's procs message:
        ~50 ranks' readings, 256 messages a second on 1,024 nodes)."""
        rank, by_id, reading = self._rank, self._by_id, self._reading
        for key, groups, now in zip(keys, readings, times, strict=True):
            reading(by_id.get(id(key)) or rank(key, now), groups, now)

    def _reading(self, st: RankState, groups: Sequence[GroupProgress], now: float) -> bool:
        """One rank's flight recorder reading (:meth:`observe_collectives`)."""
        moved = entered = False
        held = st.collectives
        # entries matter only before the first progress (_first_collective_hang): not looked at after it
        # (a reading per rank every 5 s: 65,536 ranks' readings took 33 ms a round, 40 with this look)
        starting = not self._progress_seen
        for g in groups:
            prev = held.get(g.group)
            if g.completed > (prev.completed if prev is not None else -1):
                moved = True
            if starting and g.enqueued > (prev.enqueued if prev is not None else -1):
                entered = True
            held[g.group] = g
        if entered and (self._entered_latest is None or now > self._entered_latest):
            self._entered_latest = now
        if moved:
            self._worked(st.last_collective, now)
            st.last_collective = now
            st.collective_advances += 1
            if st.collective_advances >= STEADY_COLLECTIVES:
                self._progress_seen = True
                if self.trained_collectives is None:
                    self.trained_collectives = st.key
                    self.trained_first = min(self.trained_first, now)
        return moved

    def observe_cache_locks(self, fresh_lock_paths: Iterable[str], now: float) -> None:
        """The compile-cache ``*.lock`` files present at ``now`` that the caller considers fresh.

        A lock is job-wide compile evidence (the compile may run on another node or under
        ``neuron_parallel_compile``) for up to the compile budget from when it was first seen,
        unless processes are observed and no compiler has burned CPU for ``compiler_cpu_stall``
        (then it is a stale lock left by a killed compile).
        """
        paths = set(fresh_lock_paths)
        self.locks = {p: self.locks.get(p, now) for p in paths}
        if paths:
            self.last_lock_seen = now

    def observe_exit(self, ex: RankExit) -> None:
        """A rank exited (``rank >= 0``) or the node's launcher did (``rank == -1``).

        The first exit of a rank stands, except a presumed clean one (:attr:`RankExit.presumed`: the
        rank's own record of a normal interpreter exit), which an exit status reported after it replaces
        (torchrun's failure report of a ``sys.exit(3)``, or of an abort in the interpreter's teardown)."""
        if ex.key.rank < 0:
            self._launcher_exit = ex
            return
        st = self._rank(ex.key, ex.mono)
        self.touched[id(st)] = st
        if st.exit_code is None or (st.exit_presumed and not ex.presumed):
            self._exited += st.exit_code is None
            st.exit_code, st.exit_presumed = ex.exit_code, ex.presumed
            st.exit_time = ex.mono if st.exit_time is None else min(st.exit_time, ex.mono)
            self._may_fail[ex.key] = st

    @property
    def launcher_exit(self) -> RankExit | None:
        """The newest exit of a node's launcher in this generation (None: every launcher runs)."""
        return self._launcher_exit if self.launchers is None else self.launchers.launcher_exit()

    def mark_unobserved(self, node: str, now: float) -> None:
        """The node's agent (or its log stream) went silent: its ranks cannot be judged."""
        self.unobserved.setdefault(node, now)

    def mark_observed(self, node: str) -> None:
        self.unobserved.pop(node, None)

    # -- judgement ------------------------------------------------------------------------------

    def hang_timeout(self) -> float:
        """The hang timeout in force now (fixed or calibrated), with the delivery slack."""
        if self.settings.hang_timeout is not None:
            return self.settings.hang_timeout + self.delivery_slack
        calibrated = self.settings.calibration.timeout_of(self._usable_intervals, self._longest_interval)
        return calibrated + self.delivery_slack

    def _started(self) -> bool:
        """Has the job shown progress (a progress line, or collectives that keep completing)?

        Collectives are progress once they keep completing (a training loop's); the few of
        start-up (DDP's parameter broadcast, a barrier) only restart the startup clock: the first
        compile after them (torch.compile, XLA) is still start-up, however short --hang-timeout is.
        """
        return self._progress_seen  # a rank's last_progress, once set, is never unset; nor its advances

    def timeout_in_force(self, now: float | None = None) -> tuple[float, str]:
        """The silence limit that applies now and its kind: ``startup`` (no progress yet: the
        startup timeout), ``first_collective`` (no progress yet, and at ``now`` a collective is seen
        stuck: :meth:`_first_collective_hang` judges it at the hang timeout), ``fixed`` (--hang-timeout),
        ``calibrated`` (from step intervals) or ``default`` (calibrating: the long grace of the first steps)."""
        if not self._started():
            stall = None if now is None else self.first_collective_stall(now)
            if stall is not None:
                return stall.timeout, "first_collective"
            return self.settings.startup_timeout, "startup"
        if self.settings.hang_timeout is not None:
            return self.hang_timeout(), "fixed"
        calibration = self.settings.calibration
        kind = "calibrated" if self._usable_intervals >= calibration.min_samples else "default"
        return self.hang_timeout(), kind

    def silent_after(self) -> float:
        """No output for longer than this makes a rank ``silent``: :data:`SILENT_INTERVALS` x the
        median of the last 20 step intervals (a normal one), at least :data:`SILENT_FLOOR`."""
        recent = sorted(self._intervals(21))
        if not recent:
            return SILENT_FLOOR
        return max(SILENT_FLOOR, SILENT_INTERVALS * recent[len(recent) // 2])

    def blind(self, now: float) -> BlindWarning | None:
        """A warning when no rank has shown progress (nor compiled, nor saved) although they have
        printed for :data:`BLIND_AFTER` seconds since the first line; None otherwise. Pure: the
        caller decides how often to say it (once per generation)."""
        if self.step_times or self.first_line is None or now - self.first_line < BLIND_AFTER:
            return None
        alive = self._lock_holder_alive(now)
        for st in self.ranks.values():
            if (st.compile_seconds or st.last_compile_end is not None or st.last_save_end is not None
                    or st.compiling(now, self.settings, alive) or st.save_open is not None):
                return None  # compiling or saving is work with its own evidence; not blindness
        heard = [st for st in self.ranks.values() if st.first_line is not None]
        lines = tuple(t.strip()[:120] for t in self.recent_texts)
        return BlindWarning(round(now - self.first_line, 1), lines, len(heard))

    def _intervals(self, last: int | None = None) -> list[float]:
        """Step intervals, oldest first (from the ``last`` step times only, if given)."""
        times = self.step_times if last is None else self.step_times[-last:]
        return [b - a for a, b in itertools.pairwise(times)]

    def _lock_holder_alive(self, now: float) -> bool:
        """May a compile-cache lock still be held by a working compiler?"""
        if self.processes_observed_at is None:
            return True  # processes cannot be seen (offline, or not sampled yet): trust the log
        stall = self.settings.compiler_cpu_stall
        return self.last_compiler_alive is not None and now - self.last_compiler_alive <= stall

    def _locks_compiling(self, now: float) -> bool:
        if not self.locks or self.last_lock_seen is None or now - self.last_lock_seen > COMPILE_BEAT_WINDOW:
            return False
        first = min(self.locks.values())
        return now - first <= self.settings.compile_timeout and (
            self._lock_holder_alive(now) or now - first <= self.settings.compiler_cpu_stall
        )

    def verdict(self, now: float, final: bool = False) -> Verdict:
        """The job's verdict at ``now`` (:meth:`_judged`), a crash read by :attr:`crash_reader`."""
        v = self._judged(now, final)
        if self.crash_reader is None or v.label is not Label.OTHER_CRASH:
            return v
        return self.crash_reader(v, self.last_progress_wall is not None)

    def _judged(self, now: float, final: bool = False) -> Verdict:
        """The job's verdict at ``now``. Never ``healthy`` for what could not be observed.

        ``final``: nothing more will come (``neuron-watch diagnose`` at the end of its input). An
        error line no rule explains (:attr:`unexplained`) never fails a running job by itself --
        real healthy runs print them, and the ranks' progress after it shows it was survived: live,
        it is a warning. At the end of the input, a rank whose last word is such a line, with no
        progress of any rank after it, is not healthy: ``other_crash``, cause not recognised.
        A rank that fails otherwise (a traceback header, an exit code) carries the line as its
        evidence.
        """
        v = self._verdict(now)
        if final and v.label in (Label.HEALTHY, Label.COMM_TIMEOUT_TRANSIENT) and v.culprit is None:
            open_error = self._unexplained_at_end()
            if open_error is not None:
                return self._with_hints(self._set_up_mistake(self._unexplained_verdict(open_error)))
        if final and v.label is Label.COMPILING and (failed := self._compile_failed_at_end()) is not None:
            return self._with_hints(self._set_up_mistake(self._compile_failed_verdict(failed)))
        if final and v.label is Label.COMM_TIMEOUT_TRANSIENT and v.culprit is None:
            stalled = self._stall_list_at_end(v)
            if stalled is not None:
                return self._with_hints(stalled)
        return v

    def _stall_list_at_end(self, waiting: Verdict) -> Verdict | None:
        """A hang, when the input ends with ranks whose last word is a stall report that names the ranks
        that never joined (:data:`STALL_LIST_SIGNATURES`), with no progress after it (``waiting``'s ranks
        are those): the collective was still waiting when the log ended."""
        lines = [st.last_wait_line for k in waiting.ranks if (st := self.ranks.get(k)) is not None
                 and st.last_wait_line is not None and st.last_wait_line.signature in STALL_LIST_SIGNATURES]
        if not lines:
            return None
        return Verdict(
            Label.COLLECTIVE_HANG,
            Action.RESTART,
            ranks=waiting.ranks,
            evidence=tuple(lines[:20]),
            reason=(f"the input ends while {len(lines)} rank(s) report a stalled collective and name the ranks that "
                    f"never joined it, with no progress after ({lines[0].text.strip()[:160]})"),
            advice=("A collective never completed: the stall report names the ranks the others wait for. Restart "
                    "from the last complete checkpoint; if it repeats, look at those ranks (a rank-dependent branch, "
                    "a rank stuck or dead before the collective)."),
            step=waiting.step,
        )

    def _compile_failed_at_end(self) -> Evidence | None:
        """An error record (its head's level ERROR or FATAL: :func:`head_level`) a compiling rank printed
        after its compile opened (a compiler's start, or a compile the rank announced in its own words: torch-neuron's
        "Compiling function ... with neuron-cc", an extension build), with no progress of that rank after it, at the
        end of the input (TensorRT's records give their level as a bracketed letter, "[E] Building engine failed":
        forms_severity.trt_level; round issue23-heldout-39, NVIDIA Model-Optimizer#50): the compile's
        last word is its failure (a compiler wrapper reports the failed command in one such record: the Neuron
        wrapper's "ERROR ||NEURON_CC_WRAPPER||: Failed compilation with [...]"), not a compile at work.
        A warning, or an error the rank went on from (a step after it), leaves the compile open."""
        for st in self.ranks.values():
            err = st.unexplained
            opened = st.compile_open if st.compile_open is not None else st.announced_compile()
            if (err is not None and opened is not None and err.mono >= opened
                    and (st.last_progress is None or st.last_progress < err.mono)
                    and (head_level(err.text) in _FAILED_LEVELS or trt_level(err.text) is not None)):
                return err
        return None

    def _compile_failed_verdict(self, ev: Evidence) -> Verdict:
        """The verdict of a compile whose last word is an error record: the record's own cause where its
        form states one, else the compile failed (``compile_error``: the same graph fails again)."""
        v = self._unexplained_verdict(ev)
        if v.label is not Label.OTHER_CRASH:
            return v
        return replace(
            v, label=Label.COMPILE_ERROR, action=Action.STOP,
            reason=(f"the input ends inside a compile whose last word is an error record, with no progress after "
                    f"it: the compile failed ({ev.text.strip()[:160]})"),
            advice=("The graph compiler failed: the same graph fails again on a restart. Read the compiler's log "
                    "(its error record names the failed command and, above it, the cause) and fix the model, the "
                    "compiler's flags or the set-up it reports."),
        )

    def _unexplained_at_end(self) -> Evidence | None:
        """The first error line no rule explains that no progress (of any rank) came after."""
        if not any(map(_UNEXPLAINED, self.ranks.values())):
            return None  # the usual case (in C); the pass below costs every rank two times (11 ms at 65,536 ranks)
        progressed = [t for st in self.ranks.values() for t in (st.last_progress, st.last_collective)
                      if t is not None]
        latest = max(progressed, default=-math.inf)
        open_errors = [st.unexplained for st in self.ranks.values()
                       if st.unexplained is not None and st.unexplained.mono >= latest]
        return min(open_errors, key=lambda e: (e.mono, e.key.rank)) if open_errors else None

    def _line_cause(self, text: str) -> tuple[Label, Action, str, str] | None:
        """(label, action, advice, what) one line of an error block states: a rule of the table that names a
        cause (not a vague one, not the form reader's), else the line's form (errorclass.py); None when
        it states none, or is no failure's words (progress, a wait, a benign line)."""
        m = self.kb.classify(text)
        if m is not None:
            sig = m.signature
            if sig.effect is Effect.FATAL and sig.id not in self._form_ids and (
                    not sig.generic or sig.category is not Label.OTHER_CRASH):
                # a vague rule that names a cause (a collective library's system error) still names it
                return sig.category, sig.action, sig.advice, sig.id
            if sig.effect is not Effect.FATAL and sig.effect is not Effect.UNEXPLAINED:
                return None
        reading = read_error(text)
        return None if reading is None else (reading.label, reading.action, reading.advice, reading.form)

    def _block_verdict(self, ev: Evidence, code: int | None = None) -> Verdict | None:
        """The verdict the error block of ``ev`` states (errorblock.py), when its most specific line states
        a cause other than a crash of unknown cause; None without the lines (:attr:`context`), outside a
        block, or when no line of it states one."""
        found = self.context(ev) if self.context is not None else self.blocks.around(ev)
        if found is None:
            return None
        lines, at = found
        texts = [line.text for line in lines]
        # the process's report ends where it shows progress again: what it printed after that is not
        # what it died of
        classify = self.kb.classify
        for i in range(at + 1, len(texts)):
            m = classify(texts[i])
            if m is not None and m.signature.effect is Effect.PROGRESS:
                del texts[i:]
                break
        said: dict[str, tuple[Label, Action, str, str]] = {}

        def explain(text: str) -> Label | None:
            cause = self._line_cause(text)
            if cause is None:
                return None
            said[text] = cause
            return cause[0]

        decision = cause_from(texts, at, explain)
        if decision is None or (decision.index == at and decision.read == texts[at]):
            return None  # the line itself decides: the judge reads it as it does without its block
        label, action, advice, what = said[decision.read]
        line = lines[decision.index]
        decided = Evidence(ev.key, line.text, what if what in self.kb.by_id else ev.signature, line.source,
                           line.lineno, line.mono)
        st = self.ranks.get(ev.key)
        step = st.step if st is not None and st.step is not None else self.max_step
        exited = f" and exited with {code} ({_exit_meaning(code)})" if code is not None else ""
        who = _who(ev.key) if ev.key.rank >= 0 else "a line of no known rank"
        reason = (f"{who} failed{exited} ({ev.text.strip()[:80]}); its error block states the cause in its most "
                  f"specific line ({what}): {label.value} ({line.text.strip()[:160]})")
        evidence = (decided, *(() if decided.text == ev.text else (ev,)))
        others = [e for e in self.unexplained if e.text not in (decided.text, ev.text)][:18]
        return Verdict(label, action, ranks=(ev.key,), culprit=ev.key, evidence=(*evidence, *others), reason=reason,
                       advice=advice, step=step, culprit_source="failure")

    def _set_up_mistake(self, v: Verdict) -> Verdict:
        """``v`` as configuration when it is a crash before any progress whose evidence is a program-mistake
        exception (``ValueError``, ``KeyError``...) and the frames of its traceback, read from the lines
        around it (:attr:`context`, or the runs the nodes sent), say it was raised setting the program up
        (firstfailure.mistake_before_progress): a restart meets the same value again. Without its frames
        ``v`` stays as it is (:attr:`crash_reader` reads it then)."""
        progressed = self.last_progress_wall is not None
        if v.label is not Label.OTHER_CRASH or v.step is not None or not v.evidence or progressed:
            return v
        ev = v.evidence[0]
        if program_mistake(ev.text) is None:
            return v
        found = self.context(ev) if self.context is not None else self.blocks.around(ev)
        if found is None:
            return v
        frames, whole = _traceback_frames([line.text for line in found[0]], found[1])
        if not frames:
            return v
        return mistake_before_progress(v, False, {ev.key: (ev.text, frames, whole)}) or v

    def _cause_before(self, st: RankState) -> Verdict | None:
        """The verdict of the error line that states a cause, nearest before ``st``'s failure, when that
        failure is a bare fatal signal or abort (a line that states no cause of its own: ``Segmentation
        fault``, ``Aborted (core dumped)``, ``*** SIGABRT received``) and the rank printed the line since
        its last progress: the library that found the problem reports it, then aborts or leaves the
        process to crash on it (cuDNN's version mismatch, then ``Segmentation fault``; glog's ``Check
        failed``, then ``*** SIGABRT``). None when the failure states its own cause, or no line before
        it states one."""
        failure = st.failure
        if failure is None or failure.signature == KILLED_SIGNATURE:
            return None  # SIGKILL comes from outside the process: what it printed before is not why
        own = self._line_cause(failure.text)
        if own is not None and own[0] is not Label.OTHER_CRASH:
            return None
        at = next((i for i, e in enumerate(st.errors) if e is failure), None)
        if at is None:
            return None
        for ev in reversed(st.errors[:at]):
            if ev.source == failure.source and failure.lineno - ev.lineno > CAUSE_BEFORE_LINES:
                break
            cause = self._line_cause(ev.text)
            if cause is None or cause[0] in (Label.OTHER_CRASH, Label.HEALTHY):
                continue
            label, action, advice, what = cause
            step = st.step if st.step is not None else self.max_step
            reason = (f"{_who(st.key)} died of a fatal signal ({failure.text.strip()[:80]}) after an error line that "
                      f"states the cause ({what}): {label.value} ({ev.text.strip()[:160]})")
            decided = ev if what not in self.kb.by_id else replace(ev, signature=what)
            return Verdict(label, action, ranks=(st.key,), culprit=st.key, evidence=(decided, failure),
                           reason=reason, advice=advice, step=step, culprit_source="failure")
        return None

    def _unexplained_verdict(self, ev: Evidence, code: int | None = None) -> Verdict:
        block = self._block_verdict(ev, code)
        if block is not None:
            return block
        st = self.ranks.get(ev.key)
        others = [e for e in self.unexplained if e is not ev][:19]
        exited = f" and exited with {code} ({_exit_meaning(code)})" if code is not None else ""
        who = _who(ev.key) if ev.key.rank >= 0 else "a line of no known rank"
        step = st.step if st is not None and st.step is not None else self.max_step
        reading = read_error(ev.text)
        sig = self.kb.by_id.get(ev.signature)
        line = ev.text.strip()[:160]
        if reading is None and ev.signature == UNRECOGNISED_SIGNATURE:
            # a wrapper's error that states no cause (a build step's non-zero exit, a re-raised
            # exception, a launcher's "crashed") follows the error of the same process that does: the
            # cause is the latest earlier one whose form states it (the root of an exception chain is
            # printed first), the rank's first failure (a panic, a fatal signal) the oldest of them
            at = next((i for i, e in enumerate(self.unexplained) if e is ev), len(self.unexplained))
            first = [st.failure] if st is not None and st.failure is not None and st.failure is not ev else []
            for earlier in reversed([*first, *(e for e in self.unexplained[:at] if e.key == ev.key)]):
                if (reading := read_error(earlier.text)) is not None:
                    line = f"{earlier.text.strip()[:120]}, then {line[:80]}"
                    break
            after = next((e for e in self.unexplained[at + 1:] if e.key == ev.key), None)
            if (reading is None and after is not None and after.source == ev.source and after.lineno == ev.lineno + 1
                    and _THROWABLE.match(after.text) and (reading := read_error(after.text)) is not None):
                # a logger's record of an exception: the throwable it was given follows on the next line
                line = f"{line[:80]}, then {after.text.strip()[:120]}"
            if (reading is None and after is not None and after.source == ev.source and after.lineno == ev.lineno + 1
                    and ev.text.rstrip().endswith(":") and (reading := read_error(after.text)) is not None):
                # an exception whose message ends on a colon goes on with the output it introduces on the next
                # lines (Triton's "RuntimeError: Internal Triton PTX codegen error:" over ptxas's diagnostics,
                # python/triton/backends/nvidia/compiler.py; XLA's "..., output:"): that output states the cause
                line = f"{line[:80]} {after.text.strip()[:120]}"
            if reading is None and (relayed := _relayed_cause(self.unexplained[at:], ev)) is not None:
                # a launcher's failure lines state no cause, and it prints the log of the tool that failed
                reading, cause = relayed
                line = f"{line[:80]}, then {cause.text.strip()[:120]}"
            if reading is None and (run := _tool_run_cause(self.unexplained[at:], ev)) is not None:
                # one tool's report in several records: the next that states a cause explains the first
                reading, cause = run
                line = f"{line[:80]}, then {cause.text.strip()[:120]}"
            if reading is None and (piped := _tool_stderr_cause(self.unexplained[at:], ev)) is not None:
                # Triton's report of a failed assembler goes on with the assembler's own output
                reading, cause = piped
                line = f"{line[:80]}, then {cause.text.strip()[:120]}"
        if reading is not None:
            # no rule knows the words, but the error's form says the cause (errorclass.py)
            label, action, advice = reading.label, reading.action, reading.advice
            reason = (f"{who} printed an error no signature recognises{exited}, and nothing after it shows it "
                      f"went on; its form ({reading.form}) says {label.value} ({line})")
        elif sig is not None and ev.signature != UNRECOGNISED_SIGNATURE:
            # a line a rule knows as a symptom of unknown cause (an application-class Xid):
            # its rule's words say what is known
            label, action, advice = sig.category, sig.action, sig.advice
            form = read_line(ev.text) if ev.signature in self._form_ids else None
            what = f"{sig.id} ({form.name})" if form is not None else sig.id
            reason = f"{who}: {what}{exited}, and nothing after it shows it went on ({line})"
        else:
            label, action = Label.OTHER_CRASH, Action.RESTART
            reason = (f"{who} printed an error no signature recognises{exited}, and nothing after it "
                      f"shows it went on: cause not recognised ({line})")
            advice = ("The cause is not in neuron-watch's knowledge base: read the evidence lines and the rank's "
                      "log tail. If it is a known failure, a signature (watchdog/diagnosis/signatures.toml) makes "
                      "it recognised.")
        return Verdict(label, action, ranks=(ev.key,), culprit=ev.key, evidence=(ev, *others), reason=reason,
                       advice=advice, step=step, culprit_source="failure")

    def _verdict(self, now: float) -> Verdict:
        if now < self._asked_at:
            self._widen()  # what an earlier verdict forgot as over may still count at this earlier time
        self._asked_at = now
        failed = self._failure_verdict()
        if failed is not None:
            return self._with_hints(self._after_training(self._set_up_mistake(failed)))
        if self.unobserved:
            nodes = sorted(self.unobserved)
            return Verdict(
                Label.UNOBSERVED,
                Action.WAIT,
                ranks=tuple(k for k in self.ranks if k.node in self.unobserved),
                reason=f"no word from node(s) {', '.join(nodes)}",
                advice="Check that the node's neuron-watch agent is running and can reach the coordinator.",
                step=self.max_step,
            )
        alive = self._lock_holder_alive(now)
        compiling = [st for st in self._compile_candidates(now) if st.compiling(now, self.settings, alive)]
        if compiling or self._locks_compiling(now):
            ev = tuple(
                e
                for st in compiling
                for e in (st.compile_open_line or st.last_lock_wait_line,)
                if e is not None
            )
            what = f"{len(compiling)} rank(s) compiling" if compiling else f"{len(self.locks)} fresh compile lock(s)"
            return Verdict(
                Label.COMPILING,
                Action.WAIT,
                ranks=tuple(st.key for st in compiling),
                culprit=compiling[0].key if compiling else None,
                evidence=ev[:20],
                reason=f"{what}; the others may wait for them",
                advice="A graph compile is in progress; waiting is correct. Precompile with "
                "neuron_parallel_compile to avoid this delay.",
                step=self.max_step,
            )
        stale = self._stale_lock_verdict(now, alive)
        if stale is not None:
            return stale
        return self._with_hints(self._hang_or_healthy(now))

    def _compile_candidates(self, now: float) -> list[RankState]:
        """The ranks that may be compiling at ``now``, in order; forgets those whose evidence is over."""
        index = self._may_compile
        for key, st in list(index.items()):
            if st.exit_code is not None or not st.compile_evidence(now, self.settings):
                del index[key]
        return self._ordered(index)

    def _stale_lock_verdict(self, now: float, alive: bool) -> Verdict | None:
        """Ranks still waiting on a compile lock that no live compiler holds."""
        index = self._lock_waiters
        for key, st in list(index.items()):  # over: exited, no longer waiting, or waited long ago
            if (st.exit_code is not None or st.first_lock_wait is None or st.last_lock_wait is None
                    or now - st.last_lock_wait > COMPILE_BEAT_WINDOW * 5):
                del index[key]
        waiting = [
            st
            for st in self._ordered(index)
            if st.exit_code is None
            and st.first_lock_wait is not None
            and st.last_lock_wait is not None
            and now - st.last_lock_wait <= COMPILE_BEAT_WINDOW * 5
        ]
        if not waiting:
            return None
        why = "no compiler process has run" if not alive else "the compile budget is spent"
        return Verdict(
            Label.COMPILE_ERROR,
            Action.STOP,
            ranks=tuple(st.key for st in waiting),
            culprit=waiting[0].key,
            evidence=tuple(st.last_lock_wait_line for st in waiting if st.last_lock_wait_line is not None)[:20],
            reason=f"{len(waiting)} rank(s) wait on a compile-cache lock and {why}: a stale lock",
            advice="A compile killed earlier left a *.lock in the compile cache and every rank waits on it forever. "
            "Stop the job, make sure no neuronx-cc runs, delete the *.lock files under the compile cache "
            "(neuron_parallel_compile --command clear-locks), and restart.",
            step=self.max_step,
        )

    def _with_hints(self, v: Verdict) -> Verdict:
        """Attach info hints (EFA off, FI_EFA_FORK_SAFE...) to a hang or a communication failure."""
        if not self.hints or v.label not in (*SECONDARY, Label.OTHER_CRASH):
            return v
        evidence = (*v.evidence, *(e for e, _ in self.hints))[: max(20, len(v.evidence))]
        extra = " ".join(f"Also seen: {m.signature.advice}" for _, m in self.hints[:3])
        return replace(v, evidence=evidence, advice=f"{v.advice} {extra}".strip())

    def recompile_storms(self) -> list[tuple[RankKey, int, Evidence]]:
        """Ranks that recompile again and again (:data:`RECOMPILE_STORM` recompiles in this
        generation: torch.compile's announced recompiles, or graph compiles such as neuronx-cc's
        after the job's first step; or dynamo's own recompile limit hit): a performance finding,
        never a hang."""
        return [(st.key, st.recompiles, st.last_recompile_line) for st in self._ordered(self._recompilers)
                if st.last_recompile_line is not None
                and (st.recompiles >= RECOMPILE_STORM or st.recompile_limit_hit)]

    def training_finished(self) -> Evidence | None:
        """The newest "training finished" line (HF's final metrics, Lightning's ``Trainer.fit`
        stopped``, ...) of a rank that made no progress after it; None while training goes on."""
        # (a rank's train_end_line is set only where it goes into _said_end)
        ends = [st.train_end_line for st in self._ordered(self._said_end) if st.train_end_line is not None]
        if not ends:
            return None
        # Every rank that printed progress must have said it (or exited cleanly): one rank that
        # ran out of data early and said "done" while the others wait for it is a hang. Only ranks:
        # a node's own stream (rank -1) says no end, and its "a new complete checkpoint appeared
        # ... (step N)" is a progress line.
        if any(st.key.rank >= 0 and st.last_progress is not None and st.train_end_line is None
               and st.exit_code != 0 for st in self.ranks.values()):
            return None
        return max(ends, key=lambda e: e.mono)

    def last_step_reached(self) -> Evidence | None:
        """The training bar's line at its total (the run's last configured step, see
        :data:`_LAST_STEP_BAR`) when what ran is training (:attr:`trained`), no rank is behind it and
        none has drawn a new bar since; None otherwise. A rank that stops before that step is judged
        on the hang timeout as ever.

        A bar without a description is also a data-preparation loop's (tokenising a dataset before
        the first step: `` 100%|##########| 1000/1000 [00:02<00:00, 500.00it/s]``), and a hang in
        the first collective after it is silent too: only a loss the ranks logged, a checkpoint
        completed, the node's word that one appeared, or a rank's collectives completing steadily,
        after the bar began (by its own elapsed time), says that a bar's end is training's."""
        last = self.last_step_line
        if last is None or not self._trained_since(_bar_began(last)):
            return None
        step = self.last_step
        for st in self.ranks.values():
            if st.step is not None and st.exit_code is None and st.step < step and st.key.rank >= 0:
                # a rank that prints steps has not reached the last one (a node's own stream, rank -1,
                # prints the step of the newest checkpoint, not a position in training)
                return None
            if st.key == last.key and _NEW_BAR.match(st.last_line_text):
                return None  # a loop began again: the bar's end was an epoch's
        return last

    def _saw_training(self, ev: Evidence) -> None:
        """``ev`` says that training runs (see :attr:`trained`): the newest such sign is kept."""
        mono = ev.mono
        if self.trained is None or mono >= self.trained.mono:
            self.trained = ev
        if mono < self.trained_first:
            self.trained_first = mono

    def _trained_since(self, began: float) -> bool:
        """Did something say after ``began`` that training runs: a loss, a checkpoint, or a rank's
        collectives completing steadily?"""
        if self.trained is not None and self.trained.mono > began:
            return True
        steady = self.trained_collectives
        seen = None if steady is None else self.ranks[steady].last_collective
        return seen is not None and seen > began

    def _trained_by(self, began: float) -> str:
        """What said after ``began`` that training runs (see :meth:`_trained_since`), for a verdict's reason."""
        ev, steady = self.trained, self.trained_collectives
        if ev is None or ev.mono <= began:
            return "no sign of it" if steady is None else f"{_who(steady)}'s collectives completed steadily"
        sig = self.kb.by_id.get(ev.signature)
        if ev.signature == CHECKPOINT_APPEARED_SIGNATURE:
            what = "a new checkpoint appeared"
        elif sig is not None and sig.effect is Effect.SAVE_END:
            what = "a checkpoint save completed"
        else:
            what = "a loss was logged"
        return f"{what} by {_who(ev.key)}"

    def _left_early(self) -> list[RankState]:
        """Ranks that said they were done (or exited cleanly) while the training as a whole was not:
        in a synchronous job, the others are left waiting in a collective they never joined."""
        if self.training_finished() is not None:
            return []
        # only a rank that exited (in _may_fail) or said its end (_said_end) can be one: a hang verdict over
        # 65,536 ranks looked at every rank here (28 ms)
        maybe = {**self._may_fail, **self._said_end}
        return [st for st in self._ordered(maybe)
                if st.key.rank >= 0 and st.failure is None and (st.exit_code == 0 or st.train_end is not None)]

    def _end_said_by_some(self, live: Sequence[RankState], finished: Evidence | None) -> EndOnSomeRanks | None:
        """Training said finished by some ranks (:attr:`RankState.train_end`) but not by every rank that
        printed progress (``finished``, what :meth:`training_finished` returned, is None), while each of
        those still running has reached the step at which it was said: the end of a program that prints
        it on rank 0 only, the others shutting down. None when it is not that: no end said, a failure
        or a stopped rank among them, a rank behind that step or of no known step (it may be in a
        collective the ones that left never joined: uneven data), or a rank waiting on a peer since the
        end was said.

        Returns the newest end line, the ranks still running that did not say it, their step, and
        until when they have to exit (:func:`teardown_grace`)."""
        said = [st for st in self.ranks.values()
                if st.key.rank >= 0 and st.train_end_line is not None and st.failure is None]
        if not said or finished is not None:
            return None
        end = max((st.train_end_line for st in said if st.train_end_line is not None), key=lambda e: e.mono)
        steps = [st.train_end_step for st in said]
        if None in steps:
            return None
        step = max(s for s in steps if s is not None)
        quiet = [st for st in live if st.key.rank >= 0 and st.train_end_line is None]
        if not quiet or any(st.failure is not None or st.stopped or st.step is None or st.step < step
                            or (st.last_wait is not None and st.last_wait >= end.mono) for st in quiet):
            return None
        timeout = self.hang_timeout()
        until = end.mono + teardown_grace(timeout)
        exits = [st.exit_time for st in said]
        if all(st.exit_code == 0 for st in said) and None not in exits:
            until = min(until, max(end.mono, *(t for t in exits if t is not None)) + timeout)
        return EndOnSomeRanks(end, tuple(st.key for st in quiet), step, until)

    def _teardown_verdict(self, shutting: EndOnSomeRanks, now: float) -> Verdict:
        """Healthy: some ranks said training finished at the others' final step, and the others have
        until ``shutting.until`` to exit (:meth:`_end_said_by_some`)."""
        end = shutting.end
        return Verdict(
            Label.HEALTHY,
            Action.WAIT,
            ranks=shutting.quiet,
            culprit=end.key,
            evidence=(end,),
            reason=f"training finished {now - end.mono:.0f}s ago ({_who(end.key)}: {end.text.strip()[:80]!r}); "
            f"{_ranks_said(shutting.quiet)} reached the same final step ({shutting.step}) and said no end of "
            f"their own (most programs print it on rank 0 only): shutting down; a hang if not exited in "
            f"{shutting.until - now:.0f}s (then a rank that left a collective, uneven data, or a teardown "
            "that hangs)",
            advice="The training has finished on the rank that prints its end; the others are exiting.",
            step=self.max_step,
        )

    def _after_training(self, v: Verdict) -> Verdict:
        """A failure that came after the job said its training had finished happened while shutting
        down (an abort at interpreter exit, a teardown error): the work is done, so it is reported
        and not restarted (a restart would redo finished work, and a trainer may save again)."""
        end = self.training_finished()
        if end is None and v.label not in SECONDARY:
            # (not a peer's closed connection, timeout or hang: after a rank left cleanly that is DDP's uneven
            # inputs, the rank that left one collective short being the culprit, test_culprit's uneven case)
            end = self._clean_exit_at_the_end()
        if end is None:
            return v
        times = [t for st in self.ranks.values() if st.key in v.ranks
                 for t in (st.failure_time if st.failure is not None else st.exit_time,) if t is not None]
        if not times and self.launcher_exit is None:
            return v
        if times and min(times) < end.mono:
            return v  # it failed before the end was declared: a failure of the training
        return replace(
            v, action=Action.STOP, after_training=True,
            reason=f"after training finished (step {self.max_step}; {_who(end.key)}: {end.text.strip()[:80]!r}): "
            f"{v.reason}; not restarted, the training is done",
            advice=f"{v.advice} The training had finished: check that the final checkpoint/model was written; "
            "the failure happened while shutting down.".strip(),
        )

    def _clean_exit_at_the_end(self) -> Evidence | None:
        """The end said by a rank's exit status, for :meth:`_after_training`: the first rank that exited 0
        at the newest step any rank reached, while every rank that printed progress has reached that
        step too (none is still behind, training). Without an end line (a script that just returns)
        this is the only word the program gives that its work is done; a failure of another rank after
        it is its teardown (``destroy_process_group`` failing, an abort at exit), and restarting it
        resumed from the last checkpoint, at the end, to fail the same way (the trial: a crash loop,
        exit 4, after a needless relaunch). None when no rank exited so."""
        top = self.max_step
        ranks = [st for st in self.ranks.values() if st.key.rank >= 0]
        if top is None or any(st.last_progress is not None and st.step != top for st in ranks):
            return None
        clean = [st for st in ranks if st.exit_code == 0 and st.exit_time is not None and st.step == top]
        if not clean:
            return None
        first = min(clean, key=lambda st: cast(float, st.exit_time))
        # dated by its last progress: its exit is read later (a /proc sample), often after a peer's teardown
        # error that came after it had printed its last step
        when = first.last_progress if first.last_progress is not None else cast(float, first.exit_time)
        return Evidence(first.key, f"exited 0 at step {top}, the last step every rank reached", "host.clean_exit",
                        mono=when)

    def _failure_verdict(self) -> Verdict | None:
        failures: list[tuple[bool, float, RankState]] = []  # (secondary?, time, rank)
        for st in self._ordered(self._may_fail):
            if st.failure is not None and st.failure_match is not None:
                sig = st.failure_match.signature
                t = st.failure_time if st.failure_time is not None else st.failure.mono
                # A traceback header with no error line of its own yet (still printing, or a
                # pasted log cut there) and no exit says nothing of a cause: it yields to any
                # failure that does, like a peer's report.
                unfinished = (sig.generic and st.failure_detail is None and st.unexplained is None
                              and st.exit_code in (None, 0))
                failures.append((sig.category in SECONDARY or unfinished, t, st))
            elif st.exit_code not in (None, 0) and st.exit_code not in SIGTERM_CODES:
                failures.append((False, st.exit_time or 0.0, st))
        if not failures:
            if self.launcher_exit is not None and self.launcher_exit.exit_code != 0:
                return Verdict(
                    Label.OTHER_CRASH,
                    Action.RESTART,
                    reason=f"launcher exited with {self.launcher_exit.exit_code} and no rank explained why",
                    advice="Read the launcher output in the run directory.",
                    step=self.max_step,
                )
            return None
        # The root cause is the earliest *primary* failure (hardware, crash, OOM...), however
        # loud the peers' collective timeouts are; among equals the earliest, then the lowest rank.
        # A vague report no rank owns (torchrun's ChildFailedError in a combined log) comes after
        # any failure a rank owns: it reports one of them.
        def unowned_generic(st: RankState) -> bool:
            m = st.failure_match
            return st.key.rank < 0 and m is not None and m.signature.generic

        failures.sort(key=lambda f: (f[0], unowned_generic(f[2]), f[1], f[2].key.rank))
        _secondary, _t, st = failures[0]
        if _secondary:
            # Every failure is a peer's consequence or a traceback cut before its error line; a rank
            # that failed no other way but whose last word is an error line stating its cause by its
            # form (a missing file, a status code) is the report the others follow.
            failed_keys = {f[2].key for f in failures}
            open_error = self._unexplained_at_end()
            if open_error is not None and open_error.key not in failed_keys and read_error(open_error.text):
                return self._out_of_step(self._unexplained_verdict(open_error))
        by_time = sorted(failures, key=lambda f: (f[1], f[2].key.rank))
        ranks = tuple(f[2].key for f in by_time)
        evidence = [st.failure] if st.failure is not None else []
        evidence += [f[2].failure for f in by_time if f[2].failure is not None and f[2] is not st]
        if st.failure_match is not None and st.failure is not None:
            sig = st.failure_match.signature
            culprit, reason = st.key, f"{_who(st.key)}: {sig.id}"
            if st.exit_code is not None:
                reason += f" (exit {st.exit_code})"
            if _secondary:
                # Every report is a peer-side consequence (timeouts, closed connections). The rank
                # that reported nothing is the one that never reached the collective or died mute.
                failed = {f[2].key for f in failures}
                alone, left = self._reported_nothing(failed)
                if alone is not None and len(failed) >= 1:
                    culprit = alone
                    reason = f"{len(failed)} rank(s) report {sig.id}; {_who(culprit)} alone reported nothing"
                elif left is not None:
                    culprit = left
                    reason = (f"{len(failed)} rank(s) report {sig.id}; {_who(culprit)} had said it was done (or "
                              "exited cleanly) while they were in a collective with it: it left early")
            if sig.id == KILLED_SIGNATURE:
                oom = self._oom_evidence(st.key.node)
                if oom is not None:  # the kernel says why it was killed
                    return self._oom_verdict(st, oom, ranks, evidence)
                if self._killed_compiling(st):
                    return self._compile_killed_verdict(st, ranks, evidence, "was killed by signal 9 (SIGKILL) "
                                                        "while it generated or compiled a graph")
                if (noted := self._allocation_killed(st, ranks, evidence)) is not None:
                    return noted
                reason = f"{_who(st.key)} was killed by signal 9 (SIGKILL); by whom is unknown: {_NO_OOM_EVIDENCE}"
            elif sig.category is Label.COMPILE_ERROR and _COMPILER_SIGKILL.search(st.failure.text):
                return self._compile_killed_verdict(st, ranks, evidence,
                                                    "the graph compiler was killed by signal 9 (SIGKILL)")
            elif (sig.category is Label.COMPILE_ERROR and (raised := _raised_setup(st.failure, st.failure_detail))
                  is not None):
                # the compiler's failure ends on a colon and the next line is what it raised: that line states a
                # set-up the compiler met (dynamo's "BackendCompilerFailed: backend='inductor' raised:" over
                # "RuntimeError: Found <GPU> which is too old to be supported by the triton GPU compiler ...";
                # round issue23-heldout-17, nnunet-2349), which the same compile meets again
                return self._out_of_step(self._unexplained_verdict(raised, st.exit_code))
            elif sig.generic and (detail := st.failure_detail or st.unexplained) is not None and (
                    sig.category is Label.OTHER_CRASH or read_error(detail.text) is not None):
                # a traceback header or an exit report, and the rank's own error line no rule knows; a
                # vague failure whose rule names a cause (a system error of the collective library) gives
                # way only to a line whose form states another
                return self._out_of_step(self._unexplained_verdict(detail, st.exit_code))
            elif sig.category is Label.OTHER_CRASH and (before := self._cause_before(st)) is not None:
                return self._out_of_step(replace(before, ranks=ranks))
            elif sig.id in self._form_failures:
                # a failure read from its form alone (failureforms.py): the form may state the cause
                return self._out_of_step(self._unexplained_verdict(st.failure, st.exit_code))
            elif sig.generic and folded_traceback(st.failure.text) and read_error(st.failure.text) is not None:
                # a traceback a service folded into one line (heldout.round34c): the line holds the header's rule and
                # the exception under it, whose cause decides as the exception's own line would
                return self._out_of_step(self._unexplained_verdict(st.failure, st.exit_code))
            elif (sig.generic or sig.category is Label.OTHER_CRASH) and (
                    block := self._block_verdict(st.failure, st.exit_code)) is not None:
                # a vague failure (a traceback's header, a wrapper, a fatal signal) whose error block
                # states the cause in another line
                return self._out_of_step(replace(block, ranks=ranks))
            return self._out_of_step(Verdict(
                sig.category,
                sig.action,
                ranks=ranks,
                culprit=culprit,
                evidence=tuple(evidence[:20]),
                reason=reason,
                advice=sig.advice,
                step=st.step if st.step is not None else self.max_step,
                culprit_source="failure",
            ))
        code = st.exit_code
        if code in KILLED_CODES:
            oom = self._oom_evidence(st.key.node)
            if oom is not None:
                return self._oom_verdict(st, oom, ranks, evidence)
            if self._killed_compiling(st):
                return self._compile_killed_verdict(st, ranks, evidence, f"exited with {code} (SIGKILL) while it "
                                                    "generated or compiled a graph")
            # SIGKILL says nothing of who sent it (the OOM killer, an operator, a scheduler's
            # enforcement); without the kernel's word the verdict does not guess.
            reason = f"{_who(st.key)} was killed by signal 9 (SIGKILL); by whom is unknown: {_NO_OOM_EVIDENCE}"
            advice = ("Something sent the rank SIGKILL. If the host ran out of memory, dmesg shows an oom-kill "
                      "line for its pid; otherwise look for an operator, a scheduler limit or a health agent.")
        elif st.unexplained is not None and code is not None:
            return self._out_of_step(self._unexplained_verdict(st.unexplained, code))
        else:
            reason = f"{_who(st.key)} exited with {code} ({_exit_meaning(code)})"
            advice = "The rank exited with an error; its log tail is in the incident bundle."
        return self._out_of_step(Verdict(
            Label.OTHER_CRASH,
            Action.RESTART,
            ranks=ranks,
            culprit=st.key,
            evidence=tuple(evidence[:20]),
            reason=reason,
            advice=advice,
            step=st.step if st.step is not None else self.max_step,
            culprit_source="failure",
        ))

    def _reported_nothing(self, failed: set[RankKey]) -> tuple[RankKey | None, RankKey | None]:
        """Of the ranks that did not fail (not in ``failed``) and reported nothing: the one rank, when there is
        exactly one, and the one that had left early (:meth:`_left_early`), when exactly one of them had; None
        for either otherwise."""
        # (a rank that had said it was done and that the launcher's teardown then stopped, SIGTERM
        # landing on its interpreter's way out, reported nothing either)
        def quiet(k: RankKey, r: RankState) -> bool:
            return k not in failed and k.rank >= 0 and (
                r.exit_code in (None, 0) or (r.exit_code in SIGTERM_CODES and r.train_end is not None))

        # whether one rank alone: the first two such ranks tell (a hang line on one rank of 65,536 made this a
        # list of every other rank, with a RankKey hash each: 46 ms)
        first_two = list(itertools.islice((k for k, r in self.ranks.items() if quiet(k, r)), 2))
        left = [r.key for r in self._left_early() if quiet(r.key, r)]
        return (first_two[0] if len(first_two) == 1 else None), (left[0] if len(left) == 1 else None)

    def _out_of_step(self, verdict: Verdict) -> Verdict:
        """A crash whose ranks' recorders show one rank out of step with the others (a skipped or
        different collective) names that rank: the divergence is the cause, the abort or closed
        connection that followed on a peer only its consequence (:meth:`_collective_mismatch`)."""
        mismatch = self._collective_mismatch()
        if mismatch is None:
            noticed = verdict.culprit is not None and verdict.reason.startswith(
                f"{_who(verdict.culprit)}: {MISMATCH_SIGNATURE}")
            if noticed:
                # the rank that says so received what a peer out of step sent: it is not the cause
                return dataclasses.replace(verdict, culprit=None, culprit_source=None, reason=(
                    f"{verdict.reason}; a rank is out of step with its peers; their flight recorders do not show "
                    "which (a rank's recorder is read every few seconds and as it exits normally)"))
            return verdict
        key, how = mismatch
        return dataclasses.replace(verdict, culprit=key, culprit_source="flight_recorder",
                                   reason=f"{verdict.reason}; {how}")

    @staticmethod
    def _killed_compiling(st: RankState) -> bool:
        """Was ``st`` in a graph compile (open, or its compiler still beating) when it got SIGKILL?"""
        t = st.failure_time if st.failure is not None else st.exit_time
        if t is None:
            return False
        if st.compile_open is not None and st.compile_open <= t:
            return True
        beat = st.last_compile_beat
        return (beat is not None and beat <= t and t - beat <= COMPILE_BEAT_WINDOW
                and (st.last_compile_end is None or beat > st.last_compile_end))

    def _compile_killed_verdict(self, st: RankState, ranks: tuple[RankKey, ...], evidence: list[Evidence],
                                what: str) -> Verdict:
        """A graph compile killed by SIGKILL (a compiler killed by signal 9 is host OOM). Nothing else
        kills a compile: the host's OOM killer ends the biggest process, and the compile of a large
        graph -- neuronx-cc, or the framework tracing the model into HLO for it, which holds the whole
        model on the host (aws-neuron/nki-samples#87, aws-neuron-sdk#1222: an 8B model on a 32 GB
        trn1.2xlarge) -- is it."""
        if st.compile_open_line is not None and st.compile_open_line not in evidence:
            evidence = [*evidence, st.compile_open_line]
        return Verdict(
            Label.OOM, Action.RESTART, ranks=ranks, culprit=st.key, evidence=tuple(evidence[:20]),
            reason=f"{_who(st.key)}: {what}: host out of memory",
            advice="The compile was killed, almost always by the host's OOM killer. Compile with fewer "
            "parallel jobs (neuron_parallel_compile --num_parallel, NEURON_CC_FLAGS), on a host with more "
            "memory, or with fewer ranks compiling at once; then restart.",
            step=st.step if st.step is not None else self.max_step, culprit_source="failure")

    def _oom_evidence(self, node: str) -> Evidence | None:
        """A line of this node (any rank, or the node's own stream) that says the kernel killed for memory."""
        for st in self.ranks.values():
            m = st.failure_match
            if (st.key.node == node and m is not None and st.failure is not None
                    and m.signature.category is Label.OOM and m.signature.id != KILLED_SIGNATURE):
                return st.failure
        return self.oom_lines.get(node)

    def _allocation_killed(self, st: RankState, ranks: tuple[RankKey, ...],
                           evidence: list[Evidence]) -> Verdict | None:
        """SIGKILL on the lines right after the allocator noted a large allocation it granted (tcmalloc's report,
        heldout.round25b.large_allocation): the kernel's OOM killer taking back what the process just took. None
        without the lines (:attr:`context`) or without such a note just before the kill."""
        assert st.failure is not None
        found = self.context(st.failure) if self.context is not None else self.blocks.around(st.failure)
        if found is None:
            return None
        lines, at = found
        for line in reversed(lines[max(0, at - ALLOCATION_KILL_LINES):at]):
            size = large_allocation(line.text)
            if size is not None:
                return Verdict(
                    Label.OOM, Action.RESTART, ranks=ranks, culprit=st.key, evidence=tuple(evidence[:20]),
                    reason=f"{_who(st.key)} was killed by signal 9 right after tcmalloc noted a "
                    f"{size / 2**30:.1f} GiB allocation: host out of memory",
                    advice="The host ran out of memory as the process grew by a large allocation: load less at once "
                    "(smaller batches or shards of the data), or run on a host with more memory.",
                    step=st.step if st.step is not None else self.max_step, culprit_source="failure")
        return None

    def _oom_verdict(self, st: RankState, oom: Evidence, ranks: tuple[RankKey, ...],
                     evidence: list[Evidence]) -> Verdict:
        sig = self.kb.by_id.get(oom.signature)
        return Verdict(
            Label.OOM,
            Action.RESTART,
            ranks=ranks,
            culprit=st.key,
            evidence=tuple([oom, *(e for e in evidence if e is not oom)][:20]),
            reason=f"{_who(st.key)} was killed by signal 9 and the kernel reports an out-of-memory kill "
            f"({oom.signature})",
            advice=sig.advice if sig is not None else "The host ran out of memory.",
            step=st.step if st.step is not None else self.max_step,
            culprit_source="failure",
        )

    def _hang_or_healthy(self, now: float) -> Verdict:
        # torchrun exits 0 only once every worker it started has exited 0: none is live after it
        finished = self.launcher_exit is not None and self.launcher_exit.exit_code == 0
        # A finished compile or checkpoint save restarts the clock: the silence before it was work.
        # So does the end of a recompile inside a rank, or of a compile it announced in its own words:
        # its process tree's last growth at a compile's pace.
        if not finished and self._entered_latest is not None and not self._started():
            first_stall = self._first_collective_hang(now)
            if first_stall is not None:
                return first_stall
        latest = self._latest_work()
        if self._started():
            assert latest is not None  # started: a rank has progressed
            reference, timeout, what = latest, self.hang_timeout(), "hang timeout"
        else:
            reference = self.start if latest is None else max(self.start, latest)
            timeout, what = self.settings.startup_timeout, "startup"
        idle = now - reference
        if finished or self._exited == len(self.ranks) or idle <= timeout:
            # Nothing is overdue, or no rank is live: only ranks waiting on a peer can change the
            # answer (no pass over every rank: the costliest part of a verdict at 65,536 ranks,
            # tests/benchmarks/bench_scale.py).
            # (filtered, then ordered: at 10 lines/s on 1,024 nodes the index holds ~8,000 ranks that printed an
            # RX wait once, few of them since the newest work; sorting them all took most of a verdict)
            # (and none of them is looked at when no rank printed a wait since the newest work)
            waiting = [] if finished or self._newest_wait < reference else sorted(
                (st for st in self._waiters.values()
                 if st.exit_code is None and st.last_wait is not None and st.last_wait >= reference), key=_BY_ORDER)
            return self._waiting_or_healthy(waiting, idle, timeout)
        live = [st for st in self.ranks.values() if st.exit_code is None]
        waiting = [st for st in live if st.last_wait is not None and st.last_wait >= reference]
        saving = [(st, began) for st in self.ranks.values()
                  if (began := st.saving_since(now, self.settings)) is not None]
        if live and idle > timeout and saving:
            saver, began = saving[0]
            return Verdict(
                Label.HEALTHY,
                Action.WAIT,
                ranks=tuple(st.key for st, _ in saving),
                culprit=saver.key,
                evidence=tuple(st.save_open_line for st, _ in saving if st.save_open_line is not None)[:20],
                reason=f"{_who(saver.key)} has been saving a checkpoint for {now - began:.0f}s (synced: every "
                f"rank waits for it; silence counts as a hang again after {self.settings.save_timeout:.0f}s)",
                advice="A synced checkpoint save is running; waiting is correct. Async saving keeps "
                "training while it writes.",
                step=self.max_step,
            )
        end = self.training_finished()
        if live and idle > timeout and end is not None:
            since = now - end.mono
            if since <= self.settings.save_timeout:
                return Verdict(
                    Label.HEALTHY,
                    Action.WAIT,
                    ranks=tuple(st.key for st in live),
                    culprit=end.key,
                    evidence=(end,),
                    reason=f"training finished {since:.0f}s ago ({_who(end.key)}: {end.text.strip()[:80]!r}); "
                    f"{len(live)} rank(s) still shutting down (final save, teardown; a hang after "
                    f"{self.settings.save_timeout:.0f}s)",
                    advice="The training has finished; the ranks are writing their last files and exiting.",
                    step=self.max_step,
                )
            # the rank that said training finished is not the culprit: the one still running is,
            # when there is one (a real HF run: two of four ranks hung in torch's teardown)
            stuck = live[0].key if len(live) == 1 else None
            return Verdict(
                Label.COLLECTIVE_HANG,
                Action.STOP,
                ranks=tuple(st.key for st in live),
                culprit=stuck,
                culprit_source="process_state" if stuck is not None else None,
                evidence=(end,),
                reason=f"training finished {since:.0f}s ago but {len(live)} rank(s) have not exited "
                f"(> save timeout {self.settings.save_timeout:.0f}s); stopping them, not restarting: "
                "the training is done",
                advice="The job hangs while shutting down (a final save or a collective in teardown). "
                "Check that the final checkpoint/model is complete.",
                step=self.max_step,
                after_training=True,
            )
        shutting = self._end_said_by_some(live, end)
        if live and idle > timeout and shutting is not None and now <= shutting.until:
            return self._teardown_verdict(shutting, now)
        last = self.last_step_reached()
        if live and idle > timeout and last is not None and now - last.mono <= self.settings.save_timeout:
            return Verdict(
                Label.HEALTHY,
                Action.WAIT,
                ranks=tuple(st.key for st in live),
                culprit=last.key,
                evidence=(last,),
                reason=f"{_who(last.key)} reached the last step ({self.last_step}) {now - last.mono:.0f}s ago "
                f"({last.text.strip()[:80]!r}) of a training ({self._trained_by(_bar_began(last))}): the final "
                f"checkpoint save and the run's end are work, not silence (a hang after "
                f"{self.settings.save_timeout:.0f}s)",
                advice="The training reached its last configured step; the ranks are saving and finishing.",
                step=self.last_step,
            )
        if live and idle > timeout:
            laggard = self._collective_laggard(live)
            culprit: RankKey | None
            found_by: str | None
            left = self._left_early()
            # the others had reached the final step of the ranks that said the end: it may also be their
            # teardown that hangs, and the watchdog cannot tell which (said wherever no evidence tells)
            unsure = "" if shutting is None else (
                f"; {_ranks_said(shutting.quiet)} reached the final step ({shutting.step}) of "
                f"{_who(shutting.end.key)}'s end and did not exit within the teardown grace "
                f"({now - shutting.end.mono:.0f}s since it was said): a collective left by a rank that said it "
                "was done (uneven data), or a teardown that hangs; no reading tells which")
            mismatch = self._collective_mismatch()
            stopped = [st for st in live if st.stopped and st.key.rank >= 0]
            if stopped:
                # The strongest evidence there is: a stopped process computes nothing, and its peers wait
                # for it in their next collective (the evidence capture's own reading says it again).
                culprit, found_by = stopped[0].key, "process_state"
                stopped_at = stopped[0].stopped_since
                how = (f"; {_who(culprit)} is stopped (state T)"
                       f"{'' if stopped_at is None else f' for {now - stopped_at:.0f}s'} (SIGSTOP, Ctrl-Z)"
                       f"{f', and {len(stopped) - 1} more rank(s)' if len(stopped) > 1 else ''}")
            elif mismatch is not None:
                culprit, found_by, how = mismatch[0], "flight_recorder", f"; {mismatch[1]}"
            elif laggard is not None:
                culprit, found_by, how = laggard[0], "flight_recorder", f"; {laggard[1]}"
            elif len(left) == 1:
                # It left while its peers wait in a collective it never joined (uneven inputs, a
                # rank-dependent branch around a collective).
                culprit, found_by = left[0].key, "process_state"
                how = (f"; {_who(culprit)} said it was done or exited cleanly while the others wait: it left "
                       f"without a collective they are in (uneven data, a skipped collective){unsure}")
            else:
                culprit, how = self._hang_culprit(live), unsure
                found_by = None if culprit is None else "progress"
            # the culprit's last sign of life first, then what each rank was doing
            order = sorted(live, key=lambda s: (s.key != culprit, s.key.rank))
            evidence = tuple(
                e for st in order for e in (st.last_wait_line, st.progress_line()) if e is not None
            )
            return Verdict(
                Label.COLLECTIVE_HANG,
                Action.RESTART,
                ranks=tuple(st.key for st in live),
                culprit=culprit,
                evidence=evidence[:20],
                reason=f"no rank progressed and none compiled for {idle:.0f}s (> {what} {timeout:.0f}s){how}",
                advice="The job is hung. Restarting from the last complete checkpoint; the stack dumps in "
                "the incident bundle show where each rank was stuck.",
                step=self.max_step,
                culprit_source=found_by,
            )
        return self._waiting_or_healthy(waiting, idle, timeout)

    def _first_collective_hang(self, now: float) -> Verdict | None:
        """A collective stuck before the job's first progress (a rank that never joins the first
        all_reduce, or every rank stuck in it), judged at the hang timeout rather than the startup
        timeout; None while the readings do not show one or it has not lasted that long.

        The timeout is ``--hang-timeout`` where given, else the grace the first steps get before the
        timeout is calibrated (``calibration.default``, 900 s): not the 180 s floor, because a first
        collective is also where NCCL's lazy communicator set-up runs, which takes minutes on jobs of
        thousands of ranks with no compile or CPU to show for it; 900 s still halves the 1,800 s
        startup timeout this replaces, and never kills a job faster than its first steps would be
        judged. Every live rank must have entered a collective of the group (one still loading keeps
        the startup timeout for all: stalled_collective), and the one rank outside it must be seen not
        computing: its process tree's CPU growth restarts the clock (a first step slow on that rank
        alone, rank 0 preparing data while the others wait in a barrier), and where its processes are
        not seen the startup timeout stays.
        """
        found = self._first_stall(now, due_only=True)
        if found is None:
            return None
        stall, reference, timeout, what, live = found
        return Verdict(
            Label.COLLECTIVE_HANG,
            Action.RESTART,
            ranks=tuple(st.key for st in live),
            culprit=stall.culprit,
            culprit_source=None if stall.culprit is None else "flight_recorder",
            reason=f"no rank has progressed yet and {stall.how} for {now - reference:.0f}s (> {what} "
            f"{timeout:.0f}s, before the first step: the startup timeout is for a rank still setting up)",
            advice="The job is hung in its first collectives. Restarting from the last complete checkpoint; the "
            "stack dumps in the incident bundle show where each rank was stuck.",
            step=self.max_step,
        )

    def _first_stall(self, now: float, due_only: bool) -> _FirstStall | None:
        """The collective stuck before the first progress that :meth:`_first_collective_hang` judges: the
        stall, the time its clock runs from, the timeout, its name and the live ranks; None where the rule
        does not apply (and, with ``due_only``, while its clock has not run out: the stall itself, a pass
        over every rank, is then not looked for)."""
        fixed = self.settings.hang_timeout
        timeout = (fixed if fixed is not None else self.settings.calibration.default) + self.delivery_slack
        what = "hang timeout" if fixed is not None else "uncalibrated hang timeout"
        assert self._entered_latest is not None  # the caller asks only once a rank entered a collective
        reference = max(self.start, self._entered_latest, self._latest_work() or self.start)
        if due_only and now - reference <= timeout:
            return None
        live = [st for st in self.ranks.values() if st.exit_code is None and st.key.rank >= 0]
        if any(st.saving_since(now, self.settings) is not None for st in live):
            return None
        stall = stalled_collective({st.key: st.collectives for st in live}, _who)
        if stall is None:
            return None
        if stall.culprit is not None:
            outside = self.ranks[stall.culprit]
            if outside.tree_cpu is None:
                return None  # whether it computes is not known: the startup timeout stays
            reference = max(reference, outside.tree_cpu_grew or reference)
            if due_only and now - reference <= timeout:
                return None
        return _FirstStall(stall, reference, timeout, what, live)

    def first_collective_stall(self, now: float) -> FirstCollectiveStall | None:
        """What the hang clock of a collective stuck before the first progress reads at ``now``, for
        ``status``: the judge then answers at this timeout, not the startup timeout. None where no such
        stall is in view (a rank progressed, or none entered a collective, or the readings show none).

        Looked for again at most every :data:`STALL_LOOK_EVERY` seconds while the readings that decide it
        stand still (a pass over every rank, written into status.json each second)."""
        if self._started() or self._entered_latest is None:
            return None
        key = (self._entered_latest, self._exited, self._latest_work())
        cached = self._stall_look
        if cached is None or cached[0] != key or now - cached[1] >= STALL_LOOK_EVERY:
            found = self._first_stall(now, due_only=False)
            cached = self._stall_look = (key, now, None if found is None else found[:4])
        if cached[2] is None:
            return None
        stall, reference, timeout, what = cached[2]
        return FirstCollectiveStall(stall.how, now - reference, timeout, what)

    def _waiting_or_healthy(self, waiting: list[RankState], idle: float, timeout: float) -> Verdict:
        if waiting:
            return Verdict(
                Label.COMM_TIMEOUT_TRANSIENT,
                Action.WAIT,
                ranks=tuple(st.key for st in waiting),
                evidence=tuple(st.last_wait_line for st in waiting if st.last_wait_line is not None)[:20],
                reason=f"{len(waiting)} rank(s) waiting on peers for {idle:.0f}s (hang after {timeout:.0f}s)",
                advice="Ranks are waiting on a peer; not a hang yet.",
                step=self.max_step,
            )
        return Verdict(Label.HEALTHY, Action.WAIT, step=self.max_step)

    def _collective_mismatch(self) -> tuple[RankKey, str] | None:
        """The one rank that ran a different collective from its peers at the same sequence id.

        At one sequence id of a process group every rank must run the same collective (and, for
        the collectives whose inputs are the same on every rank, on the same shapes): a rank that
        skipped one or called another is out of step with the rest, whatever broke next (gloo's
        "collective mismatch" abort on a neighbour, a peer's closed connection, a hang). Compared
        on each rank's newest recorded entry, live or as it left (its exit-time dump); named only
        when one rank differs from at least two that agree, as torch's own
        ``torch/distributed/flight_recorder`` analysis reports a mismatch.
        """
        # (group, sequence id) -> call -> the ranks that ran it, in the order of self.ranks. One pass over every
        # rank's groups at a failure (65,536 ranks: 131,072 entries), so it is kept to dict look-ups: no
        # RankKey hash (a Python call), no default dict built per entry, an op's shape rule found once
        calls: dict[tuple[str, int], dict[tuple[str, str], list[RankKey]]] = {}
        same_shape: dict[str, bool] = {}
        for st in self.ranks.values():
            key = st.key
            if key.rank < 0:
                continue
            for g, p in st.collectives.items():
                op, seq = p.op, p.seq
                if seq >= 0 and op:
                    shaped = same_shape.get(op)
                    if shaped is None:
                        shaped = same_shape[op] = op.rsplit(":", 1)[-1] in _SAME_SHAPE_OPS
                    call = (op, p.shape if shaped else "")
                    kinds_at = calls.get((g, seq))
                    if kinds_at is None:
                        calls[(g, seq)] = {call: [key]}
                    elif (ran := kinds_at.get(call)) is None:
                        kinds_at[call] = [key]
                    else:
                        ran.append(key)
        for (g, seq), kinds in sorted(calls.items(), key=lambda kv: (len(kv[0][0]), kv[0])):
            if len(kinds) != 2:
                continue
            (odd_call, odd), (call, agree) = sorted(kinds.items(), key=lambda kv: len(kv[1]))
            if len(odd) != 1 or len(agree) < 2:
                continue

            def said(c: tuple[str, str]) -> str:
                return f"{c[0]} of {c[1]}" if c[1] else c[0]

            return odd[0], (f"{_who(odd[0])} ran {said(odd_call)} as collective {seq} of group {g} where the "
                            f"other {len(agree)} ranks with a record of it ran {said(call)}: it is out of step "
                            "with them (flight recorder)")
        return None

    @staticmethod
    def _collective_laggard(live: Sequence[RankState]) -> tuple[RankKey, str] | None:
        """The one rank whose newest collective (flight recorder) lags the others of its group.

        Per process group, a rank's newest collective is the highest sequence id it enqueued
        (or completed): a rank stuck outside the collective never enqueues the one its peers
        wait in. Only a single laggard behind peers that all agree is named.
        """
        groups: dict[str, dict[RankKey, int]] = {}
        for st in live:
            for g, p in st.collectives.items():
                groups.setdefault(g, {})[st.key] = max(p.enqueued, p.completed)
        for g in sorted(groups, key=lambda x: (len(x), x)):
            seqs = groups[g]
            if len(seqs) < 2:
                continue
            top = max(seqs.values())
            behind = [k for k, v in seqs.items() if v < top]
            if len(behind) == 1 and len(seqs) - 1 == sum(1 for v in seqs.values() if v == top):
                k = behind[0]
                n = top - seqs[k]
                return k, (f"{_who(k)} is {n} collective{'s' if n != 1 else ''} behind the other "
                           f"{len(seqs) - 1} rank{'s' if len(seqs) > 2 else ''} of group {g} (flight recorder)")
        return None

    @staticmethod
    def _hang_culprit(live: Sequence[RankState]) -> RankKey | None:
        """The first rank to stop progressing; among equals, the only one not waiting on a peer."""

        def last(st: RankState) -> float:
            return st.last_progress if st.last_progress is not None else -math.inf

        # The node's own stream (rank -1: a new checkpoint, the kernel's word) is not a rank to blame.
        live = [st for st in live if st.key.rank >= 0]
        # Most jobs print progress on rank 0 only (HF Trainer, Lightning): a rank that never printed
        # any did not "stop first", and the one that prints is not the culprit for printing.
        if sum(st.last_progress is not None for st in live) < 2:
            return None
        earliest = min(last(st) for st in live)
        # Ranks of one synchronous job print their step within a moment of each other.
        first = [st for st in live if last(st) - earliest < 1.0]
        if len(first) == 1:
            return first[0].key
        not_waiting = [st for st in first if st.last_wait is None or st.last_wait < last(st)]
        if len(not_waiting) == 1 and len(live) > 1:
            return not_waiting[0].key
        # the only one whose last word was a compile it began (a build announced, nothing since): the
        # others wait for it in a collective, silently where the library prints nothing while it waits
        announced = [st for st in not_waiting if st.announced_compile() is not None]
        if len(announced) == 1 and len(live) > 1:
            return announced[0].key
        return None

    def take_touched(self) -> list[RankState]:
        """The ranks noted in :attr:`touched` since the last call (then forgotten)."""
        touched, self.touched = list(self.touched.values()), {}
        return touched

    def state_namer(self, now: float) -> tuple[Callable[[RankState], str], float, bool]:
        """A rank's status state at ``now`` as :meth:`rank_summaries` names it (an unobserved node
        aside), with the job-wide inputs it reads: ``silent_after`` and whether a compile-cache lock
        may still be held (a change of the latter may change a rank no observation touched)."""
        alive, silent_after, settings = self._lock_holder_alive(now), self.silent_after(), self.settings

        def name(st: RankState) -> str:
            return st.state_name(now, settings, alive, silent_after)

        return name, silent_after, alive

    def rank_summaries(self, now: float) -> list[dict[str, object]]:
        """Per-rank state for status displays (``status.json``)."""
        alive = self._lock_holder_alive(now)
        silent_after = self.silent_after()
        out: list[dict[str, object]] = []
        for key in sorted(self.ranks, key=lambda k: (k.node, k.rank)):
            st = self.ranks[key]
            compiling_for = 0.0
            if st.compile_open is not None:
                compiling_for = now - st.compile_open
            out.append(
                {
                    "node": key.node,
                    "rank": key.rank,
                    "state": "unobserved"
                    if key.node in self.unobserved
                    else st.state_name(now, self.settings, alive, silent_after),
                    "last_step": st.step,
                    "last_line_age": round(now - st.last_line, 3),
                    "compile_seconds": round(st.compile_seconds + compiling_for, 3),
                }
            )
        return out
