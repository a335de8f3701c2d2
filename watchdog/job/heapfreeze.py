"""The coordinator's long-lived per-rank state kept out of the garbage collector's full walks.

A big job's coordinator holds, for the whole of a generation, the judge's state of every rank (a
:class:`~neuron_watch.diagnosis.judge.RankState`, its dicts, its newest evidence lines), several
objects a rank: 65,536 ranks are some hundreds of thousands of objects. Each full collection walks
them all (~0.1 s), and the traffic of such a job (new evidence lines, flight recorder readings,
decoded messages) sets one off every few seconds: a tenth or more of a core spent finding that
nothing of it is garbage.

Once every rank the nodes announced has its state in the judge, that state is frozen
(:func:`gc.freeze`, after one full collection so that no garbage of the start-up is frozen with
it): later collections walk only what was made after it. A frozen object is still freed the moment
nothing refers to it (reference counting); only a cycle among frozen objects would stay until the
next unfreeze. When the judge is replaced (a new generation), the frozen state is unfrozen
(:func:`gc.unfreeze`): the old generation's state may then be collected, and the new one is frozen
when its ranks are all known again. A node that joins later (more ranks announced and held) makes
the state be frozen again once the judge holds its ranks too.

While the state is frozen, the oldest generation is collected :data:`OLDEST_LESS_OFTEN` times less
often. What it holds then is what was made since the freeze and lives on: each rank's newest
evidence line, flight recorder readings and process readings, replaced every second or few at one
line a second, ~140,000 objects at 65,536 ranks, each walk ~60 ms. Replaced ones are freed by
reference counting, not by the collector: such a walk finds no garbage (tests/benchmarks/bench_scale.py's
replay: none in any of them), so walking it every half second is spent for nothing. The thresholds
are put back when the state is unfrozen.

Jobs of fewer than :data:`FREEZE_RANKS` ranks are left as they are: a full collection of their
state is cheap, and the processes that run them (tests among them) keep the collector as it is.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

#: the ranks from which the coordinator freezes its state (a full collection of fewer costs little)
FREEZE_RANKS = 4096


#: while the state is frozen, the oldest generation is collected this many times less often (see
#: the module's text)
OLDEST_LESS_OFTEN = 10


@dataclass(frozen=True)
class Collector:
    """What :class:`HeapFreeze` does to the process's collector (tests hand in their own)."""

    collect: Callable[[], object] = gc.collect
    freeze: Callable[[], None] = gc.freeze
    unfreeze: Callable[[], None] = gc.unfreeze
    get_threshold: Callable[[], tuple[int, int, int]] = gc.get_threshold
    set_threshold: Callable[[int, int, int], None] = gc.set_threshold


class HeapFreeze:
    """When to freeze the coordinator's heap and when to unfreeze it (see the module's text).

    Args:
        floor: the ranks a judge must hold before its state is frozen.
        collector: the process's collector (default: :mod:`gc`).
    """

    def __init__(self, floor: int = FREEZE_RANKS, collector: Collector | None = None) -> None:
        self.floor = floor
        self.collector = collector or Collector()
        self._holder: object = None
        self._threshold: tuple[int, int, int] | None = None  # the collector's thresholds before the freeze
        #: ranks the judge held at the last freeze (0: nothing of this judge's is frozen)
        self.frozen_ranks = 0
        self.freezes = 0
        self.unfreezes = 0
        self._looked_at = -math.inf  # when due() last said to look
        #: CPU seconds the last freeze took (its full collection): paid once per generation
        self.last_freeze_s = 0.0

    def due(self, now: float) -> bool:
        """Whether to look at the judge now (:meth:`turn`): once a second. The coordinator looks in a turn of
        its loop that writes no status.json: a freeze's full collection and a big job's status document take
        0.2-0.4 s each at 49,152 ranks here (a new judge's first of each), and in one turn they held the
        socket up to 0.85 s, a verdict line that arrived then waiting it out (bench_scale.py at 768 nodes)."""
        if now - self._looked_at < 1.0:
            return False
        self._looked_at = now
        return True

    def turn(self, holder: object, ranks: int, announced: int) -> bool:
        """``holder`` (the judge, whose identity is the generation's state) holds ``ranks`` ranks of
        the ``announced`` ones the nodes said they run. Returns whether the heap was frozen now."""
        if holder is not self._holder:
            self.release()  # the old judge's state may be collected from now on
            self._holder = holder
        if holder is None or ranks < self.floor or ranks < announced or ranks <= self.frozen_ranks:
            return False
        spent = time.process_time()
        gcs = self.collector
        gcs.collect()
        gcs.freeze()
        if self._threshold is None:
            self._threshold = young, middle, oldest = gcs.get_threshold()
            gcs.set_threshold(young, middle, oldest * OLDEST_LESS_OFTEN)
        self.last_freeze_s = time.process_time() - spent
        self.frozen_ranks = ranks
        self.freezes += 1
        return True

    def release(self) -> None:
        """Unfreeze what this froze (the coordinator closes; its process may go on)."""
        if self.frozen_ranks:
            self.collector.unfreeze()
            self.unfreezes += 1
            self.frozen_ranks = 0
        if self._threshold is not None:
            self.collector.set_threshold(*self._threshold)
            self._threshold = None
        self._holder = None
