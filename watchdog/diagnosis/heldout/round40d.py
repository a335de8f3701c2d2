"""Failure forms read for the misses of round issue23-heldout-40 (part D: healthy runs that look frightening, and
failures that look benign): trtexec building a TensorRT engine and its report of the engine built, icefall's note on
a gradient scale run down, a JIT-built CUDA backend that found no toolkit, and a memory-retry loop's report of the
out-of-memory it caught and of the batch sizes it ran out of.

Pure: no I/O. :func:`round40d_form` is asked after the forms of round 39, :func:`round40d_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (an
exception line).

Each form is read where its program prints it:

* trtexec (TensorRT's samples/trtexec, with the samples' logging.h test harness) opens every run with ``&&&&
  RUNNING TensorRT.trtexec [TensorRT v8503] # <its command line>`` (older releases without the version, newer ones
  with a build tag after it), then dumps its options at INFO and, when the command names a model to parse
  (``--onnx=``, ``--uff=``, ``--deploy=``, ``--model=``; not ``--loadEngine=``, which reads a built engine),
  builds the engine: minutes to hours for a big network with dynamic shapes, with nothing printed meanwhile at the
  default verbosity. The banner of a build is a compile that runs; sampleEngines.cpp's ``[I] Engine built in
  480.55 sec.`` (and the harness's ``&&&& PASSED TensorRT.trtexec``) its end (round issue23-heldout-40:
  VSGAN-tensorrt-docker#31, an ESRGAN engine built with --buildOnly, its log ending in the option dump and read as
  healthy). A banner of ``--help`` or ``--loadEngine`` is no build.
* icefall (icefall/utils.py ``raise_grad_scale_is_too_small_error``, called by the recipes' train.py when the fp16
  grad scaler falls below 1e-5) raises a RuntimeError whose message is ``grad_scale is too small, exiting: <s>``
  (round 33 part B's form) followed by a NOTE block, ``If you see this error, it means that the gradient scale is
  too small.`` and advice on base_lr: the loss scaler ran down because the gradients kept overflowing, and the
  run stopped (round issue23-heldout-40: icefall#2069, the aishell1 Zipformer recipe pasted from the NOTE on, read
  as healthy). Its ``Grad scale is small: <s>`` WARNING, which the recipes print and go on from, is not this form.
* gsplat's and nerfacc's CUDA backends (gsplat/cuda/_backend.py, nerfacc/cuda/_backend.py) build their kernels
  with torch's JIT extension loader when no prebuilt module imports; with no CUDA toolkit (nvcc) to build with
  they print ``gsplat: No CUDA toolkit found. gsplat will be disabled.`` (rich's console, in yellow; "gsplat
  (legacy): ..." for the legacy backend; "nerfacc: No CUDA toolkit found. NerfAcc will be disabled.") and leave the
  backend None, so the first rasterization or ray march fails on it. The environment lacks the toolkit the package
  needs: a restart meets the same (round issue23-heldout-40: gsplat#249, benchmark.sh's trainer failing with a
  traceback after the notice, read as a crash to restart). A sentence that quotes the notice is not the form.
* accelerate's ``find_executable_batch_size`` (accelerate/utils/memory.py) halves the batch size each time the step
  raises an out-of-memory error and raises ``RuntimeError("No executable batch size found, reached zero.")`` when
  none fits; the Dreambooth extension's copy of that decorator (sd_dreambooth_extension dreambooth/memory.py)
  prints ``OOM Detected, reducing batch/grad size to <b>/<g>.`` and the traceback of the out-of-memory error it
  caught before each retry, and raises the same RuntimeError at zero. Both report device memory exhausted at the
  batch size tried (round issue23-heldout-40: sd_dreambooth_extension#852, a LoRA run at batch 24 whose retries
  ran out, read as a crash of no cause). A retry the run goes on from (progress after it) is not its last word.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40d_form` reads hold: trtexec's harness banner and its engine
#: built, icefall's NOTE, a JIT backend without a toolkit, the batch-size retry loop's words
NEEDLES: tuple[str, ...] = (
    "&&&& RUNNING TensorRT.trtexec", "] Engine built in ", "&&&& PASSED TensorRT.trtexec",
    "it means that the gradient scale is too small",
    ": No CUDA toolkit found. ",
    "No executable batch size found", "OOM Detected, reducing batch",
)

#: trtexec's harness banner of a run that parses a model (and so builds an engine); not one that loads an engine
_TRTEXEC_BUILD = re.compile(
    r"&&&& RUNNING TensorRT\.trtexec (?:\[TensorRT v\d+\] )?(?:\[b\d+\] )?# \S*trtexec(?:\.exe)?"
    r"(?=[^\n]*\s--(?:onnx|uff|deploy|model)=)(?![^\n]*\s--loadEngine=)")

#: the engine built: sampleEngines.cpp's INFO record, and the harness's PASSED banner
_TRTEXEC_BUILT = re.compile(r"\] Engine built in \d+(?:\.\d+)? sec\b|&&&& PASSED TensorRT\.trtexec\b")

#: icefall's NOTE under its "grad_scale is too small, exiting" RuntimeError
_ICEFALL_NOTE = re.compile(r"\bIf you see this error, it means that the gradient scale is too small\.")

#: gsplat's and nerfacc's JIT backends without a CUDA toolkit (not a quotation of the notice)
_JIT_NO_TOOLKIT = re.compile(
    r"(?<![`'\"\w-])[\w-]+(?: \(legacy\))?: No CUDA toolkit found\. [\w-]+ will be disabled\.")

#: the batch-size retry loop: accelerate's RuntimeError at zero, the Dreambooth extension's report of a caught OOM
_BATCH_RETRY_OOM = re.compile(
    r"\bNo executable batch size found, reached zero\b|\bOOM Detected, reducing batch/grad size to \d+/\d+\b")


def round40d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "&&&& RUNNING TensorRT.trtexec" in text and _TRTEXEC_BUILD.search(text):
        return Form(FormKind.COMPILE_RUNNING, "trtexec building a TensorRT engine from a model")
    if ("Engine built in " in text or "&&&& PASSED TensorRT.trtexec" in text) and _TRTEXEC_BUILT.search(text):
        return Form(FormKind.COMPILE_DONE, "trtexec's TensorRT engine built")
    if "gradient scale is too small" in text and _ICEFALL_NOTE.search(text):
        return Form(FormKind.ERROR, "icefall's fp16 gradient scale ran down (grad_scale too small)",
                    Label.NUMERICAL_ERROR)
    if "No CUDA toolkit found. " in text and _JIT_NO_TOOLKIT.search(text):
        return Form(FormKind.ERROR, "a CUDA backend built at run time found no CUDA toolkit (nvcc) and was "
                    "disabled", Label.CONFIG_ERROR)
    if ("No executable batch size found" in text or "OOM Detected, reducing batch" in text) \
            and _BATCH_RETRY_OOM.search(text):
        return Form(FormKind.ERROR, "out of memory at the batch size tried (a batch-size retry loop)", Label.OOM)
    return None


def round40d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40d_form(text))
