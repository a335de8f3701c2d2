"""``--metrics HOST:PORT``: the coordinator's metrics over HTTP for Prometheus (``/metrics``).

    sink = MetricsSink("0.0.0.0:9400", job_id)     # binds now; serves in threads of its own
    coord.events.attach(sink)                      # every event of the job
    coord.status_listeners.append(sink.status)     # each status document (about once a second)
    ...
    sink.close()      # with the coordinator (EventLog.close), once its scrapers fetched the final values

The coordinator's loop only folds what it already has into :class:`~neuron_watch.outputs.metrics.JobMetrics`
under a lock held for that fold. A scrape runs in ``prometheus_client``'s server thread: it computes
the goodput figures (at most every :data:`GOODPUT_EVERY` seconds, outside the lock) and maps the
folded state to metric families. A slow or stuck scraper never delays the loop.

``prometheus_client`` answers in the classic text format, or in OpenMetrics when the scraper asks
for it (``Accept: application/openmetrics-text``), as Prometheus does.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from neuron_watch.events import JobState
from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.metrics import Family, JobMetrics, Scrapers, fold_ranks
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


#: the end states a job reaches by itself: its final values are worth a wait (after a signal, the
#: operator's stop comes first)
ENDS_WORTH_A_WAIT = frozenset({JobState.FINISHED.value, JobState.FAILED.value})


class MetricsSink(MetricsFold):
    """An event sink and status listener that serves the job's metrics on ``address`` (HOST:PORT).

    ``final_wait``: at the job's end, :meth:`close` keeps serving until every scraper that has been
    scraping regularly has fetched the final values once (:class:`~neuron_watch.outputs.metrics.Scrapers`:
    about two of its intervals at most), for at most this many seconds; 0 closes at once. Not after
    a signal (a job ``interrupted``): the operator's stop comes first. Scrapers are told apart by
    address and user agent.

    Raises:
        OSError: the address cannot be bound (in use, not this host's).
    """

    def __init__(self, address: str, job_id: str, wall: Callable[[], float] = time.time,
                 final_wait: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(job_id, "--metrics", wall)
        host, _, port = address.rpartition(":")
        self.address = address
        self.final_wait = final_wait
        self._clock = clock
        self._scrapers = Scrapers()
        self._scraped = threading.Condition()
        registry = CollectorRegistry()
        registry.register(_Collector(self))
        self._server = _serve(host, int(port), self._counting(make_wsgi_app(registry)))
        self._thread = threading.Thread(target=self._server.serve_forever, name="neuron-watch-metrics", daemon=True)
        self._thread.start()
        self.port: int = self._server.server_port

    def _counting(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """``app`` (prometheus_client's), each scrape of it that is sent whole noted in the book."""

        def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            started = self._clock()
            said: list[tuple[str, list[tuple[str, str]]]] = []
            body = list(app(environ, lambda status, headers, exc_info=None: said.append((status, headers))))
            status, headers = said[-1]
            if not any(k.lower() == "content-length" for k, _ in headers):
                headers = [*headers, ("Content-Length", str(sum(map(len, body))))]
            start_response(status, headers)
            scrape = environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO") != "/favicon.ico"
            if not (scrape and status.startswith("200")):
                return body
            who = f"{environ.get('REMOTE_ADDR', '?')} {environ.get('HTTP_USER_AGENT', '-')}"
            return self._noted(body, who, started)

        return counted

    def _noted(self, body: list[bytes], who: str, started: float) -> Iterator[bytes]:
        yield from body
        # here once the server asked for more after writing the last chunk: the scrape was sent
        with self._scraped:
            self._scrapers.scraped(who, started)
            self._scraped.notify_all()

    @property
    def scrapes_served(self) -> int:
        """Whole scrapes served so far. A scrape is noted once the server has written its last
        chunk, which can be after the scraper has read it all."""
        with self._scraped:
            return self._scrapers.served_total

    def close(self, timeout: float = 5.0) -> None:
        """Serve the final values to the scrapers that have been scraping (``final_wait``), then
        stop serving: the listening socket is closed when this returns. A scraper that did not
        fetch them is said."""
        with self._lock:
            ended = self._metrics.state in ENDS_WORTH_A_WAIT
        with self._scraped:
            closing = self._clock()
            self._scrapers.close(closing, self.final_wait if ended else 0.0)
            while (left := self._scrapers.wait(self._clock())) > 0:
                self._scraped.wait(left)
            waited, missed = self._clock() - closing, self._scrapers.missed()
        if waited > 0:
            log.info("--metrics %s: waited %.1fs at the end for its scrapers to fetch the final values", self.address,
                     waited)
        for m in missed:
            log.warning("--metrics %s: %s did not fetch the job's final values within %gs (it scraped every "
                        "~%.0fs; its last scrape began %.1fs before the end)", self.address, m.scraper,
                        self.final_wait, m.interval, m.last_before_end)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)


def _serve(host: str, port: int, app: Callable[..., Iterable[bytes]]) -> ThreadingWSGIServer:
    """``app`` served on ``host:port`` by a server of threads (as ``prometheus_client.start_http_server``,
    whose app cannot be wrapped), IPv6 where ``host`` is such an address."""

    family, _, _, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(str(where[0]), port, app, Server, handler_class=_Quiet)
    assert isinstance(server, Server)
    return server


class _Quiet(WSGIRequestHandler):
    """No line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Collector(Collector):
    def __init__(self, sink: MetricsSink) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        for f in self.sink.families():
            yield to_prometheus(f)
