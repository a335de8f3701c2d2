"""Health checks: pure decisions from facts, and gathering from a prepared filesystem tree."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from neuron_watch.slurm import health
from neuron_watch.slurm.health import FAIL, NA, OK, UNKNOWN, WARN, HostFacts

GOOD_TRN1 = HostFacts(instance_type="trn1.32xlarge", driver_loaded=True, neuron_devices=16, efa_devices=8,
                      neuron_holders=(), kernel="6.1.0-13-cloud-amd64", ipv6_disabled=False,
                      ipv6_scopes=("global", "link"), fqdn="compute1-st-queue1-i1-1.short.pcluster")


def by_name(facts: HostFacts, skip: tuple[str, ...] = ()) -> dict[str, str]:
    return {r.name: r.status for r in health.evaluate(facts, skip)}


def test_healthy_trn1_all_ok() -> None:
    assert by_name(GOOD_TRN1) == dict.fromkeys(health.ALL_CHECKS, OK)


def test_non_neuron_host_is_not_applicable_not_failed() -> None:
    cpu = HostFacts(instance_type=None, driver_loaded=False, neuron_devices=0, efa_devices=0, neuron_holders=None,
                    kernel="6.1.0", ipv6_disabled=False, ipv6_scopes=("link",), fqdn="x" * 80)
    assert set(by_name(cpu).values()) == {NA}


@pytest.mark.parametrize(("change", "check", "status", "words"), [
    ({"driver_loaded": False}, "driver", FAIL, "modprobe neuron"),
    ({"neuron_devices": 12}, "devices", FAIL, "12 of 16"),
    ({"efa_devices": 4}, "efa", FAIL, "4 of 8"),
    ({"neuron_holders": ((4242, "python train.py"),)}, "stale_process", FAIL, "pid 4242"),
    ({"kernel": "5.10.219-208.866.amzn2.x86_64"}, "fork_safe", WARN, "FI_EFA_FORK_SAFE=1"),
    ({"ipv6_scopes": ("link", "link")}, "ipv6_link_local", WARN, "disable_ipv6=1"),
    ({"ipv6_disabled": True, "ipv6_scopes": ()}, "ipv6_link_local", OK, "disabled"),
    ({"fqdn": "compute1-dy-training-0-1.pcluster-trn1-24-pdx80-2n-with-a-long-name.pcluster"}, "fqdn", FAIL,
     "> 63"),
    ({"neuron_holders": None}, "stale_process", UNKNOWN, "could not"),
    ({"instance_type": "trn1n.32xlarge", "efa_devices": 8}, "efa", FAIL, "8 of 16"),
    ({"instance_type": "mystery.large"}, "devices", NA, "no expected count"),
])
def test_one_check_changes(change: dict[str, object], check: str, status: str, words: str) -> None:
    facts = HostFacts(**{**GOOD_TRN1.__dict__, **change})  # type: ignore[arg-type]
    results = {r.name: r for r in health.evaluate(facts)}
    assert results[check].status == status and words in results[check].detail
    others = {n: r.status for n, r in results.items() if n != check}
    assert FAIL not in others.values()


def test_skip_reports_na_and_summary_lists_failures() -> None:
    facts = HostFacts(**{**GOOD_TRN1.__dict__, "fqdn": "x" * 70, "neuron_devices": 3})
    assert by_name(facts, skip=("fqdn",))["fqdn"] == NA
    s = health.summary(health.evaluate(facts))
    assert s.startswith("devices: 3 of 16") and "fqdn: FQDN is 70" in s


def test_kernel_tuple() -> None:
    assert health.kernel_tuple("5.10.219-208.866.amzn2.x86_64") == (5, 10)
    assert health.kernel_tuple("weird") is None


def make_tree(root: Path, devices: int, efa: int, holder: bool) -> None:
    (root / "sys/module/neuron").mkdir(parents=True)
    for i in range(devices):
        arch = root / f"sys/devices/virtual/neuron_device/neuron{i}/info/architecture"
        arch.mkdir(parents=True)
        (arch / "instance_type").write_text("trn1.32xlarge\n")
    (root / "sys/class/infiniband").mkdir(parents=True)
    for i in range(efa):
        (root / f"sys/class/infiniband/rdmap{i}s0").mkdir()
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("5.10.219-208.866.amzn2.x86_64\n")
    (root / "proc/sys/net/ipv6/conf/all").mkdir(parents=True)
    (root / "proc/sys/net/ipv6/conf/all/disable_ipv6").write_text("0\n")
    (root / "proc/net").mkdir(parents=True)
    (root / "proc/net/if_inet6").write_text(
        "00000000000000000000000000000001 01 80 10 80       lo\n"
        "fe8000000000000000fc00fffe000001 04 40 20 80     eth0\n")
    if holder:
        (root / "proc/4242/fd").mkdir(parents=True)
        (root / "proc/4242/cmdline").write_bytes(b"python\0train.py\0")
        os.symlink("/dev/neuron3", root / "proc/4242/fd/7")


def test_gather_from_a_prepared_tree(tmp_path: Path) -> None:
    make_tree(tmp_path, devices=16, efa=8, holder=True)
    f = health.gather(tmp_path, budget=5, fqdn="ip-10-1-16-50.ec2.internal")
    assert (f.instance_type, f.driver_loaded, f.neuron_devices, f.efa_devices) == ("trn1.32xlarge", True, 16, 8)
    assert f.neuron_holders == ((4242, "python train.py"),)
    assert f.kernel == "5.10.219-208.866.amzn2.x86_64" and f.ipv6_scopes == ("link",)
    got = by_name(f)
    assert got["stale_process"] == FAIL and got["fork_safe"] == WARN and got["ipv6_link_local"] == WARN
    assert got["devices"] == OK and got["fqdn"] == OK


def test_gather_missing_devices(tmp_path: Path) -> None:
    make_tree(tmp_path, devices=0, efa=0, holder=False)
    f = health.gather(tmp_path, budget=5, instance_type="trn1.32xlarge", fqdn="a.b")
    got = by_name(f)
    assert got["devices"] == FAIL and got["efa"] == FAIL and got["driver"] == OK


def test_gather_spent_budget_leaves_process_scan_unknown(tmp_path: Path) -> None:
    make_tree(tmp_path, devices=1, efa=0, holder=True)
    f = health.gather(tmp_path, budget=0, instance_type="trn1.2xlarge", fqdn="a.b")
    assert f.neuron_holders is None and by_name(f)["stale_process"] == UNKNOWN


def test_gather_on_this_host_does_not_fail_without_neuron() -> None:
    f = health.gather("/", budget=5)
    if health.is_neuron_host(f):
        pytest.skip("this host has Neuron hardware")
    assert FAIL not in by_name(f).values()
    print(f"gathered in {f.gathered_in:.3f}s")


def test_decisions_do_not_do_io() -> None:
    # evaluate() and the tables live above the I/O section: check that section uses no I/O names.
    src = Path(health.__file__).read_text().split("# I/O: gathering facts")[0]
    names = {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    assert not names & {"os", "subprocess", "socket", "open", "Path"}
