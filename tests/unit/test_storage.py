"""Pure parts of the artifact store: is_retryable, URI parsing, keys, the local directory store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from neuron_watch.errors import UsageError
from neuron_watch.outputs.storage import LocalStorage, S3Storage, incident_key, is_retryable, open_storage, upload_tree


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


def wrapped(inner: BaseException) -> BaseException:
    """As boto3's upload_file does: raise S3UploadFailedError inside ``except ClientError``."""
    try:
        try:
            raise inner
        except ClientError as e:
            raise S3UploadFailedError(f"Failed to upload: {e}")  # noqa: B904 - boto3 does exactly this
    except S3UploadFailedError as outer:
        return outer
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (client_error("SlowDown", 503), True),
        (client_error("Throttling", 400), True),
        (client_error("RequestTimeout", 400), True),
        (client_error("InternalError", 500), True),
        (client_error("ServiceUnavailable", 503), True),
        (client_error("502", 502), True),
        (client_error("TooManyRequests", 429), True),
        (client_error("AccessDenied", 403), False),
        (client_error("InvalidAccessKeyId", 403), False),
        (client_error("SignatureDoesNotMatch", 403), False),
        (client_error("NoSuchBucket", 404), False),
        (client_error("403", 403), False),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectionResetError(), True),
        (NoCredentialsError(), False),
        (ValueError("bug"), False),
    ],
)
def test_is_retryable(exc: BaseException, retry: bool) -> None:
    assert is_retryable(exc) is retry


def test_is_retryable_looks_through_boto3_wrapping() -> None:
    assert is_retryable(wrapped(client_error("SlowDown", 503))) is True
    assert is_retryable(wrapped(client_error("NoSuchBucket", 404))) is False


def test_open_storage_parses_uris(tmp_path: Path) -> None:
    s = open_storage("s3://bkt/some/prefix/", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1"})
    assert isinstance(s, S3Storage)
    assert (s.bucket, s.prefix, s.endpoint_url, s.uri) == ("bkt", "some/prefix", "http://127.0.0.1:9", "s3://bkt/some/prefix")
    assert isinstance(open_storage(str(tmp_path)), LocalStorage)
    assert isinstance(open_storage(f"file://{tmp_path}"), LocalStorage)
    with pytest.raises(UsageError, match="no bucket"):
        open_storage("s3://", {})
    with pytest.raises(UsageError, match="unsupported scheme"):
        open_storage("gs://x/y", {})


def test_incident_key_layout_and_escape() -> None:
    assert incident_key("job-7", 2, "node-a") == "job-7/incident-2/node-a"
    with pytest.raises(UsageError):
        incident_key("..", 1, "n")


def test_local_storage_roundtrip_resume_and_verify(tmp_path: Path) -> None:
    src = tmp_path / "bundle"
    (src / "stacks").mkdir(parents=True)
    (src / "stacks" / "rank-0.txt").write_text("Thread 1 (idle)\n")
    (src / "manifest.json").write_text("{}")
    store = LocalStorage(tmp_path / "store")
    first = upload_tree(store, src, "job/incident-1/n1", deadline_s=30)
    assert first.ok and first.summary()["uploaded"] == 2
    # manifest goes last: when it is in the store, everything it lists was sent first
    assert first.results[-1].key.endswith("manifest.json")
    assert store.list("job/") == ["job/incident-1/n1/manifest.json", "job/incident-1/n1/stacks/rank-0.txt"]
    digest = hashlib.sha256(b"Thread 1 (idle)\n").hexdigest()
    assert store.exists_with_checksum("job/incident-1/n1/stacks/rank-0.txt", digest, 16)
    again = upload_tree(store, src, "job/incident-1/n1", deadline_s=30)
    assert again.summary()["skipped"] == 2 and again.summary()["uploaded"] == 0
    # local files are kept (the caller removes them once verified)
    assert (src / "stacks" / "rank-0.txt").exists()


def test_local_storage_unwritable_is_a_failed_result_not_an_exception(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("x")
    blocker = tmp_path / "store"
    blocker.write_text("a file where a directory should be")
    r = LocalStorage(blocker).put(f, "k/a.txt")
    assert not r.verified and "next step" in r.error


class _NoBucket:
    """An S3 client whose bucket does not exist: what boto3 raises for every file of a bundle."""

    def head_object(self, **_: object) -> None:
        raise ClientError({"Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"},
                           "ResponseMetadata": {"HTTPStatusCode": 404}}, "HeadObject")


def test_a_failure_every_file_shares_is_said_once_and_each_file_still_fails(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = S3Storage("no-such-bucket", "nw", client=_NoBucket(), sleep=lambda _s: None)
    files = []
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
        files.append(tmp_path / f"f{i}")
    with caplog.at_level("DEBUG", logger="neuron_watch"):
        results = [s.put(f, f.name) for f in files]
    assert [r.verified for r in results] == [False] * 5 and all("does not exist" in r.error for r in results)
    said = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(said) == 1 and "bucket 'no-such-bucket' does not exist" in said[0].getMessage(), said
    assert "counted, not said again" in said[0].getMessage()
    assert len([r for r in caplog.records if r.levelname == "DEBUG" and "upload of" in r.getMessage()]) == 4
