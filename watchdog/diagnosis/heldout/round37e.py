"""Failure forms read for the misses of round issue23-heldout-37 (part E: scientific foundation model training, in
biology, weather and materials): a trainer's own words for a NaN it found in its loss, and the exceptions torch's graph
tracer raises when it cannot trace a model whose shapes depend on its data.

Pure: no I/O. :func:`round37e_form` is asked after the forms of round 36, :func:`round37e_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* A trainer that checks its loss for non-finite values says so in the words "found NaN ... loss": fairchem's (OCP's)
  losses ``logging.warning("Found nans while computing loss")`` before ``torch.nan_to_num`` (fairchem/core/modules/
  loss.py and its forks), a materials trainer's ``logger.warning(f"Found nan in loss! epoch {e}, step {s}, ...")``, a
  game-model trainer's ``print("Found NAN in loss, stop training.")``, k-means validation's ``"Found NaN in losses"``.
  The metric reader knows "NaN loss detected" and "loss is nan", not the verb before the value: the line said nothing
  (round issue23-heldout-37: fairchem#1568, a UMA fine-tuning whose first step warned twice and whose evaluation gave
  nan for every metric, read as healthy). A NaN the trainer zeroed and went on from is cleared by the progress after
  it, like every metric form; a log that ends on it ends on a loss that is not a number.
* torch's graph tracer (Dynamo under torch.compile, torch.export) runs the model on fake tensors with symbolic shapes.
  When a shape or a branch depends on the data it cannot trace on, it raises, from torch/fx/experimental/
  symbolic_shapes.py, ``GuardOnDataDependentSymNode`` ("Could not extract specialized integer from data-dependent
  expression u0", "Could not guard on data-dependent expression ..."), ``ConstraintViolationError`` (a dynamic
  dimension the code specializes) or ``PendingUnbackedSymbolNotFound``, and from torch/_subclasses/fake_tensor.py
  ``DynamicOutputShapeException`` / ``DataDependentOutputException`` (an operator whose output shape is the data's,
  ``nonzero``, ``item``) or ``UnsupportedOperatorException`` (an operator with no fake kernel). Their names end in
  neither Error nor Exception for the first, and none of them is in the compile table (BackendCompilerFailed,
  Dynamo's Unsupported): a traceback cut before its header left the line unread (round issue23-heldout-37:
  NequIP-LES#8, a compiled training of an Ewald module, read as healthy). The tracer meets the same code on restart:
  a compile error (compile without fullgraph to let Dynamo break the graph there, mark the size dynamic, or run
  that part eagerly). Read as the exception that ends a traceback, the class at the head of the line (the module's
  path before it, a launcher's rank tag or quoting in front), not a word inside a warning's message.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round37e_form` reads hold, besides the needles failureforms already
#: searches: a trainer's "Found NaN ... loss" in the cases trainers print it, the tracer's exception classes
NEEDLES: tuple[str, ...] = (
    "ound nan", "ound NaN", "ound NAN", "ound inf", "ound Inf",
    "GuardOnDataDependentSymNode", "ConstraintViolationError", "PendingUnbackedSymbolNotFound",
    "DynamicOutputShapeException", "DataDependentOutputException", "UnsupportedOperatorException",
)

#: a trainer's words for a NaN/Inf it found in its loss: "found", the value (plural as "nans"), then within a few
#: words the loss ("in loss", "while computing loss", "in the losses")
_FOUND_NONFINITE_LOSS = re.compile(
    r"(?i:\bfound (?:nan|inf)s?\b[^.;:]{0,40}?\b(?:in|while computing|when computing|computing|for) "
    r"(?:the )?loss(?:es)?\b)")

#: the exceptions torch's tracer raises on a model whose shapes depend on its data, as a traceback's last line: the
#: class at the head (after quoting, a launcher's "[rank3]: " or "[default0]:" tags, a collector's host name holding a
#: digit, "node005: ", which pdsh's reader leaves when it has no dash or dot), its module's path optional
_TRACER_EXCEPTION = re.compile(
    r"^[\s>|`*\"']*(?:[A-Za-z][\w.-]*\d[\w.-]*: )?(?:\[[^\]]*\]:?\s*)*"
    r"(?:torch\.(?:fx\.experimental\.symbolic_shapes|_subclasses\.fake_tensor)\.)?"
    r"(?:GuardOnDataDependentSymNode|ConstraintViolationError|PendingUnbackedSymbolNotFound"
    r"|DynamicOutputShapeException|DataDependentOutputException|UnsupportedOperatorException): \S")


def round37e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "ound " in text and _FOUND_NONFINITE_LOSS.search(text):
        return Form(FormKind.METRIC, "a trainer's record of a NaN/Inf it found in its loss", Label.NUMERICAL_ERROR)
    if ("Exception: " in text or "SymNode: " in text or "Error: " in text or "NotFound: " in text) \
            and _TRACER_EXCEPTION.search(text):
        return Form(FormKind.ERROR, "torch's graph tracer could not trace shapes that depend on the data",
                    Label.COMPILE_ERROR)
    return None


def round37e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round37e_form(text))
