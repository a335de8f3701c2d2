"""The forms in which programs report failure, read without knowing their words.

Pure: no I/O. The signature table (``signatures.toml``) recognises *phrases*; this module
recognises the *shapes* any program's failure report takes, so that a log in a form no rule has
seen still does not read as healthy, and its cause comes from the form where the form states one.
:class:`~neuron_watch.diagnosis.classify.KnowledgeBase` asks it about a line no rule of the table matched
(the table keeps precedence); :func:`neuron_watch.diagnosis.errorclass.read_error` asks :func:`cause_of` for
the cause of an error line no rule explains.

A line reads as one :class:`Form` of one :class:`FormKind`, each mapped to one signature of
:data:`FORM_SIGNATURES` (what the judge does with it):

* ``error`` (a severity of error in a logging convention, an exception line, a missing resource):
  an error line no rule explains -- a warning while the rank goes on, the cause of the failure
  when it is the rank's last word (:attr:`~neuron_watch.diagnosis.classify.Effect.UNEXPLAINED`);
* ``crash`` (a fatal severity, a panic, a fatal signal, a failed check and its stack trace): the
  process is dying -- a failure of unknown cause that a more specific rule of the same rank later
  replaces, and that the rank's own progress after it withdraws (``generic``);
* ``metric`` (a loss, gradient norm or loss scale that is NaN/Inf, or a loss scale collapsed to
  nothing): a numerical failure, withdrawn likewise by the rank's progress after it;
* ``compile_running`` / ``compile_done`` (a graph compile, a JIT build of an extension, kernel
  autotuning, still going / ended): compile evidence, so a log that ends inside one is
  ``compiling``.

Each family of form has its patterns and its reader in a module of its own, and :func:`read_line`
asks them in one order: :mod:`~neuron_watch.diagnosis.forms_errors` (crashes, errors their words
state, exceptions), :mod:`~neuron_watch.diagnosis.forms_metric` (metric values),
:mod:`~neuron_watch.diagnosis.forms_phase` (open phases, and alarms printed at an error's severity),
:mod:`~neuron_watch.diagnosis.forms_severity` (a logging convention's level),
:mod:`~neuron_watch.diagnosis.forms_conventions` (other libraries' record heads, glibc's aborts),
:mod:`~neuron_watch.diagnosis.forms_exits` (a process's end as whoever waited for it reports it),
:mod:`~neuron_watch.diagnosis.forms_schedulers` (a job's state in its scheduler's words), and between
them the forms each held-out round of real logs taught (:mod:`~neuron_watch.diagnosis.heldout`). This module
keeps what the judge reads a form by (its signatures, :data:`NEEDLES`) and the causes a form states
(:func:`cause_of`).

Every line that holds a form holds one of :data:`NEEDLES` (a digit-free literal), so the
classifier's batch search gates the reader: a line without a needle costs nothing here.
"""

from __future__ import annotations

import re
from dataclasses import replace

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.diagnosis.forms_conventions import NEEDLES as CONVENTION_NEEDLES
from neuron_watch.diagnosis.forms_conventions import convention_form
from neuron_watch.diagnosis.forms_errors import ALLOCATOR_OOM, crash_form, exception_form, stated_error_form
from neuron_watch.diagnosis.forms_exits import NEEDLES as EXIT_NEEDLES
from neuron_watch.diagnosis.forms_exits import exit_form
from neuron_watch.diagnosis.forms_metric import metric_form
from neuron_watch.diagnosis.forms_phase import FOLDING_ALARM, SLOW_ALARM, SLOW_ALARM_RETURNED, alarm_form, phase_form
from neuron_watch.diagnosis.forms_runtimes import NEEDLES as RUNTIME_NEEDLES
from neuron_watch.diagnosis.forms_runtimes import NRT_CAUSES, runtime_form
from neuron_watch.diagnosis.forms_schedulers import NEEDLES as SCHEDULER_NEEDLES
from neuron_watch.diagnosis.forms_schedulers import scheduler_form
from neuron_watch.diagnosis.forms_severity import HW_ERR, severity_form
from neuron_watch.diagnosis.heldout import NEEDLES as HELDOUT_NEEDLES
from neuron_watch.diagnosis.heldout import heldout_cause, heldout_exception_repr, heldout_form, heldout_quiet
from neuron_watch.diagnosis.heldout.round27a import node_state_cause, storage_full_cause
from neuron_watch.events import Label

#: the reader, what it answers (Form, FormKind) and the names the judge reads a form by: one module to import
__all__ = ["FOLDING_ALARM", "FORM_RULES", "FORM_SIGNATURES", "NEEDLES", "SIGNATURE_IDS", "SLOW_ALARM",
           "SLOW_ALARM_RETURNED",
           "Form", "FormKind", "cause_of", "read_line", "read_quiet"]

#: Bumped when what a line reads as changes (part of the knowledge base's fingerprint: two
#: processes classify alike only with the same reader).
FORM_RULES = 69

#: The signature id each kind is reported under (the judge's effects: see ``FORM_SIGNATURES``).
SIGNATURE_IDS = {
    FormKind.ERROR: "form.error",
    FormKind.CRASH: "form.crash",
    FormKind.METRIC: "form.metric_not_finite",
    FormKind.COMPILE_RUNNING: "form.compile_running",
    FormKind.COMPILE_DONE: "form.compile_done",
    FormKind.COMM_WAIT: "form.comm_wait",
}

#: (id, category, severity, action, effect, generic, advice) of the form signatures, as the
#: classifier builds them (they follow the table: every rule of the table has precedence).
FORM_SIGNATURES: tuple[tuple[str, str, str, str, str, bool, str], ...] = (
    ("form.error", "other_crash", "warning", "restart", "unexplained", False,
     "An error line in a known logging form (a severity, an exception, a missing resource) that no signature "
     "recognises. While the rank goes on it is a warning; as its last word, the job failed: read the line and "
     "the rank's log tail."),
    ("form.crash", "other_crash", "error", "restart", "fatal", True,
     "The process reported a fatal error in a known form (a fatal log severity, a panic, a fatal signal, a failed "
     "check, a native stack trace) that no signature recognises. Read the evidence and the rank's log tail; restart "
     "from the last complete checkpoint, and report it if it repeats."),
    ("form.metric_not_finite", "numerical_error", "error", "stop", "fatal", True,
     "A loss, gradient norm or loss scale is NaN/Inf (or the loss scale collapsed to nothing). Restarting from the "
     "same checkpoint with the same data repeats it: lower the learning rate, use bf16, check the data at that step, "
     "or resume from an earlier checkpoint."),
    ("form.compile_running", "compiling", "info", "wait", "compile_beat", False,
     "A compile or JIT build is running (a C++/CUDA extension build, kernel autotuning, a graph compile): waiting "
     "is correct."),
    ("form.compile_done", "compiling", "info", "wait", "compile_end", False,
     "A compile or JIT build finished."),
    ("form.comm_wait", "comm_timeout_transient", "warning", "wait", "comm_wait", False,
     "A rank waits on its peers (a connection it retries, a collective library's stall report): waiting is "
     "correct while the job goes on; if it never does, the hang is judged by its silence."),
)

#: Literals (no digits: the classifier searches line templates without their digits) of which
#: every line holding a form holds one; the unit tests hold each form's examples to it.
NEEDLES: tuple[str, ...] = (
    # severities (glog's FATAL always prints "*** Check failure stack trace: ***"); libfabric's levels
    "\nE", "\nF ", "[E", ": E", ": F",
    "ERROR", "CRITICAL", "FATAL", "Error", "Critical", "Fatal", "level=", "severity=",
    "\"level\"", "'level'", "\"severity\"", "levelname", "<warn>", "<error>", "BUG:", "Oops:", "[Hardware Error]",
    "Kernel panic", "blocked for more than",
    # crashes ("error:" holds Go's "fatal error: " and Slurm's "srun: error: "; a Go panic that says no
    # error is read from its goroutine trace)
    "Check failed", "Check failure", "[running]:", "error:", "panicked at", "Exception in thread",
    "terminate called after throwing", "SIGSEGV", "Abort(",
    "SIGABRT", "SIGBUS ", "SIGILL ", "SIGFPE ", "]: segfault at", "Segmentation fault", "Bus error",
    "Illegal instruction", "Floating point exception", "Aborted", "WTERMSIG",
    # exceptions, and what an uncaught C++ exception says
    "Exception", "Timeout", "Failure", "Failed", "Caused by:", "MODEL_LOG", "what():",
    # Rust's allocation failure, a Ray actor's death
    "memory allocation of", "The actor died",
    # resources
    "Address already in use", "EADDRINUSE", "No such device", "EBUSY", "Too many open files", "No space left",
    "ENOSPC", "Permission denied", "cannot open shared object", "CUDA-capable device", "No CUDA GPUs",
    "no NVIDIA driver", "/dev/shm", "CUDA initialization failure",
    # metrics: a key ("loss" in every loss's name) or a value alone on a table row ("nan")
    "loss", "Loss", "perplexity", "nan",
    # phases
    "extensions root", "ninja build file", "Building extension module", "Loading extension module", "Time to load",
    "AUTOTUNE", "Layout('", "num_warps=",
    "with global shapes", "Finished XLA compilation", "Building engine", "TRT engine", "TensorRT engine",
    "Engine generation completed", "Build engine successfully", "Built: ",
    "slow compile", "slow_operation_alarm", "Constant folding an",
    # a stall report, a retried connection (the strerror words; c10d prints them with the errno)
    "tensors were submitted", "Connection refused", "Connection timed out",
    # configuration: Slurm's, Open MPI's, ssh's and the CUDA toolchain's refusals
    "Invalid generic resource", "Invalid partition name", "Invalid account or", "Invalid qos",
    "not enough slots available", "MCA parameter \"plm_rsh_agent\"", "No route to host", "Network is unreachable",
    "returned non-zero exit status", "ssh exited with exit code", "Unsupported gpu architecture",
    "backend failed to initialize", "ORTE daemon has unexpectedly", "for option 'gpu-name'", "CUDA_ERROR_", "execve():",
    "Loaded runtime CuDNN", "no kernel image is available", "your machine only has",
    # TensorFlow's CheckNumerics
    "Tensor had",
    # TensorFlow's op failure for want of memory (a WARNING record) and its hint; an op failed with another status
    "Resource exhausted", "RESOURCE_EXHAUSTED", "allocated tensors when OOM", "Unavailable: ",
    "Not found: ", "Unimplemented: ", "Unauthenticated: ",
    # a status in a list of root errors; an exception of a module of exceptions
    "UNAVAILABLE", "DEADLINE_EXCEEDED", "Deadline exceeded", "errors.", "exceptions.",
    # the JVM's fatal error report, Open MPI's rank ended by a signal
    "A fatal error has been detected", "exited on signal",
    # the Neuron compilers' pass and job logs
    "finished after", "[pipeline.", "[job.", "AM DEBUG", "PM DEBUG", "AM INFO", "PM INFO", "AM USER", "PM USER",
    # a Ray worker's death, XLA's out-of-memory report, the NVIDIA driver's GPU-gone statuses
    "Worker exit type", "BufferAssignment OOM", "XLA Label: ", "NV_ERR_",
    # no PTX compiler, or PTX newer than the driver
    "PTX JIT compiler library", "PTX compilation provider", "unsupported toolchain",
    # TensorRT's INTERNAL_ERROR letter, nccl-tests' failed checks, slurmd's refused credential, NCCL's shm
    # segment (a model the server could not load holds "UNAVAILABLE", an exception carrying a status "Error"
    # or "Exception", all above)
    "[F] ", "Test NCCL failure", "Test CUDA failure", "Job credential", "Invalid job credential",
    "shared memory segment",
    # absl/gRPC status codes as a record's status (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED above)
    "CANCELLED: ", "UNKNOWN: ", "INVALID_ARGUMENT: ", "NOT_FOUND: ", "ALREADY_EXISTS: ", "PERMISSION_DENIED: ",
    "FAILED_PRECONDITION: ", "ABORTED: ", "UNIMPLEMENTED: ", "INTERNAL: ", "DATA_LOSS: ", "UNAUTHENTICATED: ",
    # a version mismatch, a command not found, a tool's padded severity, an allocator's failure, a job's status
    "not compatible with the current", "module compiled against", "command not found", ": not found",
    "fatal   : ", "error   : ", "to allocate ", "LOW MEMORY", "status: FAILED", "status FAILED",
    "ORTE was unable to reliably start", "Falling back to cpu",
    # TensorRT's builder choosing tactics
    "[TRT] [V] ",
    # TensorRT's builder starting its timing pass (the logger's layouts: "[I] [TRT] ...", "[TRT] [I] ...")
    "[TRT] Local timing cache", "[I] Local timing cache", "Global timing cache",
    # a build that stopped on an error (ninja, make)
    "build stopped: ", "*** [",
    # a launcher's or a provider's notice that the job did not start or is ending
    "executable", "launch the job", "start the job", "will now abort", "job has been aborted", "job was aborted",
    "job will now be aborted",
    # a scheduler's or cloud's refusal: the kubelet's eviction, the Kubernetes API's missing kinds, a cloud
    # API's quota (botocore's "when calling the ... operation", GCE's), a cluster not provisioned; a device
    # without a capability the program needs, a driver refusing a binary, a hardware limit. Each is chosen
    # without the batch search's common markers (keyfinder: "v", "w"), which would cost a try at every one
    # of them, so that it is found by a plain search of the batch
    "on resource: ", "could not find the", "no matches for ", "a resource type", "hen calling the ",
    "QUOTA_EXCEEDED", "Quota '", "rovision", "compute capability", "a supported ", "supported on this ",
    "supported on your ", "only support", "kernel image is ", "is insufficient for ", "unsupported display ",
    "compatibility ", "are limit: ",
    # CUDA's words for a binary without code for this device (forms_errors._DRIVER_REFUSED)
    "named symbol not found", "invalid device function",
    # MPICH's Hydra failing to run a program, and its banner of a rank that ended badly; a build without a
    # support the launch needs; a libfabric call's error return (fi_getinfo's ENODATA)
    "execvp error", "BAD TERMINATION", "was not built with", "was not compiled with", "No data available",
    # the TPU compiler's HBM report without its status (forms_errors._XLA_OOM_REPORT), an AWS service's refusal in
    # the Java SDK's words (forms_errors._CONTROL_PLANE_REFUSED)
    "Total hbm usage", "hbm requirement", "Largest program allocations", "Status Code: ",
    # other libraries' record heads and glibc's aborts (forms_conventions)
    *CONVENTION_NEEDLES,
    # a process's end as whoever waited for it reports it, a crash report's first line (forms_exits)
    *EXIT_NEEDLES,
    # a job's, pod's or worker's state in its scheduler's words (forms_schedulers)
    *SCHEDULER_NEEDLES,
    # the forms each held-out round taught (heldout)
    *HELDOUT_NEEDLES,
    # the accelerator runtimes' error vocabularies (forms_runtimes)
    *RUNTIME_NEEDLES,
)


def read_quiet(text: str) -> bool:
    """Whether ``text`` is a record its program prints whatever words it holds (a warning, a notice at ERROR): it
    holds no form, and the table's last rule does not call it an error (KnowledgeBase._refined)."""
    return heldout_quiet(text)


def read_line(text: str) -> Form | None:
    """The failure form ``text`` (one log line) holds, or None. Crash forms first (the process is
    dying), then metrics, resources, where a traceback was raised, alarms, severities, exceptions,
    and compile phases. A record its program prints as a warning whatever words it holds (read_quiet)
    holds none."""
    if read_quiet(text):
        return None
    first = (crash_form(text) or metric_form(text) or stated_error_form(text) or _model_unavailable(text)
             or heldout_form(text))
    if first is not None:
        return first
    later = (alarm_form(text) or severity_form(text) or convention_form(text) or exit_form(text)
             or scheduler_form(text) or exception_form(text, read_line) or phase_form(text))
    # a runtime's table entry states its cause before the forms of levels and exceptions, in the kind of the line's
    # record (a fatal level's head: the process is dying); an entry the table gives no cause leaves the line to
    # those forms, and is a failure of unknown cause when none reads it
    runtime = runtime_form(text)
    if runtime is None or runtime.label is None:
        return later or runtime
    return replace(runtime, kind=FormKind.CRASH) if later is not None and later.kind is FormKind.CRASH else runtime


def _model_unavailable(text: str) -> Form | None:
    unavailable = _MODEL_UNAVAILABLE.search(text)
    if unavailable is None:
        return None
    cause = _unloaded_model_cause(unavailable.group(1))
    return Form(FormKind.ERROR, "a model the inference server could not load", cause[0])


# -- causes ----------------------------------------------------------------------------------------

#: gRPC/absl status codes (absl/status/status.h, grpc/status.h), as TensorFlow's errors print them
#: (CamelCase: "Unavailable: ...", tensorflow.python.framework.errors_impl.UnavailableError) and as
#: XLA/PJRT print them (UPPER_CASE: "UNAVAILABLE: ..."), and the cause each states: the peer or the
#: link is gone (UNAVAILABLE, DEADLINE_EXCEEDED), memory ran out (RESOURCE_EXHAUSTED), the request
#: is wrong for this setup (NOT_FOUND, PERMISSION_DENIED, UNIMPLEMENTED, UNAUTHENTICATED). ABORTED
#: (a conflict, a session gone, or a collective torn down by a peer), INTERNAL, UNKNOWN, CANCELLED,
#: INVALID_ARGUMENT and the others say nothing of a cause.
_STATUS_CAUSES = {
    "Unavailable": Label.COMM_ERROR,
    "DeadlineExceeded": Label.COMM_ERROR,
    "ResourceExhausted": Label.OOM,
    "NotFound": Label.CONFIG_ERROR,
    "PermissionDenied": Label.CONFIG_ERROR,
    "Unimplemented": Label.CONFIG_ERROR,
    "Unauthenticated": Label.CONFIG_ERROR,
}
#: TensorFlow 1.x and old XLA print a status by its English name (tensorflow/core/lib/core/status.cc
#: error_name: "Resource exhausted", "Deadline exceeded", "Not found", "Permission denied", ...)
_SPACED_NAMES = {
    "Resource exhausted": "ResourceExhausted", "Deadline exceeded": "DeadlineExceeded", "Not found": "NotFound",
    "Permission denied": "PermissionDenied",
}
_UPPER_NAMES = {
    "UNAVAILABLE": "Unavailable", "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "RESOURCE_EXHAUSTED": "ResourceExhausted", "NOT_FOUND": "NotFound", "PERMISSION_DENIED": "PermissionDenied",
    "UNIMPLEMENTED": "Unimplemented", "UNAUTHENTICATED": "Unauthenticated",
}
#: (an error class also as Python's repr prints it, "UnavailableError():", the way TensorFlow's cluster
#: coordinator logs a closure's failure: cluster_coordinator.py "... encountered the following error when
#: processing closure: %r:%s"; and a class's repr before the error's value, "<class '...UnavailableError'>, ...",
#: as TensorFlow 1.x's Coordinator.request_stop logs it)
_STATUS = re.compile(
    r"(?:^|[\s:(\[\]'\".])(?:(?:(" + "|".join(_UPPER_NAMES) + r")|(" + "|".join(_STATUS_CAUSES) + r")(?:Error)?|"
    r"(" + "|".join(_SPACED_NAMES) + r"))(?::\s|\s*$| \(see above for traceback\): |'>, )|"
    r"(" + "|".join(_STATUS_CAUSES) + r")Error\(\):)")
#: a C++ exception type an uncaught-exception report names (libstdc++: "terminate called after
#: throwing an instance of 'std::bad_alloc'"; c10's error classes), or that PaddlePaddle's operator
#: runner names as it rethrows what an operator raised (paddle/fluid/framework/operator.cc: "Operator
#: %s raises an %s exception.", the demangled type; memory::allocation::BadAlloc is its allocators'
#: out-of-memory error)
_THROWN = re.compile(r"instance of '([\w:]+)'|\bOperator \w+ raises an? ([\w:]+) exception\b")
_THROWN_CAUSES = {
    "std::bad_alloc": Label.OOM,
    "paddle::memory::allocation::BadAlloc": Label.OOM,
    "c10::OutOfMemoryError": Label.OOM,
    "c10::DistNetworkError": Label.COMM_ERROR,
    "c10::DistStoreError": Label.COMM_ERROR,
    # gloo's exception for an operation that did not complete within the context's timeout (gloo/common/error.h
    # TimeoutException; transport/tcp/pair.cc throws it with "TIMEOUT self_rank = ... pair_rank = ..."): a
    # collective a peer never joined, as NCCL's watchdog timeout is
    "gloo::TimeoutException": Label.COLLECTIVE_HANG,
}


#: Triton's table of the models it loaded, printed at start-up (server.cc / core's model repository manager:
#: "| Model | Version | Status |", a model's status "READY" or "UNAVAILABLE: <the load error>", the error
#: as TRITONSERVER_ErrorCodeString names its code: "Internal: ...", "Not found: ...", "Invalid argument:
#: ..."): a model that did not load; Triton exits after the table unless told --exit-on-error=false. The
#: state word is Triton's own, not a gRPC status: the cause is the load error's (cause_of).
_MODEL_UNAVAILABLE = re.compile(r"^\|.*\|\s*UNAVAILABLE: (.*?)\s*\|?\s*$")
#: memory that ran out, in the words of the allocators that say so: Rust's alloc error hook, a
#: device allocator's "(out of memory)" (CUDA's cudaErrorMemoryAllocation string "out of memory")
_ALLOC_FAILED = re.compile(r"\bmemory allocation of \d+ bytes failed\b|(?i:\bout of memory\b)|"
                           # ... the condition's CamelCase name, as classes and status enums spell it
                           # (java.lang.OutOfMemoryError, torch.OutOfMemoryError, TensorRT's ErrorCode
                           # description "Error Code 2: OutOfMemory")
                           r"\bOutOfMemory(?:Error|Exception)?\b|"
                           # runc's report of a container whose init the cgroup's OOM killer ended
                           # (libcontainer/process_linux.go: "container init was OOM-killed (memory limit
                           # too low?)")
                           r"\bcontainer init was OOM-killed\b|"
                           # an allocator's own words for it, or Ray's node status (forms_errors)
                           + ALLOCATOR_OOM.pattern)
#: an exception whose message names where it was thrown (onnxruntime's ORT_THROW / ORT_ENFORCE: "<file>:<line>
#: <the function's signature> <message>"; c10's "Exception raised from <function> at <file>") when that
#: function is an allocator's allocate: the allocation failed, whatever the message says after it ("...
#: bfc_arena.cc:368 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, ...)", triton#5661)
_THROWN_BY_ALLOCATOR = re.compile(r"\b\w*(?:Arena|Allocator)::(?:Allocate|Alloc|Reserve)\w*\(")
#: the shell's status for a command it could not find (POSIX: 127, "command not found"), as a launcher or a
#: scheduler reports a setup script's exit: a missing program, which a restart runs again
_EXIT_NOT_FOUND = re.compile(r"\b(?:return|exit|error)[ _]?(?:code|status)(?: of)?[:=]? ?127\b|"
                             r"\bexited with (?:code|status) 127\b|\bexitcode: 127\b")
#: a model or a file the server or the program looked for and did not find (Triton's model repository
#: manager: "failed to poll model 'pipe': model not found in any model repository."; "model 'x' not found"):
#: a deployment that names what is not there
_NOT_THERE = re.compile(r"\b(?:model|checkpoint|file|directory)s? (?:'[^']+' )?(?:is |was )?not found\b")
#: a peer or a service that could not be reached, in the C library's words (strerror ECONNREFUSED,
#: ECONNRESET, ETIMEDOUT, EHOSTUNREACH; gai_strerror EAI_AGAIN, EAI_NONAME) or the caller's "failed to
#: connect to": read last, after the forms that make the same words configuration (ssh's own failure)
_PEER_GONE = re.compile(r"\b(?:Connection refused|Connection reset by peer|Connection timed out|No route to host|"
                        r"Temporary failure in name resolution|Name or service not known|[Ff]ailed to connect to)\b")


#: a gRPC status as a number, in the error strings gRPC's core library attaches to a failed call: the JSON of
#: grpc_error_string ('{"created":"@1487751897.19","description":"EOF",...,"grpc_status":14}', gRPC 1.x, as
#: TensorFlow 1.x prints a Recv that lost its peer) and the debug_error_string of later releases ("{grpc_message:
#: \"...\", grpc_status:14, created_time:...}"); the numbers are include/grpc/impl/codegen/status.h's. Only
#: the codes whose cause does not depend on the service: RESOURCE_EXHAUSTED (8) from gRPC is a message over
#: its size limit or a quota as often as memory, and is left out.
_GRPC_STATUS_NUMBER = re.compile(r"""["']?\bgrpc_status["']?\s*[:=]\s*(\d+)\b""")
_GRPC_NUMBERS = {4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND", 7: "PERMISSION_DENIED", 12: "UNIMPLEMENTED", 14: "UNAVAILABLE",
                 16: "UNAUTHENTICATED"}

#: the Neuron runtime's status (NRT_STATUS, the runtime API's nrt_status.h) as its Python wrappers carry it
#: in an exception's message: "status=<n> message=<the status's words>" (torch-neuron's "Could not load the
#: model status=2 message=Invalid", "Failed to execute the model status=5 message=Timeout Exceeded") or after
#: the API call's name ("nrt_load status=2"). The signature table names the codes it knows in the phrases
#: printed so far; this reads the number in whatever sentence carries it. The codes whose cause is the
#: code's are forms_runtimes.NRT's, the whole of nrt_status.h (NRT_FAILURE, 1, names none).
_NRT_STATUS = re.compile(r"\bnrt_\w+:? status=(\d+)\b|\bstatus=(\d+),? (?:error )?message=")
#: ... and by its name, as the runtime's diagnostic dump prints the status it failed with
#: ("ERROR   NRT:nrt_infodump   Failure: NRT_INVALID in nrt_load()"), whatever words follow it
_NRT_STATUS_NAME = re.compile(r"\bFailure: (NRT_[A-Z_]+)\b")
_NRT_NAMED_CAUSES = {name: label for label, name in NRT_CAUSES.values()}

#: an error whose own words say the job asks for more devices than the machine has ("The number of node-local
#: MPI processes 8 cannot be larger than the device count 4", SageMaker's model-parallel library; "nproc_per_node
#: is greater than the number of available GPUs"): more processes than devices, which a restart repeats
_TOO_FEW_DEVICES = re.compile(
    r"\b(?:larger|greater|more) than (?:the )?(?:(?:number|count) of (?:available |visible |local |physical )?"
    r"(?:devices|GPUs|NeuronCores|accelerators|TPU cores)|(?:available |visible |local )?(?:device|GPU|NeuronCore) "
    r"count)\b|\bexceeds? (?:the )?(?:number|count) of (?:available |visible |local )?(?:devices|GPUs|NeuronCores)\b")
#: an error whose words say a setting the program needs is missing or not set (torch_xla's "Missing XLA
#: configuration" when neither XRT_TPU_CONFIG nor a device is set; "environment variable MASTER_ADDR expected,
#: but not set"; "No configuration found for ..."): the job's set-up, which a restart repeats
_SETTING_MISSING = re.compile(
    r"\b[Mm]issing (?:[\w.-]+ ){0,3}(?:configuration|config|environment variable)s?\b|"
    r"\b[Nn]o (?:[\w.-]+ ){0,3}configuration (?:found|provided|specified|given|set)\b|"
    r"\benvironment variable \S+ (?:(?:is |was )?not set|expected, but not set)\b")

#: a memory registration with the network card refused as invalid (EINVAL: -22, "Invalid argument"), in the
#: words of the RDMA stacks' callers: aws-ofi-nccl's "NET/OFI Unable to register memory (type = 2) for device 0.
#: RC: -22, Error: Invalid argument" (fi_mr_regattr), a failed ibv_reg_mr / fi_mr_reg. The provider cannot
#: register that kind of memory with this driver and library build (GPU memory with a libfabric that predates
#: the NCCL in use, no peer-memory or dma-buf support): the node's software, which a restart meets again.
#: Other errnos (ENOMEM: the locked-memory limit, or memory) are left to the errno's reading.
_REGISTRATION = re.compile(r"(?i:\b(?:unable to|failed to|could not|cannot|can't) register (?:the )?(?:\w+ )?memory\b|"
                           r"\b(?:fi_mr_reg\w*|ibv_reg_(?:dmabuf_)?mr)\b.{0,80}?\bfail)")
_EINVAL = re.compile(r"\b(?:RC|rc|ret|err(?:no)?)\s*[:=]\s*-?22\b|\bInvalid argument\b|\bEINVAL\b")

#: an RDMA work completion that failed after the transport's retries (IBV_WC_RETRY_EXC_ERR, status 12,
#: and IBV_WC_RNR_RETRY_EXC_ERR, status 13, in ibv_wc_status_str's words): the link or the peer is gone
_IB_RETRY_EXCEEDED = re.compile(r"\b(?:transport|RNR) retry counter exceeded\b|\bIBV_WC_(?:RNR_)?RETRY_EXC_ERR\b")


#: Triton's record of a model that failed to load (core's model repository manager: "failed to load '<model>'
#: version <n>: " + Status::AsString(), "<Code>: <message>"). Its backends give a model file that is not in the
#: repository the code Unavailable (pytorch_backend's model instance: TRITONSERVER_ERROR_UNAVAILABLE, "unable to
#: find '<path>' for model instance '<name>'"): the server is local, so the word names no peer, and a model
#: file the repository lacks is a deployment mistake a restart repeats. Whatever the code, the message is the
#: backend's reason (the libtorch backend catches torch::jit::load's exception as Status(INTERNAL, "load failed
#: for libtorch model -> '<name>': " + ex.what()): a TorchScript file from a newer PyTorch, a file that is not a
#: model); one that states no cause of its own is still a model this server cannot load, which a restart loads
#: again in vain (round issue23-heldout-15, triton-server-1808).
def _unloaded_model_cause(load_error: str) -> tuple[Label, str]:
    """The cause of a model Triton's table lists as UNAVAILABLE: its load error's, or, when the error states none
    ("Internal: unable to create TensorRT engine", a plan this server's TensorRT cannot deserialize), a model the
    server cannot load, which a restart loads again in vain -- as the load record with the same error reads
    (round issue23-heldout-22, triton-server-3786)."""
    return cause_of(load_error) or (Label.CONFIG_ERROR, "a model the inference server could not load")


_TRITON_LOAD_FAILED = re.compile(r"\bfailed to load '[^']+' version \d+: (\w+): (.*)")
_MODEL_FILE_MISSING = re.compile(r"^unable to find '[^']+'")


#: a line that closes a markdown code span the paste opened on an earlier line (a log pasted between single
#: backquotes: "`Traceback ..." above, "RuntimeError: Socket Timeout`" here; round issue23-heldout-36,
#: accelerate-2229): its one backquote, at its end, is the paste's, not the message's
_CLOSING_CODE_SPAN = re.compile(r"^([^`]*[^`\s])`\s*$")


def cause_of(text: str) -> tuple[Label, str] | None:
    """The cause an error line's form states, and what the form is; None when the form says
    nothing of a cause (a plain ERROR record, a segfault, a panic)."""
    if (closing := _CLOSING_CODE_SPAN.match(text)) is not None:
        text = closing.group(1)
    if HW_ERR.search(text):
        return Label.HARDWARE_ERROR, "the kernel's hardware-error report"
    # ENOSPC and EDQUOT travel under statuses that name memory (TensorFlow's RESOURCE_EXHAUSTED): the errno first;
    # the errno after slurmstepd's failed join of the node's job container is the plugin's file, not the job's
    storage = storage_full_cause(text) or node_state_cause(text)
    if storage is not None:
        return storage
    # an entry of a runtime's error table states its cause by the library's own documentation of it
    runtime = runtime_form(text)
    if runtime is not None and runtime.label is not None:
        return runtime.label, runtime.name
    unavailable = _MODEL_UNAVAILABLE.search(text)
    if unavailable is not None:
        # the state word is Triton's, not a status: the load error says the cause
        return _unloaded_model_cause(unavailable.group(1))
    load = _TRITON_LOAD_FAILED.search(text)
    if load is not None:
        if _MODEL_FILE_MISSING.search(load.group(2)):
            return Label.CONFIG_ERROR, "a model file the inference server could not find"
        stated = cause_of(load.group(2))
        if stated is not None or load.group(1).upper() == "UNAVAILABLE":
            return stated
        return Label.CONFIG_ERROR, "a model the inference server could not load"
    m = _STATUS.search(text)
    if m is not None:
        name = _UPPER_NAMES[m.group(1)] if m.group(1) else m.group(2) or m.group(4) or _SPACED_NAMES[m.group(3)]
        return _STATUS_CAUSES[name], f"a status {m.group(1) or m.group(2) or m.group(3) or m.group(4)}"
    grpc = _GRPC_STATUS_NUMBER.search(text)
    if grpc is not None and (code := _GRPC_NUMBERS.get(int(grpc.group(1)))) is not None:
        return _STATUS_CAUSES[_UPPER_NAMES[code]], f"a gRPC status {code} ({grpc.group(1)})"
    nrt = _NRT_STATUS.search(text)
    if nrt is not None and (known := NRT_CAUSES.get(int(nrt.group(1) or nrt.group(2)))) is not None:
        return known[0], f"a Neuron runtime status {known[1]}"
    named = _NRT_STATUS_NAME.search(text)
    if named is not None and (cause := _NRT_NAMED_CAUSES.get(named.group(1))) is not None:
        return cause, f"a Neuron runtime status {named.group(1)}"
    if _REGISTRATION.search(text) and _EINVAL.search(text):
        return Label.CONFIG_ERROR, "a memory registration the network provider refused as invalid (EINVAL)"
    stated = heldout_cause(text)
    if stated is not None:
        return stated
    # an exception printed as its repr, `TypeError("...")` (Hydra's instantiate), states what its line would
    if (as_line := heldout_exception_repr(text)) is not None:
        return cause_of(as_line)
    if _TOO_FEW_DEVICES.search(text):
        return Label.CONFIG_ERROR, "more processes or devices asked for than the machine has"
    if _SETTING_MISSING.search(text):
        return Label.CONFIG_ERROR, "a setting the program needs that is missing"
    m = _THROWN.search(text)
    if m is not None and (thrown := m.group(1) or m.group(2)) in _THROWN_CAUSES:
        return _THROWN_CAUSES[thrown], f"an uncaught {thrown}"
    if _ALLOC_FAILED.search(text):
        return Label.OOM, "an allocation that failed"
    if _IB_RETRY_EXCEEDED.search(text):
        return Label.COMM_ERROR, "an InfiniBand completion whose retries ran out"
    if _THROWN_BY_ALLOCATOR.search(text):
        return Label.OOM, "an exception thrown by an allocator's allocate function"
    if _EXIT_NOT_FOUND.search(text):
        return Label.CONFIG_ERROR, "exit status 127: a command the shell could not find"
    if _NOT_THERE.search(text):
        return Label.CONFIG_ERROR, "a model or file that is not there"
    form = read_line(text)
    if form is not None and form.label is not None:
        return form.label, form.name
    if _PEER_GONE.search(text):
        return Label.COMM_ERROR, "a connection to a peer that failed"
    return None
