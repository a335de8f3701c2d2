"""Failure forms of a process's end: an exit status as whoever waited for the process reports it, and the first
line a crash reporter prints.

Pure: no I/O. Every program that runs another says how it ended, each in its own words, and a log that holds
only that report (the training process's own output lost, or cut from the paste) must not read as healthy
(:func:`exit_form`). Read from the reporters' sources:

* an exit status that is not 0, named as such: kubectl's ``command terminated with exit code 137`` (client-go
  util/exec CodeExitError), Docker Compose's ``trainer-1 exited with code 137``, a scheduler's or a CI runner's
  ``Job 123 failed: Exited with exit code 1``, ``Process completed with exit code 1``; a process verb (exited,
  terminated, died) with a code or status, or any verb with an *exit* or *return* code ("failed with status 404"
  is an HTTP status, not a process's);
* Go's os/exec error, which callers print after their own words (and supervisord in parentheses, ``exited: trainer
  (exit status 137; not expected)``): ``exit status 1``, or ``signal: killed`` for a
  process a signal ended (ProcessState.String);
* the first line of a crash report: Open MPI's ``[host:pid] *** Process received signal ***``
  (opal/util/stacktrace.c), a sanitizer's ``==1234==ERROR: AddressSanitizer: heap-use-after-free``
  (compiler-rt), libstdc++'s ``terminate called without an active exception`` and ``terminate called
  recursively`` (libsupc++/vterminate.cc), ``pure virtual method called`` (libsupc++/pure.cc): each process
  aborts right after it.

The shell's convention (128 + the signal) makes 137 a SIGKILL and 139 a SIGSEGV: a crash whose cause the status
does not say. 126 and 127 are the shell's own: a command it could not execute or find, which a restart runs again.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

#: Digit-free literals of which every line holding one of these forms holds one (failureforms.NEEDLES).
NEEDLES: tuple[str, ...] = (
    "xit code", "xit status", "eturn code", "with code ", "with status ", "signal: ", "Process received signal",
    "Sanitizer: ", "without an active exception", "terminate called recursively", "pure virtual method called",
)

_PROCESS_VERB = r"(?i:\b(?:exited|terminated|died|quit|exits)\b)"
_ANY_VERB = r"(?i:\b(?:failed|finished|completed|ended|stopped|crashed|returned)\b)"
_WITH = r"[^\n]{0,30}?(?:\bwith\b|:)\s+(?:an? )?(?:non-?zero |abnormal )?"
#: a process's end with its status: a process verb and a code or status, or any verb and an exit or return code
_EXIT_STATUS = re.compile(
    _PROCESS_VERB + _WITH + r"(?i:(?:exit |return |error )?(?:code|status))\s*[:=]?\s*\(?(-?\d+)\b|" +
    _ANY_VERB + _WITH + r"(?i:(?:exit|return) (?:code|status))\s*[:=]?\s*\(?(-?\d+)\b")
#: Go's os/exec error after its caller's words (or alone): "exit status 1", "signal: killed"
_GO_EXIT = re.compile(r"(?:^|:\s|\()exit status (-?\d+)\b|"
                      r"(?:^|:\s)signal: (?P<signal>killed|segmentation fault|aborted|bus error|illegal instruction|"
                      r"floating point exception)\b")
#: the first line of a crash report, after which the process aborts
_CRASH_HEADER = re.compile(r"\*\*\* Process received signal \*\*\*|==\d+==\s*ERROR: (?:Address|Memory|Thread|Leak|"
                           r"UndefinedBehavior)Sanitizer: |\bterminate called (?:without an active exception|"
                           r"recursively)\b|\bpure virtual method called\b")
#: the shell's statuses for a command it could not run (126: not executable, 127: not found)
_NOT_RUN = frozenset({126, 127})


def exit_form(text: str) -> Form | None:
    """The form of a process's end that ``text`` reports (a status that is not 0, a crash report's first line), or
    None."""
    m = _CRASH_HEADER.search(text)
    if m is not None:
        return Form(FormKind.CRASH, "a crash report's first line")
    m = _EXIT_STATUS.search(text) or _GO_EXIT.search(text)
    if m is None:
        return None
    signal = m.groupdict().get("signal")
    if signal is not None:
        return Form(FormKind.CRASH, f"a process ended by a signal ({signal})")
    code = int(next(status for status in m.groups() if status is not None))
    if code == 0:
        return None
    if code in _NOT_RUN:
        return Form(FormKind.CRASH, f"exit status {code}: a command the shell could not run", Label.CONFIG_ERROR)
    return Form(FormKind.CRASH, f"a process that ended with status {code}")
