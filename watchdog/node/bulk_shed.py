"""The judge's part of a batch sent alone while the coordinator is behind.

A node's batch carries two things in one message: the judge's part (the ranks of its matches, its
progress rows due, its held rows) and the bulk (the other ranks' lines, which only ``merged.log``
and the tails read). Both wait in the coordinator's one receive queue, in order, so a backlog of bulk
delays the line a verdict needs: at 1,024 nodes x 64 ranks x 10 lines/s a hang line waited 4-13 s
there (tests/benchmarks/bench_scale.py, its hang stages; docs/multinode.md).

The rule: while the coordinator's acks say its queues hold the nodes' messages
:data:`BULK_SHED_BEHIND` seconds or more (``Ack.behind``), a node sends each batch's judged part alone
and leaves the other ranks' lines out, counted in the body (``Lines.shed``): the coordinator counts
them (``lines_shed_at_nodes`` in coordinator.json), says them, and ``merged.log`` marks where they are
missing. The ranks' own log files have every line. The judge loses nothing: a rank left out printed
only steady progress the node holds until its row is due (``Lines.judged``). A batch that judges no
rank sends nothing; its count goes with the node's next lines message.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import dataclasses

from neuron_watch.wire.protocol import Lines

#: The coordinator's lag (seconds its queues held the nodes' messages) from which the bulk is left out.
#: A verdict's budget at 1,024 nodes is 2 s: a batch waits up to its age (1 s) on the node, the verdict
#: tick ~0.1-0.3 s; what is left for the queue is under a second. A small job's coordinator is never
#: this far behind unless overloaded.
BULK_SHED_BEHIND = 0.5


def sheds_bulk(behind: float) -> bool:
    """Whether a node whose coordinator's last ack said ``behind`` sends its batches' judged parts alone."""
    return behind >= BULK_SHED_BEHIND


def judged_part(body: Lines, owed: int = 0) -> tuple[Lines | None, int]:
    """``body``'s judged ranks alone, the lines of its other ranks counted in ``shed`` (with ``owed``:
    lines shed earlier whose count has not travelled yet). Returns the part (None: no rank of the body
    is judged and it holds no row, so nothing goes) and the lines left out of it now (not counting ``owed``).

    A body that judges every rank (``judged`` None: an unpaced job, an exit's or a status's flush) is
    returned whole, with ``owed`` counted in it."""
    if body.judged is None:
        return (dataclasses.replace(body, shed=body.shed + owed) if owed else body), 0
    judged = body.judged
    keep = set(judged)
    left_out = sum(r.n_lines for i, r in enumerate(body.ranks) if i not in keep)
    if not judged and not body.held:  # (a body of held rows alone names no rank: one of nothing is not sent)
        return None, left_out
    place = {old: new for new, old in enumerate(judged)}
    part = Lines(ranks=tuple(body.ranks[i] for i in judged),
                 matches=tuple(m._replace(chunk=place[m.chunk]) for m in body.matches),
                 classified=body.classified,
                 progress=tuple(g._replace(chunk=place[g.chunk]) for g in body.progress),
                 blocks=tuple(k._replace(chunk=place[k.chunk]) for k in body.blocks),
                 judged=None, held=body.held, shed=body.shed + owed + left_out)
    return part, left_out
