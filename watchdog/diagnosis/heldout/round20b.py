"""Failure forms read for the misses of round issue23-heldout-20 (half B): CUDA's error containment of a device
fault, NCCL's failure to bind NVLink SHARP multicast memory with its statement of where the fault lies, and
torch's warning that CUDA could not be initialised.

Pure: no I/O. :func:`round20b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 18, and :func:`round20b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` first, beside
round18b's (a device's fault stated in CUDA's or NCCL's words outranks the component that met it: a vLLM worker's
shutdown, an exception a server's pipeline caught and logged).

Each form is read where its program prints it:

* CUDA's error containment (the runtime's cudaErrorContained, 226; the driver's CUDA_ERROR_CONTAINED, CUDA 12's):
  "an exception occurred on the device that is now contained by the GPU's error containment capability. Common
  causes are - a. Certain types of invalid accesses of peer GPU memory over nvlink b. Certain classes of
  hardware errors ... the process must be terminated and relaunched" (the runtime API's cudaError documentation,
  group__CUDART__TYPES, which the message itself points at: ``Search for `cudaErrorContained' in ...``). Its string,
  as torch's ``CUDA error: <string>`` (torch.AcceleratorError) and NCCL's ``Cuda failure '<string>'`` print it, is
  "Invalid access of peer GPU memory over nvlink or a hardware error". The GPU's hardware (its HBM, its NVLink; the
  Xid 94/95 contained and uncontained ECC errors beside it in the driver's log) has faulted and CUDA has fenced the
  process off; relaunched on the same node it meets the same device (round issue23-heldout-20: vllm-backport-62, a
  worker whose failing HBM raised it; scope-749, a serving worker over NVLink). The enum names are exctaxonomy's
  (``_CUDA_ERRORS``).
* NCCL's NVLS transport (src/transport/nvls.cc, on cuMulticastBindMem's failure: ``WARN("Failed to bind NVLink SHARP
  (NVLS) Multicast memory of size %zu ... : CUDA error %d '%s'.\\nThis is usually caused by a system or
  configuration error in the Fabric Manager or NVSwitches.\\nDisable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid
  this error in the future.")``, returning ncclUnhandledCudaError, which torch's DistBackendError then quotes after
  ``Last error:``): the NVSwitch fabric of the node (its Fabric Manager, its NVSwitches) could not bind the
  multicast memory NCCL asked for. NCCL states the cause as the node's fabric, which a restart on the same node meets
  again (the corpus's other NVLS failure, nccl-976, is labelled so too): a hardware fault, the node to drain (round
  issue23-heldout-20: pytorch-177472, CUDA error 401 from the bind). The bind's line is read (it holds the needle
  "Failed"); the advice lines after it hold none and are left to it.
* torch's device count (c10/cuda/CUDAFunctions.cpp, device_count: ``catch (const c10::Error& ex) {
  TORCH_WARN("CUDA initialization: ", ex.msg()); return 0; }``, the message one of device_count_impl's refusals:
  "Found no NVIDIA driver on your system", "The NVIDIA driver on your system is too old", "CUDA driver
  initialization failed, you might not have a CUDA gpu.", "CUDA unknown error - this may be due to an incorrectly set
  up environment", "Unexpected error from cudaGetDeviceCount() ... Error <n>: <string>"). torch swallows the error
  and counts no GPU: the job goes on without CUDA ("CUDA available: False") or fails later for want of it. CUDA could
  not be brought up on this machine as it is set up -- a driver missing or older than the toolkit, a Fabric Manager
  not yet running (Error 802, "system not yet initialized", CUDA_ERROR_SYSTEM_NOT_READY), devices hidden by the
  environment: a configuration fault no restart clears (round issue23-heldout-20: dstack-2348, Error 802 on an
  H100 node; the corpus's Error 803, awsome-distributed-ai-467, is labelled so too). A message that states a fault of
  the device itself (an uncorrectable ECC or NVLink error, the containment above) is read as that fault. Unlike its
  neighbours it is a warning, not an error: its needle is this module's.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: the
#: capitals) that lines of these forms hold when they hold none of the failure forms' other needles: torch's
#: warning, and NCCL's ``Cuda failure '<string>'`` of a contained error ("failure" is not a needle).
NEEDLES: tuple[str, ...] = ("CUDA initialization: ", "Invalid access of peer GPU memory")

#: CUDA's string for cudaErrorContained / CUDA_ERROR_CONTAINED
_CONTAINED = re.compile(r"\bInvalid access of peer GPU memory over nvlink or a hardware error\b", re.IGNORECASE)
#: NCCL's NVLS transport failing to bind multicast memory (its statement of where the fault lies follows in the same
#: WARN; the bind's line is the one that holds a needle, "Failed")
_NVLS_BIND = re.compile(r"\bFailed to bind NVLink SHARP \(NVLS\) Multicast memory\b")
#: torch's warning of a device count that failed, the message after it (each of device_count_impl's refusals says
#: "error", "failed" or "driver"; a program's own "CUDA initialization: OK" is none of them)
_CUDA_INIT = re.compile(r"\bCUDA initialization: (?=.*(?i:error|fail|driver))(\S.*)")
#: a message of a device's own fault (CUDA's strings for an uncorrectable ECC or NVLink error)
_DEVICE_FAULT = re.compile(r"\buncorrectable (?:ECC|NVLink) error\b")


def round20b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "peer GPU memory" in text and _CONTAINED.search(text):
        return Form(FormKind.ERROR, "CUDA's contained error (cudaErrorContained): the device faulted",
                    Label.HARDWARE_ERROR)
    if "NVLS" in text and _NVLS_BIND.search(text):
        return Form(FormKind.ERROR, "NCCL unable to bind NVLink SHARP multicast memory: the node's NVSwitch fabric",
                    Label.HARDWARE_ERROR)
    if "CUDA initialization" in text and (init := _CUDA_INIT.search(text)) is not None:
        if _DEVICE_FAULT.search(init.group(1)):
            return Form(FormKind.ERROR, "CUDA unable to initialise for the device's own fault", Label.HARDWARE_ERROR)
        return Form(FormKind.ERROR, "torch's warning that CUDA could not be initialised (no GPU counted)",
                    Label.CONFIG_ERROR)
    return None


def round20b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    return stated_cause(round20b_form(text))
