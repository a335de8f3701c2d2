"""Pure parts of evidence capture: redaction, kernel-line filter, merged manifest, incident.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.job.manifest import merge_manifests
from neuron_watch.node.evidence import REDACTED, kernel_lines, redact_env
from neuron_watch.node.incident_report import render_incident_md


@pytest.mark.parametrize(
    ("name", "value", "expect"),
    [
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", REDACTED),
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", REDACTED),
        ("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLE", REDACTED),
        ("NEURON_WATCH_SECRET", "hunter2", REDACTED),
        ("HF_TOKEN", "hf_abc", REDACTED),
        ("DB_PASSWORD", "pw", REDACTED),
        ("my_api_key", "sk-live-0123456789", REDACTED),
        ("MLFLOW_TRACKING_URI", "https://alice:s3cr3t@mlflow.internal:5000/x", "https://***@mlflow.internal:5000/x"),
        ("NOTE", "uses AKIAIOSFODNN7EXAMPLE today", "uses AKIA**************** today"),
        ("NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY", "/fsx/dumps/%d-%c", "/fsx/dumps/%d-%c"),
        ("MASTER_ADDR", "10.0.0.1", "10.0.0.1"),
        ("EMPTY_TOKEN", "", ""),
    ],
)
def test_redact_env(name: str, value: str, expect: str) -> None:
    out = redact_env({name: value})
    assert out == {name: expect}
    if expect == REDACTED:
        assert value not in str(out)


def test_kernel_lines_keeps_only_neuron_driver_lines() -> None:
    dmesg = [
        "[Sat Nov 21 13:00:00 2026] e1000: eth0 link up",
        "[Sat Nov 21 13:00:01 2026] NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0592464924bd45322 "
        "hostname=ip-172-31-61-252 nd-id=0 nc-id=0 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE",
        "[Sat Nov 21 13:00:02 2026] neuron: nd0: DMA engine reset",
        "[Sat Nov 21 13:00:03 2026] audit: neuronx-cc exec",
    ]
    assert kernel_lines(dmesg) == dmesg[1:3]


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


def test_a_bundle_is_completed_with_the_final_verdict(tmp_path: Path) -> None:
    """Captured with the pending verdict, completed with the final one: files and manifest agree."""
    import hashlib
    import json

    from neuron_watch.node.evidence import IncidentContext, capture_node_bundle, complete_bundle

    ctx = IncidentContext(job_id="j", generation=0, incident=1, node="n1", run_dir=tmp_path / "run",
                          verdict={"incident": "incident-1", "reason": "no progress", "label": "collective_hang"},
                          deadline_s=10, tool_path=str(tmp_path / "no-tools"))
    res = capture_node_bundle(ctx)
    assert "not identified" in (res.bundle_dir / "incident.md").read_text()
    final = {"label": "collective_hang", "action": "restart", "culprit": {"node": "n1", "rank": 3},
             "culprit_source": "process_state", "reason": "no progress; n1/rank3 is stopped (state T)",
             "evidence": [], "advice": "restart", "ranks": ["n1/rank3"], "step": 7}
    complete_bundle(res.bundle_dir, final, "s3://b/p")
    assert json.loads((res.bundle_dir / "verdict.json").read_text())["culprit"] == {"node": "n1", "rank": 3}
    md = (res.bundle_dir / "incident.md").read_text()
    assert "rank 3 on node n1; found by its process state (/proc)" in md and "is stopped (state T)" in md
    manifest = json.loads((res.bundle_dir / "manifest.json").read_text())
    assert manifest["verdict_final"] is True
    for f in manifest["files"]:
        data = (res.bundle_dir / f["path"]).read_bytes()
        assert f["size"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest(), f["path"]
