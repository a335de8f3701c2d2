"""A node's process readings on their way to the coordinator, at the pace of the job's size.

A periodic reading (every live compiler, fresh cache locks, the workers, each rank's CPU and state)
is a snapshot of live processes: one taken before
:func:`~neuron_watch.wire.protocol.procs_every_at` has passed is held and replaced by the next, and
the flight recorder readings of the readings it replaced are kept and sent with it, each with its
own time. Any other reading (a rank's last words) goes at once, with what was held. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.wire.protocol import Procs, ProcSample, RankCollectives, WorkerActivity, procs_every_at

#: ``(rank, pid, cpu_seconds, mono)`` of a compiler process
Sample = tuple[int, int, float, float]
#: ``(rank, groups, problem, mono)`` of a rank's flight recorder
Reading = tuple[int, tuple[GroupProgress, ...], str, float]


class ProcReadings:
    """The held periodic reading and when the last one went."""

    def __init__(self) -> None:
        #: a periodic reading held until procs_every has passed (a bigger job's pace): the
        #: arguments of add, and the flight recorder readings of the readings it replaced
        self._held_procs: tuple[list[Sample], dict[str, Any]] | None = None
        self._held_readings: list[Reading] = []
        self._last_procs = -1e18

    def add(self, samples: Iterable[Sample], now: float, job_nodes: int, locks: Iterable[str] = (),
            always: bool = False, workers: Iterable[tuple[int, int]] = (), collectives: Iterable[Reading] = (),
            activity: Iterable[WorkerActivity] = ()) -> Procs | None:
        """The ``procs`` body to send now, or None (held, or nothing to say); see the module."""
        samples, collectives = list(samples), list(collectives)
        if always and now - self._last_procs < procs_every_at(job_nodes):
            self._held_readings += collectives
            self._held_procs = (samples, {"locks": tuple(locks), "workers": tuple(workers),
                                          "activity": tuple(activity)})
            return None
        return self._reading(samples, now, locks, always, workers, collectives, activity)

    def flush(self, now: float, job_nodes: int, due: bool = False) -> Procs | None:
        """The held reading's body (``due``: only once procs_every has passed), or None."""
        if self._held_procs is None or (due and now - self._last_procs < procs_every_at(job_nodes)):
            return None
        samples, kw = self._held_procs
        return self._reading(samples, now, kw["locks"], True, kw["workers"], [], kw["activity"])

    def _reading(self, samples: list[Sample], now: float, locks: Iterable[str], always: bool,
                 workers: Iterable[tuple[int, int]], collectives: list[Reading],
                 activity: Iterable[WorkerActivity]) -> Procs | None:
        held = self._held_procs
        collectives = self._held_readings + collectives
        self._held_procs, self._held_readings = None, []
        if held is not None and not always:  # a rank's last words: the held snapshot is the newest one
            samples, locks, workers, activity = held[0], held[1]["locks"], held[1]["workers"], held[1]["activity"]
            always = True
        if always:
            self._last_procs = now
        s = tuple(ProcSample(r, p, c, max(0.0, now - m)) for r, p, c, m in samples)
        lk, wk = tuple(locks), tuple(workers)
        fr = tuple(RankCollectives(r, g, why, max(0.0, now - m)) for r, g, why, m in collectives)
        if s or lk or wk or fr or always:
            return Procs(s, lk, wk, fr, tuple(activity))
        return None
