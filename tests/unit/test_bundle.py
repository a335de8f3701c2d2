"""An incident bundle on disk: completed with the final verdict, its files and manifest agree."""

from __future__ import annotations

from pathlib import Path


def test_a_bundle_is_completed_with_the_final_verdict(tmp_path: Path) -> None:
    """Captured with the pending verdict, completed with the final one: files and manifest agree."""
    import hashlib
    import json

    from neuron_watch.node.bundle import complete_bundle
    from neuron_watch.node.evidence import IncidentContext, capture_node_bundle

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
