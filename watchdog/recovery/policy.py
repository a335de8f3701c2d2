"""The restart policy: an explicit state machine and a pure decision. No I/O, ``now`` passed in.

States of a watched job::

    STARTING -> RUNNING -> CAPTURING -> STOPPING -> RESTARTING -> STARTING ...
                   |           |           |
                   +-> FINISHED (exit 0)   +-> FAILED (not restartable, budget used up, crash loop)
    any live state -> INTERRUPTED (SIGINT/SIGTERM to the wrapper), FAILED (the launcher gone)

The moves are made by :class:`neuron_watch.recovery.machine.Recovery`; this module holds the table and the
decision after a failed generation.

The budget counts *consecutive* failed generations and is reset by a generation that made progress
for ``stable_seconds`` (a long healthy run should not be one crash away from giving up).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from neuron_watch.errors import ExitCode
from neuron_watch.events import Action, JobState, Label, Verdict

_LIVE = (JobState.STARTING, JobState.RUNNING, JobState.CAPTURING, JobState.STOPPING, JobState.RESTARTING)

#: FAILED from every live state: the launcher gone (the srun step ended by itself) ends the job
#: wherever recovery was.
ALLOWED: dict[JobState, frozenset[JobState]] = {
    JobState.STARTING: frozenset({JobState.RUNNING, JobState.CAPTURING, JobState.FINISHED, JobState.FAILED,
                                  JobState.INTERRUPTED}),
    JobState.RUNNING: frozenset({JobState.CAPTURING, JobState.FINISHED, JobState.FAILED, JobState.INTERRUPTED}),
    JobState.CAPTURING: frozenset({JobState.STOPPING, JobState.FAILED, JobState.INTERRUPTED}),
    JobState.STOPPING: frozenset({JobState.RESTARTING, JobState.FAILED, JobState.INTERRUPTED}),
    JobState.RESTARTING: frozenset({JobState.STARTING, JobState.FAILED, JobState.INTERRUPTED}),
    JobState.FINISHED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.INTERRUPTED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A bug: the supervisor tried a move the state machine does not allow."""

    def __init__(self, src: JobState, dst: JobState) -> None:
        super().__init__(f"illegal job state transition {src.value} -> {dst.value}")


@dataclass
class JobStateMachine:
    state: JobState = JobState.STARTING
    history: list[tuple[float, JobState]] = field(default_factory=list)

    def move(self, dst: JobState, now: float) -> None:
        if dst not in ALLOWED[self.state]:
            raise IllegalTransition(self.state, dst)
        self.state = dst
        self.history.append((now, dst))

    @property
    def live(self) -> bool:
        return self.state in _LIVE


class Decision(str, enum.Enum):
    RESTART = "restart"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    reason: str
    exit_code: int = 0


#: Failures that a restart from the same checkpoint cannot fix.
NEVER_RESTART = frozenset({Label.CONFIG_ERROR, Label.NUMERICAL_ERROR, Label.COMPILE_ERROR})


def _read_from_an_exception(verdict: Verdict) -> bool:
    """A set-up failure before the first step that only an exception's form says is one (the general
    advice of errorclass: no rule names its cause), as firstfailure reads a ``KeyError`` or a refused value
    raised while the program set itself up. Loading a torn checkpoint raises the same: in a generation that
    started from a checkpoint, the fallback to the previous complete one is tried once before it stops."""
    return verdict.label is Label.CONFIG_ERROR and verdict.step is None and verdict.advice == CONFIG_ADVICE


@dataclass
class RestartPolicy:
    """Decides restart or give up after each failed generation."""

    max_restarts: int
    stable_seconds: float = 3600.0
    can_exclude_nodes: bool = False
    consecutive_failures: int = 0
    restarts: int = 0
    failures: list[tuple[str, int | None]] = field(default_factory=list)  # (label, step) per failure
    #: the last failure when it came before the generation's first step: (label, first signature)
    last_before_progress: tuple[str, str] | None = None

    def on_failure(self, verdict: Verdict, progressed_for: float, job_exit_code: int | None,
                   fallback: bool = False) -> Outcome:
        """Record a failed generation and decide what to do.

        Args:
            verdict: why the generation failed; ``verdict.step`` None means it failed before its
                first step (no progress in this generation).
            progressed_for: seconds this generation spent making progress (resets the budget when long).
            job_exit_code: the launcher's own exit code if it exited by itself, else None (we stopped it).
            fallback: the next generation starts from another (older) checkpoint than this one did,
                so a repeat of the same early failure is not yet a loop: the checkpoint may be why.
        """
        if progressed_for >= self.stable_seconds:
            self.consecutive_failures = 0
        self.consecutive_failures += 1
        key = (verdict.label.value, verdict.step)
        same_as_last = bool(self.failures) and self.failures[-1] == key and verdict.step is not None
        self.failures.append(key)
        # Before the first step a failure has no step to compare (a missing script, an unloadable
        # checkpoint: every generation dies in seconds and would spend the budget in a minute). The
        # same label and root-cause signature, again before any progress, in consecutive
        # generations, is the loop.
        early = (verdict.label.value, next((e.signature for e in verdict.evidence if e.signature), ""))
        early_again = verdict.step is None and self.last_before_progress == early and not fallback
        self.last_before_progress = early if verdict.step is None else None
        fail_code = job_exit_code if job_exit_code not in (None, 0) else int(ExitCode.JOB_FAILED)
        if verdict.after_training:
            # The job's own failure code when it exited by itself (something did fail, and a
            # scheduler should see it); 4 when we had to stop a shutdown that hung.
            return Outcome(
                Decision.GIVE_UP,
                f"training had finished; {verdict.label.value} while shutting down is not restarted",
                int(ExitCode.NOT_RESTARTABLE) if job_exit_code is None else fail_code,
            )
        if (verdict.label in NEVER_RESTART or verdict.action is Action.STOP) and not (
                fallback and _read_from_an_exception(verdict)):
            # 4 (README): "not fixed by a restart", whoever ended the generation first (the
            # watchdog's verdict or the launcher's own exit): the operator's script can rely on it.
            return Outcome(
                Decision.GIVE_UP,
                f"{verdict.label.value} is not fixed by a restart",
                int(ExitCode.NOT_RESTARTABLE),
            )
        if verdict.action is Action.DRAIN_AND_RESTART and not self.can_exclude_nodes:
            node = verdict.culprit.node if verdict.culprit else "unknown"
            return Outcome(
                Decision.GIVE_UP,
                f"node {node} looks faulty ({verdict.label.value}) and this launcher cannot exclude it: "
                "replace or drain the node, then resubmit",
                int(ExitCode.NOT_RESTARTABLE),
            )
        if same_as_last:
            return Outcome(
                Decision.GIVE_UP,
                f"crash loop: {verdict.label.value} at step {verdict.step} twice in a row",
                int(ExitCode.NOT_RESTARTABLE),  # README: a crash loop is not fixed by a restart
            )
        if early_again:
            return Outcome(
                Decision.GIVE_UP,
                f"crash loop: {verdict.label.value} before the first step, twice in a row "
                "(nothing a restart changes: check the command, its files and the checkpoint it loads)",
                int(ExitCode.NOT_RESTARTABLE),
            )
        if self.consecutive_failures > self.max_restarts:
            return Outcome(
                Decision.GIVE_UP,
                f"--max-restarts {self.max_restarts} used up",
                fail_code if job_exit_code is not None else int(ExitCode.RESTARTS_EXHAUSTED),
            )
        self.restarts += 1
        return Outcome(Decision.RESTART, f"restart {self.restarts} of at most {self.max_restarts} in a row")
