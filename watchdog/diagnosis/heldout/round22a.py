"""Failure forms read for the misses of round issue23-heldout-22 (half A): a collective on a tensor whose device
the process group has no backend for.

Pure: no I/O. :func:`round22a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 21, and :func:`round22a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

* c10d's refusal of a collective on a device its process group has no backend for
  (torch/csrc/distributed/c10d/ProcessGroup.hpp, ``getBackend``: ``TORCH_CHECK(false, "No backend type associated
  with device type ", deviceType)``): the program calls a collective on a tensor of a device (``cpu`` under NCCL,
  ``xpu`` or ``npu`` under gloo, a plugin's device) for which ``init_process_group`` registered no backend. Its
  set-up and its tensors disagree, and every restart calls the same collective on the same device: configuration
  (round issue23-heldout-22: torchtune on Intel XPU with gloo, torch-xpu-ops#1328; the same refusal of a CPU
  tensor under NCCL in verl's TaskRunner, of an NPU tensor by a CUDA-only path).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (each with a marker character of the classifier's batch search) the lines these forms read hold
NEEDLES: tuple[str, ...] = ("No backend type associated with device type ",)

#: c10d's refusal, with the device type (a word: cpu, cuda, xpu, npu, a plugin's name)
_NO_BACKEND_FOR_DEVICE = re.compile(r"\bNo backend type associated with device type [a-z_][\w]*\s*$")


def round22a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "No backend type" in text and _NO_BACKEND_FOR_DEVICE.search(text):
        return Form(FormKind.ERROR, "a collective on a device the process group has no backend for (c10d's "
                    "refusal): the job's set-up and its tensors disagree, the same on every restart",
                    Label.CONFIG_ERROR)
    return None


def round22a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round22a_form(text))
