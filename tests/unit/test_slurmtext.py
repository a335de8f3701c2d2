"""Slurm text parsing and formatting (pure); scontrol samples recorded from slurm-wlm 22.05.8."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_watch.errors import UsageError
from neuron_watch.slurm import slurmtext as st_

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("text", "names"), [
    ("n1", ["n1"]),
    ("n[1-3,5]", ["n1", "n2", "n3", "n5"]),
    ("n[01-03]", ["n01", "n02", "n03"]),
    ("compute1-dy-queue1-i1-[1-3]", ["compute1-dy-queue1-i1-1", "compute1-dy-queue1-i1-2",
                                     "compute1-dy-queue1-i1-3"]),
    ("a,b,n[1-2]", ["a", "b", "n1", "n2"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("ip-10-1-16-50,ip-10-1-16-51", ["ip-10-1-16-50", "ip-10-1-16-51"]),
    ("n[1-2],n2", ["n1", "n2"]),
    ("", []),
])
def test_expand_nodelist(text: str, names: list[str]) -> None:
    assert st_.expand_nodelist(text) == names


@pytest.mark.parametrize("bad", ["n[1-3", "n1-3]", "n[a-b]", "n[3-1]", "n[1-9999999]"])
def test_expand_nodelist_rejects_bad_input_with_a_hint(bad: str) -> None:
    with pytest.raises(UsageError) as err:
        st_.expand_nodelist(bad)
    assert bad in str(err.value) and "next step" in str(err.value)


@given(st.lists(st.integers(0, 500), min_size=1, max_size=30, unique=True))
def test_expand_roundtrips_explicit_ranges(nums: list[int]) -> None:
    text = "node[" + ",".join(str(n) for n in nums) + "]"
    assert st_.expand_nodelist(text) == [f"node{n}" for n in nums]


def test_parse_show_node_multiline_recorded() -> None:
    nodes = st_.parse_nodes((DATA / "scontrol_show_node.txt").read_text())
    assert [n.name for n in nodes] == ["n1", "n2"]
    n1, n2 = nodes
    assert n1.state == "IDLE" and not n1.drained and n1.reason == ""
    assert n2.state == "IDLE" and n2.flags == {"DRAIN"} and n2.drained and n2.drained_by_us
    assert n2.reason == "neuron-watch: hardware_error: NRT status 1201 x"
    assert n2.addr == "127.0.0.1"
    rec = st_.parse_records((DATA / "scontrol_show_node.txt").read_text())[0]
    assert rec["OS"].startswith("Linux 6.18") and rec["CfgTRES"] == "cpu=4,mem=1000M,billing=4"


def test_parse_show_node_oneline_recorded() -> None:
    (n2,) = st_.parse_nodes((DATA / "scontrol_show_node_oneline.txt").read_text())
    assert n2.reason == "neuron-watch: hardware_error: NRT status 1201 x" and n2.drained_by_us
    rec = st_.parse_records((DATA / "scontrol_show_node_oneline.txt").read_text())[0]
    assert rec["RealMemory"] == "1000"  # OS= mid-line does not swallow the fields after it


def test_parse_show_node_prolog_error_is_not_ours() -> None:
    text = ("NodeName=vm Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n"
            "   Reason=Prolog error [root@2026-11-21T10:00:00]\n")
    (n,) = st_.parse_nodes(text)
    assert n.drained and not n.drained_by_us and n.reason == "Prolog error"


def test_parse_show_job_recorded() -> None:
    (job,) = st_.parse_jobs((DATA / "scontrol_show_job.txt").read_text())
    assert job.job_id == "1" and job.state == "PENDING" and job.reason == "launch_failed_requeued_held"
    assert job.restarts == 1 and job.requeue
    assert job.nodes == ("compute1-dy-queue1-i1-1", "compute1-dy-queue1-i1-2")
    assert job.excluded == ("n2", "n3")
    assert st_.parse_records((DATA / "scontrol_show_job.txt").read_text())[0]["WorkDir"] == "/home/user/my job"


def test_format_drain_reason_caps_and_cleans() -> None:
    r = st_.format_drain_reason("hardware_error", 'NEURON_HW_ERR=DMA_ABORT "dev 3"\nnext line')
    assert r == "neuron-watch: hardware_error: NEURON_HW_ERR DMA_ABORT dev 3 next line"
    long = st_.format_drain_reason("hardware_error", "x" * 500, max_len=60)
    assert len(long) == 60 and long.startswith("neuron-watch: hardware_error: x") and long.endswith("...")
    assert st_.format_drain_reason("config_error", "") == "neuron-watch: config_error"
    with pytest.raises(UsageError):
        st_.format_drain_reason("hardware_error", "x", max_len=10)


@given(st.text(max_size=400), st.integers(40, 200))
def test_format_drain_reason_always_within_cap_and_recognised(evidence: str, cap: int) -> None:
    r = st_.format_drain_reason("hardware_error", evidence, max_len=cap)
    assert len(r) <= cap and st_.is_our_reason(r) and st_.reason_label(r) == "hardware_error"
    assert "\n" not in r and '"' not in r and "=" not in r


def test_reason_label_and_ours() -> None:
    assert st_.reason_label("neuron-watch: health: fqdn too long [root@2026-01-01T00:00:00]") == "health"
    assert st_.reason_label("Prolog error") is None
    assert not st_.is_our_reason("Not responding")
    assert st_.join_nodelist(["n1", "n2", "n1", ""]) == "n1,n2"


def test_module_is_pure() -> None:
    tree = ast.parse(Path(st_.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"os", "subprocess", "zmq", "boto3", "asyncio", "socket", "shutil"}
