"""The culprit of a failure from what the nodes captured (pure: data in, verdict out).

At a failure every node captures evidence (:mod:`neuron_watch.node.evidence`) and reports, per rank,
its process state in ``/proc`` (``proc_states``), the top of its stack (``stack_tops``) and
whether that stack waits in a collective (``in_collective``). :func:`culprit_from_evidence` turns
those reports and the judge's verdict into the final verdict: the culprit and how it was found
(``culprit_source``), said in the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from neuron_watch.diagnosis.stacks import odd_one_out, stack_culprit
from neuron_watch.events import Action, EvidenceReport, Label, RankKey, Verdict

#: How a process state explains a rank's silence, in words; a stopped rank is the strongest reason,
#: uninterruptible I/O next, a vanished pid last (``Z``, a zombie, says nothing about who stopped first).
_STATE_WORDS = {"T": "is stopped (state T)", "t": "is stopped by a tracer (state t)",
                "D": "is in uninterruptible I/O (state D)", "gone": "has no process any more"}
_STATE_ORDER = {"T": 0, "t": 0, "D": 1, "gone": 2}


def _per_rank(reports: Mapping[str, EvidenceReport], field: str) -> dict[RankKey, Any]:
    """``{RankKey: value}`` of one per-rank field of every node's report."""
    return {RankKey(node, r): v for node, report in reports.items() for r, v in getattr(report, field).items()}


def culprit_from_evidence(verdict: Verdict, reports: Mapping[str, EvidenceReport]) -> Verdict:
    """Name the culprit of ``verdict`` from every node's evidence report, strongest evidence first.

    A hang: a rank's process state (stopped, in uninterruptible I/O, gone) explains its silence by
    itself; then the one rank whose stack sets it apart from the others waiting in a collective
    (:func:`~neuron_watch.diagnosis.stacks.stack_culprit`); the judge's own guess (the first rank to stop
    printing progress) is kept only when neither tells. A culprit the judge found from a failure or
    the flight recorder stays, unless a process state contradicts it. Another failure without a
    culprit (a collective mismatch seen by a peer): the one rank that ended somewhere else than all
    the others.

    Args:
        verdict: the judge's verdict when the capture was asked for.
        reports: node -> its evidence report (nodes that sent none are left out).
    """
    if verdict.label is not Label.COLLECTIVE_HANG:
        if verdict.culprit is not None or verdict.action is Action.WAIT:
            return verdict
        ended = odd_one_out({k: str(t) for k, t in _per_rank(reports, "stack_tops").items()})
        if ended is None:
            return verdict
        return dataclasses.replace(verdict, culprit=ended[0], culprit_source="stacks",
                                   reason=f"{verdict.reason}; {ended[1]} (stacks)")
    states = {k: str(s) for k, s in _per_rank(reports, "proc_states").items()}
    telling = [(k, s) for k, s in sorted(states.items(), key=lambda kv: kv[0].rank) if s != "Z"]
    if telling:
        key, state = min(telling, key=lambda kv: (_STATE_ORDER.get(kv[1], 3), kv[0].rank))
        rung = _STATE_ORDER.get(state, 3)
        others = [k for k, s in telling if k != key and _STATE_ORDER.get(s, 3) == rung]
        clause = f"{key} {_STATE_WORDS.get(state, f'is in state {state}')}"
        if others:
            clause += f" (also: {', '.join(str(k) for k in others)})"
        said = clause in verdict.reason  # the judge's own readings of the processes said it already
        return dataclasses.replace(verdict, culprit=key, culprit_source="process_state",
                                   reason=verdict.reason if said else f"{verdict.reason}; {clause}")
    if verdict.culprit is not None and verdict.culprit_source in ("failure", "flight_recorder"):
        return verdict
    tops = {k: str(t) for k, t in _per_rank(reports, "stack_tops").items()}
    waiting = {k: bool(w) for k, w in _per_rank(reports, "in_collective").items()}
    found = stack_culprit(dict(tops), dict(waiting))
    if found is not None:
        key, clause = found
        return dataclasses.replace(verdict, culprit=key, culprit_source="stacks",
                                   reason=f"{verdict.reason}; {clause} (stacks)")
    if verdict.culprit is not None and verdict.culprit_source == "progress":
        return dataclasses.replace(verdict, reason=f"{verdict.reason}; {verdict.culprit} was the first to stop "
                                   "printing progress (its stack does not tell more)")
    return verdict
