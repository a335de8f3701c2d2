"""Failure forms read for the misses of round issue23-heldout-29 (part C: forum ecosystems and the frameworks
the corpus is thin on): NCCL's result string under another library's wrapper, MXNet's cuDNN autotuning,
LightGBM's socket retries, dmlc's native frames, ps-lite's failed address lookup, and TensorFlow's probe for
an optional library, which is a warning.

Pure: no I/O. :func:`round29c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 28, :func:`round29c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error, and :func:`round29c_quiet` by ``read_line`` before any form: a line it calls
quiet holds no failure form, whatever words it holds.

Each form is read where its program prints it:

* NCCL names the result of a failed call with ``ncclGetErrorString`` (nccl src/init.cc: ncclUnhandledCudaError
  "unhandled cuda error", ncclSystemError "unhandled system error", ncclInternalError "internal error - please
  report this issue to the NCCL developers", ncclInvalidArgument "invalid argument", ncclInvalidUsage "invalid
  usage", ncclRemoteError "remote process exited or there was a network error"; NCCL 1.x also "invalid rank",
  "invalid data type", "invalid device pointer"). The signature table reads it in PyTorch's words ("NCCL error
  in: <file>:<line>, <string>"); every other library that calls NCCL wraps the same string in its own:
  XGBoost's ``dh::ThrowOnNcclError`` ("NCCL failure :unhandled system error <file>(<line>)", xgboost#7982, round
  issue23-heldout-29 part C, read as a plain crash), nccl-tests' NCCLCHECK ("Test NCCL failure common.cu:777
  'unhandled system error'", already a crash of forms_errors: only its cause is read here), Caffe's NCCL_CHECK
  through glog ("Check failed: result == ncclSuccess (2 vs. 0) unhandled system error"), CuPy's NcclError
  ("NCCL_ERROR_SYSTEM_ERROR: unhandled system error", chainermn),
  PaddlePaddle's ("Nccl error, unhandled cuda error"), c10's ("NCCL Error 1: unhandled cuda error"). The string
  names the cause as the table's rules for it do: the transport or a peer (system, internal, remote), a CUDA
  call inside NCCL (a crash of unknown cause), a mistake in the call (usage, argument, rank, type, pointer).
* MXNet announces cuDNN's autotuning of a convolution before it starts (src/operator/nn/cudnn/
  cudnn_algoreg-inl.h, ``LOG(INFO) << "Running performance tests to find the best convolution algorithm, this
  can take a while... (setting env variable MXNET_CUDNN_AUTOTUNE_DEFAULT to 0 to disable)"``; newer releases say
  "set the environment variable"): a compile of kernels at work, minutes on a large network, with nothing printed
  until it ends (mxnet#20213, round issue23-heldout-29 part C: read as healthy; the training had gone on).
* LightGBM's socket linker retries a peer it cannot reach with a growing wait (src/network/linkers_socket.cpp:
  ``Log::Warning("Connecting to rank %d failed, waiting for %d milliseconds", ...)``, and ``Log::Fatal`` once the
  retries run out): a rank waiting on a connection, like the retried connects forms_phase reads
  (LightGBM#6117, round issue23-heldout-29 part C: read as healthy).
* dmlc-core prints the native frames of a fatal check or an exception under it ("Stack trace returned <n>
  entries:", "[bt] (<i>) <library>(<symbol>+0x<off>) [0x<pc>]"; MXNet, XGBoost, TVM): the frames are the crash's,
  never a sign of progress (mxnet#5340's stack trace, once the autotuning form was read, ended as compiling).
* ps-lite (MXNet's kvstore 'dist_*', BytePS) looks up its own address before it binds (src/van.cc:
  ``CHECK(!ip.empty()) << "failed to get ip"``, "failed to get the interface"): DMLC_INTERFACE names an interface
  with no IPv4 address, or none is up, and DMLC_NODE_HOST is unset; every restart fails the same way (mxnet#9695,
  round issue23-heldout-29 part C: read as a crash and restarted).
* TensorFlow probes the GPU libraries it can use and carries on without those it cannot load: its dso_loader logs
  ``"Could not load dynamic library '<file>'; dlerror: <dlerror>"`` at WARNING (at VLOG(1) in newer releases;
  tensorflow/stream_executor/platform/default/dso_loader.cc, tsl/platform/default/dso_loader.cc) and, when a GPU
  library is missing, "Cannot dlopen some GPU libraries ... Skipping registering GPU devices". The dlerror
  ("cannot open shared object file: No such file or directory") is not a missing resource that stops the job:
  the record is a warning even when a paste cut its severity letter off (yolov3#1617, round issue23-heldout-29
  part C: a healthy run stopped as a configuration error).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round29c_form` reads hold, besides the needles failureforms already
#: searches: NCCL's result under each library's wrapper, MXNet's autotuning, LightGBM's retried connect
NEEDLES: tuple[str, ...] = ("NCCL failure", "NCCL Error", "Nccl error", "ncclSuccess (", "NCCL_ERROR_",
                            "Running performance tests to find the best", "Connecting to rank", "[bt] (",
                            "Stack trace returned")

#: a library's wrapper of NCCL's result, then the result's string (ncclGetErrorString)
_NCCL_RESULT = re.compile(
    r"(?:\b(?:NCCL|Nccl|nccl) (?:[Ee]rror|[Ff]ailure)(?: \d+)?[ \t,:]*|\bTest NCCL failure \S+ '|"
    r"\bncclSuccess \(\d+ vs\. 0\)\s+|\bNCCL_ERROR_[A-Z_]+: )"
    r"(unhandled system error|remote process exited or there was a network error|internal error|"
    r"unhandled cuda error|invalid usage|invalid argument|invalid rank|invalid data type|invalid device pointer)\b")
#: what each result says of the cause, as the signature table's rules for the same results say it
_NCCL_CAUSES: dict[str, Label] = {
    "unhandled system error": Label.COMM_ERROR,
    "remote process exited or there was a network error": Label.COMM_ERROR,
    "internal error": Label.COMM_ERROR,
    "unhandled cuda error": Label.OTHER_CRASH,
    "invalid usage": Label.CONFIG_ERROR,
    "invalid argument": Label.CONFIG_ERROR,
    "invalid rank": Label.CONFIG_ERROR,
    "invalid data type": Label.CONFIG_ERROR,
    "invalid device pointer": Label.CONFIG_ERROR,
}
#: (the same, for the readers of NCCL's result under other wrappers: XLA's status, heldout.round32c)
NCCL_CAUSES = _NCCL_CAUSES

#: MXNet's announcement that cuDNN's autotuning begins (one space after the comma in some releases, none in others)
_MXNET_AUTOTUNE = re.compile(r"\bRunning performance tests to find the best convolution algorithm, ?this can take "
                             r"a while\b")

#: LightGBM's socket linker waiting before it retries a peer
_LIGHTGBM_RETRY = re.compile(r"\bConnecting to rank \d+ failed, waiting for \d+ milliseconds\b")

#: dmlc-core's stack trace of a fatal check or an exception (dmlc/logging.h LogMessageFatal and StackTrace: "Stack
#: trace returned <n> entries:" then "[bt] (<i>) <library>(<symbol>+0x<off>) [0x<pc>]", one frame a line), which
#: MXNet, XGBoost and TVM print under the error that raised it
_DMLC_FRAMES = re.compile(r"^[\s>|]*(?:\[bt\] \(\d+\) \S|Stack trace returned \d+ entries:)")

#: ps-lite's van finding no address of its own (src/van.cc Van::Start: ``CHECK(!interface.empty()) << "failed to get
#: the interface"``, ``CHECK(!ip.empty()) << "failed to get ip"``): DMLC_INTERFACE names an interface without an
#: IPv4 address, or the node has none up, and DMLC_NODE_HOST is unset
_PSLITE_NO_ADDRESS = re.compile(r"\bCheck failed: !(?:ip|interface)\.empty\(\)\s*(?:failed to get ip|failed to get "
                                r"the interface)\b")

#: TensorFlow's dso_loader record of a library it could not load (its location and message, with or without the
#: record's severity letter and time)
_TF_DSO_PROBE = re.compile(r"\bdso_loader\.cc:\d+\] Could not load dynamic library '[^']+'; dlerror: ")


def round29c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("NCCL" in text or "Nccl" in text or "nccl" in text) and (result := _NCCL_RESULT.search(text)) is not None:
        return Form(FormKind.ERROR, f"NCCL's result '{result.group(1)}' under another library's wrapper",
                    _NCCL_CAUSES[result.group(1)])
    if "failed to get " in text and _PSLITE_NO_ADDRESS.search(text):
        return Form(FormKind.ERROR, "ps-lite finding no address of its own (DMLC_INTERFACE, DMLC_NODE_HOST)",
                    Label.CONFIG_ERROR)
    if "Running performance tests" in text and _MXNET_AUTOTUNE.search(text):
        return Form(FormKind.COMPILE_RUNNING, "MXNet's cuDNN autotuning")
    if ("[bt] (" in text or "Stack trace returned" in text) and _DMLC_FRAMES.search(text):
        return Form(FormKind.CRASH, "a native stack trace (dmlc's frames) under the error that raised it")
    if "Connecting to rank" in text and _LIGHTGBM_RETRY.search(text):
        return Form(FormKind.COMM_WAIT, "a connection to a peer the program retries (LightGBM's linker)")
    return None


def round29c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round29c_form(text))


def round29c_quiet(text: str) -> bool:
    """Whether ``text`` is a record its program prints as a warning, whatever words it holds (TensorFlow's probe
    for an optional library): such a line holds no failure form."""
    return "Could not load dynamic library" in text and _TF_DSO_PROBE.search(text) is not None
