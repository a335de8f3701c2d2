"""The culprit of a real hang, the stop of a stuck rank, and an incident that says what happened.

Real torchrun jobs (the toy job and ranks/ddp_faults.py, gloo, CPU ranks; DDP where DDP's backward or
its gradient bucket is the subject, one all_reduce of the gradients where a collective is, which spares
each rank torch._dynamo's import): as few ranks as the scenario needs, 2 where
the culprit shows by itself (a stopped process, an abort), 3 where it is the one rank apart from a
majority, 4 where the rank that noticed a mismatch is set aside before the majority. A fault is made from outside, as it
happens to real jobs: a rank SIGSTOPped (a debugger, a frozen container, a paused cgroup) while the
others wait for it in a collective.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.diagnosis.stacks import in_collective, stack_culprit, top_frame
from tests.fixtures.procs import (
    NEURON_WATCH,
    TOY,
    assert_ended_on_the_fault,
    events,
    force_cleanup,
    named,
    pids_with_env,
    rank_pid,
    started,
    toy_environment,
)
from tests.fixtures.runs import HANG_TIMEOUT
from tests.fixtures.wait import wait_for

pytestmark = pytest.mark.process

#: the hang timeout of the runs that end on a hang: a few seconds, since the judge applies it only
#: after a rank's first step (start-up has its own timeout) and a DDP step of these jobs is 0.1 s
HANG = ("--hang-timeout", f"{HANG_TIMEOUT:g}")


def _t(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def assert_incident_says(bundle: Path, verdict: dict[str, Any]) -> str:
    """The bundle's incident.md names the label, the action and the culprit of ``verdict`` (the
    event in events.jsonl), and its verdict.json is that verdict; returns the page."""
    md = (bundle / "incident.md").read_text()
    assert f"Verdict: **{verdict['label']}**; action: **{verdict['action']}**" in md, md[:1500]
    culprit = md.split("## Culprit", 1)[1].split("##", 1)[0].strip()
    c = verdict["culprit"]
    if c is None:
        assert culprit.startswith("not identified"), culprit
    else:
        assert culprit.startswith(f"rank {c['rank']} on node {c['node']}; found by "), culprit
    on_disk = json.loads((bundle / "verdict.json").read_text())
    assert {k: on_disk.get(k) for k in ("label", "action", "culprit", "culprit_source", "reason")} == {
        k: verdict.get(k) for k in ("label", "action", "culprit", "culprit_source", "reason")}
    return md


def _rank_states(run_dir: Path) -> dict[int, str]:
    """rank -> state in the run's status.json ({} while there is none, or a torn read)."""
    try:
        doc = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return {r["rank"]: r["state"] for r in doc.get("ranks") or [] if isinstance(r, dict) and "rank" in r}


def test_a_sigstopped_rank_is_the_culprit_by_its_process_state_and_the_stop_is_quick(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    stop_timeout = 60  # far longer than the stop may take: the rung says whether the deadline was needed
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            *HANG, "--stop-timeout", str(stop_timeout), "--no-prewarm", *NO_RESTART,
            "torchrun", "--nproc_per_node", "2", TOY, "--steps", "30", "--step-time", "0.2",
            "--checkpoint-every", "5", "--checkpoint-dir", str(ckpt)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            deadline = time.monotonic() + 180
            log1 = run_dir / "gen-0" / "rank-1.log"
            wait_for("rank 1's step 6", lambda: log1.exists() and "step 6 " in log1.read_text(), deadline, alive=p)
            pid = rank_pid(run_dir, 1)
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            # status.json names the stopped rank's state (the node's process reading, state T) while the
            # job runs, before the hang timeout ends it
            wait_for("status.json to show rank 1 stopped",
                     lambda: _rank_states(run_dir).get(1) == "stopped", deadline, alive=p)
            shown = _rank_states(run_dir)
            out, _ = p.communicate(timeout=240)
        evs = events(run_dir)
        assert_ended_on_the_fault(p.returncode, evs, out)
        assert shown.get(0) != "stopped", shown  # its peer waits for it: not stopped itself
        hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert len(hang) == 1
        assert hang[0]["culprit"]["rank"] == 1 and hang[0]["culprit_source"] == "process_state"
        assert "is stopped (state T)" in hang[0]["reason"]
        stopped = named(evs, "stopped")[0]
        # the stopped rank got SIGKILL at once, the others SIGTERM, which sufficed (no SIGKILL at the deadline)
        assert stopped["rung"] == "sigterm" and stopped["survivors"] == [] and stopped["continued"] == []
        assert stopped["killed_stopped"] == [pid]
        stop_cmd = next(e for e in named(evs, "command") if e["command"] == "stop")
        # the figure (the stop of a stopped rank is at once), printed, not asserted
        print(f"\nstop of a job with a SIGSTOPped rank: 'stopped' after {stopped['seconds']:.2f} s "
              f"(rung {stopped['rung']}); {_t(stopped) - _t(stop_cmd):.2f} s from the stop command")
        # the incident's files carry the final verdict, the same as events.jsonl
        incident = named(evs, "incident")[0]
        assert incident["label"] == "collective_hang" and incident["culprit"]["rank"] == 1
        bundle = run_dir / "incidents" / "incident-1" / hang[0]["culprit"]["node"]
        assert_incident_says(bundle, hang[0])
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert manifest["verdict_final"] is True
        sizes = {f["path"]: f["size"] for f in manifest["files"]}
        assert sizes["verdict.json"] == (bundle / "verdict.json").stat().st_size
        # py-spy cannot read a stopped process: the bundle says so in plain words
        missing = {m["item"]: m["reason"] for m in manifest["missing"]}
        if "stacks/rank-1.txt" in missing:
            assert "stopped" in missing["stacks/rank-1.txt"]
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


DDP_FAULTS = str(Path(__file__).resolve().parent / "ranks" / "ddp_faults.py")
#: the fault's verdict, its evidence and the stop are what these runs show: no restart (a restarted
#: generation would import torch in every rank again and train clean, which other tests show)
NO_RESTART = ("--max-restarts", "0")


@contextlib.contextmanager
def ddp_fault_job(tmp_path: Path, env: dict[str, str], nproc: int, fault_args: list[str],
                  watch_args: tuple[str, ...] = ()) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """``neuron-watch torchrun --nproc_per_node <nproc> ddp_faults.py <fault_args>`` run to its end (it
    ends on the fault: no restart); yields the run dir and its events; no pid of it survives."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--stop-timeout", "10",
            "--no-prewarm", *NO_RESTART, *watch_args, "torchrun", "--nproc_per_node", str(nproc), DDP_FAULTS,
            *fault_args]
    try:
        with started(argv, str(tmp_path), env) as p:
            out, _ = p.communicate(timeout=300)
        evs = events(run_dir)
        assert_ended_on_the_fault(p.returncode, evs, out)
        yield run_dir, evs
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


@pytest.fixture(scope="module")
def rank2_sleeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """One run read by the recorder's test and the worker server's: 3 ranks with their probe, rank 2
    sleeps in its own code at step 4 while the others wait in ``backward``, in a container without
    py-spy (the stacks come from the ranks' worker server); the job ends on the hang. (run dir,
    events); no pid of it survives."""
    tmp_path = tmp_path_factory.mktemp("rank2-sleeps")
    env = {**toy_environment(), "NEURON_WATCH_TOOL_PATH": str(tmp_path / "no-tools")}  # py-spy cannot be found
    with ddp_fault_job(tmp_path, env, 3, ["--steps", "14", "--fault", "sleep", "--at", "4", "--rank", "2"]) as run:
        return run


@pytest.mark.xdist_group("rank2-sleeps")
def test_the_rank_stuck_outside_ddps_backward_is_named_by_the_ranks_flight_recorder(
    rank2_sleeps: tuple[Path, list[dict[str, Any]]]
) -> None:
    """Two ranks wait in DDP's gradient all-reduce (``backward``); rank 2 sleeps in its own code: the
    ranks' flight recorder names it."""
    run_dir, evs = rank2_sleeps
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1, [e.get("label") for e in named(evs, "verdict")]
    assert hang[0]["culprit"]["rank"] == 2, hang[0]["reason"]
    assert hang[0]["culprit_source"] == "flight_recorder"
    assert "behind the other 2 ranks of group" in hang[0]["reason"], hang[0]["reason"]
    assert_incident_says(run_dir / "incidents" / "incident-1" / hang[0]["culprit"]["node"], hang[0])


@pytest.mark.parametrize(("fault", "where"), [
    ("sleep", "stuck_in_own_code"),
    ("spin", "spin_forever"),
    ("loader", None),
])
def test_the_rank_stuck_outside_ddps_backward_is_named_by_its_stack_without_a_recorder(
    tmp_path: Path, toy_env: dict[str, str], fault: str, where: str | None
) -> None:
    """Two ranks wait in DDP's gradient all-reduce (``backward``); rank 2 is stuck elsewhere. No
    recorder (--no-rank-probe): the stacks (py-spy's) alone name it. The verdict, its evidence and
    the stop are the subject: no restart (--max-restarts 0), the job ends on the hang."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--stop-timeout", "10",
            "--no-prewarm", "--no-rank-probe", *NO_RESTART, "torchrun", "--nproc_per_node", "3",
            DDP_FAULTS, "--steps", "14", "--fault", fault, "--at", "4", "--rank", "2"]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            out, _ = p.communicate(timeout=300)
        evs = events(run_dir)
        assert_ended_on_the_fault(p.returncode, evs, out)
        hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert len(hang) == 1, [e.get("label") for e in named(evs, "verdict")]
        assert hang[0]["culprit"]["rank"] == 2, hang[0]["reason"]
        assert hang[0]["culprit_source"] == "stacks"
        assert "stack differs from the 2 others, which wait in _engine_run_backward" in hang[0]["reason"]
        if where is not None:
            assert f"(it is in {where})" in hang[0]["reason"]
        assert_incident_says(run_dir / "incidents" / "incident-1" / hang[0]["culprit"]["node"], hang[0])
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


def test_the_rank_that_skipped_the_last_collective_and_left_is_named(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """Uneven inputs (DDP's classic bug): rank 1 has one batch fewer, skips the last step's
    all-reduce of the gradients, says it is done and exits cleanly; rank 0 waits for it in that
    all-reduce. Not "training finished": the ranks that print progress did not all say so. Two ranks:
    the rank that left is named by its own exit, or as the only rank that reported nothing, not by a
    majority. The subject is a collective left, not DDP: one all_reduce averages the gradients."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--stop-timeout", "10",
            "--no-prewarm", *NO_RESTART, "torchrun", "--nproc_per_node", "2",
            DDP_FAULTS, "--grad-sync", "allreduce", "--steps", "8", "--fault", "uneven", "--rank", "1"]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            out, _ = p.communicate(timeout=300)
        evs = events(run_dir)
        assert_ended_on_the_fault(p.returncode, evs, out)
        # gloo: when rank 1 closes its connections its peer fails with "Connection closed by peer"
        # (comm_error); NCCL would leave it hung (collective_hang): the culprit is rank 1 either way
        failed = [e for e in named(evs, "verdict") if e["action"] == "restart"]
        assert len(failed) == 1, [(e.get("label"), e.get("reason")) for e in named(evs, "verdict")]
        assert failed[0]["label"] in ("comm_error", "collective_hang"), failed[0]
        assert failed[0]["culprit"]["rank"] == 1, failed[0]["reason"]
        # named as the rank that left, or (when its peer reported the closed connection before the
        # verdict) as the only rank that reported nothing: the same rank either way
        assert ("said it was done" in failed[0]["reason"]
                or "vm/rank1 alone reported nothing" in failed[0]["reason"]), failed[0]["reason"]
        assert_incident_says(run_dir / "incidents" / "incident-1" / "vm", failed[0])
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


def test_a_skipped_all_reduce_is_a_collective_mismatch_and_the_rank_that_noticed_is_not_blamed(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """Rank 2 skips the explicit loss all_reduce at step 4 and goes on into the next backward. gloo
    sees the mismatch on a neighbour (rank 1 receives the 2177-float gradient bucket where it
    expects the 1-float loss) and aborts it; torchrun then SIGTERMs the rest within 0.1 s, before
    the recorders can be read. The rank that noticed is the victim: the culprit is rank 2, from the
    recorders when they caught it, else from where each rank was when it ended (its exception, or
    faulthandler's dump at torchrun's SIGTERM): two in the loss all_reduce, rank 2 in backward."""
    fault = ["--steps", "8", "--fault", "skip_allreduce", "--at", "4", "--rank", "2"]
    with ddp_fault_job(tmp_path, toy_env, 4, fault) as (run_dir, evs):
        failed = [e for e in named(evs, "verdict") if e["action"] == "restart"]
        assert len(failed) == 1, [(e.get("label"), e.get("reason")) for e in named(evs, "verdict")]
        v = failed[0]
        assert v["label"] == "other_crash" and "torch.c10d.collective_mismatch" in v["reason"], v
        assert v["culprit"] is not None and v["culprit"]["rank"] == 2, v["reason"]
        if v["culprit_source"] == "flight_recorder":
            assert "vm/rank2 ran gloo:all_reduce of [[2177]] Float as collective" in v["reason"], v["reason"]
        else:
            assert v["culprit_source"] == "stacks", v
            assert ("vm/rank2's stack as the ranks ended differs from the 2 others, which were in all_reduce "
                    "(it was in _engine_run_backward)") in v["reason"], v["reason"]
        text = assert_incident_says(run_dir / "incidents" / "incident-1" / "vm", v)
        assert "collective_mismatch" in text, text[:2000]


@pytest.mark.parametrize("fault", ["abort_at_exit", "teardown_error"])
def test_a_rank_that_aborts_while_exiting_after_training_finished_is_not_restarted(
    tmp_path: Path, toy_env: dict[str, str], fault: str
) -> None:
    """Every rank trained to the end and said so; rank 1 then aborts while exiting (SIGABRT). The
    failure is reported with its cause, the job is not restarted (the training is done), and the
    exit code is the job's own (torchrun's 1: something did fail). One all_reduce averages the
    gradients: the subject is the end, not DDP. ``teardown_error``: no rank says its end (a script that
    just returns) and rank 1 raises after its peer returned: rank 0's exit 0 at the last step is the end
    (trials49: it was restarted from the last checkpoint, at the end, and failed the same way: exit 4)."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--hang-timeout", "30", "--no-prewarm",
            "torchrun", "--nproc_per_node", "2", DDP_FAULTS, "--grad-sync", "allreduce", "--steps", "6",
            "--fault", fault, "--rank", "1"]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            out, _ = p.communicate(timeout=300)
        evs = events(run_dir)
        assert p.returncode == 1, out[-3000:]
        failed = [e for e in named(evs, "verdict") if e["action"] != "wait"]
        assert len(failed) == 1 and failed[0]["after_training"] is True, failed
        assert failed[0]["action"] == "stop" and failed[0]["culprit"]["rank"] == 1, failed[0]
        assert "after training finished (step 6" in failed[0]["reason"]
        assert named(evs, "restart") == []
        done = named(evs, "job_finished")[0]
        assert done["exit_code"] == 1 and "training had finished" in done["reason"], done
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


def _grace_verdicts(run_dir: Path) -> list[dict[str, Any]]:
    """The teardown grace's verdicts written so far (a rank at rank 0's final step is shutting down)."""
    try:
        text = (run_dir / "events.jsonl").read_text()
    except FileNotFoundError:
        return []
    whole = text[:text.rfind("\n") + 1].splitlines()  # a line being written is read at the next poll
    return [e for e in map(json.loads, whole)
            if e["event"] == "verdict" and "reached the same final step" in e["reason"]]


def test_an_end_said_on_rank_0_and_a_slow_teardown_is_not_a_hang(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """Rank 0 alone says "training done" (as the DDP tutorial, HF Trainer, Lightning and Megatron
    print their end), then every rank stays in its teardown, silently, past the hang timeout after
    the ranks' last step line, until the watchdog has said that they are shutting down (the test then
    ends the teardown: the ranks are provably running when it is said, whatever the load; a fixed
    teardown of 11 s against a 10 s hang timeout raced the probe's reading of the last collectives,
    which restarts the hang clock up to 5 s later, and the job ended 0 with no verdict to read at load 5).
    Rank 1, which said no end, reached rank 0's final step: its silence is its teardown, not a
    collective rank 0 left (uneven data: test_the_rank_that_skipped_the_last_collective_and_left_is_named),
    and the ranks exit within the teardown grace (two hang timeouts from the end line, 30 s at
    least) even with the seconds an exit takes on a loaded machine (7.6 s measured for this job under
    neuron-watch at load 10 on 2 cores). Was: a hang blamed on rank 0 "left without a collective", and
    a restart (tests/process/test_frameworks.py [ddp_plain] under load). No restart allowed: a hang
    verdict ends the job with exit 5, and the wait for the grace verdict fails at once. A collective,
    not DDP, is what the ranks leave: the gradients are averaged by one all_reduce."""
    run_dir, over = tmp_path / "run", tmp_path / "teardown-over"
    # the teardown's own bound, far past the grace: were the grace never said, the grace's end would
    # be a hang verdict (exit 5), which the wait below reports
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), *HANG, "--no-prewarm", *NO_RESTART,
            "torchrun", "--nproc_per_node", "2", DDP_FAULTS, "--grad-sync", "allreduce", "--steps", "8",
            "--fault", "slow_teardown", "--teardown-seconds", "200", "--teardown-until", str(over)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            said = wait_for("the teardown grace verdict while the ranks run", lambda: _grace_verdicts(run_dir),
                            time.monotonic() + 240, alive=p)
            over.touch()
            out, _ = p.communicate(timeout=240)
        evs = events(run_dir)
        verdicts = named(evs, "verdict")
        assert p.returncode == 0, out[-3000:]
        assert [e for e in verdicts if e["action"] != "wait"] == [], verdicts
        waited = [e for e in verdicts if "reached the same final step" in e["reason"]]
        assert waited[0] == said[0]
        assert waited[0]["label"] == "healthy" and waited[0]["culprit"]["rank"] == 0, verdicts
        assert "/rank1 reached the same final step (8)" in waited[0]["reason"], waited[0]
        assert "a hang if not exited in" in waited[0]["reason"], waited[0]
        assert named(evs, "restart") == [] and named(evs, "job_finished")[0]["exit_code"] == 0
        # Each rank's clean exit reached the judge, read on the node from the rank's own record of a
        # normal interpreter exit (torchrun reports failed ranks only): code 0, presumed.
        exits = [e for e in named(evs, "rank_exit") if e["rank"] >= 0]
        assert sorted((e["rank"], e["exit_code"], e.get("presumed")) for e in exits) == [
            (0, 0, True), (1, 0, True)], exits
        # ... and ended the teardown grace: no verdict after the ranks' exits says that they are
        # shutting down (events are written in the coordinator's order)
        last_exit = max(evs.index(e) for e in exits)
        late = [e for e in evs[last_exit:] if e["event"] == "verdict" and "a hang if not exited" in e["reason"]]
        assert late == [], late
        assert evs.index(waited[0]) < min(evs.index(e) for e in exits)  # the grace was given while both ran
        finished = named(evs, "job_finished")[0]
        # the figures (printed, not asserted): when the exits were read and the job ended
        print(f"\nslow teardown: the ranks' exits read {_t(evs[last_exit]) - _t(waited[0]):.1f} s after the grace "
              f"verdict, the job finished {_t(finished) - _t(evs[last_exit]):.1f} s after the last of them")
        assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    finally:
        force_cleanup(str(run_dir))


@pytest.mark.xdist_group("rank2-sleeps")
def test_without_py_spy_the_stacks_come_from_the_ranks_own_worker_server(
    rank2_sleeps: tuple[Path, list[dict[str, Any]]]
) -> None:
    """A container without ptrace (EKS, SageMaker) cannot run py-spy: the ranks' worker server
    (``neuron_watch_stacks``) gives every rank's stack, and the stacks name the same rank as the recorder."""
    run_dir, evs = rank2_sleeps
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"]["rank"] == 2, hang
    bundle = run_dir / "incidents" / "incident-1" / hang[0]["culprit"]["node"]
    assert_incident_says(bundle, hang[0])
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert {r: n.get("via") for r, n in manifest["notes"]["stacks"].items()} == {
        str(r): "worker_server" for r in range(3)}, manifest["notes"]["stacks"]
    dumps = {r: (bundle / "stacks" / f"rank-{r}.txt").read_text() for r in range(3)}
    found = stack_culprit({r: top_frame(d) for r, d in dumps.items()},
                          {r: in_collective(d) for r, d in dumps.items()})
    assert found is not None and found[0] == 2, {r: top_frame(d) for r, d in dumps.items()}


def test_the_culprit_on_node_1_of_2_is_named_by_the_coordinator_from_both_nodes_recorders(
    tmp_path: Path, toy_env: dict[str, str]
) -> None:
    """2 nodes x 2 ranks (static rendezvous on loopback): rank 3 (node 1) sleeps in its own code while
    the others wait in the all_reduce of the gradients (one all_reduce, not DDP: the subject is the
    recorders of both nodes)."""
    from tests.process.test_multinode import job

    watch = [*HANG, "--stop-timeout", "10", "--no-prewarm", *NO_RESTART]
    rank_cmd = [DDP_FAULTS, "--grad-sync", "allreduce", "--steps", "14", "--fault", "sleep", "--at", "4",
                "--rank", "3"]
    with job(tmp_path, toy_env, 2, [], watch_args=watch, rank_cmd=rank_cmd) as nodes:
        procs = [p for p, _ in nodes]
        codes = [p.wait(300) for p in procs]
        logs = "".join((tmp_path / f"node{i}.out").read_text()[-2000:] for i in range(2))
        evs = events(tmp_path / "node0")
        assert_ended_on_the_fault(codes[0], evs, logs)
        assert codes[1] == codes[0], (codes, logs)  # every node ends with the job's code
        hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
        assert len(hang) == 1, logs
        assert hang[0]["culprit"] == {"node": "n1", "rank": 3}, hang[0]["reason"]
        # the coordinator aligns both nodes' flight recorders: rank 3 lags the 3 others of the group
        assert hang[0]["culprit_source"] == "flight_recorder", hang[0]["reason"]
        assert "behind the other 3 ranks of group" in hang[0]["reason"]
        # every node's bundle carries the job's final verdict
        for i in range(2):
            assert_incident_says(tmp_path / f"node{i}" / "incidents" / "incident-1" / f"n{i}", hang[0])
        for i in range(2):
            assert pids_with_env("NEURON_WATCH_RUN_DIR", str(tmp_path / f"node{i}")) == []
