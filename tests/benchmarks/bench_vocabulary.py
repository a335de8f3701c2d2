"""How much of the accelerator runtimes' error vocabularies ``diagnose`` reads right (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_vocabulary.py [--wrong]

Every entry of the tables of :mod:`neuron_watch.diagnosis.forms_runtimes` (CUDA's runtime and driver codes, the
math libraries' statuses, NCCL's results, HIP's codes, the Neuron runtime's statuses: each read from its library's
header, not from a log) is
written in each format programs print it in (torch's ``CUDA error: <string>``, its legacy ``cuda runtime error
(<code>) : <string>`` and its warning ``Error <code>: <string>`` when the runtime cannot count the devices, CUDA's
samples' check macro, CuPy's exceptions, NCCL's ``Cuda failure '<string>'``, TensorFlow's records, torch's ``NCCL
error in:``...), as the last line of a small log whose training progressed before it, and diagnosed as a user runs
``neuron-watch diagnose``.
Printed per family: the probes, those read with the entry's label, with the action that label calls for, and those
read as healthy. An entry the tables give no cause must read as a failure (any label but healthy, an action other
than wait). Then the near misses (a success status, a status a health check printed, the words in prose) as the
middle line of a healthy log: each must stay healthy. ``--wrong`` lists each probe read otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.forms_runtimes import CUDA, HIP, MATH, NCCL, NRT
from neuron_watch.events import Action, Label
from tests.fixtures.corpus_score import EXPECTED_ACTIONS

PROGRESS = ["epoch 1 step 100 loss 2.3412 lr 3.0e-04", "epoch 1 step 200 loss 2.1187 lr 3.0e-04"]

#: torch's one-line description of each NCCL result (torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr)
NCCL_DETAIL = {
    "ncclUnhandledCudaError": "Call to CUDA function failed.",
    "ncclSystemError": "System call (e.g. socket, malloc) or external library call failed or device error. ",
    "ncclInternalError": "Internal check failed.",
    "ncclInvalidArgument": "Invalid value for an argument.",
    "ncclInvalidUsage": "This usually reflects invalid usage of NCCL library.",
    "ncclRemoteError": "A call failed possibly due to a network error or a remote process exiting prematurely.",
}

#: the prefix each library's status is printed with by torch (c10/cuda/CUDAException, ATen's cuDNN, cuFFT and
#: cuSOLVER checks), per the status's library
MATH_TORCH = {
    "CUBLAS": "RuntimeError: CUDA error: {name} when calling `cublasCreate(handle)`",
    "CUDNN": "RuntimeError: cuDNN error: {name}",
    "CUFFT": "RuntimeError: cuFFT error: {name}",
    "CUSOLVER": "RuntimeError: cusolver error: {name}, when calling `cusolverDnCreate(handle)`",
    "CUSPARSE": "RuntimeError: CUDA error: {name} when calling `cusparseCreate(handle)`",
    "CURAND": "RuntimeError: curand error: {name}",
    "NVRTC": "RuntimeError: nvrtc: error: {name}",
}

#: lines with the same words that are no failure, in a log that goes on
NEAR_MISSES = [
    "cudaGetLastError() returned cudaSuccess after warm-up",
    "CUDA error checking: CUDA_LAUNCH_BLOCKING=1 set for debugging",
    "cublasLtMatmul returned CUBLAS_STATUS_SUCCESS for all 12 heuristics",
    "nccl async init: ncclCommGetAsyncError -> ncclInProgress, polling",
    "gpu-node-1:2345:2400 [0] NCCL INFO cudaDriverVersion 12020",
    "health check: cudaErrorNotReady from cudaEventQuery (event still pending), ok",
    "plan created: CUFFT_R2C batch=64 size=4096",
    "[health] cuInit -> CUDA_SUCCESS, 8 devices",
    "hipGetLastError: hipSuccess",
    "-- Build option CUDA_ERROR_CHECK=ON (cudaErrorChecking enabled)",
]


def probes() -> Iterator[tuple[str, str, Label | None]]:
    """(family, line, the label the table gives the entry or None) for every entry in every printed format."""
    for code, rt, drv, text, label in CUDA:
        yield "cuda", f"RuntimeError: CUDA error: {text}", label
        yield "cuda", f"gpu-node-1:2345:2400 [0] include/alloc.h:103 NCCL WARN Cuda failure '{text}'", label
        yield "cuda", f"RuntimeError: cuda runtime error ({code}) : {text} at /pytorch/aten/src/THC/THCGeneral.cpp:50",\
            label
        if label is not Label.OTHER_CRASH:
            # (torch warns so when it counts the devices, before any kernel ran: no kernel's crash is printed so)
            yield "cuda", (f"UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you "
                           f"run some cuda functions before calling NumCudaDevices() that might have already set an "
                           f"error? Error {code}: {text} (Triggered internally at "
                           f"../c10/cuda/CUDAFunctions.cpp:108.)"), label
        # other programs' prefixes: Triton's driver.c ("Triton Error [CUDA]: "), TensorRT's error recorder ("Error
        # Code 1: Cuda Runtime (<string>)"), ONNX Runtime's CUDA_CALL ("CUDA failure <code>: <string> ; GPU=..."),
        # PaddlePaddle's enforce ("CUDA error(<code>), <string>."), darknet's check_error ("CUDA Error: ")
        yield "cuda+", f"RuntimeError: Triton Error [CUDA]: {text}", label
        yield "cuda+", (f"[05/01/2024-12:00:00] [TRT] [E] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: "
                        f"Cuda Runtime ({text})"), label
        yield "cuda+", (f"onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : CUDA "
                        f"failure {code}: {text} ; GPU=0 ; hostname=gpu-node-1 ; expr=cudaDeviceSynchronize(); "), label
        yield "cuda+", f"OSError: (External) CUDA error({code}), {text}. ", label
        yield "cuda+", f"CUDA Error: {text}", label
        # TensorRT 7's allocator, PyCUDA's exception
        yield "cuda+", f"[E] [TRT] ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: {code} ({text})", label
        yield "cuda+", f"pycuda._driver.LogicError: cuMemAlloc failed: {text}", label

        if rt:
            yield "cuda", f'CUDA error at train.cu:88 code={code}(cudaError{rt}) "cudaDeviceSynchronize()"', label
            yield "cuda", f"cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaError{rt}: {text}", label
        if drv:
            yield "cuda", f"RuntimeError: CUDA driver error: {text}", label
            yield "cuda", f"cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_{drv}: {text}", label
    for name, label in MATH.items():
        yield "math", MATH_TORCH[name.split("_")[0]].format(name=name), label
        yield "math", (f"2024-05-01 12:00:00.000000: E tensorflow/stream_executor/cuda/cuda_blas.cc:226] "
                       f"failed to create handle: {name}"), label
    for name, text, label in NCCL:
        yield "nccl", (f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                       f"ProcessGroupNCCL.cpp:1970, {text} (run with NCCL_DEBUG=INFO for details), "
                       f"NCCL version 2.19.3"), label
        yield "nccl", f"{name}: {NCCL_DETAIL[name]}", label
    for name, text, label in HIP:
        yield "hip", f"RuntimeError: HIP error: {text}", label
        yield "hip", f"hipError{name}: {text}", label
    for code, name, label in NRT:
        # torch-neuron's exception, tensorflow-neuron's (aws-neuron-sdk#351), the runtime's diagnostic dump
        # (neuron-runtime/about/core-dump.rst)
        yield "neuron", f"RuntimeError: Failed to execute the model status={code} message={name}", label
        yield "neuron", (f"tensorflow.python.framework.errors_impl.InternalError: tensorflow/neuron/runtime/direct/"
                         f"adaptor.cc:446:Execute failed: nrt_execute: status={code}, error message=\"{name}\"."), label
        yield "neuron", (f"2024-May-01 12:00:00.0000 4242:4242 ERROR   NRT:nrt_infodump                   "
                         f"Failure: {name} in nrt_execute()"), label


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wrong", action="store_true", help="list each probe read otherwise")
    args = parser.parse_args()
    n: Counter[str] = Counter()
    label_right: Counter[str] = Counter()
    action_right: Counter[str] = Counter()
    healthy: Counter[str] = Counter()
    wrong: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.log"
        for family, line, label in probes():
            fam = family if label is not None else f"{family} (no cause)"
            log.write_text("\n".join([*PROGRESS, line]) + "\n")
            verdict = diagnose_paths([str(log)]).verdict
            n[fam] += 1
            healthy[fam] += verdict.label is Label.HEALTHY
            if label is None:
                ok_label = verdict.label not in (Label.HEALTHY, Label.COMPILING, Label.UNOBSERVED)
                ok_action = verdict.action is not Action.WAIT
            else:
                ok_label = verdict.label is label
                ok_action = verdict.action in EXPECTED_ACTIONS[label]
            label_right[fam] += ok_label
            action_right[fam] += ok_action
            if not (ok_label and ok_action):
                wrong.append(f"  {fam:<18} want {label.value if label else 'a failure':<15} said "
                             f"{verdict.label.value}/{verdict.action.value:<18} {line}")
        stayed = 0
        for line in NEAR_MISSES:
            log.write_text("\n".join([PROGRESS[0], line, PROGRESS[1]]) + "\n")
            verdict = diagnose_paths([str(log)]).verdict
            stayed += verdict.label is Label.HEALTHY
            if verdict.label is not Label.HEALTHY:
                wrong.append(f"  {'near miss':<18} want healthy         said {verdict.label.value:<25} {line}")
    print(f"{'family':<20}{'probes':>7}{'label':>7}{'action':>8}{'healthy':>9}")
    for fam in sorted(n):
        print(f"{fam:<20}{n[fam]:>7}{label_right[fam]:>7}{action_right[fam]:>8}{healthy[fam]:>9}")
    total = sum(n.values())
    print(f"{'all':<20}{total:>7}{sum(label_right.values()):>7}{sum(action_right.values()):>8}"
          f"{sum(healthy.values()):>9}")
    print(f"near misses kept healthy: {stayed}/{len(NEAR_MISSES)}")
    if args.wrong:
        print("\n".join(wrong))
    return 0


if __name__ == "__main__":
    sys.exit(main())
