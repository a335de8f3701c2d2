# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""The accelerator runtimes' error vocabularies (forms_runtimes), read as tables: real lines from public threads
(named) and each table's entries in the formats its library's wrappers print them (the source named), with the near
misses the tables must leave alone. The tables were read from the libraries' headers and error-string functions, not
from misses: tests/benchmarks/bench_vocabulary.py prints how many entries are read right in every format."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line
from neuron_watch.diagnosis.forms_runtimes import CUDA, HIP, MATH, NCCL, NRT, runtime_form
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
OOM, CONFIG, HARDWARE, CRASH = Label.OOM, Label.CONFIG_ERROR, Label.HARDWARE_ERROR, Label.OTHER_CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # CUDA's codes, by their strings behind torch's prefixes and by their names
    ("RuntimeError: CUDA error: too many resources requested for launch", ERROR, CONFIG,
     "Wan-Video/Wan2.2#118 (a V100; the launch asks more than the device gives)"),
    ("RuntimeError: cuda runtime error (7) : too many resources requested for launch at jetson-reinforcement/build/pytorch/torch/lib/THCUNN/generic/SpatialUpSamplingBilinear.cu:63",
     ERROR, CONFIG, "dusty-nv/jetson-reinforcement#28 (torch's legacy THC form, fixed with __launch_bounds__)"),
    ("ERROR: CUDA error: too many resources requested for launch (code #701, ERROR_LAUNCH_OUT_OF_RESOURCES)", ERROR,
     CONFIG, "JuliaGPU/CUDAnative.jl#293"),
    ("[error] Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 805: MPS client failed to connect to the MPS control daemon or the MPS server",
     ERROR, CONFIG, "nanoporetech/dorado#458 (an MPS set-up on the node)"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount().  Did you run some cuda functions before calling NumCudaDevices() that might have already set an error?  Error 805: MPS client failed to connect to the MPS control daemon or the MPS server.",
     ERROR, CONFIG, "NVIDIA/nvidia-container-toolkit#714 (MPS started outside the container)"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", ERROR, HARDWARE,
     "vllm-project/vllm#5222 (resolved: a hardware failure)"),
    ("RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
     ERROR, HARDWARE, "NVIDIA/semantic-segmentation#33 (CUDA 9's code 39)"),
    ("F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch value instead of handling error Internal: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered",
     FormKind.CRASH, HARDWARE, "nagadit/DeepFaceLab_Linux#89 (resolved: a hardware problem)"),
    ("RuntimeError: CUDA driver error: device doesn't have valid Grid license", ERROR, CONFIG,
     "CUDA_ERROR_DEVICE_NOT_LICENSED's string (cuGetErrorString) behind torch's C10_CUDA_DRIVER_CHECK"),
    ('CUDA error at train.cu:88 code=702(cudaErrorLaunchTimeout) "cudaDeviceSynchronize()"', ERROR, None,
     "helper_cuda.h's check macro; driver_types.h: the process must be terminated and relaunched"),
    ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_HARDWARE_STACK_ERROR: hardware stack error", ERROR,
     None, "CuPy's driver error; driver_types.h: stack corruption or exceeding the stack size limit (the kernel's)"),
    # other programs' prefixes for CUDA's strings
    ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered", ERROR, None,
     "lightonai/pylate#75 (Triton's driver.c; a kernel's crash states no cause)"),
    ("[05/01/2024-12:00:00] [TRT] [E] 1: [defaultAllocator.cpp::nvinfer1::internal::DefaultAllocator::allocate::63] Error Code 1: Cuda Runtime (out of memory)",
     ERROR, OOM, "NVIDIA/TensorRT#2198 (an engine build for a larger input; the issue's line behind TensorRT's logger head)"),
    ("[08/03/2022-23:18:05] [E] [TRT] ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: 2 (out of memory)", ERROR,
     OOM, "linghu8812/tensorrt_inference#117 (TensorRT 7)"),
    ("Processing:  99%|▉| 1732/1744 [08:43<00:03,  3.79frame/s, execution_providers=['CUDAExecutionProvider'], execution_thre[ONNXRuntimeError] : 1 : FAIL : D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\cuda\\cuda_call.cc:121 onnxruntime::CudaCall D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\cuda\\cuda_call.cc:114 onnxruntime::CudaCall CUDA failure 2: out of memory ; GPU=0 ; hostname=DESKTOP-QUBEI ; file=D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\cuda\\cuda_stream_handle.cc ; line=175 ; expr=cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);",
     ERROR, OOM, "hacksider/Deep-Live-Cam#584 (ONNX Runtime's CUDA_CALL under a tqdm bar)"),
    ("CUDA failure 2: out of memory ; GPU=0 ; hostname=MSI ; expr=cudaMalloc((void**) &deviceBufferPtr, sizeof(AllocatedElemType) * numElements)",
     ERROR, OOM, "microsoft/CNTK#1769"),
    ("pycuda._driver.LogicError: cuStreamSynchronize failed: an illegal memory access was encountered", ERROR, None,
     "NVIDIA/TensorRT#1469 (PyCUDA's exception: the driver call, its string)"),
    # (a fatal record's head keeps its kind, the process dying: TensorRT's [F], glog's F)
    ("[03/01/2024-10:00:00] [TRT] [F] [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime (out of memory)",
     FormKind.CRASH, OOM, "TensorRT samples/common/logging.h ([F] kINTERNAL_ERROR), filled in"),
    # the math libraries' statuses
    ("  what():  [FT][ERROR] CUDA runtime error: CUBLAS_STATUS_ARCH_MISMATCH /root/DeepLearningExamples-master/FasterTransformer/v1/fastertransformer/cuda/open_attention.h:171 ",
     ERROR, CONFIG, "NVIDIA/FasterTransformer#25 (a K80 below compute capability 5.0)"),
    ('CUDA error at /home/jovyan/data/tmp/fastmoe-megatron-patch/cuda/moe_compute_kernel.cu:132 code=8(CUBLAS_STATUS_ARCH_MISMATCH) "cublasXgemm( smgr->handle(i), CUBLAS_OP_T, CUBLAS_OP_N, out_feat, expert_count[i], in_feat, &alpha, weight + i * in_feat * out_feat, in_feat, input_buf + ptr * in_feat, in_feat, &beta, output_buf + out_feat * ptr, out_feat )" ',
     ERROR, CONFIG, "laekov/fastmoe#134"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH", ERROR, CONFIG,
     "MahmoudAshraf97/whisper-diarization#120 (resolved: uninstall the second cuDNN)"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH", ERROR, CONFIG, "dailenson/SDT#25 (a K80)"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", ERROR, OOM,
     "cublas_api.h ALLOC_FAILED ('usually caused by a cudaMalloc() failure') in torch's CUDABlas.cpp form"),
    ("RuntimeError: cuFFT error: CUFFT_EXEC_FAILED", ERROR, None, "cufft.h's result, torch's CuFFTUtils.h form"),
    # NCCL's results, in torch's c10d form and its one-line detail
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5",
     ERROR, CONFIG, "verl-project/verl#161 (two ranks on one GPU)"),
    ("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", ERROR, CONFIG,
     "facebookresearch/ViewDiff#24 (four processes on one GPU)"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.19.3",
     ERROR, Label.COMM_ERROR, "ncclGetErrorString(ncclRemoteError) in torch's c10d form"),
    # HIP's codes
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", ERROR, CONFIG,
     "ROCm/tensorflow-upstream#1800 (resolved with HSA_OVERRIDE_GFX_VERSION)"),
    ("torch.AcceleratorError: HIP error: invalid device function", ERROR, CONFIG,
     "pytorch/pytorch#164346 (a wheel without code for the GPU)"),
    ("C++ exception with description \"scan failed on 2nd step: hipErrorInvalidDeviceFunction: invalid device function\" thrown in SetUp().",
     ERROR, CONFIG, "llnl/smith#1586 (device code not built for the machine)"),
    # entries the tables give no cause: a failure of unknown cause
    ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_UNKNOWN: unknown error", ERROR, None,
     "cuGetErrorString(CUDA_ERROR_UNKNOWN) in CuPy's form"),
]

#: lines with the same words that are no failure
NEAR_MISSES = [
    "cudaGetLastError() returned cudaSuccess after warm-up",
    "cublasLtMatmul returned CUBLAS_STATUS_SUCCESS for all 12 heuristics",
    "nccl async init: ncclCommGetAsyncError -> ncclInProgress, polling",
    "plan created: CUFFT_R2C batch=64 size=4096",
    "[health] cuInit -> CUDA_SUCCESS, 8 devices",
    "hipGetLastError: hipSuccess",
    "health check: cudaErrorNotReady from cudaEventQuery (event still pending), ok",
    "checked the driver: no CUDA error, out of memory guard at 90%",
    "-- Build option CUDA_ERROR_CHECK=ON (cudaErrorChecking enabled)",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("code", "rt", "drv", "text", "label"), CUDA, ids=[f"cuda{row[0]}" for row in CUDA])
def test_every_cuda_entry_is_read_by_string_and_name(code: int, rt: str, drv: str, text: str, label: Label | None) -> None:
    """Each code of the table, in torch's form and by each enumeration name, states the table's cause (a kernel's
    crash states none: a failure of unknown cause, which the judge restarts)."""
    label = None if label is CRASH else label
    lines = [f"RuntimeError: CUDA error: {text}", f"Error {code}: {text}"]
    lines += [f"cudaError{rt}: {text}"] if rt else []
    lines += [f"CUDA_ERROR_{drv}: {text}"] if drv else []
    for line in lines:
        form = runtime_form(line)
        assert form is not None and form.label is label, (line, form)


def test_a_code_that_is_not_the_strings_is_not_read_as_it() -> None:
    """"Error <n>: <string>" is CUDA's only when n is the string's code: the words alone may be another program's."""
    assert runtime_form("Error 1: out of memory") is None
    assert runtime_form("Error 2: out of memory") is not None


@pytest.mark.parametrize(("name", "label"), sorted(MATH.items()))
def test_every_math_status_states_its_cause(name: str, label: Label) -> None:
    stated = cause_of(f"RuntimeError: cuDNN error: {name}" if name.startswith("CUDNN") else f"failed: {name}")
    if label is CRASH:
        assert stated is None, stated
    else:
        assert stated is not None and stated[0] is label, stated


@pytest.mark.parametrize(("name", "text", "label"), [*NCCL, *((f"hipError{n}", t, lab) for n, t, lab in HIP)])
def test_every_nccl_and_hip_name_is_read(name: str, text: str, label: Label | None) -> None:
    form = runtime_form(f"{name}: {text}")
    assert form is not None and form.label is (None if label is CRASH else label)


@pytest.mark.parametrize(("code", "name", "label"), NRT, ids=[row[1] for row in NRT])
def test_every_neuron_runtime_status_states_its_cause(code: int, name: str, label: Label | None) -> None:
    """Each NRT_STATUS, by number in torch-neuron's and tensorflow-neuron's exceptions and by name in the runtime's
    diagnostic dump (neuron-runtime/about/core-dump.rst), states the table's cause or none."""
    for line in (f"RuntimeError: Failed to execute the model status={code} message=Failure",
                 f"Execute failed: nrt_execute: status={code}, error message=\"{name}\".",
                 f"2024-Mar-03 11:02:17.0554 41210:41210 ERROR   NRT:nrt_infodump   Failure: {name} in nrt_execute()"):
        stated = cause_of(line)
        assert (stated[0] if stated else None) is label, (line, stated)


def test_a_neuron_status_the_table_gives_no_cause_states_none() -> None:
    """tensorflow-neuron's execution that completed with other errors (aws-neuron-sdk#351): NRT_EXEC_COMPLETED_WITH_ERR
    names no cause."""
    line = ("2021-11-01 06:02:18.992183: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at "
            "neuron_op.cc:44 : Internal: tensorflow/neuron/runtime/direct/adaptor.cc:446:Execute failed: nrt_execute: "
            "status=1004, error message=\"Execution was completed with other errors\".")
    assert cause_of(line) is None


def test_a_status_that_says_success_inside_a_failure_is_still_a_failure() -> None:
    """torch raised on cuDNN's CUDNN_STATUS_SUCCESS (a version mix-up, FudanNLP/UNet#3): the table reads no cause,
    and the exception's form still reads the line as a failure."""
    line = "RuntimeError: CuDNN error: CUDNN_STATUS_SUCCESS"
    assert runtime_form(line) is None
    assert read_line(line) is not None


@pytest.mark.parametrize(("lines", "label", "action"), [
    # a run whose last word is the driver's ECC report: the node is drained
    (["epoch 3 step 1200 loss 2.0417", "RuntimeError: CUDA error: uncorrectable ECC error encountered"],
     Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
    # NCCL's Cuda failure with a string of the machine's set-up: stopped, not restarted
    (["epoch 1 step 10 loss 3.1", "gpu-node-1:2345:2400 [0] include/alloc.h:103 NCCL WARN Cuda failure 'system not yet initialized'"],
     Label.CONFIG_ERROR, Action.STOP),
    # cuBLAS's architecture mismatch in torch's form: stopped, not restarted
    (["step 1 loss 2.2", "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasCreate(handle)`"],
     Label.CONFIG_ERROR, Action.STOP),
    # a status printed by a health check that passed, then training
    (["[health] cuInit -> CUDA_SUCCESS, 8 devices", "step 10 loss 2.31", "step 20 loss 2.12"], Label.HEALTHY,
     Action.WAIT),
])
def test_diagnose_reads_the_vocabulary_in_a_log(tmp_path: Path, lines: list[str], label: Label, action: Action) -> None:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
