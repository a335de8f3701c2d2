"""Scale benchmark: one coordinator judging 1,024 simulated nodes x 64 ranks. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_scale.py [--rates 1,10] [--seconds 20] [--trials 5]
        [--nodes 1024] [--ranks 64] [--procs 2] [--batch-age 0.05] [--profile N] [--skip replay|realtime]
                                                                   # ~4 min with the defaults

65,536 rank streams at a steady ``--rates`` lines/s per rank (1 and 10: 65,536 and 655,360
lines/s in all), for ``--seconds`` after ``--warmup``; the coordinator's CPU (cores: CPU s / wall
s), its RSS (peak, end), ingest offered vs achieved and the backlog, the verdict latency of hangs
injected at known times, and what one full verdict over every rank costs.

What is real:

* the coordinator, in this process, configured as ``neuron-watch coordinator`` configures it
  (:func:`~neuron_watch.job.coordinator.coordinator_settings` of the default options) and driven by the
  same loop as :meth:`Coordinator.serve` (``poll(0.05)``, ``tick``, ``coordinator.json`` every
  second): its ROUTER socket, the HMAC check, decoding, sequence tracking, acks, challenges,
  ``merged.log``, the per-rank tails, ``status.json`` and ``events.jsonl``, and the real judge with
  the packaged knowledge base;
* every simulated node's :class:`~neuron_watch.node.agent_link.AgentLink`: its own DEALER socket and
  TCP connection, session, sequence numbers, bounded resend buffer, signing, the challenge/echo
  handshake, acks, resends after 3 s without an ack, heartbeats when idle;
* the batches: built by the real agent path (:meth:`LineBatches.batch`: joined per rank, classified
  with the packaged knowledge base, :func:`~neuron_watch.diagnosis.classify.compact_matches`, the judge's share
  of steady progress paced as at the job's size: node/progress_pace.py), once, for one node's ranks, each
  batch at its flush time; a line's text names its *local* rank only, so another node's batch is the same body
  with its global ranks (which the agent would build from the same lines: checked at start-up).

What is simulated:

* the ranks' lines: every rank prints ``rate`` lines/s, each one a training step line (every line a
  match: the coordinator's worst case), and every 8th round a CCOM RX warning on every 8th rank,
  every 16th round a compiler line and its PASS on every 16th rank (the mix of ``bench_wire``);
  the lines of ``--cycle`` rounds are pre-built and sent again and again with a fresh header,
  sequence number and signature (the step numbers repeat after a cycle: in the real-time run, a
  rank's loop beginning again every 2 s; the replay's cycle covers its fill and its window, so its
  steps only grow, as in training);
* the agents' timing: a node sends a batch every ``period`` seconds, the agents' batch age (50 ms)
  as their 20 ms loop sees it, nodes spread evenly over the period; the ``procs`` message every
  second (the agents' sampling interval) with the node's 64 rank processes and their CPU, and the
  flight recorder readings of the ranks read since the last one (each rank every 5 s, two process
  groups), packed directly in the wire layout (checked equal to ``encode_body`` at start-up),
  referring to the node's newest acknowledged procs message as the agents' readings do; every rank
  trains, so every row of it changed and travels (a hung or idle job's readings say nothing);
* the hang: one rank of one node prints the Neuron runtime's "suspected hang in collectives" line at
  a known time; it goes in that node's next batch, built through the real agent path. After each
  verdict the judge is replaced by a fresh one and the job set back to running (no recovery here).

``--procs`` processes run ``--nodes / --procs`` nodes each (one zmq context each, nice 10); the
machine has 2 cores shared with other work, so the simulated nodes and the coordinator compete for
them: the node processes' CPU, how far they fell behind their schedule and the load average are
printed with the figures. The replay (first, in this process) needs no real time: it hands every
node's frames of a few simulated seconds to the coordinator and measures its CPU per simulated
second, i.e. the cores a coordinator needs for the job's traffic. Its first simulated seconds (one,
or as many as it takes every node to send a batch) fill the judge and end with a status.json
written (not measured), as in a coordinator that has run a while: the judge holds every rank, its
state is frozen (heapfreeze.py), the window's status.json is one of steady training, ranks.json
(every 30 s) is not in it.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import heapq
import io
import json
import math
import multiprocessing as mp
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event as EventType
from typing import Any

import msgpack
import zmq
from bench_wire import HANG_LINE, JOB, SECRET, _pct, round_lines  # tests/benchmarks is on sys.path: run as a script

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import JobState, Label, LogLine, RankKey
from neuron_watch.job.coordinator import Coordinator, coordinator_settings
from neuron_watch.job.linewriter import JobLogFactory
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.line_batches import LineBatches

try:
    from neuron_watch.node.line_batches import URGENT_SETTLE
except ImportError:  # a tree from before the rule, back to back
    URGENT_SETTLE = 0.0
from neuron_watch.node.link_settings import LinkSettings
from neuron_watch.node.urgent import is_urgent, urgent_signatures
from neuron_watch.outputs.status import FULL_RANKS, summarise
from neuron_watch.runtime import default_judge_factory, line_writer
from neuron_watch.wire.protocol import (
    Header,
    Kind,
    Lines,
    Procs,
    batch_age_at,
    decode_body,
    encode_body,
    procs_every_at,
    progress_pace_at,
)
from neuron_watch.wire.transport import AgentSocket

#: the agents' loop turn (supervisor.py: poll/sleep 0.02 s) that checks the batch age
AGENT_LOOP = 0.02
SAMPLE_EVERY = 1.0  # agent.py SAMPLE_EVERY: a procs message per node per second
PROBE_EVERY = 5.0  # rank_probe.py POLL_EVERY: each rank's flight recorder read every 5 s
READY_TIMEOUT = 300.0
#: the node's name on the lines of a simulated batch (the wire carries the sender's, in the header)
LINE_NODE = "sim"


@dataclass(frozen=True)
class Plan:
    """One run's shape, the same in every process."""

    nodes: int
    ranks: int
    rate: float  # lines/s per rank
    period: float  # seconds between two batches of one node
    cycle: int  # rounds of lines pre-built per node (one line per rank a round)
    warmup: float
    seconds: float
    drain: float
    hangs: tuple[tuple[float, int, int], ...]  # (seconds after go, node, local rank)
    collectives: bool = True
    procs_every: float = SAMPLE_EVERY  # seconds between two procs messages of a node


def batch_period(rate: float, ranks: int, batch_age: float) -> float:
    """Seconds between two batches of a node whose ranks print ``rate`` lines/s each: the agent's
    20 ms loop flushes at its first turn where the oldest pending line is ``batch_age`` old, and
    that line came one inter-arrival time after the previous flush."""
    return AGENT_LOOP * math.ceil((batch_age + 1.0 / (rate * ranks)) / AGENT_LOOP - 1e-9)


def node_name(n: int) -> str:
    return f"node{n:04d}"


def template_rows(plan: Plan) -> list[list[tuple[int, str, float]]]:
    """The pre-built cycle cut into batches: per batch ``(local rank, text, age at the flush)``.

    Rank ``i`` prints its line of round ``k`` at ``(k + i / ranks) / rate`` seconds (ranks spread
    evenly over a round); a batch holds what was printed during one period."""
    timed = []
    for k in range(plan.cycle):
        for i, text in round_lines(k, 0, plan.ranks, local=True):
            timed.append(((k + i / plan.ranks) / plan.rate, i, text))
    span = plan.cycle / plan.rate
    n = max(1, round(span / plan.period))
    batches: list[list[tuple[int, str, float]]] = [[] for _ in range(n)]
    for t, i, text in timed:
        b = min(n - 1, int(t / span * n))
        flush = (b + 1) * span / n
        batches[b].append((i, text, flush - t))
    return [b for b in batches if b]


def shifted(body: Lines, offset: int) -> Lines:
    """``body`` of node 0's ranks as another node's: the same lines, ranks + ``offset``."""
    return Lines(tuple(r._replace(rank=r.rank + offset) for r in body.ranks), body.matches, body.classified,
                 body.progress, body.blocks, body.judged, tuple(g._replace(rank=g.rank + offset) for g in body.held))


def template_bodies(plan: Plan, batches: list[list[tuple[int, str, float]]], build: LineBatches, t0: float,
                    wall0: float, offset: int = 0) -> list[Lines]:
    """The cycle's bodies as node 0's agent builds them, each at its flush time (the judge's share of
    steady progress paced as at the job's size: protocol.progress_pace_at)."""
    pace = progress_pace_at(plan.nodes)
    span = plan.cycle / plan.rate / len(batches)
    out = []
    for j, b in enumerate(batches):
        now = t0 + (j + 1) * span
        wall = wall0 + now - t0
        out.append(build.batch(rows_of(b, offset, now, wall), now, wall, pace))
    return out


def rows_of(batch: list[tuple[int, str, float]], offset: int, now: float, wall: float) -> list[LogLine]:
    return [LogLine(RankKey(LINE_NODE, offset + i), text, now - age, wall - age) for i, text, age in batch]


#: the texts of a simulated node's flight recorder groups, in the order encode_body lists them (the
#: groups' names, then their ops, states and shapes: protocol._procs_to_wire)
GROUP_TEXTS = ["0", "1", "nccl:all_reduce", "nccl:all_gather", "completed", "[[2177]] Float", "[[512]] Float"]


def procs_wire(n: int, ranks: int, t: float, turn: int, collectives: bool, span: int = 1,
               same_as: int = -1) -> list[Any]:
    """Node ``n``'s procs body in the wire layout (protocol._procs_to_wire of a Procs: by column): its
    rank processes and their CPU, and the flight recorder readings of the ranks read in the ``span``
    seconds since its last one (the agent holds readings of a bigger job: procs_every_at).
    ``same_as``: the node's acknowledged procs message it refers to (the agents' ProcReadings; -1:
    none yet, a whole reading). Every rank trains: its CPU and its collectives' progress move from
    one reading to the next, so every row is one that changed."""
    base = n * ranks
    workers = [[base + i for i in range(ranks)], [10_000 + i for i in range(ranks)],
               [round(t * 0.9 + i, 2) for i in range(ranks)], ["R"] * ranks]
    delta = [same_as, []]
    read = [base + i for i in range(ranks)
            if collectives and any((i + turn * span + k) % int(PROBE_EVERY) == 0 for k in range(span))]
    if not read:
        return [[], [], workers, [[], [], [], [], [], *([[]] * 9)], delta]
    seq = 1000 + int(t * 4)  # two collectives a step; every rank agrees on op and shape per sequence id
    k = len(read)
    readings = [GROUP_TEXTS, read, [0.1] * k, [""] * k, [2] * k,
                [0, 1] * k, [seq, seq // 2] * k, [seq, seq // 2] * k, [seq, seq // 2] * k, [2, 3] * k, [4, 4] * k,
                [1.8e9 + t] * (2 * k), [seq, seq // 2] * k, [5, 6] * k]
    return [[], [], workers, readings, delta]


def check_procs_layout() -> None:
    """The directly packed procs body is what ``encode_body`` makes of the same Procs."""
    for same_as in (-1, 5):
        for collectives in (True, False):
            frame = msgpack.packb(procs_wire(3, 8, 12.5, 0, collectives, same_as=same_as), use_bin_type=True)
            body = decode_body(Kind.PROCS, frame)
            if not isinstance(body, Procs) or frame != encode_body(body) or len(body.collectives) != 2 * collectives:
                raise SystemExit("the simulated procs body differs from encode_body's: update procs_wire")


def acked_procs(sent: list[int], outbox_base: int) -> int:
    """The newest of a node's procs messages (``sent``: their seqs) the coordinator acknowledged:
    what its next reading refers to (-1: none)."""
    acked = [s for s in sent if s < outbox_base]
    del sent[:max(0, len(acked) - 1)]
    return acked[-1] if acked else -1


@dataclass
class FarmReport:
    lines_at_end: int = 0  # lines queued up to the end of the window
    msgs_at_end: int = 0
    window_lines: int = 0
    window_msgs: int = 0
    sent: int = 0
    resent: int = 0
    resend_rounds: int = 0
    dropped_lines: int = 0
    shed_at_end: int = 0
    shed_lines: int = 0  # left out of the batches while the coordinator was behind (their judged parts sent)
    unacked_at_end: int = 0  # lines not acknowledged when the window closed
    unacked_after: int = 0  # ... and after the drain
    cpu: float = 0.0  # CPU seconds of this process in the window
    late: float = 0.0  # how far behind its schedule the process fell (seconds, worst)
    hangs: list[float] = field(default_factory=list)  # when each hang line was handed to the link


def farm(first: int, count: int, plan: Plan, endpoint: str, ready: Barrier, go: Synchronized[float],
         q: mp.Queue[tuple[str, Any]], leave: EventType) -> None:
    """Nodes ``first`` .. ``first + count - 1``: one AgentLink each, sending the pre-built batches
    on schedule from ``go`` (wall time, set by the coordinator's process) until the window ends.
    At a lower priority than the coordinator (nice 10): on a cluster the agents run on other hosts."""
    os.nice(10)
    kb = default_knowledge_base()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    ctx.setsockopt(zmq.LINGER, 0)
    ctx.set(zmq.MAX_SOCKETS, count + 64)
    settings = LinkSettings()
    # Only the first node's link classifies (it builds every batch: the templates and the hang's);
    # the others send pre-built bodies (a knowledge base's fingerprint per link costs ~5 ms).
    links = {n: AgentLink(endpoint, SECRET, job=JOB, node=node_name(n), session=new_session(time.time()),
                          settings=settings, socket=AgentSocket(endpoint, ctx=ctx), kb=kb if n == first else None)
             for n in range(first, first + count)}
    batches = template_rows(plan)
    now, wall = time.monotonic(), time.time()
    scratch = links[first]
    base_bodies = template_bodies(plan, batches, scratch.batches, now, wall)
    # The agent builds another node's batch from the same lines as node 0's body with its ranks (a
    # fresh builder, paced as the template's: its steady-progress pacing keeps state between batches):
    for n in (first, first + count - 1):
        fresh = LineBatches(settings.batch_lines, scratch.counters, kb)
        real = template_bodies(plan, batches[:1], fresh, now, wall, offset=n * plan.ranks)[0]
        if encode_body(real) != encode_body(shifted(base_bodies[0], n * plan.ranks)):
            raise SystemExit(f"node {n}'s batch differs from node 0's with shifted ranks: update the simulation")
    bodies = {n: [encode_body(shifted(b, n * plan.ranks)) for b in base_bodies] for n in links}
    n_lines = [b.n_lines for b in base_bodies]
    # The agent flags a body that may make a verdict (node/urgent.py): the coordinator takes it first.
    urgent_ids = urgent_signatures(kb)
    urgent_of = [is_urgent(b, urgent_ids) for b in base_bodies]
    # While the coordinator's acks say it is behind, a node sends each batch's judged part alone
    # (AgentLink.to_send, as flush_lines does): built when first needed, per node and batch.
    shifted_bodies = {n: [shifted(b, n * plan.ranks) for b in base_bodies] for n in links}
    for n, link in links.items():
        link.hello(f"host{n}", 40_000 + n, range(n * plan.ranks, (n + 1) * plan.ranks), now, wall)
    # The handshake: hello, challenge, resend echoing the coordinator's session, ack.
    end = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < end and any(x.coordinator_session is None or len(x.outbox) for x in links.values()):
        for link in links.values():
            link.tick(time.monotonic(), time.time())
        time.sleep(0.01)
    ready.wait(READY_TIMEOUT)
    while go.value == 0.0:
        time.sleep(0.001)
    t0 = go.value
    window = (t0 + plan.warmup, t0 + plan.warmup + plan.seconds)
    rep = FarmReport()
    hangs = sorted((t0 + off, node, rank) for off, node, rank in plan.hangs if node in links)
    pending_hang: dict[int, int] = {}
    # A node's agent sends the batch of an urgent line at its next loop turn (LineBatches: an urgent
    # line's batch is due at once), with the lines read before it; the rest of that period's lines go at
    # the batch's time. (hasattr: a tree from before the rule, back to back, waits for the batch's age.)
    early_flush = hasattr(scratch.batches, "urgent_since")
    next_batch: dict[int, float] = {}  # each node's next batch's due time (its turn is in the heap)
    rest_of: dict[int, list[tuple[int, str, float]]] = {}  # a node's lines of the period not yet sent
    early: list[tuple[float, int]] = []  # (when its agent reads the hang line, node): an early batch due
    # (due wall time, kind 0 = batch / 1 = procs, node, turn; 2 = an urgent line's early batch, from `early`)
    heap = [(t0 + plan.period * (n / plan.nodes), 0, n, 0) for n in links]
    heap += [(t0 + plan.procs_every * (n / plan.nodes), 1, n, 0) for n in links]
    next_batch.update({n: due for due, kind, n, _turn in heap if kind == 0})
    procs_sent: dict[int, list[int]] = {n: [] for n in links}  # each node's procs messages' seqs
    heapq.heapify(heap)
    cpu0 = mark = 0.0
    msgs_mark = 0
    in_window = False

    def send_lines(link: AgentLink, n: int, k: int, rows: list[LogLine] | None, now: float, wall: float) -> None:
        """Node ``n``'s batch: the pre-built body of turn ``k``, or one built of ``rows`` by the agent path."""
        whole: Lines | None = None
        body, lines, urgent = bodies[n][k], n_lines[k], urgent_of[k]
        if rows is not None:
            whole = scratch.batches.batch(rows, now, wall)
            body, lines, urgent = encode_body(whole), whole.n_lines, is_urgent(whole, urgent_ids)
        rep.lines_at_end += lines
        shed0 = getattr(link.counters, "bulk_lines_shed", 0)  # (getattr: a tree from before the rule, back to back)
        if hasattr(link, "to_send") and (link.coordinator_behind or shed0):  # (its cost only when it may apply)
            part = link.to_send(whole if whole is not None else shifted_bodies[n][k])
            if part is None or part.shed:  # (the whole body goes when the rule sheds nothing)
                rep.shed_lines += link.counters.bulk_lines_shed - shed0
                body, lines = (b"", 0) if part is None else (encode_body(part), part.n_lines)
        if body:
            link.outbox.add(Header(kind=Kind.LINES, job=JOB, node=link.node, session=link.session, generation=0,
                                   seq=0, mono=now, wall=wall, urgent=urgent), body, lines)

    while heap:
        due, kind, n, turn = heap[0]
        wall = time.time()
        if not in_window and wall >= window[0]:
            in_window, cpu0, mark = True, time.process_time(), float(rep.lines_at_end)
            msgs_mark = rep.msgs_at_end
        if wall >= window[1]:
            break
        while hangs and hangs[0][0] <= wall:
            _at, node, rank = hangs.pop(0)
            pending_hang[node] = rank
            rep.hangs.append(wall)
            if early_flush:  # its batch goes at the agent's first loop turn URGENT_SETTLE after it
                early.append((wall + AGENT_LOOP * math.ceil(URGENT_SETTLE / AGENT_LOOP + 1e-9), node))
        if early and early[0][0] <= wall:
            # (ahead of the nodes' overdue batches: each node's agent is its own process, not behind this one's)
            due, kind, n, turn = early[0][0], 2, early.pop(0)[1], 0
        elif due > wall:
            time.sleep(min(due - wall, 0.005, *(t - wall for t, _n in early[:1])))
            continue
        else:
            heapq.heappop(heap)
        link = links[n]
        now = time.monotonic()
        rep.late = max(rep.late, wall - due)
        if kind == 2 and n not in pending_hang:
            pass  # its batch came due first and took the hang line
        elif kind == 2:
            k = next((t for d, kd, m, t in heap if kd == 0 and m == n), 0) % len(bodies[n])
            ahead = next_batch[n] - wall  # the period's lines printed by now: those older than this at its flush
            read = [(i, text, age - ahead) for i, text, age in batches[k] if age >= ahead]
            rest_of[n] = [r for r in batches[k] if r[2] < ahead]
            first = rows_of(read, n * plan.ranks, now, wall)
            first.append(LogLine(RankKey(LINE_NODE, n * plan.ranks + pending_hang.pop(n)), HANG_LINE, now, wall))
            send_lines(link, n, k, first, now, wall)
        elif kind == 0:
            k = turn % len(bodies[n])
            rows: list[LogLine] | None = None
            if n in rest_of:
                rows = rows_of(rest_of.pop(n), n * plan.ranks, now, wall)
            elif n in pending_hang:
                rows = rows_of(batches[k], n * plan.ranks, now, wall)
                rows.append(LogLine(RankKey(LINE_NODE, n * plan.ranks + pending_hang.pop(n)), HANG_LINE, now, wall))
            if rows != []:
                send_lines(link, n, k, rows, now, wall)
            heapq.heappush(heap, (due + plan.period, 0, n, turn + 1))
            next_batch[n] = due + plan.period
        else:
            body = msgpack.packb(procs_wire(n, plan.ranks, wall - t0, turn, plan.collectives,
                                            round(plan.procs_every), acked_procs(procs_sent[n], link.outbox.base)),
                                 use_bin_type=True)
            procs_sent[n].append(link.outbox.add(Header(kind=Kind.PROCS, job=JOB, node=link.node, session=link.session,
                                                        generation=0, seq=0, mono=now, wall=wall), body, 0).seq)
            heapq.heappush(heap, (due + plan.procs_every, 1, n, turn + 1))
        rep.msgs_at_end += 1
        link.tick(now, wall)  # sends what is due, takes acks and challenges, resends after 3 s
    rep.cpu = time.process_time() - cpu0
    rep.window_lines, rep.window_msgs = rep.lines_at_end - int(mark), rep.msgs_at_end - msgs_mark
    rep.shed_at_end = rep.shed_lines
    rep.unacked_at_end = sum(x.outbox.lines for x in links.values())
    q.put(("end", rep.lines_at_end))
    # Drain: keep ticking (acks, resends) until everything is acknowledged or the drain time passed.
    end = time.monotonic() + plan.drain
    while time.monotonic() < end and any(len(x.outbox) for x in links.values()):
        for link in links.values():
            link.tick(time.monotonic(), time.time())
        time.sleep(0.02)
    for x in links.values():
        s = x.summary()
        rep.sent += int(str(s["sent"]))
        rep.resent += int(str(s["resent"]))
        rep.resend_rounds += int(str(s["resend_rounds"]))
        rep.dropped_lines += x.outbox.dropped_lines
        rep.unacked_after += x.outbox.lines
    q.put(("done", rep))
    # The connections stay up until the coordinator has closed: a thousand peers leaving at once
    # while it still sends acks aborted the coordinator once in libzmq 4.3.5 (see docs/multinode.md).
    leave.wait(READY_TIMEOUT)
    for x in links.values():
        x.close()
    ctx.term()


class _Captured:
    """A link's socket that keeps what it sends, for the replay (nothing is received)."""

    def __init__(self, out: list[tuple[bytes, list[bytes]]], routing_id: bytes) -> None:
        self.out, self.routing_id = out, routing_id

    def send(self, frames: list[bytes]) -> bool:
        self.out.append((self.routing_id, frames))
        return True

    def recv(self) -> list[bytes] | None:
        return None

    def close(self) -> None:
        pass


def capacity(plan: Plan, seconds: int, profile: int = 0) -> dict[str, Any]:
    """What the coordinator's CPU must do for ``seconds`` of the whole job's traffic, in this
    process, without sockets or real time: every node's AgentLink sends into a list, the frames
    go to :meth:`Coordinator.handle` in the order of their simulated send times, and
    :meth:`Coordinator.tick` runs every 50 ms of simulated time (acks: signed, encoded and handed
    to the ROUTER, which knows no such peer; verdicts; status.json). The first simulated seconds
    (until every node sent a batch: the judge then holds every rank) only fill the judge. CPU
    seconds per simulated second = the cores a coordinator needs, however busy the machine (the
    real-time run's simulated nodes compete with it for 2 shared cores)."""
    config = WatchConfig()
    kb = default_knowledge_base()
    batches = template_rows(plan)
    with tempfile.TemporaryDirectory() as d:
        rss0 = rss_mb()
        writer_cpu0 = children_cpu()
        c = Coordinator("127.0.0.1:0", SECRET, d, job=JOB, judge_factory=default_judge_factory(config),
                        settings=coordinator_settings(config, None), job_log=JOB_LOG)
        out: list[tuple[bytes, list[bytes]]] = []
        t0, wall0 = time.monotonic(), time.time()
        links = {n: AgentLink(c.endpoint, SECRET, job=JOB, node=node_name(n), session=new_session(wall0),
                              socket=_Captured(out, b"n%d" % n))  # type: ignore[arg-type]
                 for n in range(plan.nodes)}
        scratch = AgentLink(c.endpoint, SECRET, job=JOB, node="template", session=1,
                            socket=_Captured([], b""), kb=kb)  # type: ignore[arg-type]
        base = template_bodies(plan, batches, scratch.batches, t0, wall0)
        bodies = {n: [encode_body(shifted(b, n * plan.ranks)) for b in base] for n in links}
        n_lines = [b.n_lines for b in base]
        for n, link in links.items():  # as after the handshake: the agents echo the coordinator's session
            link.coordinator_session = c.session
            link.hello(f"host{n}", 40_000 + n, range(n * plan.ranks, (n + 1) * plan.ranks), t0, wall0)
            link.tick(t0, wall0)
        for rid, frames in out:
            c.handle(rid, frames, t0)
        out.clear()
        procs_sent: dict[int, list[int]] = {n: [] for n in links}  # each node's procs messages' seqs
        cpu = {"lines": 0.0, "procs": 0.0, "tick": 0.0}
        prof = cProfile.Profile(time.process_time) if profile else None  # CPU time: the machine is shared
        msgs = {"lines": 0, "procs": 0}
        nbytes = {"lines": 0, "procs": 0}  # on the wire: the three frames (header, body, signature)
        lines = 0
        next_tick = t0
        fill = max(1, math.ceil(plan.period))
        for second in range(fill + seconds):
            # node n's j-th batch at period * (n / nodes + j), its procs at n / nodes + second
            sends = [(t0 + plan.period * (n / plan.nodes + j), 0, n, j) for n in links
                     for j in range(math.ceil(second / plan.period - n / plan.nodes),
                                    math.ceil((second + 1) / plan.period - n / plan.nodes))]
            every = plan.procs_every
            sends += [(t0 + every * (n / plan.nodes + j), 1, n, j) for n in links
                      for j in range(math.ceil(second / every - n / plan.nodes),
                                     math.ceil((second + 1) / every - n / plan.nodes))]
            sends.sort()
            stamps = []
            for t, kind, n, k in sends:  # what every link sends this second (not measured)
                link = links[n]
                w = wall0 + t - t0
                if kind == 0:
                    body, count = bodies[n][k % len(base)], n_lines[k % len(base)]
                    h = Header(kind=Kind.LINES, job=JOB, node=link.node, session=link.session, generation=0, seq=0,
                               mono=t, wall=w)
                else:
                    body = msgpack.packb(procs_wire(n, plan.ranks, t - t0, k, plan.collectives,
                                                    round(plan.procs_every),
                                                    acked_procs(procs_sent[n], link.outbox.base)), use_bin_type=True)
                    h, count = Header(kind=Kind.PROCS, job=JOB, node=link.node, session=link.session, generation=0,
                                      seq=0, mono=t, wall=w), 0
                seq = link.outbox.add(h, body, count).seq
                if kind == 1:
                    procs_sent[n].append(seq)
                link.tick(t, w)
                link.outbox.ack(link.outbox.next_seq - 1)  # the coordinator's ack (its own cost is in tick)
                link.tick(t, w)  # the link sees its outbox empty: no resend round after 3 s without acks
                stamps.append((t, "lines" if kind == 0 else "procs", count))
            measured = second >= fill
            if prof is not None and measured:
                prof.enable()
            for (t, what, count), (rid, frames) in zip(stamps, out, strict=True):
                while next_tick <= t:
                    c0 = time.process_time()
                    c.tick(next_tick)
                    if measured:
                        cpu["tick"] += time.process_time() - c0
                    next_tick += 0.05
                c0 = time.process_time()
                c.handle(rid, frames, t)
                if measured:
                    cpu[what] += time.process_time() - c0
                    msgs[what] += 1
                    nbytes[what] += sum(map(len, frames))
                    lines += count
            if prof is not None and measured:
                prof.disable()
            out.clear()
            if second == fill - 1:
                # A coordinator that has run a while: its status book holds every rank and ranks.json
                # (every 30 s) is not due; the window then has the status.json of steady training.
                c.write_status(next_tick)
        judge = c.judge
        assert judge is not None
        heap = getattr(c, "heap", None)  # (the same benchmark measures a tree from before the freeze)
        freeze = (heap.frozen_ranks, heap.last_freeze_s) if heap is not None else (0, 0.0)
        figures = full_verdict(c, next_tick)
        figures.update({"cpu": cpu, "msgs": msgs, "bytes": nbytes, "lines": lines, "seconds": seconds, "fill": fill,
                        "rss_mb": rss_mb() - rss0, "ingested": c.counters.lines, "nodes": plan.nodes,
                        "unclassified": c.counters.unclassified_batches,
                        "refused": c.counters.bad_total() + c.counters.duplicates + c.counters.early,
                        "freeze": freeze, "load": os.getloadavg()[0]})
        c.close()  # the writer process writes what is queued, leaves and is reaped: its CPU is then ours
        figures.update(writer_cpu=children_cpu() - writer_cpu0, merged_shed=c.counters.merged_lines_shed)
    if prof is not None:
        out_text = io.StringIO()
        pstats.Stats(prof, stream=out_text).sort_stats("tottime").print_stats(profile)
        figures["profile"] = out_text.getvalue()
    return figures


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (the job log's writer process)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


#: who keeps merged.log and the tails (--job-log): the composition root's writer process, or None (here)
JOB_LOG: JobLogFactory | None = None


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run(plan: Plan, procs: int, profile: int) -> dict[str, Any]:
    """One rate: the coordinator here, ``procs`` farms of simulated nodes; returns the figures."""
    config = WatchConfig()
    factory = default_judge_factory(config)
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        c = Coordinator("127.0.0.1:0", SECRET, d, job=JOB, judge_factory=factory, job_log=JOB_LOG,
                        settings=coordinator_settings(config, None))
        q: mp.Queue[tuple[str, Any]] = mp.Queue()
        ready = mp.Barrier(procs + 1)
        go: Synchronized[float] = mp.Value("d", 0.0)  # type: ignore[assignment]
        leave = mp.Event()
        per = -(-plan.nodes // procs)
        ps = [mp.Process(target=farm, args=(k * per, min(per, plan.nodes - k * per), plan, c.endpoint, ready, go, q,
                                           leave))
              for k in range(procs) if k * per < plan.nodes]
        for p in ps:
            p.start()
        # Serve while the nodes build their batches and shake hands (challenges, acks).
        t_build = time.monotonic()
        arrived = 0
        while arrived < len(ps):
            c.poll(0.05)
            c.tick(time.monotonic())
            if ready.n_waiting == len(ps):
                ready.wait(READY_TIMEOUT)
                arrived = len(ps)
            elif time.monotonic() - t_build > READY_TIMEOUT or not all(p.is_alive() for p in ps):
                # (the node processes wait at the barrier: stopped and reaped here, not left to wait it out)
                for p in ps:
                    p.terminate()
                for p in ps:
                    p.join(10)
                c.close()
                raise SystemExit(f"the node processes did not get ready within {READY_TIMEOUT:g} s (--ready-timeout; "
                                 "a traceback above, if any, says why; on a busy machine they may only be starved)")
        build_s = time.monotonic() - t_build
        print(f"# {len(c.nodes)} nodes joined in {build_s:.0f} s; sending", flush=True)
        t0 = time.time() + 1.0
        go.value = t0
        window = (t0 + plan.warmup, t0 + plan.warmup + plan.seconds)
        pending = {RankKey(node_name(node), node * plan.ranks + rank): t0 + off for off, node, rank in plan.hangs}
        lat: list[float] = []
        ticks: list[float] = []
        lines0 = cpu0 = w0 = 0.0
        figures: dict[str, Any] = {"build_s": build_s, "nodes_joined": len(c.nodes)}
        peak_rss = rss_mb()
        ends: list[int] = []
        reports: list[FarmReport] = []
        prof = cProfile.Profile(time.process_time) if profile else None  # CPU time: the machine is shared
        last_summary = -1e18
        state = "before"
        unobserved_events = 0
        stages = HangStages(c, {node_name(node) for _off, node, _rank in plan.hangs})
        judge_since = time.monotonic()
        while len(reports) < len(ps):
            c.poll(0.05)
            now = time.monotonic()
            t_tick = time.perf_counter()
            v = c.tick(now)
            ticks.append(time.perf_counter() - t_tick)
            if now - last_summary >= 1.0:
                last_summary = now
                c.write_summary(now)
                peak_rss = max(peak_rss, rss_mb())
            wall = time.time()
            if v is not None and v.label is Label.COLLECTIVE_HANG and v.culprit in pending:
                printed = pending.pop(v.culprit)
                lat.append(wall - printed)
                stages.verdict(v.culprit.node, printed, time.monotonic(), wall)
                known = list(c.judge.ranks) if c.judge is not None else []
                c.judge = factory(c.generation, now)  # the next trial with a fresh judge; no recovery here
                # that knows the ranks the last one knew, as a running job's judge does (the coordinator takes
                # urgent messages first once its judge knows every rank: job/intake.py)
                c.judge.expect(known, now)
                judge_since = time.monotonic()
                c.recovery.sm.state = JobState.RUNNING
            if state == "before" and wall >= window[0]:
                state, lines0, cpu0, w0 = "window", c.counters.lines, time.process_time(), time.perf_counter()
                ticks.clear()
                if prof:
                    prof.enable()
            if state == "window" and wall >= window[1]:
                if prof:
                    prof.disable()
                state = "drain"
                figures["cpu_cores"] = (time.process_time() - cpu0) / (time.perf_counter() - w0)
                figures["ingested_window"] = c.counters.lines - lines0
                figures["coord_lines_at_end"] = c.counters.lines
                figures["coord_node_shed_at_end"] = getattr(c.counters, "lines_shed_at_nodes", 0)
                figures["tick_p99"] = _pct(ticks, 99) if ticks else 0.0
                figures["tick_max"] = max(ticks, default=0.0)
                figures["rss_end_window"] = rss_mb()
                figures.update(full_verdict(c, now))
                # (the judge is a fresh one after each verdict: it holds the ranks heard of since)
                figures["judge_age"] = now - judge_since
                t_drain = time.monotonic()
                print(f"# window closed; {figures['ingested_window'] / plan.seconds:,.0f} lines/s ingested in it; "
                      "draining", flush=True)
            while not q.empty():
                what, value = q.get()
                if what == "end":
                    ends.append(int(value))
                else:
                    reports.append(value)
            if len(reports) < len(ps) and q.empty() and any(p.exitcode not in (0, None) for p in ps):
                raise SystemExit("a node process died (see its traceback above)")
        figures["drain_s"] = time.monotonic() - t_drain
        figures["coord_lines_total"] = c.counters.lines
        figures["coord_node_shed"] = getattr(c.counters, "lines_shed_at_nodes", 0)
        s = c.summary(time.monotonic())
        unobserved_events = sum(1 for e in c.events.history if e.get("event") == "node_unobserved")
        figures.update({
            "lat": lat, "rss_peak": max(peak_rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3),
            "rss_end": rss_mb(), "queued_at_end": sum(ends), "reports": reports,
            "seq_lost": sum(n["seq"]["lost"] for n in s["nodes"].values()), "duplicates": s["duplicates"],
            "unclassified": s["unclassified_batches"], "unobserved_events": unobserved_events,
            "load": (load0, os.getloadavg()[0]), "tails": tails_size(c), "stages": stages.done,
            "taken_most": c.wire.intake.most_bytes, "taken_cap": c.wire.intake.max_bytes,
        })
        c.close()
        leave.set()
        for p in ps:
            p.join()
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(profile)
        figures["profile"] = out.getvalue()
    return figures


class HangStages:
    """Where a hang line's time goes on its way to the verdict, stage by stage: the node's batch
    wait (printed -> its batch enqueued), the agent's send window (enqueued -> sent), the
    coordinator's receive queue (sent -> handled: the socket's queues, sent -> taken off the socket, and
    the coordinator's own, taken -> handled, where urgent messages go first), the decode and judging
    (handled -> handed back), the verdict tick (handed back -> the verdict). Only the hang nodes' lines
    messages that carry the hang line are looked at (a bytes search of their body frame).
    The node and the coordinator share this machine's monotonic clock."""

    def __init__(self, c: Coordinator, nodes: set[str]) -> None:
        self.c, self.nodes, self.inner = c, nodes, c.received
        self.seen: dict[str, tuple[float, float, float, float, float, float, float, float]] = {}
        self.done: list[dict[str, float]] = []
        self.needle = HANG_LINE[:40].encode()
        c.received = self.received  # type: ignore[method-assign]  # the endpoint calls its receiver's
        # When the hang nodes' urgent messages are taken off the socket (job/intake.py): the queue stage
        # splits into the socket's queues (sent -> taken) and the coordinator's own (taken -> handled).
        self.taken: dict[str, float] = {}
        intake = c.wire.intake
        put = intake.put

        def put_timed(routing_id: bytes, frames: list[bytes], header: Header | None) -> None:
            if header is not None and header.urgent and header.node in nodes:
                self.taken[header.node] = time.monotonic()
            put(routing_id, frames, header)
        intake.put = put_timed  # type: ignore[method-assign]

    def received(self, view: Any, msg: Any, now: float, frame: bytes = b"") -> None:
        t_in = time.monotonic()
        self.inner(view, msg, now, frame)
        h = msg.header
        if h.kind is Kind.LINES and h.node in self.nodes and self.needle in frame:
            self.seen[h.node] = (h.wall, h.mono, h.sent, self.taken.pop(h.node, t_in), t_in, time.monotonic(),
                                 self.c.behind, self.c.pacing.every)

    def verdict(self, node: str, printed: float, t_verdict: float, wall: float) -> None:
        got = self.seen.pop(node, None)
        if got is None:
            return
        h_wall, h_mono, sent, t_taken, t_in, t_out, behind, every = got
        self.done.append({"batch": h_wall - printed, "window": sent - h_mono, "queue": t_in - sent,
                          "socket": t_taken - sent, "taken": t_in - t_taken,
                          "judge": t_out - t_in, "tick": t_verdict - t_out, "total": wall - printed,
                          "behind": behind, "every": every})


def full_verdict(c: Coordinator, now: float) -> dict[str, Any]:
    """What one full verdict over every rank the judge holds costs, and one status document: the one
    status.json gets (kept by changes; summarised beyond ``FULL_RANKS`` ranks) and the one listing
    every rank (``ranks.json``, a status query)."""
    judge = c.judge
    assert judge is not None
    times = []
    for _ in range(5):
        t = time.perf_counter()
        judge.verdict(now)
        times.append(time.perf_counter() - t)
    # CPU time, each after a collection: the machine is shared, and a collection of the whole heap
    # that the document before set off is no cost of the next one
    gc.collect()
    t = time.process_time()
    c.status_doc(now)
    every_s = time.process_time() - t
    gc.collect()
    t = time.process_time()
    # (hasattr: the same benchmark measures a tree from before the status book, back to back)
    kept = len(getattr(judge, "ranks", {})) > FULL_RANKS and hasattr(c, "status_summary")
    summary = c.status_summary(now) if kept else summarise(c.status_doc(now))
    status_s = time.process_time() - t
    return {"verdict_s": statistics.median(times), "judge_ranks": len(getattr(judge, "ranks", {})),
            "status_s": status_s, "every_s": every_s, "status_bytes": len(json.dumps(summary)),
            "reread": c.status_book.reread if kept else len(getattr(judge, "ranks", {}))}


def tails_size(c: Coordinator) -> tuple[int, int]:
    """(texts, characters) held in the coordinator's per-rank tails."""
    n = chars = 0
    for t in getattr(c.joblog, "tails", {}).values():  # (a writer process keeps them elsewhere)
        n += len(t.texts)
        chars += sum(len(x) for x, _n in t.texts)
    return n, chars


def print_replay(r: dict[str, Any], streams: int) -> None:
    cpu, msgs, secs = r["cpu"], r["msgs"], r["seconds"]
    total = sum(cpu.values()) / secs
    per_line = cpu["lines"] / max(r["lines"], 1) * 1e6
    print(f"replay (in this process, no sockets, {secs} simulated s after {r['fill']} s to fill the judge): "
          f"the coordinator needs {total:.2f} cores: {msgs['lines'] / secs:,.0f} lines messages/s x "
          f"{cpu['lines'] / max(msgs['lines'], 1) * 1e6:.0f} us ({per_line:.1f} us a line), "
          f"{msgs['procs'] / secs:,.0f} procs messages/s x {cpu['procs'] / max(msgs['procs'], 1) * 1e6:.0f} us, "
          f"ticks (acks, verdicts, status.json) {cpu['tick'] / secs * 1000:.0f} ms/s; "
          f"{r['lines'] / secs:,.0f} lines/s ingested, {r['refused']} refused/duplicate/early, "
          f"{r['unclassified']} batches classified here")
    print(f"replay: on the wire {(r['bytes']['lines'] + r['bytes']['procs']) / secs / 1e6:,.1f} MB/s (lines "
          f"{r['bytes']['lines'] / max(r['lines'], 1):.0f} B a line, procs "
          f"{r['bytes']['procs'] / max(msgs['procs'], 1):,.0f}"
          f" B a message); one core serves about {r['nodes'] / max(total, 1e-9):,.0f} such nodes")
    print(f"replay: one full verdict over {r['judge_ranks']:,} of {streams:,} ranks {1000 * r['verdict_s']:.1f} ms; "
          f"one status document {1000 * r['status_s']:.0f} ms CPU (status.json, {r['status_bytes'] / 1e3:,.0f} kB, "
          f"{r['reread']:,} ranks read again), every rank's {1000 * r['every_s']:.0f} ms (on request); "
          f"the coordinator's state grew RSS by "
          f"{r['rss_mb']:,.0f} MB; its heap frozen at {r['freeze'][0]:,} ranks (once, {1000 * r['freeze'][1]:.0f} ms "
          f"CPU, not measured); load average {r['load']:.1f}", flush=True)
    if JOB_LOG is not None:
        print(f"replay: merged.log and the tails in the writer process: "
              f"{r['writer_cpu'] / (secs + r['fill']):.2f} cores "
              f"(its CPU over all {secs + r['fill']} simulated s, the judge's fill included), "
              f"{r['merged_shed']:,} lines shed", flush=True)


def main() -> int:
    global READY_TIMEOUT, JOB_LOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rates", default="1,10", help="lines/s per rank, one run each")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured window per rate")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of sending before the window")
    ap.add_argument("--trials", type=int, default=5, help="hangs injected per rate, spread over the window")
    ap.add_argument("--procs", type=int, default=2, help="processes simulating the nodes")
    ap.add_argument("--batch-age", type=float, default=None,
                    help="the agents' batch age (seconds): sets how often a node sends (default: the coordinator's "
                         "rule for --nodes, protocol.batch_age_at; 0.05 before that rule)")
    ap.add_argument("--procs-every", type=float, default=None,
                    help="seconds between two procs messages of a node (default: protocol.procs_every_at of --nodes)")
    ap.add_argument("--cycle", type=int, default=0, help="rounds of lines pre-built per node (0: 2 s of lines)")
    ap.add_argument("--no-collectives", action="store_true", help="procs messages without flight recorder readings")
    ap.add_argument("--drain", type=float, default=20.0, help="seconds the nodes may take to get everything acked")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="profile the coordinator in the window (cProfile) and print its top N functions (with "
                         "--skip realtime: in the replay, its measured seconds)")
    ap.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT)
    ap.add_argument("--replay-seconds", type=int, default=2, help="simulated seconds of the in-process replay")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: replay,realtime")
    ap.add_argument("--job-log", choices=("writer", "here"), default="writer",
                    help="merged.log and the tails in a writer process, as every entry point keeps them, or in "
                         "the coordinator's own thread (as before the writer)")
    a = ap.parse_args()
    JOB_LOG = line_writer if a.job_log == "writer" else None
    if a.replay_seconds < 1:
        ap.error(f"--replay-seconds {a.replay_seconds}: the replay needs at least 1 simulated second "
                 "(to leave the replay out, pass --skip replay)")
    READY_TIMEOUT = a.ready_timeout
    skip = set(a.skip.split(","))
    mp.set_start_method("fork")
    check_procs_layout()
    streams = a.nodes * a.ranks
    print(f"# {a.nodes} nodes x {a.ranks} ranks = {streams:,} rank streams; {a.procs} node processes; "
          f"{os.cpu_count()} cores; window {a.seconds:.0f} s after {a.warmup:.0f} s", flush=True)
    for rate in (float(x) for x in a.rates.split(",")):
        # the agents' pace as the coordinator's acks set it for this many nodes (protocol.batch_age_at)
        age = a.batch_age if a.batch_age is not None else batch_age_at(a.nodes, LinkSettings().batch_age)
        procs_every = a.procs_every if a.procs_every is not None else procs_every_at(a.nodes)
        period = batch_period(rate, a.ranks, age)
        cycle = a.cycle or max(1, round(2 * rate))
        # The replay's steps never go back: its cycle covers the fill and the window. A step number
        # that repeats (the cycle sent again) is a rank's loop beginning again, which training never
        # does: the judge takes it through Judge._advance, the way of news, not of steady training.
        replay_cycle = a.cycle or max(cycle, math.ceil((math.ceil(period) + a.replay_seconds + 1) * rate))
        # in the first 80% of the window: the judge replaced after the last one holds every rank again at the end
        hangs = tuple((a.warmup + 0.8 * a.seconds * (k + 0.5) / a.trials, (k * 389 + 17) % a.nodes,
                       (k * 7 + 5) % a.ranks) for k in range(a.trials))
        plan = Plan(a.nodes, a.ranks, rate, period, cycle, a.warmup, a.seconds, a.drain, hangs,
                    not a.no_collectives, procs_every)
        print(f"\n## {rate:g} lines/s per rank = {rate * streams:,.0f} lines/s; a batch every {period * 1000:.0f} ms "
              f"per node (batch age {age * 1000:.0f} ms, 20 ms agent loop), a procs message every {procs_every:g} s",
              flush=True)
        if "replay" not in skip:
            r = capacity(dataclasses.replace(plan, cycle=replay_cycle), a.replay_seconds,
                         a.profile if "realtime" in skip else 0)
            print_replay(r, a.nodes * a.ranks)
            if "profile" in r:
                print("replay profile (the coordinator's handle and tick, measured seconds only):", flush=True)
                print(r["profile"], flush=True)
        if "realtime" in skip:
            continue
        f = run(plan, a.procs, a.profile)
        reps: list[FarmReport] = f["reports"]
        offered = sum(r.window_lines for r in reps) / a.seconds
        msgs = sum(r.window_msgs for r in reps) / a.seconds
        took = f["ingested_window"] / a.seconds
        # (lines the nodes left out, their judged parts sent alone, are no backlog: counted once their part arrived)
        backlog = f["queued_at_end"] - f["coord_lines_at_end"] - f["coord_node_shed_at_end"]
        node_shed = sum(r.shed_lines for r in reps)
        print(f"real time: offered {offered:,.0f} lines/s in {msgs:,.0f} messages/s ({offered / max(msgs, 1):.1f} "
              f"lines a message, the procs messages counted); batches built and {f['nodes_joined']} nodes joined in "
              f"{f['build_s']:.0f} s", flush=True)
        print(f"coordinator: {f['cpu_cores']:.2f} cores (CPU s / wall s over the window); RSS peak "
              f"{f['rss_peak']:,.0f} MB, {f['rss_end_window']:,.0f} MB at the window's end, {f['rss_end']:,.0f} MB "
              f"at the end; loop turn p99 {f['tick_p99'] * 1000:.0f} ms, max {f['tick_max'] * 1000:.0f} ms; taken off "
              f"its socket and waiting at most {f['taken_most'] / 2**20:,.0f} MiB (of {f['taken_cap'] / 2**20:,.0f})")
        # keeping up: at most a batch and half a second behind, and what is left drained at once
        keeps = "keeps up" if backlog <= offered * (period + 0.5) and f["drain_s"] < 5 else "FALLS BEHIND"
        print(f"ingest: achieved {took:,.0f} of {offered:,.0f} lines/s offered ({100 * took / max(offered, 1):.0f}%): "
              f"{keeps}; backlog at the window's end {backlog:,} lines "
              f"({backlog / max(offered, 1):.1f} s of offered load), "
              f"unacknowledged at the nodes {sum(r.unacked_at_end for r in reps):,} lines, drained in "
              f"{f['drain_s']:.1f} s; resent {sum(r.resent for r in reps):,} messages "
              f"({sum(r.resend_rounds for r in reps):,} resend rounds), dropped by the nodes "
              f"{sum(r.dropped_lines for r in reps):,} lines, still unacknowledged after the drain "
              f"{sum(r.unacked_after for r in reps):,}; sequence-lost {f['seq_lost']}, duplicates {f['duplicates']}, "
              f"unobserved-node events {f['unobserved_events']}, batches classified here {f['unclassified']}")
        print(f"shed at the nodes (each batch's judged part sent alone while the coordinator was behind): "
              f"{node_shed:,} lines ({100 * node_shed / max(sum(r.lines_at_end for r in reps), 1):.0f}% of all sent), "
              f"{sum(r.shed_at_end for r in reps):,} of them by the window's end; the coordinator counted "
              f"{f['coord_node_shed']:,} (lines_shed_at_nodes)")
        lat = f["lat"]
        if lat:
            print(f"verdict latency (hang line printed -> collective_hang verdict naming its rank): n={len(lat)}/"
                  f"{a.trials} p50 {1000 * statistics.median(lat):.0f} ms, p99 {1000 * _pct(lat, 99):.0f} ms, "
                  f"max {1000 * max(lat):.0f} ms")
        else:
            print(f"verdict latency: no verdict observed in {a.trials} trials")
        for st in f["stages"]:
            print("hang stages (ms): batch wait {batch:.0f}, agent send window {window:.0f}, coordinator queue "
                  "{queue:.0f} (socket {socket:.0f}, taken {taken:.0f}), "
                  "decode+judge {judge:.0f}, verdict tick {tick:.0f} (verdicts every {every:.0f}); total "
                  "{total:.0f} (the acks then said behind {behind:.2f} s)".format(
                      **{k: v * (1 if k == "behind" else 1000) for k, v in st.items()}))
        n_tails, tail_chars = f["tails"]
        print(f"one full verdict over {f['judge_ranks']:,} ranks (of a judge made {f['judge_age']:.1f} s before, at "
              f"the last hang's verdict): {1000 * f['verdict_s']:.0f} ms; one status "
              f"document: {1000 * f['status_s']:.0f} ms (every rank's {1000 * f['every_s']:.0f} ms); "
              f"tails hold {n_tails:,} texts, {tail_chars / 1e6:,.0f} M "
              f"characters")
        print(f"node processes: {sum(r.cpu for r in reps) / a.seconds:.2f} cores, worst lag behind schedule "
              f"{max(r.late for r in reps):.2f} s; load average {f['load'][0]:.1f} -> {f['load'][1]:.1f}", flush=True)
        if a.profile:
            print(f["profile"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
