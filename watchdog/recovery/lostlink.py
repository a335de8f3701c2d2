"""What a node's agent does when its coordinator goes quiet: the lost-coordinator policy (pure).

A coordinator that stops answering (node 0's wrapper paused or killed, a stalled console pipe on
node 0, a network partition) is not evidence that the job is in trouble: the ranks of this node may
be training perfectly well. So the agent never stops its ranks because the coordinator is quiet.
It acts on its own only on local evidence, and only after a long bound:

* quiet for ``silence`` seconds (``--coordinator-silence``, 30 s): the coordinator is *lost*. The
  agent says so, keeps the ranks running and keeps buffering what it would send (bounded and
  counted by the link's outbox), and says again every ``say_every`` seconds how long it has been
  and whether the ranks still progress;
* ranks still progressing (a progress line, any output before the generation's first progress
  line, or a live compiler within ``hang_window``): kept, however long the coordinator is away;
* quiet for ``loss_timeout`` (``--coordinator-loss-timeout``, 10 min) *and* this node's ranks
  silent for longer than ``hang_window`` (``--hang-timeout``, else the judge's default grace), or
  already ended: the agent stops what is left and exits with code 3 (nobody would restart them);
* the coordinator answers again: the agent says so and goes on as before (the outbox is resent).

:class:`CoordinatorLoss` is the state machine; the I/O shell feeds it ``now`` and the facts and
prints what it returns. Time is an argument; nothing here reads a clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class LossAction(enum.Enum):
    KEEP = "keep"  # nothing to do
    SAY = "say"  # print the message; keep the ranks
    GIVE_UP = "give_up"  # stop what is left of this node's job and exit (code 3)


@dataclass(frozen=True)
class LossSettings:
    """Bounds of the policy, in seconds (see the module doc)."""

    silence: float = 30.0
    loss_timeout: float = 600.0
    hang_window: float = 900.0
    say_every: float = 60.0


@dataclass(frozen=True)
class LocalFacts:
    """What the agent sees of its own ranks at ``now``."""

    #: seconds since this node's ranks last showed work (None: no generation running here)
    active_ago: float | None
    ended: bool  # this node's launcher has exited (its ranks are gone)
    buffered_lines: int = 0  # lines held for the coordinator
    dropped_lines: int = 0  # lines the bounded buffer had to drop (counted, reported when it is back)


class CoordinatorLoss:
    """The lost-coordinator state machine of one agent. :meth:`step` once per loop turn."""

    def __init__(self, settings: LossSettings, address: str) -> None:
        self.settings = settings
        self.address = address
        self.lost_since: float | None = None  # when the coordinator was last heard, once it is lost
        self._said: float = 0.0

    @property
    def lost(self) -> bool:
        return self.lost_since is not None

    def step(self, now: float, quiet_for: float, facts: LocalFacts) -> tuple[LossAction, str]:
        """``quiet_for``: seconds since the coordinator was last heard (or since start, never heard)."""
        s = self.settings
        if quiet_for <= s.silence:
            if self.lost_since is None:
                return LossAction.KEEP, ""
            away = now - self.lost_since
            self.lost_since = None
            return LossAction.SAY, (f"the coordinator at {self.address} answers again after {away:.0f}s "
                                    "of silence; what was buffered is being resent")
        if self.lost_since is None:
            self.lost_since = now - quiet_for
            self._said = now
            return LossAction.SAY, (
                f"lost the coordinator at {self.address}: nothing heard for {quiet_for:.0f}s; "
                f"{self._ranks(facts)}. This node keeps its ranks while they progress and buffers for the "
                f"coordinator; it gives up only after {s.loss_timeout:.0f}s of silence with its own ranks "
                f"silent for {s.hang_window:.0f}s or ended")
        silent_ranks = facts.ended or facts.active_ago is None or facts.active_ago > s.hang_window
        if quiet_for > s.loss_timeout and silent_ranks:
            return LossAction.GIVE_UP, (
                f"lost the coordinator at {self.address}: nothing heard for {quiet_for:.0f}s "
                f"(> --coordinator-loss-timeout {s.loss_timeout:.0f}s) and {self._ranks(facts)}")
        if now - self._said >= s.say_every:
            self._said = now
            return LossAction.SAY, (f"coordinator at {self.address} silent for {quiet_for:.0f}s; "
                                    f"{self._ranks(facts)}; {facts.buffered_lines} line(s) buffered, "
                                    f"{facts.dropped_lines} dropped so far")
        return LossAction.KEEP, ""

    def _ranks(self, facts: LocalFacts) -> str:
        if facts.ended:
            return "this node's ranks have ended"
        if facts.active_ago is None:
            return "no ranks run on this node"
        if facts.active_ago > self.settings.hang_window:
            return f"this node's ranks have shown no work for {facts.active_ago:.0f}s"
        return f"this node's ranks still work (last sign {facts.active_ago:.0f}s ago): kept running"


def loop_jump(previous: float | None, now: float, limit: float) -> float:
    """How long the caller's own loop was away between two turns, when longer than ``limit`` (else 0).

    A watchdog that was paused (SIGSTOP, a suspended VM, a swap storm) must not take the time it
    did not run for silence of the job or of its peers: the caller shifts its clocks by the gap.
    """
    if previous is None:
        return 0.0
    gap = now - previous
    return gap if gap > limit else 0.0
