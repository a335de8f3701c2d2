"""The job's status document (``status.json`` and the answer to a live status query), built from
what the coordinator knows at ``now``: the job's state, each node's and each rank's.

Pure: the coordinator hands in its nodes, the judge's rank rows and its own figures; nothing
here reads a clock or a file.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol

from neuron_watch.diagnosis.judge import FirstCollectiveStall
from neuron_watch.events import NodeStatus, iso_utc


class NodeState(str, enum.Enum):
    """Whether the coordinator hears a node."""

    CONNECTED = "connected"
    UNOBSERVED = "unobserved"  # silent for longer than `silence`: not healthy, not known dead


class NodeFacts(Protocol):
    """What the document reads of one node (the coordinator's ``NodeView``)."""

    @property
    def state(self) -> NodeState: ...

    @property
    def status(self) -> NodeStatus: ...

    @property
    def last_heard(self) -> float: ...

    @property
    def worker_pids(self) -> Mapping[int, int]: ...

    @property
    def recorder(self) -> Mapping[int, str]: ...


def liveness(nodes: Mapping[str, NodeFacts]) -> dict[str, Any]:
    """Which liveness signals this generation has: ``flight_recorder`` = ranks whose recorder was
    read, ``no_flight_recorder`` = ``{"node/rank": why}`` for the others that reported."""
    on = sum(why == "on" for v in nodes.values() for why in v.recorder.values())
    off = {f"{n}/{r}": why for n, v in sorted(nodes.items()) for r, why in sorted(v.recorder.items())
           if why != "on"}
    return {"output": True, "flight_recorder": on, "no_flight_recorder": off}


def rank_rows(ranks: list[dict[str, Any]], nodes: Mapping[str, NodeFacts], live: bool,
              job_state: str) -> list[dict[str, Any]]:
    """The judge's rank rows with each rank's pid; a rank of a node not heard is ``unobserved``; once
    the job is over (not ``live``), every rank that did not fail is what the job is (``job_state``),
    not what it last did. The rows are completed in place and returned."""
    for r in ranks:
        view = nodes.get(str(r.get("node")))
        r["pid"] = None if view is None else view.worker_pids.get(int(str(r.get("rank"))))
    unobserved = {n for n, v in nodes.items() if v.state is NodeState.UNOBSERVED}
    if unobserved:
        for r in ranks:
            if r.get("node") in unobserved:
                r["state"] = "unobserved"
    if not live:
        for r in ranks:
            if r.get("state") != "failed":
                r["state"] = job_state
    return ranks


def first_collective_fields(stall: FirstCollectiveStall) -> dict[str, Any]:
    """status.json's ``first_collective``: a collective stuck before the first progress, what the judge
    does about it and when (``neuron-watch status`` says it in words)."""
    return {"how": stall.how, "stalled_for": round(stall.stalled_for, 1), "timeout": round(stall.timeout, 1),
            "timeout_name": stall.what, "hang_in": round(max(0.0, stall.timeout - stall.stalled_for), 1)}


def status_document(*, job_id: str, generation: int, restarts: int, state: str, live: bool, label: str | None,
                    wall: float, now: float, ranks: list[dict[str, Any]], hang_timeout: float | None,
                    hang_timeout_kind: str | None, progress: Mapping[str, Any],
                    nodes: Mapping[str, NodeFacts], watchdog_io: Any,
                    first_collective: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``status.json`` document. ``ranks``: the judge's rank rows at ``now`` (completed here,
    see :func:`rank_rows`); ``progress``: ``last_progress`` and ``last_step``; ``wall``: the time of
    the document; ``watchdog_io``: the faults of the watchdog's own files."""
    return {**status_head(job_id=job_id, generation=generation, restarts=restarts, state=state, label=label,
                          wall=wall, now=now, hang_timeout=hang_timeout, hang_timeout_kind=hang_timeout_kind,
                          first_collective=first_collective, progress=progress, nodes=nodes, watchdog_io=watchdog_io),
            "ranks": rank_rows(ranks, nodes, live, state)}


def status_head(*, job_id: str, generation: int, restarts: int, state: str, label: str | None, wall: float,
                now: float, hang_timeout: float | None, hang_timeout_kind: str | None, progress: Mapping[str, Any],
                nodes: Mapping[str, NodeFacts], watchdog_io: Any,
                first_collective: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The status document without its ranks (:func:`status_document`; a big job's summary adds
    them from :class:`~neuron_watch.job.statusbook.StatusBook`)."""
    return {
        "job_id": job_id,
        "generation": generation,
        "restarts": restarts,
        "state": state,
        "label": label,
        "updated": iso_utc(wall),
        "updated_unix": wall,
        "hang_timeout": hang_timeout,
        "hang_timeout_kind": hang_timeout_kind,
        **({} if first_collective is None else {"first_collective": dict(first_collective)}),
        **progress,
        "nodes": {n: {"state": v.state.value, "status": v.status, "last_heard_ago": round(now - v.last_heard, 3)}
                  for n, v in sorted(nodes.items())},
        "liveness": liveness(nodes),
        "watchdog_io": watchdog_io,
    }
