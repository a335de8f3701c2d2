"""Failure forms read for the misses of round issue23-heldout-25 (half B): an allocator's failure in its own
layout (ggml's device buffers, tcmalloc's large allocation answered NULL), CUDA's own check macro of the samples,
CUDA's "system not yet initialized" and systemd's record of a unit that failed.

Pure: no I/O. :func:`round25b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 24, and :func:`round25b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* An allocation call named as failed with the runtime's out-of-memory words: ggml's CUDA backend
  (ggml-cuda.cu ``ggml_backend_cuda_buffer_type_alloc_buffer``: ``"%s: allocating %.2f MiB on device %d: cudaMalloc
  failed: %s"`` with ``cudaGetErrorString``, "out of memory"; its HIP build prints the same words), under
  llama.cpp, ollama, whisper.cpp and the servers built on them, with or without ggml's level letter ("E "). The
  device could not give the buffer: out of memory (round issue23-heldout-25: ik-llama-cpp-749, llama-cpp-16725;
  round 24's llama-cpp-20431, all read as healthy). Gated by the out-of-memory words: a cudaMalloc that failed
  for another reason (an invalid argument, a driver fault) states another cause.
* Vulkan's refusal of memory, in ggml's Vulkan backend (ggml-vulkan.cpp: ``"ggml_vulkan: Device memory allocation of
  size %zu failed."`` and the vk::SystemError it caught, ``"vk::Device::allocateMemory: ErrorOutOfDeviceMemory"``) and
  in the Vulkan API's own result names (VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY): the AMD, Intel
  and consumer cards' llama.cpp and stable-diffusion.cpp report a full card this way. Out of memory (a request
  over the driver's per-allocation cap is refused the same way: memory asked that the device will not give).
* A buffer an allocator could not give, in ggml's and llama.cpp's words, which follow the failed call and are
  often all that is pasted: ggml-alloc.c ``"%s: failed to allocate %s buffer of size %zu"`` (the backend buffer
  type's name: CUDA0, ROCm0, Vulkan0, Metal, CPU), llama.cpp's ``"unable to allocate %s buffer"`` and
  ``"failed to allocate compute buffers"`` / ``"failed to allocate buffer for kv cache"``. A buffer of memory:
  out of memory, whatever the record's level but a quiet one.
* tcmalloc's report of a large allocation answered NULL: gperftools src/tcmalloc.cc ``ReportLargeAlloc`` prints
  ``"tcmalloc: large alloc %zu bytes == %p @ "`` and the frames, before returning the result; glibc prints a NULL
  ``%p`` as ``(nil)``. With an address the report is a note (a large allocation that succeeded: healthy runs print
  it); with ``(nil)`` the host could not give the memory: out of memory. A size no host has (above 64 TiB) or 0 is
  a size computed wrong (an integer underflow, ``malloc(-1)`` reported as 0) that tcmalloc also refuses: a bug,
  not memory pressure, left to the crash readers.
* CUDA's check macro of its samples and of the programs that copy it: helper_cuda.h ``check``: ``"CUDA error at
  %s:%d code=%d(%s) \\"%s\\""`` with the error's enum name. An error; the enum name states the cause where CUDA's
  runtime API documentation does: cudaErrorMemoryAllocation is memory; cudaErrorSystemNotReady ("verify the system
  configuration is in a valid state and all required driver daemons are actively running"),
  cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaErrorNoKernelImageForDevice and
  cudaErrorSystemDriverMismatch are the machine's set-up; cudaErrorECCUncorrectable is the device's fault
  (round issue23-heldout-25: pytorch-35710, bandwidthTest's 802, read as healthy).
* CUDA's error 802 in its own words, whoever prints them: ``cudaGetErrorString(cudaErrorSystemNotReady)`` is
  "system not yet initialized" (and the driver API's CUDA_ERROR_SYSTEM_NOT_READY): the NVSwitch fabric or a
  driver daemon the GPUs need is not up (the fabric manager on HGX/DGX systems), a set-up a restart meets again
  (round issue23-heldout-25: gpu-burn-92, read as a crash and restarted).
* systemd's record of a unit that failed: src/core/service.c ``"%s process exited, code=%s, status=%i/%s"``
  (Main or Control process) with a status other than 0/SUCCESS, and src/core/unit.c ``"Failed with result
  '%s'."`` with a result other than success: the service the job is (ollama, a model server, the fabric manager)
  stopped in failure (round issue23-heldout-25: cube-studio-29, read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: The literals the lines these forms read hold, besides the failure forms' needles
NEEDLES: tuple[str, ...] = ("Malloc", "MemAlloc", "HostAlloc", "to allocate ", "large alloc ", "allocation of size",
                            "OutOfDeviceMemory", "OutOfHostMemory", "OUT_OF_DEVICE_MEMORY", "OUT_OF_HOST_MEMORY",
                            "CUDA error at ",
                            "not yet initialized", "SYSTEM_NOT_READY", "SystemNotReady", "process exited, code=",
                            "Failed with result '")
#: the literals of the allocator forms (a line without one of them holds none)
_ALLOCATOR_WORDS: tuple[str, ...] = NEEDLES[:10]

#: an allocation call of a GPU runtime (CUDA runtime and driver API, HIP) named as failed, out of memory
_ALLOC_CALL_OOM = re.compile(r"\b(?:cuda|hip|cu)(?:Malloc|MemAlloc|HostAlloc)\w*(?:\(\))? failed\b:?\s*"
                             r"(?:out of memory|cudaErrorMemoryAllocation|hipErrorOutOfMemory|"
                             r"CUDA_ERROR_OUT_OF_MEMORY)\b")
#: a buffer an allocator could not give (ggml-alloc.c, llama.cpp): "failed to allocate CUDA0 buffer of size N",
#: "unable to allocate CUDA0 buffer", "failed to allocate compute buffers", "failed to allocate buffer for kv cache"
_BUFFER_UNALLOCATED = re.compile(r"\b(?:failed|unable) to allocate (?:[\w.-]+ ){0,2}buffers?"
                                 r"(?: of size \d+| for [\w ]+)?\s*$|"
                                 r"\b(?:failed|unable) to allocate [\w.-]+ buffer of size \d+\b")
#: Vulkan's refusal of device or host memory: ggml-vulkan.cpp's "Device memory allocation of size %zu failed." and
#: the vk::SystemError it caught (vulkan.hpp's to_string of the result: "vk::Device::allocateMemory:
#: ErrorOutOfDeviceMemory"), or the C API's result names
_VULKAN_OOM = re.compile(r"\bDevice memory allocation of size \d+ failed\b|"
                         r"\b(?:ErrorOutOf(?:Device|Host)Memory|VK_ERROR_OUT_OF_(?:DEVICE|HOST)_MEMORY)\b")
#: tcmalloc's report of a large allocation it answered with NULL, and the size asked
_TCMALLOC_NIL = re.compile(r"\btcmalloc: large alloc (\d+) bytes == \(nil\)")
#: the largest request that can be memory running out (64 TiB): above it the size was computed wrong
_PLAUSIBLE_REQUEST = 1 << 46
#: tcmalloc's note of a large allocation it granted: the size and the address it returned
_TCMALLOC_GRANTED = re.compile(r"\btcmalloc: large alloc (\d+) bytes\W{0,4} == 0x[0-9a-f]+\b")
#: CUDA samples' check macro (helper_cuda.h): the call's file and line, the error's number and enum name
_CUDA_CHECK = re.compile(r"\bCUDA error at \S+:\d+ code=(\d+)\((\w+)\) \"")
#: the enum names whose meaning CUDA's runtime API documentation states as a cause
_CUDA_ERROR_CAUSES: dict[str, Label] = {
    "cudaErrorMemoryAllocation": Label.OOM,
    "cudaErrorSystemNotReady": Label.CONFIG_ERROR,
    "cudaErrorInsufficientDriver": Label.CONFIG_ERROR,
    "cudaErrorNoDevice": Label.CONFIG_ERROR,
    "cudaErrorNoKernelImageForDevice": Label.CONFIG_ERROR,
    "cudaErrorSystemDriverMismatch": Label.CONFIG_ERROR,
    "cudaErrorECCUncorrectable": Label.HARDWARE_ERROR,
}
#: CUDA's error 802 in the runtime's words and in the enums' names
_SYSTEM_NOT_READY = re.compile(r"\bsystem not yet initialized\b|\bcudaErrorSystemNotReady\b|"
                               r"\bCUDA_ERROR_SYSTEM_NOT_READY\b")
#: systemd's record of a unit's process that exited in failure, or of the unit's failed result
_UNIT_FAILED = re.compile(r"\b(?:Main|Control) process exited, code=(?:exited|killed|dumped), status=(\d+)/(\w+)|"
                          r"\bFailed with result '([\w-]+)'\.")


def round25b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None (a quiet record's words are not an error)."""
    return _read(text, quiet_is_error=False)


def _read(text: str, *, quiet_is_error: bool) -> Form | None:
    """This round's form in ``text``; with ``quiet_is_error`` a record at a quiet level is read too (its line is
    already known to be an error, and the question is only the cause its words state)."""
    quiet = not quiet_is_error and head_level(text) in QUIET_LEVELS
    if any(word in text for word in _ALLOCATOR_WORDS) and (allocator := _allocator_form(text, quiet)) is not None:
        return allocator
    if "CUDA error at " in text and (check := _CUDA_CHECK.search(text)) is not None:
        return Form(FormKind.ERROR, f"CUDA's check of a call that failed ({check.group(2)}, code {check.group(1)})",
                    _CUDA_ERROR_CAUSES.get(check.group(2)))
    if (not quiet and ("not yet initialized" in text or "NOT_READY" in text or "NotReady" in text)
            and _SYSTEM_NOT_READY.search(text)):
        return Form(FormKind.ERROR, "CUDA's error 802, the system not ready (the NVSwitch fabric or a driver daemon "
                    "is not up)", Label.CONFIG_ERROR)
    if ("process exited, code=" in text or "Failed with result '" in text) and (
            unit := _UNIT_FAILED.search(text)) is not None:
        status, result = unit.group(1), unit.group(3)
        if status == "0" or result == "success":
            return None
        return Form(FormKind.ERROR, "systemd's record of a unit that failed")
    return None


def _allocator_form(text: str, quiet: bool) -> Form | None:
    """An allocator's failure: a GPU allocation call out of memory, a buffer not given, tcmalloc's NULL."""
    if (_ALLOC_CALL_OOM.search(text) or _VULKAN_OOM.search(text)
            or (not quiet and _BUFFER_UNALLOCATED.search(text))):
        return Form(FormKind.ERROR, "an allocator that could not give the memory asked for", Label.OOM)
    nil = _TCMALLOC_NIL.search(text)
    if nil is not None and 0 < int(nil.group(1)) <= _PLAUSIBLE_REQUEST:
        return Form(FormKind.ERROR, "tcmalloc's large allocation answered NULL: the host's memory ran out", Label.OOM)
    return None


def large_allocation(text: str) -> int | None:
    """The size of a large allocation tcmalloc notes it granted in ``text`` (bytes), or None."""
    if "large alloc " not in text:
        return None
    granted = _TCMALLOC_GRANTED.search(text)
    return None if granted is None else int(granted.group(1))


def round25b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(_read(text, quiet_is_error=True))
