"""A process its user interrupted while it waited on other processes: the hang the user saw.

Pure: no I/O. :func:`interrupted_while_waiting` is asked by :class:`neuron_watch.diagnosis.crashreading.CrashReader`
when the verdict is a crash of unknown cause (``other_crash``), with the last traceback of the process it names.

CPython prints a traceback ending in a bare ``KeyboardInterrupt`` when SIGINT (the user's Ctrl-C, echoed as ``^C``)
reaches the main thread: the program did not fail, its user stopped it. Users stop a job this way when it has stopped
printing, and paste the traceback to show where it was (round issue23-heldout-28: mmdetection-5060, distributed
training stuck with CPUs at 100%, "seems like a deadlock"; the launcher's stack ends in ``subprocess._try_wait`` on
``os.waitpid``). The innermost frame says what the process was doing when it was stopped: a call that waits for
another process or thread (``waitpid``, ``Popen.wait``, ``Thread.join``, a lock's ``acquire``, ``select``/``poll``,
a socket's ``recv``/``accept``, a collective or a barrier of torch.distributed) is a process that was waiting on
others that did not answer: a hang, restarted as one (the culprit is among the processes it waited on). A
``KeyboardInterrupt`` raised in any other frame (the program computing, loading, printing) says nothing of a
failure and is left to the other readings; so is ``SystemExit``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from neuron_watch.diagnosis.startup import RaisedAt
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict

#: the line CPython ends an interrupted traceback with (launchers' prefixes and markdown quoting before it)
#: CPython's unraisable hook prints it with an empty message after a colon ("KeyboardInterrupt: ", an interrupt that
#: reached a destructor: Python/errors.c write_unraisable_exc_file; Detectron.pytorch#140's DataLoader shutdown)
_INTERRUPTED = re.compile(r"^[\s>|`*]*(?:\[[^\]]*\]:?\s*)*KeyboardInterrupt:?\s*$")

#: functions of the standard library and of torch.distributed that wait for another process, thread or peer
_WAITING = re.compile(r"^(?:waitpid|_try_wait|_wait|wait|wait_for|_wait_for_tstate_lock|join|acquire|select|poll|"
                      r"recv|recv_into|recvfrom|accept|barrier|monitored_barrier|all_reduce|all_gather|"
                      r"all_gather_into_tensor|reduce_scatter|broadcast|synchronize|"
                      # DistributedDataParallel's own collectives (torch/nn/parallel/distributed.py): the broadcast of
                      # rank 0's buffers before each forward, of its parameters at construction (ultralytics#1662: a
                      # DDP run on Windows stopped in _sync_buffers)
                      r"_sync_buffers|_sync_module_buffers|_sync_params_and_buffers|_distributed_broadcast_coalesced)$")
#: a lock's or a semaphore's context entry (multiprocessing/synchronize.py, threading.py ``__enter__``): acquiring it
#: (Detectron.pytorch#140: a DataLoader's worker queue lock, held by a worker that had died)
_LOCK_ENTRY = re.compile(r"(?:^|/)(?:synchronize|threading)\.py$")

#: how many lines after the evidence the interrupt may come (a traceback's frames, two lines each)
_NEAR = 40

#: the terminal's echo of the user's Ctrl-C (a tty's ECHOCTL prints the interrupt character as ``^C``) alone on the
#: last line a process printed (markdown quoting or emphasis around it)
_INTERRUPT_ECHO = re.compile(r"^[\s>|`*]*\^C[\s`*]*$")

#: the evidence's signature: the echo is a form, not a rule of the table
ECHO_SIGNATURE = "form.user_interrupt"


def is_interrupt(text: str) -> bool:
    """Whether ``text`` is the line CPython ends a traceback with when SIGINT interrupted it (``KeyboardInterrupt``
    alone, or with the unraisable hook's empty message)."""
    return _INTERRUPTED.match(text) is not None


HANG_ADVICE = ("The process was stopped by its user (Ctrl-C) while it waited on other processes that did not "
               "answer: the job had hung. Look at the processes it waited on (a rank stuck in a collective, a "
               "child that stopped printing) and restart from the last complete checkpoint; if it hangs at the "
               "same point again, dump the stacks of every rank (py-spy dump) before stopping it.")


def _interrupted_wait(tracebacks: Sequence[tuple[RaisedAt, Evidence | None]], after: Sequence[str]
                      ) -> tuple[Evidence | None, str, str] | None:
    """The first of ``tracebacks`` (newest first) its user's interrupt ended in a call that waits on another
    process, as (its evidence, the file, the function): a traceback cut before its exception line (a launcher's,
    printed as it went down) or one that ended in an interrupt elsewhere is passed over; one that ended in an
    exception of its own stops the search (that exception is the failure)."""
    for index, (raised, line) in enumerate(tracebacks):
        interrupted = _INTERRUPTED.match(raised.exception) or (
            index == 0 and any(_INTERRUPTED.match(text) for text in after[:_NEAR]))
        if raised.frames and interrupted:
            file, func = raised.frames[-1]
            if _WAITING.match(func) or (func == "__enter__" and _LOCK_ENTRY.search(file)):
                return line, file, func
        elif raised.exception:
            return None
    return None


def interrupted_while_waiting(verdict: Verdict, tracebacks: Sequence[tuple[RaisedAt, Evidence | None]],
                              after: Sequence[str]) -> Verdict | None:
    """``verdict`` as a hang when it is a crash of unknown cause and one of its process's last tracebacks
    (``tracebacks``, newest first: :meth:`CrashReader.last_tracebacks`, then the traceback its user's interrupt
    ended, kept when another followed it) ends in ``KeyboardInterrupt`` raised in a call that waits on another
    process; None otherwise. ``after``: the lines of the evidence's stream after it, which hold the bare
    ``KeyboardInterrupt`` of the newest traceback when it reads as cut before its end."""
    if verdict.label is not Label.OTHER_CRASH or not tracebacks:
        return None
    found = _interrupted_wait(tracebacks, after)
    if found is None:
        return None
    line, file, func = found
    evidence = verdict.evidence if line is None or line in verdict.evidence else (line, *verdict.evidence)
    return dataclasses.replace(
        verdict, label=Label.COLLECTIVE_HANG, action=Action.RESTART, advice=HANG_ADVICE, evidence=evidence,
        reason=f"the user interrupted a process waiting on others (KeyboardInterrupt in {func}, "
               f"{file.rsplit('/', 1)[-1]}): it had hung waiting for processes that did not answer")


def stopped_by_user(tails: dict[RankKey, list[LogLine]], latest_progress: float | None) -> Verdict | None:
    """A hang, when a process's last line is the terminal's echo of its user's Ctrl-C (``^C`` alone) with no
    progress of any rank after it: the user stopped a job that had stopped printing (torch-ngp#113 and MixText#15:
    host-memory allocations of tens of GB, then nothing until ``^C``). ``tails``: each process's last non-blank
    lines; None when no process ends so, or when a rank progressed after the line before the echo (a job
    stopped while it worked)."""
    for key, tail in tails.items():
        if not tail or not _INTERRUPT_ECHO.match(tail[-1].text):
            continue
        line = tail[-1]
        # the echo must end a silence: a process that progressed up to the line before it was working when stopped
        since = tail[-2].mono if len(tail) > 1 else line.mono
        if latest_progress is not None and latest_progress >= since:
            continue
        return Verdict(
            Label.COLLECTIVE_HANG, Action.RESTART, ranks=(key,), culprit=key,
            evidence=(Evidence(key, line.text, ECHO_SIGNATURE, line.source, line.lineno, line.mono),),
            reason="the log ends with its user's Ctrl-C (^C) and no progress after it: the user stopped a job "
                   "that had stopped making progress",
            advice=HANG_ADVICE, culprit_source="failure")
    return None
