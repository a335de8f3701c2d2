"""A node's incidents: evidence captured in a thread while the ranks live, bundles completed with the
final verdict, uploads (bounded), and what a full disk refused written when it allows."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.stacks import collective_states, top_frame
from neuron_watch.events import EvidenceReport
from neuron_watch.node.bundle import BundleResult, bundle_stacks, complete_bundle, flush_held
from neuron_watch.node.evidence import IncidentContext, capture_node_bundle
from neuron_watch.node.generation import NodeContext, NodeGeneration
from neuron_watch.node.procs import read_stat
from neuron_watch.node.rank_probe import rank_socket
from neuron_watch.outputs.storage import Storage, UploadResult, incident_key, retry_pending, upload_tree

log = logging.getLogger("neuron_watch")

#: Seconds between attempts to write evidence a full disk refused.
HELD_RETRY_EVERY = 2.0

#: /proc states that explain a silent rank by themselves (proc(5)): stopped, traced, uninterruptible, zombie
TELLING_STATES = {"T": "stopped", "t": "stopped by a tracer", "D": "in uninterruptible I/O", "Z": "a zombie"}


def rank_process_states(worker_pids: dict[int, int]) -> dict[int, str]:
    """Rank -> its process state when that state tells why it is silent (``T``, ``t``, ``D``, ``Z``)
    or ``gone`` when its pid no longer exists; ranks that simply run or sleep are left out."""
    out: dict[int, str] = {}
    for rank, pid in sorted(worker_pids.items()):
        info = read_stat(pid)
        if info is None:
            out[rank] = "gone"
        elif info.state in TELLING_STATES:
            out[rank] = info.state
    return out


class Incidents:
    """This node's evidence bundles, from capture to upload."""

    def __init__(self, ctx: NodeContext, storage: Storage | None, kb: KnowledgeBase | None = None) -> None:
        self.ctx = ctx
        self.storage = storage
        self.kb = kb  # the job's table, for the bundle's timeline
        self.bundles: dict[str, Path] = {}  # incident -> bundle dir on this node
        self.incident_no = 0
        self.pending_uploads: list[UploadResult] = []
        self.capture_thread: threading.Thread | None = None  # a capture running in the background
        self.held: list[BundleResult] = []  # bundles with files a full disk refused (written when it allows)
        self._held_retry_at = -1e18

    def begin_capture(self, gen: NodeGeneration, incident: str, reason: str,
                      verdict: Mapping[str, Any]) -> Callable[[], EvidenceReport | None]:
        """Capture ``gen``'s evidence in a thread; returns its poll (the report once done, else None).
        ``verdict``: the coordinator's pending verdict, written in the bundle."""
        ctx = self.ctx
        self.incident_no += 1
        doc: dict[str, Any] = {"incident": incident, "reason": reason, **verdict}
        ictx = IncidentContext(
            job_id=ctx.job_id,
            generation=gen.number,
            incident=self.incident_no,
            node=ctx.node,
            run_dir=Path(ctx.run_dir),
            rank_logs={r: Path(p) for r, p in gen.streams.rank_logs().items()},
            # ended ranks too: a rank that failed, or that torchrun ended, before the capture left
            # where it was (a skipped all_reduce: all but one rank were gone when it began)
            rank_pids={**gen.ended_pids, **gen.worker_pids},
            verdict=doc,
            env=ctx.rank_env,
            core_dump_dir=Path(ctx.run_dir) / "core-dumps",
            compile_cache_dir=Path(ctx.rank_env.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache")),
            deadline_s=ctx.cfg.evidence_timeout,
            work_dirs=[Path.cwd()],
            artifacts_uri=ctx.cfg.artifacts or "",
            kb=self.kb,
            tool_path=ctx.cfg.tool_path,
            probe_sockets=({r: rank_socket(gen.probe_dir, r) for r in {**gen.ended_pids, **gen.worker_pids}}
                           if gen.probe_dir else {}),
        )
        t0 = ctx.clock()
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                bundle = capture_node_bundle(ictx)
            except OSError as exc:  # the bundle dir itself failed: report it, never block the recovery
                log.error("could not write the evidence bundle to %s: %s", ictx.bundle_dir, exc)
                ctx.health.failed("write the evidence bundle", str(ictx.bundle_dir), exc)
                out["error"] = str(exc)
                return
            except Exception as exc:  # reported in the evidence; the coordinator must hear the capture ended
                log.exception("capturing this node's evidence failed")
                out["error"] = f"{type(exc).__name__}: {exc}"
                return
            out["bundle"] = bundle
            out["dumps"] = bundle_stacks(bundle.bundle_dir, bundle.held)
            out["seconds"] = round(ctx.clock() - t0, 3)

        thread = threading.Thread(target=work, name="neuron-watch-capture", daemon=True)
        self.capture_thread = thread
        thread.start()

        def poll() -> EvidenceReport | None:
            if thread.is_alive():
                return None
            self.capture_thread = None
            bundle = out.get("bundle")
            if bundle is None:
                return EvidenceReport(error=str(out.get("error") or "the capture ended without a bundle"),
                                      seconds=round(ctx.clock() - t0, 3))
            self.bundles[incident] = bundle.bundle_dir
            if bundle.held:
                log.warning("incident %s: %d file(s) of the evidence bundle could not be written to %s (the disk "
                            "refused them); kept in memory and written when the disk allows", incident,
                            len(bundle.held), bundle.bundle_dir)
                self.held.append(bundle)
            dumps: dict[int, str] = out["dumps"]
            return EvidenceReport(
                bundle=str(bundle.bundle_dir),
                seconds=out["seconds"],
                missing=len(bundle.missing),
                in_collective=collective_states(dumps),
                stack_tops={r: t for r, d in dumps.items() if (t := top_frame(d))},
                proc_states=rank_process_states(gen.worker_pids),
                manifest=bundle.manifest,
            )

        return poll

    def write_held(self) -> None:
        """Write what a full disk refused during captures (see :func:`~neuron_watch.node.bundle.flush_held`)."""
        for bundle in list(self.held):
            if flush_held(bundle):
                self.held.remove(bundle)
                log.warning("the evidence bundle %s is whole on disk now (the files the disk refused are written)",
                            bundle.bundle_dir)

    def next_retry(self) -> float | None:
        """When :meth:`retry_held` next writes (None: nothing is held)."""
        return self._held_retry_at if self.held else None

    def retry_held(self, now: float) -> None:
        """Write what a full disk refused, at most every :data:`HELD_RETRY_EVERY` seconds."""
        if self.held and now >= self._held_retry_at:
            self._held_retry_at = now + HELD_RETRY_EVERY
            self.write_held()

    def finish(self, final: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """Complete this incident's bundle with the final verdict; upload every bundle (bounded).
        Runs in the stop's thread (nothing else touches the bundles while a stop runs)."""
        cfg = self.ctx.cfg
        self.write_held()
        # only this incident's bundle: without storage, earlier incidents' bundles stay in self.bundles
        current = self.bundles.get(f"incident-{final.get('incident')}") if final else None
        if current is not None:
            try:
                complete_bundle(current, dict(final), cfg.artifacts or "")
            except OSError as exc:  # the capture-time files stay; say so, never block the stop
                log.error("could not complete %s with the final verdict: %s", current, exc)
        if self.storage is None or not self.bundles:
            return None
        uploads: list[dict[str, Any]] = []
        if self.storage.uri.startswith("s3://"):  # an endpoint that does not answer holds the restart this long
            log.info("uploading %d incident bundle(s) to %s; the restart waits for it (%.0fs at most: "
                     "--upload-timeout)", len(self.bundles), self.storage.uri, cfg.upload_timeout)
        for incident, bundle_dir in list(self.bundles.items()):
            n = int(bundle_dir.parent.name.rsplit("-", 1)[1])
            key = incident_key(self.ctx.job_id, n, self.ctx.node)
            try:
                tree = upload_tree(self.storage, bundle_dir, key, deadline_s=cfg.upload_timeout)
            except Exception as exc:  # a storage bug must not block the restart; it is reported
                uploads.append({"incident": incident, "ok": False, "error": str(exc)})
                continue
            self.pending_uploads.extend(tree.failed)
            uploads.append({"incident": incident, "uri": f"{cfg.artifacts}/{key}", "ok": tree.ok,
                            **tree.summary()})
        self.bundles.clear()
        return uploads

    def settle(self) -> None:
        """Let a running capture end (its tools end by their deadline); write or say what the disk refused."""
        cfg = self.ctx.cfg
        if self.capture_thread is not None:
            self.capture_thread.join(cfg.evidence_timeout + 5)
        self.write_held()
        for bundle in self.held:  # never silent: what the disk never took is said
            log.error("%d file(s) of the evidence bundle %s were never written (the disk refused them until the end): "
                      "%s", len(bundle.held), bundle.bundle_dir, ", ".join(sorted(bundle.held)))

    def retry_uploads(self) -> dict[str, Any] | None:
        """Retry the uploads that failed during the run (bounded); their summary, or None if none failed."""
        cfg = self.ctx.cfg
        if not self.pending_uploads or self.storage is None:
            return None
        log.info("retrying %d failed artifact upload(s) to %s before exiting (%.0fs at most)",
                 len(self.pending_uploads), self.storage.uri, cfg.upload_retry_timeout)
        retried = retry_pending(self.storage, self.pending_uploads, cfg.upload_retry_timeout)
        self.pending_uploads = retried.failed
        if retried.failed:
            log.error("%d artifact upload(s) failed for good; the files stay in %s",
                      len(retried.failed), self.ctx.run_dir)
        return {"ok": retried.ok, **retried.summary()}
