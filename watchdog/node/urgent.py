"""Which of a node's messages may make a verdict: they travel flagged (``Header.urgent``, schema 12) and
the coordinator takes them, with their node's messages before them, ahead of the steady ones
(:mod:`neuron_watch.job.intake`).

At 1,024 nodes x 64 ranks x 10 lines/s the coordinator's receive queue held seconds of steady batches
ahead of a hang line (tests/benchmarks/bench_scale.py, its hang stages; docs/multinode.md). What makes
a verdict at once is rare: a line whose signature is a failure (``fatal``, or an error no rule explains,
which decides a failure's cause when nothing follows it), a rank's "training finished" (a rank that left
early), a rank's or launcher's exit, the node's status. Silence makes the others: nothing to send there.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from neuron_watch.diagnosis.classify import Effect, KnowledgeBase
from neuron_watch.wire.protocol import Body, Exits, Lines, Status

#: The effects of the matches that make a batch urgent: those the judge's failure verdict reads
#: (``Judge._failure_verdict``: the failures, the open unexplained errors, who said training finished).
URGENT_EFFECTS = frozenset({Effect.FATAL, Effect.UNEXPLAINED, Effect.TRAIN_END})


def urgent_signatures(kb: KnowledgeBase | None) -> frozenset[str]:
    """The ids of ``kb``'s signatures whose matches make a batch urgent (none without a knowledge base:
    the coordinator then classifies the batch itself, and the node cannot tell)."""
    if kb is None:
        return frozenset()
    return frozenset(sid for sid, sig in kb.by_id.items() if sig.effect in URGENT_EFFECTS)


def urgent_line_test(kb: KnowledgeBase | None) -> Callable[[str], bool] | None:
    """Whether one line, as read, would make its batch urgent (a match of :func:`urgent_signatures`);
    None without a knowledge base. The node asks it of each line so that an urgent line's batch goes at
    once (:class:`~neuron_watch.node.line_batches.LineBatches`); a line holding no needle of those
    signatures costs one search (:meth:`KnowledgeBase.classifier_of`)."""
    if kb is None:
        return None
    of_ids = kb.classifier_of(urgent_signatures(kb))
    return lambda text: of_ids(text) is not None


def is_urgent(body: Body, signatures: frozenset[str]) -> bool:
    """Whether ``body`` may make a verdict: an exit, a status, or a lines body one of whose matches is of
    ``signatures`` (:func:`urgent_signatures`). Steady progress, process readings, heartbeats: not."""
    if isinstance(body, Lines):
        return any(m.signature in signatures for m in body.matches)
    return isinstance(body, (Exits, Status))
