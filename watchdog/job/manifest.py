"""An incident's manifest across the job: every node's bundle manifest merged by the coordinator.

Pure: the coordinator reads nothing here; it passes what each node reported and writes the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_manifests(job_id: str, incident: int, nodes: Mapping[str, Mapping[str, Any] | None],
                    artifacts_uri: str = "") -> dict[str, Any]:
    """The coordinator's manifest: every node's manifest, nodes that sent none, totals. Pure.

    ``nodes`` maps a node name to its ``manifest.json`` content, or to None when that node's
    bundle never arrived (listed under ``missing_nodes``; unknown is not OK).
    """
    present = {n: dict(m) for n, m in sorted(nodes.items()) if m is not None}
    return {
        "job_id": job_id,
        "incident": incident,
        "artifacts": artifacts_uri,
        "nodes": present,
        "missing_nodes": sorted(n for n, m in nodes.items() if m is None),
        "files": sum(len(m.get("files", [])) for m in present.values()),
        "bytes": sum(int(f.get("size", 0)) for m in present.values() for f in m.get("files", [])),
        "timed_out": sorted(f"{n}:{t}" for n, m in present.items() for t in m.get("timed_out", [])),
    }
