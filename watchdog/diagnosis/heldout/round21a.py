"""Failure forms read for the misses of round issue23-heldout-21 (half A): a TPU slice's failure code, the entries
of XLA's out-of-memory report without its head, and the Ascend runtime's error codes of a stream that never
completed.

Pure: no I/O. :func:`round21a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 20, and :func:`round21a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* The TPU runtime's slice failure types (PJRT's TPU extension, xla/pjrt/c/pjrt_c_api_tpu.h
  ``PJRT_Callback_Tpu_SliceFailureType``: SLICE_FAILURE_UNKNOWN, _INIT_ERROR, _WORKER_UNAVAILABLE,
  _FLAPPING_TASK_ERROR, _SW_INJECT_ERROR, _CHIP_DRIVER_ERROR), as libtpu's network daemon client logs the one it
  detected ("Detected failure SLICE_FAILURE_CHIP_DRIVER_ERROR in session <id>; Start failure handling", in a glog
  record of tpunetd_client.cc). The header's comment on CHIP_DRIVER_ERROR: "a chip driver reporting some error
  (could correspond to bad TPU or ICI link going down)", a fault of the slice's hardware that the node pool's
  replacement clears (round issue23-heldout-21: MaxText's maxtest guide quoting a v6e job). The other types name
  no device fault and are left to the record's severity. The enum's own listing ("SLICE_FAILURE_CHIP_DRIVER_ERROR =
  5") is not a detection and reads as nothing.
* XLA's TPU out-of-memory report ("Ran out of memory in memory space hbm ... Largest program allocations in hbm:",
  then one entry per buffer: "Size:", "Operator:", "Shape:", "Unpadded size:", "Extra memory due to padding: <size>
  (<n>x expansion)", "XLA label:", "Allocation type: HLO temp", "====="): the report is printed when a program does
  not fit the device's memory, and a paste often keeps only its entries (round issue23-heldout-21: ColabFold on a
  free Colab TPU, cut to entries 16-17). An entry's padding line and its allocation type line are read as that
  report: device memory. ``failureforms.NEEDLES`` already reads the report's head ("Total hbm usage", "Largest
  program allocations"); this is the same report's body.
* The Ascend runtime's error codes (CANN acl/error_codes/rt_error_codes.h: ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046
  "stream sync time out", ACL_ERROR_RT_EVENT_SYNC_TIMEOUT 507047, ACL_ERROR_RT_FFTS_PLUS_TIMEOUT 507048), as
  torch_npu warns of them ("NPU warning, error code is 507046[Error]: ...", NPUStream.cpp) or raises them from a
  failed call (NPU_CHECK_ERROR's "NPU function error: <call>, error code is 507048", NPUException.h: Ascend/pytorch#62,
  vllm-ascend#1443 under Ray's ``(train pid=N)`` prefix; round issue23-heldout-22) and as CANN's error
  manager reports the call ("wait for compute device to finish failed, runtime result = 507046."): the tasks of a
  device stream (on a distributed job, its HCCL collectives) never completed within the timeout, a hang (round
  issue23-heldout-21: a 16-NPU job with HCCL_EXEC_TIMEOUT raised). Other codes in the same words are left to the
  readers of CANN's coded records (heldout.round14a).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: a
#: capital) that the lines these forms read hold, besides the failure forms' needles
NEEDLES: tuple[str, ...] = ("SLICE_FAILURE_", "Extra memory due to padding: ", "Allocation type: HLO temp",
                            "NPU warning, error code is ", "NPU function error: ")

#: libtpu's detection of a slice failure ("Detected failure SLICE_FAILURE_<TYPE> in session <id>")
_SLICE_FAILURE = re.compile(r"\bDetected failure SLICE_FAILURE_([A-Z_]+)\b")
#: ... the types that name a device's fault
_SLICE_HARDWARE = frozenset({"CHIP_DRIVER_ERROR"})

#: an entry of XLA's out-of-memory report: its padding line ("Extra memory due to padding: 2.75M (1.0x expansion)")
#: and its allocation type line ("Allocation type: HLO temp"), each alone on its line
_OOM_REPORT_ENTRY = re.compile(r"^\s*(?:Extra memory due to padding: [\d.]+\s?[KMGTP]?i?B? \([\d.]+x expansion\)|"
                               r"Allocation type: HLO temp)\s*$")

#: the Ascend runtime's codes of a stream, event or FFTS+ task that did not complete in time, as torch_npu's warning
#: and CANN's report of the failed call print them
_RT_TIMEOUT = re.compile(r"\b(?:NPU warning, error code is|NPU function error: .*?, error code is|runtime result =) "
                         r"(50704[678])\b")


def round21a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "SLICE_FAILURE_" in text:
        slice_failure = _SLICE_FAILURE.search(text)
        if slice_failure is not None:
            cause = Label.HARDWARE_ERROR if slice_failure.group(1) in _SLICE_HARDWARE else None
            return Form(FormKind.CRASH, f"a TPU slice failure (SLICE_FAILURE_{slice_failure.group(1)})", cause)
    if ("Allocation type" in text or "due to padding" in text) and _OOM_REPORT_ENTRY.search(text):
        return Form(FormKind.ERROR, "an entry of XLA's out-of-memory report (a buffer the device could not hold)",
                    Label.OOM)
    if ("NPU warning" in text or "NPU function error" in text) and _RT_TIMEOUT.search(text):
        return Form(FormKind.ERROR, "the Ascend runtime's timeout of a stream whose tasks never completed",
                    Label.COLLECTIVE_HANG)
    return None


def round21a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round21a_form(text))) is not None:
        return stated
    if "runtime result" in text and _RT_TIMEOUT.search(text):
        return Label.COLLECTIVE_HANG, "the Ascend runtime's timeout of a stream whose tasks never completed"
    return None
