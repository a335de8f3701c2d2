"""Every entry point gets every feature: one matrix on real parts.

Rows, each a real job with a hang, its capture, a restart and the finish:

* ``neuron-watch torchrun`` on one node;
* ``neuron-watch torchrun`` on two nodes (node 0 hosts the coordinator);
* ``neuron-watch srun`` on the real Slurm (tests/fixtures/slurm.py), one task per node running torchrun:
  the srun hang run the srun tests read too (``srun_hang``, tests/integration/conftest.py);
* the standalone ``neuron-watch coordinator`` with two ``neuron-watch torchrun`` nodes that leave it the job.

Columns, checked for every row by :func:`check_every_column`: the incident's bundle of every node
whole in S3 (``rclone serve s3``, which checks signatures), every event of ``events.jsonl`` on a
real mosquitto in order, ``neuron-watch status``, ``neuron-watch report``, ``timeline.json``, the
job's metrics in CloudWatch (moto's server, ``AWS_ENDPOINT_URL_CLOUDWATCH``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mqtt import Mosquitto, MqttRecorder
from tests.fixtures.procs import NEURON_WATCH, TOY, events, force_cleanup, free_port, kill_group, named, started
from tests.fixtures.s3 import S3Endpoint
from tests.integration.test_cloudwatch import cloudwatch, listed, series
from tests.integration.test_srun import SRUN_HANG_GROUP, HangRun
from tests.process.test_multinode import job, out, wait_all

pytestmark = [pytest.mark.integration, pytest.mark.process]

# the srun row reads the shared srun hang run: on the worker of its other readers
ROWS = ["torchrun-1-node", "torchrun-2-nodes", pytest.param("srun", marks=pytest.mark.xdist_group(SRUN_HANG_GROUP)),
        "standalone-coordinator"]
#: the toy job: rank 3 (rank 1 on one node) never joins the collective of step 8 in generation 0
HANG = ["--steps", "14", "--hang-at", "8", "--hang-rank", "3"]
#: the same on one node of 2 ranks: no column depends on the job's size
HANG_ONE_NODE = ["--steps", "14", "--hang-at", "8", "--hang-rank", "1"]


def check_every_column(run_dir: Path, nodes: list[str], s3: Any, bucket: str, prefix: str, rec: MqttRecorder,
                       topic: str, cw: Any, namespace: str, cluster: str | None = None) -> None:
    """The six columns for one row. ``run_dir``: the coordinator's run dir; ``nodes``: the nodes
    whose bundles must be in S3."""
    evs = events(run_dir)
    finished = named(evs, "job_finished")
    assert finished and finished[-1]["exit_code"] == 0 and finished[-1]["restarts"] == 1, [e["event"] for e in evs]
    job_id = next(e["job_id"] for e in evs if e["event"] == "job_started")
    # 1. the incident's bundle of every node, whole, in S3 (checksums of the manifest)
    (incident,) = named(evs, "incident")
    uploads = named(evs, "upload")
    assert {u["node"] for u in uploads} == set(nodes) and all(u["ok"] for u in uploads), uploads
    for node in nodes:
        key = f"{prefix}/{job_id}/incident-{incident['incident']}/{node}/"
        manifest = json.loads(s3.get_object(Bucket=bucket, Key=key + "manifest.json")["Body"].read())
        assert manifest["files"], manifest
        for f in manifest["files"]:
            body = s3.get_object(Bucket=bucket, Key=key + f["path"])["Body"].read()
            assert hashlib.sha256(body).hexdigest() == f["sha256"], (node, f["path"])
        verdict = json.loads(s3.get_object(Bucket=bucket, Key=key + "verdict.json")["Body"].read())
        assert verdict["label"] == incident["label"] and verdict["culprit"] == incident["culprit"]
    # 2. every event on the broker, in order
    assert rec.events_of_job(f"{topic}/{job_id}/") == [e["event"] for e in evs]
    # 3. neuron-watch status
    st = subprocess.run([NEURON_WATCH, "status", str(run_dir), "--once", "--json"], capture_output=True, text=True,
                        timeout=60)
    doc = json.loads(st.stdout)
    assert st.returncode == 0 and doc["state"] == "finished" and doc["restarts"] == 1, st.stdout[-2000:]
    # 4. neuron-watch report
    rp = subprocess.run([NEURON_WATCH, "report", str(run_dir), "--json"], capture_output=True, text=True, timeout=60)
    report = json.loads(rp.stdout)
    assert rp.returncode == 0 and report["restarts"] == 1 and report["causes"] == {"collective_hang": 1}, \
        rp.stdout[-2000:]
    assert [g["outcome"] for g in report["generations"]] == ["collective_hang", "finished"]
    # 5. timeline.json (Chrome trace): the incident is on it
    trace = json.loads((run_dir / "timeline.json").read_text())
    assert any("incident" in str(e.get("name", "")).lower() for e in trace["traceEvents"]), trace["traceEvents"][:5]
    # 6. CloudWatch: the restart under the hang's label, with the job's dimensions (and Slurm's cluster)
    job = [("JobId", job_id), *([("Cluster", cluster)] if cluster else [])]
    names = listed(cw, namespace)
    hang = tuple(sorted([*job, ("Label", "collective_hang")]))
    assert ("Restarts", hang) in names and ("ExitCode", tuple(sorted(job))) in names, sorted(names)
    # in the order sent: moto matches a query's dimensions in order (CloudWatch does not)
    dims = [{"Name": k, "Value": v} for k, v in [*job, ("Label", "collective_hang")]]
    start, end = (datetime.fromisoformat(evs[i]["time"].replace("Z", "+00:00")).timestamp() for i in (0, -1))
    assert [v for _, v in series(cw, namespace, "Restarts", dims, start, end)][-1] == 1


@pytest.fixture
def parts(s3_rclone: S3Endpoint, s3_moto: S3Endpoint, mqtt_broker: Mosquitto, mqtt_recorder: Any) -> dict[str, Any]:
    bucket = f"parity-{secrets.token_hex(3)}"
    s3 = s3_rclone.client()
    s3.create_bucket(Bucket=bucket)
    topic = f"nwparity{secrets.token_hex(2)}"
    # S3 is rclone's (it checks signatures); CloudWatch moto's, which takes any key
    env = dict(s3_rclone.env(), AWS_ENDPOINT_URL_CLOUDWATCH=s3_moto.url)
    return {"s3": s3, "bucket": bucket, "env": env, "rec": mqtt_recorder(mqtt_broker, f"{topic}/#"),
            "topic": topic, "mqtt": mqtt_broker.url.rsplit("/", 1)[0] + "/" + topic,
            "artifacts": f"s3://{bucket}/team", "cw": cloudwatch(s3_moto), "namespace": f"NW-{topic}"}


@pytest.mark.parametrize("row", ROWS)
def test_every_entry_point_gets_every_feature(row: str, tmp_path: Path, toy_env: dict[str, str],
                                              parts: dict[str, Any], request: pytest.FixtureRequest) -> None:
    cloud = ["--cloudwatch", parts["namespace"]]
    watch = ["--hang-timeout", "8", "--mqtt", parts["mqtt"], "--artifacts", parts["artifacts"], *cloud]
    env = dict(toy_env, **parts["env"])
    check = {"s3": parts["s3"], "bucket": parts["bucket"], "prefix": "team", "rec": parts["rec"],
             "topic": parts["topic"], "cw": parts["cw"], "namespace": parts["namespace"]}
    if row == "torchrun-1-node":
        run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
        argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt), *watch,
                "torchrun", "--nproc_per_node", "2", TOY, "--checkpoint-dir", str(ckpt), *HANG_ONE_NODE]
        try:
            with started(argv, str(tmp_path), dict(env, NEURON_WATCH_NODE="trn-a")) as p:
                said, _ = p.communicate(timeout=400)
        finally:
            force_cleanup(str(run_dir))
        assert p.returncode == 0, said[-3000:]
        check_every_column(run_dir, ["trn-a"], **check)
    elif row == "torchrun-2-nodes":
        with job(tmp_path, env, 2, HANG, watch) as nodes:
            codes = wait_all(nodes, 400)
        assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
        check_every_column(nodes[0][1], ["n0", "n1"], **check)
    elif row == "srun":
        hang: HangRun = request.getfixturevalue("srun_hang")  # no process of it survived it
        assert hang.state == "COMPLETED", hang.job.explain()
        check_every_column(hang.job.run_dir, ["n1", "n2"], hang.s3, hang.bucket, hang.prefix, hang.rec, hang.topic,
                           hang.cw, hang.namespace, cluster="nwtest")  # its ClusterName
    else:
        port, job_id = free_port(), f"par-{secrets.token_hex(3)}"
        run_dir = tmp_path / "coordinator"
        with open(tmp_path / "coordinator.out", "w") as log:
            coord = subprocess.Popen([NEURON_WATCH, "--job-id", job_id, "--run-dir", str(run_dir), *watch,
                                      "coordinator", "--bind", f"127.0.0.1:{port}", "--nodes", "2"],
                                     env=dict(env, NEURON_WATCH_SECRET="s" * 32), stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
            try:
                node_env = dict(env, NEURON_WATCH_HOST_COORDINATOR="0")
                with job(tmp_path, node_env, 2, HANG, watch, coord_port=port, job_id=job_id) as nodes:
                    codes = wait_all(nodes, 400)
                assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
                coord.wait(60)
            finally:
                kill_group(coord)
        assert coord.returncode == 0, (tmp_path / "coordinator.out").read_text()[-3000:]
        check_every_column(run_dir, ["n0", "n1"], **check)
    print(f"{row}: every column passes", file=sys.stderr)
