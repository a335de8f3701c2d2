"""A node's process readings on their way to the coordinator, at the pace of the job's size.

A periodic reading (every live compiler, fresh cache locks, the workers, each rank's CPU and state)
is a snapshot of live processes: one taken before
:func:`~neuron_watch.wire.protocol.procs_every_at` has passed is held and replaced by the next, and
the flight recorder readings of the readings it replaced are kept and sent with it, each with its
own time. Any other reading (a rank's last words) goes at once, with what was held.

A reading says only what changed since the newest one the coordinator acknowledged (``same_as``:
that message's seq; see :class:`~neuron_watch.wire.protocol.Procs`): the rank processes whose pid,
CPU or state changed, the ranks whose process left, the flight recorder groups whose progress
changed. Until an acknowledgement comes, after a new coordinator session or a new generation
(:meth:`ProcReadings.reset`), a reading goes whole. A message lost or dropped is never acknowledged,
so it is never what a later reading refers to. No I/O.
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
#: what the coordinator holds after a reading: rank -> (pid, tree CPU, state) of the rank processes
#: (CPU and state None: not seen), and (rank, group) -> the group's newest flight recorder progress
Workers = dict[int, tuple[int, float | None, str | None]]
Groups = dict[tuple[int, str], GroupProgress]
#: readings sent and not acknowledged kept for a later acknowledgement (more are let go: a
#: reading then refers to an older one, or goes whole)
MAX_UNACKED = 64


class ProcReadings:
    """The held periodic reading and when the last one went."""

    def __init__(self, delta: bool = True) -> None:
        #: a periodic reading held until procs_every has passed (a bigger job's pace): the
        #: arguments of add, and the flight recorder readings of the readings it replaced
        self._held_procs: tuple[list[Sample], dict[str, Any]] | None = None
        self._held_readings: list[Reading] = []
        self._last_procs = -1e18
        self.delta = delta  # False: every reading goes whole
        #: the newest acknowledged reading's message seq (-1: none) and what the coordinator holds after it
        self._base_seq = -1
        self._base: tuple[Workers, Groups] = ({}, {})
        #: what it holds after each reading sent and not yet acknowledged, by message seq; the
        #: newest reading built, until its seq is known (:meth:`enqueued`)
        self._unacked: dict[int, tuple[Workers, Groups]] = {}
        self._built: tuple[Workers, Groups] | None = None

    def enqueued(self, seq: int) -> None:
        """The reading just built went as message ``seq``."""
        if self._built is not None:
            if len(self._unacked) >= MAX_UNACKED:
                del self._unacked[min(self._unacked)]
            self._unacked[seq], self._built = self._built, None

    def acked(self, seq: int) -> None:
        """The coordinator has every message up to ``seq``: the newest reading among them is the
        one the next readings refer to."""
        done = [s for s in self._unacked if s <= seq]
        if done:
            newest = max(done)
            self._base_seq, self._base = newest, self._unacked[newest]
            for s in done:
                del self._unacked[s]

    def reset(self) -> None:
        """The coordinator holds none of our readings (a new coordinator session, a new generation):
        the next reading goes whole."""
        self._base_seq, self._base = -1, ({}, {})
        self._unacked.clear()
        self._built = None

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

    def next_due(self, job_nodes: int) -> float | None:
        """When the held periodic reading goes (:meth:`flush` with ``due``; None: none is held)."""
        return None if self._held_procs is None else self._last_procs + procs_every_at(job_nodes)

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
        lk, wk, act = tuple(locks), tuple(workers), tuple(activity)
        same_as = self._base_seq if self.delta else -1
        base_workers, base_groups = self._base if same_as >= 0 else ({}, {})
        # Workers: a reading with any is the node's whole table; one without says nothing of them.
        workers_now = base_workers
        gone: tuple[int, ...] = ()
        if wk:
            active = {a.rank: a for a in act}
            workers_now = {r: ((p, active[r].tree_cpu_seconds, active[r].state) if r in active else (p, None, None))
                           for r, p in wk}
            if same_as >= 0:
                wk = tuple((r, p) for r, p in wk if base_workers.get(r) != workers_now[r])
                changed = {r for r, _p in wk}
                act = tuple(a for a in act if a.rank in changed)
                gone = tuple(sorted(r for r in base_workers if r not in workers_now))
        groups_now = dict(base_groups)
        fr = []
        for r, g, why, m in collectives:
            if not why:
                new = tuple(x for x in g if base_groups.get((r, x.group)) != x) if same_as >= 0 else g
                groups_now.update(((r, x.group), x) for x in g)
                if g and not new:
                    continue  # every group as the coordinator holds it already
                g = new
            fr.append(RankCollectives(r, g, why, max(0.0, now - m)))
        if self.delta:
            self._built = (workers_now, groups_now)
        if s or lk or wk or fr or always or gone:
            return Procs(s, lk, wk, tuple(fr), act, same_as, gone)
        self._built = None
        return None
