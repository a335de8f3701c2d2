"""Capture one node's incident bundle *before* anything is stopped, within a time bound.

    ctx = IncidentContext(job_id="job-7", generation=1, incident=2, node="ip-10-0-0-1",
                          run_dir=run_dir, rank_logs={0: run_dir / "gen-1/rank-0.log"},
                          rank_pids={0: 4242}, verdict=verdict.to_dict(), env=os.environ,
                          core_dump_dir=Path("/tmp/neuron-core-dump/inc-2"), deadline_s=60)
    result = capture_node_bundle(ctx)        # then stop the ranks, then upload result.bundle_dir

The bundle directory is ``<run-dir>/incidents/incident-<n>/<node>/`` and holds what exists on this node
(docs/evidence.md lists every file): rank log tails, ``verdict.json``, ``stacks/rank-<R>.txt`` from
``py-spy dump``, the incident's core-dump directory, complete input dumps, NDET logs and
``neuron-det`` output, failed-compile logs, kernel messages, ``neuron-ls -j``, sysfs ECC counters,
package versions, the redacted environment, ``timeline.json``, ``incident.md`` and last
``manifest.json`` (path, size, sha256 of every file; what is missing and why; what timed out).

Nothing here raises for a missing tool or an unreadable file: it is recorded in the manifest.
Every external tool runs in its own process group and is killed (SIGTERM, then SIGKILL) at the
deadline; the whole capture returns by ``deadline`` plus a short kill grace.

This module decides what a bundle holds and in which order; its pieces gather: the ranks' stacks
(:mod:`~neuron_watch.node.stack_capture`), the node's kernel lines, devices and versions
(:mod:`~neuron_watch.node.host_state`), the Neuron runtime's and compiler's dumps and logs
(:mod:`~neuron_watch.node.neuron_dumps`); :mod:`~neuron_watch.node.bundle` writes the files and the
manifest, holds what a full disk refuses, and completes a bundle with the final verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.logread import tail_bytes
from neuron_watch.node import incident_report
from neuron_watch.node.bundle import BundleResult, Recorder, file_entries, file_entry, write_manifest
from neuron_watch.node.host_state import (
    SYSFS_NEURON,
    collect_kernel,
    collect_neuron_ls,
    collect_sysfs,
    collect_versions,
)
from neuron_watch.node.neuron_dumps import (
    COPY_BUDGET_BYTES,
    collect_compile_logs,
    collect_core_dumps,
    collect_input_dumps,
    collect_ndet,
    search_dirs,
)
from neuron_watch.node.stack_capture import collect_stacks
from neuron_watch.redact import redact_env

#: Lines kept from the end of each rank log ...
TAIL_LINES = 1000
#: ... and at most this many bytes of it (a log of multi-megabyte lines must not fill the bundle or memory).
TAIL_BYTES = 4 << 20
#: The incident's timeline reads at most the last this-many bytes of each rank log ...
TIMELINE_LOG_BYTES = 8 << 20
#: ... and at most this share of the time left to the capture (the copies that follow need the rest).
TIMELINE_SHARE = 0.5


@dataclass(frozen=True)
class IncidentContext:
    """Everything the capture needs to know about one incident on one node.

    ``rank_logs``/``rank_pids`` are this node's ranks only. ``verdict`` is ``Verdict.to_dict()``.
    ``env`` is the ranks' effective environment (redacted before it is written).
    ``core_dump_dir`` is this incident's ``NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY`` (format variables
    already replaced, or its parent when ``%d-%c`` is not known yet: every subdirectory is taken).
    ``work_dirs`` are where ranks run (input dumps ``input_dump_*`` and ``log-neuron-cc.txt`` land
    in the working directory); the run directory is always searched.
    """

    job_id: str
    generation: int
    incident: int
    node: str
    run_dir: Path
    rank_logs: Mapping[int, Path] = field(default_factory=dict)
    rank_pids: Mapping[int, int] = field(default_factory=dict)
    verdict: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    core_dump_dir: Path | None = None
    compile_cache_dir: Path | None = None
    deadline_s: float = 60.0
    work_dirs: Sequence[Path] = ()
    artifacts_uri: str = ""
    #: the job's knowledge base, for the timeline (None outside a job: a Slurm epilog's capture)
    kb: KnowledgeBase | None = None
    tail_lines: int = TAIL_LINES
    sysfs_root: Path = SYSFS_NEURON
    compile_workdir_glob: str = "/tmp/*/neuroncc_compile_workdir/*/log-neuron-cc.txt"
    #: Where tools (py-spy, neuron-ls, neuron-det, dmesg) are looked up; None: PATH, then this
    #: Python's bin directory (py-spy installed as the ``stacks`` extra lands there).
    tool_path: str | None = None
    #: rank -> its worker server's unix socket (the rank probe; empty with --no-rank-probe)
    probe_sockets: Mapping[int, str] = field(default_factory=dict)

    def which(self, name: str) -> str | None:
        if self.tool_path is not None:
            return shutil.which(name, path=self.tool_path)
        default = os.pathsep.join([os.environ.get("PATH", os.defpath), str(Path(sys.executable).parent)])
        return shutil.which(name, path=default)

    @property
    def bundle_dir(self) -> Path:
        # Same layout as the supervisor's own incident directory (watchdog/commands/supervisor.py).
        return self.run_dir / "incidents" / f"incident-{self.incident}" / self.node


def _collect_logs(ctx: IncidentContext, rec: Recorder) -> None:
    if not ctx.rank_logs:
        rec.miss("rank logs", "no rank log paths given")
    cut: dict[str, int] = {}
    for rank, path in sorted(ctx.rank_logs.items()):
        try:
            data, before = tail_bytes(str(path), ctx.tail_lines, TAIL_BYTES)
        except OSError as exc:
            rec.miss(f"logs/rank-{rank}.log", f"cannot read {path}: {exc.strerror or exc}")
            continue
        if before and data.count(b"\n") < ctx.tail_lines:
            cut[str(rank)] = before  # long lines: the byte bound came before the line count
        rec.write(f"logs/rank-{rank}.log", data)
    if cut:
        rec.notes["log_tails_cut_at_bytes"] = {"max_bytes": TAIL_BYTES, "bytes_before_by_rank": cut}


def _collect_timeline(ctx: IncidentContext, rec: Recorder) -> None:
    """The run's timeline so far, from the end of each rank log (newest generation first), within
    its share of the capture's time: a flood of hundreds of megabytes costs neither memory nor time
    beyond these bounds. What it left out is in the trace's ``otherData`` and the manifest."""
    from neuron_watch.outputs import timeline

    deadline = rec.clock() + max(0.0, rec.remaining()) * TIMELINE_SHARE
    try:
        if ctx.kb is None:  # a capture outside a job has no composition root: the packaged table
            from neuron_watch.diagnosis.kb import default_knowledge_base

            kb = default_knowledge_base()
        else:
            kb = ctx.kb
        trace = timeline.build_from_run_dir(ctx.run_dir, kb, max_bytes_per_log=TIMELINE_LOG_BYTES,
                                            deadline=deadline, clock=rec.clock)
    except (OSError, ValueError) as exc:
        rec.miss("timeline.json", f"cannot build the timeline: {exc}")
        return
    other = trace.get("otherData", {})
    unread = other.get("unread_logs", [])
    stopped = sorted({x["path"] for x in other.get("logs", []) if x.get("unread_bytes")}
                     | set(other.get("stopped_at_deadline", {})))
    if unread or stopped:
        rec.timed_out.append("timeline.json")
        rec.miss("timeline.json", f"partial: the time for it ran out; {len(stopped)} rank log(s) read in part, "
                 f"{len(unread)} not read (otherData says which)")
    rec.write("timeline.json", json.dumps(trace))


def capture_node_bundle(
    ctx: IncidentContext, deadline: float | None = None, clock: Callable[[], float] = time.monotonic
) -> BundleResult:
    """Write this node's bundle under ``ctx.bundle_dir``; return by ``deadline`` (+ a kill grace).

    ``deadline`` is a ``clock()`` (monotonic) value; when None it is ``clock() + ctx.deadline_s``.
    Stacks are taken first (the ranks are still alive: call this *before* stopping anything),
    then the cheap files, then the copies that may be large. Missing items and tools that timed
    out are listed in the manifest; this function does not raise for them.

    A disk that refuses the bundle's files (full, read-only) loses none of them: they are kept in
    memory (``BundleResult.held``, at most :data:`~neuron_watch.node.bundle.HOLD_BYTES`), listed as
    missing with why, and written by :func:`~neuron_watch.node.bundle.flush_held` when the disk
    allows. This function does not raise for it.
    """
    start = clock()
    deadline = start + ctx.deadline_s if deadline is None else deadline
    root = ctx.bundle_dir
    rec = Recorder(root, deadline, clock, ctx.which)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a full disk: every file is held (rec.write) and written when it allows
        rec.notes["bundle_dir_error"] = exc.strerror or str(exc)
    budget = [COPY_BUDGET_BYTES]

    collect_stacks(rec, ctx.rank_pids, ctx.probe_sockets)
    rec.write("verdict.json", json.dumps(dict(ctx.verdict), indent=2, sort_keys=True, default=str))
    rec.write("env.json", json.dumps(redact_env(ctx.env), indent=2))
    _collect_logs(ctx, rec)
    collect_versions(rec)
    collect_sysfs(rec, ctx.sysfs_root)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("kernel.txt", lambda: collect_kernel(rec)),
        ("neuron-ls.json", lambda: collect_neuron_ls(rec)),
        ("compile", lambda: collect_compile_logs(rec, search_dirs(ctx.run_dir, ctx.work_dirs), ctx.compile_workdir_glob,
                                                  ctx.compile_cache_dir)),
        ("timeline.json", lambda: _collect_timeline(ctx, rec)),
        ("core-dump", lambda: collect_core_dumps(rec, ctx.core_dump_dir, budget)),
        ("input-dumps", lambda: collect_input_dumps(rec, search_dirs(ctx.run_dir, ctx.work_dirs), budget)),
        ("ndet", lambda: collect_ndet(rec, ctx.env, budget)),
    ]
    for name, step in steps:
        if rec.remaining() <= 0:
            rec.miss(name, "skipped: the capture deadline passed")
            rec.timed_out.append(name)
            continue
        try:
            step()
        except OSError as exc:  # one unreadable source must not lose the rest of the bundle
            rec.miss(name, f"{type(exc).__name__}: {exc}")

    files = file_entries(root)
    manifest: dict[str, Any] = {
        "job_id": ctx.job_id,
        "generation": ctx.generation,
        "incident": ctx.incident,
        "node": ctx.node,
        "created": time.time(),
        "deadline_s": round(deadline - start, 3),
        "elapsed_s": round(clock() - start, 3),
        "files": files,
        "missing": rec.missing,
        "timed_out": rec.timed_out,
        "notes": rec.notes,
    }
    md = incident_report.render_incident_md(ctx.verdict, manifest, ctx.artifacts_uri)
    rec.write("incident.md", md)
    if "incident.md" not in rec.held:
        manifest["files"].append(file_entry(root, "incident.md"))
    manifest["held_in_memory"] = sorted(rec.held)
    result = BundleResult(root, root / "manifest.json", manifest, clock() - start, rec.held)
    write_manifest(result)
    result.elapsed_s = clock() - start
    return result
