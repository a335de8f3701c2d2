"""Failure forms read for the misses of round issue23-heldout-39 (part H: training on frameworks other than the
PyTorch-first stacks): PaddlePaddle's GPU allocator's own report of a device out of memory, DyNet's (and its
predecessor cnn's) memory pools and allocator out of memory, MXNet's shape inference refusing the inputs it was
given, Caffe's refusal of a file it cannot find, and Darknet's exit on a file it cannot open.

Pure: no I/O. :func:`round39h_form` is asked after the forms of round 38, :func:`round39h_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (a glog
``F`` record and its failed check, an exception line).

Each form is read where its program prints it:

* PaddlePaddle's CUDA allocator (paddle/fluid/memory/allocation/cuda_allocator.cc, and the phi allocators after it)
  throws ``ResourceExhausted`` with its own report, which pastes and tracebacks often show without the status's
  name: ``"\\n\\nOut of memory error on GPU %d. Cannot allocate %s memory on GPU %d, %s memory has been allocated and
  available memory is only %s.\\n\\nPlease check whether there is any other process using GPU %d. ..."`` (newer:
  ``"Out of memory error on GPU %d. Cannot allocate %s memory.\\nMemory pool state: ..."``; other devices "on XPU
  %d", "on NPU %d"). The device's memory is exhausted (round issue23-heldout-39: PaddleDetection#3100, a YOLOv3 run
  whose batch of 8 did not fit, and Paddle#26892, a paper reproduction on AI Studio, both read as healthy because
  the report's lines carry no severity). The report's advice lines ("Please check whether ...", "2. If no, please
  decrease the batch size") are not the form.
* DyNet's memory pool (dynet/aligned-mem-pool.cc; aligned-mem-pool.h in older releases, which printed it and
  aborted) refuses an allocation past its capacity: ``<pool> is out of memory, try increasing with --dynet-mem
  (current capacity: N)`` (cnn, DyNet's predecessor: "cnn is out of memory, try increasing with --cnn-mem"); its
  allocator (dynet/mem.cc CPUAllocator::malloc) prints ``CPU memory allocation failed n=N align=N`` and throws
  ``dynet::out_of_memory("CPU memory allocation failed")`` (cnn: "Memory allocation failed n=N align=N", thrown as
  "Memory allocation failed in cnn_mm_malloc()"; the shared allocator: "Shared memory allocation failed n=N"). Both
  are memory exhausted: the pool's fixed size or the host's memory (round issue23-heldout-39: dynet#292, a language
  model that aborted after a while, and dynet#983, a trainer thread whose update raised the RuntimeError, both read
  as crashes of no cause).
* MXNet's shape inference refuses a graph whose inputs do not fit its symbol: the executor's ``InferShape Error in
  <op>'s <argument> argument`` with ``Shape inconsistent, Provided = ..., inferred shape=...``
  (operator_common.h SHAPE_ASSIGN_CHECK, printed since 2015 in these words), and the C API's ``InferShapeKeyword
  argument name <name> not found`` (c_api_symbolic.cc, symbol.cc: a data or label name the symbol does not have).
  The data, labels or names the job feeds do not match the model it built: a restart feeds them again
  (round issue23-heldout-39: mxnet#794, labels of shape (100, 1) for a softmax that infers (100), read as a crash to
  restart, and mx-rcnn#50, a dmlc fatal record of a keyword argument the symbol did not have, read as healthy).
* Caffe's proto readers (src/caffe/util/io.cpp ReadProtoFromTextFile / ReadProtoFromBinaryFile) open the file
  with ``CHECK_NE(fd, -1) << "File not found: " << filename``, which glog prints as ``Check failed: fd != -1 (-1 vs.
  -1) File not found: <path>``: the solver, net or snapshot named on the command line does not exist (round
  issue23-heldout-39: caffe-speech-recognition#7, a --snapshot of a solver state never written, and
  DeepNetsForEO#23, a solver prototxt not where the script reads it, both read as crashes to restart).
* Darknet's ``file_error`` (src/utils.c: ``fprintf(stderr, "Couldn't open file: %s\\n", s); exit(...)``) ends the
  run on a file it cannot open: a cfg, data list, weights or the backup directory it saves into (round
  issue23-heldout-39: AlexeyAB/darknet#2449, a backup directory that did not exist, read as healthy because the
  exit prints nothing more). Only the line that begins with the words (after a quote mark or a rank tag) is this
  form: many programs print the same words as a warning and go on, which the judge reads as a warning while the run
  goes on; a sentence that quotes them is not the form.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39h_form` reads hold, besides the needles failureforms already
#: searches: Paddle's allocator report, DyNet's pool and allocator, MXNet's shape inference, Caffe's proto reader,
#: Darknet's file_error
NEEDLES: tuple[str, ...] = (
    "Out of memory error on",
    "is out of memory, try increasing with --", "emory allocation failed",
    "InferShape Error in", "Shape inconsistent, Provided", "InferShapeKeyword argument name",
    "File not found: ",
    "Couldn't open file: ",
)

#: Paddle's allocator: "Out of memory error on GPU 0. Cannot allocate 18.06MB memory ..." (GPU, XPU, NPU, ...)
_PADDLE_OOM = re.compile(r"\bOut of memory error on [A-Za-z]{2,8} \d+\. Cannot allocate ")

#: DyNet's (and cnn's) memory pool past its capacity (the pool's name: "dynet", "cnn", DyNet 2's "FXS", "DXS", "PS",
#: "SCS"), and its allocators' failed malloc (printed, or thrown)
_DYNET_POOL = re.compile(r"\b[\w-]+ is out of memory, try increasing with --(?:dynet|cnn)-mem\b")
_DYNET_MALLOC = re.compile(
    r"(?:^|[\s*:>])(?:CPU |GPU |Shared )?[Mm]emory allocation failed(?: n=\d+(?: align=\d+)?| in cnn_mm_malloc\(\))"
    r"|(?:out_of_memory|RuntimeError|MemoryError)\b[^\n]{0,12}?: (?:CPU |GPU |Shared )?[Mm]emory allocation failed\b")

#: MXNet's shape inference: the executor's InferShape error and its Shape inconsistent detail, the C API's unknown
#: keyword argument
_MXNET_SHAPE = re.compile(
    r"\bInferShape Error in \S+'s \S+ argument\b"
    r"|\bShape inconsistent, Provided ?= ?[\[(]"
    r"|\bInferShapeKeyword argument name \S+ not found\b")

#: Caffe's proto readers: glog's failed CHECK_NE(fd, -1) << "File not found: " << filename
_CAFFE_NOT_FOUND = re.compile(r"Check failed: fd != -1 \(-1 vs\. -1\) File not found: \S")

#: Darknet's file_error, at the head of its line (a quote mark, a rank tag or spaces before it)
_DARKNET_FILE_ERROR = re.compile(r"^(?:[>\s]*|\[[^\]\n]{1,40}\]\s*)Couldn't open file: \S", re.MULTILINE)


def round39h_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Out of memory error on" in text and _PADDLE_OOM.search(text):
        return Form(FormKind.ERROR, "PaddlePaddle's allocator could not give device memory (Out of memory error)",
                    Label.OOM)
    if "is out of memory, try increasing" in text and _DYNET_POOL.search(text):
        return Form(FormKind.ERROR, "DyNet's memory pool is out of memory", Label.OOM)
    if "emory allocation failed" in text and _DYNET_MALLOC.search(text):
        return Form(FormKind.ERROR, "DyNet's allocator could not get memory (memory allocation failed)", Label.OOM)
    if ("InferShape" in text or "Shape inconsistent" in text) and _MXNET_SHAPE.search(text):
        return Form(FormKind.ERROR, "MXNet's shape inference refused the inputs it was given (data, labels or "
                    "names that do not fit the symbol)", Label.CONFIG_ERROR)
    if "File not found: " in text and _CAFFE_NOT_FOUND.search(text):
        return Form(FormKind.ERROR, "Caffe could not find the file it was told to read (a solver, net or "
                    "snapshot)", Label.CONFIG_ERROR)
    if "Couldn't open file: " in text and _DARKNET_FILE_ERROR.search(text):
        return Form(FormKind.ERROR, "the program could not open a file it needs (Darknet's file_error)",
                    Label.CONFIG_ERROR)
    return None


def round39h_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39h_form(text))
