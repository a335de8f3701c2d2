"""Procs messages of a 1,024-node job on the coordinator, isolated. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_procs.py [--nodes 1024] [--rounds 3]     # ~1 min

A coordinator (its judge holding 64 ranks of each node) takes every node's procs messages, signed,
through :meth:`Coordinator.handle`: each reading of 64 rank processes and of the flight recorder
readings of 4 s (each rank read every 5 s, two process groups: ``bench_scale.procs_wire``). Two
cases, each with whole readings and with readings that say what changed since the acknowledged one
(the agents' :class:`~neuron_watch.node.proc_readings.ProcReadings`):

* training: every rank's CPU and collectives move, every row changes between two readings;
* idle: nothing moves (a hung job, or one waiting on a compile): the same reading again and again.

Also the decode of one such body alone (best of 7). CPU time per message: the machine is shared.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import timeit

import msgpack
from bench_scale import JOB, SECRET, node_name, procs_wire  # tests/benchmarks is on sys.path: run as a script

from neuron_watch.config import WatchConfig
from neuron_watch.job.coordinator import Coordinator, coordinator_settings
from neuron_watch.node.proc_readings import ProcReadings
from neuron_watch.runtime import default_judge_factory
from neuron_watch.wire.auth import Signer
from neuron_watch.wire.protocol import Header, Hello, Kind, Procs, decode_body, encode_body, encode_header

RANKS = 64
EVERY = 4.0  # procs_every_at(1,024)




def run(nodes: int, rounds: int, delta: bool, idle: bool) -> float:
    """CPU microseconds per procs message on the coordinator (after one round to fill the judge)."""
    with tempfile.TemporaryDirectory() as d:
        c = Coordinator("127.0.0.1:0", SECRET, d, job=JOB, judge_factory=default_judge_factory(WatchConfig()),
                        settings=coordinator_settings(WatchConfig(), None))
        signer = Signer.for_agent(SECRET, JOB)
        seqs = dict.fromkeys(range(nodes), 0)
        readers = {n: ProcReadings(delta=delta) for n in range(nodes)}

        def frames(n: int, kind: Kind, body: bytes, t: float) -> list[bytes]:
            h = Header(kind=kind, job=JOB, node=node_name(n), session=5, generation=0, seq=seqs[n], base=seqs[n],
                       mono=t, wall=t, sent=t, echo=c.session)
            seqs[n] += 1
            return signer.sign([encode_header(h), body])

        t0 = 100.0
        for n in range(nodes):
            hello = encode_body(Hello("h", 1, tuple(range(n * RANKS, (n + 1) * RANKS))))
            c.handle(b"n%d" % n, frames(n, Kind.HELLO, hello, t0), t0)
        spent, count = 0.0, 0
        for k in range(rounds + 1):
            for n in range(nodes):
                t = t0 + EVERY * k + n / nodes
                w = procs_wire(n, RANKS, 0.0 if idle else EVERY * k, 0 if idle else k, True, int(EVERY))
                r = readers[n]
                whole = decode_body(Kind.PROCS, msgpack.packb(w))
                assert isinstance(whole, Procs)
                body = r.add([], t, nodes, always=True, workers=whole.workers,
                             collectives=[(x.rank, x.groups, "", t) for x in whole.collectives],
                             activity=whole.activity)
                assert body is not None
                r.enqueued(seqs[n])
                f = frames(n, Kind.PROCS, encode_body(body), t)
                c0 = time.process_time()
                c.handle(b"n%d" % n, f, t)
                if k:
                    spent += time.process_time() - c0
                    count += 1
                r.acked(seqs[n] - 1)  # the coordinator's ack
        c.close()
    return spent / count * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    wire = procs_wire(3, RANKS, 12.0, 0, True, int(EVERY))
    frame = msgpack.packb(wire, use_bin_type=True)
    best = min(timeit.repeat(lambda: decode_body(Kind.PROCS, frame), number=2000, repeat=7)) / 2000
    print(f"decode of a procs body ({RANKS} workers, {len(wire[3][1])} flight recorder readings of 2 groups, "
          f"{len(frame):,} B): {best * 1e6:.0f} us (best of 7)", flush=True)
    for idle in (False, True):
        for delta in (False, True):
            us = run(a.nodes, a.rounds, delta, idle)
            print(f"{'idle' if idle else 'training'}, {'what changed' if delta else 'whole readings'}: "
                  f"{us:,.0f} us CPU a procs message on the coordinator ({a.nodes:,} nodes x {RANKS} ranks)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
