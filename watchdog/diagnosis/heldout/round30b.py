"""Failure forms read for the misses of round issue23-heldout-30 (part B: accelerators other than NVIDIA's and
their software): the severity fields of spdlog and of emilk's loguru, libc++abi's report of an uncaught exception
and Metal's out-of-memory status, a mach exception in a macOS crash report, a compile's progress bar, a device
the runtime could not acquire, a compiler's own statement that a graph or a code object did not build, the
version handshake of a PJRT plugin, and Tensile's kernel library that could not be loaded.

Pure: no I/O. :func:`round30b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 29, :func:`round30b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error.

Each form is read where its program prints it:

* spdlog names its levels in small letters (include/spdlog/common.h SPDLOG_LEVEL_NAMES: "trace", "debug",
  "info", "warning", "error", "critical", "off") and its patterns print the level as a field: "[%l]" in the
  default pattern ("[2024-01-01 12:00:00.123] [name] [error] ..."), or between bars in the many patterns that
  copy loguru's columns ("<time> | %l | <tag> | ..."). PopTorch's logger ("[16:18:46.542] [poptorch::python]
  [critical] ..."), tt-metal's ("2026-07-18 00:48:19.094 | critical |          Always | TT_THROW: ...") and
  vMLX's ("[error] libc++abi: ...") print it so (graphcore/poptorch#1 and #3, tenstorrent/tt-xla#5788 and
  #5789, jjang-ai/vmlx#58, round issue23-heldout-30 part B: the small letters were not read, five failures
  healthy or their cause unread).
* emilk's loguru (the C++ one) prints the verbosity as a column before a bar: "<date> <time> ( <uptime>s)
  [<thread>] <file>:<line>  <v>| <message>" with v "FATL", "ERR", "WARN", "INFO" or a number (loguru.cpp
  print_preamble and the verbosity names); tt-mlir's runtime logs with it ("utils.h:62     ERR| Exception:").
* libc++ (LLVM's, the C++ library of macOS and of clang builds) reports an exception nothing caught as
  "libc++abi: terminating due to uncaught exception of type <type>: <what>" (libcxxabi/src/cxa_default_handlers.cpp;
  older releases "libc++abi.dylib: terminating with uncaught exception of type ..."): the process aborts, as
  with libstdc++'s "terminate called after throwing an instance of" (forms_errors), and the message is on the
  same line.
* Metal reports a command buffer that failed with its status (MTLCommandBufferError; IOGPU's callback codes):
  "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)" is the device out of memory. MLX
  raises it as "[METAL] Command buffer execution failed: Insufficient Memory" (mlx/backend/metal, ml-explore/mlx#479),
  llama.cpp's ggml-metal logs it as "error: Insufficient Memory (...OutOfMemory)".
* A mach exception names a process's crash in macOS's crash reports and in lldb ("Exception Type:
  EXC_BAD_ACCESS (SIGSEGV)", "stop reason = EXC_BAD_ACCESS (code=1, address=0x0)", a report's summary
  "EXC_BAD_ACCESS  SIGSEGV  KERN_INVALID_ADDRESS at 0x..." as ml-explore/mlx#4192 pastes it).
* A compile with a tqdm bar (PopTorch's "Graph compilation:  84%|...| 84/100 [1:09:59<20:26]"): the compile is at
  work until the bar reaches 100%.
* A runtime that could not acquire its devices names it in its own words: Synapse's status 20 (synDeviceAlreadyAcquired,
  "synStatus=20 [Device already acquired] Device acquire failed", synDeviceAcquire "failed with synapse error: 20"),
  PopTorch's "Failed to acquire 1 IPU(s)", libtpu's "The TPU is already in use by process with pid N": the
  devices are held by another process or are not in the partition, and every restart meets the same.
* Habana's graph compiler ("Graph compile failed. synStatus=synStatus 26 [Generic failure]", the PyTorch bridge's
  "syn compile encountered : Graph compile failed") and MIOpen's kernel build ("MIOpen Error: <file>:<line>: Code
  object build failed. Source: <kernel>", src/hipoc/hipoc_program.cpp) state that a compile failed.
* PJRT's plugin handshake: "Mismatched PJRT plugin PJRT API version (0.47) and framework PJRT API version 0.40)",
  "The plugin is likely built with a later version than the framework" (xla/pjrt/c/pjrt_c_api_helpers.cc): libtpu
  and the framework were built for different API versions.
* oneAPI's Unified Runtime and Level Zero name an allocation that failed by its status (ur_api.h
  UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY = 39, UR_RESULT_ERROR_OUT_OF_HOST_MEMORY; ze_api.h
  ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY), as PyTorch's XPU backend and SYCL
  programs quote it: "level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)".
* Poplar sorts its runtime errors (PopART's error hierarchy: poplar_application_runtime_error for a bug of the program
  or the framework; poplar_system_runtime_error for the system, as poplar_recoverable_runtime_error with the reset
  that recovers it, poplar_unrecoverable_runtime_error, poplar_unknown_runtime_error). An unrecoverable one is the
  IPU system failing, no reset of the IPU brings it back (PopTorch's "UnrecoverableError: ...
  'poplar_unrecoverable_runtime_error': ... Fabric error: connection not established ... IPUoF Server unreachable",
  graphcore/poptorch#14, which the maintainer put down to the machine): the node's devices, to drain.
* Intel's graphics compiler poisons a kernel that uses double precision on a GPU without it (IGC PoisonFP64Kernels:
  the attribute 'invalid_kernel("uses-fp64-math")'), and SYCL refuses it as "aspect fp64 is not supported" (the two
  strings PyTorch's XPU oneDNN wrapper recognises as FP64 errors): the model's float64 on an Arc GPU, configuration.
* Tensile, the kernel library of rocBLAS and hipBLASLt, loads its code objects per architecture: "rocblaslt
  error: Could not load <path>/TensileLibrary_lazy_gfx1101.dat", "rocBLAS error: Cannot read <path>/TensileLibrary.dat:
  No such file or directory": the installation has no kernels for this GPU where the library looks.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round30b_form` reads hold, besides the needles failureforms already
#: searches
NEEDLES: tuple[str, ...] = ("[error]", "[critical]", "| error", "| critical", "ERR| ", "FATL| ", "libc++abi",
                            "Insufficient Memory", "CallbackErrorOutOfMemory", "stop reason = EXC", "compilation: ",
                            "Device already acquired", "Device acquire failed", "synapse error", "Failed to acquire",
                            "already in use by", "compile failed", "build failed", "PJRT API version",
                            "version than the framework", "TensileLibrary", "_RESULT_ERROR_OUT_OF_",
                            "poplar_unrecoverable_runtime_error", "invalid_kernel(", "Required aspect ")

_HEAD = 90
#: emilk/loguru's preamble is wide (date, time, uptime, thread name, file:line padded to their widths)
_LOGURU_HEAD = 160

#: spdlog's level in small letters as a field of the record's head: "[error]" or between bars
_SPDLOG_LEVEL = re.compile(r"(?:^|[\s\]])(?:\[(error|critical)\]|\|\s*(error|critical)\s*\|)(?=\s)")
#: emilk/loguru's verbosity column after the record's file and line
_LOGURU_CPP = re.compile(r"[\w.+-]+:\d+\s+(FATL|ERR)\| ")
#: libc++abi's report of an exception nothing caught (the message after the type)
_LIBCXXABI = re.compile(r"\blibc\+\+abi(?:\.dylib)?: terminating (?:due to|with) uncaught exception of type "
                        r"(\S+?)(?:: (.*))?$")
#: Metal's out-of-memory status of a command buffer (its description and IOGPU's code)
_METAL_OOM = re.compile(r"\bInsufficient Memory\b|\bkIOGPUCommandBufferCallbackErrorOutOfMemory\b")
#: the Metal reporter of a failed command buffer, to read the status where it is Metal's
_METAL = re.compile(r"\[METAL\]|\bCommand buffer\b|\bcommand buffer\b|\bkIOGPUCommandBuffer|\bggml_metal")
#: a mach exception with the signal or under its header (crash report, lldb)
_MACH_EXCEPTION = re.compile(r"\bEXC_(?:BAD_ACCESS|BAD_INSTRUCTION|ARITHMETIC|CRASH|GUARD)\b(?:\s+\(?SIG[A-Z]+\b|"
                             r"\s+\(code=)|(?:\bException Type:|\bstop reason =)\s+EXC_[A-Z_]+")
#: a compile's tqdm bar: its description names the compile, then the percentage and the bar
_COMPILE_BAR = re.compile(r"\b[Cc]ompil(?:ation|ing|e)\b[^|:\n]{0,40}: *(\d{1,3})%\|")
#: a device the runtime could not acquire (held by another process, or not in the partition)
_NOT_ACQUIRED = re.compile(r"\bDevice already acquired\b|\bsynDeviceAcquire\b.*\bfailed with synapse error: 20\b|"
                           r"\bFailed to acquire \d+ (?:IPU|device|HPU|TPU)\(?s?\)?|"
                           r"\b(?:TPU|GPU|NPU|HPU|IPU|[Dd]evice)s? (?:is|are) already in use by (?:another )?process\b")
#: a compiler's own statement that a graph or a code object did not build
_COMPILE_FAILED = re.compile(r"\bGraph compile failed\b|\bCode object build failed\b")
#: PJRT's plugin/framework API version handshake that failed
_PJRT_MISMATCH = re.compile(r"\bMismatched PJRT plugin PJRT API version\b|\bThe plugin is likely built with a "
                            r"(?:later|earlier) version than the framework\b")
#: oneAPI's Unified Runtime and Level Zero statuses for an allocation the device or the host could not make
_UR_OOM = re.compile(r"\b(?:UR|ZE)_RESULT_ERROR_OUT_OF_(?:DEVICE|HOST)_MEMORY\b")
#: Poplar's system error that no reset of the IPU recovers from (poplar_unrecoverable_runtime_error)
_POPLAR_UNRECOVERABLE = re.compile(r"\bpoplar_unrecoverable_runtime_error\b")
#: a kernel that needs double precision on a GPU without it: IGC's poisoned kernel, SYCL's missing aspect
_NO_FP64 = re.compile(r"\binvalid_kernel\(\"uses-fp64-math\"\)|\baspect fp64 is not supported\b")
#: Tensile's kernel library not found or not readable where rocBLAS or hipBLASLt looks for it
_TENSILE_MISSING = re.compile(r"\b(?:rocblaslt|rocBLAS|hipBLASLt) error: (?:Could not load|Cannot read) "
                              r"[^\n]{0,300}?TensileLibrary")


def _stated(text: str) -> tuple[Label, str] | None:
    """The cause a line of these programs states in its own words, or None."""
    metal = "Insufficient Memory" in text or "OutOfMemory" in text
    if metal and _METAL_OOM.search(text) and _METAL.search(text):
        return Label.OOM, "Metal's out-of-memory status of a command buffer"
    if "_RESULT_ERROR_OUT_OF_" in text and _UR_OOM.search(text):
        return Label.OOM, "oneAPI's out-of-memory status (Unified Runtime, Level Zero)"
    if "poplar_unrecoverable" in text and _POPLAR_UNRECOVERABLE.search(text):
        return Label.HARDWARE_ERROR, "Poplar's unrecoverable system error (the IPU system must be recovered)"
    if "fp64" in text and _NO_FP64.search(text):
        return Label.CONFIG_ERROR, "a kernel that needs double precision on a GPU without it"
    if _NOT_ACQUIRED.search(text):
        return Label.CONFIG_ERROR, "a device the runtime could not acquire (held by another process or not there)"
    if ("compile failed" in text or "build failed" in text) and _COMPILE_FAILED.search(text):
        return Label.COMPILE_ERROR, "the compiler's statement that a graph or a code object did not build"
    if ("PJRT API version" in text or "version than the framework" in text) and _PJRT_MISMATCH.search(text):
        return Label.CONFIG_ERROR, "a PJRT plugin built for another API version than the framework"
    if "TensileLibrary" in text and _TENSILE_MISSING.search(text):
        return Label.CONFIG_ERROR, "Tensile's kernel library for this GPU not found where the BLAS library looks"
    return None


def round30b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "libc++abi" in text and (uncaught := _LIBCXXABI.search(text)) is not None:
        stated = _stated(uncaught.group(2) or "")
        return Form(FormKind.CRASH, "libc++abi's report of an uncaught exception", stated[0] if stated else None)
    if "EXC_" in text and _MACH_EXCEPTION.search(text):
        return Form(FormKind.CRASH, "a mach exception (macOS crash report)")
    if ("ompil" in text) and (bar := _COMPILE_BAR.search(text)) is not None:
        done = int(bar.group(1)) >= 100
        return Form(FormKind.COMPILE_DONE if done else FormKind.COMPILE_RUNNING, "a compile's progress bar")
    level = None
    if "error" in text or "critical" in text:
        m = _SPDLOG_LEVEL.search(text, 0, _HEAD)
        if m is not None:
            level = m.group(1) or m.group(2)
    if level is None and ("ERR| " in text or "FATL| " in text):
        m = _LOGURU_CPP.search(text, 0, _LOGURU_HEAD)
        if m is not None:
            level = m.group(1)
    stated = _stated(text)
    if level is not None:
        kind = FormKind.CRASH if level == "FATL" else FormKind.ERROR
        return Form(kind, f"a record of level {level} (spdlog, loguru)", stated[0] if stated else None)
    if stated is not None:
        return Form(FormKind.ERROR, stated[1], stated[0])
    return None


def round30b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round30b_form(text)) or _stated(text)
