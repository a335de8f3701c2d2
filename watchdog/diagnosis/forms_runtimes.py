"""The error vocabularies of the accelerator runtimes, read whole from their sources as tables, not from misses.

Pure: no I/O. A runtime reports a failure as one entry of a closed list: an enumeration's name (``cudaErrorXxx``,
``CUDA_ERROR_XXX``, ``CUBLAS_STATUS_XXX``, ``ncclXxxError``, ``hipErrorXxx``) or the string its ``...GetErrorString``
gives for it, behind a wrapper's prefix (torch's ``CUDA error: <string>``). Reading the list as a table means a status
no log here has shown is read right the first time. Each entry's cause is the one the library's own documentation of
the entry states; an entry whose documentation states none (``invalid argument``, ``unknown error``,
``CUBLAS_STATUS_INTERNAL_ERROR``) is a failure of unknown cause, left to the readers of the line's form.

The tables (name, string, cause):

* CUDA's: the driver API's ``CUresult`` (cuda.h ``CUDA_ERROR_<NAME>``) and the runtime's ``cudaError_t``
  (driver_types.h ``cudaError<Name>``), one row per code, with ``cuGetErrorString``'s text (the runtime's
  ``cudaGetErrorString`` gives the same for the codes both have). The causes follow driver_types.h's comments:
  memory (2); the machine's set-up -- no device, a driver too old or a stub, no code for this device, PTX the driver
  cannot compile, a device held exclusively or prohibited, the fabric manager or MPS daemon not up ("verify the
  system configuration is in a valid state and all required driver daemons are actively running"), a launch asking
  for resources the device can never give; the device's fault -- uncorrectable ECC or NVLink errors, an error its
  containment fenced off; and the kernel's own crash ("the process must be terminated and relaunched": an illegal
  address or instruction, a device-side assert, a launch failure or timeout, a stack that overflowed -- 714 "hardware
  stack error" is, by the header, "stack corruption or exceeding the stack size limit", the program's, not the
  device's).
* The math libraries' statuses (cublas_api.h, cudnn.h, cufft.h, cusolver_common.h, cusparse.h, curand.h, nvrtc.h):
  ``*_ALLOC_FAILED`` is memory ("usually caused by a cudaMalloc() failure"), ``*_ARCH_MISMATCH``, ``*_LICENSE_ERROR``,
  cuDNN's ``VERSION_MISMATCH`` and ``RUNTIME_PREREQUISITE_MISSING`` the set-up, ``*_EXECUTION_FAILED`` ("the GPU
  program failed to execute", a kernel launch failure) the kernel's crash, NVRTC's ``COMPILATION`` a compile error.
* NCCL's ``ncclResult_t`` (nccl.h; ``ncclGetErrorString`` in init.cc; torch's ``getNcclErrorDetailStr``):
  ``ncclRemoteError`` "remote process exited or there was a network error" is the network's, ``ncclInvalidUsage``
  and ``ncclInvalidArgument`` ("usually reflecting a programming error") the job's set-up, which a restart repeats;
  ``ncclInProgress`` is no error (a non-blocking call still running).
* HIP's ``hipError_t`` (hip_runtime_api.h; ``hipGetErrorString`` of hipamd), as torch on ROCm prints it (``HIP error:
  <string>``) and by name, with the causes of the CUDA codes they mirror.
* The Neuron runtime's ``NRT_STATUS`` (nrt_status.h, as nrt_status.rst documents each status), given to
  :mod:`~neuron_watch.diagnosis.failureforms`, which reads it where the runtime's wrappers print it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

OOM, CONFIG, HARDWARE, CRASH = Label.OOM, Label.CONFIG_ERROR, Label.HARDWARE_ERROR, Label.OTHER_CRASH

#: CUDA's codes: (code, the runtime's cudaError<Name>, the driver's CUDA_ERROR_<NAME>, the error string, the cause);
#: a name is "" where that API has no such code, the cause None where driver_types.h states none
CUDA: tuple[tuple[int, str, str, str, Label | None], ...] = (
    (1, "InvalidValue", "INVALID_VALUE", "invalid argument", None),
    (2, "MemoryAllocation", "OUT_OF_MEMORY", "out of memory", OOM),
    (3, "InitializationError", "NOT_INITIALIZED", "initialization error", None),
    (34, "StubLibrary", "STUB_LIBRARY", "CUDA driver is a stub library", CONFIG),
    (35, "InsufficientDriver", "", "CUDA driver version is insufficient for CUDA runtime version", CONFIG),
    (36, "CallRequiresNewerDriver", "", "API call is not supported in the installed CUDA driver", CONFIG),
    (46, "DevicesUnavailable", "DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable", CONFIG),
    (98, "InvalidDeviceFunction", "", "invalid device function", CONFIG),
    (100, "NoDevice", "NO_DEVICE", "no CUDA-capable device is detected", CONFIG),
    (101, "InvalidDevice", "INVALID_DEVICE", "invalid device ordinal", CONFIG),
    (102, "DeviceNotLicensed", "DEVICE_NOT_LICENSED", "device doesn't have valid Grid license", CONFIG),
    (200, "InvalidKernelImage", "INVALID_IMAGE", "device kernel image is invalid", CONFIG),
    (209, "NoKernelImageForDevice", "NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device",
     CONFIG),
    (214, "ECCUncorrectable", "ECC_UNCORRECTABLE", "uncorrectable ECC error encountered", HARDWARE),
    (216, "DeviceAlreadyInUse", "CONTEXT_ALREADY_IN_USE",
     "exclusive-thread device already in use by a different thread", CONFIG),
    (218, "InvalidPtx", "INVALID_PTX", "a PTX JIT compilation failed", CONFIG),
    (220, "NvlinkUncorrectable", "NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution",
     HARDWARE),
    (221, "JitCompilerNotFound", "JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found", CONFIG),
    (222, "UnsupportedPtxVersion", "UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain.", CONFIG),
    (223, "JitCompilationDisabled", "JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled", CONFIG),
    (226, "Contained", "CONTAINED", "Invalid access of peer GPU memory over nvlink or a hardware error", HARDWARE),
    (400, "InvalidResourceHandle", "INVALID_HANDLE", "invalid resource handle", None),
    (700, "IllegalAddress", "ILLEGAL_ADDRESS", "an illegal memory access was encountered", CRASH),
    (701, "LaunchOutOfResources", "LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch", CONFIG),
    (702, "LaunchTimeout", "LAUNCH_TIMEOUT", "the launch timed out and was terminated", CRASH),
    (710, "Assert", "ASSERT", "device-side assert triggered", CRASH),
    (714, "HardwareStackError", "HARDWARE_STACK_ERROR", "hardware stack error", CRASH),
    (715, "IllegalInstruction", "ILLEGAL_INSTRUCTION", "an illegal instruction was encountered", CRASH),
    (716, "MisalignedAddress", "MISALIGNED_ADDRESS", "misaligned address", CRASH),
    (717, "InvalidAddressSpace", "INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space",
     CRASH),
    (718, "InvalidPc", "INVALID_PC", "invalid program counter", CRASH),
    (719, "LaunchFailure", "LAUNCH_FAILED", "unspecified launch failure", CRASH),
    (802, "SystemNotReady", "SYSTEM_NOT_READY", "system not yet initialized", CONFIG),
    (803, "SystemDriverMismatch", "SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination", CONFIG),
    (804, "CompatNotSupportedOnDevice", "COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW", CONFIG),
    (805, "MpsConnectionFailed", "MPS_CONNECTION_FAILED",
     "MPS client failed to connect to the MPS control daemon or the MPS server", CONFIG),
    (808, "MpsMaxClientsReached", "MPS_MAX_CLIENTS_REACHED",
     "the hardware resources required to create MPS client have been exhausted", CONFIG),
    (809, "MpsMaxConnectionsReached", "MPS_MAX_CONNECTIONS_REACHED",
     "the hardware resources required to support device connections have been exhausted", CONFIG),
    (810, "MpsClientTerminated", "MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server", CRASH),
    (999, "Unknown", "UNKNOWN", "unknown error", None),
)

#: the math libraries' status names (each library's prefix, then the status) and their causes; the statuses their
#: headers give no cause (NOT_INITIALIZED, INVALID_VALUE, INTERNAL_ERROR, NOT_SUPPORTED, MAPPING_ERROR) are left out
MATH: dict[str, Label] = {
    **{f"{lib}_ALLOC_FAILED": OOM for lib in ("CUBLAS_STATUS", "CUDNN_STATUS", "CUFFT", "CUSOLVER_STATUS",
                                               "CUSPARSE_STATUS")},
    "CURAND_STATUS_ALLOCATION_FAILED": OOM, "NVRTC_ERROR_OUT_OF_MEMORY": OOM,
    **{f"{lib}_ARCH_MISMATCH": CONFIG for lib in ("CUBLAS_STATUS", "CUDNN_STATUS", "CUSOLVER_STATUS",
                                                   "CUSPARSE_STATUS", "CURAND_STATUS")},
    "CUBLAS_STATUS_LICENSE_ERROR": CONFIG, "CUDNN_STATUS_LICENSE_ERROR": CONFIG,
    "CUDNN_STATUS_VERSION_MISMATCH": CONFIG, "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING": CONFIG,
    "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH": CONFIG, "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH": CONFIG,
    "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED": CONFIG, "CURAND_STATUS_VERSION_MISMATCH": CONFIG,
    "CURAND_STATUS_INITIALIZATION_FAILED": CONFIG,
    **{f"{lib}_EXECUTION_FAILED": CRASH for lib in ("CUBLAS_STATUS", "CUDNN_STATUS", "CUSOLVER_STATUS",
                                                     "CUSPARSE_STATUS")},
    "CUFFT_EXEC_FAILED": CRASH, "CURAND_STATUS_LAUNCH_FAILURE": CRASH, "CUDNN_STATUS_EXECUTION_FAILED_CUDART": CRASH,
    "NVRTC_ERROR_COMPILATION": Label.COMPILE_ERROR, "NVRTC_ERROR_INVALID_OPTION": CONFIG,
}

#: NCCL's results (nccl.h ncclResult_t), the string ncclGetErrorString gives (the part before its "(run with
#: NCCL_DEBUG=..." hint) and the cause; torch prints the string in "NCCL error in: <file>:<line>, <string>"
NCCL: tuple[tuple[str, str, Label | None], ...] = (
    ("ncclUnhandledCudaError", "unhandled cuda error", None),
    ("ncclSystemError", "unhandled system error", None),
    ("ncclInternalError", "internal error - please report this issue to the NCCL developers", None),
    ("ncclInvalidArgument", "invalid argument", CONFIG),
    ("ncclInvalidUsage", "invalid usage", CONFIG),
    ("ncclRemoteError", "remote process exited or there was a network error", Label.COMM_ERROR),
)

#: HIP's codes (hip_runtime_api.h hipError_t) and hipGetErrorString's text, with the cause of the CUDA code each
#: mirrors
HIP: tuple[tuple[str, str, Label | None], ...] = (
    ("OutOfMemory", "out of memory", OOM),
    ("NoDevice", "no ROCm-capable device is detected", CONFIG),
    ("InvalidDevice", "invalid device ordinal", CONFIG),
    ("InsufficientDriver", "driver version is insufficient for runtime version", CONFIG),
    ("NoBinaryForGpu", "no kernel image is available for execution on the device", CONFIG),
    ("InvalidImage", "device kernel image is invalid", CONFIG),
    ("InvalidDeviceFunction", "invalid device function", CONFIG),
    ("ECCNotCorrectable", "uncorrectable ECC error encountered", HARDWARE),
    ("IllegalAddress", "an illegal memory access was encountered", CRASH),
    ("LaunchFailure", "unspecified launch failure", CRASH),
    ("LaunchTimeOut", "the launch timed out and was terminated", CRASH),
    ("Assert", "device-side assert triggered", CRASH),
    ("LaunchOutOfResources", "too many resources requested for launch", CONFIG),
)

#: the Neuron runtime's statuses (nrt_status.h NRT_STATUS, as aws-neuron-sdk's neuron-runtime/api/nrt_status.rst
#: documents each) and their causes: an invalid NEFF, a NEFF too new, fewer NeuronCores free than asked or a core
#: locked by another process (the set-up); memory; an execution or a collective that timed out (a hang); the device's
#: fault (HBM or on-chip memory uncorrectable, a DMA engine aborted: nrt-troubleshoot.rst says replace the instance;
#: an execution unit that cannot recover, as the signature table's neuron.nrt.exec_unit_unrecoverable reads it); NaN
#: produced; the EFA network proxy failing. Inputs the runtime rejected (1002) and out-of-bound accesses (1006) are
#: the program's, read by the signature table (a crash a restart repeats). The statuses that are no failure
#: (NRT_SUCCESS, NRT_QUEUE_EMPTY, NRT_COLL_PENDING) are left out; failureforms reads the others in the runtime's
#: forms ("status=<n> message=", "Failure: NRT_<NAME>")
NRT: tuple[tuple[int, str, Label | None], ...] = (
    (1, "NRT_FAILURE", None), (2, "NRT_INVALID", CONFIG), (3, "NRT_INVALID_HANDLE", None), (4, "NRT_RESOURCE", OOM),
    (5, "NRT_TIMEOUT", Label.COLLECTIVE_HANG), (6, "NRT_HW_ERROR", HARDWARE), (7, "NRT_QUEUE_FULL", None),
    (9, "NRT_LOAD_NOT_ENOUGH_NC", CONFIG), (10, "NRT_UNSUPPORTED_NEFF_VERSION", CONFIG),
    (11, "NRT_FAIL_HOST_MEM_ALLOC", OOM), (13, "NRT_UNINITIALIZED", None), (14, "NRT_CLOSED", None),
    (101, "NRT_EXEC_UNIT_UNRECOVERABLE", HARDWARE), (1002, "NRT_EXEC_BAD_INPUT", None),
    (1003, "NRT_EXEC_COMPLETED_WITH_NUM_ERR", Label.NUMERICAL_ERROR), (1004, "NRT_EXEC_COMPLETED_WITH_ERR", None),
    (1005, "NRT_EXEC_NC_BUSY", CONFIG), (1006, "NRT_EXEC_OOB", None),
    (1200, "NRT_EXEC_HW_ERR_COLLECTIVES", Label.COLLECTIVE_HANG), (1201, "NRT_EXEC_HW_ERR_HBM_UE", HARDWARE),
    (1202, "NRT_EXEC_HW_ERR_NC_UE", HARDWARE), (1203, "NRT_EXEC_HW_ERR_DMA_ABORT", HARDWARE),
    (1204, "NRT_EXEC_SW_NQ_OVERFLOW", None), (1205, "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE", HARDWARE),
    (1206, "NRT_NETWORK_PROXY_FAILURE", Label.COMM_ERROR),
)
#: the statuses of NRT that state a cause: {code: (cause, name)}
NRT_CAUSES: dict[int, tuple[Label, str]] = {code: (label, name) for code, name, label in NRT if label is not None}

#: Digit-free literals of which every line these forms read holds one (failureforms.NEEDLES)
NEEDLES: tuple[str, ...] = (
    "CUDA error", "CUDA Error", "CUDA driver error", "HIP error", "Cuda failure", "CUDA failure", "Cuda Runtime (",
    "Cuda Driver (", "Triton Error [CUDA]", "Cuda Error in ", "cudaError", "CUDA_ERROR_", "hipError",
    "CUBLAS_STATUS_", "CUDNN_STATUS_", "CUFFT_", "CUSOLVER_STATUS_", "CUSPARSE_STATUS_", "CURAND_STATUS_",
    "NVRTC_ERROR_", "ncclUnhandled", "ncclSystem", "ncclInternal", "ncclInvalid", "ncclRemote", "NCCL error",
)

#: every enumeration name of these tables, to its cause (None: a failure the table gives no cause)
_NAMES: dict[str, Label | None] = {
    **{f"cudaError{rt}": label for _, rt, _, _, label in CUDA if rt},
    **{f"CUDA_ERROR_{drv}": label for _, _, drv, _, label in CUDA if drv},
    **MATH,
    **{name: label for name, _, label in NCCL},
    **{f"hipError{name}": label for name, _, label in HIP},
}
#: the error strings, to their cause, for the prefixes that print them: CUDA's, HIP's, NCCL's
_CUDA_STRINGS: dict[str, Label | None] = {text: label for _, _, _, text, label in CUDA}
_HIP_STRINGS: dict[str, Label | None] = {text: label for _, text, label in HIP}
_NCCL_STRINGS: dict[str, Label | None] = {text: label for _, text, label in NCCL}


def _alternation(strings: Iterable[str]) -> str:
    return "|".join(re.escape(s) for s in sorted(strings, key=len, reverse=True))


#: an enumeration name as a word of the line (the success names and ncclInProgress are not in the tables); a math
#: library's status the tables lack is still read, as a failure of unknown cause (runtime_form)
_NAME = re.compile(r"(?<![\w.])(cudaError[A-Z]\w+|CUDA_ERROR_[A-Z_]+|hipError[A-Z]\w+|"
                   r"(?:CUBLAS|CUDNN|CUSOLVER|CUSPARSE|CURAND)_STATUS_[A-Z_]+|NVRTC_ERROR_[A-Z_]+|"
                   # cuFFT's results share their prefix with its plan types (CUFFT_R2C, CUFFT_FORWARD): by name
                   r"CUFFT_(?:INVALID_PLAN|ALLOC_FAILED|INVALID_TYPE|INVALID_VALUE|INTERNAL_ERROR|EXEC_FAILED|"
                   r"SETUP_FAILED|INVALID_SIZE|UNALIGNED_DATA|INVALID_DEVICE|NO_WORKSPACE|NOT_IMPLEMENTED|"
                   r"LICENSE_ERROR|NOT_SUPPORTED)|"
                   r"nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError))"
                   r"(?![\w(])")
#: the error string after the prefix of the wrapper that prints it: torch's c10/cuda (C10_CUDA_CHECK "CUDA error: ",
#: C10_CUDA_DRIVER_CHECK "CUDA driver error: "; darknet's check_error "CUDA Error: "), NCCL's CUDACHECK ("Cuda failure
#: '<string>'", with the code in newer releases), torch on ROCm ("HIP error: "), torch's c10d ("NCCL error in:
#: <file>:<line>, <string>"), torch's legacy THC ("cuda runtime error (%d) : %s"), torch's report of the runtime's
#: refusal to count the devices ("Unexpected error from cudaGetDeviceCount(). ... Error 805: MPS client failed ..."),
#: Triton's driver.c ("Triton Error [CUDA]: "), TensorRT's error recorder ("Error Code 1: Cuda Runtime (<string>)",
#: "Cuda Driver (<string>)"), ONNX Runtime's CUDA_CALL ("CUDA failure <code>: <string> ; GPU=0 ; ..."),
#: PaddlePaddle's enforce ("CUDA error(<code>), <string>."), TensorRT 7's ("Cuda Error in allocate: 2 (out of memory)"),
#: PyCUDA's exceptions ("pycuda._driver.LogicError: cuMemAlloc failed: out of memory": the driver call, its string)
_CUDA_STRING = re.compile(r"(?:\bCUDA (?:driver )?[Ee]rror: |\bCuda failure (?:\d+ )?'|\bcuda runtime error \(\d+\) : |"
                          r"\bTriton Error \[CUDA\]: |\bCuda (?:Runtime|Driver) \(|\bCUDA failure \d+: |"
                          r"\bCUDA error\(\d+\), |\bCuda Error in \w+: \d+ \(|\bcu[A-Z]\w* failed: |"
                          r"\bError (?P<code>\d+): )"
                          r"(?P<text>" + _alternation(_CUDA_STRINGS) + ")")
#: the code each string is CUDA's for ("Error <code>: <string>" is read only when the two agree: the words alone,
#: "Error 1: out of memory", may be another program's)
_CUDA_CODES: dict[str, int] = {text: code for code, _, _, text, _ in CUDA}
_HIP_STRING = re.compile(r"\bHIP error: (?P<text>" + _alternation(_HIP_STRINGS) + ")")
_NCCL_STRING = re.compile(r"\bNCCL error in: [^,]*:\d+, (?P<text>" + _alternation(_NCCL_STRINGS) + ")")
#: names that are no failure though they match _NAME's shape: a status a health check or a query prints as its
#: answer (CUBLAS_STATUS_SUCCESS; cudaErrorNotReady, "not actually an error", and CUDA_ERROR_NOT_READY)
_NOT_FAILURES = re.compile(r"_SUCCESS$|^(?:cudaError|hipError)NotReady$|^CUDA_ERROR_NOT_READY$")
#: the math libraries' and NVRTC's status prefixes (no build option spells them)
_STATUS_WORD = re.compile(r"^(?:CUBLAS_STATUS_|CUDNN_STATUS_|CUSOLVER_STATUS_|CUSPARSE_STATUS_|CURAND_STATUS_|CUFFT_|"
                          r"NVRTC_ERROR_)")


def runtime_form(text: str) -> Form | None:
    """The form of a line reporting an entry of one of the tables: its error string behind the prefix of the
    wrapper that prints it, or its enumeration name; with the cause the table gives it, or none."""
    for pattern, table, runtime in ((_CUDA_STRING, _CUDA_STRINGS, "CUDA"), (_HIP_STRING, _HIP_STRINGS, "HIP"),
                                    (_NCCL_STRING, _NCCL_STRINGS, "NCCL")):
        m = pattern.search(text)
        if m is None:
            continue
        said, code = m.group("text"), m.groupdict().get("code")
        if code is None or int(code) == _CUDA_CODES[said]:
            return Form(FormKind.ERROR, f"{runtime}'s error '{said}'", _stated(table[said]))
    for m in _NAME.finditer(text):
        name = m.group(1)
        if _NOT_FAILURES.search(name):
            continue
        if name in _NAMES:
            return Form(FormKind.ERROR, f"the runtime's status {name}", _stated(_NAMES[name]))
        if _STATUS_WORD.search(name):
            # a math library's status the tables give no cause: a failure of unknown cause. A CUDA or HIP name the
            # tables do not hold may be a build's option ("-DCUDA_ERROR_CHECK=ON"): left to the other forms
            return Form(FormKind.ERROR, f"the runtime's status {name}")
    return None


def _stated(label: Label | None) -> Label | None:
    """The cause a line reporting an entry states: a kernel's crash (an illegal address, an assert, a launch that
    failed) states none -- it is a failure of unknown cause, restarted, which a device fault the node reports
    elsewhere (an Xid, an ECC error) still explains, as the signature table and the judge read it."""
    return None if label is CRASH else label
