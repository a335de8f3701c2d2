"""What an incident's event says of the nodes' bundles: where they are and what they lack. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from neuron_watch.events import EvidenceReport


def incident_artifacts(reports: Mapping[str, EvidenceReport | None], nodes: int) -> str | dict[str, str]:
    """Where the incident's evidence is: a job of one node, the incident directory (its bundle's
    parent); several, each node's bundle by node."""
    bundles = {n: r.bundle for n, r in reports.items() if r is not None and r.bundle}
    if nodes == 1 and bundles:
        return _parent(next(iter(bundles.values())))
    return bundles


def missing_by_item(reports: Mapping[str, EvidenceReport | None]) -> dict[str, int]:
    """What the nodes' bundles lack (their manifests' ``missing`` items, why in each manifest): item ->
    how many nodes lack it, in the order first met. A few dozen names, however many nodes."""
    out: dict[str, int] = {}
    for r in reports.values():
        items = (r.manifest or {}).get("missing") if r is not None else None
        for entry in items if isinstance(items, list) else []:
            name = str(entry.get("item", "")) if isinstance(entry, dict) else ""
            if name:
                out[name] = out.get(name, 0) + 1
    return out


def _parent(path: str) -> str:
    """The directory holding ``path`` (pure: no ``os.path``)."""
    head, _, _ = path.rstrip("/").rpartition("/")
    return head or path
