"""Causes read for the misses of round issue23-heldout-27 (third B): an assertion that a value is finite.

Pure: no I/O. :func:`round27b_cause` is asked by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* An assertion that a value is finite, failed: Python's ``assert <expression>`` without a message raises a bare
  ``AssertionError``, and CPython's traceback (Lib/traceback.py) prints the statement that failed as the last
  frame's source line right above it; :func:`neuron_watch.diagnosis.errorblock.decide` reads that statement as
  the exception's message (``AssertionError: assert math.isfinite(loss_value)``). A training loop's own guard on
  its loss or gradients (``assert math.isfinite(loss_value)`` after ``if not math.isfinite(loss_value): print("Loss
  is {}, stopping training")`` in the timm/DeiT/ConvNeXt engines, ``assert math.isfinite(loss_val)``, ``assert not
  torch.isnan(loss).any()``, ``assert torch.isfinite(grad).all()``) states that the value was NaN or infinite: the
  run diverged, which a restart as is repeats (round issue23-heldout-27: convnext-131, read as a crash). The
  expression must call one of the finiteness tests (``isfinite``, ``isnan``, ``isinf``) of math, NumPy or torch, or
  the tensor's method: an assertion of anything else (a shape, a length, a key) says nothing of the numbers.
"""

from __future__ import annotations

import re

from neuron_watch.events import Label

#: an assertion whose expression calls a finiteness test (math.isfinite(x), np.isnan(x), torch.isinf(x),
#: x.isfinite()), as the statement or as an AssertionError's message that quotes it
_FINITENESS_ASSERTED = re.compile(r"\bassert\s+(?:not\s+)?\(?[^#]*?\b(?:isfinite|isnan|isinf)\(")


def round27b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (the line is an error already), or None."""
    if "assert" in text and _FINITENESS_ASSERTED.search(text):
        return Label.NUMERICAL_ERROR, "an assertion that a value is finite (not NaN or infinite) failed"
    return None
