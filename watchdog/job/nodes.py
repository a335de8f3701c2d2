"""The job's nodes as the coordinator hears them: each agent session's view, who holds which name
and place in the job, who has gone silent.

Pure: the coordinator hands in ``now`` and what it heard; events, the judge and refusals on the
wire stay with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_watch.events import EvidenceReport, NodeStatus, RankExit, StopReport
from neuron_watch.job.statusdoc import NodeState
from neuron_watch.wire.protocol import WorkerActivity


@dataclass
class NodeView:
    """What the coordinator knows of one node's agent."""

    node: str
    session: int
    routing_id: bytes
    first_heard: float
    last_heard: float
    state: NodeState = NodeState.CONNECTED
    hostname: str = ""
    pid: int = 0
    ranks: tuple[int, ...] = ()
    status: NodeStatus = NodeStatus.NONE
    status_detail: str = ""
    checkpoint: str = ""
    generation: int = 0
    lines: int = 0
    reported_dropped_lines: int = 0  # the agent's own count (buffer overflow while we were away)
    reported_dropped_msgs: int = 0
    reported_truncated_lines: int = 0  # lines the agent cut to the wire's line limit (marked in their text)
    acked: int = -1
    need_ack: bool = False
    #: the node's launcher's exit in this generation, once it exited: the job side's one record of it
    #: (the judge reads it through :meth:`NodeRegistry.launcher_exit`)
    launcher_exit: RankExit | None = None
    status_since: float = 0.0  # when `status` was last set
    locks: set[str] = field(default_factory=set)  # fresh compile-cache locks this node sees
    worker_pids: dict[int, int] = field(default_factory=dict)  # rank -> pid, as the agent last saw them
    recorder: dict[int, str] = field(default_factory=dict)  # rank -> "on" or why its flight recorder is not read
    #: its last evidence report and when it came (kept apart: a later `failed`/`finished` status of a
    #: node whose launcher ended by itself must not hide that it answered, nor lose its bundle)
    evidence: EvidenceReport | None = None
    evidence_heard: int | None = None
    stop_report: StopReport | None = None  # its answer to the last stop
    place: int = -1  # its place in the job (node_rank, SLURM_PROCID, host index), from its hello
    #: (its own generation, the job's): a node that joined a restarted job, no relaunch sent to it
    #: (job/latecomers.py), whose words of its own generation are the job's
    adopted: tuple[int, int] | None = None
    status_heard: int = 0  # the coordinator's message count when `status` was said (orders answers)
    #: the shortest (our receipt - its send) seen, clocks apart: its transit with our queues empty.
    #: A message that took longer waited that much longer in our queues (see Coordinator.behind).
    #: The shortest of the current TRANSIT_WINDOW replaces it at the window's end: two hosts'
    #: monotonic clocks drift apart (ppm), and a drift must not read as a growing backlog.
    transit: float = float("inf")
    transit_next: float = float("inf")
    #: the rank processes after each of its procs readings (rank -> pid, rank -> its activity), by
    #: message seq from the newest one a reading referred to (``Procs.same_as``); the newest
    #: reading's seq, and the judge that took it
    procs_states: dict[int, tuple[dict[int, int], dict[int, WorkerActivity]]] = field(default_factory=dict)
    procs_seq: int = -1
    procs_judge: object = None

    def summary(self, now: float, seq: dict[str, Any]) -> dict[str, Any]:
        """This node in ``coordinator.json``: state, last heard, ``seq`` (its sequence gaps), drops."""
        return {
            "state": self.state.value, "last_heard_ago": round(now - self.last_heard, 3), "hostname": self.hostname,
            "ranks": list(self.ranks), "status": self.status, "generation": self.generation, "lines": self.lines,
            "seq": seq, "agent_dropped_lines": self.reported_dropped_lines,
            "agent_dropped_msgs": self.reported_dropped_msgs, "agent_truncated_lines": self.reported_truncated_lines,
        }

    @property
    def observed(self) -> bool:
        return self.state is NodeState.CONNECTED

    @property
    def launcher_code(self) -> int | None:
        """The node's launcher exit code in this generation, once it exited."""
        return None if self.launcher_exit is None else self.launcher_exit.exit_code


class NodeRegistry:
    """The job's node views by name (:attr:`views`, the coordinator's ``nodes``)."""

    def __init__(self, silence: float) -> None:
        self.silence = silence  # seconds without a message before a node is unobserved
        self.views: dict[str, NodeView] = {}
        #: no node can be silent before then: the oldest last-heard time of the last pass plus
        #: ``silence`` (a node's last-heard time only moves forward, a new node's is its first)
        self._silent_from = -1e18

    def holder(self, node: str, session: int, place: int, now: float) -> tuple[NodeView, bool] | None:
        """The live agent session that holds name ``node`` (or, claimed in a hello, ``place``) against
        a new session, and whether it holds it by name; None when the newcomer may take it (nobody
        holds it, or the holder is silent, unobserved or exited: an agent that restarted)."""
        holder = self.views.get(node)
        by_name = holder is not None and holder.session != session
        if not by_name and place >= 0:
            holder = next((v for v in self.views.values() if v.place == place and v.node != node), None)
        if holder is None or not holder.observed or holder.status is NodeStatus.EXITED:
            return None
        if now - holder.last_heard > self.silence:
            return None
        return holder, by_name

    def join(self, node: str, session: int, routing_id: bytes, generation: int, now: float) -> tuple[NodeView, bool]:
        """A new agent session of ``node``: its view (the line count carried over), and whether the
        node was known before (a rejoin)."""
        old = self.views.get(node)
        view = NodeView(node=node, session=session, routing_id=routing_id, first_heard=now, last_heard=now,
                        generation=generation)
        if old is not None:
            view.lines = old.lines
        self.views[node] = view
        return view, old is not None

    def newly_silent(self, now: float) -> list[NodeView]:
        """The nodes silent for longer than :attr:`silence` since the last call: marked unobserved.
        A pass over the nodes only when one can be (every few seconds, not every tick)."""
        if now <= self._silent_from:
            return []
        out = []
        oldest = now
        for view in self.views.values():
            if view.state is NodeState.CONNECTED:
                if now - view.last_heard > self.silence:
                    view.state = NodeState.UNOBSERVED
                    out.append(view)
                elif view.last_heard < oldest:
                    oldest = view.last_heard
        self._silent_from = oldest + self.silence
        return out

    def rebase(self, gap: float, now: float) -> None:
        """We did not run for ``gap`` seconds: the nodes were not silent, we were deaf."""
        for view in self.views.values():
            view.last_heard = min(now, view.last_heard + gap)

    def rotate_transit(self) -> None:
        """A transit window ended: each node's shortest transit of the window replaces the old one."""
        for view in self.views.values():
            if view.transit_next != float("inf"):
                view.transit, view.transit_next = view.transit_next, float("inf")

    def launcher_exit(self) -> RankExit | None:
        """The newest exit of any node's launcher in this generation (what the judge reads)."""
        exits = [v.launcher_exit for v in self.views.values() if v.launcher_exit is not None]
        return max(exits, key=lambda ex: ex.mono) if exits else None

    def size(self, expected: int | None) -> int:
        """The job's size: the nodes heard from, or ``expected`` if more."""
        return max(len(self.views), expected or 0)

    def enough(self, expected: int | None) -> bool:
        """Whether the ``expected`` nodes (if any are) have all been heard."""
        return expected is None or len(self.views) >= expected
