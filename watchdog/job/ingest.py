"""The coordinator's ingest: what a fresh message of a node changes on the job side.

An :class:`Ingest` turns each decoded, authenticated message (:class:`~neuron_watch.wire.protocol.Msg`)
into the judge's observations, the job log's writes (:class:`~neuron_watch.job.joblog.JobLog`), the
node's view (:class:`~neuron_watch.job.nodes.NodeView`) and the events that tell it. It decides
nothing about time or recovery: the coordinator keeps ``tick``, the verdict's timing and the
execution of recovery's commands, and is the :class:`JobSide` this reads the generation, the judge
and the backlog from.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import operator
from collections.abc import Sequence
from typing import Protocol, cast

from neuron_watch.events import (
    CompilerSample,
    EventKind,
    EvidenceReport,
    LauncherExit,
    NodeStatus,
    RankExit,
    RankKey,
    StopReport,
)
from neuron_watch.job.endpoint import SHED_BEHIND, Counters
from neuron_watch.job.joblog import JobLogLike
from neuron_watch.job.judgelike import JudgeLike
from neuron_watch.job.latecomers import Latecomers
from neuron_watch.job.nodes import NodeView
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.recovery.machine import Recovery
from neuron_watch.wire.protocol import (
    MAX_LINE_BYTES,
    RANK_LINE_BYTES,
    Exits,
    Header,
    Heartbeat,
    Hello,
    Kind,
    Lines,
    Msg,
    Procs,
    RankCollectives,
    Status,
    WorkerActivity,
    block_lines,
    body_lines,
    decode_body,
    line_columns,
)

log = logging.getLogger("neuron_watch")

#: rank keys kept for the procs path (65,536 ranks of 1,024 nodes x 64 fit many times over)
MAX_KEYS = 1 << 20
#: a node's procs readings kept for the later ones that refer to them (acks a few seconds late at
#: one reading a second; a reading referring to one let go is counted in procs_unresolved)
MAX_PROCS_STATES = 32
#: a worker's or a flight recorder reading's rank, read in C; a reading's problem, groups and age
_rank_of = operator.attrgetter("rank")
_problem_of, _groups_of = operator.attrgetter("problem"), operator.attrgetter("groups")
_age_of = operator.attrgetter("d_mono")


class JobSide(Protocol):
    """What the ingest reads of the coordinator it works for: the current generation and judge
    (both replaced at a relaunch), how far behind the nodes' messages wait, and recovery (whether
    the job is live; generation 0's checkpoint)."""

    @property
    def generation(self) -> int: ...
    @property
    def judge(self) -> JudgeLike | None: ...
    @property
    def behind(self) -> float: ...
    @property
    def recovery(self) -> Recovery: ...
    @property
    def latecomers(self) -> Latecomers: ...


class Ingest:
    """Each fresh message of a node into the judge, the job log and the node's view.

    Args:
        job: the coordinator (generation, judge, backlog, recovery).
        nodes: the job's node views by name (the registry's).
        joblog: ``merged.log`` and the ranks' tails.
        events: where what a node says is told.
        counters: the endpoint's counters (lines ingested, shed, classified here).
    """

    def __init__(self, job: JobSide, nodes: dict[str, NodeView], joblog: JobLogLike, events: EventLog,
                 counters: Counters) -> None:
        self.job, self.nodes, self.joblog, self.events, self.counters = job, nodes, joblog, events, counters
        #: messages ingested (fresh, authenticated, in order): orders the nodes' answers
        self.heard = 0
        self._lock_nodes: set[str] = set()  # nodes whose last reading had fresh compile-cache locks
        self._fp_kb: object = None
        self._fp = 0
        #: one key object per rank, the job log's (a batch's): the judge finds a rank's state by its
        #: key object's identity, so a procs reading names the rank with the object its lines use
        self._keys: dict[tuple[str, int], RankKey] = {}
        #: the same keys by node, then by rank: a procs message's ranks are found without a tuple each
        self._node_ranks: dict[str, dict[int, RankKey]] = {}
        self._node_keys: dict[str, list[RankKey]] = {}  # each node's last batch's keys (seen already)

    def message(self, view: NodeView, msg: Msg, now: float, frame: bytes = b"") -> None:
        """One fresh message of ``view``'s session, received at ``now`` (``frame``: its body as it
        crossed the wire, what a writer process of the job log takes)."""
        h, body = msg.header, msg.body
        self.heard += 1
        if view.adopted is None and self.job.latecomers.generation:
            self._adopt(view, h)
        if view.adopted is not None and h.generation == view.adopted[0]:
            h = dataclasses.replace(h, generation=view.adopted[1])
        # The sender's clock is never compared with ours: an item `age` seconds old when the
        # sender assembled the message, sent (sent - mono) later, is placed at now - both.
        lag = max(0.0, h.sent - h.mono)
        if isinstance(body, Lines):
            self.lines(view, h, body, now - lag, frame)
        elif isinstance(body, Hello):
            view.hostname, view.pid, view.ranks, view.place = body.hostname, body.pid, body.ranks, body.place
            self.events.emit(EventKind.NODE_HELLO, self.job.generation, node=h.node, hostname=body.hostname,
                             ranks=list(body.ranks), agent_version=body.agent_version, place=body.place)
        elif isinstance(body, Heartbeat):
            self.loss_report(view, body.dropped_lines, body.dropped_msgs, body.truncated_lines)
        elif isinstance(body, Status):
            self.status(view, h, body, now, lag)
        elif isinstance(body, Procs):
            self.procs(view, h, body, now, lag)
        elif isinstance(body, Exits):
            for e in body.exits:
                self.exited(h, e.rank, e.exit_code, now - lag - e.d_mono, e.presumed)

    def _adopt(self, view: NodeView, h: Header) -> None:
        """A node first heard in an older generation than the job's, that no relaunch reached, is a member
        of the running generation (:mod:`.latecomers`): said once."""
        joins = self.job.latecomers.adopts(h.node, h.generation)
        if joins is None:
            return
        view.adopted = (h.generation, joins)
        said = (f"node {h.node} joined while generation {joins} runs (its own count: generation {h.generation}): "
                f"its ranks and its launcher's end are generation {joins}'s")
        self.events.emit(EventKind.WARNING, joins, kind="node_adopted", node=h.node, message=said)
        log.warning("%s", said)

    def status(self, view: NodeView, h: Header, body: Status, now: float, lag: float) -> None:
        """A node's state: its view, its launcher's exit (the one report of it), its checkpoint."""
        generation, recovery = self.job.generation, self.job.recovery
        state = NodeStatus.parse(body.state)
        if state is None:
            log.debug("node %s reported a status this version does not know: %r", h.node, body.state)
            state = NodeStatus.NONE
        ended = LauncherExit.from_wire(body.report) if state in (NodeStatus.FINISHED, NodeStatus.FAILED) else None
        if ended is not None:  # the node's launcher exited: the status is its one report (rank -1)
            self.events.emit(EventKind.RANK_EXIT, h.generation, node=h.node, rank=-1, exit_code=ended.code)
        if h.generation != generation and state in (NodeStatus.FINISHED, NodeStatus.FAILED):
            return  # a late word about a generation already replaced
        view.status, view.status_detail, view.generation = state, body.detail, h.generation
        if state is NodeStatus.EVIDENCE_DONE:
            view.evidence, view.evidence_heard = EvidenceReport.from_wire(body.report), self.heard
        elif state is NodeStatus.STOPPED:
            view.stop_report = StopReport.from_wire(body.report)
            if view.stop_report.own_signal and h.generation != generation:
                # an agent of a generation already replaced, ended by us (an srun step's agents
                # at a restart): not a node leaving the job
                view.stop_report = dataclasses.replace(view.stop_report, own_signal=0)
        view.status_since, view.status_heard = now, self.heard
        if state in (NodeStatus.FINISHED, NodeStatus.FAILED):
            view.launcher_exit = None if ended is None else RankExit(RankKey(h.node, -1), ended.code, now - lag)
        if body.checkpoint:
            view.checkpoint = body.checkpoint
            if state is NodeStatus.LAUNCHED and h.generation == 0 == generation:
                recovery.started(body.checkpoint)  # generation 0: each node's own choice at start
        self.loss_report(view, body.dropped_lines, body.dropped_msgs, body.truncated_lines)
        # Capture details carry the node's whole manifest: the event keeps a short form.
        detail = body.detail if len(body.detail) <= 400 else body.detail[:400] + f"... ({len(body.detail)} chars)"
        if recovery.live:  # after job_finished (the last event of a job) nodes only acknowledge the end
            self.events.emit(EventKind.NODE_STATUS, h.generation, node=h.node, state=body.state, detail=detail)

    def procs(self, view: NodeView, h: Header, body: Procs, now: float, lag: float) -> None:
        """A node's process reading: compilers, workers' CPU, cache locks, flight recorder readings."""
        judge = self.job.judge
        if judge is not None and h.generation != self.job.generation:
            judge = None
        activity = self._workers(view, h.seq, body, judge)
        if judge is None:
            return
        key = self._key
        node = h.node
        judge.observe_compilers(
            [CompilerSample(key(node, s.rank), s.pid, s.cpu_seconds, now - lag - s.d_mono)
             for s in body.samples], now, node=node)
        if activity:
            # (by column: a node's 64 rank processes a reading, no record built per process)
            ranks, cpus, states = zip(*activity, strict=True)
            judge.observe_worker_columns(self._keys_of(node, ranks), cpus, list(map("T".__eq__, states)),
                                         [now - lag] * len(ranks), now)
        if body.locks or view.locks or self._lock_nodes:
            # (the job's locks are the nodes' with locks: not a union over every node for
            # every node's reading, 1,024 x 1,024 a second on 1,024 nodes)
            view.locks = set(body.locks)
            (self._lock_nodes.add if view.locks else self._lock_nodes.discard)(h.node)
            judge.observe_cache_locks(sorted(set().union(*(self.nodes[n].locks for n in self._lock_nodes
                                                           if n in self.nodes))), now)
        readings = body.collectives
        if not readings:
            return
        # (by column, in C: ~50 ranks' readings a message on 1,024 nodes, each of a rank whose recorder
        # answered before and without a problem, but for a rank's first reading or a problem)
        read_ranks, problems = list(map(_rank_of, readings)), list(map(_problem_of, readings))
        recorder = view.recorder
        read: Sequence[RankCollectives] = readings
        if any(problems) or set(map(recorder.get, read_ranks)) != {"on"}:
            for rank, problem in zip(read_ranks, problems, strict=True):
                if recorder.get(rank) != "on":  # once read, available (an ending rank stops answering)
                    recorder[rank] = problem or "on"
            read = [c for c, problem in zip(readings, problems, strict=True) if not problem]
            read_ranks = list(map(_rank_of, read))
        if read:  # (the readings of a message at once)
            judge.observe_readings(self._keys_of(node, read_ranks), list(map(_groups_of, read)),
                                   list(map(operator.sub, itertools.repeat(now - lag), map(_age_of, read))))

    def _workers(self, view: NodeView, seq: int, body: Procs, judge: JudgeLike | None) -> Sequence[WorkerActivity]:
        """The node's rank processes after reading ``seq`` (kept in ``view`` for the readings that
        will refer to it), and those the judge must take: what changed since what it took last."""
        states = view.procs_states
        base = states.get(body.same_as) if body.same_as >= 0 else None
        if base is None and body.same_as >= 0:
            self.counters.procs_unresolved += 1  # it refers to one sent to a coordinator before us
            base = states.get(view.procs_seq)
        pids, active = (dict(base[0]), dict(base[1])) if base is not None else ({}, {})
        pids.update(body.workers)
        active.update(zip(map(_rank_of, body.activity), body.activity, strict=True))
        for r in body.gone:
            pids.pop(r, None)
            active.pop(r, None)
        if body.workers or body.gone:
            view.worker_pids = pids
        latest = states.get(view.procs_seq)
        if body.same_as >= 0:  # the readings from the one it refers to on are the ones to keep
            for s in [s for s in states if s < body.same_as]:
                del states[s]
        if len(states) >= MAX_PROCS_STATES:
            del states[min(states)]
        states[seq] = (pids, active)
        took = view.procs_judge
        view.procs_seq = seq
        if judge is None:
            return ()
        view.procs_judge = judge
        # The judge holds what the newest reading said: a whole reading, or one that refers to it,
        # says what changed; one that refers to an older one (acks late) is compared with it.
        if body.same_as < 0 or (base is latest and took is judge):
            return body.activity
        if took is not judge or latest is None:  # a judge that took none of them (a new generation's)
            return list(active.values())
        held = latest[1]
        return [a for r, a in active.items() if held.get(r) is not a]

    def _keys_of(self, node: str, ranks: Sequence[int]) -> list[RankKey]:
        """The keys of ``node``'s ``ranks`` (:meth:`_key` of each), found in C."""
        of_node = self._node_ranks.get(node)
        found: list[RankKey | None] = list(map(of_node.get, ranks)) if of_node is not None else [None] * len(ranks)
        if not all(found):  # (not ``None in found``: that compares each key with None, a Python call each)
            found = [k if k is not None else self._key(node, r) for k, r in zip(found, ranks, strict=True)]
        return cast("list[RankKey]", found)

    def _key(self, node: str, rank: int) -> RankKey:
        """The key of ``node``'s ``rank``: the one its lines came with, else one made once."""
        k = self._keys.get((node, rank))
        if k is None:
            if len(self._keys) >= MAX_KEYS:  # (ranks a node never had: a bound, not a case)
                self._keys.clear()
                self._node_ranks.clear()
            k = self._keys[(node, rank)] = RankKey(node, rank)
            self._node_ranks.setdefault(node, {})[rank] = k
        return k

    def exited(self, h: Header, rank: int, code: int, t_mono: float, presumed: bool = False) -> None:
        """A rank of node ``h.node`` exited (its launcher's exit comes in its status); ``presumed``: its
        code 0 is presumed from its record of a normal interpreter exit (``protocol.ExitInfo``)."""
        judge = self.job.judge
        if judge and h.generation == self.job.generation:
            judge.observe_exit(RankExit(RankKey(h.node, rank), code, t_mono, presumed))
        said = {"presumed": True} if presumed else {}
        self.events.emit(EventKind.RANK_EXIT, h.generation, node=h.node, rank=rank, exit_code=code, **said)

    def lines(self, view: NodeView, h: Header, body: Lines, t_mono: float, frame: bytes = b"") -> None:
        """One batch: the job's log (:class:`.JobLog`), then the judge. Per rank and per match, never
        per line: the agent joined each rank's lines and classified them on its own CPU.

        ``t_mono``: our monotonic time of the sender's ``mono`` (ages are relative to it).
        """
        # Behind the nodes, the tails (read by nothing on the verdict's path) are the first work shed.
        shed = self.job.behind >= SHED_BEHIND
        # (a body of held progress rows alone has no line for the job's log)
        logged = body.logged
        rank_keys, n = self.joblog.write(h, body, not shed, frame) if body.ranks or logged else ([], 0)
        if self._node_keys.get(h.node) is not rank_keys:  # (the job log gives a node's ranks one list)
            self._node_keys[h.node] = rank_keys
            for k in rank_keys:
                self._keys[(k.node, k.rank)] = k
                self._node_ranks.setdefault(k.node, {})[k.rank] = k
        if logged is not None:  # decoded for the judge alone: its ranks are the judged ones of the batch's
            rank_keys = list(map(rank_keys.__getitem__, logged.judged))
        if shed:
            self.counters.tail_lines_shed += n
        view.lines += n
        self.counters.lines += n
        judge = self.job.judge
        if judge is None or view.generation != self.job.generation:
            return
        if body.blocks:  # the lines around a failure, that its cause is read from (Judge.observe_blocks)
            judge.observe_blocks(block_lines(body, rank_keys, t_mono, h.wall))
        if body.classified and body.classified == self._kb_fingerprint(judge):
            try:
                judge.observe_columns(line_columns(body, rank_keys, t_mono, h.wall,
                                                   functools.partial(self._key, h.node)))
                return
            except ValueError as exc:  # a signature we do not know: classify here instead
                log.debug("classifying a batch of %s here: %s", h.node, exc)
        # Not classified by the agent (no knowledge base, another table, an older judge): the judge
        # classifies it, line by line (every rank's: a body decoded for the judge alone is decoded whole).
        self.counters.unclassified_batches += 1
        if logged is not None:
            whole = decode_body(Kind.LINES, frame)
            assert isinstance(whole, Lines)
            body, rank_keys = whole, self._node_keys[h.node]
        judge.observe_lines(body_lines(body, rank_keys, t_mono, h.wall))

    def _kb_fingerprint(self, judge: JudgeLike) -> int:
        """The fingerprint of ``judge``'s knowledge base (0: it has none), computed once per table."""
        kb = judge.kb
        if kb is None:
            return 0
        if self._fp_kb is not kb:
            from neuron_watch.diagnosis.classify import kb_fingerprint

            self._fp_kb, self._fp = kb, kb_fingerprint(kb)
        return self._fp

    def loss_report(self, view: NodeView, lines: int, msgs: int, truncated: int = 0) -> None:
        """What the node's agent says it dropped or cut: told once per new count."""
        generation = self.job.generation
        if lines > view.reported_dropped_lines or msgs > view.reported_dropped_msgs:
            if self.job.recovery.live:
                self.events.emit(EventKind.AGENT_DROPPED, generation, node=view.node, lines=lines, messages=msgs)
            else:  # job_finished is the last event; the loss still counts in status.json
                log.warning("node %s reported %d line(s) / %d message(s) it could not buffer, after the job's end",
                            view.node, lines, msgs)
        view.reported_dropped_lines = max(view.reported_dropped_lines, lines)
        view.reported_dropped_msgs = max(view.reported_dropped_msgs, msgs)
        if truncated > view.reported_truncated_lines:
            self.events.emit(EventKind.LINES_TRUNCATED, generation, node=view.node, lines=truncated,
                             limit_bytes=MAX_LINE_BYTES, rank_line_bytes=RANK_LINE_BYTES)
            view.reported_truncated_lines = truncated
