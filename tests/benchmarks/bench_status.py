"""Status at scale: status.json and ``neuron-watch status --json`` for 1,024 nodes x 64 ranks. Prints figures only.

    .venv/bin/python tests/benchmarks/bench_status.py [--nodes 1024] [--ranks 64] [--odd 40]   # ~1 min

A real coordinator (its judge of the packaged knowledge base) takes one batch per node: every
rank's step line (a progress row each, as the agents send them), ``--odd`` ranks a step behind
and ``--odd`` ranks printing a CCOM RX wait. Then, at a time when a few ranks are silent: the
time to build status.json's summary kept by changes (``Coordinator.status_summary``: the first one
reads every rank; the next, after another batch of every rank, only what changed), the document
listing every rank (``ranks.json``, a status query) and its summary from scratch (as before the
book), to write status.json and ranks.json, their sizes, and ``neuron-watch status RUN-DIR
--json`` as a process (its wall time and output size), with and without ``--ranks``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_wire import JOB, SECRET  # tests/benchmarks is on sys.path: run as a script

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import LogLine, RankKey, RankSpan
from neuron_watch.job.coordinator import Coordinator, coordinator_settings
from neuron_watch.outputs.status import summarise
from neuron_watch.runtime import default_judge_factory

RX = "2026-Nov-21 13:05:00.000001 4000:0 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying"


def fill(c: Coordinator, nodes: int, ranks: int, odd: int, t: float) -> None:
    """One batch per node, handed to the judge as the coordinator hands an agent's."""
    judge = c.judge
    assert judge is not None
    kb = default_knowledge_base()
    step_sig = kb.classify("step 1000 loss 2.5").signature.id  # type: ignore[union-attr]
    late = {(k * 7919) % (nodes * ranks) for k in range(odd)}
    waits = {(k * 104729 + 13) % (nodes * ranks) for k in range(odd)}
    for n in range(nodes):
        rows: list[RankSpan] = []
        progress: list[LogLine] = []
        matches: list[LogLine] = []
        for i in range(ranks):
            g = n * ranks + i
            key = RankKey(f"node{n:04d}", g)
            step = 998 if g in late else 1000
            text = f"step {step} loss 2.5 lr 1e-4"
            rows.append(RankSpan(key, t - 0.5, t - 0.1, text))
            progress.append(LogLine(key, text, t - 0.1, t - 0.1, "", 0, step_sig, step, 2.5))
        judge.observe_batch(rows, matches, progress)
        for g in (x for x in waits if x // ranks == n):
            key = RankKey(f"node{n:04d}", g)
            line = LogLine(key, RX, t, t, signature=kb.classify(RX).signature.id)  # type: ignore[union-attr]
            judge.observe_batch([RankSpan(key, t, t, RX)], [line])


def cli(run_dir: str, *extra: str) -> tuple[float, int, int]:
    """``neuron-watch status RUN-DIR --json``: wall seconds, output bytes, exit code."""
    exe = os.path.join(os.path.dirname(sys.executable), "neuron-watch")
    t0 = time.perf_counter()
    p = subprocess.run([exe, "status", run_dir, "--json", "--stale-after", "1e9", *extra], capture_output=True,
                       timeout=300, check=False)
    return time.perf_counter() - t0, len(p.stdout), p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--odd", type=int, default=40, help="ranks two steps behind, and ranks waiting on a peer")
    a = ap.parse_args()
    config = WatchConfig()
    with tempfile.TemporaryDirectory() as d:
        c = Coordinator("127.0.0.1:0", SECRET, d, job=JOB, judge_factory=default_judge_factory(config),
                        settings=coordinator_settings(config, None), announce=False)
        try:
            t = c.clock()
            fill(c, a.nodes, a.ranks, a.odd, t)
            now = t + 5.0
            t0 = time.process_time()
            c.status_summary(now)
            first = time.process_time() - t0
            first_reread = c.status_book.reread
            fill(c, a.nodes, a.ranks, a.odd, t + 1.0)  # every rank's next step
            now += 1.0
            t0 = time.process_time()
            c.status_summary(now)
            kept = time.process_time() - t0
            t0 = time.process_time()
            doc = c.status_doc(now)
            built = time.process_time() - t0
            t0 = time.process_time()
            summarise(doc)
            scratch = time.process_time() - t0
            t0 = time.process_time()
            c.write_status(now)  # the summary (kept), then every rank's document again for ranks.json
            wrote = time.process_time() - t0
            status = Path(d, "status.json").stat().st_size
            every = Path(d, "ranks.json")
            whole = len(json.dumps(doc))
            t0 = time.process_time()
            json.dumps(doc)
            dump_whole = time.process_time() - t0
            print(f"# {a.nodes} nodes x {a.ranks} ranks = {a.nodes * a.ranks:,} ranks; {2 * a.odd} odd ones")
            print(f"status.json's summary kept by changes: {kept * 1000:.1f} ms CPU ({c.status_book.reread:,} ranks "
                  f"read again; the first one {first * 1000:.0f} ms, {first_reread:,} read); from scratch "
                  f"{(built + scratch) * 1000:.0f} ms (every rank's document {built * 1000:.0f} ms, its summary "
                  f"{scratch * 1000:.0f} ms)")
            print(f"status document: built in {built * 1000:.0f} ms CPU; status.json and ranks.json (every rank's "
                  f"document built again) written in {wrote * 1000:.0f} ms CPU; status.json {status / 1e3:,.0f} kB "
                  f"(ranks listed {len(json.loads(Path(d, 'status.json').read_text())['ranks'])}), "
                  f"ranks.json {every.stat().st_size / 1e6:,.1f} MB (written every 30 s); the whole document "
                  f"{whole / 1e6:,.1f} MB, {dump_whole * 1000:.0f} ms CPU to encode")
            for extra in ((), ("--ranks",)):
                wall, size, code = cli(d, *extra)
                print(f"neuron-watch status RUN-DIR --json {' '.join(extra)}: {wall * 1000:.0f} ms wall (a process, "
                      f"machine shared), {size / 1e3:,.0f} kB of output, exit {code}")
        finally:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
