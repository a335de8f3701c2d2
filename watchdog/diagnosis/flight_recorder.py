"""PyTorch Flight Recorder documents -> a small per-process-group summary (pure).

A rank's worker server answers ``POST /handler/fr_trace_json`` with a JSON document (torch 2.13,
``"version": "2.10"``; the layout is the one ``torch/distributed/flight_recorder/components``
parses)::

    {"version": "2.10", "pg_config": {...}, "nccl_comm_state": {},
     "pg_status": {"0": {"last_enqueued_collective": "4", "last_started_collective": "-1",
                         "last_completed_collective": "4"}},
     "entries": [{"pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 4,
                  "profiling_name": "gloo:barrier", "state": "scheduled", "retired": true,
                  "time_created_ns": 1795451782410578700, ...}]}

``pg_status`` holds the per-group sequence ids (strings; ``-1`` = none yet) and survives the ring
buffer wrapping; ``entries`` is the ring buffer, whose newest entry per group names the op. gloo
never fills ``time_discovered_*`` and leaves ``state`` at ``scheduled`` (``retired`` tells
completion there); NCCL moves ``state`` to ``started``/``completed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from neuron_watch.events import RankKey


class GroupProgress(NamedTuple):
    """One process group's collective progress on one rank.

    ``completed``/``started``/``enqueued``: the newest collective sequence ids (-1: none).
    ``op``/``state``: the newest recorded entry's ``profiling_name`` and ``state`` (``""`` if the
    buffer holds none). ``wall``: that entry's creation time, epoch seconds (0.0 if unknown).
    ``seq``/``shape``: that entry's ``collective_seq_id`` (-1: none) and its input sizes and dtypes
    (``"[[2177]] Float"``): at one sequence id every rank of a group must run the same collective on
    the same shapes, so two ranks that differ there diverged (what torch's own
    ``torch/distributed/flight_recorder`` analysis reports as a mismatch).

    A named tuple, not a dataclass: the coordinator decodes every node's readings, ~100 groups a
    node, and a tuple is built in C (``protocol._decode_procs_fast``).
    """

    group: str
    completed: int
    started: int
    enqueued: int
    op: str = ""
    state: str = ""
    wall: float = 0.0
    seq: int = -1
    shape: str = ""



def _shape(e: Mapping[str, Any]) -> str:
    """``input_sizes`` and ``input_dtypes`` of one entry, compact (``"[[2177]] Float"``)."""
    sizes = e.get("input_sizes", [])
    dtypes = e.get("input_dtypes", [])
    sizes_text = "[" + ",".join("[" + ",".join(str(d) for d in s) + "]" if isinstance(s, list) else str(s)
                                for s in (sizes if isinstance(sizes, list) else [])) + "]"
    return f"{sizes_text} {','.join(str(d) for d in dtypes) if isinstance(dtypes, list) else ''}".strip()[:200]


class FlightRecorderError(ValueError):
    """The document is not a Flight Recorder dump this code understands."""


def _seq(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def summarize(doc: Mapping[str, Any]) -> tuple[GroupProgress, ...]:
    """The per-group progress in one ``fr_trace_json`` document, sorted by group id.

    An empty tuple: the recorder is on but no process group recorded anything (yet), or it is
    off (``TORCH_FR_BUFFER_SIZE=0`` answers with empty ``pg_status`` and ``entries``).

    Raises:
        FlightRecorderError: ``doc`` is not a mapping with mapping ``pg_status`` / list ``entries``.
    """
    if not isinstance(doc, Mapping):
        raise FlightRecorderError("a flight recorder dump is a JSON object")
    status = doc.get("pg_status", {})
    entries = doc.get("entries", [])
    if not isinstance(status, Mapping) or not isinstance(entries, list):
        raise FlightRecorderError("pg_status must be an object and entries a list")
    newest: dict[str, Mapping[str, Any]] = {}
    for e in entries:
        if not isinstance(e, Mapping) or e.get("is_p2p"):
            continue
        g = str(e.get("pg_id", ""))
        if _seq(e.get("collective_seq_id")) >= _seq(newest.get(g, {}).get("collective_seq_id")):
            newest[g] = e
    groups: dict[str, GroupProgress] = {}
    for g, st in status.items():
        if not isinstance(st, Mapping):
            continue
        groups[str(g)] = GroupProgress(
            str(g),
            _seq(st.get("last_completed_collective")),
            _seq(st.get("last_started_collective")),
            _seq(st.get("last_enqueued_collective")),
        )
    for g, e in newest.items():
        base = groups.get(g)
        seq = _seq(e.get("collective_seq_id"))
        state = str(e.get("state", ""))
        if base is None:  # a dump without pg_status (older layouts): the entries alone
            done = seq if state == "completed" or e.get("retired") else seq - 1
            base = GroupProgress(g, done, seq if state in ("started", "completed") else -1, seq)
        t = e.get("time_created_ns", 0)
        wall = t / 1e9 if isinstance(t, (int, float)) and math.isfinite(t) and t > 0 else 0.0
        groups[g] = GroupProgress(g, base.completed, base.started, base.enqueued,
                                  str(e.get("profiling_name", "")), state, wall, seq, _shape(e))
    return tuple(sorted(groups.values(), key=lambda p: (len(p.group), p.group)))


def advanced(before: tuple[GroupProgress, ...] | None, after: tuple[GroupProgress, ...]) -> bool:
    """Did any group complete a collective between two summaries of one rank?

    A group that appears for the first time with a completed collective counts (a new group, or
    the first reading of this rank).
    """
    old = {p.group: p.completed for p in before or ()}
    return any(p.completed > old.get(p.group, -1) for p in after)


class StalledCollective(NamedTuple):
    """A collective some ranks entered and none completed (:func:`stalled_collective`).

    ``culprit``: the one rank that never entered it (None: every rank is in it). ``how``: said in
    words for a verdict's reason.
    """

    group: str
    seq: int
    culprit: RankKey | None
    how: str


def stalled_collective(ranks: Mapping[RankKey, Mapping[str, GroupProgress]],
                       who: Callable[[RankKey], str] = str) -> StalledCollective | None:
    """The collective the ranks are stuck in, by their newest readings (``ranks``: each live rank's
    newest reading per process group), or None when the readings do not show one.

    Shown only when, in one process group every rank has a reading of, each rank has entered some
    collective, the newest one entered (the highest ``enqueued``) is not completed on any rank that
    entered it, and either every rank entered it (they are all stuck in it: a network, a device) or
    all but one did (that one is the culprit: its peers wait for it). A rank that has entered no
    collective at all is still setting up (loading, compiling): nothing is shown while any is, and
    neither when two or more ranks are behind (which of them is late is not told). Every rank in it is
    shown only where the backend says it started on each (NCCL; gloo records completion lazily). ``who``
    names a rank key in ``how``.
    """
    if len(ranks) < 2:
        return None
    names = {g for reading in ranks.values() for g in reading}
    for g in sorted(names, key=lambda x: (len(x), x)):
        held = [(k, reading.get(g)) for k, reading in ranks.items()]
        if any(p is None or p.enqueued < 0 for _, p in held):
            continue
        seqs = {k: p.enqueued for k, p in held if p is not None}
        top = max(seqs.values())
        inside = [p for _, p in held if p is not None and p.enqueued == top]
        if any(p.completed >= top for p in inside):
            continue  # completed on a rank: the others finish it, or a peer is behind a finished one
        behind = [k for k, s in seqs.items() if s < top]
        if not behind:
            # only on the backend's word that it runs on every rank (NCCL's ``started``): gloo leaves started at
            # -1 and marks completion lazily (a rank back from a barrier still reads it not completed, see the
            # recorded gloo dumps), so ranks all busy after a barrier would read as all stuck in it
            if all(p.started >= top for p in inside):
                return StalledCollective(g, top, None, f"every rank entered collective {top} of group {g} and "
                                         "none completed it (flight recorder)")
            continue
        if len(behind) == 1:
            k = behind[0]
            peers = "the other rank entered and waits in" if len(inside) == 1 else (
                f"the other {len(inside)} ranks entered and wait in")
            return StalledCollective(g, top, k, f"{who(k)} never entered collective {top} of group {g}, which "
                                     f"{peers} (flight recorder)")
    return None
