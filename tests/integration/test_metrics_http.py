"""``--metrics``' HTTP side for real: ``prometheus_client``'s server on a loopback port, scraped with
urllib in both formats, checked by Prometheus' own ``promtool check metrics``, stopped with the sink."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from neuron_watch.events import iso_utc
from neuron_watch.outputs.metrics_http import MetricsSink
from tests.conftest import require_binary
from tests.fixtures.procs import free_port
from tests.fixtures.wait import wait_for, within

pytestmark = pytest.mark.integration

T0 = 1_800_000_000.0


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


def scrape(port: int, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get("Content-Type", ""), resp.read().decode()


def fed_sink(port: int, **options: Any) -> MetricsSink:
    sink = MetricsSink(f"127.0.0.1:{port}", "job-9", wall=lambda: T0 + 50, **options)
    for e in (ev(0, "job_started", 0), ev(0.1, "recovery_phase", 0, phase="running", previous="starting"),
              ev(5, "progress", 0, step=1),
              ev(30, "verdict", 0, label="collective_hang", action="restart", culprit={"node": "n0", "rank": 2}),
              ev(33, "incident", 0, incident=1, label="collective_hang", culprit={"node": "n0", "rank": 2}),
              ev(35, "restart", 1, checkpoint="/ckpt/step_5", restarts=1),
              ev(40, "progress", 1, step=6)):
        sink.emit(e)
    sink.status({"job_id": "job-9", "generation": 1, "state": "running", "label": "healthy",
                 "updated_unix": T0 + 45, "hang_timeout": 8.0, "hang_timeout_kind": "fixed",
                 "last_progress": iso_utc(T0 + 44), "last_step": 9, "nodes": {"n0": {"state": "connected"}},
                 "ranks": [{"node": "n0", "rank": 0, "state": "progressing", "last_step": 9,
                            "compile_seconds": 0.0}],
                 "watchdog_io": {"faults": 0, "degraded": {}, "lost_lines": 0}})
    return sink


def test_a_scrape_in_both_formats_and_the_port_closed_with_the_sink() -> None:
    port = free_port()
    sink = fed_sink(port)
    try:
        ctype, text = scrape(port)
        assert ctype.startswith("text/plain")
        values = {(s.name, tuple(sorted(s.labels.items()))): s.value
                  for fam in text_string_to_metric_families(text) for s in fam.samples}
        assert values[("neuron_watch_restarts_total", (("label", "collective_hang"),))] == 1
        assert values[("neuron_watch_last_step", ())] == 9
        assert values[("neuron_watch_last_progress_age_seconds", ())] == 6.0  # the sink's wall clock: T0 + 50
        assert values[("neuron_watch_badput_seconds", (("cause", "evidence"),))] == 3.0  # verdict 30 -> incident 33
        ctype, om = scrape(port, "application/openmetrics-text; version=1.0.0")
        assert ctype.startswith("application/openmetrics-text")
        assert "# TYPE neuron_watch_job_state stateset" in om and om.rstrip().endswith("# EOF")
    finally:
        sink.close()
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_an_address_in_use_is_an_error_naming_it() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(OSError):
            MetricsSink(f"127.0.0.1:{held.getsockname()[1]}", "j")


def test_promtool_finds_nothing_to_lint_in_a_scrape() -> None:
    promtool = require_binary("promtool")
    port = free_port()
    sink = fed_sink(port)
    try:
        _, text = scrape(port)
    finally:
        sink.close()
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "" and checked.stderr.strip() == "", checked.stdout + checked.stderr


def test_a_stuck_scraper_holds_up_neither_the_loop_nor_other_scrapes() -> None:
    port = free_port()
    sink = fed_sink(port)
    try:
        with socket.create_connection(("127.0.0.1", port)) as stuck:
            stuck.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never ends its request
            sink.emit(ev(46, "verdict", 1, label="oom", action="restart", culprit=None))  # the loop goes on
            sink.emit(ev(47, "incident", 1, incident=2, label="oom", culprit=None))
            _, text = scrape(port)  # served beside the stuck one
            assert 'neuron_watch_incidents_total{label="oom"} 1.0' in text
    finally:
        sink.close()


def test_a_status_document_the_mapping_cannot_read_is_counted_not_raised_into_the_loop() -> None:
    port = free_port()
    sink = fed_sink(port)
    try:
        sink.status({"updated_unix": T0 + 46, "generation": 1, "nodes": {"n0": None}, "last_progress": object()})
        assert sink.status_failures == 0  # odd fields are skipped by the mapping
        sink.status(["not", "a", "document"])  # type: ignore[arg-type]
        sink.status(["not", "a", "document"])  # type: ignore[arg-type]
        assert sink.status_failures == 2
        _, text = scrape(port)  # still served, from what was read before
        assert 'neuron_watch_restarts_total{label="collective_hang"} 1.0' in text
    finally:
        sink.close()


def values_of(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def ended(sink: MetricsSink, state: str) -> None:
    """The job's end as the coordinator hands it over: its last status document, then ``job_finished``."""
    sink.status({"job_id": "job-9", "generation": 1, "state": state, "label": "healthy", "updated_unix": T0 + 49,
                 "last_step": 14, "nodes": {"n0": {"state": "connected"}}, "ranks": []})
    sink.emit(ev(49, "job_finished", 1, state=state, exit_code=0 if state == "finished" else 143))


def test_the_end_serves_the_final_values_to_a_scraper_before_the_port_closes() -> None:
    port = free_port()
    sink = fed_sink(port, final_wait=60.0)
    seen: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
    stop = threading.Event()

    def scraper() -> None:  # a scraper with its own period, as Prometheus has: until the port closes
        while not stop.is_set():
            try:
                seen.append(values_of(scrape(port)[1]))
            except (urllib.error.URLError, ConnectionError):
                return
            stop.wait(0.2)

    thread = threading.Thread(target=scraper)
    thread.start()
    try:
        wait_for("two scrapes", lambda: len(seen) >= 2 and sink.scrapes_served >= 2, within(60))
        ended(sink, "finished")
    finally:
        sink.close()  # returns once the scraper has fetched the end
        stop.set()
        thread.join()
    final = seen[-1]
    assert final[("neuron_watch_last_step", ())] == 14, seen[-3:]
    assert final[("neuron_watch_job_state", (("neuron_watch_job_state", "finished"),))] == 1
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def stepping(step: float) -> Callable[[], float]:
    """A clock that moves ``step`` seconds at each reading."""
    now = [-step]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def test_a_scraper_that_does_not_come_back_is_said_and_a_stop_by_signal_is_not_waited(
        caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    # read at each scrape (0, 10: every 10 s), at the close (20), then in the wait (30, 40)
    sink = fed_sink(port, final_wait=30.0, clock=stepping(10.0))
    for _ in range(2):
        scrape(port)
    # noted by the server after the scraper has read the body: the close must see both
    wait_for("both scrapes noted", lambda: sink.scrapes_served == 2, within(30))
    ended(sink, "failed")
    with caplog.at_level(logging.WARNING, logger="neuron_watch"):
        sink.close()
    said = [r.getMessage() for r in caplog.records if "final values" in r.getMessage()]
    assert len(said) == 1 and "Python-urllib" in said[0] and "every ~10s" in said[0], said
    caplog.clear()
    port = free_port()
    sink = fed_sink(port, final_wait=600.0, clock=lambda: 0.0)  # a clock that never moves: a wait never ends
    for _ in range(2):
        scrape(port)
    wait_for("both scrapes noted", lambda: sink.scrapes_served == 2, within(30))
    ended(sink, "interrupted")
    with caplog.at_level(logging.WARNING, logger="neuron_watch"):
        sink.close()  # at once
    assert not [r for r in caplog.records if "final values" in r.getMessage()]
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))
