"""The whole path of an incident on a real job: a hang under ``neuron-watch --artifacts s3://...``, the
evidence captured before the kill, the bundle uploaded to a real S3 API (rclone serve s3, which
checks signatures) under <prefix>/<job-id>/incident-<n>/<node>/, whole (checksums match the manifest).
The bundle is the subject: the job ends on the hang (``--max-restarts 0``); a restarted generation
would only start torch in every rank again and train clean, which other tests show."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, assert_ended_on_the_fault, force_cleanup, started
from tests.fixtures.s3 import S3Endpoint

pytestmark = [pytest.mark.integration, pytest.mark.process]


def test_hang_bundle_arrives_whole_in_s3(tmp_path: Path, toy_env: dict[str, str], s3_rclone: S3Endpoint) -> None:
    s3 = s3_rclone.client()
    s3.create_bucket(Bucket="incidents")
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    env = dict(toy_env, **s3_rclone.env(), NEURON_WATCH_NODE="trn-a")
    argv = [NEURON_WATCH, "--quiet", "--job-id", "j42", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            "--hang-timeout", "8", "--max-restarts", "0", "--artifacts", "s3://incidents/team-a",
            "torchrun", "--nproc_per_node", "2", TOY, "--checkpoint-dir", str(ckpt), "--steps", "12",
            "--hang-at", "7", "--hang-rank", "1"]
    try:
        with started(argv, str(tmp_path), env) as p:
            out, _ = p.communicate(timeout=300)
    finally:
        force_cleanup(str(run_dir))
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert_ended_on_the_fault(p.returncode, events, out)  # given up on the hang, the give-up's exit code
    (upload,) = [e for e in events if e["event"] == "upload"]
    assert upload["ok"] and upload["failed"] == 0 and upload["uri"] == "s3://incidents/team-a/j42/incident-1/trn-a"
    prefix = "team-a/j42/incident-1/trn-a/"
    listed = s3.list_objects_v2(Bucket="incidents", Prefix=prefix)
    keys = {o["Key"] for o in listed.get("Contents", [])}
    manifest = json.loads(s3.get_object(Bucket="incidents", Key=prefix + "manifest.json")["Body"].read())
    assert {prefix + f["path"] for f in manifest["files"]} <= keys
    for f in manifest["files"]:
        body = s3.get_object(Bucket="incidents", Key=prefix + f["path"])["Body"].read()
        assert len(body) == f["size"] and hashlib.sha256(body).hexdigest() == f["sha256"]
    assert any(f["path"] == "stacks/rank-1.txt" for f in manifest["files"])  # the hung rank, taken alive
    env_json = s3.get_object(Bucket="incidents", Key=prefix + "env.json")["Body"].read().decode()
    assert s3_rclone.secret_key not in env_json  # credentials never reach artifacts
