"""What a failure form is: its kind (what it means to the judge) and the form read from one line.

Pure: no I/O. The readers of each family of form (:mod:`neuron_watch.diagnosis.forms_severity`,
:mod:`~neuron_watch.diagnosis.forms_errors`, :mod:`~neuron_watch.diagnosis.forms_metric`,
:mod:`~neuron_watch.diagnosis.forms_phase`) return a :class:`Form`;
:func:`neuron_watch.diagnosis.failureforms.read_line` asks them in order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from neuron_watch.events import Label


class FormKind(str, enum.Enum):
    """What a form means to the judge (see :mod:`neuron_watch.diagnosis.failureforms`)."""

    ERROR = "error"
    CRASH = "crash"
    METRIC = "metric"
    COMPILE_RUNNING = "compile_running"
    COMPILE_DONE = "compile_done"
    COMM_WAIT = "comm_wait"


@dataclass(frozen=True)
class Form:
    """A failure form read from one line: its kind, what it is (for reasons) and, when the form
    itself states it, the cause (``label``)."""

    kind: FormKind
    name: str
    label: Label | None = None


def stated_cause(form: Form | None) -> tuple[Label, str] | None:
    """The cause ``form`` states, as ``(label, name)``; None for no form or a form that states none."""
    return None if form is None or form.label is None else (form.label, form.name)


