"""An incident's report: the manifest merged across nodes and ``incident.md``."""

from __future__ import annotations

from neuron_watch.job.manifest import merge_manifests
from neuron_watch.node.incident_report import render_incident_md


def test_merge_manifests_lists_all_nodes_and_the_missing_one() -> None:
    a = {"files": [{"path": "verdict.json", "size": 10, "sha256": "x"}], "timed_out": ["stacks/rank-1.txt"]}
    b = {"files": [{"path": "verdict.json", "size": 5, "sha256": "y"}, {"path": "env.json", "size": 1, "sha256": "z"}],
         "timed_out": []}
    m = merge_manifests("job-1", 3, {"n2": b, "n1": a, "n3": None}, "s3://b/p/job-1/incident-3")
    assert list(m["nodes"]) == ["n1", "n2"]
    assert m["missing_nodes"] == ["n3"]
    assert (m["files"], m["bytes"]) == (3, 16)
    assert m["timed_out"] == ["n1:stacks/rank-1.txt"]


def test_incident_md_names_culprit_evidence_advice_and_location() -> None:
    verdict = {
        "label": "collective_hang", "action": "restart", "ranks": ["n1/rank0", "n1/rank1"],
        "culprit": {"node": "n1", "rank": 1}, "reason": "no progress for 900s and no compile running",
        "advice": "Restart from the last checkpoint; check EFA.", "step": 41,
        "evidence": [{"node": "n1", "rank": 0, "text": "CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying",
                      "signature": "neuron.ccom.rx_timeout", "file": "gen-1/rank-0.log", "line": 88}],
    }
    manifest = {"job_id": "job-1", "incident": 2, "node": "n1", "generation": 1,
                "files": [{"path": "stacks/rank-0.txt", "size": 10}, {"path": "stacks/rank-1.txt", "size": 12}],
                "missing": [{"item": "core-dump", "reason": "no core dump"}], "timed_out": ["neuron-ls.json"]}
    md = render_incident_md(verdict, manifest, "s3://bkt/runs/job-1/incident-2/n1")
    assert md.startswith("# Incident 2 of job job-1: collective_hang")
    assert "rank 1 on node n1" in md
    assert "gen-1/rank-0.log:88" in md and "Timeout waiting for RX" in md
    assert "Restart from the last checkpoint" in md
    assert "s3://bkt/runs/job-1/incident-2/n1" in md
    assert "core-dump: no core dump" in md and "neuron-ls.json" in md
    assert "last step reached: 41" in md


def test_a_process_stopped_before_py_spy_ran_is_said_stopped_whatever_its_state_after() -> None:
    """py-spy's attach and detach move a stopped process through other states: the state read
    before it ran decides (pid 0 has no /proc entry: the state after reads as unknown)."""
    from neuron_watch.node.stack_capture import _py_spy_failure

    err = "Error: Failed to get stack traces\n   0: backtrace"
    assert "stopped (state T)" in _py_spy_failure(0, 1, err, state_before="T")
    assert _py_spy_failure(0, 1, err, state_before="S") == "Error: Failed to get stack traces"
