"""Wire benchmark: coordinator ingest vs raw pyzmq, verdict latency, agent CPU. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_wire.py [--seconds 4] [--procs 4] [--trials 20] [--rates 100,1000]

Simulated agents (no torch): 64 nodes x 32 ranks = 2,048 rank streams, spread over ``--procs``
processes (16 nodes each with 4), each node its own :class:`AgentLink` (own DEALER socket,
session, sequence, resend buffer, the packaged knowledge base) sending realistic lines (every
rank's step lines, compiler lines, CCOM warnings) in batches of 4,000 (the agents'
default; ``--batch``): per rank one joined text
plus the matches the agent's own classification kept. The coordinator runs in this process
with the real judge.

1. ingest: agents send as fast as they can for ``--seconds``; lines/s the coordinator took in
   (authenticated, decoded, de-duplicated, written to merged.log, tails; with and without the
   judge), beside raw pyzmq PUSH/PULL with the same processes and the very same body frames
   (one frame per batch, msgpack-decoded and counted), and beside the old raw baseline
   (a list of the batch's line strings per frame). In this mode each node's batches are built once by
   the real agent path (``LineBatches.batch``: join + classify + compact) and re-sent with a fresh
   header/sequence/signature, so the agents' Python does not starve the coordinator of the 2
   cores; the agents' own cost is measured in 3.
2. verdict latency: while every node streams ``--rates`` lines/s through the full agent path
   (``add_line``, batching, classification), one rank of one node prints the runtime's
   "suspected hang in collectives" line at a known time; time to the coordinator's verdict.
3. agent CPU: one node's agent at 1,000 lines/s (full path), CPU seconds / wall seconds, with
   classification and without (the difference is what classifying on the node costs).
4. huge lines: 16 ranks x 8 lines of 1 MiB through one link (batches split under the frame limit).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier

import msgpack
import zmq

from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import JobState, LogLine, RankKey
from neuron_watch.job.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.link_settings import LinkSettings
from neuron_watch.wire.protocol import Header, Kind, encode_body

SECRET = b"benchmark secret 0123456789abcdef"
JOB = "bench"
NODES, RANKS = 64, 32
BATCH = LinkSettings().batch_lines  # lines per batch (--batch; set before the agent processes fork)
HANG_LINE = ("(FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC 0, model 0 - "
             "suspected hang in collectives operation 0 out of 100")


def realistic_lines(node: int, rounds: int = 64) -> list[tuple[int, str]]:
    """``rounds`` training steps of one node (see :func:`round_lines`)."""
    return [line for k in range(rounds) for line in round_lines(k, node * RANKS, RANKS)]


def round_lines(k: int, first: int, ranks: int, local: bool = False) -> list[tuple[int, str]]:
    """Training step ``k`` of the node whose ranks are ``first`` .. ``first + ranks - 1``: every rank
    prints its step line (as a real job's ranks do, same step number on every rank); every 8th step a
    few ranks print a CCOM RX warning, every 16th a compiler line and its PASS line (~100-140 bytes a
    line). ``local``: the texts name the rank's place on its node, not its global rank (so every
    node's lines classify alike: bench_scale.py)."""
    out = []
    step = 1000 + k
    for i in range(ranks):
        r = first + i
        who = i if local else r
        out.append((r, f"2026-11-21 13:05:{k % 60:02d}.{i:06d} INFO step {step} loss 2.{(k * 37 + i) % 9999:04d} "
                       f"lr 1.0e-04 grad_norm 0.8813 throughput 123.4 seq/s rank {who}"))
        if k % 8 == 3 and i % 8 == 0:
            out.append((r, f"2026-Nov-21 13:05:{k % 60:02d}.{i:06d} {4000 + i}:{who} CCOM WARN Timeout waiting "
                           "for RX (waited 120 sec) - retrying"))
        if k % 16 == 5 and i % 16 == 0:
            out.append((r, "INFO:Neuron:Compiling function _mark_step with neuronx-cc --target=trn1 "
                           f"--model-type=transformer -O1 --cache_dir=/var/tmp/neuron-compile-cache/{k}"))
            out.append((r, f"2026-11-21 13:05:{k % 60:02d}.000000: I neuronx_cc Compiler status PASS"))
    return out


def flood_bodies(link: AgentLink, pool: list[tuple[int, str]], n: int = 8) -> list[bytes]:
    """``n`` consecutive ``BATCH``-line batches of ``pool`` as the real agent path builds them."""
    now, wall = time.monotonic(), time.time()
    out = []
    reps = 2 + BATCH // len(pool)
    for b in range(n):
        rows = [LogLine(RankKey(link.node, r), t, now, wall, f"/run/gen-0/rank-{r}.log", b * BATCH + j)
                for j, (r, t) in enumerate((pool * reps)[b * BATCH % len(pool):][:BATCH])]
        out.append(encode_body(link.batches.batch(rows, now, wall)))
    return out


#: seconds every process may take to build its batches before the measured window (--ready-timeout:
#: on a machine shared with other work, classifying the pools takes minutes)
READY_TIMEOUT = 120.0
LEAD = 0.5  # seconds between every process being ready and the measured window


def agent_proc(first: int, count: int, endpoint: str, seconds: float, rate: float, ready: Barrier,
               raw: str, hang_offsets: list[float] | None, q: mp.Queue[tuple[float, ...]], period: float = 0.01,
               classify: bool = True) -> None:
    """``count`` nodes from ``first``; ``rate`` lines/s per node (0 = as fast as possible), one loop
    turn (read new lines, tick every link) per ``period`` seconds. ``raw``: "" (real links),
    "body" (PUSH the real body frames) or "list" (PUSH a list of BATCH line strings). Sending starts
    ``LEAD`` seconds after every process passed ``ready``; hangs are injected ``hang_offsets``
    seconds after that."""
    pool = {n: realistic_lines(n) for n in range(first, first + count)}
    sent = 0
    kb = default_knowledge_base() if classify else None
    ctx = zmq.Context()
    if raw:
        socks = {}
        for n in pool:
            s = ctx.socket(zmq.PUSH)
            # A window of 8 batches per node, as the agents' (below): the senders wait for the
            # receiver instead of queueing seconds of backlog that linger would then drop.
            s.setsockopt(zmq.SNDHWM, 8)
            s.setsockopt(zmq.LINGER, 30000)
            s.connect(endpoint)
            socks[n] = s
        if raw == "body":
            scratch = AgentLink(endpoint, SECRET, job=JOB, node="scratch", session=1, kb=kb)
            frames = {n: flood_bodies(scratch, pool[n]) for n in pool}
            scratch.close()
            per = BATCH
        else:
            frames = {n: [msgpack.packb([n, 0, [t.encode() for _r, t in (pool[n] * 2)[:BATCH]]])] for n in pool}
            per = BATCH
        k = 0
        ready.wait(READY_TIMEOUT)
        go_at = time.time() + LEAD
        while time.time() < go_at:
            time.sleep(0.001)
        end = time.time() + seconds
        while time.time() < end:
            for n, s in socks.items():
                s.send(frames[n][k % len(frames[n])])
                sent += per
            k += 1
        for s in socks.values():
            s.send(msgpack.packb(["END", sent]))
            s.close()
        ctx.term()
        q.put((sent, 0.0, 0.0, 0.0))
        return
    links = {n: AgentLink(endpoint, SECRET, job=JOB, node=f"node{n:02d}", session=new_session(time.time()),
                          settings=LinkSettings(batch_lines=BATCH, batch_age=0.05), kb=kb) for n in pool}
    now, wall = time.monotonic(), time.time()
    for n, link in links.items():
        link.hello(f"host{n}", os.getpid(), range(n * RANKS, (n + 1) * RANKS), now, wall)
    # Flood mode measures the coordinator, not the agents' Python: each node's batches are built
    # once by the real agent path and re-queued (fresh header, sequence number and signature).
    bodies = {n: flood_bodies(link, pool[n]) for n, link in links.items()} if rate == 0 else {}
    ready.wait(READY_TIMEOUT)
    go_at = time.time() + LEAD
    while time.time() < go_at:
        for link in links.values():
            link.tick(time.monotonic(), time.time())
        time.sleep(0.005)
    t_end = time.time() + seconds
    pos = dict.fromkeys(pool, 0)
    start = time.monotonic()
    cpu0 = time.process_time()
    hang_pending = [go_at + o for o in hang_offsets or []]
    turn = 0
    while time.time() < t_end:
        now, wall = time.monotonic(), time.time()
        if rate == 0:
            # A window of 8 unacknowledged batches per node, like the raw pushers' blocking send at
            # the HWM: the agents wait for the coordinator instead of spinning on a full buffer.
            added = False
            for n, link in links.items():
                if len(link.outbox) < 8:
                    link.outbox.add(Header(kind=Kind.LINES, job=JOB, node=link.node, session=link.session,
                                           generation=0, seq=0, mono=now, wall=wall),
                                    bodies[n][turn % len(bodies[n])], BATCH)
                    sent += BATCH
                    added = True
                link.tick(now, wall)
            turn += 1
            if not added:
                time.sleep(0.002)
            continue
        due = int(rate * (now - start)) - sent // count
        for n, link in links.items():
            lines, p = pool[n], pos[n]
            for _ in range(max(0, due)):
                r, text = lines[p]
                p = p + 1 if p + 1 < len(lines) else 0
                link.add_line(LogLine(RankKey(link.node, r), text, now, wall, "", 0))
            pos[n] = p
            if hang_pending and n == first and wall >= hang_pending[0]:
                hang_pending.pop(0)
                link.add_line(LogLine(RankKey(link.node, n * RANKS + 5), HANG_LINE, now, wall))
                link.flush_lines(now, wall)
            link.tick(now, wall)
        if due > 0:
            sent += due * count
        time.sleep(period)
    cpu_window = time.process_time() - cpu0
    # Drain: keep ticking until every message is acknowledged (or a few seconds pass).
    end = time.monotonic() + 3
    while any(len(x.outbox) for x in links.values()) and time.monotonic() < end:
        for link in links.values():
            link.tick(time.monotonic(), time.time())
        time.sleep(0.005)
    dropped = sum(x.outbox.dropped_lines for x in links.values())
    unacked = sum(x.outbox.lines for x in links.values())
    for link in links.values():
        link.close()
    q.put((sent, float(dropped), float(unacked), cpu_window))


def raw_pull(procs: int, seconds: float, mode: str) -> dict[str, float]:
    ctx = zmq.Context()
    r = ctx.socket(zmq.PULL)
    r.setsockopt(zmq.LINGER, 0)
    r.bind("tcp://127.0.0.1:*")
    ep = r.getsockopt(zmq.LAST_ENDPOINT).decode()
    q: mp.Queue[tuple[float, ...]] = mp.Queue()
    per = NODES // procs
    ready = mp.Barrier(procs + 1)
    ps = [mp.Process(target=agent_proc, args=(k * per, per, ep, seconds, 0, ready, mode, None, q))
          for k in range(procs)]
    for p in ps:
        p.start()
    ready.wait(READY_TIMEOUT)
    lines = ends = 0
    t0 = c0 = None
    while ends < NODES:
        if not r.poll(2000):
            if not any(p.is_alive() for p in ps):
                raise SystemExit("an agent process died before sending END (see its traceback above)")
            continue
        obj = msgpack.unpackb(r.recv())
        if obj[0] == "END":
            ends += 1
            continue
        if t0 is None:
            t0, c0 = time.perf_counter(), time.process_time()
        lines += sum(x[1] for x in obj[2]) if mode == "body" else len(obj[2])
    wall, cpu = time.perf_counter() - (t0 or 0), time.process_time() - (c0 or 0)
    for p in ps:
        p.join()
    r.close()
    ctx.term()
    return {"lines": lines, "lines_s": lines / wall, "cpu_us_line": cpu / lines * 1e6}


def coordinator(run_dir: str, judge: bool = True) -> Coordinator:
    from neuron_watch.config import WatchConfig
    from neuron_watch.runtime import default_judge_factory

    factory = default_judge_factory(WatchConfig(hang_timeout=3600.0)) if judge else None
    if factory:
        factory(0, 0.0)  # fail here, loudly, if the knowledge base does not load
    return Coordinator("127.0.0.1:0", SECRET, run_dir, job=JOB, judge_factory=factory,
                       settings=CoordinatorSettings(silence=1e6))


def ingest(procs: int, seconds: float, judge: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(d, judge)
        q: mp.Queue[tuple[float, ...]] = mp.Queue()
        per = NODES // procs
        ready = mp.Barrier(procs + 1)
        ps = [mp.Process(target=agent_proc, args=(k * per, per, c.endpoint, seconds, 0, ready, "", None, q))
              for k in range(procs)]
        for p in ps:
            p.start()
        ready.wait(READY_TIMEOUT)
        go_at = time.time() + LEAD
        t0 = c0 = t1 = c1 = 0.0
        lines0 = lines1 = 0
        while any(p.is_alive() for p in ps):
            c.poll(0.01)
            c.tick(time.monotonic())
            if not t0 and time.time() >= go_at:
                t0, c0, lines0 = time.perf_counter(), time.process_time(), c.counters.lines
            if t0 and not t1 and time.time() >= go_at + seconds:
                t1, c1, lines1 = time.perf_counter(), time.process_time(), c.counters.lines
        sent = dropped = unacked = 0
        for _ in ps:
            s, dr, un, _cpu = q.get()
            sent, dropped, unacked = sent + int(s), dropped + int(dr), unacked + int(un)
        for p in ps:
            p.join()
        s = c.summary(time.monotonic())
        c.close()
        took = lines1 - lines0
        return {"lines_s": took / (t1 - t0), "cpu_us_line": (c1 - c0) / took * 1e6, "sent": sent,
                "unacked": unacked, "unclassified": s["unclassified_batches"],
                "ingested_total": s["lines"], "agent_dropped": dropped,
                "seq_lost": sum(n["seq"]["lost"] for n in s["nodes"].values()), "nodes": len(s["nodes"])}


def verdict_latency(procs: int, trials: int, rate: float) -> tuple[list[float], float]:
    """Latencies (s) of ``trials`` injected hangs while 64 nodes stream ``rate`` lines/s each, and
    the coordinator's CPU share over the run."""
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(d)
        factory = c.judge_factory
        assert factory is not None
        q: mp.Queue[tuple[float, ...]] = mp.Queue()
        per = NODES // procs
        offsets = [1.0 + 0.5 * k for k in range(trials)]
        seconds = 1.0 + 0.5 * trials + 0.5
        ready = mp.Barrier(procs + 1)
        ps = [mp.Process(target=agent_proc, args=(k * per, per, c.endpoint, seconds, rate, ready, "",
                                                   offsets if k == 0 else None, q)) for k in range(procs)]
        for p in ps:
            p.start()
        ready.wait(READY_TIMEOUT)
        hang_at = [time.time() + LEAD + o for o in offsets]
        lat: list[float] = []
        pending = list(hang_at)
        w0, c0 = time.perf_counter(), time.process_time()
        while any(p.is_alive() for p in ps):
            c.poll(0.01)
            v = c.tick(time.monotonic())
            if v is not None and v.label.value == "collective_hang" and pending:
                lat.append(time.time() - pending.pop(0))
                # Start the next trial with a fresh judge; no recovery in the benchmark.
                c.judge = factory(0, time.monotonic())
                c.recovery.sm.state = JobState.RUNNING
        share = (time.process_time() - c0) / (time.perf_counter() - w0)
        for _ in ps:
            q.get()
        for p in ps:
            p.join()
        c.close()
        return lat, share


def agent_cpu(seconds: float, classify: bool) -> tuple[float, float]:
    """CPU seconds per wall second of one node's agent at 1,000 lines/s in its sending window, and
    the lines it sent."""
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(d)
        q: mp.Queue[tuple[float, ...]] = mp.Queue()
        # A 50 ms loop, as the wrapper's tail loop: lines are batched per turn anyway.
        ready = mp.Barrier(2)
        p = mp.Process(target=agent_proc, args=(0, 1, c.endpoint, seconds, 1000.0, ready, "",
                                                 None, q, 0.05, classify))
        p.start()
        ready.wait(READY_TIMEOUT)
        while p.is_alive():
            c.poll(0.01)
            c.tick(time.monotonic())
        sent, _dropped, _unacked, cpu = q.get()
        p.join()
        c.close()
        return cpu / seconds, sent


def huge_lines(rounds: int = 8, ranks: int = 16, limit: float = 120.0) -> dict[str, float]:
    """One node's link and the coordinator in this process: ``ranks`` ranks each print ``rounds``
    lines of 1 MiB (16 ranks of such lines make batches over the 64 MiB frame limit: they are split,
    never wedge the link). MiB/s until every line was ingested; ``done`` 0 when not within ``limit`` s."""
    with tempfile.TemporaryDirectory() as tmp:
        coord = Coordinator("127.0.0.1:0", SECRET, tmp, job=JOB)
        link = AgentLink(coord.endpoint, SECRET, job=JOB, node="n0", session=new_session(time.time()))
        mib = "m" * ((1 << 20) - 32)
        want = rounds * ranks
        start = time.monotonic()
        cpu = time.process_time()
        try:
            for i in range(rounds):
                now, wall = time.monotonic(), time.time()
                for r in range(ranks):
                    link.add_line(LogLine(RankKey(link.node, r), f"r{r} l{i} {mib}", now, wall))
            link.flush_lines(time.monotonic(), time.time())
            while coord.counters.lines < want and time.monotonic() - start < limit:
                link.tick(time.monotonic(), time.time())
                coord.poll(0.005)
                coord.tick(time.monotonic())
        finally:
            link.close()
            coord.close()
        took = time.monotonic() - start
        got = coord.counters.lines
        return {"mib_s": got / took, "done": float(got == want), "seconds": took, "lines": got, "want": want,
                "cpu_s": time.process_time() - cpu}


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    global BATCH, READY_TIMEOUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rates", default="100,1000", help="lines/s per node during the latency runs")
    ap.add_argument("--batch", type=int, default=BATCH, help="lines per batch (agents and raw alike)")
    ap.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT,
                    help="seconds the agent processes may take to get ready")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: raw,ingest,latency,huge,agent")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    BATCH = a.batch
    READY_TIMEOUT = a.ready_timeout
    mp.set_start_method("fork")
    print(f"# {NODES} nodes x {RANKS} ranks = {NODES * RANKS} rank streams, {a.procs} agent processes, "
          f"{os.cpu_count()} cores, batches of {BATCH} lines", flush=True)
    raw: dict[str, float] = {}
    if "raw" not in skip:
        raw = raw_pull(a.procs, a.seconds, "body")
        print(f"raw pyzmq PUSH/PULL, the same body frames (msgpack decode only): {raw['lines_s']:,.0f} lines/s, "
              f"receiver {raw['cpu_us_line']:.3f} us CPU/line", flush=True)
        old = raw_pull(a.procs, a.seconds, "list")
        print(f"raw pyzmq PUSH/PULL, a list of {BATCH} line strings per frame (the old baseline): "
              f"{old['lines_s']:,.0f} lines/s, receiver {old['cpu_us_line']:.3f} us CPU/line", flush=True)
    for judge in ((False, True) if "ingest" not in skip else ()):
        ing = ingest(a.procs, a.seconds, judge)
        what = "auth+decode+seq+merged.log+tails+judge" if judge else "auth+decode+seq+merged.log+tails, no judge"
        vs = f" = {100 * ing['lines_s'] / raw['lines_s']:.0f}% of raw" if raw else ""
        print(f"coordinator ingest ({what}): {ing['lines_s']:,.0f} lines/s{vs}, {ing['cpu_us_line']:.3f} us CPU/line; "
              f"nodes {ing['nodes']}, sent {ing['sent']:,}, ingested {ing['ingested_total']:,}, "
              f"agent-dropped {ing['agent_dropped']:,}, still buffered when the agents stopped {ing['unacked']:,}, "
              f"sequence-lost msgs {ing['seq_lost']}, batches classified here {ing['unclassified']}", flush=True)
    for rate in ([float(x) for x in a.rates.split(",")] if "latency" not in skip else []):
        lat, share = verdict_latency(a.procs, a.trials, rate)
        if lat:
            print(f"verdict latency (hang line injected -> collective_hang verdict, 64 nodes at {rate:,.0f} "
                  f"lines/s each = {64 * rate:,.0f} lines/s): n={len(lat)}/{a.trials} "
                  f"p50 {1000 * statistics.median(lat):.0f} ms, p99 {1000 * _pct(lat, 99):.0f} ms, "
                  f"max {1000 * max(lat):.0f} ms; coordinator CPU {100 * share:.0f}% of a core", flush=True)
        else:
            print(f"verdict latency at {rate:,.0f} lines/s per node: no verdict observed", flush=True)
    if "huge" not in skip:
        h = huge_lines()
        state = "all arrived" if h["done"] else f"WEDGED: {h['lines']:.0f} of {h['want']:.0f} lines after"
        print(f"16 ranks x 8 lines of 1 MiB (one 128 MiB flush, frame limit 64 MiB): {state} "
              f"{h['seconds']:.1f} s, {h['mib_s']:.0f} MiB/s, {h['cpu_s']:.1f} CPU-s (link + coordinator)", flush=True)
    if "agent" not in skip:
        for classify in (True, False):
            cpu, sent = agent_cpu(5.0, classify)
            what = "with classification" if classify else "without classification (kb=None)"
            print(f"agent CPU at 1,000 lines/s (one node, 32 ranks, full path {what}): {100 * cpu:.2f}% of one "
                  f"core ({sent:,.0f} lines in 5 s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
