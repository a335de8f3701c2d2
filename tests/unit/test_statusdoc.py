"""The status document from plain facts (statusdoc.py is pure: no coordinator needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_watch.events import NodeStatus
from neuron_watch.job.statusdoc import NodeState, liveness, status_document


@dataclass
class Node:
    state: NodeState = NodeState.CONNECTED
    status: NodeStatus = NodeStatus.LAUNCHED
    last_heard: float = 100.0
    worker_pids: dict[int, int] = field(default_factory=dict)
    recorder: dict[int, str] = field(default_factory=dict)


def rows() -> list[dict[str, Any]]:
    return [{"node": "a", "rank": 0, "state": "training"}, {"node": "b", "rank": 1, "state": "training"},
            {"node": "b", "rank": 2, "state": "failed"}]


def doc(live: bool, **nodes: Node) -> dict[str, Any]:
    return status_document(job_id="j", generation=2, restarts=1, state="running" if live else "failed", live=live,
                           label=None, wall=1763730000.0, now=103.25, ranks=rows(), hang_timeout=60.0,
                           hang_timeout_kind="calibrated", progress={"last_progress": None, "last_step": 7},
                           nodes=nodes, watchdog_io={})


def test_ranks_carry_their_pid_and_a_silent_nodes_ranks_are_unobserved() -> None:
    d = doc(True, a=Node(worker_pids={0: 4242}), b=Node(state=NodeState.UNOBSERVED, last_heard=90.0))
    assert [(r["rank"], r["pid"], r["state"]) for r in d["ranks"]] == [
        (0, 4242, "training"), (1, None, "unobserved"), (2, None, "unobserved")]
    assert d["nodes"]["b"] == {"state": "unobserved", "status": NodeStatus.LAUNCHED, "last_heard_ago": 13.25}
    assert d["updated"].startswith("2025-11-21T") and d["last_step"] == 7 and d["generation"] == 2


def test_once_the_job_is_over_its_ranks_are_what_the_job_is_but_the_failed_ones() -> None:
    d = doc(False, a=Node(), b=Node())
    assert [r["state"] for r in d["ranks"]] == ["failed", "failed", "failed"]
    d = status_document(job_id="j", generation=0, restarts=0, state="finished", live=False, label="healthy",
                        wall=0.0, now=0.0, ranks=rows(), hang_timeout=None, hang_timeout_kind=None, progress={},
                        nodes={"a": Node(), "b": Node()}, watchdog_io={})
    assert [r["state"] for r in d["ranks"]] == ["finished", "finished", "failed"]


def test_liveness_counts_read_recorders_and_names_the_others() -> None:
    nodes = {"a": Node(recorder={0: "on", 1: "on"}), "b": Node(recorder={2: "no answer", 3: "on"})}
    assert liveness(nodes) == {"output": True, "flight_recorder": 3, "no_flight_recorder": {"b/2": "no answer"}}
