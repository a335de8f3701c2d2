"""`neuron-watch dump` as the runtime calls it: real subprocess, real S3 API server (moto)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.s3 import S3Endpoint

pytestmark = pytest.mark.integration

RUNTIME_FLAGS = [
    "--neff-name", "model.MODULE_1+2", "--neff-uuid", "3f1c0e5a-7b2d-4a8e-9c61-0d5b7e2f9a10",
    "--date-time", "20250917-194443", "--pid", "897", "--tid", "897", "--log-id", "0",
    "--instance-id", "i-0b514eadc4fec7de6", "--cluster-id", "0000000000000000",
    "--error-location", "nrt_execute", "--error-code", "5",
]


def core_dump(d: Path) -> dict[str, str]:
    d.mkdir(parents=True)
    files = {
        "i-0b514eadc4fec7de6-nd0-nc0-pid-897-tid-897-lid-0": os.urandom(2048),
        "i-0b514eadc4fec7de6-nrt-pid-897.log": b"2025-Sep-17 19:44:43.0593 897:897 ERROR  TDRV:exec timeout\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}


def run_dump(argv: list[str], ep: S3Endpoint, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "NEURON_WATCH_"))} | ep.env()
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def objects(ep: S3Endpoint, bucket: str, prefix: str) -> dict[str, str]:
    s3 = ep.client()
    out = {}
    for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        out[o["Key"][len(prefix):]] = hashlib.sha256(body).hexdigest()
    return out


def test_dump_with_runtime_flags_and_an_unknown_flag_lands_under_the_prefix(s3_moto: S3Endpoint,
                                                                            tmp_path: Path) -> None:
    s3_moto.client().create_bucket(Bucket="nw-dumps")
    local = tmp_path / "neuron-core-dump" / "dt-20250917-194443-cid-0000000000000000"
    sums = core_dump(local)
    prefix = "s3://nw-dumps/job-1/core/20250917-194443-0000000000000000"
    r = run_dump([sys.executable, "-m", "neuron_watch.cli", "dump", *RUNTIME_FLAGS,
                  "--future-runtime-flag", "xyz", "--local-output-dir", str(local), "--s3-output-prefix", prefix],
                 s3_moto, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--future-runtime-flag xyz" in r.stderr  # kept and said, not fatal
    got = objects(s3_moto, "nw-dumps", "job-1/core/20250917-194443-0000000000000000/")
    assert {k: v for k, v in got.items() if k in sums} == sums
    record = json.loads((local / "neuron-watch-dump.json").read_text())
    assert record["unknown_flags"] == ["--future-runtime-flag", "xyz"]
    assert record["flags"]["error-code"] == "5" and record["original"] is None
    assert "neuron-watch-dump.json" in got


def test_install_keeps_the_original_which_runs_first(s3_moto: S3Endpoint, tmp_path: Path) -> None:
    s3_moto.client().create_bucket(Bucket="nw-hook")
    bindir = tmp_path / "opt-aws-neuron-bin"
    bindir.mkdir()
    original = bindir / "neuron-dump"
    # stands in for the AWS script: writes its hardware-state file into --local-output-dir
    original.write_text(
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do case $1 in --local-output-dir) out=$2; shift;; esac; shift; done\n"
        'echo "aws state" > "$out/aws-hw-state.txt"\n'
    )
    original.chmod(0o755)
    original_text = original.read_text()
    env_python = [sys.executable, "-m", "neuron_watch.cli"]
    for _ in range(2):  # idempotent
        r = run_dump([*env_python, "dump", "--install", "--prefix", str(bindir)], s3_moto, tmp_path)
        assert r.returncode == 0, r.stderr
    assert (bindir / "neuron-dump.aws").read_text() == original_text
    assert "neuron-watch neuron-dump hook" in (bindir / "neuron-dump").read_text()
    assert os.access(bindir / "neuron-dump", os.X_OK)

    local = tmp_path / "dumps" / "dt-x-cid-y"
    sums = core_dump(local)
    r = run_dump([str(bindir / "neuron-dump"), *RUNTIME_FLAGS, "--local-output-dir", str(local),
                  "--s3-output-prefix", "s3://nw-hook/p/dt-x-cid-y"], s3_moto, tmp_path)
    assert r.returncode == 0, r.stderr
    got = objects(s3_moto, "nw-hook", "p/dt-x-cid-y/")
    assert got["aws-hw-state.txt"] == hashlib.sha256(b"aws state\n").hexdigest()  # the original ran first
    assert {k: got[k] for k in sums} == sums
    record = json.loads((local / "neuron-watch-dump.json").read_text())
    assert record["original"]["returncode"] == 0 and record["original"]["path"].endswith("neuron-dump.aws")


def test_install_into_a_missing_directory_is_a_clear_error(s3_moto: S3Endpoint, tmp_path: Path) -> None:
    r = run_dump([sys.executable, "-m", "neuron_watch.cli", "dump", "--install", "--prefix",
                  str(tmp_path / "nope")], s3_moto, tmp_path)
    assert r.returncode == 2 and "is not a directory" in r.stderr and "next step" in r.stderr
