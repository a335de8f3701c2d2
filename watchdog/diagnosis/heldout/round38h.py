"""Failure forms read for the misses of round issue23-heldout-38 (part H: reward-model and preference-optimization
training, RL fine-tuning with rollouts): the last line of a traceback that two processes printed at the same moment.

Pure: no I/O. :func:`round38h_form` is asked after the forms of round 37, :func:`round38h_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

The form is read where its program prints it:

* CPython prints an uncaught exception's last line as ``<class>: <message>`` (Python/pythonrun.c,
  ``print_exception``: the class's name, then ``": "`` and ``str(value)``), in two writes to stderr: the name and the
  message. Ranks of one job (torchrun's workers, Ray actors, DeepSpeed's launcher's children, a notebook's data-loader
  workers) that fail on the same line at the same moment share one terminal or one captured file, and their writes
  interleave: the class twice, then the separators, then the two messages, ``ImportErrorImportError    : : import
  flash_attn_2_cuda ... .so: undefined symbol: ...`` (R1-V#127, two ranks failing to load a flash-attn wheel built
  against another torch), ``KeyErrorKeyError: : 'input_ids_j'`` (RLHFlow reward modeling#6). The reader of exception
  lines wants the class followed by its colon: the doubled class left the line unread, and a log that ended on it read
  as healthy (round issue23-heldout-38: R1-V#127). Read as the exception that ends the traceback: CPython's failed
  imports (ImportError, ModuleNotFoundError) are an environment that does not fit the program, a configuration error
  as the undoubled line is; any other class is an error whose cause, when the line states one (the dynamic loader's
  "undefined symbol", CUDA's "out of memory"), the reader of causes finds in the rest of the line. Only at the head of
  a line (after quoting, a launcher's "[rank3]: " or "[default0]:" tags): a class doubled inside a message
  (``RuntimeErrorRuntimeError`` quoted in prose) is not a traceback's end, and a warning that names an import failure
  ("UserWarning: Failed to load image Python extension: ... undefined symbol") starts with no doubled class.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38h_form` reads hold: the end of an exception class's name
NEEDLES: tuple[str, ...] = ("Error", "Exception")

#: an exception's last line that two processes wrote at once: at the head of the line (after quoting, a launcher's
#: rank tags), the same class name twice, then blanks and the colon (the second colon, when the writes interleaved
#: after the name, follows)
_DOUBLED_EXCEPTION = re.compile(
    r"^[\s>|`*\"']*(?:\[[^\]]*\]:?\s*)*((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))\1\s*:")

#: CPython's import failures: an environment that does not fit the program
_IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError"})


def round38h_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("Error" in text or "Exception" in text) and (doubled := _DOUBLED_EXCEPTION.match(text)) is not None:
        name = doubled.group(1).rsplit(".", 1)[-1]
        if name in _IMPORT_FAILURES:
            return Form(FormKind.ERROR, "a failed import two processes reported at once", Label.CONFIG_ERROR)
        return Form(FormKind.ERROR, "an exception's last line two processes printed at once")
    return None


def round38h_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round38h_form(text))
