"""Wire benchmark: coordinator ingest vs raw pyzmq, verdict latency, agent CPU. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_wire.py [--seconds 4] [--procs 4] [--trials 20] [--rate 100]

Simulated agents (no torch): 64 nodes x 32 ranks = 2,048 rank streams, spread over ``--procs``
processes (16 nodes each with 4), each node its own :class:`AgentLink` (own DEALER socket,
session, sequence, resend buffer) sending realistic lines (step lines, compiler lines, CCOM
warnings) in batches of 500. The coordinator runs in this process with the real judge.

1. ingest: agents send as fast as they can for ``--seconds``; lines/s the coordinator took in
   (authenticated, decoded, de-duplicated, written to merged.log; with and without the judge),
   beside raw pyzmq PUSH/PULL with the same processes and the same batches (msgpack, one frame per
   batch, decoded to a list of line bytes and counted). In this mode each node's batch body is
   encoded once and re-sent with a fresh header/sequence/signature, so the agents' own Python
   does not starve the coordinator of the 2 cores; agent cost is measured in 3.
2. verdict latency: while every node streams ``--rate`` lines/s, one rank of one node prints the
   runtime's "suspected hang in collectives" line at a known time; time to the verdict.
3. agent CPU: one agent at 1,000 lines/s, CPU seconds / wall seconds.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

import msgpack
import zmq

from neuron_watch.agent_link import AgentLink, LinkSettings, new_session
from neuron_watch.coordinator import Coordinator, CoordinatorSettings
from neuron_watch.protocol import Header, Kind, Lines, WireLine, encode_body

SECRET = b"benchmark secret 0123456789abcdef"
JOB = "bench"
NODES, RANKS = 64, 32
HANG_LINE = ("(FATAL-RT-UNDEFINED-STATE) missing collectives status on Neuron Device 0 NC 0, model 0 - "
             "suspected hang in collectives operation 0 out of 100")


def realistic_lines(node: int) -> list[tuple[int, str]]:
    """A repeating mix: mostly step lines, some compiler lines and CCOM warnings (~110-140 bytes)."""
    out = []
    for i in range(RANKS * 4):
        r = node * RANKS + i % RANKS
        k = i % 16
        if k == 0:
            text = (f"2026-Nov-21 13:05:{i % 60:02d}.{i:06d} {os.getpid()}:{r} CCOM WARN Timeout waiting for RX "
                    "(waited 120 sec) - retrying")
        elif k == 1:
            text = ("INFO:Neuron:Compiling function _mark_step with neuronx-cc --target=trn1 "
                    f"--model-type=transformer -O1 --cache_dir=/var/tmp/neuron-compile-cache/{i}")
        elif k == 2:
            text = f"{time.strftime('%Y-%m-%d %H:%M:%S')}.000000: I neuronx_cc Compiler status PASS"
        else:
            text = f"step {1000 + i} loss 2.{i:04d} lr 1.0e-04 grad_norm 0.8813 throughput 123.4 seq/s rank {r}"
        out.append((r, text))
    return out


def agent_proc(first: int, count: int, endpoint: str, seconds: float, rate: float, go_at: float,
               raw: bool, hang_at: list[float] | None, q: mp.Queue[tuple[float, ...]], period: float = 0.01) -> None:
    """``count`` nodes from ``first``; ``rate`` lines/s per node (0 = as fast as possible), one loop
    turn (read new lines, tick every link) per ``period`` seconds."""
    pool = {n: realistic_lines(n) for n in range(first, first + count)}
    sent = 0
    ctx = zmq.Context()
    if raw:
        socks = {}
        for n in pool:
            s = ctx.socket(zmq.PUSH)
            s.setsockopt(zmq.LINGER, 5000)
            s.connect(endpoint)
            socks[n] = s
        batch = {n: [t.encode() for _r, t in pool[n]] * 4 for n in pool}  # 512 lines per message
        seq = 0
        while time.time() < go_at:
            time.sleep(0.001)
        end = time.time() + seconds
        while time.time() < end:
            for n, s in socks.items():
                s.send(msgpack.packb([n, seq, batch[n]]))
                sent += len(batch[n])
            seq += 1
        for s in socks.values():
            s.send(msgpack.packb(["END", sent]))
            s.close()
        ctx.term()
        q.put((sent, 0.0, 0.0, 0.0))
        return
    links = {n: AgentLink(endpoint, SECRET, job=JOB, node=f"node{n:02d}", session=new_session(time.time()),
                          settings=LinkSettings(batch_lines=500, batch_age=0.05)) for n in pool}
    now, wall = time.monotonic(), time.time()
    for n, link in links.items():
        link.hello(f"host{n}", os.getpid(), range(n * RANKS, (n + 1) * RANKS), now, wall)
    while time.time() < go_at:
        for link in links.values():
            link.tick(time.monotonic(), time.time())
        time.sleep(0.005)
    t_end = time.time() + seconds
    i = 0
    start = time.monotonic()
    cpu0 = time.process_time()
    hang_pending = list(hang_at or [])
    # Flood mode measures the coordinator, not the agents' Python: each node's 500-line batch body
    # is encoded once and re-queued (fresh header, sequence number and signature per message).
    bodies = {n: encode_body(Lines(tuple(WireLine(r, 0.0, 0.0, t) for r, t in (pool[n] * 4)[:500])))
              for n in pool}
    while time.time() < t_end:
        now, wall = time.monotonic(), time.time()
        if rate == 0:
            # A window of 8 unacknowledged batches per node, like the raw pushers' blocking send at
            # the HWM: the agents wait for the coordinator instead of spinning on a full buffer.
            added = False
            for n, link in links.items():
                if len(link.outbox) < 8:
                    link.outbox.add(Header(kind=Kind.LINES, job=JOB, node=link.node, session=link.session,
                                           generation=0, seq=0, mono=now, wall=wall), bodies[n], 500)
                    sent += 500
                    added = True
                link.tick(now, wall)
            if not added:
                time.sleep(0.002)
            continue
        for n, link in links.items():
            lines = pool[n]
            k = int(rate * (now - start)) - sent // count
            for j in range(max(0, k)):
                r, text = lines[(i + j) % len(lines)]
                link.add_line(r, text, now, wall)
            if k > 0:
                sent += k
            if hang_pending and n == first and wall >= hang_pending[0]:
                hang_pending.pop(0)
                link.add_line(n * RANKS + 5, HANG_LINE, now, wall)
                link.flush_lines(now, wall)
            link.tick(now, wall)
        i += 500
        if rate:
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


def raw_pull(procs: int, seconds: float) -> dict[str, float]:
    ctx = zmq.Context()
    r = ctx.socket(zmq.PULL)
    r.setsockopt(zmq.LINGER, 0)
    r.bind("tcp://127.0.0.1:*")
    ep = r.getsockopt(zmq.LAST_ENDPOINT).decode()
    q: mp.Queue[tuple[float, ...]] = mp.Queue()
    per = NODES // procs
    go_at = time.time() + 1.0
    ps = [mp.Process(target=agent_proc, args=(k * per, per, ep, seconds, 0, go_at, True, None, q))
          for k in range(procs)]
    for p in ps:
        p.start()
    lines = ends = 0
    t0 = c0 = None
    while ends < NODES:
        obj = msgpack.unpackb(r.recv())
        if obj[0] == "END":
            ends += 1
            continue
        if t0 is None:
            t0, c0 = time.perf_counter(), time.process_time()
        lines += len(obj[2])
    wall, cpu = time.perf_counter() - (t0 or 0), time.process_time() - (c0 or 0)
    for p in ps:
        p.join()
    r.close()
    ctx.term()
    return {"lines": lines, "lines_s": lines / wall, "cpu_us_line": cpu / lines * 1e6}


def coordinator(run_dir: str, judge: bool = True) -> Coordinator:
    from neuron_watch.config import WatchConfig
    from neuron_watch.coordinator import default_judge_factory

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
        go_at = time.time() + 1.5
        ps = [mp.Process(target=agent_proc, args=(k * per, per, c.endpoint, seconds, 0, go_at, False, None, q))
              for k in range(procs)]
        for p in ps:
            p.start()
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
                "unacked": unacked,
                "ingested_total": s["lines"], "agent_dropped": dropped,
                "seq_lost": sum(n["seq"]["lost"] for n in s["nodes"].values()), "nodes": len(s["nodes"])}


def verdict_latency(procs: int, trials: int, rate: float) -> list[float]:
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(d)
        q: mp.Queue[tuple[float, ...]] = mp.Queue()
        per = NODES // procs
        go_at = time.time() + 1.5
        hang_at = [go_at + 1.0 + 0.5 * k for k in range(trials)]
        seconds = 1.0 + 0.5 * trials + 0.5
        ps = [mp.Process(target=agent_proc, args=(k * per, per, c.endpoint, seconds, rate, go_at, False,
                                                   hang_at if k == 0 else None, q)) for k in range(procs)]
        for p in ps:
            p.start()
        lat: list[float] = []
        pending = list(hang_at)
        while any(p.is_alive() for p in ps):
            c.poll(0.01)
            v = c.tick(time.monotonic())
            if v is not None and v.label.value == "collective_hang" and pending:
                lat.append(time.time() - pending.pop(0))
                # Start the next trial with a fresh judge; no recovery in the benchmark.
                assert c.judge_factory is not None
                c.judge = c.judge_factory(0, time.monotonic())
                c.phase = type(c.phase).RUNNING
        for _ in ps:
            q.get()
        for p in ps:
            p.join()
        c.close()
        return lat


def agent_cpu(seconds: float) -> float:
    """CPU seconds per wall second of one node's agent at 1,000 lines/s, in its sending window."""
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(d)
        q: mp.Queue[tuple[float, ...]] = mp.Queue()
        # A 50 ms loop, as the wrapper's tail loop: lines are batched per turn anyway.
        p = mp.Process(target=agent_proc, args=(0, 1, c.endpoint, seconds, 1000.0, time.time() + 1.0, False,
                                                 None, q, 0.05))
        p.start()
        while p.is_alive():
            c.poll(0.01)
            c.tick(time.monotonic())
        sent, _dropped, _unacked, cpu = q.get()
        p.join()
        c.close()
        print(f"  (agent sent {sent:,.0f} lines in {seconds:.0f} s)", flush=True)
        return cpu / seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rate", type=float, default=100.0, help="lines/s per node during the latency runs")
    a = ap.parse_args()
    mp.set_start_method("fork")
    print(f"# {NODES} nodes x {RANKS} ranks = {NODES * RANKS} rank streams, {a.procs} agent processes, "
          f"{os.cpu_count()} cores, batches of 500 lines", flush=True)
    raw = raw_pull(a.procs, a.seconds)
    print(f"raw pyzmq PUSH/PULL (msgpack batch, decode only): {raw['lines_s']:,.0f} lines/s, "
          f"receiver {raw['cpu_us_line']:.3f} us CPU/line", flush=True)
    for judge in (False, True):
        ing = ingest(a.procs, a.seconds, judge)
        what = "auth+decode+seq+merged.log+judge" if judge else "auth+decode+seq+merged.log, no judge"
        print(f"coordinator ingest ({what}): {ing['lines_s']:,.0f} lines/s "
              f"= {100 * ing['lines_s'] / raw['lines_s']:.1f}% of raw, {ing['cpu_us_line']:.2f} us CPU/line; "
              f"nodes {ing['nodes']}, sent {ing['sent']:,}, ingested {ing['ingested_total']:,}, "
              f"agent-dropped {ing['agent_dropped']:,}, still buffered when the agents stopped {ing['unacked']:,}, "
              f"sequence-lost msgs {ing['seq_lost']}", flush=True)
    lat = verdict_latency(a.procs, a.trials, a.rate)
    if lat:
        qs = statistics.quantiles(lat, n=100) if len(lat) > 1 else lat * 99
        print(f"verdict latency (hang line injected -> collective_hang verdict, 64 nodes at {a.rate:,.0f} "
              f"lines/s each): n={len(lat)} p50 {1000 * statistics.median(lat):.1f} ms, p99 {1000 * qs[98]:.1f} ms, "
              f"max {1000 * max(lat):.1f} ms", flush=True)
    else:
        print("verdict latency: no verdict observed", flush=True)
    cpu = agent_cpu(5.0)
    print(f"agent CPU at 1,000 lines/s (one node, 32 ranks): {100 * cpu:.2f}% of one core", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
