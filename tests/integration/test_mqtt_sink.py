"""MqttSink against a real mosquitto: order, broker loss and restart, buffer overflow, last will."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.outputs.mqtt import MqttSink, parse_mqtt_url
from tests.fixtures.mqtt import Mosquitto, pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


def scripted_run() -> list[dict[str, Any]]:
    """The events of a run with a hang and a restart, as the supervisor writes them."""
    t = "2026-11-21T13:00:{:02d}.000Z"
    return [
        {"time": t.format(0), "event": "job_started", "generation": 0},
        {"time": t.format(10), "event": "verdict", "generation": 0, "label": "compiling", "action": "wait"},
        {"time": t.format(30), "event": "verdict", "generation": 0, "label": "collective_hang",
         "action": "restart", "culprit": {"node": "n0", "rank": 3}},
        {"time": t.format(31), "event": "incident", "generation": 0, "label": "collective_hang",
         "artifacts": "incidents/0001"},
        {"time": t.format(32), "event": "restart", "generation": 1, "checkpoint": "ckpt/step_20"},
        {"time": t.format(50), "event": "job_finished", "generation": 1, "exit_code": 0, "restarts": 1},
    ]


def events_in_order(rec_msgs: list[tuple[str, bytes, bool]], prefix: str) -> list[dict[str, Any]]:
    """Event messages (not state), duplicates from QoS-1 redelivery removed, first arrival kept."""
    seen: set[bytes] = set()
    out = []
    for topic, payload, _retain in rec_msgs:
        if topic.startswith(prefix) and not topic.endswith("/state") and payload not in seen:
            seen.add(payload)
            out.append(json.loads(payload))
    return out


def test_subscriber_receives_every_event_in_order(mqtt_broker: Mosquitto, mqtt_recorder: Any) -> None:
    rec = mqtt_recorder(mqtt_broker, "nwtest/#")
    sink = MqttSink(parse_mqtt_url(mqtt_broker.url), job_id="job-order")
    run = scripted_run()
    for ev in run:
        sink.emit(ev)
    sink.close(timeout=10)
    final = sink.stats()
    assert final == {"published": 6, "dropped": 0, "buffered": 0, "unsent_at_close": 0,
                     "connected": final["connected"], "connects": 1}

    assert rec.wait_for(lambda m: len(events_in_order(m, "nwtest/job-order/")) >= len(run))
    got = events_in_order(rec.snapshot(), "nwtest/job-order/")
    assert [g["event"] for g in got] == [e["event"] for e in run]
    assert got[2] == {**run[2], "job_id": "job-order"}
    topics = [t for t, _p, _r in rec.snapshot() if not t.endswith("/state")]
    assert topics == [f"nwtest/job-order/{e['event']}" for e in run]
    states = [s["state"] for s in rec.json_on("/job-order/state")]
    assert states == ["running", "compiling", "failing", "recovering", "restarting", "finished"]

    # A clean close sends no will: a new subscriber gets "finished" as the retained state.
    late = mqtt_recorder(mqtt_broker, "nwtest/job-order/state")
    assert late.wait_for(lambda m: len(m) >= 1)
    _topic, payload, retained = late.snapshot()[0]
    assert retained and json.loads(payload)["state"] == "finished"
    assert json.loads(payload)["exit_code"] == 0


def test_broker_restart_mid_run_loses_nothing(mqtt_broker_restartable: Mosquitto, mqtt_recorder: Any) -> None:
    broker = mqtt_broker_restartable
    rec = mqtt_recorder(broker, "nwtest/#", identifier="nw-recorder-restart")
    sink = MqttSink(parse_mqtt_url(broker.url), job_id="j", backoff=(0.05, 0.5))
    for i in range(5):
        sink.emit({"event": "tick", "generation": 0, "seq": i})
    assert rec.wait_for(lambda m: len(events_in_order(m, "nwtest/j/")) == 5)

    broker.stop()
    # The broker is gone: emit returns at once and everything waits in the buffer.
    for i in range(5, 25):
        sink.emit({"event": "tick", "generation": 0, "seq": i})
    stats = sink.stats()
    assert stats["buffered"] >= 20 - 1  # one may be in flight when the loss was noticed
    assert stats["dropped"] == 0

    broker.start()
    assert rec.wait_for(lambda m: len(events_in_order(m, "nwtest/j/")) == 25, timeout=60)
    got = [e["seq"] for e in events_in_order(rec.snapshot(), "nwtest/j/")]
    assert got == list(range(25))
    sink.close(timeout=10)
    final = sink.stats()
    assert final["published"] == 25 and final["dropped"] == 0 and final["unsent_at_close"] == 0
    assert final["connects"] >= 2


def test_events_beyond_the_buffer_are_counted_as_dropped(
    mqtt_broker_restartable: Mosquitto, mqtt_recorder: Any
) -> None:
    broker = mqtt_broker_restartable
    rec = mqtt_recorder(broker, "nwtest/#", identifier="nw-recorder-drop")
    sink = MqttSink(parse_mqtt_url(broker.url), job_id="d", buffer=5, backoff=(0.05, 0.5))
    sink.emit({"event": "job_started", "generation": 0, "seq": 0})
    assert rec.wait_for(lambda m: len(events_in_order(m, "nwtest/d/")) == 1)
    broker.stop()
    for i in range(1, 13):
        sink.emit({"event": "tick", "generation": 0, "seq": i})
    stats = sink.stats()
    assert (stats["buffered"], stats["dropped"]) == (5, 7)

    broker.start()
    assert rec.wait_for(lambda m: len(events_in_order(m, "nwtest/d/")) == 6, timeout=60)
    got = [e["seq"] for e in events_in_order(rec.snapshot(), "nwtest/d/")]
    assert got == [0, 8, 9, 10, 11, 12]  # the oldest of the outage were dropped, the newest kept
    sink.close(timeout=10)
    final = sink.stats()
    assert (final["published"], final["dropped"], final["unsent_at_close"]) == (6, 7, 0)


def test_emit_with_no_broker_at_all_never_blocks_and_close_reports_unsent() -> None:
    # Nothing listens on this port: connection refused on every attempt.
    from tests.fixtures.mqtt import free_port

    sink = MqttSink(parse_mqtt_url(f"mqtt://127.0.0.1:{free_port()}/nwtest"), job_id="none",
                    buffer=3, backoff=(0.05, 0.2))
    for i in range(10):
        sink.emit({"event": "tick", "generation": 0, "seq": i})
    sink.close(timeout=0.5)
    final = sink.stats()
    assert (final["published"], final["dropped"], final["unsent_at_close"]) == (0, 7, 3)
    sink.emit({"event": "late", "generation": 0})
    assert sink.stats()["dropped"] == 8


CHILD = textwrap.dedent(
    """
    import sys, time
    from neuron_watch.outputs.mqtt import MqttSink, parse_mqtt_url
    sink = MqttSink(parse_mqtt_url(sys.argv[1]), job_id="killed", keepalive=60)
    sink.emit({"event": "job_started", "generation": 0})
    deadline = time.monotonic() + 30
    while sink.stats()["published"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    print("published", sink.stats()["published"], flush=True)
    sys.stdin.read()  # park until killed
    """
)


def test_last_will_when_the_watchdog_is_sigkilled(mqtt_broker: Mosquitto, mqtt_recorder: Any) -> None:
    rec = mqtt_recorder(mqtt_broker, "nwtest/killed/state")
    child = subprocess.Popen([sys.executable, "-c", CHILD, mqtt_broker.url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, start_new_session=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().decode().strip() == "published 1"
        assert rec.wait_for(lambda m: any(json.loads(p)["state"] == "running" for _t, p, _r in m))
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
    assert child.returncode == -signal.SIGKILL
    assert not pid_alive(child.pid)
    assert rec.wait_for(lambda m: json.loads(m[-1][1])["state"] == "watchdog_lost" if m else False)
    assert json.loads(rec.snapshot()[-1][1])["job_id"] == "killed"
