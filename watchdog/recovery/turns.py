"""When a loop next needs a turn: the earliest time any of its parts is due, within bounds.

The node's loop (and a coordinator's) once turned every 20 ms whatever happened: an idle wrapper of
a one-rank job spent ~0.05 CPU-s a second on turns that found nothing. Now it waits
on what can happen (its sockets, the launcher's pipe, the signals it latches, SIGCHLD) with a
timeout up to the next thing that is due by time: each part says when it next needs a turn
(``next_due(now)``: a monotonic time, or None when nothing of it is due by time), and
:func:`wait_for` turns the earliest into the loop's timeout.

Pure: the loop hands in ``now`` and the parts' due times; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The longest a loop waits with nothing due: the safety net for a part whose time-driven work does
#: not say when it is due (a coordinator-loss warning, an envelope's held lines). Half a second is
#: below every timer the judge and the recovery keep (seconds), and 25 times fewer turns than 20 ms.
MAX_WAIT = 0.5

#: While work runs on another thread (a stop, an evidence capture) that the loop must notice when
#: it ends, with no file descriptor to say so: the loop turns at the pace it always did.
BUSY_WAIT = 0.02

#: Orphans re-parented to the node (a subreaper) are reaped when SIGCHLD says one exited, and on a
#: sweep this often in case a SIGCHLD was coalesced with another or came while the handler was not
#: installed (the kernel keeps one pending SIGCHLD, not one per child).
REAP_SWEEP_EVERY = 2.0


#: Parts due within this many seconds of each other are served by one turn, at the later time: a
#: verdict due a few milliseconds after a read of the rank files once cost a turn of its own. The
#: loop once slept 20 ms between turns: nothing is served later than it was.
JOIN = 0.02

#: A periodic chore (reading the rank files) is done at any turn that comes at least this share of
#: its interval after the last time, and wakes the loop itself only at its full interval: chores
#: of different paces share turns instead of each waking the loop (the rank files at the batch age
#: and the verdicts at their interval, out of phase, once made 30 turns a second out of 20). With
#: :data:`JOIN` it covers every phase: a verdict due up to 20 ms after a read joins the read's turn,
#: one due later finds the next read eligible (20 ms is 0.4 of the 50 ms batch age).
EARLY_SHARE = 0.4


def chore_due(now: float, last: float, every: float) -> bool:
    """Whether a chore done every ``every`` seconds, last at ``last``, is done at a turn at ``now``."""
    return now - last >= every * EARLY_SHARE


def earliest(dues: Iterable[float | None]) -> float | None:
    """The earliest of ``dues`` (None: none is due by time)."""
    times = [d for d in dues if d is not None]
    return min(times) if times else None


def wait_for(now: float, dues: Iterable[float | None], ceiling: float = MAX_WAIT, join: float = JOIN) -> float:
    """Seconds to wait at ``now`` for the earliest of ``dues`` and whatever else is due within
    ``join`` seconds of it (one turn serves them all): never negative (a part already due is served
    at once), never more than ``ceiling``."""
    times = sorted(d for d in dues if d is not None)
    if not times:
        return ceiling
    first = max(times[0], now)
    due = max(d for d in times if d <= first + join)
    return min(ceiling, max(0.0, due - now))


@dataclass
class Every:
    """Something done every ``every`` seconds, or sooner when asked (:meth:`due` with ``asked``)."""

    every: float
    last: float = -1e18

    def due(self, now: float, asked: bool = False) -> bool:
        return asked or now - self.last >= self.every

    def done(self, now: float) -> None:
        self.last = now

    def next_due(self) -> float:
        return self.last + self.every
