"""The lines around a live failure, as the nodes send them: what the judge reads a failure's error block from.

Pure: no I/O. Offline, ``diagnose`` keeps each rank's recent lines and the judge reads the error block
(:mod:`neuron_watch.diagnosis.errorblock`) around an evidence line from them. Live, the coordinator's judge
sees only the lines a signature matched; the node that read the rank's output sends, with a batch that
holds a failure, the run of the rank's lines around it (node/error_context.py). :class:`BlockLines` keeps
those runs per rank, joined where they continue one another, and answers the judge's question the way
``diagnose``'s recent lines do: the lines around this evidence line, and where it is among them.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_watch.events import Evidence, LogLine, RankKey

#: lines kept per rank (its newest runs): a failure's block is in the runs of its own batch or the next few
RANK_LINES = 2000
#: lines kept for the whole job (the ranks that sent runs longest ago forgotten first): a large job whose
#: ranks print error lines now and then keeps a bounded amount, not RANK_LINES for each of its ranks
JOB_LINES = 200_000


class BlockLines:
    """Per rank, runs of consecutive lines of one stream (oldest first), at most :data:`RANK_LINES` lines a
    rank and :data:`JOB_LINES` in all."""

    def __init__(self) -> None:
        #: (in the order the ranks last sent a run: the first is forgotten first)
        self.runs: dict[RankKey, list[list[LogLine]]] = {}
        self.lines = 0  # lines kept in all
        #: lines forgotten to stay under the bounds (the oldest runs' lines)
        self.forgotten = 0

    def add(self, run: Sequence[LogLine]) -> None:
        """One run of a rank's consecutive lines. A run that goes on from the rank's newest one (the same
        stream, its first line at most one past that run's last) joins it, lines it already holds left out;
        any other starts a run of its own (a gap between them is lines nobody sent)."""
        if not run:
            return
        key = run[0].key
        runs = self.runs.pop(key, [])
        self.runs[key] = runs  # (now the newest)
        before = sum(map(len, runs))
        last = runs[-1] if runs else None
        first = run[0].lineno
        if last is not None and last[0].source == run[0].source and last[0].lineno <= first <= last[-1].lineno + 1:
            end = last[-1].lineno
            held = {(ln.lineno, ln.text) for ln in last if ln.lineno >= first}
            last.extend(ln for ln in run if ln.lineno > end or (ln.lineno == end and (ln.lineno, ln.text) not in held))
        else:
            runs.append(list(run))
        total = sum(map(len, runs))
        while total > RANK_LINES:
            over = total - RANK_LINES
            oldest = runs[0]
            if len(oldest) <= over or len(runs) > 1:
                runs.pop(0)
                total -= len(oldest)
                self.forgotten += len(oldest)
            else:
                del oldest[:over]
                total -= over
                self.forgotten += over
        self.lines += total - before
        while self.lines > JOB_LINES and len(self.runs) > 1:
            stale = next(iter(self.runs))
            dropped = sum(map(len, self.runs.pop(stale)))
            self.lines -= dropped
            self.forgotten += dropped

    def around(self, ev: Evidence) -> tuple[list[LogLine], int] | None:
        """The run that holds ``ev``'s line (its stream, number and text) and its index there; None when
        no node sent it."""
        for run in reversed(self.runs.get(ev.key, ())):
            for i in range(len(run) - 1, -1, -1):
                line = run[i]
                if line.lineno == ev.lineno and line.source == ev.source and line.text == ev.text:
                    return run, i
        return None
