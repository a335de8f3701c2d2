"""Elastic multi-node launches on one machine: two ``neuron-watch torchrun --nnodes 2 --rdzv_backend
c10d --rdzv_endpoint HOST:PORT --rdzv_id X`` with no ``--node_rank`` (torchrun's recommended form),
a real torchrun each, sharing one host name. torchrun's parser says node_rank 0 in both; the
wrappers must agree on one coordinator without a race and take their places from the rendezvous."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    alive,
    events,
    free_port,
    kill_group,
    named,
    pids_in_group,
    start_node,
    wait_until_gone,
)
from tests.fixtures.wait import wait_for

pytestmark = pytest.mark.process

Node = tuple[subprocess.Popen[str], Path]


@contextmanager
def elastic_job(tmp_path: Path, env: dict[str, str], toy_args: list[str], watch_args: list[str],
                coordinator: str, nproc: int = 1) -> Iterator[list[Node]]:
    """Two wrappers of one elastic job (no --node_rank, no NEURON_WATCH_NODE), ``nproc`` ranks each
    (one: what these tests read is the nodes' places, names, stops and restarts); stopped and reaped."""
    rdzv, rdzv_id = f"127.0.0.1:{free_port()}", f"el-{secrets.token_hex(3)}"
    ckpt = tmp_path / "ckpt"
    nodes: list[Node] = []
    with ExitStack() as stack:
        for i in range(2):
            run_dir = tmp_path / f"node{i}"
            node_env = dict(env, NEURON_WATCH_SECRET="e" * 32)
            argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
                    "--coordinator", coordinator, *watch_args,
                    "torchrun", "--nnodes", "2", "--nproc_per_node", str(nproc), "--rdzv_backend", "c10d",
                    "--rdzv_endpoint", rdzv, "--rdzv_id", rdzv_id,
                    TOY, "--checkpoint-dir", str(ckpt), *toy_args]
            p = start_node(stack, argv, cwd=tmp_path, env=node_env, out=tmp_path / f"node{i}.out", run_dir=run_dir)
            nodes.append((p, run_dir))
        yield nodes


def wait_all(nodes: list[Node], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    return [p.wait(max(1.0, deadline - time.monotonic())) for p, _ in nodes]


def outputs(tmp_path: Path) -> str:
    return "".join(f"--- node{i}\n" + (tmp_path / f"node{i}.out").read_text()[-3000:] for i in range(2))


def the_coordinators(nodes: list[Node]) -> Path:
    """The run dir of the one wrapper that hosted the coordinator (the job's events)."""
    hosts = [d for _p, d in nodes if (d / "events.jsonl").exists() and named(events(d), "job_started")]
    assert len(hosts) == 1, f"{len(hosts)} coordinators"
    return hosts[0]


def node_of(run_dir: Path) -> str:
    """The name a wrapper took: its generation-1 command file carries it (generation 0's files are
    opened before the rendezvous places the node, under the host name)."""
    (command,) = (run_dir / "gen-1").glob("command-*.json")
    return command.stem.removeprefix("command-")


def test_two_elastic_nodes_on_one_host_agree_on_one_coordinator_a_hang_is_judged_and_both_restart(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    host = socket.gethostname().split(".")[0]
    # rank 1: the one rank of the node the rendezvous placed second
    with elastic_job(tmp_path, toy_env, ["--steps", "14", "--hang-at", "8", "--hang-rank", "1"],
                     ["--hang-timeout", "6"], f"127.0.0.1:{free_port()}") as nodes:
        codes = wait_all(nodes, 360)
    assert codes == [0, 0], outputs(tmp_path)
    coord = the_coordinators(nodes)
    evs = events(coord)
    # each node's place is the GROUP_RANK the rendezvous gave it, and its name carries it
    hellos = sorted((e["node"], e["place"]) for e in named(evs, "node_hello"))
    assert hellos == [(f"{host}-n0", 0), (f"{host}-n1", 1)]
    assert sorted(node_of(d) for _p, d in nodes) == [f"{host}-n0", f"{host}-n1"]
    assert not named(evs, "node_refused") and not named(evs, "job_refused")
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"] == {"node": f"{host}-n1", "rank": 1}
    restarts = named(evs, "restart")
    assert len(restarts) == 1 and restarts[0]["checkpoint"].endswith("step_5")
    assert {e["node"] for e in named(evs, "stopped") if e["answered"]} == {f"{host}-n0", f"{host}-n1"}
    assert named(evs, "job_finished")[-1]["exit_code"] == 0
    # both nodes ran generation 1 from the one checkpoint (the rendezvous may place them anew)
    for _p, run_dir in nodes:
        gen1 = json.loads((run_dir / "gen-1" / f"command-{node_of(run_dir)}.json").read_text())
        assert gen1["checkpoint"] == restarts[0]["checkpoint"]
    resumed = "".join(f.read_text() for _p, d in nodes for f in (d / "gen-1").glob("rank-*.log"))
    assert resumed.count("resuming at step 6") == 2, resumed[-2000:]  # every rank of both nodes
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []


@contextmanager
def standalone(tmp_path: Path, env: dict[str, str], job_id: str, port: int,
               extra: list[str]) -> Iterator[subprocess.Popen[str]]:
    """``neuron-watch coordinator`` for ``job_id`` on loopback ``port``, listening when yielded;
    stopped (one deadline) and reaped afterwards."""
    run_dir = tmp_path / "coordinator"
    with open(tmp_path / "coordinator.out", "w") as log:
        p = subprocess.Popen([NEURON_WATCH, "--job-id", job_id, "--run-dir", str(run_dir), "coordinator",
                              "--bind", f"127.0.0.1:{port}", *extra], env=dict(env, NEURON_WATCH_SECRET="e" * 32),
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True, text=True)
        try:
            deadline = time.monotonic() + 60
            while not _listening(port):  # polls the coordinator's start
                assert p.poll() is None and time.monotonic() < deadline, (tmp_path / "coordinator.out").read_text()
                time.sleep(0.05)
            yield p
        finally:
            kill_group(p)
    assert pids_in_group(p.pid) == []


def test_elastic_nodes_that_leave_the_job_to_a_standalone_coordinator_take_their_places_from_the_rendezvous(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    host = socket.gethostname().split(".")[0]
    port, job_id = free_port(), f"els-{secrets.token_hex(3)}"
    with standalone(tmp_path, toy_env, job_id, port, ["--nodes", "2"]) as coord:
        node_env = dict(toy_env, NEURON_WATCH_HOST_COORDINATOR="0")
        with elastic_job(tmp_path, node_env, ["--steps", "8"], ["--job-id", job_id], f"127.0.0.1:{port}") as nodes:
            codes = wait_all(nodes, 240)
        assert codes == [0, 0], outputs(tmp_path)
        assert coord.wait(60) == 0, (tmp_path / "coordinator.out").read_text()[-3000:]
    evs = events(tmp_path / "coordinator")
    assert sorted((e["node"], e["place"]) for e in named(evs, "node_hello")) == [(f"{host}-n0", 0), (f"{host}-n1", 1)]
    assert not named(evs, "node_refused")
    assert named(evs, "job_finished")[-1]["exit_code"] == 0
    assert not any((d / "events.jsonl").exists() for _p, d in nodes)  # no wrapper hosted a coordinator
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []


def test_an_elastic_job_whose_coordinator_port_another_job_holds_is_told_so(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """The port is held by another job's coordinator (same secret, another job id): neither node
    hosts, both are refused by that coordinator, and each says the port is another job's."""
    port = free_port()
    with standalone(tmp_path, toy_env, "other-job", port, []):
        with elastic_job(tmp_path, toy_env, ["--steps", "400"], ["--hang-timeout", "60"],
                         f"127.0.0.1:{port}") as nodes:
            codes = wait_all(nodes, 240)
        assert codes == [2, 2], outputs(tmp_path)
        for i in range(2):
            said = (tmp_path / f"node{i}.out").read_text()
            assert f"the coordinator port 127.0.0.1:{port} is held by job other-job" in said, said[-2000:]
            assert "pick a free port" not in said
        refused = [e for _p, d in nodes for e in named(events(d), "job_refused")]
        assert len(refused) == 2 and {e["other_job"] for e in refused} == {"other-job"}
        for _p, run_dir in nodes:
            assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_an_elastic_node_whose_rendezvous_times_out_alone_ends_with_torchruns_code(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """One node of two comes; torchrun's rendezvous gives up (``join_timeout=5``) and exits 1. The
    rendezvous placed nobody: the node is named by the wrapper's pid, hosts the coordinator, and
    the job ends with torchrun's code and why, instead of waiting on, silent, for the other node
    (after ``--absent-node-wait``, short here: the wait itself is not the subject)."""
    host = socket.gethostname().split(".")[0]
    run_dir = tmp_path / "node0"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--coordinator", f"127.0.0.1:{free_port()}",
            "--absent-node-wait", "5", "torchrun", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", f"alone-{secrets.token_hex(3)}",
            "--rdzv_conf", "join_timeout=5", TOY, "--steps", "5"]
    with ExitStack() as stack:
        p = start_node(stack, argv, cwd=tmp_path, env=dict(toy_env, NEURON_WATCH_SECRET="e" * 32),
                       out=tmp_path / "node0.out", run_dir=run_dir)
        code = p.wait(240)
    said = (tmp_path / "node0.out").read_text()
    assert code == 1, said[-3000:]
    evs = events(run_dir)
    (warning,) = [e for e in named(evs, "warning") if e["kind"] == "nodes_missing"]
    assert warning["nodes"] == [f"{host}-p{p.pid}"] and "before every node of the job joined" in warning["message"]
    assert "waiting 5s for the others to join" in warning["message"]  # --absent-node-wait reached the coordinator
    finished = named(evs, "job_finished")[-1]
    assert finished["state"] == "failed" and finished["exit_code"] == 1
    assert "before every node of the job joined" in said
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []


def test_a_signal_while_an_elastic_node_waits_for_its_place_stops_it_and_records_the_end(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """SIGTERM to a wrapper whose torchrun waits in the rendezvous for a node that never comes (the
    job's shape is known, its place is not): its torchrun is stopped, it exits 143, and its events
    end with ``job_finished`` (interrupted)."""
    run_dir, rdzv_port = tmp_path / "node0", free_port()
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--coordinator", f"127.0.0.1:{free_port()}",
            "torchrun", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{rdzv_port}", "--rdzv_id", f"wait-{secrets.token_hex(3)}",
            TOY, "--steps", "5"]
    with ExitStack() as stack:
        p = start_node(stack, argv, cwd=tmp_path, env=dict(toy_env, NEURON_WATCH_SECRET="e" * 32),
                       out=tmp_path / "node0.out", run_dir=run_dir)
        # torchrun waits in its rendezvous once its c10d store listens on the endpoint. The shape is
        # known once torchrun's parser (a child of the wrapper, started with torchrun, ~0.04 CPU-s:
        # too short-lived to be caught by polling) is gone.
        deadline = time.monotonic() + 180
        while not (_listening(rdzv_port) and not any(b"get_args_parser" in _cmdline(c) for c in _children(p.pid))):
            assert p.poll() is None and time.monotonic() < deadline, (tmp_path / "node0.out").read_text()[-3000:]
            time.sleep(0.05)
        torchrun = [c for c in _children(p.pid) if b"torch" in _cmdline(c)]
        assert torchrun, "torchrun is not running"
        os.kill(p.pid, signal.SIGTERM)
        code = p.wait(120)
    assert code == 143, (tmp_path / "node0.out").read_text()[-3000:]
    finished = named(events(run_dir), "job_finished")
    assert len(finished) == 1 and finished[0]["state"] == "interrupted" and finished[0]["exit_code"] == 143
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []
    assert not any(alive(pid) for pid in torchrun)



def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_an_elastic_range_running_below_its_maximum_is_judged_and_its_hang_restarted(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """``--nnodes 1:2`` with one node: torchrun's rendezvous starts the job at the range's minimum, and
    judging starts there too (the coordinator used to wait for the maximum: a hang of this job went
    unseen for as long as it lived). Rank 1 never joins step 5's collective: a collective hang with
    rank 1 the culprit, one restart, and the job finishes."""
    run_dir = tmp_path / "node0"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--hang-timeout", "5", "--max-restarts", "1",
            "torchrun", "--nnodes", "1:2", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", f"range-{secrets.token_hex(3)}",
            "--rdzv_conf", "last_call_timeout=1", TOY, "--steps", "12", "--hang-at", "5", "--hang-rank", "1"]
    with ExitStack() as stack:
        p = start_node(stack, argv, cwd=tmp_path, env=dict(toy_env, NEURON_WATCH_SECRET="e" * 32),
                       out=tmp_path / "node0.out", run_dir=run_dir)
        code = p.wait(240)
    said = (tmp_path / "node0.out").read_text()[-3000:]
    assert code == 0, said
    evs = events(run_dir)
    (hang,) = [v for v in named(evs, "verdict") if v["action"] == "restart"]
    assert hang["label"] == "collective_hang" and hang["culprit"]["rank"] == 1, hang
    assert len(named(evs, "restart")) == 1 and named(evs, "job_finished")[0]["exit_code"] == 0, said
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []


def test_a_node_joining_an_elastic_range_after_a_restart_is_judged_with_the_running_generation(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """``--nnodes 1:2``: node 0 alone crashes in generation 0 and is restarted; a second node joins
    generation 1 (torchrun's scale-up: node 0's workers restarted by torchrun itself, in their
    attempt's log dir made anew). Its agent, started by its own wrapper, counts generation 0: it is
    adopted by generation 1, its ranks judged and its end counted (the job used to wait for it for ever),
    and node 0's new workers are read (their files were made anew: they used to go unread).
    ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: torch 2.13's scale-up with its shared TCPStore does not
    complete (docs/multinode.md)."""
    steps = 30
    env = dict(toy_env, NEURON_WATCH_SECRET="e" * 32, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    rdzv, rdzv_id = f"127.0.0.1:{free_port()}", f"grow-{secrets.token_hex(3)}"
    runs = [tmp_path / "node0", tmp_path / "node1"]

    def argv(run_dir: Path) -> list[str]:
        return [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--hang-timeout", "8", "--max-restarts", "2",
                "torchrun", "--nnodes", "1:2", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", rdzv, "--rdzv_id", rdzv_id, "--rdzv_conf", "last_call_timeout=1", TOY,
                "--steps", str(steps), "--step-time", "0.25", "--checkpoint-dir", str(tmp_path / "ckpt"),
                "--crash-at", "3", "--crash-rank", "0", "--fault-generation", "0"]

    with ExitStack() as stack:
        first = start_node(stack, argv(runs[0]), cwd=tmp_path, env=env, out=tmp_path / "node0.out", run_dir=runs[0])
        restarted = lambda: (runs[0] / "events.jsonl").exists() and named(events(runs[0]), "restart")  # noqa: E731
        wait_for("node 0's restart", restarted, time.monotonic() + 120, alive=first,
                 explain=lambda: (tmp_path / "node0.out").read_text()[-2000:])
        second = start_node(stack, argv(runs[1]), cwd=tmp_path, env=env, out=tmp_path / "node1.out", run_dir=runs[1])
        codes = (first.wait(180), second.wait(60))
    said = (tmp_path / "node0.out").read_text()[-3000:] + (tmp_path / "node1.out").read_text()[-1500:]
    assert codes == (0, 0), said
    evs = events(runs[0])
    (adopted,) = [w for w in named(evs, "warning") if w.get("kind") == "node_adopted"]
    assert adopted["generation"] == 1 and adopted["node"] != named(evs, "job_started")[0]["node"], adopted
    assert len(named(evs, "restart")) == 1 and named(evs, "job_finished")[0]["exit_code"] == 0, said
    finished = {e["node"] for e in named(evs, "node_status") if e["state"] == "finished" and e["generation"] == 1}
    assert len(finished) == 2 and adopted["node"] in finished, said
    node0 = [e["state"] for e in named(evs, "node_status")
             if e["generation"] == 1 and e["node"] == named(evs, "job_started")[0]["node"]]
    # torchrun ends node 0's workers for the scale-up and starts new ones: seen ending (when a reading
    # falls between the two), it runs again; it finishes once
    assert node0[-1] == "finished" and node0.count("finished") == 1, node0
    assert all(after in ("launched", "finished") for now, after in itertools.pairwise(node0)
               if now == "finishing"), node0
    ranks = json.loads((runs[0] / "status.json").read_text())["ranks"]
    assert len(ranks) == 4 and all(r["last_step"] == steps for r in ranks), ranks
    for run_dir in runs:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []
