"""The summarised status document of a big job, kept by changes (``status.json`` beyond
:data:`~neuron_watch.outputs.status.FULL_RANKS` ranks).

:func:`~neuron_watch.outputs.status.summarise` of a document listing every rank says the same, but
it needs every rank's row first: ~3 us a rank, 0.2-0.6 s for 65,536 ranks, each time status.json
is written. Here each rank's state is kept, with the counts per node and per state, and only what
can have changed is read again at ``now``:

* the ranks the judge noted as touched (:meth:`Judge.take_touched`: a match, an exit, a compiler,
  a stopped worker, a new rank);
* the ranks whose kept state is not ``progressing`` (starting, compiling, saving, waiting, silent,
  ...: states that time alone moves, and the outliers: few in a healthy job), and the progressing
  ones that never printed progress (only their completing collectives make them progressing);
* the progressing ranks whose newest line is older than ``silent_after`` (time alone makes them
  silent): a node's oldest line is read in C, its ranks only when it is that old;
* every rank when the job-wide input of a rank's state that time moves (whether a compile-cache
  lock may still be held) changes, or the judge is a new one.

The steps and the line ages of a node are read from its ranks' states in C at each document (they
move for every rank every second); the outliers' rows are built for the outliers only. The full
per-rank table is :func:`~neuron_watch.job.statusdoc.rank_rows` of the judge's rows, on request.

Pure: the judge's states and ``now`` are handed in; nothing here reads a clock or a file.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, Protocol

from neuron_watch.job.statusdoc import NodeFacts, NodeState
from neuron_watch.outputs.status import OUTLIERS, RANK_STATES, RANKS_FILE, USUAL_STATES

_LAST_LINE = attrgetter("last_line")
_STEP = attrgetter("step")
_URGENCY = {s: i for i, s in enumerate(RANK_STATES)}
PROGRESSING = "progressing"


class RankFacts(Protocol):
    """What the book reads of one rank's state (the judge's ``RankState``)."""

    @property
    def key(self) -> Any: ...

    @property
    def step(self) -> int | None: ...

    @property
    def last_line(self) -> float: ...

    @property
    def compile_seconds(self) -> float: ...

    @property
    def compile_open(self) -> float | None: ...

    @property
    def last_progress(self) -> float | None: ...


class BookJudge(Protocol):
    """What the book asks of the judge (:class:`~neuron_watch.diagnosis.judge.Judge`)."""

    @property
    def ranks(self) -> Mapping[Any, Any]: ...

    @property
    def unobserved(self) -> Mapping[str, float]: ...

    def take_touched(self) -> Sequence[Any]: ...

    def state_namer(self, now: float) -> tuple[Callable[[Any], str], float, bool]: ...


class _Node:
    """One node's ranks (their states in rank order) and the count of each kept state."""

    __slots__ = ("counts", "dirty", "oldest", "ranks")

    def __init__(self) -> None:
        self.ranks: list[Any] = []
        self.counts: dict[str, int] = {}
        self.dirty = False  # a rank was added: sort again by rank
        self.oldest = 0.0  # the oldest newest line of its ranks at the last refresh


class StatusBook:
    """Each rank's state as a status document names it, kept by changes (see the module doc)."""

    def __init__(self) -> None:
        self._judge: object | None = None
        self._reset()

    def _reset(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._state: dict[int, str] = {}  # id(rank state) -> its kept state
        #: the ranks read again at every refresh: those whose kept state is not progressing, and the
        #: progressing ones that never showed progress (their completing collectives alone make them
        #: progressing, and time alone ends that while their lines keep coming)
        self._odd: dict[int, Any] = {}
        self._alive: bool | None = None
        self.reread = 0  # ranks read again by the last refresh (a figure for the benchmarks)

    def refresh(self, judge: BookJudge, now: float) -> None:
        """Bring every rank's kept state to ``now``."""
        name, silent_after, alive = judge.state_namer(now)
        touched = judge.take_touched()
        if judge is not self._judge:  # a new generation's judge: every rank it has is new here
            self._judge = judge
            self._reset()
            touched = [*judge.ranks.values(), *touched]
        state = self._state
        for st in touched:
            if id(st) not in state:
                self._add(st)
        for node in self._nodes.values():  # (read in C: 65,536 ranks' newest lines)
            node.oldest = min(map(_LAST_LINE, node.ranks))
        if alive != self._alive:
            self._alive = alive
            again: dict[int, Any] = {id(st): st for node in self._nodes.values() for st in node.ranks}
        else:
            again = {id(st): st for st in touched}
            again.update(self._odd)
            quiet = now - silent_after
            for node in self._nodes.values():
                if node.oldest < quiet:
                    for st in node.ranks:
                        if st.last_line < quiet and state[id(st)] == PROGRESSING:
                            again[id(st)] = st
        self.reread = len(again)
        nodes, odd = self._nodes, self._odd
        for i, st in again.items():
            new, old = name(st), state[i]
            if new == old:
                continue
            state[i] = new
            counts = nodes[st.key.node].counts
            counts[old] -= 1
            if not counts[old]:
                del counts[old]
            counts[new] = counts.get(new, 0) + 1
            if new == PROGRESSING and st.last_progress is not None:
                odd.pop(i, None)
            else:
                odd[i] = st

    def _add(self, st: Any) -> None:
        node = self._nodes.get(st.key.node)
        if node is None:
            node = self._nodes[st.key.node] = _Node()
        node.ranks.append(st)
        node.dirty = True
        # a new rank is counted as odd until it is read (it is in the touched ones read at once)
        self._state[id(st)] = "starting"
        node.counts["starting"] = node.counts.get("starting", 0) + 1
        self._odd[id(st)] = st

    def summary(self, now: float, nodes: Mapping[str, NodeFacts], unobserved: Mapping[str, float], live: bool,
                job_state: str, limit: int = OUTLIERS) -> dict[str, Any]:
        """The rank part of the summarised document at ``now`` (call :meth:`refresh` first):
        ``ranks`` (the outliers' rows), ``ranks_total``, ``ranks_by_state``, ``node_ranks``,
        ``ranks_omitted``, ``ranks_file``, as :func:`~neuron_watch.outputs.status.summarise` gives
        them of the document listing every rank (:func:`~neuron_watch.job.statusdoc.rank_rows`:
        the ranks of a node not heard are ``unobserved``; once the job is over (not ``live``) every
        rank that did not fail is what the job is)."""
        spans: dict[str, tuple[list[int], float, dict[str, int], bool]] = {}
        top: int | None = None
        for name in sorted(self._nodes):
            node = self._nodes[name]
            if node.dirty:
                node.ranks.sort(key=lambda st: st.key.rank)
                node.dirty = False
            if not node.ranks:
                continue
            steps = list(map(_STEP, node.ranks))  # (read in C; a rank without a step is rare)
            if None in steps:
                steps = [s for s in steps if s is not None]
            view = nodes.get(name)
            deaf = name in unobserved or (view is not None and view.state is NodeState.UNOBSERVED)
            counts = {"unobserved": len(node.ranks)} if deaf else dict(node.counts)
            if not live:  # every rank that did not fail is what the job is
                failed = counts.get("failed", 0)
                counts = {job_state: len(node.ranks)} if job_state == "failed" else {
                    s: n for s, n in ((job_state, len(node.ranks) - failed), ("failed", failed)) if n}
            spans[name] = (steps, node.oldest, counts, deaf)
            if steps:
                hi = max(steps)
                top = hi if top is None else max(top, hi)
        by_state: dict[str, int] = {}
        node_ranks: dict[str, dict[str, Any]] = {}
        odd: list[tuple[str, Any]] = []  # (its state, its rank state): not progressing nor over
        late: list[tuple[str, Any]] = []  # progressing (or over) and 2 or more steps behind the newest
        state = self._state
        for name, (steps, oldest, counts, deaf) in spans.items():
            node = self._nodes[name]
            for s, n in counts.items():
                by_state[s] = by_state.get(s, 0) + n
            node_ranks[name] = {"ranks": len(node.ranks), "states": counts,
                                "last_step": [min(steps), max(steps)] if steps else [None, None],
                                "last_line_age": round(now - oldest, 3)}
            behind = top - 2 if top is not None and steps and min(steps) <= top - 2 else None
            if not (set(counts) - USUAL_STATES) and behind is None:
                continue
            plain = live and not deaf  # each rank shows its kept state
            for st in node.ranks:
                s = state[id(st)] if plain else self._shown(st, deaf, live, job_state)
                if s not in USUAL_STATES:
                    odd.append((s, st))
                elif behind is not None and st.step is not None and st.step <= behind:
                    late.append((s, st))

        def urgency(c: tuple[str, Any]) -> tuple[int, int, float, str, int]:
            s, st = c
            behind_by = top - st.step if top is not None and st.step is not None else 0
            return (_URGENCY.get(s, -1), -behind_by, -round(now - st.last_line, 3), st.key.node, st.key.rank)

        # Every state not progressing nor over is more urgent than those (RANK_STATES' order): the
        # ranks behind (all of a node's whose batch is not in yet, at 10 steps a second) are only
        # looked through for what room the others leave.
        ranked = sorted(odd, key=urgency)[:limit]
        if len(ranked) < limit and late:
            ranked += heapq.nsmallest(limit - len(ranked), late, key=urgency)
        rows = [self._row(st, s, now, nodes) for s, st in ranked]
        total = len(self._state)
        return {"ranks": rows, "ranks_total": total, "ranks_by_state": by_state, "node_ranks": node_ranks,
                "ranks_omitted": total - len(rows), "ranks_file": RANKS_FILE}

    def _shown(self, st: Any, deaf: bool, live: bool, job_state: str) -> str:
        s = "unobserved" if deaf else self._state[id(st)]
        if not live and s != "failed":
            return job_state
        return s

    @staticmethod
    def _row(st: Any, state: str, now: float, nodes: Mapping[str, NodeFacts]) -> dict[str, Any]:
        open_for = now - st.compile_open if st.compile_open is not None else 0.0
        view = nodes.get(str(st.key.node))
        return {"node": st.key.node, "rank": st.key.rank, "state": state, "last_step": st.step,
                "last_line_age": round(now - st.last_line, 3),
                "compile_seconds": round(st.compile_seconds + open_for, 3),
                "pid": None if view is None else view.worker_pids.get(int(st.key.rank))}
