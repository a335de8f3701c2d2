"""The job's status files in its run directory: ``status.json`` and, for a job too big for it to
list every rank, ``ranks.json``; and who else reads each status document (the ``--progress``
line, metrics).

``status.json`` is written about once a second; less often in a job of more than
``STATUS_RANKS_PER_SECOND`` ranks (a second per that many ranks) and when a document costs more
than ``STATUS_SHARE`` of the loop's time, and at most every ``SHED_STATUS_EVERY`` seconds while the
coordinator is behind the nodes (the verdict comes first).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from neuron_watch.iofaults import IOHealth
from neuron_watch.job.memory import Takeover
from neuron_watch.outputs.status import FULL_RANKS, RANKS_FILE, summarise

#: The share of the loop's time a status document may take at most: it waits this many times its
#: own last cost (a document listing tens of thousands of ranks costs a large part of a second:
#: tests/benchmarks/bench_scale.py prints it); small jobs keep the one-second interval.
STATUS_SHARE = 0.1
#: while behind, status.json at most this often
SHED_STATUS_EVERY = 10.0
#: ranks.json (every rank's row of a job too big for status.json to list them) at most this often
RANKS_EVERY = 30.0
#: status.json at most every (the job's ranks / this) seconds, at least every second: a document's
#: cost grows with the ranks (the summary kept by changes < 1 us a rank, every rank's document for
#: ranks.json or a listener ~3-6 us), its readers (status, the --progress line, metrics) need it no
#: fresher in a big job: 4 s at 65,536 ranks, every second up to 16,384
STATUS_RANKS_PER_SECOND = 16_384


class StatusFiles:
    """When and where the job's status documents are written. ``listeners`` are called with each
    document written (in this process: every rank, whatever the size)."""

    def __init__(self, run_dir: str, health: IOHealth) -> None:
        self.run_dir = run_dir
        self.health = health
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        #: coordinator-state.json: the job kept for a coordinator's successor, a predecessor's taken up
        self.kept = Takeover(run_dir, health)
        self._last = -1e18
        self._every = 1.0
        self._floor = 1.0  # the interval the job's size asks for (STATUS_RANKS_PER_SECOND)
        self._last_ranks = -1e18

    def turn(self, now: float, behind: bool, write: Callable[[float], None]) -> bool:
        """Call ``write(now)`` if a status document is due at ``now``. Returns True when a due one
        was shed instead (``behind``: the coordinator is behind the nodes)."""
        if now - self._last < self._every:
            return False
        shed = behind and now - self._last < SHED_STATUS_EVERY
        self._last = now
        if shed:
            return True
        spent = time.perf_counter()
        write(now)
        self._every = max(self._floor, (time.perf_counter() - spent) / STATUS_SHARE)
        return False

    def write(self, doc: dict[str, Any], now: float) -> None:
        """``status.json`` (atomic), ``ranks.json`` when due, then the listeners."""
        self._floor = max(1.0, len(doc["ranks"]) / STATUS_RANKS_PER_SECOND)
        if len(doc["ranks"]) > FULL_RANKS:
            # tens of thousands of rows (9 MB at 65,536 ranks) once a second is most of a tick:
            # status.json summarises them, every row goes to ranks.json twice a minute
            self.health.write_json(os.path.join(self.run_dir, "status.json"), summarise(doc))
            if now - self._last_ranks >= RANKS_EVERY:
                self._last_ranks = now
                self.health.write_json(os.path.join(self.run_dir, RANKS_FILE),
                                       {"updated": doc["updated"], "updated_unix": doc["updated_unix"],
                                        "ranks": doc["ranks"]})
        else:
            self.health.write_json(os.path.join(self.run_dir, "status.json"), doc)
        for listener in self.listeners:
            listener(doc)

    def write_summary(self, summary: dict[str, Any], now: float, every: Callable[[], dict[str, Any]]) -> None:
        """A big job's ``status.json``: ``summary`` (:func:`~neuron_watch.outputs.status.summarise`'s
        shape, kept by changes); ``every()`` (the document listing every rank, ~3 us a rank) only
        when ``ranks.json`` is due or a listener takes the documents."""
        self._floor = max(1.0, int(summary["ranks_total"]) / STATUS_RANKS_PER_SECOND)
        self.health.write_json(os.path.join(self.run_dir, "status.json"), summary)
        due = now - self._last_ranks >= RANKS_EVERY
        if not due and not self.listeners:
            return
        doc = every()
        if due:
            self._last_ranks = now
            self.health.write_json(os.path.join(self.run_dir, RANKS_FILE),
                                   {"updated": doc["updated"], "updated_unix": doc["updated_unix"],
                                    "ranks": doc["ranks"]})
        for listener in self.listeners:
            listener(doc)
