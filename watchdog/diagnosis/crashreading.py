"""What both judges read beside the verdict when it is a crash of unknown cause: the one reading, wired by
each entry point to the lines it keeps. Pure: no I/O.

A verdict of ``other_crash`` is restarted. Before it is, the lines around its evidence may say that a restart
meets the same failure again, or that another process stated the cause first (offline.py's readers): a
program-mistake exception raised setting the program up, or before any progress
(firstfailure.mistake_before_progress), a launcher's report after its child's exception, a cause stated by
another process. Offline ``diagnose`` has the whole log; the live coordinator has the runs of lines the
nodes sent around each failure (diagnosis/blockcontext.py, bounded per rank and per job). Both give
:class:`CrashReader` how to find the lines around an evidence line, and the judge calls it when its
verdict is a crash (``Judge.crash_reader``): the reading runs only then, never per line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from neuron_watch.diagnosis.exctaxonomy import exception_message
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.diagnosis.interrupted import interrupted_while_waiting
from neuron_watch.diagnosis.offline import (
    LinesBeforeLike,
    Tracebacks,
    cause_stated_before,
    child_exception_before,
)
from neuron_watch.diagnosis.startup import RaisedAt, stopped_at_startup
from neuron_watch.events import Evidence, Label, LogLine, Verdict

#: the lines of an evidence line's stream around it and its index among them (None: not kept)
Around = Callable[[Evidence], "tuple[Sequence[LogLine], int] | None"]


class LinesBefore:
    """The kept lines of an evidence line's stream printed before it (offline.RecentLines.before's
    question), answered from the run of lines around it: what a live node sent with the failure."""

    def __init__(self, around: Around) -> None:
        self.around = around

    def before(self, ev: Evidence, count: int) -> list[LogLine]:
        found = self.around(ev)
        if found is None:
            return []
        lines, at = found
        return [line for line in lines[max(0, at - count):at] if line.source == ev.source]


class CrashReader:
    """Reads a crash verdict's lines for a cause a restart does not fix (see the module docstring).

    ``around``: the lines kept around an evidence line. ``tracebacks``: each rank's tracebacks read from
    every line (offline: the whole log); without it, the traceback the evidence ends is read from the lines
    around it. ``before``: the lines of a file before a launcher's report, whatever their rank (offline:
    :class:`~neuron_watch.diagnosis.offline.RecentLines`); without it, the lines around the report.
    """

    def __init__(self, around: Around, tracebacks: Tracebacks | None = None,
                 before: LinesBeforeLike | None = None) -> None:
        self.around = around
        self.tracebacks = tracebacks
        self.lines_before: LinesBeforeLike = before or LinesBefore(around)

    def read(self, verdict: Verdict, progressed: bool) -> Verdict:
        """``verdict`` as the lines around it state it; itself when it is no crash or they add nothing.
        ``progressed``: some rank made progress in this generation."""
        if verdict.label is not Label.OTHER_CRASH or not verdict.evidence:
            return verdict
        found = self.around(verdict.evidence[0])
        lines, at = found if found is not None else ((), -1)
        message = exception_message([line.text for line in lines], at) if found is not None else None
        tracebacks = self.tracebacks
        if tracebacks is None:
            # the traceback the evidence ends, read from its run as offline reads every line
            tracebacks = Tracebacks()
            for line in lines[:at + 1]:
                if line.text.strip():
                    tracebacks.observe(line)
        last = self.last_tracebacks(verdict, tracebacks)
        return (tracebacks.mistake_in_setup(verdict)
                or mistake_before_progress(verdict, progressed, tracebacks.mistakes, message)
                or child_exception_before(verdict, progressed, self.lines_before)
                or cause_stated_before(verdict)
                or interrupted_while_waiting(verdict, [*last, *self.interrupted(verdict, tracebacks)],
                                             [line.text for line in lines[at + 1:]])
                or stopped_at_startup(verdict, progressed, last) or verdict)

    def last_tracebacks(self, verdict: Verdict, tracebacks: Tracebacks) -> list[tuple[RaisedAt, Evidence | None]]:
        """The last traceback of each process the verdict's evidence names (startup.stopped_at_startup), newest
        first: one still open (cut before its exception line) is newer than the last that ended. Only a traceback
        printed near the verdict's evidence (:data:`NEAR` lines of its file): one printed long before is another
        matter the process went on from (a warning with its traceback)."""
        found: list[tuple[float, RaisedAt, Evidence | None]] = []
        for key in dict.fromkeys(ev.key for ev in verdict.evidence):
            frames = tracebacks.frames.get(key)
            last_frame = tracebacks.open.get(key)
            if frames and last_frame is not None:
                if _near(verdict, last_frame):
                    found.append((float("inf"), RaisedAt(tuple(frames)), None))
                continue
            ended = tracebacks.ended.get(key)
            if ended is None or not _near(verdict, ended[1]):
                continue
            found.append((ended[1].mono, *self._ended(ended)))
        found.sort(key=lambda item: -item[0])
        return [(raised, ev) for _, raised, ev in found]

    def interrupted(self, verdict: Verdict, tracebacks: Tracebacks) -> list[tuple[RaisedAt, Evidence | None]]:
        """The last traceback its user's interrupt ended of each process the verdict's evidence names, near it: read
        after :meth:`last_tracebacks`, whose newest may be a launcher's traceback printed over it as it went down
        (ultralytics#1662: torch elastic's agent under the rank's KeyboardInterrupt)."""
        found: list[tuple[RaisedAt, Evidence | None]] = []
        for key in dict.fromkeys(ev.key for ev in verdict.evidence):
            interrupted = tracebacks.interrupted.get(key)
            if interrupted is not None and _near(verdict, interrupted[1]):
                found.append(self._ended(interrupted))
        return found

    def _ended(self, ended: tuple[list[tuple[str, str]], LogLine]) -> tuple[RaisedAt, Evidence]:
        """An ended traceback's frames and exception line as :class:`RaisedAt`, with the line as evidence."""
        frames, line = ended
        # (no signature: the line is read by its form, not by a rule of the table)
        ev = Evidence(line.key, line.text, "", line.source, line.lineno, line.mono)
        around = self.around(ev)
        message = exception_message([ln.text for ln in around[0]], around[1]) if around is not None else line.text
        return RaisedAt(tuple(frames), line.text, message), ev


#: how far (in lines of one file) a traceback may be from the verdict's evidence to be the failure it reports
#: (offline.CHILD_LINES: a launcher's report under its child's traceback)
NEAR = 40


def _near(verdict: Verdict, line: LogLine) -> bool:
    """Whether ``line`` is within :data:`NEAR` lines of one of the verdict's evidence lines of its file; line
    numbers unknown (0, a live run's lines) count as near, since only the lines around the failure were kept."""
    return any(not ev.lineno or not line.lineno or (ev.source == line.source and abs(ev.lineno - line.lineno) <= NEAR)
               for ev in verdict.evidence)
