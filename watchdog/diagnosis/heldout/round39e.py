"""Failure forms read for the misses of round issue23-heldout-39 (part E: OCR, document AI and vision-language model
training and fine-tuning).

Pure: no I/O. :func:`round39e_form` is asked after the forms of round 38, :func:`round39e_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

* ms-swift checks a model's declared requirements before it loads the model (swift/llm/model/register.py, ModelMeta.
  check_requires; swift/model/model_meta.py in later releases): for each requirement ``require_version`` fails on, it
  keeps the requirement and then ``logger.warning(f'Please install the package: `pip install {requires} -U`.')``,
  each requirement in double quotes (``"transformers>=4.49"``, ``"qwen_vl_utils>=0.0.14" "decord"``). The
  ImportError is swallowed: the model load that follows fails on the missing or too old package (a name it cannot
  import). The record names the cause of that failure: the environment does not hold the versions the model
  needs, which a restart meets again (round issue23-heldout-39: ms-swift#3109, Qwen2.5-VL with transformers
  4.49.0.dev0, a traceback cut before its ImportError read as a crash to restart). A run that goes on after the
  warning (a package only some inputs need) stays healthy: the record is an error form, a warning while the rank
  goes on.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39e_form` reads hold: ms-swift's requirement warning
NEEDLES: tuple[str, ...] = (
    "Please install the package: `pip install",
)

#: ms-swift's ModelMeta.check_requires: one or more double-quoted requirements and ``-U`` inside the backticks
_SWIFT_REQUIRES = re.compile(r'Please install the package: `pip install (?:"[^"`\n]+" *)+-U`')


def round39e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Please install the package" in text and _SWIFT_REQUIRES.search(text):
        return Form(FormKind.ERROR, "a model's declared requirements the environment does not meet (ms-swift)",
                    Label.CONFIG_ERROR)
    return None


def round39e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39e_form(text))
