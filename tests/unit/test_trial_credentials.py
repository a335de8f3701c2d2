"""Credentials in URLs: an S3 URI with user info is refused; every URL is masked by its structure
whatever its password holds (``#``, ``/``, ``?``, ``@``, raw), and a usage error never shows it."""

from __future__ import annotations

import pytest

from neuron_watch.config import load_config
from neuron_watch.errors import ConfigError, UsageError
from neuron_watch.outputs.mqtt import parse_mqtt_url
from neuron_watch.outputs.storage import S3Storage
from neuron_watch.redact import mask_urls

SECRET = "Tr1al"
#: passwords holding each character that ends a URL's authority or its user info, raw
PASSWORDS = [f"{SECRET}#x", f"{SECRET}/x", f"{SECRET}?x", f"{SECRET}@x", f"a/b?c#d@{SECRET}", f"{SECRET} x"]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("url", ["mqtt://nw:{p}@broker:1883/nw", "s3://AKIDTRIAL:{p}@bucket/prefix",
                                 "https://{p}@proxy:3128", "mqtts://nw:{p}@[::1]/nw?ca=/etc/ca.pem"])
def test_every_url_is_masked_whatever_its_password_holds(url: str, password: str) -> None:
    text = url.format(p=password)
    masked = mask_urls(text)
    assert SECRET not in masked and "AKIDTRIAL" not in masked, masked
    host = url.split("@", 1)[1].format(p=password)
    assert masked == url.split("://", 1)[0] + "://***@" + host
    if " " not in password:  # in free text a URL ends at white space
        # in free text too: a log line, an environment dump, an exception's message
        line = mask_urls(f"upload failed: EndpointError({text!r}) retrying")
        assert SECRET not in line and "***@" in line, line


@pytest.mark.parametrize("password", [p for p in PASSWORDS if " " not in p])
def test_an_s3_uri_with_user_info_is_refused_at_start(password: str) -> None:
    uri = f"s3://AKIDTRIAL:{password}@bucket/prefix"
    with pytest.raises(ConfigError) as e:
        load_config({"artifacts": uri}, {})
    text = str(e.value)
    assert "S3 URI carries no credentials" in text and "AWS_ACCESS_KEY_ID" in text
    assert SECRET not in text and "AKIDTRIAL" not in text, text


def test_an_s3_uri_with_user_info_in_the_environment_is_refused_too() -> None:
    with pytest.raises(ConfigError) as e:
        load_config({}, {"NEURON_WATCH_ARTIFACTS": f"s3://{SECRET}@bucket/p"})
    assert "NEURON_WATCH_ARTIFACTS" in str(e.value) and SECRET not in str(e.value)


@pytest.mark.parametrize("uri", ["s3://bucket/prefix", "s3://bucket/team@x/prefix", "/tmp/artifacts"])
def test_s3_uris_without_user_info_and_directories_are_accepted(uri: str) -> None:
    assert load_config({"artifacts": uri}, {}).artifacts == uri


@pytest.mark.parametrize("password", [f"{SECRET}#x", f"{SECRET}/x", f"{SECRET}?x", f"{SECRET}/1883"])
def test_an_mqtt_password_with_a_raw_delimiter_is_a_usage_error_that_never_shows_it(password: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_mqtt_url(f"mqtt://nw:{password}@127.0.0.1:1883/nw")
    text = str(e.value)
    assert SECRET not in text and "mqtt://***@127.0.0.1:1883/nw" in text, text
    assert "%23" in text  # says how to write it


def test_a_percent_encoded_password_is_read_whole() -> None:
    t = parse_mqtt_url(f"mqtt://nw:{SECRET}%23%2F%3F%40x@127.0.0.1:1883/nw")
    assert (t.host, t.port, t.password) == ("127.0.0.1", 1883, f"{SECRET}#/?@x")
    assert SECRET not in repr(t)


def test_an_upload_error_masks_credentials_in_the_endpoint() -> None:
    store = S3Storage("bucket", "p", endpoint_url=f"http://AKIDTRIAL:{SECRET}/x@127.0.0.1:9")
    msg = store.explain(RuntimeError(f"could not connect to http://AKIDTRIAL:{SECRET}/x@127.0.0.1:9/bucket"))
    assert SECRET not in msg and "AKIDTRIAL" not in msg and "http://***@127.0.0.1:9" in msg, msg
