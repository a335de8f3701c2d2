"""Failure forms read for the misses of round issue23-heldout-33 (part B: speech, audio and multimodal training stacks):
an exception quoted in a markdown code span, a gradient scaler's scale collapsed to nothing, torch's legacy THC check
of a CUDA call, and PyTorch's archive writer refused by its storage.

Pure: no I/O. :func:`round33b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 32, :func:`round33b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* Users who paste an error into an issue's prose put it in a markdown code span: "Getting `RuntimeError: Dataset
  scripts are no longer supported, but found common_voice_11_0.py` when finetuning whisper." (transformers#40977),
  "`omegaconf.errors.MissingMandatoryValue: Missing mandatory value: channels`" above a stack trace cut before its
  last line (audiocraft#477, #343): round issue23-heldout-33 part B, called healthy. The span holds an exception's
  last line as Python prints it (Lib/traceback.py: f"{stype}: {value}"), a class named ...Error or ...Exception or
  one of a module of exceptions (``omegaconf.errors``, ``ray.exceptions``): that span is the exception, and its
  class says its cause as it would on a line of its own. A span that names a class without a message ("catch
  `ValueError`") or a warning's class is not one.
* A gradient scaler (torch.cuda.amp.GradScaler, which icefall and k2 recipes print as "grad scale") halves its scale
  at every step whose gradients overflow; below fp16's smallest subnormal (2**-24) no gradient survives the scaling,
  the loss-scale reading's floor (forms_metric). icefall warns "Grad scale is small: {cur_grad_scale}" under 0.01
  and exits under 1e-5 with RuntimeError(f"grad_scale is too small, exiting: {cur_grad_scale}") (egs/*/ASR/
  zipformer/train.py; icefall#1463 at 1.29e-26, read as a crash); its progress line prints "grad_scale: 32.0". A
  scale above the floor is the scaler at work, not a failure.
* torch's legacy THC checked each CUDA call with THCudaCheck, which prints "THCudaCheck FAIL file=%s line=%i
  error=%i : %s" (the call's cudaGetErrorString) and raises "cuda runtime error (%d) : %s at %s:%d" (THCGeneral.cpp
  __THCudaCheck); Lua Torch's cutorch prints the same words before luajit's own stack traceback. The runtime table
  (forms_runtimes) reads the string of the raised error, but the batch search never asked the line: the lower-case
  words were no needle (deepspeech.torch#60: "error=2 : out of memory", called healthy). The FAIL line is read as
  the raised error it announces.
* PyTorch's archive writer (caffe2/serialize/inline_container.cc) checks that each write landed where the last one
  ended: a write the storage cut short leaves ``ostream_write_func`` at "unexpected pos <current> vs <offset>", and
  writeRecord reports "PytorchStreamWriter failed writing file data/<n>: file write failed", both through
  CAFFE_ENFORCE ("[enforce fail at inline_container.cc:<line>] . ..."). torch.save and checkpoint writers meet them
  when the file system is full or over quota (StyleTTS-WebUI#18: a full 2 TB drive; pytorch#156955: /tmp full;
  verl#3346, LlamaFactory#1223): a restart writes to the same full storage, configuration, as a "No space left on
  device" is. The reader's own failure ("PytorchStreamReader failed reading zip archive") is a damaged file, not
  this form.
"""

from __future__ import annotations

import math
import re

from neuron_watch.diagnosis.exctaxonomy import class_cause, setup_refusal
from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_runtimes import runtime_form
from neuron_watch.events import Label

#: The literals the lines :func:`round33b_form` reads hold, besides the needles failureforms already searches (an
#: exception's class in a code span holds "Error", "Exception" or "errors." already; a recipe's progress line with
#: its "grad_scale" field holds "loss"), each with a rarer character the batch search keys on: a gradient scaler's
#: warning and exit, THC's check of a CUDA call, PyTorch's archive writer
NEEDLES: tuple[str, ...] = ("Grad scale", "small, exiting", "THCudaCheck FAIL", "cuda runtime error (",
                            "unexpected pos ", "PytorchStreamWriter")

#: a markdown code span (a run of one to three backticks each side, none inside) holding an exception's last line: a
#: class named ...Error/...Exception (qualified or not) or a class of a module of exceptions, a colon, a message
_SPAN_EXCEPTION = re.compile(r"(?:^|[^`])(`{1,3})((?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception))|"
                             r"(?:[a-z_]\w*\.)*(?:errors|exceptions|errors_impl)\.([A-Z]\w*))"
                             r"((?:\(\w+\))?: [^`]*[^`\s])\s*\1(?!`)")

#: a gradient scaler's scale as icefall prints it: the warning, the progress line's field, and the exit's message
_GRAD_SCALE = re.compile(r"(?i:\bgrad[ _]scale)(?: is small)?['\"]?\s*[=:]\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\b")
_GRAD_SCALE_EXIT = re.compile(r"\bgrad_scale is too small, exiting\b")
#: fp16's smallest subnormal: below it no scaled gradient is representable (forms_metric's loss-scale floor)
_SCALE_FLOOR = 2.0 ** -24

#: THCudaCheck's record of a failed CUDA call: the runtime's code and its error string
_THC_FAIL = re.compile(r"\bTHCudaCheck FAIL file=\S+ line=\d+ error=(\d+) : (\S.*?)\s*$")

#: PyTorch's archive writer finding its write cut short, or reporting the write that failed
_ARCHIVE_WRITE_FAILED = re.compile(r"\binline_container\.cc[:_]?\d*\]?\s*\.\s*unexpected pos \d+ vs \d+\b|"
                                   r"\bPytorchStreamWriter failed writing file \S+: file write failed\b")


def _span_exception(text: str) -> Form | None:
    span = _SPAN_EXCEPTION.search(text)
    if span is None:
        return None
    cause = class_cause(span.group(3) or span.group(4))
    if cause is not None:
        return Form(FormKind.ERROR, "an exception quoted in a markdown code span", cause.label)
    # a message worded as the set-up the program refuses (exctaxonomy.setup_refusal): the quoted error is what the
    # user met running the program as set up, which a restart meets again
    refused = setup_refusal(span.group(2) + span.group(5))
    return Form(FormKind.ERROR, "an exception quoted in a markdown code span",
                Label.CONFIG_ERROR if refused is not None else None)


def _grad_scale(text: str) -> Form | None:
    if _GRAD_SCALE_EXIT.search(text):
        return Form(FormKind.ERROR, "a gradient scaler that gave up (grad_scale too small)", Label.NUMERICAL_ERROR)
    for scale in _GRAD_SCALE.finditer(text):
        value = float(scale.group(1))
        if math.isfinite(value) and abs(value) < _SCALE_FLOOR:
            return Form(FormKind.METRIC, "a gradient scaler's scale collapsed to nothing", Label.NUMERICAL_ERROR)
    return None


def round33b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "`" in text and (found := _span_exception(text)) is not None:
        return found
    if ("rad scale" in text or "rad_scale" in text) and (found := _grad_scale(text)) is not None:
        return found
    if "THCudaCheck FAIL" in text and (check := _THC_FAIL.search(text)) is not None:
        # the FAIL line says what the raised "cuda runtime error (<code>) : <string>" will: read it as that
        return runtime_form(f"cuda runtime error ({check.group(1)}) : {check.group(2)}")
    if ("unexpected pos " in text or "PytorchStreamWriter" in text) and _ARCHIVE_WRITE_FAILED.search(text):
        return Form(FormKind.ERROR, "PyTorch's archive writer refused by its storage (a full disk or quota)",
                    Label.CONFIG_ERROR)
    return None


def round33b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round33b_form(text))
