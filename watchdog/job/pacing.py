"""When the coordinator judges: at its interval, less often when a verdict is costly, and not while
the nodes' news from a pause of our own is still arriving.

Pure: the coordinator hands in ``now`` and what a verdict cost; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The share of the loop's time a verdict may take at most: it waits this many times its own last
#: cost (a verdict over tens of thousands of compiling ranks costs a large part of a second:
#: tests/benchmarks/bench_scale.py prints it); small jobs keep the fixed interval.
VERDICT_SHARE = 0.25


@dataclass
class VerdictPacing:
    """The verdict's timing across loop turns.

    ``interval``: seconds between verdicts at least; ``pause_jump``: a turn this much later than the
    one before is a pause of this process (None: never); ``pause_grace``: after a pause, seconds
    without a verdict while what the nodes buffered meanwhile arrives (a verdict on stale clocks
    would call a healthy job hung).
    """

    interval: float
    pause_jump: float | None
    pause_grace: float
    #: our own pauses seen (seconds), for the summary
    pauses: list[float] = field(default_factory=list)
    last_tick: float | None = None
    last_verdict_at: float = -1e18
    hold_until: float = -1e18
    every: float = field(init=False)

    def __post_init__(self) -> None:
        self.every = self.interval

    def turn(self, now: float) -> float | None:
        """A loop turn at ``now``: the gap since the turn before when it is a pause of our own (then
        verdicts wait ``pause_grace``), else None."""
        gap = None
        if self.pause_jump is not None and self.last_tick is not None and now - self.last_tick > self.pause_jump:
            gap = now - self.last_tick
            self.pauses.append(round(gap, 3))
            self.hold_until = now + self.pause_grace
            self.last_verdict_at = now
        self.last_tick = now
        return gap

    def due(self, now: float) -> bool:
        """Whether a verdict is due at ``now``: often enough for sub-second latency, not on every turn."""
        return now >= self.hold_until and now - self.last_verdict_at >= self.every

    def next_due(self) -> float:
        """When :meth:`due` next turns true."""
        return max(self.hold_until, self.last_verdict_at + self.every)

    def judged(self, now: float, cost: float) -> None:
        """A verdict was given at ``now`` and took ``cost`` seconds: the next waits at least the
        interval, and long enough that verdicts take at most :data:`VERDICT_SHARE` of the loop."""
        self.last_verdict_at = now
        self.every = max(self.interval, cost / VERDICT_SHARE)
