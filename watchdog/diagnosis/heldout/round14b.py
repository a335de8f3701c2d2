"""Failure forms read for the misses of round issue23-heldout-14 (half B): the reports in which c10d's watchdog
and NCCL's device-side check say a collective never completed, an exception of the graph compiler's own
exception module, a program's refusal for want of memory, and CUDA's peer-access limits.

Pure: no I/O. :func:`round14b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 13, and :func:`round14b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* c10d's watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, ``watchdogHandler``) logs, when a work's
  timeout expired (``timedOut``), ``logPrefix() "Timeout at NCCL work: " work.seq_ ", last enqueued NCCL work: "
  lastEnqueuedSeq ", last completed NCCL work: " lastCompletedSeq "."`` before it takes the process down. Newer
  versions print it without the older "Watchdog caught collective operation timeout" sentence above it, and an
  excerpt cut at its start keeps only it: the collective the rank waited in never completed.
* NCCL's device-side error check (src/init.cc, ``ncclCommGetAsyncError``'s reading of ``ncclDevSuspectedMismatch``)
  warns "Your program may be hanging, this may be caused by a collective mismatch around rank %d. ..." when the
  kernels of a collective wait for peers that called another one: ranks that did not call the same collective.
  (Its ``ncclDevAssertedMismatch`` sibling, "Mismatched collective detected", is the table's.)
* An exception of TorchDynamo's or Inductor's exception module (torch/_dynamo/exc.py, torch/_inductor/exc.py:
  ``FailOnRecompileLimitHit``, ``Unsupported``, ``BackendCompilerFailed``, ``InductorError`` ...) printed as the
  traceback's last line, ``torch._dynamo.exc.<Class>: <message>``: only the compiler raises its own exceptions,
  and one that reaches the top ends the job (with ``fullgraph=True`` a recompile limit or a graph break is an
  error, not a fallback to eager).
* A program's refusal for want of memory, in its own words: SGLang's model runner (python/sglang/srt/
  model_executor/model_runner.py: ``raise RuntimeError("Not enough memory. Please try to increase
  --mem-fraction-static.")`` when the KV cache the rest of the device leaves is empty) and the like ("not
  enough GPU memory", "insufficient memory"). Shared memory (/dev/shm, a kernel's shared memory) is a
  configuration and the resource readers' (forms_errors.RESOURCE), not this.
* vLLM's compile of the model (vllm/compilation/: backends.py's "Dynamo bytecode transform time", "Cache the graph
  ... for later use", "Compiling a graph for ... takes", the Inductor passes of vllm_inductor_pass.py; monitor.py's
  "torch.compile takes %.2f s in total" when it ends), read from vLLM's record layout (vllm/logger.py ``_FORMAT``:
  "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s", the date "%m-%d %H:%M:%S", the file given
  relative to the package since vLLM 0.10, "compilation/backends.py", its base name before): a record of the
  compilation package is a compile at work, monitor.py's total its end; a log that ends between them ends inside
  the compile.
* CUDA's peer-access limits (the runtime's cudaErrorTooManyPeers, "peer mapping resources exhausted", the driver's
  CUDA_ERROR_TOO_MANY_PEERS; cudaErrorPeerAccessUnsupported "peer access is not supported between these two
  devices"): a device can map only so many peers, so a job that enables peer access between more devices than
  that (ten processes on one machine, each mapping all the others) fails the same way on every restart.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last:
#: a capital, a bracket, a 'y', 'h' or 'u') that the lines these forms read hold, besides the failure forms'
#: needles they hold already; the failure forms' needles include them.
NEEDLES: tuple[str, ...] = (
    # the watchdog's report holds "Timeout", a needle already; the causes read of a line already an error need none
    "Your program may be hanging", "_dynamo.exc.", "_inductor.exc.",
    # vLLM's records from its compilation package (the file in the record's header)
    "[compilation/", "[backends.py:", "[monitor.py:",
)

#: c10d's watchdog's report of the work whose timeout expired (the three sequence numbers of the process group)
_TIMEOUT_AT_WORK = re.compile(
    r"\bTimeout at NCCL work: \d+, last enqueued NCCL work: -?\d+, last completed NCCL work: -?\d+")

#: NCCL's warning of a collective whose peers never came (ncclDevSuspectedMismatch)
_SUSPECTED_MISMATCH = re.compile(r"\bYour program may be hanging, this may be caused by a collective mismatch\b")

#: an exception of the graph compiler's own exception module, as the traceback's last line prints it (after a
#: rank's prefix or a logger's record): the class, then its message or nothing
_COMPILER_EXCEPTION = re.compile(r"(?:^|[\s:\]])torch\._(?:dynamo|inductor)\.exc\.([A-Z]\w*)(?::(?: |$)|$)")

#: a refusal for want of memory (device or host), not of shared memory: the words of the sentence that says it;
#: not the same words asked as a question, a program's guess in front of the error it caught (ColabFold's
#: "Could not predict X. Not Enough GPU memory? <error>": the error after it states the cause, round 39 part G)
_NOT_ENOUGH_MEMORY = re.compile(r"(?i:\b(?:not enough|insufficient) (?:(?:GPU|CUDA|device|host|system|free|"
                                r"available|KV[ -]cache) )?memory\b)(?!\?)")
_SHARED_MEMORY = re.compile(r"(?i:\bshared memory\b|/dev/shm\b|\bshm\b)")

#: CUDA's peer-access limits (runtime and driver words)
_PEER_LIMIT = re.compile(r"\bpeer mapping resources exhausted\b|\bCUDA_ERROR_TOO_MANY_PEERS\b|"
                         r"\bpeer access is not supported between these two devices\b")


#: a vLLM record below an error's level from a module of its compilation package: the relative path names the
#: package; before vLLM 0.10 the base name alone, read for the two modules no other package of vLLM has that log
#: the compile's course (backends.py, monitor.py)
_VLLM_COMPILE_RECORD = re.compile(
    r"\b(?:DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[(?:compilation/(\w+)|(backends|monitor))\.py:\d+\] ")
#: monitor.py's total of the compile's time (its end): "torch.compile takes 16.61 s in total"
_VLLM_COMPILE_TOTAL = re.compile(r"\btakes [\d.]+ s in total\b")


def round14b_form(text: str) -> Form | None:
    """The failure form a watchdog's or NCCL's hang report, or a compiler's own exception, is in ``text``."""
    if _TIMEOUT_AT_WORK.search(text):
        return Form(FormKind.ERROR, "c10d's watchdog reporting the NCCL work that timed out", Label.COLLECTIVE_HANG)
    if _SUSPECTED_MISMATCH.search(text):
        return Form(FormKind.ERROR, "NCCL's check of a collective whose peers never came", Label.COLLECTIVE_HANG)
    if _COMPILER_EXCEPTION.search(text) and head_level(text) not in QUIET_LEVELS:
        # the process is dying of it (a record at a warning's or info's level quotes one: a graph break logged)
        return Form(FormKind.CRASH, "an exception of the graph compiler's own module", Label.COMPILE_ERROR)
    record = _VLLM_COMPILE_RECORD.search(text)
    if record is not None:
        if (record.group(1) or record.group(2)) == "monitor":
            return Form(FormKind.COMPILE_DONE, "vLLM's total of its compile") if _VLLM_COMPILE_TOTAL.search(
                text, record.end()) else None
        return Form(FormKind.COMPILE_RUNNING, "vLLM compiling the model (its compilation package's record)")
    return None


def round14b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round14b_form(text))) is not None:
        return stated
    if _PEER_LIMIT.search(text):
        return Label.CONFIG_ERROR, "more peers mapped than CUDA's peer-access limit allows"
    if _NOT_ENOUGH_MEMORY.search(text) and not _SHARED_MEMORY.search(text):
        return Label.OOM, "a program refusing to go on for want of memory"
    return None


def refined_family(label: str, text: str, stated: tuple[Label, str] | None) -> str:
    """The label of an exception whose class says ``label`` (errorclass's families), refined by the cause its
    message states (``stated``, :func:`neuron_watch.diagnosis.failureforms.cause_of`'s reading of it): a
    connection error (c10d's ``DistNetworkError``, Python's ``ConnectionError``) raised because this process's
    own server socket could not bind its port (a port in use, or one it may not use: errno 98, 99, 13) is the
    launch's configuration, not a peer's connection."""
    if label == Label.COMM_ERROR.value and stated is not None and stated[0] is Label.CONFIG_ERROR:
        return Label.CONFIG_ERROR.value
    return label
