"""Failure forms read for the misses of round issue23-heldout-21 (half B): autograd's refusal to run a backward pass
over a graph the program did not build.

Pure: no I/O. :func:`round21b_cause` is asked by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause
of a line that is already an error (an exception's message: ``RuntimeError: ...``, found by the failure forms'
needles it holds already).

The form is read where its program prints it:

* torch's autograd engine checks the arguments of a backward pass before it runs one (THPEngine_run_backward,
  torch/csrc/autograd/python_engine.cpp, reached from ``Variable._execution_engine.run_backward``): a tensor to
  differentiate that has neither requires_grad nor a grad_fn (``"element %d of tensors does not require grad and
  does not have a grad_fn"``; "of variables" before torch 0.4), and, for torch.autograd.grad's inputs, one that does
  not require grad or was never used in the graph (``"One of the differentiated Tensors does not require grad"``,
  ``"One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if this is
  the desired behavior."``; "Variables" in older torch). Each says the program built its graph without the
  gradients it then asks for -- parameters frozen or detached, the forward pass under torch.no_grad, gradient
  checkpointing over inputs that need no grad (PEFT's LoRA without enable_input_require_grads) -- so every run of
  the same program and set-up fails at the same backward: a set-up mistake a restart cannot fix, not a crash to
  restart (round issue23-heldout-21: peft-137). A backward that meets a freed graph ("Trying to backward through the
  graph a second time") is raised by the engine while it runs, not by these checks, and is not this form; nor is
  checkpoint's warning that none of its inputs requires grad (a warning, not the refusal).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: the autograd engine's argument checks of a backward pass (THPEngine_run_backward), new and old wording
_BACKWARD_REFUSED = re.compile(
    r"\belement \d+ of (?:tensors|variables) does not require grad and does not have a grad_fn\b"
    r"|\bOne of the differentiated (?:Tensors|Variables) (?:does not require grad|appears to not have been used in"
    r" the graph)\b")


def round21b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("differentiated" in text or "grad_fn" in text) and _BACKWARD_REFUSED.search(text):
        return Form(FormKind.ERROR, "autograd refusing the backward pass: the tensors to differentiate are outside "
                    "the graph (frozen, detached or computed under no_grad), the same on every restart",
                    Label.CONFIG_ERROR)
    return None


def round21b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's form (whatever its level: the line is an error already)."""
    return stated_cause(round21b_form(text))
