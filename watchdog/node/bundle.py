"""An incident bundle on disk: its files written whole or held while the disk refuses them, its
manifest, and its completion with the final verdict.

The capture (:mod:`neuron_watch.node.evidence`) and its collectors write through one
:class:`Recorder`, which also notes what is missing and why, what timed out, and runs the node's
tools within the capture's deadline. ``manifest.json`` lists every file (path, size, sha256), what
is missing and what timed out; it is written atomically and last, so a manifest present means the
bundle is complete as it says. A disk that refuses a file (full, read-only, EIO) loses none of it
within :data:`HOLD_BYTES`: :func:`flush_held` writes it when the disk allows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_watch.node import incident_report
from neuron_watch.node.procs import run_bounded

#: Seconds one py-spy / neuron-ls / dmesg call may take at most (less when the deadline is nearer).
TOOL_TIMEOUT_S = 10.0
#: Bytes of one bundle kept in memory while its disk refuses them (a full disk during a capture).
HOLD_BYTES = 64 << 20
#: How a held file's entry in ``missing`` begins (it leaves ``missing`` once written).
HELD_REASON = "not written yet: the disk refused it"


@dataclass
class BundleResult:
    """Where the bundle is and what the manifest says (``manifest`` is the written JSON)."""

    bundle_dir: Path
    manifest_path: Path
    manifest: dict[str, Any]
    elapsed_s: float
    #: bundle-relative path -> content the disk refused so far (the manifest too, as ``manifest.json``)
    held: dict[str, bytes] = field(default_factory=dict)

    @property
    def missing(self) -> list[dict[str, str]]:
        return list(self.manifest["missing"])

    @property
    def timed_out(self) -> list[str]:
        return list(self.manifest["timed_out"])


class Recorder:
    """Writes the bundle's files and collects 'missing' and 'timed out' notes while the collectors run."""

    def __init__(self, root: Path, deadline: float, clock: Callable[[], float],
                 which: Callable[[str], str | None] = shutil.which) -> None:
        self.root = root
        self.which = which
        self.deadline = deadline
        self.clock = clock
        self.missing: list[dict[str, str]] = []
        self.timed_out: list[str] = []
        self.notes: dict[str, Any] = {}
        #: files the disk refused (full, read-only, EIO), kept to write when it allows (see flush_held)
        self.held: dict[str, bytes] = {}

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def miss(self, what: str, why: str) -> None:
        self.missing.append({"item": what, "reason": why})

    def write(self, rel: str, data: str | bytes) -> Path:
        """Write ``rel`` in the bundle; a disk that refuses it (full, read-only, EIO) does not lose it:
        it is kept in memory (up to HOLD_BYTES a bundle), listed as missing until it is written
        (:func:`flush_held`), and counted as lost beyond the bound."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        p = self.root / rel
        try:
            write_file(p, raw)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if sum(len(v) for v in self.held.values()) + len(raw) > HOLD_BYTES:
                self.miss(rel, f"lost: the disk refused it ({why}) and the bundle's in-memory bound "
                          f"({HOLD_BYTES} bytes) is reached")
            else:
                self.held[rel] = raw
                self.miss(rel, f"{HELD_REASON} ({why}); kept in memory, written when the disk allows")
        return p

    def tool(self, what: str, argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[int, str, str] | None:
        """Run ``argv`` in its own process group, killed at min(timeout, deadline). None: not run."""
        exe = self.which(argv[0])
        if exe is None:
            self.miss(what, f"{argv[0]} not installed")
            return None
        budget = min(timeout, self.remaining())
        if budget <= 0:
            self.miss(what, "deadline passed before it could run")
            self.timed_out.append(what)
            return None
        rc, out, err, timed_out = run_bounded([exe, *argv[1:]], budget)
        if timed_out:
            self.timed_out.append(what)
            self.miss(what, f"{argv[0]} did not finish within {budget:.1f}s; killed")
        return rc, out, err


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def write_file(p: Path, raw: bytes) -> None:
    """Write ``p`` whole or not at all (a full disk must not leave half a file that looks complete)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        p.write_bytes(raw)
    except OSError:
        with contextlib.suppress(OSError):
            p.unlink()
        raise


def file_entry(root: Path, rel: str) -> dict[str, Any]:
    p = root / rel
    return {"path": rel, "size": p.stat().st_size, "sha256": file_sha256(p)}


def file_entries(root: Path) -> list[dict[str, Any]]:
    if not root.is_dir():
        return []
    return [file_entry(root, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "incident.md") and not p.name.startswith(".")]


def write_manifest(result: BundleResult) -> bool:
    """Write the manifest atomically (a manifest present means the bundle is complete as it says);
    a disk that refuses it keeps it held with the rest. Returns whether it was written."""
    root = result.bundle_dir
    tmp = root / ".manifest.json.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(result.manifest, indent=2, sort_keys=True))
        os.replace(tmp, result.manifest_path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        result.held["manifest.json"] = b""  # (re)written from result.manifest by flush_held
        return False
    result.held.pop("manifest.json", None)
    return True


def flush_held(result: BundleResult) -> bool:
    """Write what the disk refused during the capture (see :meth:`Recorder.write`), in order, then the
    manifest without them in ``missing``. Returns True when nothing is held any more. Never raises:
    what still cannot be written stays held for the next call."""
    wrote = False
    for rel in [r for r in result.held if r != "manifest.json"]:
        try:
            write_file(result.bundle_dir / rel, result.held[rel])
        except OSError:
            break  # the disk is still full: try again later, in the same order
        del result.held[rel]
        wrote = True
        m = result.manifest
        m["missing"] = [x for x in m["missing"] if not (x["item"] == rel and x["reason"].startswith(HELD_REASON))]
        m["files"] = sorted([*(f for f in m["files"] if f["path"] != rel), file_entry(result.bundle_dir, rel)],
                            key=lambda f: str(f["path"]))
    if wrote or "manifest.json" in result.held:
        result.manifest["held_in_memory"] = sorted(r for r in result.held if r != "manifest.json")
        write_manifest(result)
    return not result.held


def bundle_stacks(root: Path, held: Mapping[str, bytes] | None = None) -> dict[int, str]:
    """The stacks a bundle holds, by rank (``stacks/rank-<R>.txt``, on disk or ``held`` in memory);
    unreadable ones are left out."""
    dumps: dict[int, str] = {}
    for f in sorted((root / "stacks").glob("rank-*.txt")):
        try:
            dumps[int(f.stem.split("-", 1)[1])] = f.read_text(errors="replace")
        except (OSError, ValueError):
            continue
    for rel, raw in (held or {}).items():
        m = re.fullmatch(r"stacks/rank-(\d+)\.txt", rel)
        if m:
            dumps[int(m.group(1))] = raw.decode("utf-8", "replace")
    return dumps


def complete_bundle(root: Path, verdict: Mapping[str, Any], artifacts_uri: str = "") -> None:
    """Rewrite a captured bundle's ``verdict.json`` and ``incident.md`` with the final verdict.

    A bundle is captured while the ranks are alive, before the coordinator has heard every node
    (the culprit of a hang comes from all nodes' stacks), so its first ``verdict.json`` holds the
    pending verdict. The manifest's entries for both files are updated and the manifest replaced
    atomically, so the bundle stays whole and checkable.

    Raises:
        OSError: the bundle cannot be read or written.
    """
    manifest_path = root / "manifest.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    (root / "verdict.json").write_text(json.dumps(dict(verdict), indent=2, sort_keys=True, default=str))
    (root / "incident.md").write_text(incident_report.render_incident_md(verdict, manifest, artifacts_uri))
    entries = {f["path"]: f for f in manifest.get("files", []) if isinstance(f, dict)}
    for name in ("verdict.json", "incident.md"):
        p = root / name
        entries[name] = {"path": name, "size": p.stat().st_size, "sha256": file_sha256(p)}
    manifest["files"] = sorted(entries.values(), key=lambda f: str(f["path"]))
    manifest["verdict_final"] = True
    tmp = root / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(tmp, manifest_path)
