"""Failure forms read for the misses of round issue23-heldout-32 (part B: checkpoints, storage and data pipelines):
the checkpoint rename of Hugging Face's ``Trainer`` that its ranks race to do.

Pure: no I/O. :func:`round32b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 31, :func:`round32b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of`.

Each form is read where its program prints it:

* ``transformers.Trainer._save_checkpoint`` (4.36 onwards) writes a checkpoint into a temporary directory and
  renames it: ``os.renames(output_dir, checkpoint_dir)`` from ``tmp-checkpoint-<step>`` (4.36.0) or
  ``tmp-checkpoint-<random>`` (4.49's ``tempfile.mkdtemp(prefix="tmp-checkpoint-")``) to ``checkpoint-<step>``. In the
  releases that let every rank do it (4.36.0: transformers#27925, #28119; 4.49.0.dev: #36076, #36099) the ranks race
  and all but one fail with CPython's ``OSError: [Errno 39] Directory not empty: '<dir>/tmp-checkpoint-...' ->
  '<dir>/checkpoint-<step>'`` (the loser's 4.36.0 variant, ``[Errno 2] No such file or directory``, is read as a
  missing path already). The same save fails at the same step after every restart; the fix is another release (or
  saving from one rank): configuration (round issue23-heldout-32 part B: MM-Eureka-V0#8 under a GRPO trainer,
  ms-swift#3031 on transformers 4.49.0.dev0, both read as a crash of unknown cause to restart; trl#2928 alike).
  Errno 39 elsewhere (a temporary directory's clean-up at exit, an experiment folder removed twice) says nothing of
  a cause by itself and is not this form: only the rename of Trainer's ``tmp-checkpoint-`` directory is.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round32b_form` reads hold, besides the needles failureforms already
#: searches: Trainer's temporary checkpoint directory
NEEDLES: tuple[str, ...] = ("tmp-checkpoint-",)

#: CPython's ENOTEMPTY from os.rename of Trainer's temporary checkpoint directory onto ``checkpoint-<step>``
#: (``OSError: [Errno 39] Directory not empty: '<src>' -> '<dst>'``, the two paths quoted as repr prints them)
_CHECKPOINT_RENAME_RACE = re.compile(
    r"\[Errno 39\] Directory not empty: '[^']*\btmp-checkpoint-[^'/]*' -> '[^']*\bcheckpoint-\d+'")


def round32b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "tmp-checkpoint-" in text and _CHECKPOINT_RENAME_RACE.search(text):
        return Form(FormKind.ERROR, "Trainer's ranks racing to rename tmp-checkpoint to checkpoint (a release that "
                    "lets every rank rename it)", Label.CONFIG_ERROR)
    return None


def round32b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round32b_form(text))
