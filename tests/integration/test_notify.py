"""``--notify``: messages POSTed to a real local HTTP server (http.server on loopback), in order;
none and no harm when it is down; a full queue and failures counted; the URL's secrets never logged."""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from neuron_watch.config import load_config
from neuron_watch.errors import ConfigError
from neuron_watch.events import iso_utc
from neuron_watch.outputs.notify import NotifySink, message
from neuron_watch.redact import shown_url
from tests.fixtures.procs import free_port

pytestmark = pytest.mark.integration

T0 = 1_800_000_000.0


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


class Receiver(http.server.ThreadingHTTPServer):
    """A webhook on loopback: keeps every JSON body POSTed to it, in arrival order."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.status = status
        self.got = threading.Condition()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.got:
            self.server.bodies.append(body)
            self.server.paths.append(self.path)
            self.server.got.notify_all()
        self.send_response(self.server.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # the test's output is not the server's log
        pass


@contextlib.contextmanager
def receiver(status: int = 200) -> Iterator[Receiver]:
    server = Receiver(status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


RUN = [
    ev(0, "job_started", 0, job_id="j-7"),
    ev(1, "progress", 0, step=1),
    ev(30, "verdict", 0, label="collective_hang", action="restart", culprit={"node": "n0", "rank": 2}),
    ev(33, "incident", 0, incident=1, label="collective_hang", culprit={"node": "n0", "rank": 2},
       artifacts="/runs/j-7/incidents/incident-1"),
    ev(35, "restart", 1, checkpoint="/ckpt/step_5", restarts=1),
    ev(60, "job_finished", 1, exit_code=0, state="finished", restarts=1, incidents=1, last_step=20,
       reason="every node finished"),
]


def test_the_messages_of_a_run_arrive_in_order_with_text_and_fields() -> None:
    with receiver() as server:
        sink = NotifySink(f"http://127.0.0.1:{server.server_port}/hooks/T000/B000/s3cret", "j-7")
        for e in RUN:
            sink.emit(e)
        sink.close(timeout=10)
        assert sink.sent == 2 and sink.failed == 0 and sink.dropped == 0
    assert [b["event"] for b in server.bodies] == ["incident", "job_finished"]
    assert server.paths == ["/hooks/T000/B000/s3cret"] * 2
    incident, end = server.bodies
    assert incident["text"] == "neuron-watch job j-7: incident 1: collective_hang, culprit n0 rank 2 (generation 0)"
    assert (incident["label"], incident["culprit"], incident["incident"]) == ("collective_hang",
                                                                             {"node": "n0", "rank": 2}, 1)
    assert end["text"] == "neuron-watch job j-7: job finished, exit code 0, 1 restart(s), last step 20"
    assert (end["state"], end["exit_code"], end["job_id"]) == ("finished", 0, "j-7")


def test_a_give_up_is_a_message_and_credentials_in_its_fields_are_masked() -> None:
    msg = message(ev(9, "gave_up", 2, label="oom", reason="restarts exhausted (s3://AKIA:secret@bucket/x)"), "j")
    assert msg is not None and msg["event"] == "gave_up"
    assert "secret" not in json.dumps(msg) and "oom" in msg["text"]
    assert message(ev(9, "progress", 0, step=3), "j") is None


def test_a_receiver_that_is_down_gets_nothing_costs_a_bounded_close_and_is_reported(
        caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    caplog.set_level(logging.INFO, logger="neuron_watch")
    sink = NotifySink(f"http://user:pa55word@127.0.0.1:{port}/hooks/T000/B000/s3cret", "j-7")
    for e in RUN:
        sink.emit(e)  # never blocks, whatever the receiver does
    sink.close(timeout=5)
    # the close's deadline cut the retries' waits short: each message was tried and failed
    assert (sink.sent, sink.failed, sink.dropped) == (0, 2, 0)
    assert f"notify http://127.0.0.1:{port}/...: 0 message(s) sent, 2 failed" in caplog.text
    assert "retrying in" in caplog.text  # tenacity's wait is said before it is slept
    assert "s3cret" not in caplog.text and "pa55word" not in caplog.text


def test_a_server_error_is_retried_and_counted_as_failed() -> None:
    with receiver(status=503) as server:
        sink = NotifySink(f"http://127.0.0.1:{server.server_port}/x", "j")
        sink.emit(RUN[3])
        sink.close(timeout=20)
    assert len(server.bodies) == 4  # the first attempt and 3 retries, then it gives up
    assert (sink.sent, sink.failed) == (0, 1)


def test_a_full_queue_drops_and_counts_the_newest() -> None:
    release = threading.Event()

    def stuck(url: str, body: bytes) -> None:
        release.wait(10)

    sink = NotifySink("http://127.0.0.1:9/x", "j", post=stuck)
    for i in range(150):
        sink.emit(ev(i, "incident", 0, incident=i, label="oom", culprit=None))
    assert sink.dropped >= 150 - 100 - 1  # the queue holds 100; one may be in the sender's hands
    release.set()
    sink.close(timeout=10)
    assert sink.sent + sink.dropped == 150


def test_the_option_takes_http_urls_only_and_never_shows_a_webhooks_secret() -> None:
    cfg = load_config({"notify": "https://hooks.example.com/services/T0/B0/s3cret"}, {})
    assert cfg.notify == "https://hooks.example.com/services/T0/B0/s3cret"
    assert cfg.redacted()["notify"] == "https://hooks.example.com/..."
    with pytest.raises(ConfigError) as err:
        load_config({"notify": "ftp://u:s3cret@host/x"}, {})
    assert "--notify" in str(err.value) and "s3cret" not in str(err.value)
    with pytest.raises(ConfigError):
        load_config({}, {"NEURON_WATCH_NOTIFY": "http://hooks.example.com:99999/s3cret"})
    assert shown_url("https://u:p@hooks.example.com:8443/services/s3cret?x=1") == "https://hooks.example.com:8443/..."
