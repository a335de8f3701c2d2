"""Failure forms read for the misses of round issue23-heldout-40 (part A: object detection, segmentation and
medical-imaging training): MONAI's wrapper of an exception a transform raised on a data item, and Hydra's
instantiate that could not import a configured target when its exception is printed under its class's name (a
traceback's last line) or as the repr an outer instantiate quotes.

Pure: no I/O. :func:`round40a_form` is asked after the forms of round 39, :func:`round40a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (an exception
line, or the ``Class: message`` line an exception's repr stands for).

Each form is read where its program prints it:

* MONAI's ``apply_transform`` (monai/transforms/transform.py) calls each transform of a chain on a data item and, when
  it raises, re-raises ``RuntimeError(f"applying transform {transform}") from e`` (MONAI 0.5 on; 0.2-0.4 raised the
  original's class: ``raise type(e)(f"applying transform {transform}.")``), so the last line of the traceback is
  ``RuntimeError: applying transform <monai.transforms.<module>.<Transform> object at 0x...>`` (a forum's HTML paste:
  ``&lt;monai.``). ``Compose``, ``Dataset._transform`` and ``CacheDataset``'s cache filling all go through it: a
  loader, crop, resample or key lookup that does not fit the data it was given (an image of other dimensions than
  the crop, a key the dictionary does not have, a file its reader cannot load). The same item fails the same way on
  a restart: configuration of the data and the transform chain. A memory class (``MemoryError``,
  ``OutOfMemoryError``) under the same words is memory, which other readers state; the chained original exception,
  printed above the wrapper, keeps its own cause when one is stated (round issue23-heldout-40: MONAI#3604,
  RandSpatialCrop on images that were 2-D, read as a crash to restart).
* Hydra's ``instantiate`` (hydra/_internal/instantiate/_instantiate2.py ``_resolve_target``) raises
  ``InstantiationException("Error locating target '<path>', set env var HYDRA_FULL_ERROR=1 to see chained
  exception.")`` when the configured ``_target_`` does not import (a module not installed or broken, a name its
  module does not have). Round 38 part A reads these words at the head of a line, as Hydra's ``run_and_report``
  prints them; a program that calls ``instantiate`` itself (SAM2's ``training/train.py``) lets the exception end its
  traceback as ``hydra.errors.InstantiationException: Error locating target '...'``, and an outer instantiate quotes
  it as the repr ``InstantiationException("Error locating target '...'...")`` under its own ``Error in call to
  target '<outer>':`` (round issue23-heldout-40: sam2#415, a VOSDataset that did not import because torchvision was
  built for another CUDA than torch, read as a crash to restart). The outer ``hydra.errors.InstantiationException:
  Error in call to target '<path>':`` line, its message's head alone, is a crash whose cause is the repr under it
  (any exception the target raised).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40a_form` reads hold, besides the needles failureforms already
#: searches: MONAI's wrapper after its exception's class (each needle holds a marker character of the classifier's
#: batch search, "E", so that it needs no literal search of its own), Hydra's exception class
NEEDLES: tuple[str, ...] = ("Error: applying transform ", "Exception: applying transform ", "InstantiationException")

#: MONAI's apply_transform wrapper as a traceback's last line: an exception class (a module path optional), the
#: words and the transform's repr
_MONAI_TRANSFORM = re.compile(
    r"(?:^|[\s>*`'\"(:])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): applying transform (?:<|&lt;)monai\.\w")

#: exception classes of exhausted memory: stated by other readers, not this form
_MEMORY_CLASSES = frozenset({"MemoryError", "OutOfMemoryError", "_ArrayMemoryError", "ResourceExhaustedError"})

#: Hydra's failed import of a configured target under its exception class's name, or quoted as its repr
_HYDRA_LOCATE = re.compile(
    r"\bInstantiationException(?::[ \t]+|\(['\"])Error locating target '[\w.<>]+'")

#: Hydra's instantiate of a target that raised, as the head of a traceback's last line (its message continues on
#: the next line: the repr of what the target raised)
_HYDRA_CALL = re.compile(r"\bInstantiationException:[ \t]+Error in call to target '[\w.<>]+':\s*$")


def round40a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "applying transform " in text and (found := _MONAI_TRANSFORM.search(text)) is not None:
        if found.group(1).rsplit(".", 1)[-1] in _MEMORY_CLASSES:
            return None
        return Form(FormKind.ERROR, "a MONAI transform failed on a data item (the data do not fit the transform "
                    "chain)", Label.CONFIG_ERROR)
    if "InstantiationException" in text:
        if _HYDRA_LOCATE.search(text):
            return Form(FormKind.ERROR, "a target Hydra's instantiate could not import", Label.CONFIG_ERROR)
        if _HYDRA_CALL.search(text):
            return Form(FormKind.CRASH, "Hydra's instantiate of a configured target that raised", None)
    return None


def round40a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40a_form(text))
