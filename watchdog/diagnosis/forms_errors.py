"""Failure forms that state the failure in their words, whatever the record's level: crashes,
exceptions, resources that are not there, memory that ran out.

Pure: no I/O. :func:`crash_form` (the process is dying), :func:`stated_error_form` (an error its
words state) and :func:`exception_form` (an exception line, or what a serving stack wraps) are asked
by :func:`neuron_watch.diagnosis.failureforms.read_line` in its order.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level, record_message
from neuron_watch.events import Label

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
    # MPICH's (and Intel MPI's, built on it) abort record: MPID_Abort prints "Abort(<exit code>) on node <n>
    # (rank <r> in comm <c>): " before the error stack's first line ("Fatal error in PMPI_Init: ..."): the
    # rank is ending, whatever the message's words
    (re.compile(r"^(?:\[[\w:.-]+\]:? )?Abort\(\d+\) on node \d+ \(rank \d+ in comm \d+\): "), "an MPICH abort record"),
)

#: Ray: a worker process that died under a task, as the raylet reports it (src/ray/protobuf/common.proto
#: WorkerExitType: SYSTEM_ERROR "worker exit due to system level failures (i.e. worker crash)",
#: UNEXPECTED_SYSTEM_EXIT before Ray 2.0; the message lists an OOM kill, "ray stop --force" and SIGSEGV as
#: possible causes without knowing which): the process is gone. The driver logs the same message at
#: WARNING (python/ray/_private/worker.py, its error-message listener) when the task is retried and the
#: application goes on, so a record whose head says WARNING or INFO is not read as a crash.
_RAY_WORKER_DIED = re.compile(r"\bWorker exit type: (?:SYSTEM_ERROR|UNEXPECTED_SYSTEM_EXIT)\b")

# -- exceptions ------------------------------------------------------------------------------------

#: A Python exception's last traceback line whose class does not end in Error/Exception, or that a
#: wrapper prints with its cause in parentheses: "ray.exceptions.RayTaskError(RuntimeError): ...",
#: "requests.exceptions.ConnectTimeout: ..." (a dotted module path: a bare "Word: text" is prose).
_EXCEPTION = re.compile(
    r"^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Error|Exception|Timeout|Failure|Failed)(?:\(\w+\))?(?::\s|\s*$)|"
    # ... or whose class lives in a module of exceptions, as Python libraries name them (errors.py,
    # exceptions.py, errors_impl.py: "triton.runtime.errors.OutOfResources: ...",
    # "ray.exceptions.RaySystemError: ...")
    r"^(?:[a-z_]\w*\.)*(?:errors?|exceptions?|errors_impl)\.[A-Z]\w*(?:\(\w+\))?(?::\s|\s*$)|"
    # ... or the summary an exception prints under its own traceback, its bare class name then the note that
    # the traceback is above (TensorFlow 1.x errors_impl.OpError.__str__: "%s (see above for traceback): %s",
    # the class's __name__ and the message, after the stack of the op that failed): the run's last line, which a
    # paste may indent (a literal block, a list's code: round issue23-heldout-40 part F, Horovod's guide)
    r"^[ \t>]*[A-Z]\w*(?:Error|Exception) \(see above for traceback\): \S")
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
ABSL_STATUS_CODES = ("CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                     "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                     "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
_STATUS_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception): (?:" + "|".join(ABSL_STATUS_CODES) + r"): \S")
#: the plain Python exception line, inside a wrapper
_PY_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|\s*$)")
#: heads a line may carry before an exception line that are no part of it: a time stamp (ISO 8601 / RFC
#: 3339 with any fraction and offset, a CloudWatch or console copy: "2021-12-02T11:01:44.277+01:00 "), and
#: pytest's short test summary ("FAILED <nodeid> - <exception line>", _pytest/terminal.py
#: _get_line_with_reprcrash_message: f"{word} {pos}" + " - " + the crash's message; word FAILED or ERROR)
_EXCEPTION_HEAD = re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? +|"
                             r"^(?:FAILED|ERROR) \S+::\S+ - ")
#: the type and the value of an exception printed together ("%s, %s" % (type(e), e): TensorFlow 1.x's
#: Coordinator.request_stop logs "Error reported to Coordinator: <class '...InvalidArgumentError'>, <message>")
_TYPE_AND_VALUE = re.compile(r"<class '(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)'>, \S")
#: an exception line behind any prefix: a stamp no envelope reader knows ("2021-12-02T11:01:44.277+01:00 "),
#: pytest's short summary ("FAILED <test> - <exception line>", _pytest/terminal.py _get_line_with_reprcrash_message),
#: markdown's bold ("** "), a tag. Python prints an exception's last line as "<qualified class>: <message>"
#: (Lib/traceback.py TracebackException.format_exception_only: f"{stype}: {value}"), and PEP 8 names an
#: exception class with the suffix "Error" (or "Exception"): that shape, after a separator, in a line's head
_PREFIXED_EXCEPTION = re.compile(r"(?:^|[\s:>\]|*(-])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:\(\w+\))?: \S")
_PREFIXED_HEAD = 160

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
    # ... and its report that it could not start them at all (orte/mca/plm/base/help-plm-base.txt
    # [no-orted-...]: "ORTE was unable to reliably start one or more daemons.", then its list of causes:
    # libraries or binaries not found, no authority, /tmp not writable, no route back to mpirun)
    r"\bORTE was unable to reliably start one or more daemons\b|"
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
    # a GPU architecture nvcc does not know ("nvcc fatal   : Unsupported gpu architecture 'compute_89'"): the
    # build's own arch list (TORCH_CUDA_ARCH_LIST, -gencode) names a target the installed toolkit lacks.
    # ptxas's refusal of a target ("ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'",
    # "ptxas-blackwell fatal   : ...") is not read here: a JIT compiler (Triton, XLA) ran its ptxas on the
    # PTX it generated, and the compile failed (_TOOL_SEVERITY), whatever the build's name
    r"\bnvcc fatal\s*: (?:Unsupported gpu architecture|"
    r"Value '\w+' is not defined for option 'gpu-(?:name|architecture)')|"
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

#: (the resource forms, as :func:`~neuron_watch.diagnosis.failureforms.cause_of` reads them in an error line of
#: any level)
RESOURCE = _RESOURCE

#: JAX's GPU backend that did not come up, logged at WARNING as JAX falls back to the CPU (jax/_src/xla_bridge.py
#: backends(): "CUDA backend failed to initialize: {err} (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
#: the platform's name upper-cased, ROCm likewise). It is printed only when a GPU plugin is installed, so the
#: program was set up for a GPU and runs without one: a driver, cuDNN or device-visibility mismatch that a
#: restart repeats. Read whatever the record's level, as the warning is the failure; the INFO records of
#: the probe of every platform ("Unable to initialize backend 'tpu': ...") are not this.
_GPU_BACKEND_FAILED = re.compile(r"\b(?:CUDA|ROCM|ROCm) backend failed to initialize: \S|"
                                 # ... and the TPU's, when the device is there but the TPU build is not
                                 # (xla_bridge.py: "A Google TPU may be present on this machine, but either
                                 # a TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu.")
                                 r"\bmay be present on this machine, but either a \S+ jaxlib or \S+ is not "
                                 r"installed\. Falling back to cpu\b")

#: a status in TensorFlow's list of root errors (tsl/platform/status.cc StatusGroup::as_summary_status:
#: "%d root error(s) found.", then "  (%d) %s" per status, each "<Code name>: <message>"), which XLA's
#: clients pass on as they are: an error record whatever the line's head (its cause is the code's)
_STATUS_GROUP = re.compile(
    r"(?:^|\s)\(\d+\) (?:[A-Z][A-Z_]+[A-Z]|Resource exhausted|Deadline exceeded|Not found|Permission denied|"
    r"Unavailable|Internal|Unknown|Aborted|Cancelled|Invalid argument|Failed precondition): \S")

#: An op that ran out of device memory, which TensorFlow logs at WARNING as the op fails
#: (tensorflow/core/framework/op_kernel.cc CtxFailureWithWarning: LOG(WARNING) << "OP_REQUIRES failed at "
#: << file << ":" << line << " : " << status; TF 1.0-1.4 logged the status alone), after the BFC
#: allocator's own warning ("Ran out of memory trying to allocate ..."); TF 1.x printed the record
#: without its time ("W tensorflow/core/framework/op_kernel.cc:968] Resource exhausted: OOM when
#: allocating tensor"). The step fails with it. Other op failures logged so (an iterator's "Out of
#: range: End of sequence") are how a dataset ends: only memory is read here.
_TF_OP_OOM = re.compile(r"(?:^|: )W (?:\S+/)?framework/op_kernel\.cc:\d+\] (?:OP_REQUIRES failed at \S+ : )?"
                        r"(?:Resource exhausted|RESOURCE_EXHAUSTED): ")
#: ... and an op that failed with a status that names a cause outside the process, logged the same way: a peer
#: or the link gone (Unavailable, Deadline exceeded: a Recv from a parameter server that restarted, whose gRPC
#: error TF 1.x prints as grpc core's JSON, '"grpc_status":14'), or a request this setup cannot serve (Not found,
#: Permission denied, Unimplemented, Unauthenticated). The step fails with it; the cause is the status's
#: (failureforms.cause_of). "Out of range" (a dataset's end), "Cancelled" (a step torn down on purpose) and the
#: codes that name no cause are left to the statement that raises them.
_TF_OP_FAILED = re.compile(r"(?:^|: )W (?:\S+/)?framework/op_kernel\.cc:\d+\] (?:OP_REQUIRES failed at \S+ : )?"
                           r"(?:Unavailable|UNAVAILABLE|Deadline exceeded|DEADLINE_EXCEEDED|Not found|NOT_FOUND|"
                           r"Permission denied|PERMISSION_DENIED|Unimplemented|UNIMPLEMENTED|Unauthenticated|"
                           r"UNAUTHENTICATED): ")

#: XLA's report of a module that did not fit in device memory (xla/service/buffer_assignment.cc
#: BufferAssignment::ToVerboseString: "BufferAssignment OOM Debugging.", the allocation stats, then
#: "Peak buffers:" and per buffer "Size: ", "Operator: ", "XLA Label: <opcode>", "Shape: "), which PJRT
#: appends to the RESOURCE_EXHAUSTED status of an allocation that failed: the report is printed only
#: then, so any of its lines stands for the out-of-memory error it explains, when the status line itself
#: was cut from the excerpt. A buffer's "XLA Label:" is read only indented, as the report prints it. The TPU
#: compiler's report of a program over its HBM prints its own heads, under the RESOURCE_EXHAUSTED status
#: ("Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm.") or on their own when the status is cut
#: (the layout XLA's error-code pages quote for E1000, "Total hbm usage >= 49.34G: reserved 3.12M program ...";
#: the report's sections "Program hbm requirement 10.96G:" and "Largest program allocations in hbm:"): each is
#: printed only for a program that did not fit (round issue23-heldout-17: flax-1733).
_XLA_OOM_REPORT = re.compile(r"\bBufferAssignment OOM Debugging\b|^\s+XLA Label: [\w-]+\s*$|"
                             r"^\s*(?:Total hbm usage >=|Program hbm requirement) [\d.]+[KMGTP]?i?B?:|"
                             r"^\s*Largest program allocations in hbm:\s*$")

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


#: an absl/gRPC status as a record's own status: absl::Status::ToString ("<CODE>: <message>",
#: absl/status/status.cc; the names of absl/status/status_code.cc StatusCodeToString) at the line's start
#: ("DEADLINE_EXCEEDED: Deadline Exceeded") or chained after what failed ("... for variable X: INTERNAL:
#: Failed to fetch URL"), as XLA, PJRT, libtpu and gRPC's C++ clients print a status they return. The
#: code stands after the line's start or a colon and before a colon, never inside a name
#: ("Status::INTERNAL", "INTERNAL_ERROR") nor in prose ("returns UNAVAILABLE when ..."). OUT_OF_RANGE
#: is left out: an input pipeline that ends says it ("OUT_OF_RANGE: End of sequence").
_STATUS_CODES = tuple(code for code in ABSL_STATUS_CODES if code != "OUT_OF_RANGE")
_STATUS_RECORD = re.compile(r"(?:^\s*|: )(?:" + "|".join(_STATUS_CODES) + r"): \S")

#: a program and its version that do not fit together, in the words the checks print: PyTorch's check of
#: the GPU's compute capability against the architectures it was built for (torch/cuda/__init__.py
#: _check_capability: "<GPU> with CUDA capability sm_<NN> is not compatible with the current PyTorch
#: installation."), NumPy's C-API check of an extension module (numpy/core/code_generators
#: generate_numpy_api.py _import_array: "module compiled against API version 0x%x but this version of
#: numpy is 0x%x"; ABI likewise). A restart loads the same builds again.
_VERSION_MISMATCH = re.compile(r"\bis not compatible with the current \w+ installation\b|"
                               r"\bmodule compiled against (?:API|ABI) version \w+ but this version of \w+ is \w+")

#: a command-line tool's own diagnostic, its severity padded to a column (the CUDA toolchain's convention:
#: "nvcc fatal   : ...", "ptxas fatal   : ...", "ptxas error   : ...", a suffixed build's name as well,
#: "ptxas-blackwell fatal   : ..."). The CUDA compilers' own (nvcc, ptxas, cicc, nvlink, fatbinary) is
#: the compile failing.
_TOOL_SEVERITY = re.compile(r"^\s*([A-Za-z][\w.+-]*) (fatal|error)   : \S")
_CUDA_COMPILERS = re.compile(r"(?:nvcc|ptxas|cicc|nvlink|fatbinary)\b")

#: memory an allocator could not get, in its own words whatever the record's level, with the size it was
#: asked for: "Failed to allocate memory for requested buffer of size N" (onnxruntime's BFC arena,
#: core/framework/bfc_arena.cc), "unable to allocate 2.00 GiB" (a size says it was memory, where "failed to
#: allocate memory for the cache" alone may be a quota or a pool); and Ray's status of a node nearly out of memory
#: (python/ray/tune/progress_reporter.py memory_debug_str: "***LOW MEMORY*** less than 10% of the memory on
#: this node is available for use. This can cause unexpected crashes."), the last thing Ray says before the
#: kernel's OOM killer ends a worker.
_ALLOCATION_REFUSED = (r"(?i:\b(?:failed|unable) to allocate (?:memory for requested buffer of size \d+|"
                       r"\d+(?:\.\d+)? ?(?:[KMGT]i?B|bytes)\b))")
ALLOCATOR_OOM = re.compile(_ALLOCATION_REFUSED + r"|\*\*\*LOW MEMORY\*\*\*")

#: argparse's error (CPython Lib/argparse.py ArgumentParser.error: "%(prog)s: error: %(message)s",
#: then exit 2) with the messages its parser raises (parse_args, _parse_known_args, _get_values):
#: the command line is wrong, quoted or bare (yangjianxin1/Firefly#154: "`error: unrecognized
#: arguments: --local_rank=0`", one per rank), or under a server's prefix at whatever level it logs a
#: worker's stderr (TorchServe: "[WARN ] W-9000-m_1.0-stderr MODEL_LOG - model_service_worker.py:
#: error: unrecognized arguments: ...")
ARGPARSE_ERROR = re.compile(r"(?:^|[\s`>|*])(?:[\w./-]+: )?error: (?:unrecognized arguments: |the following arguments "
                            r"are required: |argument [-\w/, ]+: (?:invalid|expected|not allowed)|ambiguous option: )")

#: a command the shell could not find (bash: "<name>: command not found", "bash: line 1: <name>: command not
#: found"; dash: "/bin/sh: 1: <name>: not found"): a missing program or PATH, which a restart repeats
_COMMAND_NOT_FOUND = re.compile(r"^(?:\S+: )?(?:line \d+: )?[\w./+-]+: command not found\s*$|"
                                r"^/bin/(?:ba|da)?sh: \d+: [\w./+-]+: not found\s*$")

#: a launcher's or scheduler's job status word that says the job failed ("(status: FAILED_NO_RESOURCE)",
#: SkyPilot's job statuses FAILED, FAILED_SETUP, FAILED_PRECHECKS, FAILED_NO_RESOURCE, FAILED_DRIVER,
#: FAILED_CONTROLLER; sky/skylet/job_lib.py, sky/jobs/state.py); the ones that name a setup step or
#: resources that could not be had are a configuration a relaunch meets again
_FAILED_STATUS = re.compile(r"\bstatus:? (FAILED(?:_[A-Z]+)*)\b(?!_)")
_FAILED_SETUP = re.compile(r"_(?:NO_RESOURCE|SETUP|PRECHECKS)$")


#: a launcher or a fabric provider saying, in the prose of its help text, that the job did not start or is
#: ending: Open MPI's show_help messages (orte/tools/orterun/help-orterun.txt, help-odls-default.txt: "mpirun
#: was unable to find the specified executable file, and therefore did not launch the job.", "mpirun was
#: unable to launch the specified application as it could not access or execute an executable:") and the
#: libfabric EFA provider's abort notice (prov/efa: "... Your job will now abort."). The sentence that names
#: a program that is not there (a missing or misspelt executable) states the cause: a restart repeats it. A
#: sentence the program says it retries is no end. Open MPI's help files break their text into lines
#: (help-odls-default.txt [execve error]: "%s was unable to launch the specified application as it could not
#: access\nor execute an executable:"), so the sentence's second line, alone, names the executable that could
#: not be run (round issue23-heldout-17: hyphy-1751, aiida-tutorials-465); its errhandler's abort
#: (ompi/errhandler/errhandler_predefined.c) says "*** Your MPI job will now abort."
_JOB_NOT_RUN = re.compile(
    r"\b(?:was|is) unable to (?:find the specified executable|launch the specified application as it could not "
    r"(?:access or execute|find) an executable)\b|^\s*or execute an executable:\s*$|"
    r"\b(?:did not|could not|was unable to|failed to) (?:launch|start) the job\b|"
    r"\b[Yy]our (?:MPI )?(?:job|application) will now abort\b|\b[Tt]he job (?:has been|was|will now be) aborted\b")
_EXECUTABLE_MISSING = re.compile(r"\bunable to (?:find the specified|launch the specified application as it could not)|"
                                 r"^\s*or execute an executable:")


#: what a scheduler's or a cloud's control plane says when the job cannot have what it asked for, in its own
#: layouts, whatever the level it is logged at (an operator retries and logs a warning; the job never starts):
#: * the kubelet evicting a pod for a node short of a resource (pkg/kubelet/eviction/helpers.go:
#:   "The node was low on resource: %v. "): memory is the host's memory running out; disk or pids are a
#:   resource that is not there;
_EVICTED = re.compile(r"\bThe node was low on resource: ([\w-]+)")
#: * the Kubernetes API server's answers for a kind of object it does not serve (apimachinery
#:   pkg/api/errors NewNotFound's generic "the server could not find the requested resource"; the REST
#:   mapper's NoKindMatchError "no matches for kind \"X\" in version \"Y\""; kubectl's "the server doesn't
#:   have a resource type"): a CRD or an API that is not installed, which no retry installs;
#: * a cloud API refusing a quota or a capacity (botocore's ClientError: "An error occurred (<Code>) when
#:   calling the <Op> operation: ", its code a limit or a quota: EC2 VcpuLimitExceeded, InstanceLimitExceeded,
#:   SageMaker ResourceLimitExceeded, InsufficientInstanceCapacity; GCE's QUOTA_EXCEEDED, "Quota 'X'
#:   exceeded"); RequestLimitExceeded and Throttling are the API's rate, which a retry waits out;
#: * an AWS service refusing a request as the Java SDK words it (aws-sdk-java AmazonServiceException.getMessage:
#:   "<message> (Service: <name>; Status Code: <n>; Error Code: <code>; Request ID: <id>)"), which CloudFormation's
#:   stack events relay ("CREATE_FAILED AWS::AutoScaling::AutoScalingGroup ... (Service: AmazonAutoScaling; Status
#:   Code: 400; Error Code: ValidationError; ...)", round issue23-heldout-17: aws-parallelcluster-1855): a 4xx is
#:   the request's own fault (the template, a parameter, a permission), which the same request meets again; 429
#:   and the throttling codes are the API's rate, and 5xx the service's, left out;
#: * a launcher that could not provision the cluster it asked the cloud for (SkyPilot's "Failed provisioning
#:   the cluster", "Timed out: waited for more than 90 seconds for new workers to be provisioned"; "failed to
#:   provision"): quota, capacity or permissions, which the same request meets again.
_CONTROL_PLANE_REFUSED = re.compile(
    r"\bthe server could not find the requested resource\b|\bno matches for kind \"\w+\" in version\b|"
    r"\bthe server doesn't have a resource type\b|"
    r"\bAn error occurred \((?!Request)\w*(?:LimitExceeded|QuotaExceeded|InsufficientInstanceCapacity|"
    r"InsufficientCapacity)\w*\) when calling the \w+ operation\b|"
    r"\bQUOTA_EXCEEDED\b|\bQuota '\w+' exceeded\b|"
    r"\(Service: [\w .-]+; Status Code: 4(?!29)\d\d; Error Code: "
    r"(?!Throttl|RequestLimitExceeded|TooManyRequests|SlowDown|RequestTimeout)\w+|"
    r"(?i:\b(?:failed|unable|could not|cannot)(?: to)? (?:be )?provision(?:ed|ing)?\b|"
    r"\btimed out\b[^.;]{0,80}?\bto be provisioned\b)")

#: a program refusing the device it runs on for a capability the device lacks, in the words the checks print:
#: a compute capability below what it needs (vLLM's "GPUs with compute capability below 7.0 are not
#: supported.", "Bfloat16 is only supported on GPUs with compute capability of at least 8.0"), a precision the
#: device lacks (accelerate: "bf16 mixed precision requires PyTorch >= 1.10 and a supported device."), a
#: feature on this GPU ("FlashAttention only supports Ampere GPUs or newer."); a warning that says it falls
#: back is no refusal
_DEVICE_REFUSED = re.compile(
    r"\bwith compute capability (?:of )?(?:at least|below|less than|lower than|>=|<) ?\d|"
    r"\b(?:requires?|needs?) .{0,60}?\ba supported (?:device|GPU)\b|"
    r"\b(?:is|are) (?:not|only) supported on (?:this|your) (?:GPU|device|hardware)\b|"
    r"\bonly supports? \w+ GPUs(?: or newer| and above)?\b|"
    # torch.compile's refusal of a GPU Triton cannot compile for (torch/_inductor/exc.py GPUTooOldForTriton, and
    # the RuntimeError torch raised before it: "Found <GPU> which is too old to be supported by the triton GPU
    # compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your
    # device is of CUDA capability 6.1"), under dynamo's "BackendCompilerFailed: backend=... raised:" (round
    # issue23-heldout-17, nnunet-2349); a terminal may wrap it between its two sentences
    r"\bwhich is too old to be supported by the triton GPU compiler\b|"
    r"\bTriton only supports devices of CUDA Capability >= ?\d")
_FALLS_BACK = re.compile(r"\w+Warning\b|(?i:\bfall(?:ing|s)? back\b)")

#: the CUDA driver refusing a binary built for another device or a newer driver, in cuGetErrorString's and
#: cudaGetErrorString's words (CUDA_ERROR_INVALID_IMAGE "device kernel image is invalid",
#: cudaErrorInsufficientDriver "CUDA driver version is insufficient for CUDA runtime version",
#: cudaErrorSystemDriverMismatch "system has unsupported display driver / cuda driver combination",
#: cudaErrorCompatNotSupportedOnDevice "forward compatibility was attempted on non supported HW"): a driver
#: older than the build, or a build for another architecture, which a restart loads again. A binary without code
#: for this device says it in the runtime's words too (cudaErrorInvalidDeviceFunction "invalid device function":
#: the device function "is not compiled for the proper device architecture"; cudaErrorSymbolNotFound "named symbol
#: not found", the kernel a library looks up by its symbol absent from its fat binary: NCCL built with
#: NVCC_GENCODE for sm_80 run on sm_90, in NCCL's "Cuda failure 'named symbol not found'", round
#: issue23-heldout-15)
_DRIVER_REFUSED = re.compile(
    r"\bdevice kernel image is invalid\b|\bCUDA driver version is insufficient for CUDA runtime version\b|"
    r"\bsystem has unsupported display driver / cuda driver combination\b|"
    r"\bforward compatibility was attempted on non supported HW\b")
#: (searched only in a line that holds the words: the prefixes have no literal the regex engine could skip to)
_WITHOUT_CODE_WORDS = ("named symbol not found", "invalid device function")
_WITHOUT_CODE = re.compile(r"(?:\bCuda failure (?:\d+ )?'|\bCUDA error: |\bcudaError\w*: ?)"
                           r"(?:named symbol not found|invalid device function)\b")

#: Triton's refusal of a kernel that needs more of a resource than the device has (triton/runtime/errors.py
#: OutOfResources: "out of resource: {name}, Required: {required}, Hardware limit: {limit}"): the device's
#: limit, not memory in use, so the same kernel on the same GPU fails again
_HARDWARE_LIMIT = re.compile(r"\bout of resource: [\w ]+, Required: \d+, Hardware limit: \d+")


def _stated_platform_form(text: str) -> Form | None:
    """A scheduler's or cloud's refusal, a device or driver the program cannot use, whatever the record's level."""
    evicted = _EVICTED.search(text)
    if evicted is not None:
        if evicted.group(1) == "memory":
            return Form(FormKind.ERROR, "a pod evicted for a node low on memory", Label.OOM)
        return Form(FormKind.ERROR, f"a pod evicted for a node low on {evicted.group(1)}", Label.CONFIG_ERROR)
    if _CONTROL_PLANE_REFUSED.search(text):
        return Form(FormKind.ERROR, "a scheduler or cloud refusing what the job asked for", Label.CONFIG_ERROR)
    if _DRIVER_REFUSED.search(text) or (any(w in text for w in _WITHOUT_CODE_WORDS) and _WITHOUT_CODE.search(text)):
        return Form(FormKind.ERROR, "a CUDA driver refusing a binary built for another device or driver",
                    Label.CONFIG_ERROR)
    if _HARDWARE_LIMIT.search(text):
        return Form(FormKind.ERROR, "a kernel that needs more than the device's hardware limit", Label.CONFIG_ERROR)
    if _DEVICE_REFUSED.search(text) and not _FALLS_BACK.search(text):
        return Form(FormKind.ERROR, "a program refusing a device that lacks a capability it needs",
                    Label.CONFIG_ERROR)
    return None


def crash_form(text: str) -> Form | None:
    """The form of a process dying: a failed check, a panic, a fatal signal, an uncaught exception's
    report, a worker's death."""
    for rx, name in _CRASHES:
        if rx.search(text):
            return Form(FormKind.CRASH, name)
    if _RAY_WORKER_DIED.search(text) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.CRASH, "a Ray worker's death")
    return None


def stated_error_form(text: str) -> Form | None:
    """The form of an error whose words state it, whatever the record's level: memory that ran out
    (TensorFlow's op, XLA's report), a GPU gone, a backend that did not come up, a resource that is not
    there, a status in a list of root errors."""
    if _TF_OP_OOM.search(text) or _TF_OOM_HINT.search(text):
        return Form(FormKind.ERROR, "a TensorFlow op that ran out of memory", Label.OOM)
    if _TF_OP_FAILED.search(text):
        return Form(FormKind.ERROR, "a TensorFlow op that failed with a status")
    if _XLA_OOM_REPORT.search(text):
        return Form(FormKind.ERROR, "XLA's out-of-memory report (BufferAssignment, or the TPU's HBM report)", Label.OOM)
    if _NVRM_GPU_GONE.search(text):
        return Form(FormKind.ERROR, "the NVIDIA driver's status: the GPU is lost or needs a reset",
                    Label.HARDWARE_ERROR)
    if _GPU_BACKEND_FAILED.search(text):
        return Form(FormKind.ERROR, "an accelerator backend that failed to initialise (JAX falls back to the CPU)",
                    Label.CONFIG_ERROR)
    if _RESOURCE.search(text) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.ERROR, "a resource that is not there", Label.CONFIG_ERROR)
    if _STATUS_GROUP.search(text):
        return Form(FormKind.ERROR, "a status in a list of root errors")
    not_run = _JOB_NOT_RUN.search(text)
    if not_run is not None and head_level(text) not in QUIET_LEVELS and "retry" not in text.lower():
        missing = _EXECUTABLE_MISSING.search(not_run.group(0)) is not None
        return Form(FormKind.ERROR, "a launcher's notice that the job did not start or is ending",
                    Label.CONFIG_ERROR if missing else None)
    return _stated_setup_form(text) or _stated_status_form(text) or _stated_platform_form(text)


def _stated_setup_form(text: str) -> Form | None:
    """A version mismatch, a command not found, a compiler tool's own error, memory an allocator could not get."""
    if _VERSION_MISMATCH.search(text):
        return Form(FormKind.ERROR, "a version mismatch between a program and what it loads", Label.CONFIG_ERROR)
    if ARGPARSE_ERROR.search(text):
        return Form(FormKind.ERROR, "argparse's usage error", Label.CONFIG_ERROR)
    if _COMMAND_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "a command the shell could not find", Label.CONFIG_ERROR)
    tool = _TOOL_SEVERITY.search(text)
    if tool is not None:
        compiler = _CUDA_COMPILERS.match(tool.group(1)) is not None
        return Form(FormKind.ERROR, f"a {tool.group(2)} diagnostic of {tool.group(1)}",
                    Label.COMPILE_ERROR if compiler else None)
    if ALLOCATOR_OOM.search(text) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.ERROR, "memory an allocator could not get, or a node nearly out of it", Label.OOM)
    return None


def _stated_status_form(text: str) -> Form | None:
    """A record whose status is an absl/gRPC code, or a job status that says the job failed."""
    if _STATUS_RECORD.search(text) and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.ERROR, "a record whose status is an error code")
    failed = _FAILED_STATUS.search(text)
    if failed is not None:
        setup = _FAILED_SETUP.search(failed.group(1)) is not None
        return Form(FormKind.ERROR, f"a job status {failed.group(1)}", Label.CONFIG_ERROR if setup else None)
    return None


def exception_form(text: str, read_line: Callable[[str], Form | None]) -> Form | None:
    """The form of an exception line (a class, a chain's cause, a status, what(), a runtime's error log);
    under a serving stack's prefix, the form of what it wraps (``read_line``: the whole reader)."""
    if _EXCEPTION.search(text) or _CAUSED_BY.search(text):
        m = _EXCEPTION_CLASS.search(text)
        return Form(FormKind.ERROR, "an exception", _EXCEPTION_CAUSES.get(m.group(1)) if m else None)
    if _STATUS_EXCEPTION.search(text):
        return Form(FormKind.ERROR, "an exception carrying a status")
    if _WHAT.search(text):
        return Form(FormKind.ERROR, "what an uncaught C++ exception says")
    if _ORTE_ERROR.search(text):
        return Form(FormKind.ERROR, "an Open MPI runtime error record")
    head = _EXCEPTION_HEAD.match(text)
    if head is not None and (_PY_EXCEPTION.search(rest := text[head.end():]) or _EXCEPTION.search(rest)):
        return Form(FormKind.ERROR, "an exception behind a time stamp or a test's summary")
    if _TYPE_AND_VALUE.search(text):
        return Form(FormKind.ERROR, "an exception's type and value")
    message = record_message(text)
    if message is not None and (_PY_EXCEPTION.search(message) or _EXCEPTION.search(message.lstrip())):
        # a glog/absl or TensorFlow record is one record whatever its level: a warning that carries an
        # exception line is the program reporting the exception it met (SkyPilot's "W ... ] botocore...Error: ")
        return Form(FormKind.ERROR, "an exception in a glog/absl or TensorFlow record")
    if (_PREFIXED_EXCEPTION.search(text, 0, _PREFIXED_HEAD) and head_level(text) not in QUIET_LEVELS
            and "retry" not in text.lower()):
        return Form(FormKind.ERROR, "an exception line behind a prefix")
    wrapped = _WRAPPED.search(text)
    if wrapped is not None:
        inner = text[wrapped.end():]
        if _PY_EXCEPTION.search(inner) or _EXCEPTION.search(inner):
            return Form(FormKind.ERROR, "a worker's exception under its server's prefix")
        found = read_line(inner) if inner != text else None
        if found is not None:
            return found
    return None
