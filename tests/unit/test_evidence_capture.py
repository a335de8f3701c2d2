"""capture_node_bundle on this machine: a real hanging rank (py-spy stack taken while alive), real
files for core dumps / input dumps / compile cache / NDET / sysfs counters, and a tool that hangs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_watch.diagnosis.stacks import top_frame
from neuron_watch.node.evidence import IncidentContext, capture_node_bundle
from neuron_watch.node.rank_probe import probe_env
from tests.conftest import require_binary

pytestmark = pytest.mark.process

HANG = textwrap.dedent(
    """
    import sys, time
    def wait_for_all_reduce_that_never_comes():
        print("ready", flush=True)
        while True:
            time.sleep(3600)
    wait_for_all_reduce_that_never_comes()
    """
)


def stop_group(p: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@pytest.fixture
def hung_rank() -> Iterator[subprocess.Popen[str]]:
    """A rank that hangs: plain Python sleeping in a named function, in its own process group."""
    p = subprocess.Popen([sys.executable, "-c", HANG], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    yield p
    stop_group(p)
    assert p.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(p.pid, 0)


def make_run(tmp_path: Path) -> dict[str, Path]:
    run = tmp_path / "run"
    (run / "gen-1").mkdir(parents=True)
    (run / "gen-1" / "rank-0.log").write_text("".join(f"step {i} loss 1.{i}\n" for i in range(2000)))
    (run / "events.jsonl").write_text(
        json.dumps({"time": "2026-11-21T13:00:00.000Z", "event": "job_started", "generation": 1}) + "\n"
        + json.dumps({"time": "2026-11-21T13:10:00.000Z", "event": "incident", "generation": 1,
                      "label": "collective_hang", "incident": 1}) + "\n"
    )
    core = tmp_path / "core" / "dt-20250917-194443-cid-0000000000000000"
    core.mkdir(parents=True)
    (core / "i-0b514eadc4fec7de6-nd0-nc0-pid-897-tid-897-lid-0").write_bytes(os.urandom(4096))
    (core / "i-0b514eadc4fec7de6-nrt-pid-897.log").write_text("ERROR TDRV: exec timeout\n")
    done = run / "input_dump_1234_h_nn_7"
    done.mkdir()
    (done / "model_name.txt").write_text("model.MODULE_1+2.neff\n")
    (done / "input0.bin").write_bytes(b"\0" * 64)
    partial = run / "input_dump_5678_h_nn_8"
    partial.mkdir()
    (partial / "input0.bin").write_bytes(b"\0" * 8)
    cache = tmp_path / "cache"
    bad = cache / "neuronxcc-2.14.227.0+2d4f85be" / "MODULE_1+2"
    bad.mkdir(parents=True)
    (bad / "model.log").write_text("ERROR: compilation failed: out of SBUF\n")
    good = cache / "neuronxcc-2.14.227.0+2d4f85be" / "MODULE_3+4"
    good.mkdir(parents=True)
    (good / "model.log").write_text("fine\n")
    (good / "model.neff").write_bytes(b"neff")
    ndet = tmp_path / "ndet"
    ndet.mkdir()
    (ndet / "ndet_20261121_i-0_rg0.log").write_bytes(b"ndet-events")
    sysfs = tmp_path / "sysfs"
    hw = sysfs / "neuron0" / "stats" / "hardware"
    hw.mkdir(parents=True)
    counters = (("sram_ecc_uncorrected", "0"), ("mem_ecc_uncorrected", "2"), ("mem_ecc_repairable_uncorrected", "0"))
    for name, v in counters:
        (hw / name).write_text(v + "\n")
    return {"run": run, "core": core.parent, "cache": cache, "ndet": ndet, "sysfs": sysfs}


def test_bundle_has_stack_of_hung_rank_taken_while_alive_and_complete_manifest(
    tmp_path: Path, hung_rank: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    require_binary("py-spy")
    paths = make_run(tmp_path)
    ctx = IncidentContext(
        job_id="job-1", generation=1, incident=1, node="n1", run_dir=paths["run"],
        rank_logs={0: paths["run"] / "gen-1" / "rank-0.log", 1: paths["run"] / "gen-1" / "rank-1.log"},
        rank_pids={0: hung_rank.pid},
        verdict={"label": "collective_hang", "action": "restart", "culprit": {"node": "n1", "rank": 0},
                 "evidence": [], "reason": "no progress", "advice": "restart"},
        env={"NEURON_RT_DBG_NDET_FLUSH_USEC": "5000000", "NEURON_RT_DBG_NDET_LOG_LOCATION": str(paths["ndet"]),
             "AWS_SECRET_ACCESS_KEY": "do-not-leak-this", "PATH": os.environ["PATH"]},
        core_dump_dir=paths["core"], compile_cache_dir=paths["cache"], deadline_s=60,
        sysfs_root=paths["sysfs"], compile_workdir_glob=str(tmp_path / "none" / "*" / "log-neuron-cc.txt"),
        artifacts_uri="s3://bkt/p/job-1/incident-1/n1",
    )
    res = capture_node_bundle(ctx)
    # the stack was taken while the rank was still alive (the test stops it only afterwards)
    assert hung_rank.poll() is None
    stack = (res.bundle_dir / "stacks" / "rank-0.txt").read_text()
    assert "wait_for_all_reduce_that_never_comes" in stack
    assert res.manifest["notes"]["stacks"]["0"]["pid"] == hung_rank.pid
    assert res.bundle_dir == paths["run"] / "incidents" / "incident-1" / "n1"

    m = json.loads(res.manifest_path.read_text())
    listed = {f["path"]: f for f in m["files"]}
    for rel, f in listed.items():
        data = (res.bundle_dir / rel).read_bytes()
        assert len(data) == f["size"] and hashlib.sha256(data).hexdigest() == f["sha256"], rel
    on_disk = {p.relative_to(res.bundle_dir).as_posix() for p in res.bundle_dir.rglob("*") if p.is_file()}
    assert on_disk - {"manifest.json"} == set(listed)
    assert {
        "verdict.json", "env.json", "versions.json", "sysfs-ecc.json", "timeline.json", "incident.md",
        "logs/rank-0.log", "stacks/rank-0.txt",
        "core-dump/dt-20250917-194443-cid-0000000000000000/i-0b514eadc4fec7de6-nrt-pid-897.log",
        "input-dumps/input_dump_1234_h_nn_7/model_name.txt",
        "compile/cache-neuronxcc-2.14.227.0+2d4f85be-MODULE_1+2-model.log",
        "ndet/ndet_20261121_i-0_rg0.log",
    } <= set(listed)
    assert not any("MODULE_3+4" in p for p in listed)  # a good cache entry is not evidence
    assert len((res.bundle_dir / "logs" / "rank-0.log").read_text().splitlines()) == 1000  # tail only
    assert "step 1999 loss" in (res.bundle_dir / "logs" / "rank-0.log").read_text()
    missing = {x["item"]: x["reason"] for x in m["missing"]}
    assert "cannot read" in missing["logs/rank-1.log"]
    assert "model_name.txt" in missing["input-dumps/input_dump_5678_h_nn_8"]
    assert "neuron-ls not installed" in missing["neuron-ls.json"] or "neuron-ls.json" in listed
    assert "kernel.txt" in listed or "kernel.txt" in missing  # dmesg may be forbidden: recorded either way
    assert json.loads((res.bundle_dir / "sysfs-ecc.json").read_text())["neuron0"]["mem_ecc_uncorrected"] == 2
    env = (res.bundle_dir / "env.json").read_text()
    assert "do-not-leak-this" not in env and "AWS_SECRET_ACCESS_KEY" in env
    assert "do-not-leak-this" not in "".join(p.read_text(errors="replace") for p in res.bundle_dir.rglob("*.json"))


def test_py_spy_absent_is_said_in_the_manifest(tmp_path: Path, hung_rank: subprocess.Popen[str]) -> None:
    run = tmp_path / "run"
    res = capture_node_bundle(IncidentContext(job_id="j", generation=0, incident=1, node="n", run_dir=run,
                                              rank_pids={0: hung_rank.pid}, deadline_s=30,
                                              tool_path=str(tmp_path / "empty-bin")))
    reason = "py-spy not installed (pip install 'neuron-watch[stacks]') and no rank worker server"
    assert {"item": "stacks", "reason": reason} in res.missing


#: A rank with torch's worker server (what the rank probe starts in every rank), stuck in its own code.
SERVED = """
import time, torch.distributed  # the rank bootstrap on PYTHONPATH starts the worker server
def wait_for_a_peer_that_never_comes():
    print("ready", flush=True)  # said from inside, so a dump taken on "ready" finds this frame on top
    time.sleep(600)
wait_for_a_peer_that_never_comes()
"""


def test_without_py_spy_the_stacks_come_from_the_ranks_worker_server(tmp_path: Path) -> None:
    sock = str(tmp_path / "r0.sock")
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "PYTHONPATH")}
    env = {**base, **probe_env({}, str(tmp_path)), "RANK": "0", "LOCAL_RANK": "0"}
    p = subprocess.Popen([sys.executable, "-c", SERVED], stdout=subprocess.PIPE, text=True, env=env,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        res = capture_node_bundle(IncidentContext(
            job_id="j", generation=0, incident=1, node="n", run_dir=tmp_path / "run", rank_pids={0: p.pid},
            deadline_s=30, tool_path=str(tmp_path / "empty-bin"), probe_sockets={0: sock}))
        stack = (res.bundle_dir / "stacks" / "rank-0.txt").read_text()
        assert res.manifest["notes"]["stacks"]["0"]["via"] == "worker_server"
        assert top_frame(stack) is not None and top_frame(stack).startswith("wait_for_a_peer_that_never_comes")
        assert not [m for m in res.missing if m["item"].startswith("stacks")]
    finally:
        stop_group(p)
    assert p.poll() is not None


def test_a_worker_server_that_does_not_answer_and_no_py_spy_are_both_said(
    tmp_path: Path, hung_rank: subprocess.Popen[str]
) -> None:
    dead = tmp_path / "r0.sock"
    dead.write_text("")  # a socket path nobody listens on (a rank whose server failed to start)
    res = capture_node_bundle(IncidentContext(
        job_id="j", generation=0, incident=1, node="n", run_dir=tmp_path / "run", rank_pids={0: hung_rank.pid},
        deadline_s=30, tool_path=str(tmp_path / "empty-bin"), probe_sockets={0: str(dead)}))
    reason = next(m["reason"] for m in res.missing if m["item"] == "stacks/rank-0.txt")
    assert "worker server neuron_watch_stacks: " in reason and "py-spy not installed" in reason, reason


def test_a_tool_that_hangs_is_killed_at_the_deadline_and_recorded(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "neuron-ls.pid"
    (bindir / "neuron-ls").write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 600\n")
    (bindir / "neuron-ls").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    res = capture_node_bundle(IncidentContext(job_id="j", generation=0, incident=1, node="n",
                                              run_dir=tmp_path / "run", deadline_s=3))
    assert "neuron-ls.json" in res.timed_out
    assert res.manifest_path.exists()
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # reaped by capture; poll the real process table
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # later steps were skipped and say so; nothing is silently absent
    skipped = [m for m in res.missing if m["reason"].startswith("skipped")]
    assert skipped and all(m["item"] in res.timed_out for m in skipped)
