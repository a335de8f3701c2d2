"""slurm/prolog and slurm/epilog on a real Slurm (munged + slurmctld + 3 slurmd, tests/fixtures/slurm.py).

The checks are steered through the hooks' TOML config: ``root`` points at a prepared tree that
looks like a trn1.32xlarge (driver, devices, EFA), so the Neuron checks apply on this CPU host.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from neuron_watch.slurm import drain
from tests.fixtures.slurm import SlurmCluster

pytestmark = pytest.mark.integration


def fake_trn1(root: Path, devices: int = 16, efa: int = 8) -> Path:
    (root / "sys/module/neuron").mkdir(parents=True, exist_ok=True)
    for i in range(devices):
        (root / f"sys/devices/virtual/neuron_device/neuron{i}/info/architecture").mkdir(parents=True, exist_ok=True)
        (root / f"sys/devices/virtual/neuron_device/neuron{i}/info/architecture/instance_type").write_text(
            "trn1.32xlarge\n")
    (root / "sys/class/infiniband").mkdir(parents=True, exist_ok=True)
    for i in range(efa):
        (root / f"sys/class/infiniband/rdmap{i}s0").mkdir(exist_ok=True)
    (root / "proc").mkdir(exist_ok=True)
    return root


def write_config(c: SlurmCluster, root: Path, *, fqdn: str, observe_only: bool = False, per_job: int = 2,
                 per_hour: int = 4) -> Path:
    state = c.root / "shared" / "drains.json"
    c.hook_config.write_text(
        "[health]\n"
        f'root = "{root}"\n'
        f'fqdn = "{fqdn}"\n'
        "budget = 10\n"
        f"observe_only = {str(observe_only).lower()}\n"
        "[drain]\n"
        f'state_file = "{state}"\n'
        f"per_job = {per_job}\n"
        f"per_hour = {per_hour}\n"
    )
    return state


LONG_FQDN = "compute1-dy-training-0-1.pcluster-trn1-24-pdx80-2n-with-a-long-name.pcluster"


def prolog_lines(c: SlurmCluster) -> list[str]:
    return (c.root / "hooks" / "prolog.log").read_text().splitlines() if (c.root / "hooks/prolog.log").exists() else []


def test_healthy_prolog_lets_the_job_run_and_reports_its_time(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    write_config(c, fake_trn1(tmp_path / "root"), fqdn="ip-10-1-16-50.ec2.internal")
    t0 = time.monotonic()
    r = c.run("srun", "-N3", "--ntasks-per-node=1", "-t", "1", "echo", "ran")
    print(f"srun -N3 echo with the prolog (python start included): {time.monotonic() - t0:.2f}s")
    assert r.stdout.split() == ["ran"] * 3
    times = [float(m.group(1)) for line in prolog_lines(c)
             if (m := re.search(r"7 checks in ([\d.]+) s \(budget 10 s\): ok", line))]
    assert len(times) == 3, prolog_lines(c)
    print(f"prolog check time per node: {', '.join(f'{t:.3f}' for t in times)} s")
    c.wait_for("nodes idle", lambda: {s for s, _ in c.node_states().values()} == {"idle"})


def test_failing_prolog_drains_the_node_with_our_reason(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    state = write_config(c, fake_trn1(tmp_path / "root", devices=12), fqdn=LONG_FQDN)
    t0 = time.monotonic()
    r = c.run("srun", "-w", "n2", "-t", "1", "echo", "ran", check=False)
    print(f"srun with failing prolog returned in {time.monotonic() - t0:.2f}s: rc {r.returncode}")
    assert r.returncode != 0 and "ran" not in r.stdout
    state_n2, reason = c.wait_for("n2 drained", lambda: c.node_states()["n2"][0] in ("drained", "draining")
                                  and c.node_states()["n2"])  # type: ignore[misc]
    print(f"n2: {state_n2} reason={reason!r}")
    assert reason.startswith("neuron-watch: health: devices: 12 of 16"), reason
    assert c.node_states()["n1"][0] == "idle"
    log = "\n".join(prolog_lines(c))
    assert "fqdn fail: FQDN is 76 > 63" in log and "checks in" in log
    records, problem = drain.decode_state(state.read_text())
    assert problem is None and [(x.node, x.label) for x in records] == [("n2", "health")]
    # the remembered drain excludes n2 from the next job, until it is resumed
    d = drain.Drainer(state, env=c.env)
    assert d.excluded_nodes() == ["n2"]
    c.scontrol("update", "nodename=n2", "state=resume")
    assert d.excluded_nodes() == []


def test_observe_only_reports_but_does_not_drain(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    state = write_config(c, fake_trn1(tmp_path / "root", devices=12), fqdn=LONG_FQDN, observe_only=True)
    r = c.run("srun", "-w", "n3", "-t", "1", "echo", "ran")
    assert r.stdout.split() == ["ran"]
    c.wait_for("n3 idle again", lambda: c.node_states()["n3"][0] == "idle")
    assert any("FAIL (observe-only)" in line for line in prolog_lines(c))
    assert not state.exists()


def test_drain_cap_refuses_a_second_drain_and_says_so(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    state = write_config(c, fake_trn1(tmp_path / "root", devices=12), fqdn="short.example", per_hour=1)
    c.run("srun", "-w", "n1", "-t", "1", "true", check=False)
    c.wait_for("n1 drained", lambda: c.node_states()["n1"][0] in ("drained", "draining"))
    assert c.node_states()["n1"][1].startswith("neuron-watch: health:")
    c.run("srun", "-w", "n2", "-t", "1", "true", check=False)
    # the prolog still fails (the job must not run on a bad node), so Slurm drains n2 itself,
    # but neuron-watch refused to set its reason: the cap held, and the log says why.
    c.wait_for("n2 drained", lambda: c.node_states()["n2"][0] in ("drained", "draining"))
    assert c.node_states()["n2"][1] == "Prolog error"
    assert any("drain cap reached" in line and "cap is 1" in line for line in prolog_lines(c)), prolog_lines(c)
    assert [x.node for x in drain.decode_state(state.read_text())[0]] == ["n1"]


def test_drainer_against_real_scontrol_caps_and_admin_drains(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    d = drain.Drainer(tmp_path / "drains.json", drain.DrainCaps(per_job=1, per_hour=10), env=c.env)
    first = d.drain("n1", "42", "hardware_error", 'NEURON_HW_ERR=DMA_ABORT "nd 3"')
    assert first.drained and c.node_states()["n1"] == ("drained", first.reason)
    assert first.reason == "neuron-watch: hardware_error: NEURON_HW_ERR DMA_ABORT nd 3"
    second = d.drain("n2", "42", "hardware_error", "again")
    assert not second.drained and "cap is 1 per job" in second.message
    assert c.node_states()["n2"][0] == "idle"
    c.scontrol("update", "nodename=n3", "state=drain", "reason=admin maintenance")
    third = d.drain("n3", "43", "hardware_error", "x")
    assert not third.drained and "already drained" in third.message
    assert c.node_states()["n3"][1] == "admin maintenance"  # not overwritten
    assert d.excluded_nodes() == ["n1"]
    (tmp_path / "drains.json").unlink()  # lost state file: survivable, nothing excluded, no crash
    assert d.excluded_nodes() == []


def test_epilog_kills_a_leftover_process_of_the_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    write_config(c, fake_trn1(tmp_path / "root"), fqdn="short.example")
    # the leftover ignores SIGTERM: the epilog's SIGKILL comes at its stop deadline, a second here (10 by default)
    with c.hook_config.open("a") as f:
        f.write("[epilog]\nstop_timeout = 1\n")
    pidfile = tmp_path / "leftover.pid"
    # setsid + background: the process leaves the step's process tree, which linuxproc then loses track of
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n"
                      f"setsid bash -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 300' "
                      "</dev/null >/dev/null 2>&1 &\n"
                      f"while [ ! -s {pidfile} ]; do sleep 0.05; done\n")
    script.chmod(0o755)
    r = c.run("sbatch", "-w", "n1", "-o", str(tmp_path / "job.out"), str(script))
    job = r.stdout.split()[-1]
    c.wait_for("job finished", lambda: c.job_state(job) in ("COMPLETED", "FAILED"))
    pid = int(pidfile.read_text())
    env = Path(f"/proc/{pid}/environ")

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    try:
        c.wait_for("epilog to kill the leftover", gone, timeout=30)
    finally:
        if not gone() and env.exists():
            os.kill(pid, signal.SIGKILL)
    log = (c.root / "hooks" / "epilog.log").read_text()
    assert re.search(rf"epilog n1 job {job}: stopped 1 leftover process\(es\) \[{pid}\]; SIGKILL needed", log), log
    assert c.node_states()["n1"][0] == "idle"


def test_prolog_json_mode_runs_without_path_or_home(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = fake_trn1(tmp_path / "root")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[health]\nroot = "{root}"\nfqdn = "a.b"\n')
    nw = str(Path(sys.executable).parent / "neuron-watch")
    env = {"SLURMD_NODENAME": "n9", "SLURM_JOB_ID": "5", "NEURON_WATCH_BIN": nw}
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run([str(repo / "slurm/prolog"), "--json", "--config", str(conf)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.splitlines()[0])
    assert doc["node"] == "n9" and {x["name"]: x["status"] for x in doc["checks"]}["devices"] == "ok"


def test_epilog_keeps_the_evidence_of_a_failed_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    c = slurm_cluster
    write_config(c, fake_trn1(tmp_path / "root"), fqdn="short.example")
    artifacts, dumps = tmp_path / "artifacts", tmp_path / "core-dumps"
    crash = dumps / "dt-20250917-194443-cid-0000000000000000"
    crash.mkdir(parents=True)
    (crash / "i-0b514eadc4fec7de6-nrt-pid-897.log").write_text("ERROR  NRT:nrt_infodump Failure: NRT_EXEC_OOB\n")
    with c.hook_config.open("a") as f:
        f.write(f'[epilog]\nartifacts_dir = "{artifacts}"\ncore_dump_dir = "{dumps}"\nevidence_budget = 15\n')
    ok = c.run("sbatch", "-w", "n2", "-o", str(tmp_path / "ok.out"), "--wrap", "true").stdout.split()[-1]
    bad = c.run("sbatch", "-w", "n2", "-o", str(tmp_path / "bad.out"), "--wrap", "exit 3").stdout.split()[-1]
    for job in (ok, bad):
        c.wait_for(f"job {job} finished", lambda job=job: c.job_state(job) in ("COMPLETED", "FAILED"))
    manifest_path = artifacts / bad / "incidents" / "incident-0" / "n2" / "manifest.json"
    c.wait_for("the epilog's bundle", manifest_path.exists, timeout=60)
    manifest = json.loads(manifest_path.read_text())
    assert any("nrt-pid-897" in f["path"] for f in manifest["files"])  # the runtime's core dump came along
    assert not (artifacts / ok).exists()  # a job that succeeded leaves nothing behind
    assert c.node_states()["n2"][0] == "idle"  # the epilog never drains for this
