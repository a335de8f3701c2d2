"""What the judge found that the operator must hear while the job runs: the job's ``progress``
events, and warnings that act on nothing (an error line no signature explains, no progress line
recognised, a recompile storm), each recompile, each compiler's own account of its compile time.

The coordinator asks for them after each verdict (:meth:`JobReport.after_verdict`); a report holds
what it already said this generation, and a new generation gets a new report. Recovery decides
nothing from here: these events are for people, MQTT and goodput.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from neuron_watch.events import EventKind, RankKey, iso_utc
from neuron_watch.outputs.eventlog import EventLog

if TYPE_CHECKING:
    from neuron_watch.job.judgelike import JudgeLike

log = logging.getLogger("neuron_watch")

PROGRESS_EVENT_EVERY = 30.0  # seconds between `progress` events (the first of a generation at once)
#: How long a recompile's console line waits for the failed guard that follows its announcement.
RECOMPILE_REASON_WAIT = 2.0
_RECOMPILED_FUNCTION = re.compile(r"Recompiling function (\S+) in (\S+)")


def progressed_for(judge: JudgeLike | None) -> float:
    """Seconds between the generation's first and newest step (the policy resets its budget on it)."""
    times = judge.step_times if judge is not None else []
    return times[-1] - times[0] if len(times) > 1 else 0.0


class JobReport:
    """One generation's reporting of the judge's findings, each said once."""

    def __init__(self, events: EventLog, clock: Callable[[], float], wall: Callable[[], float]) -> None:
        self.events, self.clock, self.wall = events, clock, wall
        self._progress_step: int | None = None
        self._progress_at: float | None = None
        self._progress_line_wall: float | None = None
        self._blind_said = False  # the "no progress recognised" warning of this generation was given
        self._storms_said: set[RankKey] = set()  # ranks whose recompile storm was reported
        self._unexplained_said = 0  # the judge's unexplained error lines warned about
        self._recompiles_said = 0  # the judge's recompile notes said on the console
        self._compile_reports_said = 0  # the judge's compile-time reports sent as events

    def after_verdict(self, judge: JudgeLike, generation: int, running: bool, now: float) -> None:
        """Everything due after a verdict at ``now`` (``running``: the job is in its RUNNING phase)."""
        if running:
            self._progress_event(judge, generation, now)
            self._blind_check(judge, generation, now)
        self._storm_check(judge, generation)
        self._recompile_check(judge, generation, now)
        self._compile_report_check(judge, generation)
        self._unexplained_check(judge, generation)

    def progress_fields(self, judge: JudgeLike | None) -> dict[str, Any]:
        """``last_progress`` (ISO time of the line that showed the newest progress) and ``last_step``."""
        at = _progress_wall(judge)
        if at is None:  # a judge that does not keep line times: convert its monotonic time
            times = judge.step_times if judge is not None else []
            at = self.wall() - (self.clock() - times[-1]) if times else None
        return {"last_progress": None if at is None else iso_utc(at),
                "last_step": None if judge is None else judge.max_step}

    def _progress_event(self, judge: JudgeLike, generation: int, now: float) -> None:
        """A ``progress`` event for a new step (or, for progress lines without a step such as the
        HF Trainer's ``{'loss': ...}``, for newer progress), dated by the line that showed it:
        the event may be sent up to PROGRESS_EVENT_EVERY later, and a batch may arrive late."""
        step = judge.max_step
        at = _progress_wall(judge)
        if step is None and at is None:
            return
        if step is not None and step == self._progress_step:
            return
        if step is None and at == self._progress_line_wall:
            return
        if self._progress_at is not None and now - self._progress_at < PROGRESS_EVENT_EVERY:
            return
        self._progress_step, self._progress_at, self._progress_line_wall = step, now, at
        self.events.emit(EventKind.PROGRESS, generation, at=at, step=step)

    def _unexplained_check(self, judge: JudgeLike, generation: int) -> None:
        """A ``warning`` event for each error line no signature explains (the judge keeps the first
        few of a generation): while the ranks go on it is not a failure, but the operator should know."""
        seen = judge.unexplained
        for ev in seen[self._unexplained_said:]:
            message = (f"{ev.key}: an error line no signature recognises (not acted on while the job goes on): "
                       f"{ev.text[:300]}")
            self.events.emit(EventKind.WARNING, generation, kind="unrecognised_error", message=message,
                             node=ev.key.node, rank=ev.key.rank, line=ev.text[:300], file=ev.source, lineno=ev.lineno)
            log.warning("%s", message)
        self._unexplained_said = len(seen)

    def _blind_check(self, judge: JudgeLike, generation: int, now: float) -> None:
        """Say once per generation when no progress line was recognised (the judge decides)."""
        if self._blind_said:
            return
        warning = judge.blind(now)
        if warning is None:
            return
        self._blind_said = True
        message = warning.message()
        self.events.emit(EventKind.WARNING, generation, kind="no_progress_recognised", message=message,
                         seconds=warning.seconds, lines=list(warning.lines), ranks=warning.ranks)
        # The console sink for events (eventlog) will print this; until it lands, log it here.
        log.warning("%s", message)

    def _storm_check(self, judge: JudgeLike, generation: int) -> None:
        """Report once per rank and generation a rank that recompiles again and again (the judge
        decides): slow, not hung, and not to be left unsaid."""
        for key, count, line in judge.recompile_storms():
            if key in self._storms_said:
                continue
            self._storms_said.add(key)
            by = "torch.compile" if line.signature.startswith("torch.") else "a graph compiler, after the first step"
            message = (f"{key} recompiled its graph {count} time(s) this generation ({by}): each new "
                       f"input shape or code path pays a compile while the other ranks wait. Last: "
                       f"{line.text.strip()[:200]}")
            self.events.emit(EventKind.WARNING, generation, kind="recompile_storm", message=message,
                             node=key.node, rank=key.rank, recompiles=count, line=line.text.strip()[:500])
            log.warning("%s", message)

    def _recompile_check(self, judge: JudgeLike, generation: int, now: float) -> None:
        """A ``recompile`` event (a console line) for each recompile a rank announced, with the guard
        that failed. The reason comes on the lines after the announcement: a note still without one
        waits a moment (the rest of dynamo's message is on its way), then goes out without it."""
        for note in judge.recompile_notes[self._recompiles_said:]:
            if note.reason is None and now - note.announced.mono < RECOMPILE_REASON_WAIT:
                break
            ev = note.announced
            found = _RECOMPILED_FUNCTION.search(ev.text)
            self.events.emit(EventKind.RECOMPILE, generation, node=ev.key.node, rank=ev.key.rank,
                             function=found.group(1) if found else "", where=found.group(2) if found else "",
                             reason=note.reason or "", line=ev.text.strip()[:500])
            self._recompiles_said += 1

    def _compile_report_check(self, judge: JudgeLike, generation: int) -> None:
        """A ``compile_report`` event for each compile-time figure a rank printed by the compiler's
        own account (torch-xla's metrics report): goodput takes the newest of each generation."""
        reports = judge.compile_reports
        for key, compiles, seconds in reports[self._compile_reports_said:]:
            self.events.emit(EventKind.COMPILE_REPORT, generation, node=key.node, rank=key.rank, compiles=compiles,
                             seconds=round(seconds, 3), source="torch_xla metrics")
        self._compile_reports_said = len(reports)


def _progress_wall(judge: JudgeLike | None) -> float | None:
    """Wall time of the line that first showed the newest step (any progress line without steps)."""
    if judge is None:
        return None
    return judge.max_step_wall if judge.max_step is not None else judge.last_progress_wall
