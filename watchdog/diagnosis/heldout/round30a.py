"""Failure forms read for the misses of round issue23-heldout-30 (part A: the Chinese-speaking ecosystems --
PaddlePaddle, MindSpore, ModelScope, Qwen, InternLM, OneFlow): MindSpore's records of device memory it could not
allocate, log15's record levels and Go net/rpc's closed connection, and CUDA's own words for a binary or a node
that cannot run under a fatal check that does not say them itself.

Pure: no I/O. :func:`round30a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 29, :func:`round30a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of
a line that is already an error.

Each form is read where its program prints it:

* MindSpore's runtime names the allocation it could not make in a few fixed sentences (mindspore/ccsrc: the graph
  scheduler's kernel actor ``MS_LOG(EXCEPTION) << "Malloc for kernel output failed, Memory isn't enough, node:"``,
  older releases without the second clause; the device address allocators' ``"Device(id:<n>) memory isn't enough
  and alloc failed, kernel name: ..., alloc size: <n>B."`` and ``"Device memory isn't enough and alloc failed,
  alloc size:"``; the Ascend memory adapter's ``"Out of Memory!!! Request memory size: <n>B, Memory
  Statistic:"``; the dynamic memory pool's ``"TotalUsedMemStatistics : <n> plus TotalUsedByEventMemStatistics :
  <n> and plus alloc size : <n> is more than total mem size : <n>."``): the device's memory, whatever exception
  carries the sentence (mindone#465, round issue23-heldout-30 part A: a RuntimeError read as a plain crash).
* log15 (github.com/inconshreveable/log15, and the loggers that copied it: Grafana's, LXD's, ngrok's, Paddle's Go
  parameter-server client) writes its level in four letters in logfmt, ``lvl=eror`` and ``lvl=crit`` (``dbug``,
  ``info``, ``warn`` are the others), and as ``EROR[`` at the head of its terminal format: an error
  record in a convention the severity reader, which knows ``level=error``, did not read (Paddle#5189, round
  issue23-heldout-30 part A: a trainer's stream of ``lvl=eror msg="error send grads" error="connection is shut
  down"`` read as healthy).
* glog prints the native frames of a fatal check under it (``*** Check failure stack trace: ***`` then ``@ 0x<pc>
  <symbol>()``, one a line). A frame in a graph compiler's compile (OneFlow's ``oneflow::Compiler::Compile`` and
  ``NNGraph::CompilePlanForRuntime``, which build the plan after LiBai's "Start compling the train graph"; XLA's
  ``GpuCompiler::RunBackend``) says the check failed in the compiler, as round 13b reads a Python traceback's
  frames in torch.compile (libai#497, round issue23-heldout-30 part A: read as a plain crash).
* Go's net/rpc client fails every call once its connection is gone with ``rpc.ErrShutdown``
  (``errors.New("connection is shut down")``, net/rpc/client.go): a peer, or the link to it, went away.
* CUDA names the runtime's error in ``cudaGetErrorString``'s words; a program's fatal check quotes them after its
  own prefix (Paddle v1's ``hl_cuda_device.cc`` "Check failed: cudaSuccess == cudaStat (0 vs. 38) Cuda Error: no
  CUDA-capable device is detected", its matrix kernels' "[hl_gpu_apply_unary_op failed] CUDA error: invalid device
  function"). The check's failure is read as a crash, which states no cause; CUDA's words state one: no device on
  the node (cudaErrorNoDevice), a binary with no code for this device's architecture (cudaErrorInvalidDeviceFunction,
  cudaErrorNoKernelImageForDevice), a driver older than the runtime (cudaErrorInsufficientDriver) -- each the set-up,
  which a restart meets again (Paddle#1468, PaddleSpeech#302, round issue23-heldout-30 part A: restarted as crashes).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round30a_form` reads hold, besides the needles failureforms already
#: searches: MindSpore's allocation failures, log15's error levels, net/rpc's closed connection
NEEDLES: tuple[str, ...] = ("Malloc for kernel output failed", "isn't enough and alloc failed", "Out of Memory!!!",
                            "is more than total mem size", "lvl=eror", "lvl=crit", "EROR[",
                            "connection is shut down", "Compiler::Compile", "Compiler::RunBackend",
                            "Compiler::RunHloPasses", "CompilePlanForRuntime")

#: MindSpore's runtime refusing an allocation on the device (the sentences its allocators print)
_MINDSPORE_MEMORY = re.compile(
    r"\bMalloc for kernel output failed\b|\b[Mm]emory isn't enough and alloc failed\b|"
    r"\bOut of Memory!!! Request memory size: \d+|"
    r"\bTotalUsedMemStatistics : \d+ .{0,120}?\bis more than total mem size : \d+")

#: log15's error and critical levels: logfmt's key (``lvl=eror``, ``lvl=crit``) or the terminal format's head
#: (``EROR[01-02|...]``; its ``CRIT[`` head is left unread: a needle of five common letters would cost every batch a
#: search of its own, test_classify's budget)
_LOG15_ERROR = re.compile(r"(?:^|\s)lvl=(?:eror|crit)\b|^EROR\[\d\d-\d\d\|")

#: a frame of glog's stack trace of a fatal check ("    @     0x<pc>  <symbol>()") in a graph compiler's compile:
#: OneFlow's plan compiler (``oneflow::Compiler::Compile``, ``oneflow::NNGraph::CompilePlanForRuntime``) and XLA's
#: (``xla::...Compiler::Compile``, ``RunBackend``, ``RunHloPasses``)
_NATIVE_COMPILER_FRAME = re.compile(
    r"^\s*@\s+0x[0-9a-f]+\s+(?:oneflow::(?:Compiler::Compile|NNGraph::CompilePlanForRuntime)|"
    r"xla::(?:\w+::)*\w*Compiler::(?:Compile|RunBackend|RunHloPasses)\w*)\(")

#: Go net/rpc's rpc.ErrShutdown: the client's connection is gone
_RPC_SHUTDOWN = re.compile(r"\bconnection is shut down\b")

#: CUDA's own words (cudaGetErrorString) for a node or a binary the program cannot run on, after a CUDA error's
#: prefix in any program's spelling ("Cuda Error: ", "CUDA error: ", "cuda error(100), "); a paste may glue the next
#: record to the words (glog's "...is detectedF0227 21:38:54..."), so only a lower-case letter ends them early
_CUDA_SETUP = re.compile(
    r"\b(?:CUDA|Cuda|cuda)[ _]?(?:[Ee]rror|ERROR)\b[^A-Za-z\n]{0,16}"
    r"(no CUDA-capable device is detected|invalid device function|"
    r"no kernel image is available for execution on the device|"
    r"CUDA driver version is insufficient for CUDA runtime version)(?![a-z])")


def round30a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("enough" in text or "Out of Memory!!!" in text or "total mem size" in text) and _MINDSPORE_MEMORY.search(text):
        return Form(FormKind.ERROR, "MindSpore's runtime refusing a device allocation", Label.OOM)
    if "Compile" in text and _NATIVE_COMPILER_FRAME.search(text):
        return Form(FormKind.ERROR, "a fatal check's native frame in a graph compiler's compile", Label.COMPILE_ERROR)
    if ("lvl=" in text or "EROR[" in text) and _LOG15_ERROR.search(text):
        return Form(FormKind.ERROR, "a log15 record at an error level (lvl=eror, lvl=crit)", round30a_label(text))
    return None


def round30a_label(text: str) -> Label | None:
    """The cause a record of this round's conventions states in its words, or None."""
    if "shut down" in text and _RPC_SHUTDOWN.search(text):
        return Label.COMM_ERROR
    return None


def round30a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    setup = _CUDA_SETUP.search(text)
    if setup is not None:
        return Label.CONFIG_ERROR, f"CUDA's '{setup.group(1)}': the node or the build, which a restart meets again"
    if "shut down" in text and _RPC_SHUTDOWN.search(text):
        return Label.COMM_ERROR, "Go net/rpc's closed connection (rpc.ErrShutdown): the peer or the link went away"
    return stated_cause(round30a_form(text))
