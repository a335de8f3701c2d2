"""The wrapper's signals: a handler that only records (the loop acts), and a second signal that cuts the
stop of the job short (a second Ctrl-C: SIGKILL now, every process still reaped)."""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.outputs.console import say


def stop_bound(cfg: WatchConfig) -> str:
    """What the console says after a signal's first line: how long the stop may take, and the way out."""
    return f" (up to {cfg.stop_timeout:g}s, --stop-timeout; Ctrl-C again to kill them at once)"


def say_hurried(signals: SignalLatch) -> None:
    """Once, on the console: a second signal cuts the stop short (SignalLatch.repeated)."""
    if signals.again is not None and not signals.again_said:
        signals.again_said = True
        say(f"received {signal.Signals(signals.again).name} again: killing the job's processes now (SIGKILL, "
            "not waiting for --stop-timeout), then reaping them")


class SignalLatch:
    """Signal handlers only record; the loop acts."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.at: float | None = None  # time.monotonic() of the first signal
        #: a signal after the first (a second Ctrl-C): the stop under way ends at once (repeated)
        self.again: int | None = None
        self.again_said = False  # the loop said so on the console

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            self.at = time.monotonic()
        else:
            self.again = signum

    def repeated(self) -> bool:
        """A second signal came: what a launcher's stop asks (``Launcher.hurry``) to cut its deadline.
        torchrun, and most tools, stop at once at a second Ctrl-C; every process is still reaped."""
        return self.again is not None

    def install(self) -> dict[int, Any]:
        """Catch SIGTERM, SIGINT and SIGHUP; returns the previous handlers (to restore at the end).

        A SIGHUP or SIGINT that was *ignored* when we started stays ignored: ``nohup neuron-watch``
        and a shell's background ``&`` (no job control) ask for exactly that, and a handler of ours
        would let the hang-up stop the job.
        """
        old: dict[int, Any] = {}
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if s != signal.SIGTERM and signal.getsignal(s) is signal.SIG_IGN:
                continue
            old[s] = signal.signal(s, self)
        return old
