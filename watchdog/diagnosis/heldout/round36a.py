"""Failure forms read for the misses of round issue23-heldout-36 (part A: accelerators other than NVIDIA and Neuron):
the ROCm runtime's reports of a GPU fault, the amdgpu kernel driver's RAS reports of uncorrectable errors, and a
shell's report of a signal that dumped core in any locale.

Pure: no I/O. :func:`round36a_form` is asked after the forms of round 35, :func:`round36a_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* The ROCm runtime (ROCr, ROCR-Runtime src/core/runtime/runtime.cpp) handles a GPU's page fault in
  ``Runtime::VMFaultHandler``: it prints ``"Memory access fault by GPU node-%u (Agent handle: %p) on address
  %p%s. Reason: %s.\\n"`` (releases before the agent handle: ``"Memory access fault by GPU node-%u on address
  %p%s. Reason: %s.\\n"``) to stderr and calls ``std::abort()``. The process is dead whatever the shell prints after
  it (pytorch/pytorch#109929's French ``Abandon (core dumped)``, read as healthy; ROCm/legacy-rocm-build#1535,
  ROCm/MIOpen#125 print the same). The reasons it names come from the fault's bits: "Page not present or supervisor
  privilege", "Write access to a read-only page", "Execute access to a page marked NX", "Host access only", "ECC
  failure (if supported by HW)", "SRAM ECC failure", "Generic hang recovery", "Unknown". A fault with an ECC reason
  is the device's memory failing (hardware); any other is the program's own access (a crash).
* The same runtime handles a hardware exception (a GPU reset) in ``Runtime::HwExceptionHandler``: ``"HW Exception by
  GPU node-%u (Agent handle: %p) reason :%s\\n"`` with "ECC" or "GPU Hang", then ``std::abort()``. The driver reset
  the device under the job (ROCm/legacy-rocm-build#5259: four of them on gfx942, the node itself crashing hours
  later, read as a plain crash; #4021, MI300X under axolotl): a device fault, to be drained.
* The amdgpu kernel driver's RAS (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c) logs an uncorrectable error interrupt
  with ``dev_info(adev->dev, "uncorrectable hardware error" "(ERREVENT_ATHUB_INTERRUPT) detected!\\n")`` (newer
  kernels through RAS_EVENT_LOG with a ``{<event id>}`` before it, the RAS manager capitalised "Uncorrectable";
  kernels before 5.8: ``"RAS event of type ERREVENT_ATHUB_INTERRUPT detected!"``) and resets the GPU; and its
  counts by block, ``"%ld uncorrectable hardware errors detected in %s block\\n"`` (later with ``"socket: %d, die:
  %d, %u new uncorrectable ..."``). ROCm/legacy-rocm-build#1886 (an MI50's dmesg: the interrupt, a GPU reset, the
  SMU no longer answering, read as healthy). The correctable counts and "no uncorrectable hardware errors" are the
  driver's bookkeeping, not a fault; a count of zero is none.
* A shell reports a process that a core-dumping signal ended (SIGQUIT, SIGILL, SIGABRT, SIGFPE, SIGSEGV, SIGBUS,
  SIGTRAP, SIGSYS) as the signal's description, then ``(core dumped)``: bash's job status ("%s (core dumped)", the
  description from strsignal(3), in the user's locale: French "Abandon", German "Abgebrochen"), zsh's ("[1]    4242
  abort (core dumped)  python x.py", with the job's pid before it and its command after). The English descriptions
  of bash are read already; here any description in letters (a locale's word, "Trace/breakpoint trap", "Quit") with
  an optional job number, pid or script prefix before it and the command after it. Only such a signal prints "(core
  dumped)": the process died.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36a_form` reads hold, besides the needles failureforms already
#: searches ("Exception" finds ROCr's hardware-exception report): ROCr's fault report, amdgpu's RAS records, a
#: shell's "(core dumped)"
NEEDLES: tuple[str, ...] = ("Memory access fault by GPU node-", "ncorrectable hardware error",
                            "ERREVENT_ATHUB_INTERRUPT", "(core dumped)")

#: ROCr's page-fault report (Runtime::VMFaultHandler), with or without the agent handle; the reason is kept
_ROCR_FAULT = re.compile(r"\bMemory access fault by GPU node-\d+ (?:\(Agent handle: (?:0x)?[0-9a-fA-F]+\) )?"
                         r"on address (?:0x[0-9a-fA-F]+|\(nil\))(?:\(may not be exact address\))?\. Reason: ([^.\n]*)")
#: ROCr's hardware-exception report (Runtime::HwExceptionHandler): the device was reset for a hang or an ECC error
_ROCR_HW_EXCEPTION = re.compile(r"\bHW Exception by GPU node-\d+ \(Agent handle: (?:0x)?[0-9a-fA-F]+\) "
                                r"reason ?:\s?(GPU Hang|ECC)\b")
#: amdgpu's RAS interrupt for an uncorrectable error ("{1}" is a RAS event id), and its older wording
_AMDGPU_RAS_INTERRUPT = re.compile(r"\b[Uu]ncorrectable hardware error\s?\(ERREVENT_ATHUB_INTERRUPT\) detected\b|"
                                   r"\bRAS event of type ERREVENT_ATHUB_INTERRUPT detected\b")
#: amdgpu's count of uncorrectable errors in a RAS block (a count of zero, or "no", is none)
_AMDGPU_RAS_COUNT = re.compile(r"(?<![\w.-])0*[1-9]\d* (?:new )?uncorrectable hardware errors detected "
                               r"(?:in total )?in \w+ block\b")
#: a shell's report of a core-dumping signal: the signal's description in letters (any locale; a "/" or a "-"
#: inside it; after its first word only lowercase ones, as strsignal writes them: "Segmentation fault", "Trace/
#: breakpoint trap", "Erreur de segmentation"), before it a job number, a pid, the shell's or a script's name
#: ("zsh: ", "run.sh: line 34: "), after it the command. The description starts the line or follows the prefix, so a
#: sentence that quotes the report ("I saw Aborted (core dumped)") is not one.
_CORE_DUMPED = re.compile(r"^\W*(?:\[\d+\][+-]?\s+)?(?:[\w./-]+: (?:line \d+:\s+)?)?(?:\d+\s+)?"
                          r"[^\W\d_][^\W\d_/-]*(?:[ /-][^\W\d_A-Z]+){0,3}\s+\(core dumped\)(?:\s|$)")


def round36a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "fault by GPU node-" in text and (fault := _ROCR_FAULT.search(text)) is not None:
        if "ECC" in fault.group(1):
            return Form(FormKind.CRASH, "the ROCm runtime's GPU memory fault for an ECC failure (the device's memory)",
                        Label.HARDWARE_ERROR)
        return Form(FormKind.CRASH, "the ROCm runtime's GPU memory access fault (the process aborts)")
    if "HW Exception by GPU node-" in text and _ROCR_HW_EXCEPTION.search(text):
        return Form(FormKind.CRASH, "the ROCm runtime's hardware exception (the GPU was reset for a hang or an ECC "
                    "error)", Label.HARDWARE_ERROR)
    if "ERREVENT_ATHUB_INTERRUPT" in text and _AMDGPU_RAS_INTERRUPT.search(text):
        return Form(FormKind.ERROR, "the amdgpu driver's uncorrectable hardware error (RAS interrupt)",
                    Label.HARDWARE_ERROR)
    if "uncorrectable hardware errors" in text and _AMDGPU_RAS_COUNT.search(text):
        return Form(FormKind.ERROR, "the amdgpu driver's count of uncorrectable hardware errors in a RAS block",
                    Label.HARDWARE_ERROR)
    if "(core dumped)" in text and _CORE_DUMPED.search(text):
        return Form(FormKind.CRASH, "a signal that dumped core (the shell's report, any locale)")
    return None


def round36a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36a_form(text))
