"""Failure forms read for the misses of round issue23-heldout-36 (part F: contrastive, embedding and vision-language
model training): a tensor or array printed by its repr whose every element is NaN (or infinite), and the
vision-language trainers' notice that a sample's tokenization did not match its labels and was ignored.

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
* FastChat's supervised fine-tuning preprocessing, and LLaVA's copied from it (llava/train/train.py
  ``preprocess_v1``, ``preprocess_mpt``, ``preprocess_llama_2``; the same function in LLaVA-NeXT, Video-LLaVA,
  TinyLLaVA's ``make_labels``, LLaVA-LLaMA-3, LLaVA-MORE and the other forks), masks every label of a sample whose
  length counted by the conversation template differs from its tokenized length, and prints
  ``f"WARNING: tokenization mismatch: {cur_len} vs. {total_len}. (ignored)"``. A sample so ignored trains nothing:
  when every sample prints it, the template (``--version``) does not match the tokenizer and the loss is 0 for the
  whole run, which a restart repeats (haotian-liu/LLaVA#1706: solved by the conversation version,
  Victorwz/LLaVA-Llama-3#1: ``--version v3``, aimagelab/LLaVA-MORE#7, all read as healthy; lm-sys/FastChat#1290
  prints the same). The notice is read as an error stating configuration, of the kind a rank's progress after it
  withdraws: a few samples ignored among steps that train (mbzuai-oryx/LLaVA-pp#14, a finite loss at step 1) are a
  warning while the run goes on.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36f_form` reads hold, besides the needles failureforms already
#: searches: a row of a tensor's or an array's repr of two non-finite elements, or a column's row of one
NEEDLES: tuple[str, ...] = ("nan, nan", "inf, inf", "nan, -nan", "[nan],", "[-nan],", "[inf],", "[-inf],",
                            "tokenization mismatch")

#: a row of a tensor's or an array's repr: its opening brackets (after ``tensor(`` or ``array(`` on the first row),
#: its elements up to the closing bracket or the end of a row cut short, and what may follow a row (more closing
#: brackets, a comma, the repr's keyword arguments)
_REPR_ROW = re.compile(r"^\s*(?:tensor\(|array\()?\[+([^\[\]]*)(\]+.*)?$")

#: FastChat's and LLaVA's notice of a sample whose labels were masked (its two lengths, then "(ignored)")
_SAMPLE_IGNORED = re.compile(r"\bWARNING: tokenization mismatch: \d+ vs\. \d+\. \(ignored\)")

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
    if "tokenization mismatch" in text and _SAMPLE_IGNORED.search(text):
        return Form(FormKind.ERROR, "a fine-tuning sample ignored for a tokenization that does not match its "
                    "conversation template (when every sample is, the run trains nothing)", Label.CONFIG_ERROR)
    return None


def round36f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36f_form(text))
