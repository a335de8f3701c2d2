"""``--metrics``' and ``--cloudwatch``'s cost (prints figures; no pass/fail): what the coordinator's
loop pays, a scrape, and a CloudWatch publish's data.

    .venv/bin/python tests/benchmarks/bench_metrics.py [--ranks 65536] [--events 20000] [--repeat 20]

The loop folds each status document (about one a second; its ranks are only scanned for a
synced save) and each event; a scrape (in the HTTP server's thread) counts the newest document's
ranks by state, maps the folded figures to families and renders them, and every 10 s also
computes the goodput figures over the kept events. Printed: milliseconds per status document,
per count of the ranks, microseconds per event, milliseconds per scrape and per goodput computation;
for CloudWatch (its thread, every --cloudwatch-interval), the milliseconds to turn the families into
``MetricData`` and cut the requests, the values and the bytes of one publish.
"""

from __future__ import annotations

import argparse
import time

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from neuron_watch.events import iso_utc
from neuron_watch.outputs.cloudwatch import batches, datum_bytes, dimensions, metric_data
from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.metrics import JobMetrics, fold_ranks
from neuron_watch.outputs.metrics_http import to_prometheus
from neuron_watch.outputs.status import RANK_STATES

T0 = 1_800_000_000.0


def status_doc(ranks: int, at: float, step: int) -> dict[str, object]:
    per_node = 32
    return {
        "job_id": "bench", "generation": 0, "state": "running", "label": "healthy", "updated_unix": T0 + at,
        "hang_timeout": 600.0, "hang_timeout_kind": "calibrated", "last_progress": iso_utc(T0 + at), "last_step": step,
        "nodes": {f"n{i}": {"state": "connected"} for i in range(ranks // per_node)},
        "ranks": [{"node": f"n{r // per_node}", "rank": r, "state": "progressing", "last_step": step,
                   "last_line_age": 0.2, "compile_seconds": 0.0} for r in range(ranks)],
        "watchdog_io": {"faults": 0, "degraded": {}, "lost_lines": 0},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=65536)
    ap.add_argument("--events", type=int, default=20000, help="events kept for goodput (progress, verdicts, ...)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    m = JobMetrics("bench", RANK_STATES)
    docs = [status_doc(args.ranks, i, 10 * i) for i in range(2)]
    spent = 0.0
    for i in range(args.repeat):
        t = time.perf_counter()
        m.status(docs[i % 2])
        spent += time.perf_counter() - t
    print(f"status document, {args.ranks} ranks: {1000 * spent / args.repeat:.1f} ms each (loop thread, ~1/s)")
    t = time.perf_counter()
    for i in range(args.repeat):
        fold_ranks(docs[i % 2]["ranks"])  # type: ignore[arg-type]
    print(f"ranks by state, {args.ranks} ranks: {1000 * (time.perf_counter() - t) / args.repeat:.1f} ms "
          "(scrape thread, outside the lock)")

    evs = [{"time": iso_utc(T0 + i), "event": "progress", "generation": 0, "step": i} for i in range(args.events)]
    t = time.perf_counter()
    for e in evs:
        m.event(e)
    print(f"event fold: {1e6 * (time.perf_counter() - t) / len(evs):.2f} us each (loop thread)")

    t = time.perf_counter()
    m.set_goodput(compute_goodput(evs))
    print(f"goodput over {len(evs)} events: {1000 * (time.perf_counter() - t):.0f} ms (scrape thread, <= every 10 s)")

    class Fixed(Collector):
        def collect(self) -> list[object]:  # type: ignore[override]
            return [to_prometheus(f) for f in m.families(T0 + 2)]

    registry = CollectorRegistry()
    registry.register(Fixed())
    t = time.perf_counter()
    for _ in range(args.repeat):
        text = generate_latest(registry)
    print(f"scrape (families + text, {len(text)} bytes): {1000 * (time.perf_counter() - t) / args.repeat:.2f} ms")

    dims = dimensions("bench", {"SLURM_CLUSTER_NAME": "bench-cluster"})
    families = m.families(T0 + 2)
    t = time.perf_counter()
    for _ in range(args.repeat):
        requests = list(batches(metric_data(families, dims, T0 + 2)))
    data = [d for b in requests for d in b]
    print(f"CloudWatch publish data ({len(data)} values, {len(requests)} request(s), "
          f"~{sum(datum_bytes(d) for d in data)} bytes): {1000 * (time.perf_counter() - t) / args.repeat:.2f} ms "
          "(its thread, every --cloudwatch-interval)")


if __name__ == "__main__":
    main()
