# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-20 (CUDA's contained error, NCCL's failure to bind
NVLink SHARP multicast memory with its statement that the Fabric Manager or the NVSwitches are at fault, torch's
warning that CUDA could not be initialised), each as a rule of its family, with real lines and the near misses the
rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or from a public log of the same program
(named), or is the format a project's source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import FormRow, cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: the warning as torch prints it on a node whose Fabric Manager has not started (corpus dstack-2348)
INIT_802 = "/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)"
#: ... and older torch's on a machine with no driver at all (c10/cuda/CUDAFunctions.cpp device_count_impl's
#: "Found no NVIDIA driver on your system", caught by device_count), filled in
INIT_NO_DRIVER = "/home/user/venv/lib/python3.8/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx (Triggered internally at  /pytorch/c10/cuda/CUDAFunctions.cpp:100.)"

FORMS: list[FormRow] = [
    # CUDA's string for cudaErrorContained, as torch raises it from a vLLM worker's shutdown (corpus vllm-backport-62)
    ("(Worker_TP2 pid=1304) torch.AcceleratorError: CUDA error: Invalid access of peer GPU memory over nvlink or a hardware error",
     E, Label.HARDWARE_ERROR, "vllm-backport-62"),
    # ... as a serving pipeline's logger records the exception it caught (corpus scope-749)
    ("scope.server.pipeline_processor - ERROR - Error processing chunk for longlive: CUDA error: Invalid access of peer GPU memory over nvlink or a hardware error",
     E, Label.HARDWARE_ERROR, "scope-749"),
    # ... in NCCL's CUDACHECK (include/checks.h: WARN("Cuda failure '%s'", cudaGetErrorString(err))), filled in:
    # "failure" is no needle, the string's own is
    ("gpu-node-3:2683:2826 [3] enqueue.cc:1556 NCCL WARN Cuda failure 'Invalid access of peer GPU memory over nvlink or a hardware error'",
     E, Label.HARDWARE_ERROR, "NCCL include/checks.h CUDACHECK"),
    # NCCL's NVLS transport failing cuMulticastBindMem, as torch's DistBackendError quotes it after "Last error:"
    # (corpus pytorch-177472; the trailing space is the paste's)
    ("Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'. ",
     E, Label.HARDWARE_ERROR, "pytorch-177472"),
    # ... the WARN itself (src/transport/nvls.cc, filled in: CUDA error 1 'invalid argument' as RunPod pods report it)
    ("node1:1204:1290 [0] transport/nvls.cc:201 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 at MC group 0 offset 0 : CUDA error 1 'invalid argument'.",
     E, Label.HARDWARE_ERROR, "NCCL src/transport/nvls.cc"),
    # torch's device count refusing CUDA (corpus dstack-2348: Error 802, CUDA_ERROR_SYSTEM_NOT_READY)
    (INIT_802, E, Label.CONFIG_ERROR, "dstack-2348"),
    # ... in c10's own logger (corpus awsome-distributed-ai-467: Error 803, a driver and a CUDA compat mismatch)
    ("[W CUDAFunctions.cpp:108] Warning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination (function operator())",
     E, Label.CONFIG_ERROR, "awsome-distributed-ai-467"),
    # ... device_count_impl's cudaErrorUnknown message (c10/cuda/CUDAFunctions.cpp), filled in
    ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:107: UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)",
     E, Label.CONFIG_ERROR, "c10/cuda/CUDAFunctions.cpp"),
    # ... a driver older than the toolkit (c10/cuda/CUDAFunctions.cpp's message, filled in: a 12.8 driver)
    ("/root/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py:187: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)",
     E, Label.CONFIG_ERROR, "c10/cuda/CUDAFunctions.cpp"),
    # ... a device's own fault in the default message (cudaGetErrorString of cudaErrorECCUncorrectable), filled in
    ("/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:141: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 214: uncorrectable ECC error encountered (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)",
     E, Label.HARDWARE_ERROR, "c10/cuda/CUDAFunctions.cpp"),
]

NEAR_MISSES = [
    # a program's own report of CUDA coming up
    "CUDA initialization: OK (8 devices)",
    # NCCL's NVLS in the words of a set-up (src/transport/nvls.cc INFO "NVLS multicast support is %savailable on
    # dev %d"; corpus aws-k8s-tester-454, the OFI plugin's tuning)
    "node1:1204:1204 [0] NCCL INFO NVLS multicast support is available on dev 0",
    "[1,6]<stdout>:bert-mpi-training-worker-0:27:575 [6] NCCL INFO NET/OFI Setting NCCL_NVLS_CHUNKSIZE to 512KiB",
    # a launcher's note on the workaround
    "export NCCL_NVLS_ENABLE=0  # no Fabric Manager inside this container",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines whose words state a cause: (line, the cause)
CAUSES: list[tuple[str, Label]] = [
    # the contained error in a C++ terminate's what() (c10's CUDA check thrown from a destructor), filled in
    ("  what():  CUDA error: Invalid access of peer GPU memory over nvlink or a hardware error", Label.HARDWARE_ERROR),
]


@pytest.mark.parametrize("line", [
    # the enum's names (exctaxonomy._CUDA_ERRORS): the driver's, as a binding raises it, and the runtime's, as torch's
    # message points at it (corpus vllm-backport-62), filled in and verbatim
    "RuntimeError: CUDA driver error: CUDA_ERROR_CONTAINED",
    "(Worker_TP2 pid=1304) Search for `cudaErrorContained' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.",
])
def test_the_contained_errors_name_is_the_device(line: str) -> None:
    reading = read_error(line)
    assert reading is not None and reading.label is Label.HARDWARE_ERROR

#: error lines near those forms that state no cause
NO_CAUSE = [
    # NCCL's NVLS transport failing without its statement of the cause (corpus nccl-976): the CUDA error is all
    "transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'",
    # torch's report of NCCL's unhandled CUDA error, before its "Last error:" (corpus pytorch-177472)
    "torch.distributed.DistBackendError: NCCL error in: /var/lib/jenkins/workspace/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.3 ",
    # CUDA's errors that name no hardware
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # CUDA could not be brought up and nothing went on: the node's set-up, stopped
    ([INIT_802, "CUDA available: False"], Label.CONFIG_ERROR, Action.STOP),
    # ... and training went on after it (on the CPU, or on devices another call brought up): not the job's end
    ([INIT_802, *PROGRESS], Label.HEALTHY, Action.WAIT),
    # older torch's warning on a machine with no driver stays a Python warning (a CPU machine as often as not)
    ([*PROGRESS, INIT_NO_DRIVER], Label.HEALTHY, Action.WAIT),
    # a contained error ends the worker: the device, drained
    ([*PROGRESS, FORMS[0][0]], Label.HARDWARE_ERROR, Action.DRAIN_AND_RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    # a vLLM worker's contained error on failing HBM, then the API server's own error record: the device's fault
    ("hardware_error/vllm-backport-62-worker-cudaerrorcontained-failing-hbm.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    # a serving worker's contained error over NVLink, logged by its pipeline and raised
    ("hardware_error/scope-749-fal-worker-cudaerrorcontained-nvlink.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    # NCCL's NVLS bind failure quoted after torch's "Last error:": the node's NVSwitch fabric
    ("hardware_error/pytorch-177472-nvls-multicast-bind-fabric-manager-failure.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    # torch's warning of CUDA it could not initialise (Error 802), then no CUDA: the node's set-up
    ("config_error/dstack-2348-torch-cuda-init-802-fabricmanager.log", Label.CONFIG_ERROR, Action.STOP),
], ids=["contained-hbm", "contained-nvlink", "nvls-bind", "cuda-init-802"])
def test_the_corpus_excerpt(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
