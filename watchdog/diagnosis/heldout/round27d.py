"""Failure forms read for the misses of round issue23-heldout-27 (part D: forum threads, blogs and vendors'
troubleshooting cases): the kernel's hardware-error records as a device black box prints them, the Ascend
runtime's report of a wait task that timed out on the device, and HCCL's link establishment that timed out.

Pure: no I/O. :func:`round27d_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 27 third C, and :func:`round27d_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for
the cause of a line that is already an error.

Each form is read where its program prints it:

* The kernel's records of a hardware error (UEFI CPER sections printed by drivers/firmware/efi/cper.c and
  acpi/apei/ghes.c) begin with the prefix ``"{%u}" HW_ERR`` -- ``{6}[Hardware Error]: event severity: fatal`` --
  which :data:`neuron_watch.diagnosis.forms_severity.HW_ERR` reads. A device's black box copies them without the
  colon: the Ascend NPU's kbox (``/hisi_logs/device-2/.../bbox/kbox.txt``) holds ``{6}[Hardware Error]event
  severity: recoverable``, ``{6}[Hardware Error]  error_type: 3, multi-bit ECC`` (round issue23-heldout-27:
  hiascend-troubleshooting-8, an HBM multi-bit ECC fault read as healthy). The same record is the same hardware
  fault, colon or not: the node must be drained. A record that states the error was corrected (cper's severity
  "corrected", ghes' "It has been corrected by h/w") or that it is informational is not a fault.
* The Ascend runtime's report of a wait task (STARS) that timed out on the device, in device_error_proc.cc's
  ``ProcessStarsWaitTimeoutErrorInfo``: ``"The error from device(chipId:%u, dieId:%u), serial number is %lu,
  event wait timeout occurred during task execution, stream_id:%hu, sq_id:%hu, task_id:%hu, event_id=%u,
  timeout=%us."`` and its notify twin. A stream waited for an event or a notify another stream (HCCL's, in a
  distributed job) or another rank never sent within the execution timeout: a collective that never completed,
  whatever the surrounding EE9999 "Inner Error!" says (round issue23-heldout-27: mindspore-forum-1156, four nodes
  whose ranks waited while one evaluated a checkpoint, restarted as a crash of unknown cause).
* HCCL's link establishment that timed out: ``HCCL_ERROR("[%s][%s] wait socket establish timeout, ...")`` in
  hccl_socket_manager.cc's ``[Wait][LinkEstablish]`` and the channel connect of newer releases
  (``[InitChannel][Timeout] wait socket establish timeout, channel connect timeout after %lld sec``), the EI0006
  of HCCL's user guide: the peer of a link did not answer within HCCL_CONNECT_TIMEOUT -- the transport between the
  ranks failed, as an NCCL socket connect that times out does (round issue23-heldout-27: hiascend-hcclug-50, read
  as a crash of unknown cause).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round27d_form` reads hold, besides the needles failureforms already
#: searches: the kernel's hardware-error prefix, the Ascend runtime's wait timeout, HCCL's link establishment
NEEDLES: tuple[str, ...] = ("[Hardware Error]", "wait timeout occurred", "wait socket establish timeout")

#: the kernel's hardware-error prefix without its colon (a device black box's copy of a CPER record) ...
_HW_ERR_NO_COLON = re.compile(r"\[Hardware Error\](?!:)")
#: ... unless the record says the error was corrected or is informational
_CORRECTED_OR_INFO = re.compile(r"\bcorrected\b|\bseverity: info\b|\btype: info\b")

#: the Ascend runtime's wait task (an event or a notify) that timed out on the device
_ASCEND_WAIT_TIMEOUT = re.compile(r"\b(?:event|notify) wait timeout occurred during task execution\b")

#: HCCL's link establishment that timed out (EI0006)
_HCCL_LINK_TIMEOUT = re.compile(r"\bwait socket establish timeout\b")


def round27d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "[Hardware Error]" in text and _HW_ERR_NO_COLON.search(text) and not _CORRECTED_OR_INFO.search(text):
        return Form(FormKind.ERROR, "the kernel's hardware-error record (as a device black box copies it)",
                    Label.HARDWARE_ERROR)
    if "wait timeout occurred" in text and _ASCEND_WAIT_TIMEOUT.search(text):
        return Form(FormKind.ERROR, "the Ascend runtime's wait task that timed out on the device (a stream waiting "
                    "for another stream or rank)", Label.COLLECTIVE_HANG)
    if "wait socket establish timeout" in text and _HCCL_LINK_TIMEOUT.search(text):
        return Form(FormKind.ERROR, "HCCL's link establishment that timed out (the peer did not answer)",
                    Label.COMM_ERROR)
    return None


def round27d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round27d_form(text))
