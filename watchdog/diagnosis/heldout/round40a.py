"""Failure forms read for the misses of round issue23-heldout-40 (part A: object detection, segmentation and
medical-imaging training): MONAI's wrapper of an exception a transform raised on a data item. The part's Hydra miss
(its instantiate's records after the exception's class) is read by round 38 part A, with the same records at a line's
head.

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
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40a_form` reads hold, besides the needles failureforms already
#: searches: MONAI's wrapper after its exception's class (each needle holds a marker character of the classifier's
#: batch search, "E", so that it needs no literal search of its own)
NEEDLES: tuple[str, ...] = ("Error: applying transform ", "Exception: applying transform ")

#: MONAI's apply_transform wrapper as a traceback's last line: an exception class (a module path optional), the
#: words and the transform's repr
_MONAI_TRANSFORM = re.compile(
    r"(?:^|[\s>*`'\"(:])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): applying transform (?:<|&lt;)monai\.\w")

#: exception classes of exhausted memory: stated by other readers, not this form
_MEMORY_CLASSES = frozenset({"MemoryError", "OutOfMemoryError", "_ArrayMemoryError", "ResourceExhaustedError"})


def round40a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "applying transform " in text and (found := _MONAI_TRANSFORM.search(text)) is not None:
        if found.group(1).rsplit(".", 1)[-1] in _MEMORY_CLASSES:
            return None
        return Form(FormKind.ERROR, "a MONAI transform failed on a data item (the data do not fit the transform "
                    "chain)", Label.CONFIG_ERROR)
    return None


def round40a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40a_form(text))
