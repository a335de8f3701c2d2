"""Failure forms read for the misses of round issue23-heldout-40 (part G: training stacks of the Chinese open-source
ecosystem): the Ascend CANN runtime's record of a call that failed with its reason, XTuner's command line catching
the failure of the command it ran, and Colossal-AI's banner for a kernel it builds at run time.

Pure: no I/O. :func:`round40g_form` is asked after the forms of round 39, :func:`round40g_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* The Ascend CANN runtime reports every runtime call that failed under the error record it belongs to (an
  ``EZ9999``/``EE9999``/``E30008`` record's "TraceBack (most recent call last):" block) as ``<call> execute failed,
  reason=[<reason>][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:<n>]``: the reason is the runtime's
  own word for its error code. Some reasons state the cause: ``driver error:out of memory`` (the driver could not
  give the device memory asked for), ``device id error`` (the device id the process asked the runtime for is not
  one it can map: the visible devices, the rank-to-device mapping or a runtime too old for the card), and ``aicpu
  timeout`` (an AI CPU operator, GetNext's wait for the input pipeline above all, did not finish in its time: a
  failure of no stated resource). Round issue23-heldout-40 taught it twice: CANN's troubleshooting case of GetNext's
  E30008 timeout (hiascend 80RC3 troubleshooting_0145: its only failure records are this line and the coded record
  of a code no registry entry names, read as healthy), and vllm-ascend#672, an HCCL communicator whose runtime
  refused the device id (``rtGetDeviceIndexByPhyId execute failed, reason=[device id error]``), which a CANN
  upgrade fixed, read as a crash to restart. Other reasons (a stream's or task's timeout, "the model stream execute
  failed", a driver's internal error) say no more than the record around them, which other forms read.
* XTuner's command line (xtuner/entry_point.py) runs each command's tool and catches what it raises:
  ``print_log(f"WARNING: command error: '{e}'!", 'current', logging.WARNING)``, then its usage text and ``return``
  (an unknown mode: ``WARNING: command error!``). The record is at a warning's level, but the command did not run
  to its end: the job failed. An OSError's ``[Errno 2]`` (ENOENT) in the caught message is a file the command needs
  that does not exist; a mode it does not know is a command line it refused; other exceptions (a subprocess whose
  training failed, in releases that check it) leave the cause to the lines above (round issue23-heldout-40:
  InternLM/Tutorial#727, 'xtuner train' of a copied config whose data path led to a missing file, read as healthy).
* Colossal-AI's op builder (colossalai/kernel/op_builder/builder.py ``load``) prints, when no prebuilt kernel is
  installed, ``No pre-built kernel is found, build and load the <name> kernel during runtime now`` between two
  rules of ``=`` and compiles it with torch's cpp_extension; it prints ``Time to load <name> op: <t> seconds``
  when the build is done (read with DeepSpeed's words of the same). Between the two the job is compiling
  (round issue23-heldout-40: ColossalAI#3359, ColossalChat's cpu_adam build after the checkpoint shards, read as
  healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40g_form` reads hold: CANN's failed runtime call, XTuner's
#: command error, Colossal-AI's runtime kernel build
NEEDLES: tuple[str, ...] = (
    "execute failed, reason=[",
    "WARNING: command error",
    "No pre-built kernel is found",
)

#: CANN's failed runtime call and its reason ("rtStreamSynchronizeWithTimeout execute failed, reason=[aicpu
#: timeout][FUNC:FuncErrorReason]..."): a runtime API's name (rt..., acl...), and the record's location after the
#: reason or nothing; group 1 the call, group 2 the reason
_CANN_FAILED_CALL = re.compile(r"\b((?:rt|acl)[A-Z]\w*) execute failed, reason=\[([^\]\n]{1,80})\](?:\[FUNC:|\s*$)")

#: ... the reasons that state a cause (the runtime's words for its error codes)
_CANN_REASONS: tuple[tuple[re.Pattern[str], Label | None, str], ...] = (
    (re.compile(r"\bout of memory\b"), Label.OOM, "device memory the driver could not give"),
    (re.compile(r"^device id error$"), Label.CONFIG_ERROR, "a device id the runtime cannot map"),
    (re.compile(r"^aicpu timeout$"), None, "an AI CPU operator that did not finish in its time"),
)

#: XTuner's caught command failure: "WARNING: command error: '<exception>'!" (group 1), or "WARNING: command error!"
_XTUNER_COMMAND_ERROR = re.compile(r"\bWARNING: command error(?:: '(.*)'!|!)\s*$")

#: ... an OSError's ENOENT in the caught message
_ENOENT = re.compile(r"^\[Errno 2\] ")

#: Colossal-AI's runtime kernel build
_COLOSSAL_BUILD = re.compile(r"\bNo pre-built kernel is found, build and load the \w+ kernel during runtime now\b")


def _cann_failed_call(text: str) -> Form | None:
    m = _CANN_FAILED_CALL.search(text)
    if m is None:
        return None
    call, reason = m.group(1), m.group(2).strip()
    for pattern, label, what in _CANN_REASONS:
        if pattern.search(reason):
            return Form(FormKind.ERROR, f"the Ascend CANN runtime's call {call} failed: {what} "
                        f"(reason=[{reason}])", label)
    return None


def _xtuner_command_error(text: str) -> Form | None:
    m = _XTUNER_COMMAND_ERROR.search(text)
    if m is None:
        return None
    caught = m.group(1)
    if caught is None:
        return Form(FormKind.ERROR, "XTuner refused its command line (command error, usage printed)",
                    Label.CONFIG_ERROR)
    if _ENOENT.match(caught):
        return Form(FormKind.ERROR, "XTuner's command failed on a file that does not exist (command error, "
                    "[Errno 2])", Label.CONFIG_ERROR)
    return Form(FormKind.ERROR, "XTuner's command failed (command error)")


def round40g_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "execute failed, reason=[" in text and (cann := _cann_failed_call(text)) is not None:
        return cann
    if "WARNING: command error" in text and (xtuner := _xtuner_command_error(text)) is not None:
        return xtuner
    if "No pre-built kernel is found" in text and _COLOSSAL_BUILD.search(text):
        return Form(FormKind.COMPILE_RUNNING, "a Colossal-AI kernel built at run time")
    return None


def round40g_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40g_form(text))
