"""The --mqtt URL parser, topic levels and job states: pure, no broker."""

from __future__ import annotations

import pytest

from neuron_watch.errors import UsageError
from neuron_watch.outputs.mqtt import MqttTarget, job_state, parse_mqtt_url, redact_url, topic_level


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtt://broker:1884/ops/train", MqttTarget("broker", 1884, "ops/train")),
        ("mqtt://broker", MqttTarget("broker", 1883, "neuron-watch")),
        ("mqtts://broker/", MqttTarget("broker", 8883, "neuron-watch", tls=True)),
        ("MQTTS://u%40x:p%3Aw@10.0.0.5:8884/nw?ca=/etc/ca.pem",
         MqttTarget("10.0.0.5", 8884, "nw", True, "u@x", "p:w", "/etc/ca.pem")),
        ("mqtt://alice@broker:1883/nw", MqttTarget("broker", 1883, "nw", username="alice")),
        ("mqtt://[::1]:1883/nw", MqttTarget("::1", 1883, "nw")),
    ],
)
def test_parse_valid(url: str, expected: MqttTarget) -> None:
    assert parse_mqtt_url(url) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://broker:1883/nw", "scheme must be mqtt or mqtts, not 'http'"),
        ("broker:1883", "scheme must be mqtt or mqtts"),
        ("mqtt://:1883/nw", "no broker host"),
        ("mqtt://broker:99999/nw", "out of range"),
        ("mqtt://broker:0/nw", "port 0"),
        ("mqtt://broker:abc/nw", "could not be cast"),
        ("mqtt://broker/a/#", "may not contain +, #"),
        ("mqtt://broker/a//b", "empty levels"),
        ("mqtt://broker/nw?tls=1", "unknown query parameter(s) tls"),
        ("mqtt://broker/nw?ca=x.pem", "?ca= needs mqtts://"),
        ("mqtt://:secret@broker/nw", "a password without a user name"),
    ],
)
def test_parse_errors_name_the_problem(url: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_mqtt_url(url)
    assert problem in info.value.message
    assert info.value.hint


@pytest.mark.parametrize("url", ["http://bob:hunter2@broker:1883/nw", "mqtt://bob:hunter2@broker:99999/nw",
                                 "mqtt://bob:hunter2@broker/nw?x=1", "mqtt://:hunter2@broker/nw"])
def test_errors_never_show_the_password(url: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_mqtt_url(url)
    assert "hunter2" not in str(info.value)


def test_target_repr_and_redacted_hide_credentials() -> None:
    t = parse_mqtt_url("mqtts://bob:hunter2@broker:8883/nw")
    assert "hunter2" not in repr(t)
    assert t.redacted() == "mqtts://***@broker:8883/nw"
    assert redact_url("mqtt://bob:hunter2@b:1/x") == "mqtt://***@b:1/x"
    assert redact_url("nonsense") == "<not a URL>"


def test_topic_level_removes_wildcards_and_separators() -> None:
    assert topic_level("12345") == "12345"
    assert topic_level("a/b+c#d") == "a_b_c_d"
    assert topic_level("") == "_"


@pytest.mark.parametrize(
    ("event", "state"),
    [
        ({"event": "job_started"}, "running"),
        ({"event": "verdict", "label": "compiling", "action": "wait"}, "compiling"),
        ({"event": "verdict", "label": "comm_timeout_transient", "action": "wait"}, "running"),
        ({"event": "verdict", "label": "healthy", "action": "wait"}, "running"),
        ({"event": "verdict", "label": "collective_hang", "action": "restart"}, "failing"),
        ({"event": "incident"}, "recovering"),
        ({"event": "restart"}, "restarting"),
        ({"event": "job_finished"}, "finished"),
        ({"event": "checkpoint"}, None),
    ],
)
def test_job_state(event: dict[str, str], state: str | None) -> None:
    assert job_state(event) == state
