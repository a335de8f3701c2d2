"""Failure forms read for the misses of round issue23-heldout-37 (part A: video and large image generation model
training): CPython's message of a name it could not import, printed without its exception's class, and
torch.utils.checkpoint's report that a recomputed segment does not match its forward pass.

Pure: no I/O. :func:`round37a_form` is asked after the forms of round 36, :func:`round37a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* CPython's ``from module import name`` that finds no such name raises ImportError with
  ``"cannot import name %R from %R (%S)"`` (Python/ceval.c ``import_from``; ``(unknown location)`` for a namespace
  package, no parenthesis before 3.7). The signature table reads it after its class name (``ImportError: ...``).
  Programs that import an optional backend inside ``try`` print the exception's message alone, ``print(e)`` or
  ``logger.error(str(e))``, and go on to fail where the backend is used (DeepSpeed imported by accelerate while a
  trainer's validation unwraps its model: ``cannot import name 'log' from
  'torch.distributed.elastic.agent.server.api'``, DeepSpeed older than the installed PyTorch). The message alone on
  its line is the same form: the installed packages do not match, every restart imports them again (round
  issue23-heldout-37: SimpleTuner#668, the bare message and then a traceback of the validation, read as a crash to
  restart). Quoted inside another line (a warning that an optional plugin was skipped, prose) it is not read here.
* torch.utils.checkpoint's non-reentrant checkpointing saves the tensors of a segment's forward pass and checks them
  against its recomputation in the backward pass; when they differ it raises ``CheckpointError`` with
  ``"torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than during the
  forward pass."`` or ``"torch.utils.checkpoint: A different number of tensors was saved during the original forward
  and recomputation."`` (torch/utils/checkpoint.py ``_checkpoint_hook`` / ``check_recomputed_tensors_match``). The
  forward is not the same twice: parameters that DeepSpeed ZeRO-3 partitions and gathers only for the forward
  (recomputed as shape ``[0]``), a module that changes what it saves between the two passes. The same model and
  options fail at the same step on every restart: a set-up that does not fit activation checkpointing (axolotl warns
  of it before it starts: "qlora + zero3 with use_reentrant: false may result in a CheckpointError"; round
  issue23-heldout-37: ReCamMaster#22, DeepSpeed stage 3 with gradient checkpointing, read as an unknown error to
  restart). Configuration. Its other message (``Unpack is being triggered for a tensor that was already unpacked
  once``, a backward that reads ``saved_tensors`` twice) is a program's mistake stated differently, not read here.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round37a_form` reads hold, besides the needles failureforms already
#: searches: CPython's failed import of a name, torch.utils.checkpoint's exception
NEEDLES: tuple[str, ...] = ("cannot import name", "CheckpointError")

#: CPython's ImportError message alone on its line (after a rank's or a launcher's prefix at most): the name, the
#: module, and the module's file or "unknown location" in parentheses (3.7 and later)
_BARE_IMPORT = re.compile(r"^\W{0,3}(?:\[(?:rank|default)\d+\]:\s*)?cannot import name '[\w.]+' from '[\w.]+'"
                          r"(?: \([^()]*\))?\s*$")

#: torch.utils.checkpoint's exception for a recomputation that does not match its forward pass (its module path
#: optional: a traceback's last line names it in full, a re-raise by its class)
_RECOMPUTE_MISMATCH = re.compile(r"\bCheckpointError: torch\.utils\.checkpoint: (?:Recomputed values for the "
                                 r"following tensors have different metadata|A different number of tensors was "
                                 r"saved during the original forward and recomputation)")


def round37a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "cannot import name" in text and _BARE_IMPORT.search(text):
        return Form(FormKind.ERROR, "CPython's message of a name it could not import (installed packages that do "
                    "not match)", Label.CONFIG_ERROR)
    if "CheckpointError" in text and _RECOMPUTE_MISMATCH.search(text):
        return Form(FormKind.ERROR, "activation checkpointing's recomputation unlike its forward pass (a set-up "
                    "that does not fit checkpointing: ZeRO-3's partitioned parameters)", Label.CONFIG_ERROR)
    return None


def round37a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round37a_form(text))
