"""An MQTT password holding a raw '@' (which authenticates) never appears in any
file of the run dir, in any MQTT payload, in the bundle uploaded to S3, or on the console.

Real parts: mosquitto with a password file (``allow_anonymous false`` on the job's listener), a
real torchrun job that hangs once (so an incident bundle with env.json and timeline.json is made
and uploaded to moto's S3 server) and then finishes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_binary
from tests.fixtures.mqtt import Mosquitto, free_port, pid_alive
from tests.fixtures.procs import NEURON_WATCH, TOY, assert_ended_on_the_fault, events, named, pids_with_env, run_to_end
from tests.fixtures.s3 import S3Endpoint

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.timeout(400)]

#: the part before the '@' and the part after it are both checked: the old regex leaked the tail
HEAD, TAIL = "Hd7qLx", "tail-Zr9w-SECRET"
PASSWORD = f"{HEAD}@{TAIL}"


@pytest.fixture
def password_broker(tmp_path: Path) -> Iterator[tuple[Mosquitto, int]]:
    """A broker whose job listener wants alice's password; a plain listener for the recorder."""
    d = tmp_path / "broker"
    d.mkdir()
    subprocess.run([require_binary("mosquitto_passwd"), "-b", "-c", str(d / "passwd"), "alice", PASSWORD],
                   check=True, capture_output=True)
    plain, locked = free_port(), free_port()
    listeners = ("per_listener_settings true\n"
                 f"listener {locked} 127.0.0.1\npassword_file {d}/passwd\nallow_anonymous false\n"
                 f"listener {plain} 127.0.0.1\nallow_anonymous true\n")
    broker = Mosquitto(d, port=plain, listeners=listeners)
    broker.start()
    yield broker, locked
    broker.stop()
    assert not any(pid_alive(p) for p in broker.pids)


def test_raw_at_password_reaches_no_file_payload_or_bundle(
        tmp_path: Path, toy_env: dict[str, str], password_broker: tuple[Mosquitto, int], mqtt_recorder: Any,
        s3_moto: S3Endpoint) -> None:
    broker, locked = password_broker
    rec = mqtt_recorder(broker, "nwtest/#")
    s3 = s3_moto.client()
    s3.create_bucket(Bucket="creds")
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    # the URL as an operator types it: the raw '@' is not percent-encoded; given through the
    # environment, which the ranks do not inherit it from (it is the watchdog's, not the job's)
    url = f"mqtt://alice:{PASSWORD}@127.0.0.1:{locked}/nwtest"
    env = dict(toy_env, **s3_moto.env(), NEURON_WATCH_MQTT=url, NEURON_WATCH_NODE="n0")
    argv = [NEURON_WATCH, "--job-id", "creds", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            "--hang-timeout", "8", "--max-restarts", "0", "--artifacts", "s3://creds/pre",
            "torchrun", "--nproc_per_node", "2", TOY, "--checkpoint-dir", str(ckpt), "--steps", "10",
            "--hang-at", "6", "--hang-rank", "1"]
    code, out = run_to_end(argv, str(tmp_path), env, run_dir, timeout=300)
    assert not pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
    evs = events(run_dir)
    # every place a credential could reach is written by the hang's incident and the job's end; a
    # restarted generation would only start torch in every rank again: the job ends on the hang
    assert_ended_on_the_fault(code, evs, out)
    assert named(evs, "job_finished") and named(evs, "incident") and named(evs, "upload")[0]["ok"]
    (started,) = named(evs, "job_started")
    assert started["config"]["mqtt"] == f"mqtt://***@127.0.0.1:{locked}/nwtest"

    # it authenticated: the job's events arrived through the password listener
    assert rec.wait_for(lambda m: any(t.endswith("/job_finished") for t, _p, _r in m), timeout=30)
    payloads = [p for _t, p, _r in rec.snapshot()]
    assert any(b"job_started" in p for p in payloads)

    listed = s3.list_objects_v2(Bucket="creds", Prefix="pre/creds/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert any(k.endswith("/env.json") for k in keys) and any(k.endswith("timeline.json") for k in keys), keys
    bundle = {k: s3.get_object(Bucket="creds", Key=k)["Body"].read() for k in keys}
    files = {str(p): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert any(name.endswith("env.json") for name in files) and (run_dir / "timeline.json").exists()

    def leaks(blob: bytes) -> bool:
        return HEAD.encode() in blob or TAIL.encode() in blob

    assert not [k for k, b in files.items() if leaks(b)]
    assert not [k for k, b in bundle.items() if leaks(b)]
    assert not [p for p in payloads if leaks(p)]
    assert not leaks(out.encode())
    # the ranks' env.json does not hold the watchdog's broker URL at all (token-only URLs elsewhere:
    # tests/unit/test_redact.py)
    env_json = next(b for k, b in bundle.items() if k.endswith("/env.json"))
    assert b"NEURON_WATCH_MQTT" not in env_json and b"AWS_ACCESS_KEY_ID" in env_json
