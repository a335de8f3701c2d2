"""Every entry point gets every feature: one matrix on real parts.

Rows, each a real job with a hang, its capture, a restart and the finish, each a run other tests read
too (tests/fixtures/runs.py):

* ``neuron-watch torchrun`` on one node (``hang_restart``);
* ``neuron-watch torchrun`` on two nodes, node 0 hosting the coordinator (``two_node_hang``);
* ``neuron-watch srun`` on the real Slurm (tests/fixtures/slurm.py), one task per node running torchrun:
  the srun hang run the srun tests read too (``srun_hang``, tests/integration/conftest.py);
* the standalone ``neuron-watch coordinator`` with two ``neuron-watch torchrun`` nodes that leave it the job
  (``standalone_hang``).

Columns, checked for every row by :func:`check_every_column`: the incident's bundle of every node
whole in S3 (``rclone serve s3``, which checks signatures), every event of ``events.jsonl`` on a
real mosquitto in order, ``neuron-watch status``, ``neuron-watch report``, ``timeline.json``, the
job's metrics in CloudWatch (moto's server, ``AWS_ENDPOINT_URL_CLOUDWATCH``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mqtt import MqttRecorder
from tests.fixtures.procs import NEURON_WATCH, events, named
from tests.fixtures.runs import ONE_NODE, OneNodeRun, StandaloneRun, TwoNodeRun
from tests.integration.test_cloudwatch import listed, series
from tests.integration.test_srun import SRUN_HANG_GROUP, HangRun
from tests.process.test_multinode import host_node, out

pytestmark = [pytest.mark.integration, pytest.mark.process]

# every row reads a shared run (tests/fixtures/runs.py; the srun row tests/integration/conftest.py),
# on the worker of its other readers
ROWS = [pytest.param("torchrun-1-node", marks=pytest.mark.xdist_group("hang-restart")),
        pytest.param("torchrun-2-nodes", marks=pytest.mark.xdist_group("two-node-hang")),
        pytest.param("srun", marks=pytest.mark.xdist_group(SRUN_HANG_GROUP)),
        pytest.param("standalone-coordinator", marks=pytest.mark.xdist_group("standalone-hang"))]


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


@pytest.mark.parametrize("row", ROWS)
def test_every_entry_point_gets_every_feature(row: str, request: pytest.FixtureRequest) -> None:
    if row == "torchrun-1-node":
        one: OneNodeRun = request.getfixturevalue("hang_restart")  # no process of it survived it
        assert one.code == 0, one.out[-3000:]
        check_every_column(one.run_dir, [ONE_NODE], **one.outputs.columns())
    elif row == "torchrun-2-nodes":
        two: TwoNodeRun = request.getfixturevalue("two_node_hang")
        assert two.codes == [0, 0], out(two.tmp_path, 0) + out(two.tmp_path, 1)
        check_every_column(two.run_dirs[0], [host_node(0), host_node(1)], **two.outputs.columns())
    elif row == "srun":
        hang: HangRun = request.getfixturevalue("srun_hang")
        assert hang.state == "COMPLETED", hang.job.explain()
        check_every_column(hang.job.run_dir, ["n1", "n2"], hang.s3, hang.bucket, hang.prefix, hang.rec, hang.topic,
                           hang.cw, hang.namespace, cluster="nwtest")  # its ClusterName
    else:
        alone: StandaloneRun = request.getfixturevalue("standalone_hang")
        assert alone.coordinator_code == 0, (alone.tmp_path / "coordinator.out").read_text()[-3000:]
        assert alone.codes == [0, 0], out(alone.tmp_path, 0) + out(alone.tmp_path, 1)
        check_every_column(alone.run_dir, ["n0", "n1"], **alone.outputs.columns())
    print(f"{row}: every column passes", file=sys.stderr)
