"""An incident's record on the coordinator's host, beside the nodes' bundles: what spans the job.

Under ``incidents/incident-<N>/`` of the run dir: the job's manifest of the incident (every node's
part, and the nodes that sent none: :func:`.manifest.merge_manifests`) and the tails of the
verdict's ranks as the job log holds them (``tails.log``). A disk that refuses them degrades the
watchdog's own files (counted in its health), never the job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from neuron_watch.events import EvidenceReport, Verdict
from neuron_watch.iofaults import IOHealth, write_json_atomic
from neuron_watch.job.joblog import JobLogLike, incident_tails
from neuron_watch.job.manifest import merge_manifests


def verdict_document(job: str, generation: int, verdict: Verdict, incident: int) -> dict[str, Any]:
    """The verdict as the bundles' ``verdict.json`` holds it."""
    return {"incident": incident, "job_id": job, "generation": generation, **verdict.to_dict()}


def write_incident_record(run_dir: str, job: str, incident: int, reports: Mapping[str, EvidenceReport | None],
                          joblog: JobLogLike, verdict: Verdict | None, health: IOHealth) -> None:
    """The job's manifest of ``incident`` from the nodes' ``reports``; and, with the incident's
    ``verdict``, the tails of its ranks (``tails.log``)."""
    per_node = {n: None if r is None else r.manifest for n, r in reports.items()}
    path = os.path.join(run_dir, "incidents", f"incident-{incident}", "manifest.json")
    tails = os.path.join(os.path.dirname(path), "tails.log")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, merge_manifests(job, incident, per_node))
        if verdict is not None:
            path = tails
            with open(tails, "w", encoding="utf-8") as f:
                f.write(incident_tails(joblog, verdict))
    except OSError as exc:
        health.failed("write the incident manifest" if path != tails else "write the incident's tails", path, exc)
