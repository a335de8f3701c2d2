"""examples/sagemaker/entry.py with the SM_* environment of one and of two hosts.

The dry runs check the exact torchrun command neuron-watch would start on each host
(``NEURON_WATCH_DRY_RUN=1`` = ``neuron-watch --dry-run``); the last test runs two "hosts" for real on
this machine (algo-1/algo-2, master on loopback) with the toy job, a rank crashing in generation 0,
and checks the entry point gets the wrapper's recovery: the crash judged, the job restarted on both
hosts from the last checkpoint, the evidence uploaded, both hosts finishing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import events, free_port, named, toy_settings
from tests.fixtures.s3 import S3Endpoint
from tests.integration.test_cloudwatch import cloudwatch, listed

REPO = Path(__file__).resolve().parents[2]
ENTRY = REPO / "examples" / "sagemaker" / "entry.py"
TOY = REPO / "examples" / "toy" / "train.py"


def sm_env(tmp_path: Path, hosts: list[str], current: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_WATCH_", "SM_", "MASTER_"))}
    env.update(toy_settings())
    env.update(SM_HOSTS=json.dumps(hosts), SM_CURRENT_HOST=current, SM_NUM_NEURONS="0", SM_NUM_GPUS="0",
               NPROC_PER_NODE="1", CHECKPOINT_DIR=str(tmp_path / "ckpt"), RUN_DIR=str(tmp_path / "runs" / current),
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.update(extra)
    return env


def dry_run(env: dict[str, str], *args: str) -> str:
    r = subprocess.run([sys.executable, str(ENTRY), *args], env=dict(env, NEURON_WATCH_DRY_RUN="1"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = (r.stdout + r.stderr).splitlines()
    return lines[lines.index(next(x for x in lines if x.strip() == "command:")) + 1].strip()


def test_one_host(tmp_path: Path) -> None:
    cmd = dry_run(sm_env(tmp_path, ["algo-1"], "algo-1", SM_NUM_NEURONS="32", MASTER_ADDR="127.0.0.1"),
                  "--steps", "5")
    assert cmd.endswith(f"--nnodes 1 --nproc_per_node 32 --node_rank 0 --master_addr 127.0.0.1 --master_port 7777 "
                        f"{TOY} --checkpoint-dir {tmp_path / 'ckpt'} --steps 5"), cmd
    assert "torch.distributed.run" in cmd or "torchrun" in cmd


@pytest.mark.parametrize(("current", "rank"), [("algo-1", 0), ("algo-2", 1)])
def test_two_hosts(tmp_path: Path, current: str, rank: int) -> None:
    # hosts arrive unsorted; SageMaker's rank order is the sorted list
    env = sm_env(tmp_path, ["algo-2", "algo-1"], current, MASTER_PORT="7001")
    cmd = dry_run(env, "--steps", "5")
    assert f"--nnodes 2 --nproc_per_node 1 --node_rank {rank} --master_addr " in cmd, cmd
    master = cmd.split("--master_addr ")[1].split()[0]
    assert master in ("algo-1",) or master.count(".") == 3  # resolved to an IP where DNS knows algo-1
    assert "--master_port 7001" in cmd


def test_bad_environment_is_a_clear_error(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ENTRY)], env=sm_env(tmp_path, ["algo-1"], "algo-9"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "SM_CURRENT_HOST='algo-9' is not in SM_HOSTS" in r.stderr


@pytest.mark.process
def test_two_hosts_recover_from_a_crash_and_run_the_toy_job_to_the_end(tmp_path: Path, s3_moto: S3Endpoint) -> None:
    port = str(29000 + os.getpid() % 900)
    coordinator_port = free_port()
    training_job = f"toy-{os.urandom(3).hex()}"  # SageMaker's TRAINING_JOB_NAME: the job's id on every host
    namespace = f"NW-sm-{training_job}"
    bucket = f"sm-art-{os.urandom(3).hex()}"
    s3_moto.client().create_bucket(Bucket=bucket)
    procs = []
    for host in ("algo-1", "algo-2"):
        env = sm_env(tmp_path, ["algo-1", "algo-2"], host, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                     NEURON_WATCH_SECRET="e" * 32,  # the estimator's environment (launch_estimator.py)
                     # not this host's default port 29510, which a test running at the same time may hold
                     NEURON_WATCH_COORDINATOR=f"127.0.0.1:{coordinator_port}",
                     TRAINING_JOB_NAME=training_job, NEURON_WATCH_CLOUDWATCH=namespace,
                     NEURON_WATCH_ARTIFACTS=f"s3://{bucket}/sm", **s3_moto.env())
        log = open(tmp_path / f"{host}.log", "wb")  # noqa: SIM115 - closed below
        # rank 1 (algo-2's one rank) exits 3 at step 3 of generation 0: after step 2's checkpoint
        procs.append((subprocess.Popen([sys.executable, str(ENTRY), "--steps", "4", "--checkpoint-every", "2",
                                        "--step-time", "0.01", "--crash-at", "3", "--crash-rank", "1",
                                        "--fault-generation", "0"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True), log))
    deadline = time.monotonic() + 240
    try:
        for p, _ in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
    finally:
        for p, log in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
    outs = {h: (tmp_path / f"{h}.log").read_text() for h in ("algo-1", "algo-2")}
    assert [p.returncode for p, _ in procs] == [0, 0], outs
    assert (tmp_path / "ckpt" / "step_4" / "done").exists()
    for h, out in outs.items():
        assert "entry.py: exec " in out and f"--node_rank {['algo-1', 'algo-2'].index(h)}" in out
    # the wrapper's recovery through the entry point: algo-1's wrapper hosts the coordinator
    evs = events(tmp_path / "runs" / "algo-1")
    verdicts = [v for v in named(evs, "verdict") if v["label"] != "healthy"]
    assert verdicts and verdicts[0]["label"] == "other_crash", verdicts
    assert verdicts[0]["culprit"] == {"node": "algo-2", "rank": 1}, verdicts[0]
    (restart,) = named(evs, "restart")
    assert restart["checkpoint"] and restart["checkpoint"].endswith("step_2"), restart
    assert named(evs, "job_finished")[-1]["exit_code"] == 0 and named(evs, "job_finished")[-1]["restarts"] == 1
    assert "resuming at step 3" in (tmp_path / "algo-2.log").read_text() + (tmp_path / "algo-1.log").read_text()
    uploads = named(evs, "upload")
    assert {u["node"] for u in uploads} == {"algo-1", "algo-2"} and all(u["ok"] for u in uploads), uploads
    keys = [o["Key"] for o in s3_moto.client().list_objects_v2(Bucket=bucket, Prefix="sm/").get("Contents", [])]
    for host in ("algo-1", "algo-2"):
        assert any(f"/{host}/" in k and k.endswith("/env.json") for k in keys), (host, keys)
    for p, _ in procs:  # nothing of either host survives
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)
    # --cloudwatch reached the coordinator (algo-1's) through the entry point, named by the training job
    names = listed(cloudwatch(s3_moto), namespace)
    assert ("ExitCode", (("JobId", training_job),)) in names, sorted(names)
    assert ("Nodes", (("JobId", training_job), ("State", "observed"))) in names
