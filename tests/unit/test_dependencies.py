"""Installing neuron-watch must change nothing in the user's job.

Lightning 2.x picks ``RichProgressBar`` whenever ``rich`` is importable
(lightning/pytorch/trainer/connectors/callback_connector.py, ``_configure_progress_bar``), and that
bar prints nothing while stdout is not a terminal: with ``rich`` among our dependencies, a Lightning
job went silent between epochs as soon as neuron-watch was installed beside it. So no package a
framework switches on may be in our runtime dependency closure (extras excluded: ``[test]`` pulls
transformers, whose ``typer`` pulls ``rich``, on purpose).
"""

from __future__ import annotations

import importlib.metadata as md
import re

#: Packages whose mere presence changes what a training framework does.
SWITCHES = {
    "rich",  # Lightning: RichProgressBar and RichModelSummary instead of TQDM / plain summaries
}

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _runtime_requirements(dist: str) -> list[str]:
    """Names of ``dist``'s unconditional requirements and those whose marker holds here (no extras)."""
    out = []
    for req in md.requires(dist) or []:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue  # an optional extra: not pulled by a plain install
        if marker.strip() and not _marker_holds(marker):
            continue
        m = _NAME.match(spec)
        if m:
            out.append(_canon(m.group(1)))
    return out


def _marker_holds(marker: str) -> bool:
    # packaging is everywhere pip is; imported here so that a missing one fails loudly in this test
    from packaging.markers import Marker

    return bool(Marker(marker).evaluate())


def runtime_closure(root: str) -> dict[str, str]:
    """Every installed distribution ``root`` pulls at run time -> the one that requires it."""
    seen: dict[str, str] = {}
    todo = [_canon(root)]
    while todo:
        name = todo.pop()
        try:
            reqs = _runtime_requirements(name)
        except md.PackageNotFoundError:
            continue  # not installed here (a marker-less requirement is; pip would have failed)
        for r in reqs:
            if r not in seen and r != _canon(root):
                seen[r] = name
                todo.append(r)
    return seen


def test_runtime_closure_is_computed_from_the_installed_metadata() -> None:
    closure = runtime_closure("neuron-watch")
    # the direct dependencies are there, and so is at least one of theirs (boto3 -> botocore)
    assert {"pyzmq", "boto3", "botocore"} <= set(closure), closure
    assert closure["botocore"] == "boto3"


def test_no_framework_switch_in_the_runtime_dependency_closure() -> None:
    closure = runtime_closure("neuron-watch")
    found = SWITCHES & set(closure)
    assert not found, (
        f"{sorted(found)} in neuron-watch's runtime dependencies (pulled by "
        f"{ {f: closure[f] for f in found} }); full closure: {sorted(closure)}"
    )
