"""Failure forms read for the misses of round issue23-heldout-36 (part F: contrastive, embedding and vision-language
model training): a tensor or array printed by its repr whose every element is NaN (or infinite).

Pure: no I/O. :func:`round36f_form` is asked after the forms of round 35, :func:`round36f_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

The form is read where its program prints it:

* PyTorch prints a tensor as ``tensor([...])`` with one row of its last dimension per line, the rows after the first
  indented under it and ending ``],`` (torch/_tensor_str.py ``_tensor_str_with_formatter``: elements joined by
  ``", "``, a long row elided to its three first and last elements around ``"..."``, non-finite values written
  ``nan``, ``inf``, ``-inf``); NumPy's repr of an array is the same ``array([...])`` layout
  (numpy/core/arrayprint.py ``array_repr``, separator ``", "``). Users print a batch's logits, a loss per sample or a
  layer's output when training goes wrong, and paste it: a row all of NaN is a computation that is no longer finite
  (openai/CLIP#40: a CLIP fine-tuned in fp16 with Adam, every logit NaN after one step, read as healthy;
  espnet/espnet#4267: a CTC model's encoder output all NaN; ray-project/ray#36801: an RLlib learner's value column
  ``[nan],`` row after row, both in the corpus and read as healthy). A row with one finite element is another
  tensor (a mask, a per-class metric with an absent class), and so is ``print`` of an array without its repr's
  commas (``[nan nan nan]``, a per-class table's empty classes): neither is read. A row of one element is read only
  as a row of a printed column (``[nan],``), the first or a later row of a tensor.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36f_form` reads hold, besides the needles failureforms already
#: searches: a row of a tensor's or an array's repr of two non-finite elements, or a column's row of one
NEEDLES: tuple[str, ...] = ("nan, nan", "inf, inf", "nan, -nan", "[nan],", "[-nan],", "[inf],", "[-inf],")

#: a row of a tensor's or an array's repr: its opening brackets (after ``tensor(`` or ``array(`` on the first row),
#: its elements up to the closing bracket or the end of a row cut short, and what may follow a row (more closing
#: brackets, a comma, the repr's keyword arguments)
_REPR_ROW = re.compile(r"^\s*(?:tensor\(|array\()?\[+([^\[\]]*)(\]+.*)?$")

#: the words a repr writes for a value that is not finite
_NOT_FINITE = frozenset({"nan", "-nan", "inf", "-inf"})


def _all_not_finite_row(text: str) -> bool:
    """Whether ``text`` is a row of a tensor's or an array's repr whose every element is not finite (at least two,
    or one in a printed column's row ``[nan],``)."""
    row = _REPR_ROW.match(text)
    if row is None:
        return False
    elements = [e.strip() for e in row.group(1).split(",")]
    values = [e for e in elements if e and e != "..."]
    if not values or any(v not in _NOT_FINITE for v in values):
        return False
    if len(values) >= 2:
        return True
    # one element: a column's row, closed by its bracket and the comma that separates it from the next row
    closing = row.group(2) or ""
    return closing.rstrip() == "],"


def round36f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("nan" in text or "inf" in text) and "[" in text and _all_not_finite_row(text):
        return Form(FormKind.METRIC, "a printed tensor whose every value is NaN or infinite (the computation is no "
                    "longer finite)", Label.NUMERICAL_ERROR)
    return None


def round36f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36f_form(text))
