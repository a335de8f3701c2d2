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

Every line that holds a form holds one of :data:`NEEDLES` (a digit-free literal), so the
classifier's batch search gates the reader: a line without a needle costs nothing here.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

from neuron_watch.events import Label


class FormKind(str, enum.Enum):
    """What a form means to the judge (see the module docstring)."""

    ERROR = "error"
    CRASH = "crash"
    METRIC = "metric"
    COMPILE_RUNNING = "compile_running"
    COMPILE_DONE = "compile_done"
    COMM_WAIT = "comm_wait"


@dataclass(frozen=True)
class Form:
    """A failure form read from one line: its kind, what it is (for reasons) and, when the form
    itself states it, the cause (``label``)."""

    kind: FormKind
    name: str
    label: Label | None = None


#: Bumped when what a line reads as changes (part of the knowledge base's fingerprint: two
#: processes classify alike only with the same reader).
FORM_RULES = 8

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

# -- severities ------------------------------------------------------------------------------------

#: glog / absl LogMessage prefix: "<L>MMDD HH:MM:SS.uuuuuu <tid> <file>:<line>] " (glog
#: src/logging.cc LogMessage::Init; absl/log/internal/log_format.cc FormatLogPrefix), after an
#: optional launcher prefix; c10's logger prints it without the thread id and with the month
#: unpadded ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] ..."), or with no time at
#: all ("[W socket.cpp:426] ..."). Group 1: the severity letter.
_GLOG = re.compile(r"(?:^|[\[\s:])([IWEF])(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\d+\s+)?|(?<=\[[IWEF]) )"
                   r"[\w./\\+-]+:\d+\]")
#: TensorFlow's default logger: "<date> <time>.<us>: <L> <file>:<line>] <msg>"
#: (tensorflow/core/platform/default/logging.cc, tsl/platform/default/logging.cc:
#: fprintf(stderr, "%s.%06d: %c %s:%d] %s\n", ..., "IWEF"[severity], fname, line, msg))
_TF = re.compile(r"(?:^|: )([EF]) /?[\w.+-]+(?:/[\w.+-]+)*\.(?:cc|cpp|h|c|py):\d+\] ")
#: Ray's C++ logger (the raylet, the GCS, core workers): "[<date> <time>,<ms> <L> <pid> <tid>] <msg>"
#: (src/ray/util/logging.cc kLogFormatTextPattern "[%Y-%m-%d %H:%M:%S,%e %L %P %t] ", spdlog's %L the
#: level's letter: T D I W E C), under the "(raylet) " a driver's log gives it. The letter stands between
#: digits, so no needle holds it but " E " (a literal search over every batch, ~6% of the scan's speed):
#: a record is read when its message holds a needle ("Failed", "Error", "Timeout", ...).
_RAY = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ([EC]) \d+ \d+\] ")
#: Python logging, loguru, structlog and most serving stacks: a severity word as a field of the
#: record's head ("2024-01-01 12:00:00,123 - ERROR - ...", "[ERROR]", "| ERROR |", "ERROR 11-26 12:00:00
#: [engine.py:12]" (vLLM), "E0000 ..." aside); looked for in the head only, not in a message
#: that quotes the word. A C++ qualified name ("c10::Error::Error(", a backtrace's frame) is no field.
_LEVEL_WORD = re.compile(r"(?:^|[\s\[|(:,-])(?:(ERROR|CRITICAL|FATAL|WARNING|WARN|INFO|DEBUG|NOTICE|TRACE)"
                         r"(?=[\s\]|:)-]|$)|(?<!::)(Error|Critical|Fatal|Warning|Info|Debug)(?=\]|:(?!:)))")
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_HEAD = 90
#: logfmt (logrus, zap, Go's slog) and JSON records: level=error, "level": "error"
_KV_LEVEL = re.compile(
    r"""(?:\blevel=|\blvl=|\bseverity=|["'](?:level|levelname|severity|lvl)["']\s*:\s*["'])"""
    r"""(error|err|fatal|critical|crit|panic|ERROR|FATAL|CRITICAL|PANIC|Error|Fatal|Critical)\b""")
#: libfabric's log record: "libfabric:<pid>:<time>:<prov>:<subsys>:<func>():<line><level> <msg>"
#: (libfabric src/log.c fi_log: "%s:%d:%ld:%s:%s:%s():%d<%s> "); FI_WARN is its highest level, so a
#: warn is an error only when it carries one (an "err:" code, a failed call).
_LIBFABRIC = re.compile(r"\blibfabric:\d+:\d+:(?:[\w;.-]*:){1,4}\w+\(\):\d+<(error|warn)> (.*)")
_LIBFABRIC_ERR = re.compile(r"\berr(?:no)?\s*[:=]\s*-?\d+|\berror\b|\bfailed\b|\bunable\b|\bcannot\b", re.I)
#: TensorRT's logger: a severity letter in brackets before the message (samples/common/logging.h
#: severityPrefix: "[F] " kINTERNAL_ERROR, "[E] " kERROR, "[W] ", "[I] ", "[V] "; the Python bindings'
#: default logger prints the same letter after its "[TRT] " tag: "[11/07/2023-08:45:41] [TRT] [E] ...").
#: Only at the record's head, after its time or tag, where no message puts it.
_TRT = re.compile(r"^(?:\[[^\]]{1,40}\] ){0,3}\[([EF])\] \S")
#: the Neuron runtime: "<YYYY-Mon-DD HH:MM:SS.ffff> <pid>:<tid> <LEVEL>  <MODULE>:<function> <msg>"
#: (the runtime's log format; its modules are TDRV, NRT, NMGR, ENC, NCCL and the like)
_NEURON = re.compile(r"\d+:\d+ (ERROR|FATAL)\s+([A-Z][A-Z_]{1,9}):\w")
#: the kernel's own fault reports (lib/bug.c "BUG: ", arch/x86
#: "general protection fault", mm "segfault at <addr> ip", kernel/panic.c "Kernel panic - ")
_KERNEL_FAULT = re.compile(
    r"\bBUG: (?:unable to handle|kernel NULL pointer|soft lockup|scheduling while atomic)|\bOops: \d|"
    r"\bgeneral protection fault\b|\bKernel panic - |"
    r"\btask \S+ blocked for more than \d+ seconds")

# -- crashes ---------------------------------------------------------------------------------------

_CRASHES: tuple[tuple[re.Pattern[str], str], ...] = (
    # glog CHECK and its trace (glog src/logging.cc: "Check failed: " + condition; "*** Check failure
    # stack trace: ***"), glog's failure signal handler ("*** Aborted at 1700000000 (unix time) ...",
    # "*** SIGSEGV (@0x0) received by PID 12 (TID 0x7f..) from PID 0; stack trace: ***") and absl's
    # ("*** SIGSEGV received at time=1700000000 on cpu 3 ***"); the frames under them ("    @  0x7f..")
    # are not read alone (they always follow one of these headers)
    (re.compile(r"\bCheck failed: "), "a failed CHECK (glog/absl)"),
    (re.compile(r"\*\*\* Check failure stack trace: \*\*\*"), "glog's check-failure stack trace"),
    (re.compile(r"\*\*\* Aborted at \d+ \(unix time\)"), "glog's fatal signal report"),
    (re.compile(r"\*\*\* SIG[A-Z]+ (?:\(@0x[0-9a-f]+\) received by PID|received at time=)"), "a fatal signal report"),
    # Go: runtime/panic.go printpanics ("panic: " + value), runtime.throw ("fatal error: " + msg), and
    # the traceback of the goroutine that panicked ("goroutine 1 [running]:"; runtime/traceback.go)
    (re.compile(r"^(?:panic: |fatal error: )\S"), "a Go panic"),
    (re.compile(r"^goroutine \d+ \[running\]:"), "a Go panic's goroutine trace"),
    # nccl-tests' checks of every NCCL and CUDA call (src/common.h NCCLCHECK / CUDACHECK: "%s: Test NCCL
    # failure %s:%d '%s'" with the host, the file, the line and ncclGetErrorString; "Test CUDA failure"):
    # the test returns its error and the program ends
    (re.compile(r"\bTest (?:NCCL|CUDA) failure \S+:\d+ '"), "a failed check of nccl-tests"),
    # Rust: library/std/src/panicking.rs default_hook ("thread '{name}' panicked at {location}:")
    (re.compile(r"\bthread '[^']*' panicked at "), "a Rust panic"),
    # Java: the uncaught-exception handler (java.lang.ThreadGroup.uncaughtException:
    # "Exception in thread \"" + t.getName() + "\" " + e)
    (re.compile(r"\bException in thread \"[^\"]*\" [\w.$]+"), "an uncaught Java exception"),
    # C++: libstdc++'s verbose terminate handler
    (re.compile(r"\bterminate called (?:after throwing an instance of|without an active exception)"),
     "an uncaught C++ exception"),
    # Rust: the default allocation-error hook aborts the process (library/std/src/alloc.rs
    # default_alloc_error_hook: "memory allocation of {size} bytes failed")
    (re.compile(r"\bmemory allocation of \d+ bytes failed\b"), "a Rust allocation failure"),
    # Ray: an actor's death as its caller reports it (python/ray/exceptions.py ActorDiedError: "The
    # actor died unexpectedly before finishing this task.", "The actor died because its node has died.",
    # "The actor died because of an error raised in its creation task")
    (re.compile(r"\bThe actor died (?:unexpectedly|because)\b"), "a Ray actor's death"),
    # a fatal signal named by a launcher, a shell or a handler (signal(7): 4 ILL, 6 ABRT, 7 BUS, 8 FPE, 11 SEGV)
    (re.compile(r"\b(?:[Ss]ignal|SIGNAL)[: ]+(?:11|6|7|4|8)\b(?! *(?:ms|s|sec|seconds)\b)|"
                r"\b(?:received|caught|got|by|with|on) (?:signal )?SIG(?:SEGV|ABRT|BUS|ILL|FPE)\b|"
                r"\bSIG(?:SEGV|ABRT|BUS|ILL|FPE)(?: \(\d+\))? (?:received|caught)\b"), "a fatal signal"),
    (re.compile(r"^\W*(?:Segmentation fault|Bus error|Illegal instruction|Floating point exception|Aborted)"
                r"(?: \(core dumped\))?\s*$"), "a fatal signal (the shell's report)"),
    # Slurm's controller recording a job that a fatal signal ended (src/slurmctld/job_mgr.c
    # _job_complete: "JobId=%u WTERMSIG %d"; 15, SIGTERM, is a cancel or a time limit and is left out)
    (re.compile(r"\b_job_complete: JobId=\d+ WTERMSIG (?:4|6|7|8|9|11)\b"), "a Slurm job ended by a fatal signal"),
    # the kernel's report of a process it killed for a bad access (arch/x86/mm/fault.c show_signal_msg:
    # "%s[%d]: segfault at %lx ip %px sp %px error %lx")
    (re.compile(r"\bsegfault at [0-9a-f]+ ip [0-9a-f]+"), "the kernel's segfault report"),
    # the JVM's fatal error report (HotSpot src/hotspot/share/utilities/vmError.cpp print_error_for_unit_test /
    # report: "# A fatal error has been detected by the Java Runtime Environment:", then
    # "#  SIGSEGV (0xb) at pc=0x..., pid=..., tid=..." for a signal in native code)
    (re.compile(r"^#\s+A fatal error has been detected by the Java Runtime Environment:|"
                r"^#\s+SIG[A-Z]+ \(0x[0-9a-f]+\) at pc=0x"), "the JVM's fatal error report"),
    # Open MPI's launcher reporting a rank a signal ended (orte/tools/orterun/help-orterun.txt
    # [orterun:proc-aborted-signal]: "%s noticed that process rank %s with PID %s on node %s exited on
    # signal %d (%s)."); SIGINT (2) and SIGTERM (15) are an interrupt or a cancel
    (re.compile(r"\bnoticed that process rank \d+ with PID \d+ on node \S+ exited on signal (?!2\b|15\b)\d+\b"),
     "a rank that a signal ended (Open MPI)"),
)

# -- exceptions ------------------------------------------------------------------------------------

#: A Python exception's last traceback line whose class does not end in Error/Exception, or that a
#: wrapper prints with its cause in parentheses: "ray.exceptions.RayTaskError(RuntimeError): ...",
#: "requests.exceptions.ConnectTimeout: ..." (a dotted module path: a bare "Word: text" is prose).
_EXCEPTION = re.compile(
    r"^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Error|Exception|Timeout|Failure|Failed)(?:\(\w+\))?(?::\s|\s*$)|"
    # ... or whose class lives in a module of exceptions, as Python libraries name them (errors.py,
    # exceptions.py, errors_impl.py: "triton.runtime.errors.OutOfResources: ...",
    # "ray.exceptions.RaySystemError: ...")
    r"^(?:[a-z_]\w*\.)*(?:errors?|exceptions?|errors_impl)\.[A-Z]\w*(?:\(\w+\))?(?::\s|\s*$)")
#: exception classes whose name states the cause: Triton's OutOfResources (triton/runtime/errors.py;
#: raised by triton/compiler/compiler.py _init_handles when the compiled kernel needs more shared memory
#: or registers than the device has: the kernel as compiled cannot run here, and recompiling the same
#: configuration repeats it)
_EXCEPTION_CAUSES = {"triton.runtime.errors.OutOfResources": Label.COMPILE_ERROR}
_EXCEPTION_CLASS = re.compile(r"^\s*((?:[a-z_]\w*\.)+[A-Z]\w*)(?:\(\w+\))?:")
#: what the uncaught C++ exception says (libstdc++-v3/libsupc++/vterminate.cc: "  what():  %s"),
#: the line after "terminate called after throwing ...": the error the process died of
_WHAT = re.compile(r"^\s*what\(\):  ?\S")
#: Open MPI's runtime error log (orte/mca/errmgr/errmgr.h ORTE_ERROR_LOG -> orte_errmgr_base_log:
#: "[%s] ORTE_ERROR_LOG: %s in file %s at line %d")
_ORTE_ERROR = re.compile(r"\bORTE_ERROR_LOG: \S")
#: a Java exception chain's cause ("Caused by: java.io.IOException: ..."; Throwable.printStackTrace)
_CAUSED_BY = re.compile(r"^\s*Caused by: [\w.$]+(?:Exception|Error)\b")
#: serving stacks that wrap a worker's output in their own prefix: TorchServe "... MODEL_LOG - <text>",
#: Ray "(RayWorker pid=12, ip=10.0.0.1) <text>", vLLM "(VllmWorkerProcess pid=12) <text>"
_WRAPPED = re.compile(r"^.{0,160}? MODEL_LOG - |^\s*\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\)\s+")
#: an exception whose message is an absl/gRPC status as absl::Status::ToString prints it ("<CODE>: <message>",
#: absl/status/status.cc; the code names of absl/status/status_code.cc StatusCodeToString): JAX and XLA's
#: clients raise a status so ("XlaRuntimeError: RESOURCE_EXHAUSTED: ...", "RuntimeError: UNAVAILABLE: ..."),
#: whatever wraps the class (IPython's "UnfilteredStackTrace: RuntimeError: ..."); its cause is the code's
#: (cause_of)
_STATUS_EXCEPTION = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception): (?:CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS|"
    r"PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|OUT_OF_RANGE|UNIMPLEMENTED|INTERNAL|UNAVAILABLE|"
    r"DATA_LOSS|UNAUTHENTICATED): \S")
#: the plain Python exception line, inside a wrapper
_PY_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|\s*$)")

# -- resources that are not there ----------------------------------------------------------------

#: Configuration, not a crash to restart: the errno strings (glibc strerror: EADDRINUSE "Address
#: already in use", ENODEV "No such device", EBUSY "Device or resource busy", EMFILE "Too many open
#: files", ENOSPC "No space left on device", EACCES "Permission denied"), the dynamic loader's
#: "cannot open shared object file", CUDA's "no CUDA-capable device is detected" (cudaErrorNoDevice)
#: and torch's "No CUDA GPUs are available", CUDA's devices that are there but not this process's
#: (cudaErrorDevicesUnavailable, cudaGetErrorString: "CUDA-capable device(s) is/are busy or unavailable",
#: "all CUDA-capable devices are busy or unavailable": a GPU in exclusive-process compute mode held by
#: another process, or prohibited), shared memory too small, and Slurm's refusals.
_RESOURCE = re.compile(
    r"\bAddress already in use\b|\bEADDRINUSE\b|\bNo such device\b|\bDevice or resource busy\b|\bEBUSY\b|"
    r"\bToo many open files\b|\bNo space left on device\b|\bENOSPC\b|\bPermission denied\b|"
    r"\bcannot open shared object file\b|\bno CUDA-capable device is detected\b|\bNo CUDA GPUs are available\b|"
    r"\bCUDA-capable devices? ?(?:\(s\) )?(?:is/are|are|is) busy or unavailable\b|"
    # TensorRT's runtime finding CUDA unusable (runtime.cpp isCudaInstalledCorrectly: "CUDA initialization
    # failure with error <cudaError_t>. Please check your CUDA installation": 35 is
    # cudaErrorInsufficientDriver, 100 cudaErrorNoDevice)
    r"\bCUDA initialization failure with error \d+\. Please check your CUDA installation\b|"
    r"\bFound no NVIDIA driver\b|\b(?:/dev/shm|shared memory)\b.{0,80}?\b(?:too small|insufficient|not enough)\b|"
    r"\b(?:already in use|held|owned|locked) by (?:another|other) process|"
    r"\bUnable to allocate resources\b|\bRequested node configuration is not available\b|"
    # Slurm's refusals of a request (src/common/slurm_errno.c: ESLURM_INVALID_GRES,
    # ESLURM_INVALID_PARTITION_NAME, ESLURM_INVALID_ACCOUNT, ESLURM_INVALID_QOS)
    r"\bInvalid generic resource \(gres\) specification\b|\bInvalid partition name specified\b|"
    r"\bInvalid account or account/partition combination specified\b|\bInvalid qos specification\b|"
    # ... and slurmd's refusal of a step whose credential it cannot accept (slurm_errno.c
    # ESLURMD_CREDENTIAL_EXPIRED "Job credential expired", ESLURMD_INVALID_JOB_CREDENTIAL "Invalid job
    # credential", ESLURMD_CREDENTIAL_REVOKED "Job credential revoked"): the nodes' clocks or munge keys
    # disagree with the controller's, and every launch is refused the same way
    r"\bJob credential (?:expired|revoked)\b|\bInvalid job credential\b|"
    # NCCL's shared-memory transport unable to make its segment in /dev/shm (src/misc/shmutils.cc ncclShmOpen:
    # "Error while creating shared memory segment %s (size %d)"): a container's /dev/shm too small for it
    # (NCCL's troubleshooting guide: Docker's 64 MB default, --shm-size)
    r"\bError while creating shared memory segment\b|"
    # Open MPI's mapper refusing more ranks than slots (orte/mca/rmaps/base/help-orte-rmaps-base.txt
    # [orte-rmaps-base:alloc-error]: "There are not enough slots available in the system to satisfy
    # the %d slots"), a missing launch agent (orte/mca/plm/rsh/help-plm-rsh.txt [agent-not-found]:
    # "The value of the MCA parameter \"plm_rsh_agent\" was set to a path that could not be found")
    r"\bThere are not enough slots available in the system\b|"
    # ... and mpirun's report of a daemon (orted) that never reported back at start-up ("An ORTE daemon has
    # unexpectedly failed after launch and before communicating back to mpirun", Open MPI 1.x-4.x): orted
    # not found or not runnable on the remote node (PATH, a container, an Open MPI built without the
    # scheduler's support) or no route back to mpirun; no rank ran, and a relaunch fails the same way
    r"\bAn ORTE daemon has unexpectedly failed after launch\b|"
    # TensorFlow's check of the cuDNN it loaded against the one it was built with (stream_executor/cuda/
    # cuda_dnn.cc, LOG(ERROR): "Loaded runtime CuDNN library: %s but source was compiled with: %s. ..."): the
    # library on this machine is too old for the build, and the first convolution crashes or fails
    r"\bLoaded runtime CuDNN library: \S+ but source was compiled with: |"
    r"\bMCA parameter \"plm_rsh_agent\" was set to a path\b|"
    # a host the launcher cannot reach over ssh: OpenSSH's own failure (sshconnect.c ssh_connect_direct:
    # "ssh: connect to host %s port %s: %s") and its exit status 255 ("ssh exits with ... 255 if an error
    # occurred", ssh(1)) as Python's CalledProcessError and pdsh report it
    # a program that is not there: Slurm's step daemon failing to exec the user's command
    # (src/slurmd/slurmstepd/task.c exec_task: "execve(): %s: %m"; its own spool script is a node fault,
    # a table rule)
    r"\bslurmstepd: error: execve\(\): (?!\S*/slurm_script:)\S+: (?:No such file or directory|Permission denied)|"
    r"\bssh: connect to host \S+ port \d+: (?:Connection refused|Connection timed out|No route to host|"
    r"Network is unreachable)|"
    r"\bCommand '(?:\S*/)?ssh\b[^']*' returned non-zero exit status 255\b|\bssh exited with exit code 255\b|"
    # a GPU architecture the CUDA toolchain does not know (nvcc: "nvcc fatal   : Unsupported gpu
    # architecture 'compute_89'"; ptxas: "ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'")
    r"\b(?:nvcc|ptxas) fatal\s*: (?:Unsupported gpu architecture|Value '\w+' is not defined for option 'gpu-name')|"
    # ... and the driver finding no code for this GPU in a binary (CUDA driver API
    # CUDA_ERROR_NO_BINARY_FOR_GPU / CUDA_ERROR_INVALID_IMAGE; runtime cudaErrorNoKernelImageForDevice
    # "no kernel image is available for execution on the device")
    r"\bCUDA_ERROR_(?:NO_BINARY_FOR_GPU|INVALID_IMAGE)\b|\bno kernel image is available for execution on the device\b|"
    # ... or no PTX compiler at all: the driver's JIT library missing (CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
    # cuGetErrorString "PTX JIT compiler library not found"), XLA finding neither ptxas nor nvJitLink
    # (xla/stream_executor/cuda: "No PTX compilation provider is available")
    r"\bPTX JIT compiler library not found\b|\bNo PTX compilation provider is available\b|"
    # ... or PTX newer than the driver can compile (cudaErrorUnsupportedPtxVersion,
    # CUDA_ERROR_UNSUPPORTED_PTX_VERSION: "the provided PTX was compiled with an unsupported toolchain."):
    # a driver older than the CUDA the program was built with
    r"\bthe provided PTX was compiled with an unsupported toolchain\b|"
    # a header the C/C++ compiler cannot find (GCC's and Clang's diagnostic "<file>:<line>:<col>: fatal
    # error: <header>: No such file or directory", "'<header>' file not found"): a toolkit or a
    # development package that is not installed, when an extension is built at start-up
    r"\bfatal error: [\w./+-]+\.(?:h|hh|hpp|hxx|cuh|inc): No such file or directory|"
    r"\bfatal error: '[\w./+-]+\.(?:h|hh|hpp|hxx|cuh|inc)' file not found|"
    # devices asked for that this machine does not have, in Lightning's device parser
    # (pytorch_lightning/utilities/device_parser.py _sanitize_gpu_ids, lightning/fabric/utilities/
    # device_parser.py: MisconfigurationException(f"You requested gpu: {gpus}\n But your machine only has:
    # {all_available_gpus}")), whose second line is often all that is left under a wrapper's prefix
    r"\bBut your machine only has: \[")

#: JAX's GPU backend that did not come up, logged at WARNING as JAX falls back to the CPU (jax/_src/xla_bridge.py
#: backends(): "CUDA backend failed to initialize: {err} (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
#: the platform's name upper-cased, ROCm likewise). It is printed only when a GPU plugin is installed, so the
#: program was set up for a GPU and runs without one: a driver, cuDNN or device-visibility mismatch that a
#: restart repeats. Read whatever the record's level, as the warning is the failure; the INFO records of
#: the probe of every platform ("Unable to initialize backend 'tpu': ...") are not this.
_GPU_BACKEND_FAILED = re.compile(r"\b(?:CUDA|ROCM|ROCm) backend failed to initialize: \S")

#: a status in TensorFlow's list of root errors (tsl/platform/status.cc StatusGroup::as_summary_status:
#: "%d root error(s) found.", then "  (%d) %s" per status, each "<Code name>: <message>"), which XLA's
#: clients pass on as they are: an error record whatever the line's head (its cause is the code's)
_STATUS_GROUP = re.compile(
    r"(?:^|\s)\(\d+\) (?:[A-Z][A-Z_]+[A-Z]|Resource exhausted|Deadline exceeded|Not found|Permission denied|"
    r"Unavailable|Internal|Unknown|Aborted|Cancelled|Invalid argument|Failed precondition): \S")

#: Triton's table of the models it loaded, printed at start-up (server.cc / core's model repository manager:
#: "| Model | Version | Status |", a model's status "READY" or "UNAVAILABLE: <the load error>", the error
#: as TRITONSERVER_ErrorCodeString names its code: "Internal: ...", "Not found: ...", "Invalid argument:
#: ..."): a model that did not load; Triton exits after the table unless told --exit-on-error=false. The
#: state word is Triton's own, not a gRPC status: the cause is the load error's (cause_of).
_MODEL_UNAVAILABLE = re.compile(r"^\|.*\|\s*UNAVAILABLE: (.*?)\s*\|?\s*$")

#: An op that ran out of device memory, which TensorFlow logs at WARNING as the op fails
#: (tensorflow/core/framework/op_kernel.cc CtxFailureWithWarning: LOG(WARNING) << "OP_REQUIRES failed at "
#: << file << ":" << line << " : " << status; TF 1.0-1.4 logged the status alone), after the BFC
#: allocator's own warning ("Ran out of memory trying to allocate ..."); TF 1.x printed the record
#: without its time ("W tensorflow/core/framework/op_kernel.cc:968] Resource exhausted: OOM when
#: allocating tensor"). The step fails with it. Other op failures logged so (an iterator's "Out of
#: range: End of sequence") are how a dataset ends: only memory is read here.
_TF_OP_OOM = re.compile(r"(?:^|: )W (?:\S+/)?framework/op_kernel\.cc:\d+\] (?:OP_REQUIRES failed at \S+ : )?"
                        r"(?:Resource exhausted|RESOURCE_EXHAUSTED): ")

#: Ray: a worker process that died under a task, as the raylet reports it (src/ray/protobuf/common.proto
#: WorkerExitType: SYSTEM_ERROR "worker exit due to system level failures (i.e. worker crash)",
#: UNEXPECTED_SYSTEM_EXIT before Ray 2.0; the message lists an OOM kill, "ray stop --force" and SIGSEGV as
#: possible causes without knowing which): the process is gone. The driver logs the same message at
#: WARNING (python/ray/_private/worker.py, its error-message listener) when the task is retried and the
#: application goes on, so a record whose head says WARNING or INFO is not read as a crash.
_RAY_WORKER_DIED = re.compile(r"\bWorker exit type: (?:SYSTEM_ERROR|UNEXPECTED_SYSTEM_EXIT)\b")

#: XLA's report of a module that did not fit in device memory (xla/service/buffer_assignment.cc
#: BufferAssignment::ToVerboseString: "BufferAssignment OOM Debugging.", the allocation stats, then
#: "Peak buffers:" and per buffer "Size: ", "Operator: ", "XLA Label: <opcode>", "Shape: "), which PJRT
#: appends to the RESOURCE_EXHAUSTED status of an allocation that failed: the report is printed only
#: then, so any of its lines stands for the out-of-memory error it explains, when the status line itself
#: was cut from the excerpt. A buffer's "XLA Label:" is read only indented, as the report prints it.
_XLA_OOM_REPORT = re.compile(r"\bBufferAssignment OOM Debugging\b|^\s+XLA Label: [\w-]+\s*$")

#: the NVIDIA kernel driver's records ("NVRM: ..."; kernel-open/common/inc/nv-linux.h nv_printf) with an
#: RM status that says the GPU is gone or must be reset before it runs again (src/common/sdk/nvidia/
#: inc/nvstatuscodes.h: NV_ERR_GPU_IS_LOST "GPU lost from the bus", NV_ERR_RESET_REQUIRED "Reset
#: required", which the GSP's RPC path returns once it has hit a fatal error): the device, not the job
_NVRM_GPU_GONE = re.compile(r"\bNVRM: .*\bNV_ERR_(?:GPU_IS_LOST|RESET_REQUIRED)\b")

#: the hint TensorFlow and XLA's TF-era clients append to a RESOURCE_EXHAUSTED status ("Hint: If you want to
#: see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for
#: current allocation info."): it stands under the out-of-memory error it explains, and alone when the
#: error's own line was cut (transformers#3702, where XRTCompile ran out of TPU memory)
_TF_OOM_HINT = re.compile(r"^\s*(?:#\s*)?Hint: If you want to see a list of allocated tensors when OOM happens\b")

# -- metrics ---------------------------------------------------------------------------------------

#: a metric that says the run is broken: a loss (any name holding "loss"), a gradient norm, a
#: perplexity, as key=value, key: value, 'key': value, "key": value, key value, or a tqdm postfix;
#: the value NaN/Inf as Python, NumPy, torch (``tensor(nan)``) and C print it
_KEY = r"(?:[\w.-]*loss[\w.-]*|grad(?:ient)?[ _-]?norm\w*|[\w.-]*_norm|perplexity)"
#: Python's format spec pads a non-finite float with the zeros it asks for (format(float("nan"), "07.5f")
#: is "0000nan"; printf's %07f pads it with spaces)
_NONFINITE_VALUE = r"[-+]?0*(?:nan|inf(?:inity)?)\b"
_METRIC = re.compile(rf"(?i:\b({_KEY}))['\"]?\s*(?:[=:|]\s*)?['\"]?(?:tensor\(\s*)?(?i:{_NONFINITE_VALUE})")
_FINITE_LOSS = re.compile(r"(?i:\b[\w.-]*loss[\w.-]*)['\"]?\s*[=:]?\s*['\"]?(?:tensor\(\s*)?[-+]?(?!0*(?i:nan|inf))\d")
#: the frameworks' own words: "loss is nan", "NaN loss detected", "gradients are non-finite",
#: torch.nn.utils.clip_grad_norm_'s "The total norm of order 2.0 for gradients from `parameters` is
#: non-finite"
_METRIC_WORDS = re.compile(
    r"(?i:\b(?:loss|gradients?|grad norm|total norm)\b[^.,;]{0,60}?\b(?:is|are|became|becomes|was|were) "
    r"(?:nan|inf|non-finite|not finite)\b|"
    r"\b(?:nan|inf|non-finite) (?:loss|gradients?|grad norm)(?:es)? (?:detected|encountered|found)\b)|"
    # TensorFlow's CheckNumerics op (tensorflow/core/kernels/check_numerics_op.cc: "Tensor had NaN
    # values", "Tensor had Inf values", "Tensor had Inf and NaN values") and JAX's debug_nans/debug_infs
    # check (jax/_src/dispatch.py: FloatingPointError(f"invalid value ({ty}) encountered in {name}"))
    r"\bTensor had (?:Inf and )?(?:NaN|Inf) values\b|\binvalid value \((?:nan|inf)\) encountered in\b")
#: a loss scale (fp16 GradScaler, apex, DeepSpeed, Megatron) reduced to a value no fp16 gradient can
#: use: below fp16's smallest subnormal (2**-24), or zero
#: (as key=value, key: value, "key to/is value", or key and value between pipes as fairseq's progress bars
#: print a record: fairseq/logging/progress_bar.py _str_pipes, ' | '.join(key + ' ' + stats[key].strip()))
_LOSS_SCALE = re.compile(r"(?i:\bloss[ _-]?scal(?:e|er|ing)\w*)['\"]?\s*"
                         r"(?:[=:]|\bto\b|\bis\b|(?<=\w) (?=\S+(?: \||\s*$)))\s*['\"]?"
                         r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\b")
_SCALE_FLOOR = 2.0 ** -24
#: a dynamic loss scaler that overflows at its floor: DeepSpeed's "OVERFLOW! Rank %d Skipping step.
#: Attempted loss scale: %s, reducing to %s" (runtime/fp16/loss_scaler.py update_scale,
#: new_scale = max(cur_scale / scale_factor, min_loss_scale)) with the two equal cannot reduce further,
#: and every later step overflows again: the gradients are not finite at any scale
_SCALE_AT_FLOOR = re.compile(r"\bAttempted loss scale: ([\d.]+(?:[eE][-+]?\d+)?), "
                             r"reducing to ([\d.]+(?:[eE][-+]?\d+)?)\b")
#: a row of an aligned table of numbers with a NaN/Inf among them ("   120   nan   0.0003   1.2e-4")
_NUMBER_OR_NONFINITE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?%?|nan|NaN|NAN|inf|Inf|INF)")
_NONFINITE_TOKEN = frozenset({"nan", "NaN", "NAN", "inf", "Inf", "INF", "-nan", "-inf", "+inf", "-Inf", "-INF"})
#: the columns of a row of a step-by-step table, aligned by tabs or runs of spaces: the row begins with
#: its step and its last column is a value (tf_cnn_benchmarks benchmark_cnn.py: the header
#: "Step\tImg/sec\t" + loss_name, each row "%i\t%s\t%.*f" of the step, the timing text "images/sec: %.1f
#: +/- %.1f (jitter = %.1f)" and the loss, which printf writes "nan"). A column of text between them does
#: not make the row prose: the first and last columns do the telling.
_COLUMNS = re.compile(r"\t+|\s{2,}")
_STEP_COLUMN = re.compile(r"\d+")

# -- phases ----------------------------------------------------------------------------------------

_COMPILE_RUNNING: tuple[tuple[re.Pattern[str], str], ...] = (
    # torch/utils/cpp_extension.py (and DeepSpeed's op builder through it): "Using <dir> as PyTorch
    # extensions root...", "Emitting ninja build file <f>...", "Building extension module <name>..."
    # (quoted or indented as users paste them)
    (re.compile(r"\b(?:Using \S+ as PyTorch extensions root|Emitting ninja build file \S+|"
                r"Building extension module \w+)\.\.\."), "a C++/CUDA extension build"),
    # Inductor's max-autotune (torch/_inductor/select_algorithm.py: "AUTOTUNE mm(...)" per op, then
    # the benchmarking summary that ends it)
    (re.compile(r"(?:^|[\s>|])AUTOTUNE \w+\("), "Inductor autotuning"),
    # JAX (jax/_src/interpreters/pxla.py: "Compiling <fn> with global shapes and types ...")
    (re.compile(r"\bCompiling \S+ with global shapes and types\b"), "a JAX compile"),
    # a TensorRT engine build (minutes to hours for a big network, with nothing printed meanwhile): the
    # sample programs' and serving stacks' own words before it (tensorrtx yolov5.cpp "Building engine,
    # please wait for a while..."; turbo-ocr "Building TRT engine: <onnx> -> <plan>")
    (re.compile(r"\bBuilding engine, please wait\b|\bBuilding (?:a |the )?(?:TRT|TensorRT) engine\b"),
     "a TensorRT engine build"),
    # neuronx-cc's pass manager, one line per pass ("<YYYY-MM-DDTHH:MM:SSZ> Running <Pass>", then
    # "<Pass> finished after <s> seconds"; aws-neuron/aws-neuron-sdk#892), and neuron-cc's job pipeline
    # ("<date> INFO <pid> [pipeline.compile.0]: Starting job job.WalrusDriver.3 ...", "[job.<Name>.<n>]:
    # ..."; aws-neuron/aws-neuron-sdk#730): each line is a step of a compile still running
    (re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [A-Z]\w* finished after \d+(?:\.\d+)? seconds\s*$"),
     "a Neuron compiler pass"),
    (re.compile(r"\bINFO \d+ \[(?:pipeline\.\w+|job\.\w+)\.\d+\]: "), "a neuron-cc job"),
    # ... and any record of neuron-cc's own logger below ERROR: Python logging with the US 12-hour date,
    # the level, the pid (left out at DEBUG) and the component in brackets ("09/11/2024 09:18:21 AM DEBUG
    # [WalrusDriver.0]: ...", aws-neuron/aws-neuron-sdk#978; "02/17/2023 04:18:15 PM INFO 57168
    # [sg0000/Tensorizer/StaticProfiler]: Exit time region", #632): the compiler at work
    (re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d [AP]M (?:DEBUG|INFO|USER)(?: \d+)? \[[\w./-]+\]: "),
     "a neuron-cc log record"),
)
#: XLA's alarm on a slow compile (xla/service/slow_operation_alarm.cc SlowCompilationAlarm: LOG(ERROR)
#: of "****" rules around "[Compiling module <m>] Very slow compile?  If you want to file a bug, ..."
#: (before it, "Slow compile?  XLA was built without compiler optimizations"), and, when the alarmed
#: operation returns, "The operation took <duration>"); xla/service/hlo_constant_folding.cc's
#: "Constant folding an instruction is taking > 1s". The alarm prints at severity ERROR: it is the
#: compiler still working, not an error, so it is read before severities.
_SLOW_COMPILE = re.compile(r"\b(?:Very slow compile\? +If you want|Slow compile\? +XLA was built)|"
                           r"\bConstant folding an instruction is taking > |\bslow_operation_alarm\.cc:\d+\]\s*$")
_SLOW_COMPILE_DONE = re.compile(r"\bslow_operation_alarm\.cc:\d+\] The operation took \d")
#: The same "The operation took" ends whichever alarmed operation returned: after the constant-folding
#: alarm it is one instruction folded, and the compile goes on (the judge reads it so).
_FOLDING_ALARM = re.compile(r"\bConstant folding an instruction is taking > ")
FOLDING_ALARM = "XLA's constant-folding alarm"
SLOW_ALARM_RETURNED = "XLA's slow-compile alarm: the compile returned"
_COMPILE_DONE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bLoading extension module \w+\.\.\."), "a C++/CUDA extension loaded"),
    # DeepSpeed's op builder once an op is built or loaded (deepspeed/ops/op_builder/builder.py:
    # "Time to load {name} op: {seconds} seconds")
    (re.compile(r"\bTime to load \w+ op: \d"), "a DeepSpeed op loaded"),
    (re.compile(r"\bAUTOTUNE benchmarking takes \d"), "Inductor autotuning done"),
    # jax/_src/dispatch.py log_elapsed_time: "Finished XLA compilation of <fn> in <t> sec"
    (re.compile(r"\bFinished XLA compilation of \S+ in "), "a JAX compile finished"),
    # ... and after it: TensorRT's builder at INFO ("Engine generation completed in <s> seconds."),
    # tensorrtx's "Build engine successfully!", turbo-ocr's "Built: <plan> (<size> MB)"
    (re.compile(r"\bEngine generation completed in \d|\bBuild engine successfully\b|"
                r"(?:^|\s)Built: \S+\.(?:trt|engine|plan) \("), "a TensorRT engine built"),
)

#: A rank waiting on a peer, in the forms that say so:
#: * Horovod's stall inspector (horovod/common/stall_inspector.cc CheckForStalledTensors, a glog
#:   WARNING: "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
#:   ranks and are waiting for remainder of ranks for more than %d seconds"); its shutdown after
#:   HOROVOD_STALL_SHUTDOWN_TIME_SECONDS is an error record of its own;
#: * a connection refused or timed out that the program says it retries (errno ECONNREFUSED /
#:   ETIMEDOUT by strerror or number: c10d's "is not yet listening (errno: 111 - Connection refused),
#:   will retry", gRPC's and NCCL's "... retrying"); gated by the strerror words as strerror spells
#:   them (capitalised), which every such line holds.
_STALL_REPORT = re.compile(r"\bOne or more tensors were submitted to be reduced, gathered or broadcast(?:ed)? by "
                           r"subset of ranks")
_CONNECT_RETRY = re.compile(r"(?i:\b(?:connection refused|connection timed out|errno:? 11[01]\b)"
                            r".{0,120}?\b(?:will retry|retrying|will try again)\b)")

#: Literals (no digits: the classifier searches line templates without their digits) of which
#: every line holding a form holds one; the unit tests hold each form's examples to it.
NEEDLES: tuple[str, ...] = (
    # severities (glog's FATAL always prints "*** Check failure stack trace: ***"); libfabric's levels
    "\nE", "[E", ": E", ": F", "ERROR", "CRITICAL", "FATAL", "Error", "Critical", "Fatal", "level=", "severity=",
    "\"level\"", "'level'", "\"severity\"", "levelname", "<warn>", "<error>", "BUG:", "Oops:", "[Hardware Error]",
    "Kernel panic", "blocked for more than",
    # crashes ("error:" holds Go's "fatal error: " and Slurm's "srun: error: "; a Go panic that says no
    # error is read from its goroutine trace)
    "Check failed", "Check failure", "[running]:", "error:", "panicked at", "Exception in thread",
    "terminate called after throwing", "SIGSEGV",
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
    "AUTOTUNE",
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
    # TensorFlow's op failure for want of memory (a WARNING record) and its hint
    "Resource exhausted", "RESOURCE_EXHAUSTED", "allocated tensors when OOM",
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
)


#: retries that ran out: the operation will not be tried again. InfiniBand's work-completion
#: statuses IBV_WC_RETRY_EXC_ERR / IBV_WC_RNR_RETRY_EXC_ERR (libibverbs verbs.c ibv_wc_status_str:
#: "transport retry counter exceeded", "RNR retry counter exceeded"), and the usual words of a retry
#: loop that gave up ("retries exhausted", "max retries exceeded", "out of retries")
_RETRIES_EXHAUSTED = re.compile(r"(?i:\bretry (?:count(?:er)? )?exceeded\b|\bretries (?:exhausted|exceeded)\b|"
                                r"\bmax(?:imum)? (?:number of )?retries (?:exceeded|reached)\b|\bout of retries\b)")


def _retried(text: str) -> bool:
    """A line that says the operation will be tried again reports a transient condition (the
    signature table's rule for unrecognised errors makes the same exception); one that says the
    retries ran out does not."""
    low = text.lower()
    return ("retry" in low or "retrying" in low) and not _RETRIES_EXHAUSTED.search(text)


_QUIET_LEVELS = frozenset({"I", "W", "WARNING", "WARN", "INFO", "DEBUG", "NOTICE", "TRACE"})


def _head_level(text: str) -> str | None:
    """The severity a record's head gives it (its first level field, or a glog letter), or None."""
    m = _GLOG.search(text, 0, _HEAD + 40)
    if m is not None:
        return m.group(1)
    w = _LEVEL_WORD.search(text, 0, _HEAD)
    return None if w is None else (w.group(1) or w.group(2)).upper()


def _severity(text: str) -> Form | None:
    m = _GLOG.search(text, 0, _HEAD + 40)
    if m is not None and m.group(1) in "EF":
        return Form(FormKind.CRASH, "a glog/absl FATAL record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a glog/absl ERROR record")
    m = _TF.search(text, 0, _HEAD + 40)
    if m is not None:
        return Form(FormKind.CRASH, "a TensorFlow FATAL record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a TensorFlow ERROR record")
    m = _RAY.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.ERROR, "a Ray ERROR record") if m.group(1) == "E" else \
            Form(FormKind.CRASH, "a Ray CRITICAL record")
    m = _NEURON.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.ERROR, f"a Neuron runtime {m.group(1)} of {m.group(2)}")
    m = _TRT.search(text, 0, _HEAD)
    if m is not None:
        return Form(FormKind.CRASH, "a TensorRT INTERNAL_ERROR record") if m.group(1) == "F" else \
            Form(FormKind.ERROR, "a TensorRT ERROR record")
    m = _LIBFABRIC.search(text)
    if m is not None and (m.group(1) == "error" or _LIBFABRIC_ERR.search(m.group(2))):
        # libfabric is the network transport (its providers: efa, verbs, tcp, shm): an error it logs is
        # the transport failing, as an NCCL WARN of transport/ is (errorclass.py)
        return Form(FormKind.ERROR, f"a libfabric <{m.group(1)}> record", Label.COMM_ERROR)
    m = _KV_LEVEL.search(text)
    if m is not None:
        level = m.group(1).lower()
        kind = FormKind.CRASH if level in ("fatal", "panic") else FormKind.ERROR
        return Form(kind, f"a structured record of level {level}")
    if _KERNEL_FAULT.search(text) or _HW_ERR.search(text):
        return Form(FormKind.ERROR, "a kernel error report")
    # the record's severity is its first level field: "WARNING ... error" is a warning
    m = _LEVEL_WORD.search(text, 0, _HEAD)
    if m is not None and (level := (m.group(1) or m.group(2)).upper()) in _ERROR_LEVELS and not _retried(text):
        return Form(FormKind.ERROR, f"a log record of severity {level}")
    return None


def _exception(text: str) -> Form | None:
    if _EXCEPTION.search(text) or _CAUSED_BY.search(text):
        m = _EXCEPTION_CLASS.search(text)
        return Form(FormKind.ERROR, "an exception", _EXCEPTION_CAUSES.get(m.group(1)) if m else None)
    if _STATUS_EXCEPTION.search(text):
        return Form(FormKind.ERROR, "an exception carrying a status")
    if _WHAT.search(text):
        return Form(FormKind.ERROR, "what an uncaught C++ exception says")
    if _ORTE_ERROR.search(text):
        return Form(FormKind.ERROR, "an Open MPI runtime error record")
    wrapped = _WRAPPED.search(text)
    if wrapped is not None:
        inner = text[wrapped.end():]
        if _PY_EXCEPTION.search(inner) or _EXCEPTION.search(inner):
            return Form(FormKind.ERROR, "a worker's exception under its server's prefix")
        found = read_line(inner) if inner != text else None
        if found is not None:
            return found
    return None


def _metric(text: str) -> Form | None:
    # a loss *scale* of inf is the scaler's state on a skipped step, not a broken run; a running
    # window's NaN beside the step's own finite loss (NeMo's bar: "loss=nan ... reduced_train_loss=3.910")
    # is not the run's loss
    if any("scal" not in m.group(1).lower() for m in _METRIC.finditer(text)) and not _FINITE_LOSS.search(text):
        return Form(FormKind.METRIC, "a non-finite loss or gradient norm", Label.NUMERICAL_ERROR)
    if _METRIC_WORDS.search(text):
        return Form(FormKind.METRIC, "a non-finite loss or gradients in the framework's words", Label.NUMERICAL_ERROR)
    for s in _LOSS_SCALE.finditer(text):
        try:
            value = float(s.group(1))
        except ValueError:  # pragma: no cover - the pattern only takes numbers
            continue
        if math.isfinite(value) and abs(value) < _SCALE_FLOOR:
            return Form(FormKind.METRIC, "a loss scale collapsed to nothing", Label.NUMERICAL_ERROR)
    floor = _SCALE_AT_FLOOR.search(text)
    if floor is not None and floor.group(1).strip(".") and floor.group(1).rstrip(".") == floor.group(2).rstrip("."):
        return Form(FormKind.METRIC, "a loss scaler overflowing at its floor", Label.NUMERICAL_ERROR)
    tokens = text.replace("|", " ").replace(",", " ").split()
    if len(tokens) >= 3 and any(t in _NONFINITE_TOKEN for t in tokens) and all(
            _NUMBER_OR_NONFINITE.fullmatch(t) for t in tokens):
        return Form(FormKind.METRIC, "a NaN/Inf in a table of metrics", Label.NUMERICAL_ERROR)
    row = text.strip()
    if row[-3:] in _NONFINITE_TOKEN and len(columns := _COLUMNS.split(row)) >= 3 and \
            columns[-1] in _NONFINITE_TOKEN and _STEP_COLUMN.fullmatch(columns[0]):
        return Form(FormKind.METRIC, "a NaN/Inf in the last column of a step's row", Label.NUMERICAL_ERROR)
    return None


def _phase(text: str) -> Form | None:
    for rx, name in _COMPILE_DONE:
        if rx.search(text):
            return Form(FormKind.COMPILE_DONE, name)
    for rx, name in _COMPILE_RUNNING:
        if rx.search(text):
            return Form(FormKind.COMPILE_RUNNING, name)
    return None


def read_line(text: str) -> Form | None:
    """The failure form ``text`` (one log line) holds, or None. Crash forms first (the process is
    dying), then metrics, resources, severities, exceptions, and compile phases."""
    for rx, name in _CRASHES:
        if rx.search(text):
            return Form(FormKind.CRASH, name)
    if _RAY_WORKER_DIED.search(text) and _head_level(text) not in _QUIET_LEVELS:
        return Form(FormKind.CRASH, "a Ray worker's death")
    metric = _metric(text)
    if metric is not None:
        return metric
    if _TF_OP_OOM.search(text) or _TF_OOM_HINT.search(text):
        return Form(FormKind.ERROR, "a TensorFlow op that ran out of memory", Label.OOM)
    if _XLA_OOM_REPORT.search(text):
        return Form(FormKind.ERROR, "XLA's out-of-memory report (BufferAssignment)", Label.OOM)
    if _NVRM_GPU_GONE.search(text):
        return Form(FormKind.ERROR, "the NVIDIA driver's status: the GPU is lost or needs a reset",
                    Label.HARDWARE_ERROR)
    if _GPU_BACKEND_FAILED.search(text):
        return Form(FormKind.ERROR, "a GPU backend that failed to initialise (JAX falls back to the CPU)",
                    Label.CONFIG_ERROR)
    if _RESOURCE.search(text) and _head_level(text) not in _QUIET_LEVELS:
        return Form(FormKind.ERROR, "a resource that is not there", Label.CONFIG_ERROR)
    if _STATUS_GROUP.search(text):
        return Form(FormKind.ERROR, "a status in a list of root errors")
    unavailable = _MODEL_UNAVAILABLE.search(text)
    if unavailable is not None:
        cause = cause_of(unavailable.group(1))
        return Form(FormKind.ERROR, "a model the inference server could not load", cause[0] if cause else None)
    if _STALL_REPORT.search(text):
        return Form(FormKind.COMM_WAIT, "a collective library's stall report")
    if _CONNECT_RETRY.search(text):
        return Form(FormKind.COMM_WAIT, "a connection the program retries")
    if _SLOW_COMPILE_DONE.search(text):
        return Form(FormKind.COMPILE_DONE, SLOW_ALARM_RETURNED)
    if _FOLDING_ALARM.search(text):
        return Form(FormKind.COMPILE_RUNNING, FOLDING_ALARM)
    if _SLOW_COMPILE.search(text):
        return Form(FormKind.COMPILE_RUNNING, "XLA's slow-compile alarm")
    return _severity(text) or _exception(text) or _phase(text)


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
#: processing closure: %r:%s")
_STATUS = re.compile(
    r"(?:^|[\s:(\[\]'\".])(?:(?:(" + "|".join(_UPPER_NAMES) + r")|(" + "|".join(_STATUS_CAUSES) + r")(?:Error)?|"
    r"(" + "|".join(_SPACED_NAMES) + r"))(?::\s|\s*$)|(" + "|".join(_STATUS_CAUSES) + r")Error\(\):)")
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


#: the kernel's prefix for a hardware fault it reports (include/linux/printk.h HW_ERR "[Hardware
#: Error]: ", used by the x86 machine-check handler, APEI/GHES and EDAC), unless it is a corrected one
_HW_ERR = re.compile(r"\[Hardware Error\]: (?!.*\bcorrected\b)")


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
                           r"\bcontainer init was OOM-killed\b")
#: a peer or a service that could not be reached, in the C library's words (strerror ECONNREFUSED,
#: ECONNRESET, ETIMEDOUT, EHOSTUNREACH; gai_strerror EAI_AGAIN, EAI_NONAME) or the caller's "failed to
#: connect to": read last, after the forms that make the same words configuration (ssh's own failure)
_PEER_GONE = re.compile(r"\b(?:Connection refused|Connection reset by peer|Connection timed out|No route to host|"
                        r"Temporary failure in name resolution|Name or service not known|[Ff]ailed to connect to)\b")


#: an RDMA work completion that failed after the transport's retries (IBV_WC_RETRY_EXC_ERR, status 12,
#: and IBV_WC_RNR_RETRY_EXC_ERR, status 13, in ibv_wc_status_str's words): the link or the peer is gone
_IB_RETRY_EXCEEDED = re.compile(r"\b(?:transport|RNR) retry counter exceeded\b|\bIBV_WC_(?:RNR_)?RETRY_EXC_ERR\b")


#: Triton's record of a model that failed to load (core's model repository manager: "failed to load '<model>'
#: version <n>: " + Status::AsString(), "<Code>: <message>"). Its backends give a model file that is not in the
#: repository the code Unavailable (pytorch_backend's model instance: TRITONSERVER_ERROR_UNAVAILABLE, "unable to
#: find '<path>' for model instance '<name>'"): the server is local, so the word names no peer, and a model
#: file the repository lacks is a deployment mistake a restart repeats.
_TRITON_LOAD_UNAVAILABLE = re.compile(r"\bfailed to load '[^']+' version \d+: (?:Unavailable|UNAVAILABLE): (.*)")
_MODEL_FILE_MISSING = re.compile(r"^unable to find '[^']+'")


def cause_of(text: str) -> tuple[Label, str] | None:
    """The cause an error line's form states, and what the form is; None when the form says
    nothing of a cause (a plain ERROR record, a segfault, a panic)."""
    if _HW_ERR.search(text):
        return Label.HARDWARE_ERROR, "the kernel's hardware-error report"
    unavailable = _MODEL_UNAVAILABLE.search(text)
    if unavailable is not None:
        # the state word is Triton's, not a status: the load error says the cause
        return cause_of(unavailable.group(1))
    load = _TRITON_LOAD_UNAVAILABLE.search(text)
    if load is not None:
        if _MODEL_FILE_MISSING.search(load.group(1)):
            return Label.CONFIG_ERROR, "a model file the inference server could not find"
        return cause_of(load.group(1))
    m = _STATUS.search(text)
    if m is not None:
        name = _UPPER_NAMES[m.group(1)] if m.group(1) else m.group(2) or m.group(4) or _SPACED_NAMES[m.group(3)]
        return _STATUS_CAUSES[name], f"a status {m.group(1) or m.group(2) or m.group(3) or m.group(4)}"
    m = _THROWN.search(text)
    if m is not None and (thrown := m.group(1) or m.group(2)) in _THROWN_CAUSES:
        return _THROWN_CAUSES[thrown], f"an uncaught {thrown}"
    if _ALLOC_FAILED.search(text):
        return Label.OOM, "an allocation that failed"
    if _IB_RETRY_EXCEEDED.search(text):
        return Label.COMM_ERROR, "an InfiniBand completion whose retries ran out"
    form = read_line(text)
    if form is not None and form.label is not None:
        return form.label, form.name
    if _PEER_GONE.search(text):
        return Label.COMM_ERROR, "a connection to a peer that failed"
    return None
