"""URL user info is masked by structure: a raw '@' in a password, token-only
URLs, several URLs in one value; and the config and env.json writers use it."""

from __future__ import annotations

import pytest

from neuron_watch.config import load_config
from neuron_watch.outputs.mqtt import parse_mqtt_url
from neuron_watch.redact import REDACTED, mask_urls, mask_value, redact_env


@pytest.mark.parametrize(("text", "masked"), [
    ("mqtt://alice:p@ss@broker:1883/nw", "mqtt://***@broker:1883/nw"),
    ("mqtts://TOKEN123@broker/nw", "mqtts://***@broker/nw"),
    ("mqtt://a:b@c@d@broker", "mqtt://***@broker"),
    ("https://u:pw@h/p?email=x@y.z", "https://***@h/p?email=x@y.z"),  # '@' after the authority stays
    ("x https://u:pw@h/a y mqtt://t@b", "x https://***@h/a y mqtt://***@b"),
    ("http://h/p@x", "http://***@x"),  # a token holding "/" looks the same: masked
    ("no url here", "no url here"),
    ("host:1883", "host:1883"),
    ("", ""),
])
def test_mask_urls(text: str, masked: str) -> None:
    assert mask_urls(text) == masked


def test_the_host_is_the_one_urlsplit_authenticates_to() -> None:
    url = "mqtt://alice:Xq7@tail-SECRET@127.0.0.1:1883/nw"
    t = parse_mqtt_url(url)
    assert (t.host, t.password) == ("127.0.0.1", "Xq7@tail-SECRET")
    assert mask_urls(url) == "mqtt://***@127.0.0.1:1883/nw"


def test_mask_value_walks_containers() -> None:
    assert mask_value({"a": ["mqtt://u:p@h", 3], "b": ("x://t@y",)}) == {"a": ["mqtt://***@h", 3], "b": ["x://***@y"]}


def test_config_redacted_masks_a_raw_at_password() -> None:
    cfg = load_config({"mqtt": "mqtt://alice:Xq7@tail-SECRET@broker:1883/nw"}, {})
    red = cfg.redacted()
    assert red["mqtt"] == "mqtt://***@broker:1883/nw"
    assert "tail-SECRET" not in repr(red) and "Xq7" not in repr(red)


def test_env_json_masks_a_token_only_mqtt_url() -> None:
    red = redact_env({"NEURON_WATCH_MQTT": "mqtt://tok-SECRET@broker/nw",
                      "HTTP_PROXY": "http://u:p@ss-SECRET@proxy:3128"})
    assert red == {"HTTP_PROXY": "http://***@proxy:3128", "NEURON_WATCH_MQTT": "mqtt://***@broker/nw"}


@pytest.mark.parametrize(
    ("name", "value", "expect"),
    [
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", REDACTED),
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", REDACTED),
        ("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLE", REDACTED),
        ("NEURON_WATCH_SECRET", "hunter2", REDACTED),
        ("HF_TOKEN", "hf_abc", REDACTED),
        ("DB_PASSWORD", "pw", REDACTED),
        ("my_api_key", "sk-live-0123456789", REDACTED),
        ("MLFLOW_TRACKING_URI", "https://alice:s3cr3t@mlflow.internal:5000/x", "https://***@mlflow.internal:5000/x"),
        ("NOTE", "uses AKIAIOSFODNN7EXAMPLE today", "uses AKIA**************** today"),
        ("NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY", "/fsx/dumps/%d-%c", "/fsx/dumps/%d-%c"),
        ("MASTER_ADDR", "10.0.0.1", "10.0.0.1"),
        ("EMPTY_TOKEN", "", ""),
    ],
)
def test_redact_env(name: str, value: str, expect: str) -> None:
    out = redact_env({name: value})
    assert out == {name: expect}
    if expect == REDACTED:
        assert value not in str(out)
