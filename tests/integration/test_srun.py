"""``neuron-watch srun`` inside an sbatch script on a real Slurm (tests/fixtures/slurm.py).

Each "node" of the fixture is a slurmd on this host (NodeAddr 127.0.0.1). The sbatch script runs
``neuron-watch srun -N 2 --ntasks-per-node 1 run_node.sh``; the per-node script runs
``torchrun --nnodes 2 --nproc_per_node $NPROC --node_rank $SLURM_NODEID ... examples/toy/train.py``
in the Neuron pattern (one task per node, torchrun inside). Everything the job starts carries
``SLURM_JOB_ID``, which is how the tests assert that nothing survives.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.job.hosting import HOSTED_MARKER_ENV
from tests.fixtures.mqtt import MqttRecorder
from tests.fixtures.procs import (
    TOY,
    events,
    free_port,
    hosted_coordinator_pid,
    named,
    pids_with_env,
    recovery_phases,
    toy_settings,
    wait_until_gone,
)
from tests.fixtures.runs import HANG_TIMEOUT
from tests.fixtures.slurm import SlurmCluster

pytestmark = pytest.mark.integration

END_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

RUN_NODE = """#!/bin/bash
# The Neuron pattern: one task per node, torchrun inside (node rank from Slurm, fixed master).
echo "node $SLURMD_NODENAME nodeid $SLURM_NODEID procid $SLURM_PROCID step $SLURM_STEP_ID"
exec torchrun --nnodes 2 --nproc_per_node "$NPROC" --node_rank "$SLURM_NODEID" \\
    --master_addr 127.0.0.1 --master_port "$MASTER_PORT" "$TOY" --checkpoint-dir "$CKPT" "$@"
"""


def kill_job_processes(job: str) -> list[int]:
    """Last resort after a failed test: SIGKILL whatever still carries the job id (and say which)."""
    left = pids_with_env("SLURM_JOB_ID", job)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


class SrunJob:
    """One sbatch job running ``neuron-watch srun``; its files live in the test's tmp dir."""

    def __init__(self, c: SlurmCluster, tmp_path: Path, nodes: int, toy_args: list[str],
                 watch_args: list[str] = (), sbatch_args: list[str] = (), env: dict[str, str] | None = None,
                 tasks_as_ranks: bool = False, nproc: int = 2) -> None:
        """``tasks_as_ranks``: ``srun -N 2 --ntasks-per-node 2 python train.py`` (each task a rank,
        its rank SLURM_PROCID: the Megatron/NeMo way) instead of one task per node running torchrun.
        ``nproc``: the ranks of each node's torchrun; 1 where the scenario is the nodes' alone."""
        self.c, self.tmp = c, tmp_path
        self.run_dir = tmp_path / "run"
        self.ckpt = tmp_path / "ckpt"
        self.out = tmp_path / "job.out"
        node_script = tmp_path / "run_node.sh"
        node_script.write_text(RUN_NODE)
        node_script.chmod(0o755)
        batch = tmp_path / "job.sbatch"
        nw = [sys.executable, "-m", "neuron_watch.cli", "--quiet", "--run-dir", str(self.run_dir),
              "--checkpoint-dir", str(self.ckpt), "--stop-timeout", "5", "--evidence-timeout", "10",
              "--drain-state", str(tmp_path / "drains.json"), *watch_args,
              "srun", "-N", "2", *(["--ntasks-per-node", "2", sys.executable, TOY, "--checkpoint-dir", str(self.ckpt)]
                                   if tasks_as_ranks else ["--ntasks-per-node", "1", str(node_script)]),
              "--steps", "30", "--step-time", "0.05", *toy_args]
        batch.write_text("#!/bin/bash\n" + " ".join(nw) + "\n")
        batch.chmod(0o755)
        # sbatch passes its environment on to the batch script and every task: the toy's test settings
        # (no DDP, one OpenMP thread: tests/fixtures/procs.py) reach every rank of every generation
        env = dict(c.env, **toy_settings(),
                   PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), CKPT=str(self.ckpt), TOY=TOY,
                   NPROC=str(nproc), **(env or {}))
        r = subprocess.run(["sbatch", "--parsable", "-N", str(nodes), "-D", str(tmp_path), "-o", str(self.out),
                            "--open-mode=append", *sbatch_args, str(batch)],
                           env=env, capture_output=True, text=True, timeout=30, check=True)
        self.id = r.stdout.strip().split(";")[0]
        self.t0 = time.monotonic()

    def wait(self, timeout: float = 240) -> str:
        """The job's end state; within pytest's 300 s, so that a job that does not end says why."""
        state = self.c.wait_for(f"job {self.id} to end", lambda: (s := self.c.job_state(self.id)) in END_STATES and s,
                                timeout=timeout, interval=0.5, explain=self.explain)
        print(f"job {self.id} {state} in {time.monotonic() - self.t0:.1f}s")
        return str(state)

    def output(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def explain(self) -> str:
        steps = "".join(p.read_text(errors="replace")[-3000:] for p in sorted((self.run_dir / "steps").glob("*.log")))
        job = self.c.run("scontrol", "show", "job", self.id, check=False).stdout
        return f"--- job output\n{self.output()[-4000:]}\n--- steps\n{steps}\n--- scontrol show job\n{job}"

    def assert_nothing_survives(self) -> None:
        left = wait_until_gone("SLURM_JOB_ID", self.id, 30)
        assert left == [], f"processes of job {self.id} survived: {left}"


@contextlib.contextmanager
def submitted(*args: Any, **kwargs: Any) -> Any:
    job = SrunJob(*args, **kwargs)
    try:
        yield job
    finally:
        job.c.run("scancel", job.id, check=False)
        left = wait_until_gone("SLURM_JOB_ID", job.id, 20)
        killed = kill_job_processes(job.id) if left else []
        job.c.count_job_cpu()  # in the test or shared run that ran the job
        assert not killed, f"had to SIGKILL leftovers of job {job.id}: {killed}"


def rank_lines(run_dir: Path, node: str, generation: int) -> str:
    return "".join(p.read_text(errors="replace")
                   for p in sorted((run_dir / "nodes" / node / f"gen-{generation}").glob("rank-*.log")))


#: the clean run's toy: the ranks leave through the interpreter's exit (the toy's os._exit leaves no
#: record); steps of 0.1 s, so that it trains 3 s: time for test_metrics_srun's scrape while both nodes train
CLEAN = ["--normal-exit", "--step-time", "0.1"]
#: the tests reading the shared clean srun run (``srun_clean``, tests/integration/conftest.py), here and in
#: test_metrics_srun.py: on one pytest-xdist worker, so that the run starts once
SRUN_CLEAN_GROUP = "srun-clean"


@dataclass(frozen=True)
class CleanRun:
    """The shared clean run (tests/integration/conftest.py): the job, how it ended, and its metrics
    (``--metrics``) scraped while both nodes trained and after the end."""

    job: SrunJob
    state: str
    scraped: dict[Any, float] | None  # the first scrape with both nodes observed and a step; None: none did
    after: dict[Any, float] | None  # a scrape once the job had ended (None: the port was closed)


@pytest.mark.xdist_group(SRUN_CLEAN_GROUP)
def test_srun_runs_the_toy_job_on_two_nodes(srun_clean: CleanRun) -> None:
    job = srun_clean.job
    assert srun_clean.state == "COMPLETED", job.explain()
    evs = events(job.run_dir)
    finished = named(evs, "job_finished")
    assert finished and finished[-1]["exit_code"] == 0 and finished[-1]["restarts"] == 0
    assert len(named(evs, "srun_step")) == 1
    assert {e["node"] for e in named(evs, "node_joined")} == {"n1", "n2"}
    # every rank's output reached the coordinator, named by node and global rank
    merged = (job.run_dir / "merged.log").read_text()
    for key in ("n1/rank0", "n1/rank1", "n2/rank2", "n2/rank3"):
        assert f"{key} | step 30 loss" in merged, key
    assert "training done at step 30" in rank_lines(job.run_dir, "n1", 0)
    # every rank's clean exit reached the judge, read on its node from the rank's own record as under
    # `neuron-watch torchrun` (test_culprit.py::test_an_end_said_on_rank_0_and_a_slow_teardown_is_not_a_hang;
    # torchrun, inside each task, reports failed ranks only): code 0, presumed
    exits = {(e["node"], e["rank"]): (e["exit_code"], e.get("presumed"))
             for e in named(evs, "rank_exit") if e["rank"] >= 0}
    assert exits == {("n1", 0): (0, True), ("n1", 1): (0, True), ("n2", 2): (0, True), ("n2", 3): (0, True)}
    assert "NEURON_WATCH_SECRET" not in job.output() + (job.run_dir / "events.jsonl").read_text()


HANG = ["--hang-at", "12", "--hang-rank", "3"]  # rank 3: node rank 1 (n2), local rank 1
#: the shared srun hang run (``srun_hang``): one rank a node, the scenario being the nodes' (a new srun
#: step from the checkpoint, each node's bundle, the console, the events); rank 1 is n2's one rank
SRUN_HANG = ["--hang-at", "12", "--hang-rank", "1"]
SRUN_HANG_NPROC = 1
#: the hang runs' timeout: a few seconds, since the judge applies it only after a rank's first step
#: (start-up, the srun step's launch and torchrun's rendezvous included, has its own timeout)
HANG_WATCH = ["--hang-timeout", f"{HANG_TIMEOUT:g}"]
#: the tests reading the shared srun hang run (``srun_hang``, tests/integration/conftest.py), here and
#: in test_parity.py: on one pytest-xdist worker, so that the run starts once
SRUN_HANG_GROUP = "srun-hang"


@dataclass(frozen=True)
class HangRun:
    """The shared hang run (tests/integration/conftest.py): the job, how it ended, and where its
    events, bundles and metrics went."""

    job: SrunJob
    state: str
    rec: MqttRecorder  # subscribed to ``topic``/#
    s3: Any  # the client of the artifacts' S3
    bucket: str
    prefix: str  # --artifacts s3://<bucket>/<prefix>
    topic: str  # --mqtt's topic
    cw: Any  # the CloudWatch client
    namespace: str  # --cloudwatch's namespace


@pytest.mark.xdist_group(SRUN_HANG_GROUP)
def test_hang_on_one_node_restarts_in_a_new_step_from_the_checkpoint(srun_hang: HangRun) -> None:
    job = srun_hang.job
    assert srun_hang.state == "COMPLETED", job.explain()
    evs = events(job.run_dir)
    verdicts = [e for e in named(evs, "verdict") if e.get("label") == "collective_hang"]
    assert verdicts, [e["event"] for e in evs]
    steps = named(evs, "srun_step")
    assert [s["generation"] for s in steps] == [0, 1]
    restart = named(evs, "restart")[0]
    assert restart["checkpoint"] and restart["checkpoint"].endswith("step_10"), restart
    assert named(evs, "job_finished")[-1]["exit_code"] == 0
    gen1 = rank_lines(job.run_dir, "n2", 1)
    assert "resuming at step 11" in gen1 and "training done at step 30" in rank_lines(job.run_dir, "n1", 1)
    first_progress = [e for e in named(evs, "progress") if e["generation"] == 1]
    assert first_progress, "no progress in generation 1"
    print(f"hang verdict -> generation 1 first progress: "
          f"{_secs(verdicts[0]['time'], first_progress[0]['time']):.1f}s")


def test_tasks_that_are_ranks_are_judged_per_rank_the_culprit_task_named_and_the_step_restarted(
        quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """``srun -N 2 --ntasks-per-node 2 python train.py``: four tasks, each one rank (SLURM_PROCID),
    each with its own agent. Task 3 (the second task on n2) hangs out of a collective; the others
    wait in it. The hang is judged, task 3 named, the step restarted from the checkpoint."""
    with submitted(quiet_slurm_cluster, tmp_path, 2, HANG, HANG_WATCH,
                   ["--ntasks-per-node", "2"], tasks_as_ranks=True) as job:
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        evs = events(job.run_dir)
        started = named(evs, "job_started")[0]
        assert started["tasks_are_ranks"] is True and started["agents"] == 4
        hellos = {e["node"]: e["place"] for e in named(evs, "node_hello") if e["generation"] == 0}
        assert hellos == {"n1": 0, "n1-t1": 1, "n2": 2, "n2-t1": 3}
        hang = [e for e in named(evs, "verdict") if e.get("label") == "collective_hang"]
        assert hang and hang[0]["culprit"] == {"node": "n2-t1", "rank": 3}, hang
        assert hang[0]["culprit_source"] in ("flight_recorder", "stacks", "process_state"), hang[0]
        restart = named(evs, "restart")[0]
        assert restart["checkpoint"] and restart["checkpoint"].endswith("step_10"), restart
        assert [s["generation"] for s in named(evs, "srun_step")] == [0, 1]
        assert named(evs, "job_finished")[-1]["exit_code"] == 0
        # a task that is a rank is its agent's own child: its exit status itself reached the judge (by
        # another path than torchrun's ranks: the task's exit, never presumed), for each rank that finished
        finished = sorted((e["node"], e["rank"], e["exit_code"], e.get("presumed"))
                          for e in named(evs, "rank_exit") if e["generation"] == 1 and e["rank"] >= 0)
        assert finished == [("n1", 0, 0, None), ("n1-t1", 1, 0, None), ("n2", 2, 0, None),
                            ("n2-t1", 3, 0, None)], finished
        # each task's output is its rank's log, as torchrun's ranks' are
        assert "resuming at step 11" in rank_lines(job.run_dir, "n2-t1", 1)
        assert "training done at step 30" in rank_lines(job.run_dir, "n1", 1)
        assert (job.run_dir / "nodes" / "n1-t1" / "gen-0" / "rank-1.log").exists()
        job.assert_nothing_survives()


@pytest.mark.xdist_group(SRUN_HANG_GROUP)
def test_srun_publishes_every_event_to_mqtt_and_each_node_uploads_its_bundle(srun_hang: HangRun) -> None:
    """--mqtt and --artifacts under srun, as under torchrun (they once reached nothing, silently):
    every event of events.jsonl on the broker in order, and the incident bundle of each node of a
    hang in S3."""
    job = srun_hang.job
    assert srun_hang.state == "COMPLETED", job.explain()
    evs = events(job.run_dir)
    assert named(evs, "job_finished")[-1]["exit_code"] == 0 and named(evs, "restart"), [e["event"] for e in evs]
    job_id = evs[0]["job_id"]
    assert srun_hang.rec.events_of_job(f"{srun_hang.topic}/{job_id}/") == [e["event"] for e in evs]
    uploads = named(evs, "upload")
    assert {u["node"] for u in uploads} == {"n1", "n2"} and all(u["ok"] for u in uploads), uploads
    listed = srun_hang.s3.list_objects_v2(Bucket=srun_hang.bucket, Prefix=f"{srun_hang.prefix}/").get("Contents", [])
    keys = [o["Key"] for o in listed]
    for node in ("n1", "n2"):
        assert any(f"/{node}/" in k and k.endswith("/env.json") for k in keys), (node, keys)


def _secs(a: str, b: str) -> float:
    import datetime

    def p(t: str) -> datetime.datetime:
        return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ")

    return (p(b) - p(a)).total_seconds()


#: the hardware-error jobs' ranks a node: the drain, the exclusion and the requeue are the nodes'
HW_NPROC = 1


def _hw_args() -> list[str]:
    return ["--hw-error-at", "12", "--hw-error-rank", "1"]  # rank 1 = node rank 1 (n2), its one rank


def test_hardware_error_drains_the_node_and_continues_on_the_spare(drainable_slurm_cluster: SlurmCluster,
                                                                   tmp_path: Path) -> None:
    slurm_cluster = drainable_slurm_cluster
    with submitted(slurm_cluster, tmp_path, 3, _hw_args(), nproc=HW_NPROC) as job:
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        evs = events(job.run_dir)
        drain = named(evs, "drain")
        assert drain and drain[0]["node"] == "n2" and drain[0]["drained"], drain
        plan = named(evs, "restart_plan")[0]
        assert plan["how"] == "exclude" and plan["exclude"] == ["n2"], plan
        steps = named(evs, "srun_step")
        assert len(steps) == 2 and steps[1]["exclude"] == ["n2"]
        assert "--exclude=n2" in steps[1]["argv"]
        assert "training done at step 30" in rank_lines(job.run_dir, "n3", 1)
        st, reason = slurm_cluster.node_states()["n2"]
        assert st in ("drained", "draining") and reason.startswith("neuron-watch: hardware_error:"), (st, reason)
        assert "NRT_EXEC_HW_ERR_HBM_UE" in slurm_cluster.scontrol("show", "node", "n2")
        remembered = json.loads((tmp_path / "drains.json").read_text())["drains"]
        assert [d["node"] for d in remembered] == ["n2"]
        job.assert_nothing_survives()


def test_hardware_error_without_spare_requeues_the_job_without_the_node(drainable_slurm_cluster: SlurmCluster,
                                                                        tmp_path: Path) -> None:
    slurm_cluster = drainable_slurm_cluster
    with submitted(slurm_cluster, tmp_path, 2, _hw_args(), sbatch_args=["--requeue"], nproc=HW_NPROC) as job:
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        info = slurm_cluster.scontrol("show", "job", job.id)
        assert "Restarts=1" in info and "ExcNodeList=n2" in info, info
        evs = events(job.run_dir)
        assert named(evs, "requeue")[0]["exclude"] == ["n2"]
        assert not named(evs, "requeue_update_failed"), named(evs, "requeue_update_failed")
        started = named(evs, "job_started")
        assert [s["slurm_restart_count"] for s in started] == [0, 1]
        assert sorted(started[1]["allocation"]) == ["n1", "n3"]
        assert named(evs, "job_finished")[-1]["exit_code"] == 0
        st, reason = slurm_cluster.node_states()["n2"]
        assert st == "drained" and reason.startswith("neuron-watch: hardware_error:"), (st, reason)
        assert "training done at step 30" in rank_lines(job.run_dir, "n3", 1)
        job.assert_nothing_survives()


def test_the_coordinator_aborting_under_srun_is_survived_restarted_and_a_later_hang_still_judged(
        quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """libzmq's ``Assertion failed: !_io_error`` abort (SIGABRT) of the srun job's coordinator, mid-run:
    it runs in a process of its own, so the batch step (``neuron-watch srun``, which keeps the srun
    step) and both nodes' ranks go on; the batch step starts it again, the agents reconnect, the new
    coordinator takes up the job, and the hang that comes after (rank 1, n2's one rank, stops at step
    20) is judged with its culprit and the step restarted from the checkpoint; the job completes.
    No process of it survives."""
    c = quiet_slurm_cluster
    with submitted(c, tmp_path, 2, ["--steps", "40", "--step-time", "0.5", "--hang-at", "20", "--hang-rank", "1"],
                   HANG_WATCH, nproc=1) as job:
        # both nodes train (their first steps are in their rank logs) and the coordinator's process is up
        c.wait_for("both nodes training and the coordinator's process up",
                   lambda: all("step 2 loss" in rank_lines(job.run_dir, n, 0) for n in ("n1", "n2"))
                   and hosted_coordinator_pid(job.run_dir), timeout=180, interval=0.3)
        first = hosted_coordinator_pid(job.run_dir)
        assert first is not None
        os.kill(first, signal.SIGABRT)
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        assert first not in pids_with_env(HOSTED_MARKER_ENV, str(job.run_dir))
        out = job.output()
        assert f"the job's coordinator (pid {first}) died (signal SIGABRT)" in out, out[-4000:]
        evs = events(job.run_dir)
        (restarted,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_restarted"]
        assert restarted["cause"] == "signal SIGABRT" and restarted["resumed"] and restarted["pid"] != first
        hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert len(hang) == 1 and hang[0]["culprit"] == {"node": "n2", "rank": 1}, hang
        assert evs.index(restarted) < evs.index(hang[0])  # judged by the coordinator started again
        # the step of generation 0 was said once (by the first coordinator), the new step once
        assert [s["generation"] for s in named(evs, "srun_step")] == [0, 1]
        assert len(named(evs, "restart")) == 1
        end = named(evs, "job_finished")
        assert len(end) == 1 and end[0]["exit_code"] == 0 and end[0]["generation"] == 1, end
        assert "training done at step 40" in rank_lines(job.run_dir, "n2", 1)
        memory = json.loads((job.run_dir / "coordinator-state.json").read_text())
        assert memory["generation"] == 1 and memory["restarts"] == 1 and memory["incidents"] == 1
        job.assert_nothing_survives()
        assert wait_until_gone(HOSTED_MARKER_ENV, str(job.run_dir), 30) == []


def test_the_srun_coordinator_dying_while_the_step_restarts_is_replaced_by_one_that_restarts_it_once(
        quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """srun's resume path (docs/multinode.md, "A crash mid-recovery"): the hang (rank 1, n2's one rank,
    stops at step 20) is judged and the job's coordinator is killed (SIGABRT) as soon as it says it
    stops the step, before a new step runs. The batch step starts it again; the new one reads the
    recovery under way in coordinator-state.json and what runs from the batch step (the step's state),
    and finishes it: the step is restarted exactly once, as generation 1, from the checkpoint, and
    the job completes. No process of it survives."""
    c = quiet_slurm_cluster
    with submitted(c, tmp_path, 2, ["--steps", "40", "--step-time", "0.3", "--hang-at", "20", "--hang-rank", "1"],
                   HANG_WATCH, nproc=1) as job:
        c.wait_for("the hang's verdict and the stop of the step", lambda: "stopping" in recovery_phases(job.run_dir),
                   timeout=240, interval=0.05)
        first = hosted_coordinator_pid(job.run_dir)
        assert first is not None
        assert [s["generation"] for s in named(events(job.run_dir), "srun_step")] == [0]  # no new step yet
        os.kill(first, signal.SIGABRT)
        state = job.wait()
        assert state == "COMPLETED", job.explain()
        out = job.output()
        assert f"the job's coordinator (pid {first}) died (signal SIGABRT)" in out, out[-4000:]
        evs = events(job.run_dir)
        (restarted,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_restarted"]
        assert restarted["resumed"] and restarted["pid"] != first
        (resumed,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_resumed"]
        print("resumed:", resumed["action"], resumed["message"])
        # killed as the stop began: its verdict stands and the step's restart is owed (the record says
        # capture or stop: the kill lands within a turn of the event)
        assert resumed["action"] == "stop_and_restart", resumed
        assert evs.index(restarted) < evs.index(resumed)
        (hang,) = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert hang["culprit"] == {"node": "n2", "rank": 1}, hang
        assert [s["generation"] for s in named(evs, "srun_step")] == [0, 1]
        assert len(named(evs, "restart")) == 1, named(evs, "restart")
        end = named(evs, "job_finished")
        assert len(end) == 1 and end[0]["exit_code"] == 0 and end[0]["generation"] == 1, end
        assert end[0]["restarts"] == 1, end
        assert "training done at step 40" in rank_lines(job.run_dir, "n2", 1)
        assert "resuming at step" in rank_lines(job.run_dir, "n2", 1)
        memory = json.loads((job.run_dir / "coordinator-state.json").read_text())
        assert memory["generation"] == 1 and memory["restarts"] == 1 and memory["under_way"] == "", memory
        job.assert_nothing_survives()
        assert wait_until_gone(HOSTED_MARKER_ENV, str(job.run_dir), 30) == []


def test_scancel_stops_every_process_of_the_job(quiet_slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = quiet_slurm_cluster
    # one rank a node: the scancel's reach is the job's processes, whatever their count
    with submitted(c, tmp_path, 2, ["--steps", "100000"], nproc=1) as job:
        c.wait_for("progress", lambda: (job.run_dir / "events.jsonl").exists()
                   and named(events(job.run_dir), "progress"), timeout=120, interval=0.5)
        c.run("scancel", job.id)
        assert job.wait(60) == "CANCELLED"
        job.assert_nothing_survives()
        finished = named(events(job.run_dir), "job_finished")
        assert finished and finished[-1]["state"] == "interrupted", job.explain()


@pytest.mark.xdist_group(SRUN_HANG_GROUP)
def test_console_of_a_hang_says_every_decision_in_order(srun_hang: HangRun) -> None:
    """What the operator reads in slurm-<job>.out: one [neuron-watch] line per decision, in order."""
    from tests.process.test_console import assert_in_order

    job = srun_hang.job
    assert srun_hang.state == "COMPLETED", job.explain()
    out = job.output()
    found = assert_in_order(out, [
        f"[neuron-watch] start: job slurm-{job.id} on ... (2 nodes); watching srun -N 2 --ntasks-per-node 1 "
        f"...; hang timeout {HANG_TIMEOUT:g}s (--hang-timeout), run dir ...",
        "[neuron-watch] generation 0: srun step started (pid ...)",
        "[neuron-watch] failure seen: capturing evidence (incident-1) on 2 node(s) before anything is stopped",
        "[neuron-watch] verdict: collective_hang...(no rank progressed ...) -> restart",
        "[neuron-watch] evidence captured: incident 1 in ... -> n1: ..., n2: ...",
        "[neuron-watch] job stopped on n1 (...)",
        "[neuron-watch] job stopped on n2 (...)",
        f"[neuron-watch] restarting as generation 1 from {job.ckpt}/step_10; restart 1 of 3, 2 left",
        "[neuron-watch] generation 1: srun step started (pid ...)",
        "[neuron-watch] job finished: exit code 0, 1 restart(s), 1 incident(s), last step 30 "
        "(every node finished)...",
    ])
    after_stop = out.splitlines()[found[5]:]
    assert not [ln for ln in after_stop if "Traceback" in ln or "SignalException" in ln], out[-4000:]
