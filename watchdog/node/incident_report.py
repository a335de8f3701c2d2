"""``incident.md``: a one-page human report of one incident on one node. Pure (no I/O).

Sections: what happened (label, action, reason, step), the culprit, the evidence lines (file:line),
the advice, what was captured and what is missing, and where the artifacts are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Evidence lines shown on the page (the rest are in verdict.json).
MAX_EVIDENCE = 12


#: how the judge found the culprit (``Verdict.culprit_source``), in words
_FOUND_BY = {
    "failure": "its own error line or exit",
    "process_state": "its process state (/proc)",
    "flight_recorder": "the ranks' Flight Recorders (collective sequence ids)",
    "stacks": "the ranks' stacks (the odd one out)",
    "progress": "the first rank to stop printing progress",
}


def _culprit(verdict: Mapping[str, Any]) -> str:
    c = verdict.get("culprit")
    if isinstance(c, Mapping):
        source = verdict.get("culprit_source")
        how = f"; found by {_FOUND_BY.get(str(source), str(source))}" if source else ""
        return f"rank {c.get('rank', '?')} on node {c.get('node', '?')}{how}"
    return "not identified (see the evidence below)"


def render_incident_md(verdict: Mapping[str, Any], manifest: Mapping[str, Any], artifacts_uri: str = "") -> str:
    """The report as Markdown text.

    ``verdict`` is ``Verdict.to_dict()``; ``manifest`` is the node's manifest (job_id, incident,
    node, files, missing, timed_out); ``artifacts_uri`` is where the bundle is uploaded (empty:
    only local).
    """
    label = verdict.get("label", "unknown")
    out = [
        f"# Incident {manifest.get('incident', '?')} of job {manifest.get('job_id', '?')}: {label}",
        "",
        "## What happened",
        "",
        f"- Verdict: **{label}**; action: **{verdict.get('action', '?')}**",
        f"- Generation: {manifest.get('generation', '?')}; last step reached: "
        f"{verdict.get('step') if verdict.get('step') is not None else 'unknown'}",
        f"- Reason: {verdict.get('reason') or 'not given'}",
        f"- Ranks involved: {', '.join(str(r) for r in verdict.get('ranks', [])) or 'none listed'}",
        "",
        "## Culprit",
        "",
        _culprit(verdict),
        "",
        "## Evidence",
        "",
    ]
    evidence = list(verdict.get("evidence", []))
    if not evidence:
        out.append("No log line was recorded as evidence.")
    for e in evidence[:MAX_EVIDENCE]:
        where = f"{e.get('file', '')}:{e.get('line', '')}".strip(":")
        text = str(e.get("text", "")).replace("`", "'")
        out.append(f"- `{e.get('node', '?')}/rank{e.get('rank', '?')}` {where} ({e.get('signature', '')}):")
        out.append(f"  `{text[:300]}`")
    if len(evidence) > MAX_EVIDENCE:
        out.append(f"- ... {len(evidence) - MAX_EVIDENCE} more in verdict.json")
    out += ["", "## Advice", "", str(verdict.get("advice") or "No specific advice for this label."), ""]
    files = list(manifest.get("files", []))
    total = sum(int(f.get("size", 0)) for f in files)
    out += ["## Captured on node " + str(manifest.get("node", "?")), ""]
    out.append(f"{len(files)} files, {total} bytes (manifest.json has the sha256 of each).")
    groups: dict[str, int] = {}
    for f in files:
        top = str(f.get("path", "")).split("/", 1)[0]
        groups[top] = groups.get(top, 0) + 1
    out += [f"- {name}" + (f" ({n} files)" if n > 1 else "") for name, n in sorted(groups.items())]
    missing = list(manifest.get("missing", []))
    if missing:
        out += ["", "Not captured:", ""]
        out += [f"- {m.get('item', '?')}: {m.get('reason', '')}" for m in missing]
    timed_out = list(manifest.get("timed_out", []))
    if timed_out:
        out += ["", f"Timed out (killed at the capture deadline): {', '.join(timed_out)}"]
    out += ["", "## Where the artifacts are", ""]
    if artifacts_uri:
        out.append(f"- Uploaded to `{artifacts_uri}` (this node's part; manifest.json last).")
    else:
        out.append("- Kept locally only (no --artifacts given).")
    local = f"incidents/incident-{manifest.get('incident', '?')}/{manifest.get('node', '?')}/"
    out.append(f"- Local copy: `{local}` in the run directory.")
    out.append("- Timeline: `timeline.json` (open in https://ui.perfetto.dev or chrome://tracing).")
    return "\n".join(out) + "\n"
