"""Failure forms read for the misses of round issue23-heldout-25 (half A): a native crash report whose header is
not one of glog's, a batch scheduler ending a job at a limit it was given, a job manager's fatal exception record,
a shell's report of the signal a job died of, a runtime's own fatal assertion, and the Kubernetes API refusing an
object as invalid.

Pure: no I/O. :func:`round25a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 24, and :func:`round25a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* A native crash report is a header and a run of frames (glog's and absl's ``    @     0x7f12...  (unknown)``,
  glog src/signalhandler.cc, absl debugging/failure_signal_handler.cc). The frames are not read alone: the same
  handlers print them for a SIGTERM sent from outside (pytorch/xla#3441's hang, ended by a timeout's kill), so
  only the header says whether the process faulted. The header of an uncaught exception's report,
  ``Unhandled exception:`` alone on its line, is what the TPU runtime's terminate handler prints before its
  frames (jax#12550, after tcmalloc returned nil for 377 TB) and what the Dart VM prints before the exception and
  its ``#0`` frames (flutter_tools' ``Unhandled exception:`` / ``Exception: idevice_id returned an error``): the
  process did not catch what was thrown and is ending. glog's signal header puts the fault
  address between the signal and ``received by PID`` (``*** SIGSEGV (@0x0) received by PID ...``); the builds of
  it inside libtpu add a link (``*** SIGFPE (@0x7f4c...), see go/stacktraces#s15 received by PID ...``,
  jax#19603) or the kind of fault (``*** SIGSEGV STACK OVERFLOW (see go/cppstackoverflow) received by PID``): any
  words between the signal's name and ``received`` are the same report. SIGTERM, SIGINT, SIGHUP and SIGQUIT are
  left out: the handler reports them too, but they are sent from outside, not a fault of the process.
* A batch scheduler that ends a job at one of its limits says which limit: Torque's and PBS Pro's pbs_mom append
  ``=>> PBS: job killed: walltime 259217 exceeded limit 259200`` (also ``cput``, ``mem``, ``vmem``, ``pmem``: ``mem
  2097152kb exceeded limit 1048576kb``, ``mem job total 4323312 kb exceeded limit 3145728 kb``) to the job's
  stderr; Moab cancels it with ``MOAB_INFO:  job exceeded wallclock limit`` (MLimitCancelJob); LSF's job report
  gives the exit reason ``TERM_RUNLIMIT: job killed after reaching LSF run time limit.`` (``TERM_MEMLIMIT: ... LSF
  memory usage limit.``). A time limit is the submission's, as Slurm's ``DUE TO TIME LIMIT`` is
  (slurm.step_time_limit): a resubmission with the same limit ends the same way, configuration. A memory limit
  is the job's memory running out, as the cgroup's OOM kill under Slurm is.
* Flux's ``flux job attach`` (and ``flux run``) prints each exception of the job's eventlog as ``%.3fs:
  job.exception type=%s severity=%d %s`` (src/cmd/job/attach.c); ``flux job eventlog`` prints the event as
  ``exception type="..." severity=0 note="..."``. Severity 0 is fatal (RFC 21: the job goes to CLEANUP). Its type
  says the cause where it can: ``alloc`` is a request the scheduler cannot satisfy (``unsatisfiable request: need
  1024 slot(s) ... only 8``) and ``timeout`` the job's time limit, both configuration; ``exec`` is a task that
  failed (``MPI_Abort: N/A``, ``start failed: no_sleep: No such file or directory``), whose words say more. A
  ``cancel`` is somebody's decision, not a failure of the job, and is not read.
* The shell reports a job a signal ended. zsh prints the job's status with the signal's lower-case description
  (Src/jobs.c printjob, sigmsg): ``[1]    2964311 abort (core dumped)  python test.py``, ``[1]    22797
  terminated  pvacvector run``; bash prints ``Terminated`` (strsignal(SIGTERM)) for a job ended by SIGTERM, as it
  prints ``Killed`` (host.killed_sigkill), bare, after the script's line and pid, or glued to a progress bar's
  last redraw (a spinner's ``\\`` or a bracket before it: ``eta 28:34:54 \\Terminated``). A fault (abort,
  segmentation fault, bus error, illegal instruction, floating point exception) is the process's own; killed and
  terminated came from outside (an operator, a scheduler, a limit): all of them end the job.
* ROCclr, the runtime under HIP, asserts with ``guarantee(cond, msg)`` (rocclr/utils/debug.hpp), which prints
  ``<file>:<line>: guarantee(<condition>)`` and aborts: ``hip_code_object.cpp:120: guarantee(false &&
  "hipErrorNoBinaryForGpu: Coudn't find binary for current devices!")``. hipErrorNoBinaryForGpu (hip_runtime_api.h:
  "Unable to find code object for all current devices") is a binary built without code for this GPU's
  architecture: the build, which a restart runs again (CUDA's "no kernel image is available" in HIP's words).
* TensorFlow's loader of the TPU C API (tensorflow/core/tpu/tpu_library_init_fns.inc) looks up each function it
  needs in the libtpu it opened and, for one that is not there, logs FATAL ``<Struct>_<Function> not available in
  this library.`` (``TpuEmbeddingEngine_CollateMemory``, pytorch/xla#4103 with torch_xla 1.12 on another libtpu;
  ``TpuEmbeddingEngine_ExecutePartitioner``, a script that imported TensorFlow's libtpu before JAX's): the
  framework and the runtime library are of different releases, which a restart loads again. Only a C API name
  (``Module_Function``) is read: the words alone are common prose ("the document is not available in this
  library").
* The Kubernetes API refuses an object that fails validation with ``<Kind> "<name>" is invalid: <field path>:
  <why>`` (apimachinery errors.NewInvalid, status reason Invalid, code 422), which a controller logs when it
  cannot create what a job needs (the JobSet controller's ``creating jobs ... Job.batch \\"...\\" is invalid:
  spec.template.spec.containers[0].resources.limits...``) and kubectl prints as ``The Deployment "api" is
  invalid: spec.template.spec.containers[0].image: Required value``: a spec the API will refuse on every retry.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: The literals (digit-free) that the lines :func:`round25a_form` reads hold, besides the needles failureforms
#: already searches ("SIGFPE " and the other signal names hold the signal headers; each literal more is a cost
#: of the classifier's batch search on every line)
NEEDLES: tuple[str, ...] = ("*** SIG", "Unhandled exception", "job killed", "MOAB_INFO", "job.exception",
                            "exception type=", "abort", "segmentation fault", "bus error", "illegal hardware",
                            "floating point exception", " killed ", "terminated", "Terminated", "guarantee(",
                            "hipErrorNoBinaryForGpu", "is invalid: ", "not available in this library")

#: the header of an uncaught exception's report, alone on its line
_UNHANDLED_HEADER = re.compile(r"^\W*Unhandled exception:\s*$")
#: glog's (and libtpu's) failure signal header, whatever it says between the signal's name and "received by PID",
#: or framed by its stars to the end of the line ("*** SIG... ; stack trace: ***", absl's "*** SIG... on cpu 3 ***")
_SIGNAL_HEADER = re.compile(r"\*\*\* SIG(?!TERM\b|INT\b|HUP\b|QUIT\b)[A-Z]+\b(?:[^*\n]{0,160}? received by PID \d+|"
                            r"[^*\n]{0,200}\*\*\*\s*$)")

#: Torque's / PBS Pro's job killed at a limit: the limit's resource, what the job used, the limit
_PBS_LIMIT = re.compile(r"\bPBS: job killed: (walltime|cput|mem|vmem|pmem|pvmem)\b.{0,80}?\bexceeded limit\b")
#: Moab cancelling a job at a limit
_MOAB_LIMIT = re.compile(r"\bMOAB_INFO:\s+job exceeded (wallclock|memory) limit\b")
#: LSF's exit reason of a job killed at a limit
_LSF_LIMIT = re.compile(r"\bTERM_[A-Z]+: job killed after reaching LSF (run time|CPU (?:time|usage)|memory usage|"
                        r"swap usage) limit\b")
#: the resources whose limit is memory (the others are time)
_MEMORY_LIMITS = frozenset({"mem", "vmem", "pmem", "pvmem", "memory", "memory usage", "swap usage"})

#: Flux's fatal exception of a job (severity 0), as flux job attach or flux job eventlog prints it
_FLUX_EXCEPTION = re.compile(r"\b(?:job\.)?exception (?:\S+ )?type=\"?([\w-]+)\"? severity=0\b")
#: the exception types that state a cause: a request the scheduler cannot satisfy, the job's time limit
_FLUX_CAUSES = {"alloc": (Label.CONFIG_ERROR, "a request Flux's scheduler cannot satisfy"),
                "timeout": (Label.CONFIG_ERROR, "a job Flux ended at its time limit")}

#: zsh's status of a job a signal ended: "[job]", maybe "+" or "-", the pid, the signal's description, the command
_ZSH_SIGNALLED = re.compile(r"^\[\d+\]\s+(?:[+-]\s+)?\d+ (?:abort|segmentation fault|bus error|illegal hardware "
                            r"instruction|floating point exception|killed|terminated)(?: \(core dumped\))?\s+\S")
#: bash's "Terminated": bare, after the script's line and the job's pid, or glued to a progress bar's redraw
_BASH_TERMINATED = re.compile(r"^[\s*>`]*Terminated[\s*`]*$|\b\d+ Terminated\s+\S|[\]|\\/]Terminated\s*$")

#: ROCclr's failed guarantee: "<file>:<line>: guarantee(<condition>)"
_ROCCLR_GUARANTEE = re.compile(r"\S\.(?:cpp|hpp|cc|h):\d+: guarantee\(")
#: HIP's status for a binary with no code object for this GPU
_HIP_NO_BINARY = re.compile(r"\bhipErrorNoBinaryForGpu\b")

#: a C API function (Module_Function) a loader did not find in the library it opened
_MISSING_C_API = re.compile(r"\b[A-Z][A-Za-z0-9]*_[A-Za-z0-9_]+ not available in this library\b")

#: the Kubernetes API's validation refusal: a kind, a quoted name (JSON-escaped in a structured record), "is
#: invalid:" and a field path of the object
_K8S_INVALID = re.compile(r"\b[A-Z][A-Za-z]*(?:\.[a-z][\w.-]*)? \\?\"[^\"\\\s]+\\?\" is invalid: "
                          r"(?:spec|metadata|data|status)\b")


def _limit_label(resource: str) -> Label:
    """A scheduler's limit is the job's memory (oom) or its time (the submission's: configuration)."""
    return Label.OOM if resource.lower() in _MEMORY_LIMITS else Label.CONFIG_ERROR


def round25a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Unhandled exception" in text and _UNHANDLED_HEADER.search(text):
        return Form(FormKind.CRASH, "the header of an uncaught exception's report")
    if "*** SIG" in text and _SIGNAL_HEADER.search(text):
        return Form(FormKind.CRASH, "a fatal signal report (glog's handler)")
    return _scheduler_form(text) or _shell_form(text) or _runtime_form(text)


def _scheduler_form(text: str) -> Form | None:
    """A batch scheduler's job killed at a limit, Flux's fatal exception."""
    if "job killed" in text:
        pbs = _PBS_LIMIT.search(text)
        if pbs is not None:
            return Form(FormKind.CRASH, f"a job PBS killed at its {pbs.group(1)} limit", _limit_label(pbs.group(1)))
        lsf = _LSF_LIMIT.search(text)
        if lsf is not None:
            return Form(FormKind.CRASH, f"a job LSF killed at its {lsf.group(1)} limit", _limit_label(lsf.group(1)))
    if "MOAB_INFO" in text:
        moab = _MOAB_LIMIT.search(text)
        if moab is not None:
            return Form(FormKind.CRASH, f"a job Moab cancelled at its {moab.group(1)} limit",
                        _limit_label(moab.group(1)))
    if "exception" in text:
        flux = _FLUX_EXCEPTION.search(text)
        if flux is not None and flux.group(1) != "cancel":
            cause = _FLUX_CAUSES.get(flux.group(1))
            return Form(FormKind.CRASH, cause[1] if cause else f"a fatal exception of a Flux job ({flux.group(1)})",
                        cause[0] if cause else None)
    return None


def _shell_form(text: str) -> Form | None:
    """A shell's report of a job a signal ended."""
    if _ZSH_SIGNALLED.search(text):
        return Form(FormKind.CRASH, "a job a signal ended (zsh's job status)")
    if "Terminated" in text and _BASH_TERMINATED.search(text):
        return Form(FormKind.CRASH, "a job SIGTERM ended (the shell's Terminated)")
    return None


def _runtime_form(text: str) -> Form | None:
    """A runtime's fatal assertion, HIP's binary without code for the GPU, a library without a function the framework
    needs, the Kubernetes API's refusal."""
    no_binary = "hipErrorNoBinaryForGpu" in text and _HIP_NO_BINARY.search(text) is not None
    if "guarantee(" in text and _ROCCLR_GUARANTEE.search(text):
        return Form(FormKind.CRASH, "a failed guarantee (ROCclr's fatal assertion)",
                    Label.CONFIG_ERROR if no_binary else None)
    if no_binary:
        return Form(FormKind.ERROR, "a HIP binary without code for this GPU", Label.CONFIG_ERROR)
    if "not available in this library" in text and _MISSING_C_API.search(text):
        return Form(FormKind.CRASH, "a runtime library without a function the framework needs (another release)",
                    Label.CONFIG_ERROR)
    if "is invalid: " in text and _K8S_INVALID.search(text):
        return Form(FormKind.ERROR, "the Kubernetes API refusing an object as invalid", Label.CONFIG_ERROR)
    return None


def ends_its_process(text: str) -> str | None:
    """The form's name when ``text`` is one of this round's forms after which the process that printed it does not
    go on (:func:`neuron_watch.diagnosis.lastword.last_word`): the header of its own uncaught exception's report
    (the terminate handler aborts, the Dart VM exits) and glog's signal header (the handler re-raises the signal).
    A scheduler's, Flux's or a shell's report is of another process's end, which the reporter outlives."""
    if "Unhandled exception" in text and _UNHANDLED_HEADER.search(text):
        return "the header of an uncaught exception's report"
    if "*** SIG" in text and _SIGNAL_HEADER.search(text):
        return "a fatal signal report (glog's handler)"
    return None


def round25a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    form = round25a_form(text)
    return None if form is None or form.label is None else (form.label, form.name)
