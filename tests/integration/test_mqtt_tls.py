"""MqttSink over TLS with a user name and password, against a real mosquitto with a test CA."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.outputs.mqtt import MqttSink, parse_mqtt_url
from tests.conftest import require_binary
from tests.fixtures.mqtt import Mosquitto, free_port, pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PASSWORD = "s3cr:et!"  # ':' and '!' must be percent-encoded in the URL and decoded by the parser
URL_PASSWORD = "s3cr%3Aet%21"


def make_certs(d: Path) -> None:
    """A throwaway CA and a server certificate for 127.0.0.1 (IP SAN: Python checks it)."""
    openssl = require_binary("openssl")

    def run(*argv: str) -> None:
        subprocess.run([openssl, *argv], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=neuron-watch test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "1", "-extfile", "san.ext")


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[Mosquitto, int]]:
    """A broker with a TLS + password listener (for the sink) and a plain anonymous one (for the recorder)."""
    d = tmp_path / "tls"
    d.mkdir()
    make_certs(d)
    subprocess.run([require_binary("mosquitto_passwd"), "-b", "-c", str(d / "passwd"), "alice", PASSWORD],
                   check=True, capture_output=True)
    plain, tls = free_port(), free_port()
    listeners = (
        "per_listener_settings true\n"
        f"listener {tls} 127.0.0.1\ncafile {d}/ca.pem\ncertfile {d}/server.pem\nkeyfile {d}/server.key\n"
        f"password_file {d}/passwd\nallow_anonymous false\n"
        f"listener {plain} 127.0.0.1\nallow_anonymous true\n"
    )
    broker = Mosquitto(d, port=plain, listeners=listeners)
    broker.start()
    yield broker, tls
    broker.stop()
    assert not any(pid_alive(p) for p in broker.pids)


def test_tls_with_password_publishes(tls_broker: tuple[Mosquitto, int], mqtt_recorder: Any,
                                     caplog: pytest.LogCaptureFixture) -> None:
    broker, tls = tls_broker
    rec = mqtt_recorder(broker, "secure/#")
    url = f"mqtts://alice:{URL_PASSWORD}@127.0.0.1:{tls}/secure?ca={broker.dir}/ca.pem"
    caplog.set_level(logging.DEBUG)
    sink = MqttSink(parse_mqtt_url(url), job_id="tls-job")
    sink.emit({"event": "job_started", "generation": 0})
    assert rec.wait_for(lambda m: any(t == "secure/tls-job/job_started" for t, _p, _r in m))
    sink.close(timeout=5)
    assert sink.stats()["published"] == 1
    assert PASSWORD not in caplog.text and URL_PASSWORD not in caplog.text
    assert "mqtts://***@127.0.0.1" in caplog.text  # the summary line names the broker, not the password


@pytest.mark.parametrize("problem", ["wrong_password", "untrusted_ca"])
def test_refused_connection_buffers_and_never_leaks_the_password(
    tls_broker: tuple[Mosquitto, int], problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker, tls = tls_broker
    if problem == "wrong_password":
        url = f"mqtts://alice:not-{URL_PASSWORD}@127.0.0.1:{tls}/secure?ca={broker.dir}/ca.pem"
    else:  # the system trust store does not know our test CA
        url = f"mqtts://alice:{URL_PASSWORD}@127.0.0.1:{tls}/secure"
    caplog.set_level(logging.DEBUG)
    sink = MqttSink(parse_mqtt_url(url), job_id="refused", backoff=(0.05, 0.2))
    sink.emit({"event": "job_started", "generation": 0})
    # poll until the refusal was logged (a real attempt was made), with a deadline
    deadline = time.monotonic() + 20
    while "broker unreachable" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "broker unreachable" in caplog.text
    sink.close(timeout=0.2)
    stats = sink.stats()
    assert (stats["published"], stats["unsent_at_close"]) == (0, 1)
    assert PASSWORD not in caplog.text and URL_PASSWORD not in caplog.text
