"""What the offline ``diagnose`` reads beside the judge: each rank's recent lines and its Python tracebacks.

Pure: no I/O. The offline judge has the whole of a saved log and judges it once, at its end, so it
reads a failure's error block around its evidence
(:class:`RecentLines`), a program-mistake exception raised in set-up code (:class:`Tracebacks`),
a log that ends inside a traceback (:func:`open_traceback`), a failure that states no cause after
another process stated one (:func:`cause_stated_before`), and a launcher's report of a child that failed
after the child's own exception (:func:`child_exception_before`). The readers of a crash verdict are
wired into the live judge too, over the lines the nodes sent around the failure (crashreading.py).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Protocol

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE, read_error
from neuron_watch.diagnosis.exctaxonomy import (
    exception_class,
    exception_message,
    frame_of,
    in_traceback,
    program_mistake,
    raised_in_setup,
)
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.diagnosis.heldout import round38d_warning_stack
from neuron_watch.diagnosis.interrupted import is_interrupt
from neuron_watch.diagnosis.judge import TRACEBACK_SIGNATURE
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict


class RecentLines:
    """Each rank's recent lines, so the judge reads a failure's error block
    (:mod:`neuron_watch.diagnosis.errorblock`) around its evidence line. A rank keeps its last
    :attr:`LINES`: a failure is read at the end of the input, and the block of a rank's failure is among
    its last lines unless it printed that many after it (then the line is read alone, as the live judge
    reads it)."""

    LINES = 2000

    def __init__(self) -> None:
        self.lines: dict[RankKey, collections.deque[LogLine]] = {}

    def add(self, line: LogLine) -> None:
        kept = self.lines.get(line.key)
        if kept is None:
            kept = self.lines[line.key] = collections.deque(maxlen=self.LINES)
        kept.append(line)

    def before(self, ev: Evidence, count: int) -> list[LogLine]:
        """The last ``count`` kept lines of ``ev``'s source printed before its line, whatever their rank (in
        line order): a launcher and the child it started write one file under different rank tags."""
        found = [line for kept in self.lines.values() for line in kept
                 if line.source == ev.source and line.lineno < ev.lineno]
        found.sort(key=lambda line: line.lineno)
        return found[-count:]

    def around(self, ev: Evidence) -> tuple[list[LogLine], int] | None:
        """The rank's kept lines and the index of ``ev``'s line among them (None: no longer kept)."""
        kept = self.lines.get(ev.key)
        if kept is None:
            return None
        lines = list(kept)
        for i in range(len(lines) - 1, -1, -1):
            line = lines[i]
            if line.lineno == ev.lineno and line.source == ev.source and line.text == ev.text:
                return lines, i
        return None


class Tracebacks:
    """Each rank's latest Python traceback: its frames, and the program-mistake exception it ended in.

    A ``ValueError`` or ``KeyError`` says nothing of a cause by its class; where it was raised does
    (:func:`~neuron_watch.diagnosis.exctaxonomy.raised_in_setup`). Offline it reads every line; live,
    crashreading.py reads the traceback of the failure from the lines around it.
    """

    #: frames kept per traceback (the innermost ones: deep recursions print thousands)
    FRAMES = 64

    def __init__(self) -> None:
        self.frames: dict[RankKey, list[tuple[str, str]]] = {}
        #: each rank's last program-mistake exception: its line, its frames, whether its header was read
        self.mistakes: dict[RankKey, tuple[str, list[tuple[str, str]], bool]] = {}
        self.headed: set[RankKey] = set()
        #: each rank's last traceback that ended in an exception line, whatever its class: its frames and its
        #: exception line (startup.py reads it beside the verdict's own line)
        self.ended: dict[RankKey, tuple[list[tuple[str, str]], LogLine]] = {}
        #: the latest frame line of each rank whose last traceback is still open (cut before its exception line)
        self.open: dict[RankKey, LogLine] = {}
        #: each rank's last traceback its user's interrupt ended (a bare ``KeyboardInterrupt``, which is no exception
        #: line of the ``Class: message`` form and leaves the traceback open): its frames and that line, kept when
        #: another traceback follows it (a launcher's, printed as it went down: ultralytics#1662)
        self.interrupted: dict[RankKey, tuple[list[tuple[str, str]], LogLine]] = {}

    def observe(self, line: LogLine) -> None:
        text = line.text
        if "Traceback (most recent call last)" in text:
            self.frames[line.key] = []
            self.headed.add(line.key)
            return
        frame = frame_of(text)
        if frame is not None:
            frames = self.frames.setdefault(line.key, [])
            self.open[line.key] = line
            frames.append(frame)
            del frames[:-self.FRAMES]
        elif self.frames.get(line.key) and is_interrupt(text):
            self.interrupted[line.key] = (list(self.frames[line.key]), line)
        elif self.frames.get(line.key) and exception_class(text) is not None:
            # the traceback's exception line ends it, whatever its class
            frames = self.frames.pop(line.key)
            if program_mistake(text) is not None:
                self.mistakes[line.key] = (text, frames, line.key in self.headed)
            self.ended[line.key] = (frames, line)
            self.open.pop(line.key, None)
            self.headed.discard(line.key)

    def mistake_in_setup(self, verdict: Verdict) -> Verdict | None:
        """Configuration, when the crash came before any progress and its evidence is a program-mistake
        exception raised under a set-up function and no function that runs the work."""
        if verdict.step is not None or not verdict.evidence:
            return None
        ev = verdict.evidence[0]
        found = self.mistakes.get(ev.key)
        if found is None or found[0] != ev.text:
            return None
        function = raised_in_setup(found[1])
        if function is None:
            return None
        name = program_mistake(ev.text)
        return dataclasses.replace(
            verdict, label=Label.CONFIG_ERROR, action=Action.STOP, advice=CONFIG_ADVICE,
            reason=f"{name} raised in set-up code ({function}) before any progress: a setting the program "
                   f"refuses, which a restart meets again ({ev.text.strip()[:160]})")


def open_traceback(tails: dict[RankKey, list[LogLine]], latest_progress: float | None,
                   recent: RecentLines | None = None) -> Verdict | None:
    """Not healthy: a rank whose input ends inside a Python traceback (frames, no exception line after)
    with no progress of any rank after it: the process was printing the exception it died of when its
    log ended. (A rank that printed a stack and went quiet while the others went on is not judged so, nor
    frames under a warning's header that prints a stack, read in ``recent``: Inductor's skipped CUDA graphs.)"""
    for key, tail in tails.items():
        frame = in_traceback([line.text for line in tail])
        kept = recent.lines.get(key) if recent is not None else None
        if frame is not None and kept and round38d_warning_stack([line.text for line in kept]):
            continue
        if frame is not None:
            line = next(ln for ln in tail if ln.text == frame)
            if latest_progress is not None and latest_progress > line.mono:
                continue
            return Verdict(
                Label.OTHER_CRASH, Action.RESTART, ranks=(key,), culprit=key,
                evidence=(Evidence(key, frame, TRACEBACK_SIGNATURE, line.source, line.lineno, line.mono),),
                reason=f"the input ends inside a Python traceback, before its exception line: the process was "
                       f"printing the error it died of ({frame.strip()[:160]})",
                advice="The log was cut inside the traceback: read the rank's full log for the exception line "
                       "under these frames; restart from the last complete checkpoint if the cause is transient.",
                culprit_source="failure")
    return None


#: causes one process's failure states that its peers' failures do not echo: a connection that broke is
#: what every other process sees when one dies (a consequence, often printed first), so it is left out
_STATED_CAUSES = frozenset({Label.CONFIG_ERROR, Label.OOM, Label.HARDWARE_ERROR, Label.COMPILE_ERROR})


def cause_stated_before(verdict: Verdict) -> Verdict | None:
    """The cause another process stated first, when ``verdict`` is a crash whose own line states none.

    A wrapper reports a worker's failure in words of its own ("Runner Thread raised error.", "Engine core
    initialization failed. See root cause above."), while the process that failed printed the cause in its
    own lines before it: Ray's trial runner under ``(pid=1521965)`` after the trainer under ``(pid=1521999)``
    printed Lightning's "But your machine only has: [0]". Each process is judged as a stream of its own
    (logtext.split_process), and the verdict rests on the last to fail. Among the verdict's other evidence
    the earliest line, not later than the verdict's own, whose form states a cause (errorclass.read_error)
    of configuration, memory, hardware or a compiler decides; None when the verdict's line states a cause,
    or no earlier line does."""
    if verdict.label is not Label.OTHER_CRASH or not verdict.evidence:
        return None
    own = verdict.evidence[0]
    if read_error(own.text) is not None:
        return None
    stated = [(ev.mono, i, ev, reading) for i, ev in enumerate(verdict.evidence[1:], 1)
              if ev.mono <= own.mono and (reading := read_error(ev.text)) is not None
              and reading.label in _STATED_CAUSES]
    if not stated:
        return None
    _, i, ev, reading = min(stated, key=lambda found: (found[0], found[1]))
    rest = tuple(e for j, e in enumerate(verdict.evidence) if j != i)
    return dataclasses.replace(
        verdict, label=reading.label, action=reading.action, culprit=ev.key, evidence=(ev, *rest),
        advice=reading.advice, culprit_source="failure",
        reason=f"{own.text.strip()[:100]} states no cause; before it, {ev.key} stated one ({reading.form}): "
               f"{reading.label.value} ({ev.text.strip()[:160]})")


#: a launcher's report of a child process that failed, which names no cause of its own: torchrun's elastic
#: agent ("failed (exitcode: 1) local_rank: 0 (pid: 1527604) of binary: /usr/bin/python3", the rule
#: torch.elastic.child_failed), printed after the child's own exception
LAUNCHER_REPORTS = frozenset({"torch.elastic.child_failed"})
#: lines read back from a launcher's report for the child's exception
CHILD_LINES = 40


class LinesBeforeLike(Protocol):
    """Who keeps a file's lines before an evidence line: :class:`RecentLines` offline, the run a node sent
    around the failure live (crashreading.LinesBefore)."""

    def before(self, ev: Evidence, count: int) -> list[LogLine]: ...


def child_exception_before(verdict: Verdict, progressed: bool, recent: LinesBeforeLike) -> Verdict | None:
    """Configuration, when ``verdict`` is a crash before any progress that rests on a launcher's report of a
    failed child (:data:`LAUNCHER_REPORTS`), and the child's last exception above it in the same file (at most
    :data:`CHILD_LINES` lines up, under whatever rank tag) is a program mistake or states the set-up it refuses
    (firstfailure.mistake_before_progress, its message read over the lines it goes on to). None otherwise."""
    if verdict.label is not Label.OTHER_CRASH or progressed or verdict.step is not None or not verdict.evidence:
        return None
    report = verdict.evidence[0]
    if report.signature not in LAUNCHER_REPORTS:
        return None
    lines = recent.before(report, CHILD_LINES)
    texts = [line.text for line in lines]
    for i in range(len(texts) - 1, -1, -1):
        if exception_class(texts[i]) is None:
            continue
        line = lines[i]
        # (no signature: the line is read by its form, not by a rule of the table)
        child = Evidence(line.key, line.text, "", line.source, line.lineno, line.mono)
        found = mistake_before_progress(dataclasses.replace(verdict, evidence=(child, *verdict.evidence)), False,
                                        None, exception_message(texts, i))
        if found is None:
            return None
        return dataclasses.replace(found, culprit=verdict.culprit, ranks=verdict.ranks,
                                   reason=f"{found.reason}; the launcher reported the child's exit after it "
                                          f"({report.text.strip()[:100]})")
    return None
