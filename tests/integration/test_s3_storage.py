"""The artifact store against real S3 HTTP servers (moto server mode, rclone serve s3 with SigV4).

Faults are real: the server process is stopped mid-bundle and started again; a loopback proxy
answers the first requests with 500 InternalError / 503 SlowDown; rclone refuses a wrong key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest

from neuron_watch.outputs.storage import (
    S3Storage,
    Storage,
    UploadResult,
    incident_key,
    open_storage,
    retry_pending,
    upload_tree,
)
from tests.fixtures.s3 import FaultProxy, RcloneServer, S3Endpoint, rclone_binary

pytestmark = pytest.mark.integration


def make_bundle(root: Path, big: bool = False) -> dict[str, str]:
    """A small incident bundle with a manifest; returns {relative path: sha256}."""
    files = {
        "verdict.json": b'{"label": "collective_hang"}\n',
        "logs/rank-0.tail.log": b"step 10 loss 1.0\n" * 50,
        "stacks/rank-1.txt": b"Thread 42 (idle): MainThread\n    all_reduce (torch/distributed.py:1)\n",
    }
    if big:  # above the multipart threshold: 2 parts + a tail
        files["core-dump/i-0-nd0-nc0-pid-1-tid-1-lid-0"] = os.urandom(17 * 1024 * 1024 + 123)
    sums = {}
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        sums[rel] = hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps({"files": [{"path": k, "sha256": v} for k, v in sums.items()]}))
    return sums


def assert_arrived_whole(ep: S3Endpoint, bucket: str, prefix: str, sums: dict[str, str]) -> None:
    s3 = ep.client()
    for rel, digest in sums.items():
        body = s3.get_object(Bucket=bucket, Key=f"{prefix}/{rel}")["Body"].read()
        assert hashlib.sha256(body).hexdigest() == digest, rel
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/manifest.json")["Body"].read())
    assert {f["path"]: f["sha256"] for f in manifest["files"]} == sums


def storage_for(ep: S3Endpoint, bucket: str, prefix: str, monkeypatch: pytest.MonkeyPatch, **kw: object) -> Storage:
    for k, v in ep.env().items():
        monkeypatch.setenv(k, v)
    return open_storage(f"s3://{bucket}/{prefix}", dict(os.environ), **kw)


@pytest.mark.parametrize("server", ["s3_moto", "s3_rclone"])
def test_bundle_arrives_whole_multipart_and_resumes(
    server: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep: S3Endpoint = request.getfixturevalue(server)
    ep.client().create_bucket(Bucket="nw-whole")
    sums = make_bundle(tmp_path / "b", big=True)
    store = storage_for(ep, "nw-whole", "runs", monkeypatch)
    key = incident_key("job-1", 1, "node-a")
    first = upload_tree(store, tmp_path / "b", key, deadline_s=120)
    assert first.ok, first.summary()
    assert first.summary()["uploaded"] == 5
    assert_arrived_whole(ep, "nw-whole", f"runs/{key}", sums)
    assert len(store.list("job-1/")) == 5
    # resumable: a second pass uploads nothing (sha256 in metadata matches)
    again = upload_tree(store, tmp_path / "b", key, deadline_s=60)
    assert again.summary()["skipped"] == 5 and again.summary()["uploaded"] == 0
    # local files are kept
    assert (tmp_path / "b" / "core-dump" / "i-0-nd0-nc0-pid-1-tid-1-lid-0").exists()


def test_server_down_mid_bundle_then_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    server = RcloneServer(rclone_binary(), tmp_path / "rclone" / "data")
    (server.root / "nw-down").mkdir(parents=True)
    server.start()
    try:
        sums = make_bundle(tmp_path / "b")
        restarts: list[float] = []

        def sleep_and_restart(seconds: float) -> None:
            # The retry loop's wait: the server comes back while we wait (first wait only).
            if not restarts:
                restarts.append(seconds)
                server.start()

        store = storage_for(server.endpoint, "nw-down", "p", monkeypatch, sleep=sleep_and_restart)
        results: list[UploadResult] = []
        files = sorted(p for p in (tmp_path / "b").rglob("*") if p.is_file())
        for i, path in enumerate(files):
            if i == 1:
                assert server.stop() == "sigterm"  # down in the middle of the bundle
            results.append(store.put(path, f"k/{path.relative_to(tmp_path / 'b').as_posix()}"))
        assert all(r.verified for r in results), [r.error for r in results]
        assert len(restarts) == 1
        assert results[1].attempts >= 2  # the one that hit the dead server
        assert "retrying in" in caplog.text and "cannot reach" in caplog.text
        assert_arrived_whole(server.endpoint, "nw-down", "p/k", sums)
    finally:
        server.stop()
    assert server.proc is not None and server.proc.poll() is not None


@pytest.mark.parametrize(("status", "code"), [(500, "InternalError"), (503, "SlowDown")])
def test_http_errors_and_throttling_are_retried_boundedly(
    status: int, code: str, s3_rclone: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    s3_rclone.client().create_bucket(Bucket=f"nw-fault-{status}")
    sums = make_bundle(tmp_path / "b")
    port = int(s3_rclone.url.rsplit(":", 1)[1])
    caplog.set_level(logging.WARNING, "neuron_watch.outputs.storage")
    with FaultProxy(port, failures=3, status=status, code=code) as proxy:
        ep = S3Endpoint(f"http://127.0.0.1:{proxy.port}", s3_rclone.access_key, s3_rclone.secret_key)
        store = storage_for(ep, f"nw-fault-{status}", "p", monkeypatch, sleep=lambda s: None)
        tree = upload_tree(store, tmp_path / "b", "k", deadline_s=60)
        assert tree.ok, tree.summary()
        assert proxy.faulted == 3
    assert caplog.text.count("retrying in") == 3
    assert code in caplog.text or str(status) in caplog.text
    assert_arrived_whole(s3_rclone, f"nw-fault-{status}", "p/k", sums)


def test_persistent_throttling_fails_within_the_bound_then_retry_pending_delivers(
    s3_rclone: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_rclone.client().create_bucket(Bucket="nw-pending")
    sums = make_bundle(tmp_path / "b")
    port = int(s3_rclone.url.rsplit(":", 1)[1])
    with FaultProxy(port, failures=10_000) as proxy:
        ep = S3Endpoint(f"http://127.0.0.1:{proxy.port}", s3_rclone.access_key, s3_rclone.secret_key)
        store = storage_for(ep, "nw-pending", "p", monkeypatch, sleep=lambda s: None, max_attempts=3)
        tree = upload_tree(store, tmp_path / "b", "k", deadline_s=60)
        assert not tree.ok and len(tree.failed) == 4
        assert all(r.attempts == 3 for r in tree.failed)  # bounded
        assert proxy.seen == 4 * 3  # head per attempt fails first; nothing more was tried
        assert "503" in tree.summary()["error"] and "s3://nw-pending/p" in tree.summary()["error"]
    # at exit, straight to the server: nothing was lost
    direct = storage_for(s3_rclone, "nw-pending", "p", monkeypatch)
    later = retry_pending(direct, tree.failed, deadline_s=60)
    assert later.ok
    assert_arrived_whole(s3_rclone, "nw-pending", "p/k", sums)


def test_wrong_key_is_refused_clearly_without_retries_or_secrets(
    s3_rclone: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_rclone.client().create_bucket(Bucket="nw-auth")
    make_bundle(tmp_path / "b")
    wrong = S3Endpoint(s3_rclone.url, "wrongkeyid", "wrong-secret-value-xyz")
    store = storage_for(wrong, "nw-auth", "p", monkeypatch, sleep=lambda s: None)
    r = store.put(tmp_path / "b" / "verdict.json", "k/verdict.json")
    assert not r.verified and r.attempts == 1  # not retryable
    assert "s3://nw-auth/p" in r.error and s3_rclone.url in r.error and "next step" in r.error
    assert "wrong-secret-value-xyz" not in r.error
    assert s3_rclone.client().list_objects_v2(Bucket="nw-auth").get("KeyCount", 0) == 0


def test_missing_bucket_and_unreachable_endpoint_name_the_problem(
    s3_moto: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bundle(tmp_path / "b")
    store = storage_for(s3_moto, "nw-no-such-bucket", "p", monkeypatch, sleep=lambda s: None)
    r = store.put(tmp_path / "b" / "verdict.json", "k/verdict.json")
    assert not r.verified and "'nw-no-such-bucket' does not exist" in r.error and r.attempts == 1
    dead = S3Endpoint("http://127.0.0.1:9", "a", "b")  # discard port: nothing listens
    store = storage_for(dead, "bkt", "p", monkeypatch, sleep=lambda s: None, max_attempts=2)
    assert isinstance(store, S3Storage)
    r = store.put(tmp_path / "b" / "verdict.json", "k/verdict.json")
    assert not r.verified and r.attempts == 2 and "cannot reach" in r.error and "127.0.0.1:9" in r.error


def test_captured_bundle_arrives_whole_manifest_checksums_match(
    s3_rclone: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """capture_node_bundle -> upload_tree -> every manifest entry is in S3 with its sha256."""
    from neuron_watch.node.evidence import IncidentContext, capture_node_bundle

    run = tmp_path / "run"
    (run / "gen-0").mkdir(parents=True)
    (run / "gen-0" / "rank-0.log").write_text("step 1 loss 1.0\n")
    core = tmp_path / "core"
    core.mkdir()
    (core / "i-0-nd0-nc0-pid-1-tid-1-lid-0").write_bytes(os.urandom(9 * 1024 * 1024))  # multipart
    ctx = IncidentContext(job_id="job-9", generation=0, incident=1, node="node-a", run_dir=run,
                          rank_logs={0: run / "gen-0" / "rank-0.log"}, verdict={"label": "collective_hang"},
                          env={"AWS_SECRET_ACCESS_KEY": s3_rclone.secret_key}, core_dump_dir=core, deadline_s=30,
                          artifacts_uri="s3://nw-bundle/runs/job-9/incident-1/node-a")
    bundle = capture_node_bundle(ctx)
    s3_rclone.client().create_bucket(Bucket="nw-bundle")
    store = storage_for(s3_rclone, "nw-bundle", "runs", monkeypatch)
    tree = upload_tree(store, bundle.bundle_dir, incident_key("job-9", 1, "node-a"), deadline_s=120)
    assert tree.ok, tree.summary()
    s3 = s3_rclone.client()
    manifest = json.loads(s3.get_object(Bucket="nw-bundle", Key="runs/job-9/incident-1/node-a/manifest.json")
                          ["Body"].read())
    assert len(manifest["files"]) >= 6
    for f in manifest["files"]:
        body = s3.get_object(Bucket="nw-bundle", Key=f"runs/job-9/incident-1/node-a/{f['path']}")["Body"].read()
        assert (len(body), hashlib.sha256(body).hexdigest()) == (f["size"], f["sha256"]), f["path"]
        assert s3_rclone.secret_key.encode() not in body
