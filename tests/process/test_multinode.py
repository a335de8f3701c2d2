"""Several nodes on one machine: one ``neuron-watch torchrun --nnodes N --node_rank I`` per node, a
real torchrun each (static rendezvous on loopback), node 0 hosting the coordinator, the agents
linked to it over ZeroMQ with the job's secret."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from neuron_watch.diagnosis.stacks import main_thread
from neuron_watch.job.hosting import HOSTED_MARKER_ENV
from tests.fixtures.procs import (
    NEURON_WATCH,
    STEP_RANKS,
    TOY,
    events,
    force_cleanup,
    free_port,
    hosted_coordinator_pid,
    kill_group,
    named,
    pids_with_env,
    recovery_phases,
    toy_environment,
    wait_until_gone,
)
from tests.fixtures.runs import StandaloneRun, TwoNodeRun
from tests.fixtures.wait import wait_for, within

pytestmark = pytest.mark.process

NPROC = 2


@contextmanager
def job(tmp_path: Path, env: dict[str, str], nnodes: int, toy_args: list[str], watch_args: Sequence[str] = (),
        rank_cmd: Sequence[str] | None = None, coord_port: int | None = None,
        job_id: str | None = None, named: bool = True, node_ranks: Sequence[int] | None = None,
        nproc: int = NPROC) -> Iterator[list[tuple[subprocess.Popen[str], Path]]]:
    """Start ``nnodes`` wrappers; yields (process, run dir) per node; stops and reaps them all.

    The ranks run the toy job with ``toy_args``, or ``rank_cmd`` (a script and its arguments).
    ``named``: each node gets ``NEURON_WATCH_NODE=n<i>``; else its name comes from the host name,
    which all of them share here. ``node_ranks``: one wrapper per entry (default ``range(nnodes)``).
    ``nproc``: ranks per node; 1 where the scenario is about the nodes, not the ranks beside a culprit.
    """
    master, coord = free_port(), coord_port or free_port()
    job_id = job_id or f"mn-{secrets.token_hex(3)}"
    ckpt = tmp_path / "ckpt"  # shared storage, as /fsx is on a real cluster
    nodes = []
    with ExitStack() as stack:
        for i, node_rank in enumerate(range(nnodes) if node_ranks is None else node_ranks):
            run_dir = tmp_path / f"node{i}"
            node_env = dict(env, NEURON_WATCH_SECRET="s" * 32)
            node_env.pop("NEURON_WATCH_NODE", None)
            if named:
                node_env["NEURON_WATCH_NODE"] = f"n{i}"
            argv = [NEURON_WATCH, "--quiet", "--job-id", job_id, "--run-dir", str(run_dir),
                    "--checkpoint-dir", str(ckpt), "--coordinator", f"127.0.0.1:{coord}", *watch_args,
                    "torchrun", "--nnodes", str(nnodes), "--node_rank", str(node_rank), "--nproc_per_node", str(nproc),
                    "--master_addr", "127.0.0.1", "--master_port", str(master),
                    *(rank_cmd if rank_cmd is not None else (TOY, "--checkpoint-dir", str(ckpt), *toy_args))]
            out = open(tmp_path / f"node{i}.out", "w")  # noqa: SIM115 - closed by the stack
            stack.callback(out.close)
            p = subprocess.Popen(argv, cwd=tmp_path, env=node_env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            stack.callback(force_cleanup, str(run_dir))
            stack.callback(kill_group, p)
            nodes.append((p, run_dir))
        yield nodes


def wait_all(nodes: list[tuple[subprocess.Popen[str], Path]], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for p, _ in nodes:
        codes.append(p.wait(max(1.0, deadline - time.monotonic())))
    return codes


def out(tmp_path: Path, i: int) -> str:
    return (tmp_path / f"node{i}.out").read_text()[-3000:]


class NodesRun(NamedTuple):
    codes: list[int]  # each node's exit code
    tmp_path: Path  # its directory, with node<i>.out
    run_dirs: list[Path]  # each node's run dir


#: the steps of the compile run below
COMPILE_STEPS = 8


@pytest.fixture(scope="module")
def compile_on_node1(tmp_path_factory: pytest.TempPathFactory) -> NodesRun:
    """One run read by the two nodes' finish test and the compile's not-a-restart test: nodes n0, n1
    (2 ranks each); rank 3, on the node without the coordinator, compiles for 20 s at step 3 of
    ``COMPILE_STEPS`` while every other rank, on both nodes, waits for it in a collective (RX
    timeouts every 2 s), hang timeout 6 s; both nodes finish. No pid of it survives."""
    tmp_path = tmp_path_factory.mktemp("multinode-compile")
    with job(tmp_path, toy_environment(), 2, ["--steps", str(COMPILE_STEPS), "--compile-at", "3", "--compile-rank",
                                              "3", "--compile-seconds", "20", "--rx-warn-every", "2"],
             ["--hang-timeout", "6"]) as nodes:
        codes = wait_all(nodes, 300)
    for _p, run_dir in nodes:
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return NodesRun(codes, tmp_path, [run_dir for _p, run_dir in nodes])


@pytest.mark.xdist_group("multinode-compile")
def test_two_nodes_finish(compile_on_node1: NodesRun) -> None:
    """Both nodes end with the job's code 0; node 0's merged log has both nodes' last steps, node 1
    keeps its own rank logs (the compile in the run is the other test's subject)."""
    codes, tmp_path, (run0, run1) = compile_on_node1
    assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
    evs = events(run0)
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    assert {e["node"] for e in named(evs, "node_joined")} == {"n0", "n1"}
    merged = (run0 / "merged.log").read_text()
    last = f"step {COMPILE_STEPS} loss"
    assert f"n0/rank0 | {last}" in merged and f"n1/rank3 | {last}" in merged
    assert (run1 / "gen-0" / "rank-3.log").exists()  # node 1 keeps its own rank logs


@pytest.mark.xdist_group("standalone-hang")
def test_a_standalone_coordinator_publishes_every_event_to_mqtt(standalone_hang: StandaloneRun) -> None:
    """`neuron-watch coordinator --mqtt ...` with two wrappers that leave it the job: every event of
    its events.jsonl reaches the broker, in order (it once attached no MQTT sink)."""
    run = standalone_hang
    assert run.coordinator_code == 0, (run.tmp_path / "coordinator.out").read_text()[-3000:]
    assert run.codes == [0, 0], out(run.tmp_path, 0) + out(run.tmp_path, 1)
    evs = events(run.run_dir)
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    job_id = named(evs, "job_started")[0]["job_id"]
    assert run.outputs.rec.events_of_job(f"{run.outputs.topic}/{job_id}/") == [e["event"] for e in evs]


@pytest.mark.xdist_group("standalone-hang")
def test_every_node_answers_the_standalone_coordinators_shutdown(standalone_hang: StandaloneRun) -> None:
    """At the job's end the coordinator tells every node to shut down and serves on until each says
    it exited (its summary keeps what each last said): a node that left without saying it kept the
    coordinator waiting out its grace and was reported unobserved."""
    run = standalone_hang
    assert run.coordinator_code == 0, (run.tmp_path / "coordinator.out").read_text()[-3000:]
    summary = json.loads((run.run_dir / "coordinator.json").read_text())
    assert {n: v["status"] for n, v in summary["nodes"].items()} == {"n0": "exited", "n1": "exited"}, summary["nodes"]
    evs = events(run.run_dir)
    end = next(i for i, e in enumerate(evs) if e["event"] == "job_finished")
    assert not named(evs[end:], "node_unobserved"), evs[end:]


def host_node(i: int) -> str:
    """The name of node ``i`` of a job whose nodes share this host's name."""
    return f"{socket.gethostname().split('.')[0]}-n{i}"


@pytest.mark.xdist_group("two-node-hang")
def test_hang_on_node1_restarts_every_node_from_the_same_checkpoint(two_node_hang: TwoNodeRun) -> None:
    codes, tmp_path, run_dirs, _ = two_node_hang
    assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
    evs = events(run_dirs[0])
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"] == {"node": host_node(1), "rank": 3}
    restarts = named(evs, "restart")
    assert len(restarts) == 1 and restarts[0]["checkpoint"].endswith("step_5")
    for i, run_dir in enumerate(run_dirs):
        gen1 = json.loads((run_dir / "gen-1" / f"command-{host_node(i)}.json").read_text())
        assert gen1["checkpoint"] == restarts[0]["checkpoint"]
    assert "resuming at step 6" in (run_dirs[1] / "gen-1" / "rank-2.log").read_text()
    stacks = run_dirs[1] / "incidents" / "incident-1" / host_node(1) / "stacks" / "rank-3.txt"
    # node 1 captured its own ranks before the stop (their worker server's dump, or py-spy's)
    assert main_thread(stacks.read_text()), stacks.read_text()
    manifest = json.loads((run_dirs[0] / "incidents" / "incident-1" / "manifest.json").read_text())
    assert sorted(manifest["nodes"]) == [host_node(0), host_node(1)] and manifest["missing_nodes"] == []
    assert any(f["path"].startswith("stacks/rank-3") for f in manifest["nodes"][host_node(1)]["files"])
    # the coordinator's incident holds the culprit's tail, asked of the job log's writer process
    tails = (run_dirs[0] / "incidents" / "incident-1" / "tails.log").read_text()
    assert tails.startswith(f"==> {host_node(1)}/rank3: its last "), tails[:300]
    section = tails.split("<==\n", 1)[1].split("\n==> ", 1)[0].splitlines()
    merged = (run_dirs[0] / "merged.log").read_text()
    assert section and all(f"{host_node(1)}/rank3 | {ln}\n" in merged for ln in section), section


@pytest.mark.xdist_group("two-node-hang")
def test_two_nodes_that_share_a_host_name_are_two_nodes_a_hang_is_judged_and_both_restart(
        two_node_hang: TwoNodeRun) -> None:
    """Two nodes of one job on one host (containers with one host name): each is known by its
    node_rank and named after it; they were once merged into one node and the hang never judged."""
    codes, tmp_path, run_dirs, _ = two_node_hang
    assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
    evs = events(run_dirs[0])
    assert sorted(e["node"] for e in named(evs, "node_joined")) == [host_node(0), host_node(1)]
    assert [(e["node"], e["place"]) for e in sorted(named(evs, "node_hello"), key=lambda e: e["place"])] == [
        (host_node(0), 0), (host_node(1), 1)]
    assert not named(evs, "node_rejoined") and not named(evs, "node_refused")
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"] == {"node": host_node(1), "rank": 3}
    assert len(named(evs, "restart")) == 1
    assert {e["node"] for e in named(evs, "stopped") if e["answered"]} == {host_node(0), host_node(1)}
    assert "resuming at step 6" in (run_dirs[1] / "gen-1" / "rank-2.log").read_text()


def test_two_agents_claiming_one_node_rank_are_refused_with_both_hosts_named(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    # one rank a node: the claim is the nodes' (three wrappers, two places); torch-free ranks (STEP_RANKS)
    # under real torchruns: neither torch nor a collective is the subject
    with job(tmp_path, toy_env, 2, [], ["--hang-timeout", "60"], named=False,
             node_ranks=[0, 1, 1], nproc=1, rank_cmd=[STEP_RANKS, "steady", "600"]) as nodes:
        evs: list[dict[str, Any]] = []

        def refused() -> bool:
            evs[:] = events(nodes[0][1]) if (nodes[0][1] / "events.jsonl").exists() else []
            return bool(named(evs, "node_refused"))

        deadline = time.monotonic() + 180
        while not refused():
            assert time.monotonic() < deadline, out(tmp_path, 0)
            time.sleep(0.2)
        # the refused wrapper stops its ranks and exits with the reason
        while not any(nodes[i][0].poll() not in (None, 0) for i in (1, 2)):
            assert time.monotonic() < deadline + 60, out(tmp_path, 1) + out(tmp_path, 2)
            time.sleep(0.2)
        loser = next(i for i in (1, 2) if nodes[i][0].poll() not in (None, 0))
        # the job ends as an operator ends one: a signal to node 0, whose coordinator stops every
        # node and shuts it down (a node signalled too would leave without answering the stop, and
        # the coordinator would wait out its silence and the stop's deadline for it)
        nodes[0][0].send_signal(signal.SIGTERM)
        wait_all(nodes, 120)
    host = socket.gethostname().split(".")[0]
    refusal = named(evs, "node_refused")
    assert len(refusal) == 1 and refusal[0]["node"] == f"{host}-n1" and refusal[0]["place"] == 1
    said = out(tmp_path, loser)
    assert "refused by the job's coordinator" in said and "already held by" in said and said.count("(pid ") >= 2
    for _p, run_dir in nodes:
        assert not wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 30)


@pytest.mark.xdist_group("multinode-compile")
def test_a_rank_compiling_on_one_node_while_the_others_wait_is_not_restarted(compile_on_node1: NodesRun) -> None:
    # 2 nodes: the compiling rank is on the node without the coordinator, and every other rank, on
    # both nodes, waits for it in a collective
    codes, tmp_path, (run0, _run1) = compile_on_node1
    assert codes == [0, 0], out(tmp_path, 0)
    evs = events(run0)
    assert not named(evs, "restart") and not named(evs, "incident")
    compiling = [e for e in named(evs, "verdict") if e["label"] == "compiling"]
    assert compiling and compiling[0]["culprit"] == {"node": "n1", "rank": 3}
    assert "Timeout waiting for RX" in (run0 / "gen-0" / "rank-0.log").read_text()


def test_losing_the_coordinators_node_stops_the_others_cleanly(tmp_path: Path, toy_env: dict[str, str]) -> None:
    # node 1's ranks hang in their next collective (silent); its agent keeps them while the
    # coordinator might come back, and stops them (exit 3) once the coordinator has been silent
    # for --coordinator-loss-timeout and its ranks for longer than the hang timeout (docs/multinode.md)
    nproc = 1  # one rank a node: the loss and the stop are the nodes'
    with job(tmp_path, toy_env, 2, ["--steps", "100000"],
             ["--coordinator-silence", "5", "--coordinator-loss-timeout", "10", "--hang-timeout", "5"],
             nproc=nproc) as nodes:
        (p0, run0), (p1, run1) = nodes
        deadline = time.monotonic() + 120
        # node 1's torchrun and its rank are up and the rank trains
        while len(pids_with_env("NEURON_WATCH_RUN_DIR", str(run1))) < nproc + 1 or "step 1 loss" not in _rank_log(run1):
            assert time.monotonic() < deadline and p1.poll() is None, out(tmp_path, 1)
            time.sleep(0.2)
        os.killpg(p0.pid, signal.SIGKILL)  # the whole node 0 wrapper dies at once
        p0.wait(30)
        code = p1.wait(90)
        assert code == 3, out(tmp_path, 1)  # ExitCode.UNOBSERVED
        assert "lost the coordinator at 127.0.0.1" in out(tmp_path, 1)
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run1), 15) == []
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run0), 15) == []  # node 0's guardian


def _heard(run_dir: Path, node: str) -> bool:
    """Whether the coordinator's events (being written) show a status of ``node``."""
    try:
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return False
    for line in lines:
        try:
            e = json.loads(line)
        except json.JSONDecodeError:  # the line being written
            continue
        if e.get("event") == "node_status" and e.get("node") == node:
            return True
    return False


def test_every_node_signalled_at_once_ends_the_job_on_their_word_not_the_stops_deadline(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """``scancel`` signals every node's wrapper at once. Node 1 stops its ranks on its own SIGTERM
    and tells the coordinator it leaves; the coordinator (node 0, signalled too) ends the job once
    node 0 stopped, recording why, instead of waiting out node 1's silence and the stop's deadline
    for an answer that never comes."""
    nproc = 1  # one rank a node: the signal, the stop and the leaving are the nodes'
    # torch-free ranks (STEP_RANKS, "step N loss X" every 0.1 s) under real torchruns: neither torch nor
    # a collective is the subject
    with job(tmp_path, toy_env, 2, [], ["--hang-timeout", "60"], nproc=nproc,
             rank_cmd=[STEP_RANKS, "steady", "600"]) as nodes:
        deadline = time.monotonic() + 180
        # both nodes joined (the coordinator heard node 1: its ranks training says nothing of that,
        # and a node never heard cannot tell it leaves) and their ranks train (their logs show steps)
        while not (all(len(pids_with_env("NEURON_WATCH_RUN_DIR", str(run))) >= nproc + 1 for _, run in nodes)
                   and all("step 2 loss" in _rank_log(run) for _, run in nodes) and _heard(nodes[0][1], "n1")):
            assert time.monotonic() < deadline and all(p.poll() is None for p, _ in nodes), out(tmp_path, 0)
            time.sleep(0.2)
        for p, _ in nodes:
            p.send_signal(signal.SIGTERM)
        codes = wait_all(nodes, 120)
    assert codes == [143, 143], out(tmp_path, 0) + out(tmp_path, 1)
    evs = events(nodes[0][1])
    end = named(evs, "job_finished")[0]
    said = {node: [(e["state"], e["detail"]) for e in named(evs, "node_status") if e["node"] == node]
            for node in ("n0", "n1")}
    story = f"{end['reason']}\n{said}\n{out(tmp_path, 0)}{out(tmp_path, 1)}"
    assert end["exit_code"] == 143 and end["state"] == "interrupted", story
    assert "n1 stopped on their own signal and left" in end["reason"], story
    assert "deadline passed" not in end["reason"], story  # no stop's deadline ran out
    # node 1 said it stopped on its own signal (its "exited" right after may land once the job has
    # ended, when nodes only acknowledge the end and no event is written)
    assert ("stopped", "stopped by its own SIGTERM") in [(st, d.split(":")[0]) for st, d in said["n1"]], story
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 30) == []


def _rank_log(run_dir: Path) -> str:
    """The newest rank log of a node's generation 0 (its first rank's), '' before it exists."""
    logs = sorted((run_dir / "gen-0").glob("rank-*.log"))
    return logs[0].read_text(errors="replace") if logs else ""


def test_the_coordinator_aborting_is_survived_restarted_and_a_later_hang_still_judged_and_restarted(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """libzmq's ``Assertion failed: !_io_error`` abort (SIGABRT) of the job's coordinator, mid-run: it
    runs in a process of its own, so node 0's wrapper and both nodes' ranks go on; the wrapper starts
    it again, the nodes reconnect, the new coordinator takes up the job, and the hang that comes
    after (rank 1, node n1's only rank, never joins step 20's collective) is judged with its culprit and every
    node restarted from one checkpoint; the job finishes. No pid of it survives."""
    # one rank a node: the coordinator's death, its return and the hang's culprit are the nodes'
    with job(tmp_path, toy_env, 2, ["--steps", "40", "--step-time", "0.5", "--hang-at", "20", "--hang-rank", "1"],
             ["--hang-timeout", "6"], nproc=1) as nodes:
        (p0, run0), (p1, run1) = nodes
        deadline = time.monotonic() + 180
        # both nodes train (their first steps are in their rank logs) and the coordinator process is up
        while not (all("step 2 loss" in _rank_log(run) for _, run in nodes) and hosted_coordinator_pid(run0)):
            assert time.monotonic() < deadline and p0.poll() is None and p1.poll() is None, out(tmp_path, 0)
            time.sleep(0.2)
        first = hosted_coordinator_pid(run0)
        assert first is not None and first not in (p0.pid, p1.pid)
        os.kill(first, signal.SIGABRT)
        codes = wait_all(nodes, 300)
        assert first not in pids_with_env(HOSTED_MARKER_ENV, str(run0))
    said = out(tmp_path, 0)
    assert codes == [0, 0], said + out(tmp_path, 1)
    assert f"the job's coordinator (pid {first}) died (signal SIGABRT)" in (tmp_path / "node0.out").read_text()
    evs = events(run0)
    (restarted,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_restarted"]
    assert restarted["cause"] == "signal SIGABRT" and restarted["resumed"] and restarted["pid"] != first
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"] == {"node": "n1", "rank": 1}
    assert evs.index(restarted) < evs.index(hang[0])  # judged by the coordinator started again
    restarts = named(evs, "restart")
    assert len(restarts) == 1
    end = named(evs, "job_finished")
    assert len(end) == 1 and end[0]["exit_code"] == 0 and end[0]["generation"] == 1, end
    assert "resuming at step" in (run1 / "gen-1" / "rank-1.log").read_text()
    state = json.loads((run0 / "coordinator-state.json").read_text())
    assert state["generation"] == 1 and state["restarts"] == 1 and state["incidents"] == 1
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 30) == []
    assert wait_until_gone(HOSTED_MARKER_ENV, str(run0), 30) == []


def _abort_the_coordinator_at(phase: str, what: str, tmp_path: Path,
                              nodes: list[tuple[subprocess.Popen[str], Path]]) -> list[dict[str, Any]]:
    """SIGABRT to node 0's coordinator process as soon as its events say the recovery ``phase`` (a
    wait on what the run writes), then the job's end: both nodes exit 0 and node 0's wrapper said
    the death. Returns node 0's events."""
    (p0, run0), (p1, _run1) = nodes
    wait_for(what, lambda: phase in recovery_phases(run0), within(240), alive=p1,
             explain=lambda: out(tmp_path, 0), interval=0.02)
    first = hosted_coordinator_pid(run0)
    assert first is not None and p0.poll() is None
    os.kill(first, signal.SIGABRT)
    codes = wait_all(nodes, 300)
    said = out(tmp_path, 0)
    assert codes == [0, 0], said + out(tmp_path, 1)
    assert f"the job's coordinator (pid {first}) died (signal SIGABRT)" in said
    evs = events(run0)
    (restarted,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_restarted"]
    assert restarted["pid"] != first and restarted["cause"] == "signal SIGABRT", restarted
    return evs


def test_the_coordinator_dying_mid_recovery_is_replaced_by_one_that_restarts_the_job_once(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """The coordinator aborts just after its verdict on a hang, as the nodes capture evidence: the one
    started again reads that recovery in coordinator-state.json and finishes it (docs/multinode.md, "A
    crash mid-recovery"): the job restarts once, from one checkpoint, its restart counted once, and
    finishes; no pid survives."""
    # one rank a node: the coordinator's death and the recovery it leaves half done are the nodes'
    with job(tmp_path, toy_env, 2, ["--steps", "30", "--step-time", "0.3", "--hang-at", "12", "--hang-rank", "1"],
             ["--hang-timeout", "6"], nproc=1) as nodes:
        (_p0, run0), (_p1, run1) = nodes
        evs = _abort_the_coordinator_at("capturing", "the hang's verdict and its capture", tmp_path, nodes)
    (resumed,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_resumed"]
    # killed as the capture began: the verdict stands and its restart is owed (a slower kill finds
    # the relaunch under way or done: then it is relaunched, or left running, never done twice)
    print("resumed:", resumed["action"], resumed["message"])
    assert resumed["action"] in ("stop_and_restart", "relaunch", "go_on"), resumed
    assert len(named(evs, "restart")) == 1, named(evs, "restart")
    end = named(evs, "job_finished")
    assert len(end) == 1 and end[0]["exit_code"] == 0 and end[0]["generation"] == 1 and end[0]["restarts"] == 1, end
    state = json.loads((run0 / "coordinator-state.json").read_text())
    assert state["generation"] == 1 and state["restarts"] == 1 and state["under_way"] == ""
    assert "resuming at step" in (run1 / "gen-1" / "rank-1.log").read_text()
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 30) == []
    assert wait_until_gone(HOSTED_MARKER_ENV, str(run0), 30) == []


def test_the_coordinator_dying_as_the_new_generation_starts_neither_restarts_it_again_nor_loses_the_restart(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """The coordinator aborts during the relaunch itself: the old generation stopped, the restart
    counted, the launch of generation 1 sent, the new torchruns starting (docs/multinode.md, "A crash
    mid-recovery"). The one started again reads the relaunch as under way until every node said it
    runs generation 1, and the generation each node says in its hello: it goes on with a new
    generation that starts (or relaunches one whose launch was lost), never restarting it again. One
    restart, counted once; the job finishes from one checkpoint; no pid survives."""
    # one rank a node: the coordinator's death and the recovery it leaves half done are the nodes'
    with job(tmp_path, toy_env, 2, ["--steps", "30", "--step-time", "0.3", "--hang-at", "12", "--hang-rank", "1"],
             ["--hang-timeout", "6"], nproc=1) as nodes:
        (_p0, run0), (_p1, run1) = nodes
        evs = _abort_the_coordinator_at("restarting", "the old generation stopped and the relaunch asked", tmp_path,
                                        nodes)
    (restarted,) = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_restarted"]
    assert restarted["resumed"]
    resumed = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_resumed"]
    # killed within the relaunch: the record says it is owed until both nodes run generation 1, so the
    # successor goes on (the launch arrived) or relaunches (it was lost); a kill that lands after both
    # nodes said `launched` finds nothing owed. Never a stop, never a second restart.
    print("resumed:", [(e["action"], e["message"]) for e in resumed])
    assert len(resumed) <= 1 and all(e["action"] in ("go_on", "relaunch") for e in resumed), resumed
    assert len(named(evs, "restart")) == 1, named(evs, "restart")
    assert [e["label"] for e in named(evs, "verdict") if e["action"] != "wait"] == ["collective_hang"]
    end = named(evs, "job_finished")
    assert len(end) == 1 and end[0]["exit_code"] == 0 and end[0]["generation"] == 1 and end[0]["restarts"] == 1, end
    state = json.loads((run0 / "coordinator-state.json").read_text())
    assert state["generation"] == 1 and state["restarts"] == 1 and state["under_way"] == "", state
    for run_dir, rank in ((run0, 0), (run1, 1)):  # each node's only rank
        assert not (run_dir / "gen-2").exists()
        assert "resuming at step" in (run_dir / "gen-1" / f"rank-{rank}.log").read_text()
    for _p, run_dir in nodes:
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 30) == []
    assert wait_until_gone(HOSTED_MARKER_ENV, str(run0), 30) == []
