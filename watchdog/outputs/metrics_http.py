"""``--metrics HOST:PORT``: the coordinator's metrics over HTTP for Prometheus (``/metrics``).

    sink = MetricsSink("0.0.0.0:9400", job_id)     # binds now; serves in threads of its own
    coord.events.attach(sink)                      # every event of the job
    coord.status_listeners.append(sink.status)     # each status document (about once a second)
    ...
    sink.close()                                   # with the coordinator (EventLog.close)

The coordinator's loop only folds what it already has into :class:`~neuron_watch.outputs.metrics.JobMetrics`
under a lock held for that fold. A scrape runs in ``prometheus_client``'s server thread: it computes
the goodput figures (at most every :data:`GOODPUT_EVERY` seconds, outside the lock) and maps the
folded state to metric families. A slow or stuck scraper never delays the loop.

``prometheus_client`` answers in the classic text format, or in OpenMetrics when the scraper asks
for it (``Accept: application/openmetrics-text``), as Prometheus does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.exposition import start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.metrics import Family, JobMetrics, fold_ranks
from neuron_watch.outputs.status import RANK_STATES

log = logging.getLogger("neuron_watch")

#: seconds between two computations of the goodput figures (each reads every kept event: its cost
#: grows with the run, tests/benchmarks/bench_metrics.py prints it) ...
GOODPUT_EVERY = 10.0
#: ... or longer, so that they take at most this share of a core as a long job's events grow
GOODPUT_SHARE = 0.02
#: the events goodput.py reads (its module doc); the others are not kept
GOODPUT_EVENTS = frozenset({"job_started", "restart", "progress", "verdict", "compile_start", "compile_end",
                            "compile_report", "checkpoint", "incident", "job_finished"})


def to_prometheus(f: Family) -> Metric:
    """One :class:`Family` as the ``prometheus_client`` family of its kind."""
    m: Metric
    if f.kind == "info":
        info = InfoMetricFamily(f.name.removesuffix("_info"), f.help)
        for s in f.samples:
            info.add_metric([], dict(zip(f.labels, s.values, strict=True)))
        return info
    if f.kind == "stateset":
        m = StateSetMetricFamily(f.name, f.help)
        if f.samples:
            m.add_metric([], {s.values[0]: bool(s.value) for s in f.samples})
        return m
    cls = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
    m = cls(f.name, f.help, labels=list(f.labels))
    for s in f.samples:
        m.add_metric(list(s.values), s.value)
    return m


class MetricsFold:
    """The job's events and status documents folded into :class:`~neuron_watch.outputs.metrics.JobMetrics`
    for a reader in another thread (a scrape here, a CloudWatch publish in ``cloudwatch_put.py``).

    ``emit`` and ``status`` run in the coordinator's loop and hold the lock only for the fold;
    :meth:`families` does the costly parts (goodput over every kept event, the per-rank pass)
    outside it. ``name`` is the option that owns it, for its warnings."""

    def __init__(self, job_id: str, name: str, wall: Callable[[], float] = time.time) -> None:
        self.name = name
        self._wall = wall
        self._lock = threading.Lock()
        self._metrics = JobMetrics(job_id, RANK_STATES)
        self._events: list[dict[str, Any]] = []
        self._goodput_at = -1e18
        self._goodput_every = GOODPUT_EVERY
        self.goodput_failures = 0
        self.status_failures = 0

    def emit(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._metrics.event(event)
            if event.get("event") in GOODPUT_EVENTS:
                self._events.append(event)

    def status(self, doc: dict[str, Any]) -> None:
        """A status listener: called bare by the coordinator's loop (no sink's guard as for events),
        so a fault here is counted and said, never raised into the loop."""
        try:
            with self._lock:
                self._metrics.status(doc)
        except Exception as exc:
            self.status_failures += 1
            if self.status_failures == 1:  # once: it would repeat every second
                log.warning("%s: a status document could not be read: %r", self.name, exc)

    def families(self) -> list[Family]:
        """Every metric now (called in the reader's thread)."""
        now = self._wall()
        if now - self._goodput_at >= self._goodput_every:
            self._goodput_at = now
            with self._lock:
                events = list(self._events)
            spent = time.perf_counter()
            try:
                figures: dict[str, Any] | None = compute_goodput(events)
                self._goodput_every = max(GOODPUT_EVERY, (time.perf_counter() - spent) / GOODPUT_SHARE)
            except Exception as exc:  # a figure, never a reason to fail a scrape
                self.goodput_failures += 1
                log.warning("goodput figures for %s failed: %s", self.name, exc)
                figures = None
            with self._lock:
                self._metrics.set_goodput(figures)
        with self._lock:
            ranks = self._metrics.pending_ranks()
        if ranks is not None:  # the per-rank pass runs outside the lock: the loop never waits on it
            folded = fold_ranks(ranks)
            with self._lock:
                self._metrics.set_rank_figures(ranks, folded)
        with self._lock:
            return self._metrics.families(now)


class MetricsSink(MetricsFold):
    """An event sink and status listener that serves the job's metrics on ``address`` (HOST:PORT).

    Raises:
        OSError: the address cannot be bound (in use, not this host's).
    """

    def __init__(self, address: str, job_id: str, wall: Callable[[], float] = time.time) -> None:
        super().__init__(job_id, "--metrics", wall)
        host, _, port = address.rpartition(":")
        self.address = address
        registry = CollectorRegistry()
        registry.register(_Collector(self))
        self._server, self._thread = start_http_server(int(port), host, registry)
        self.port: int = self._server.server_port

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving: the listening socket is closed when this returns."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)


class _Collector(Collector):
    def __init__(self, sink: MetricsSink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        for f in self.sink.families():
            yield to_prometheus(f)
