"""The node agent: runs this node's share of the job and reports everything to the coordinator.

One per node (every ``neuron-watch torchrun``). It starts the launcher (torchrun) as a child in a
process group it owns, tails every rank's output, samples the process table for compilers, and
streams it all over its :class:`~neuron_watch.node.agent_link.AgentLink`. It decides nothing about the
job: it carries out the coordinator's commands (capture evidence, stop, launch generation G with
checkpoint C, shut down) through the :class:`~neuron_watch.node.agent_link.NodeControl` methods below.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.diagnosis.stacks import collective_states, top_frame
from neuron_watch.errors import LauncherArgsError
from neuron_watch.events import EventKind, EvidenceReport, LauncherExit, NodeIdentity, NodeStatus, StopReport
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.launchers.base import Launcher, LaunchInfo
from neuron_watch.node.agent_link import AgentLink, JobRefused
from neuron_watch.node.evidence import (
    BundleResult,
    IncidentContext,
    bundle_stacks,
    capture_node_bundle,
    complete_bundle,
    flush_held,
)
from neuron_watch.node.procs import ProcessSampler, cgroup_memory_events, read_stat, reap_children
from neuron_watch.node.rank_probe import (
    RankProbe,
    make_probe_root,
    probe_env,
    rank_socket,
    read_rank,
    read_status,
    remove_probe_dir,
)
from neuron_watch.node.tail import UNATTRIBUTED, RankStreams
from neuron_watch.outputs.console import say
from neuron_watch.outputs.eventlog import EventLog
from neuron_watch.outputs.storage import Storage, UploadResult, incident_key, retry_pending, upload_tree
from neuron_watch.recovery.checkpoint_scan import find_checkpoint
from neuron_watch.recovery.checkpoints import Detection
from neuron_watch.wire.protocol import WorkerActivity

log = logging.getLogger("neuron_watch")

SAMPLE_EVERY = 1.0  # seconds between process-table samples
LOCKS_EVERY = 5.0  # seconds between compile-cache lock scans
CHECKPOINT_SCAN_EVERY = 15.0  # seconds between looks for a new complete checkpoint (a liveness signal)

# torchrun's failure summary: "rank      : 1 (local_rank: 1)" then "exitcode  : 3 (pid: 1234)"
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


@dataclass
class NodeGeneration:
    """This node's processes of one generation."""

    number: int
    checkpoint: str
    gen_dir: str
    streams: RankStreams
    launcher_log: AppendFile
    started: float = 0.0  # monotonic
    exit_code: int | None = None  # the launcher's, once it exited
    pending_rank: int | None = None
    gave_up: bool = False  # the launcher reported the generation failed and is only exiting now
    finishing: bool = False  # some ranks have ended while the launcher runs
    worker_pids: dict[int, int] = field(default_factory=dict)
    #: ranks of this generation that have ended, with their last pid: their stacks as they ended
    #: (the rank bootstrap's death record) are evidence too
    ended_pids: dict[int, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the ranks' environment
    progress_mark: int = 0  # the link's progress-line count when this generation started
    trained_since: float | None = None  # when the first progress line of this generation was seen
    prewarmed: bool = False  # the next generation's launcher was asked to get ready
    probe_dir: str | None = None  # the ranks' worker server sockets (None: --no-rank-probe)
    probe_said: dict[int, str] = field(default_factory=dict)  # rank -> the probe state last logged
    probe_line: str = ""  # the node's last line about ranks without a reading
    last_words: set[int] = field(default_factory=set)  # ranks whose exit-time recorder dump was sent
    #: the compilers of the newest sample, (rank, pid, cpu seconds, mono): a message sent between
    #: two samples carries them again, as the coordinator reads every such message as the whole set
    compilers_seen: list[tuple[int, int, float, float]] = field(default_factory=list)
    #: we are stopping the launcher: what it prints from now on (torchrun's SignalException
    #: traceback, twice chained) is its teardown, not the job's crash: launcher log only
    stopped_by_us: str = ""


#: Seconds between attempts to write evidence a full disk refused.
HELD_RETRY_EVERY = 2.0


def _json_or_empty(doc: str) -> dict[str, Any]:
    try:
        value = json.loads(doc) if doc else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def compile_cache_dir(env: dict[str, str]) -> str | None:
    """The local Neuron compile cache (``--cache_dir`` in NEURON_CC_FLAGS beats NEURON_COMPILE_CACHE_URL)."""
    m = re.search(r"--cache_dir[= ](\S+)", env.get("NEURON_CC_FLAGS", ""))
    url = m.group(1) if m else env.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache")
    return None if "://" in url else url


def fresh_locks(cache_dir: str, since_wall: float) -> list[str]:
    """``*.lock`` files in the cache's entries (``neuronxcc-*/MODULE_*/``) changed since ``since_wall``."""
    out = []
    for path in glob.glob(os.path.join(cache_dir, "*", "MODULE_*", "*.lock")):
        try:
            if os.path.getmtime(path) >= since_wall:
                out.append(path)
        except OSError:
            continue
    return out


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


class EarlyObservations:
    """What the agent saw before its link existed, in order, with the times it was seen.

    The link waits for the job's shape (single node: a coordinator here; several: where node 0
    is), which torchrun's own parser takes seconds to tell under load; nothing seen meanwhile is
    lost or re-stamped late: it is replayed into the link (ages are computed from these times).
    """

    progress_lines = 0

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.procs: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def add_line(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("add_line", args, kwargs))

    def count_truncated(self, lines: int, nbytes: int) -> None:
        self.calls.append(("count_truncated", (lines, nbytes), {}))

    def count_lost(self, lines: int) -> None:
        # in order with the rest: a status replayed after it carries it (a flood that ended before
        # the link existed once reached job_finished without its skipped lines)
        self.calls.append(("count_lost", (lines,), {}))

    def add_exits(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("add_exits", args, kwargs))

    def status(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("status", args, kwargs))

    def add_compilers(self, *args: Any, **kwargs: Any) -> None:
        self.procs = (args, kwargs)  # a snapshot of live processes: only the newest one counts

    def replay(self, link: AgentLink) -> None:
        calls, self.calls = self.calls, []
        for name, args, kwargs in calls:
            getattr(link, name)(*args, **kwargs)
        if self.procs is not None:
            link.add_compilers(*self.procs[0], **self.procs[1])
            self.procs = None


class NodeAgent:
    """This node's part of the job. Call :meth:`tick` from one loop; it never blocks for long."""

    def __init__(
        self,
        config: WatchConfig,
        launcher: Launcher,
        link: AgentLink | None,
        *,
        job_id: str,
        node: str,
        run_dir: str,
        rank_env: dict[str, str],
        storage: Storage | None = None,
        echo: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        health: IOHealth | None = None,
        place: int = -1,
    ) -> None:
        self.cfg = config
        #: faults of this node's own files (run dir full or read-only, checkpoint dir unreadable):
        #: counted and reported, never a reason to stop the job
        self.health = health or IOHealth(node)
        self.launcher = launcher
        self._link = link
        self.job_id = job_id
        self.node = node
        self.place = place  # this node's place in the job (node_rank, SLURM_PROCID, host index; -1 unknown)
        #: the place an elastic rendezvous gave this node in its first generation (the workers'
        #: GROUP_RANK); None until the workers tell it
        self.group_rank: int | None = None
        self.run_dir = run_dir
        self.rank_env = rank_env
        self.storage = storage
        self.echo = echo
        self.clock = clock
        self.wall = wall
        self.sampler = ProcessSampler()
        launcher.tag = node  # per-node file names inside a shared run dir
        self._described_root: str | None = None
        self._describe: Callable[[], LaunchInfo | None] | None = None  # the shape, being read
        self.info: LaunchInfo | None = None
        #: the launcher refused its own arguments (its shape reader said so): a configuration error
        self.refused: LauncherArgsError | None = None
        self._early = EarlyObservations()  # what was seen before the link existed, replayed at attach
        self.gen: NodeGeneration | None = None
        self.bundles: dict[str, Path] = {}  # incident -> bundle dir on this node
        self.incident_no = 0
        self.pending_uploads: list[UploadResult] = []
        self._last_sample = -1e18
        self._last_locks = -1e18
        self._locks: list[str] = []
        self.cache_dir = compile_cache_dir(rank_env)
        self._oom_kills = cgroup_memory_events()  # the kernel's OOM kills in our cgroup so far
        self._last_checkpoint_scan = -1e18
        self._newest_checkpoint: str | None = None  # the newest complete checkpoint seen so far
        self._stop_thread: threading.Thread | None = None  # a stop running in the background (begin_stop)
        self._capture_thread: threading.Thread | None = None  # a capture running in the background (begin_capture)
        self._held: list[BundleResult] = []  # bundles with files a full disk refused (written when it allows)
        self._held_retry_at = -1e18
        # This node's own signs of work (monotonic), for the lost-coordinator policy (lostlink.py).
        self._last_line_at: float | None = None
        self._last_compiler_at: float | None = None
        self._progress_seen = 0  # the link's progress-line count when last looked at
        self._last_progress_at: float | None = None
        self._skipped_told = 0  # flood lines skipped unread, already added to the link's drop count
        self._cut_told = (0, 0)  # over-long lines cut by the tail (lines, bytes), already added to the link's
        # The ranks' flight recorders, read from a thread (a rank's server may be slow to answer).
        self.probe = None if config.no_rank_probe else RankProbe()
        self._probe_root: str | None = None

    @property
    def link(self) -> AgentLink:
        if self._link is None:
            raise RuntimeError("the agent has no coordinator link yet (attach() it first)")
        return self._link

    def identify(self, node: NodeIdentity) -> None:
        """This node's place in the job, once the job's shape tells it, and its name from then on
        (files of generation 0 opened before keep the name they were opened with)."""
        self.node, self.place = node.name, node.place
        self.launcher.tag = node.name
        self.health.node = node.name

    def attach(self, link: AgentLink) -> None:
        """Connect to the coordinator once it is known (the job's shape decides where it is)."""
        self._link = link
        # Lines are classified here, on this node's CPU, with the coordinator's table (it checks).
        link.set_knowledge_base(default_knowledge_base(self.cfg.progress_regex))
        if self.gen is not None:
            link.set_generation(self.gen.number)

    # -- NodeControl (what the coordinator's commands do here) ----------------------------------

    def launch(self, generation: int, checkpoint: str) -> None:
        if self.gen is not None:  # the previous generation was stopped and drained: release its files
            self.gen.streams.close()
            self.gen.launcher_log.close()
        self._say_checkpoints(generation)
        gen_dir = self._gen_dir(generation)
        env = dict(self.rank_env)
        env.update({"NEURON_WATCH_CHECKPOINT": checkpoint, "NEURON_WATCH_RESTART_COUNT": str(generation),
                    "NEURON_WATCH_GENERATION": str(generation)})
        probe_dir = None
        if self.probe is not None:
            probe_dir = self._probe_dir(generation)
            env.update(probe_env(env, probe_dir))
        if generation == 0:
            log.info("liveness: %s", self.liveness_plan())
        streams = RankStreams(self.node, gen_dir, self.echo, health=self.health)
        self._skipped_told, self._cut_told = 0, (0, 0)  # the new streams count from zero
        # Nodes may share a run dir (a shared home, /fsx): everything per node carries its name.
        log_file = AppendFile(os.path.join(gen_dir, f"launcher-{self.node}.log"), self.health)
        self.gen = NodeGeneration(generation, checkpoint, gen_dir, streams, log_file, started=self.clock(), env=env,
                                  progress_mark=self._link.progress_lines if self._link is not None else 0,
                                  probe_dir=probe_dir)
        command_file = os.path.join(gen_dir, f"command-{self.node}.json")
        try:
            with open(command_file, "w", encoding="utf-8") as f:
                json.dump({"argv": self.launcher.command(gen_dir, checkpoint), "checkpoint": checkpoint}, f)
        except OSError as exc:  # a record for the operator, never a reason not to launch
            self.health.failed("write", command_file, exc)
        self.launcher.start(gen_dir, checkpoint, env)
        if self.info is None and self._describe is None:
            # The job's shape does not change between generations: read once, in the background
            # (torchrun's own parser takes seconds under load; rank output and exits are watched meanwhile).
            self._described_root = self.launcher.log_root(gen_dir)
            try:
                self._describe = self.launcher.describe_later(gen_dir)
            except Exception as exc:  # the launcher itself reports a bad argument; keep watching
                self._shape_unknown(exc)
        if self.info is None:  # until the shape is known: our own --log-dir, ranks from the workers' RANK
            streams.set_log_root(self.launcher.log_root(gen_dir))
            streams.rank_offset = None
        else:
            self._apply_shape(gen_dir)
        if self._link is not None:
            self._link.set_generation(generation)
        self._last_sample = -1e18
        self.poll_shape()

    def _gen_dir(self, generation: int) -> str:
        """``<run-dir>/gen-<G>``; when the run dir refuses it (turned read-only, full, gone), a directory
        under the system's temp dir instead: the restart goes on, the fault is reported."""
        gen_dir = os.path.join(self.run_dir, f"gen-{generation}")
        try:
            os.makedirs(gen_dir, exist_ok=True)
            return gen_dir
        except OSError as exc:
            self.health.failed("create", gen_dir, exc)
        fallback = os.path.join(tempfile.gettempdir(), f"neuron-watch-{self.job_id}-{self.node}", f"gen-{generation}")
        os.makedirs(fallback, exist_ok=True)
        log.warning("generation %d: its logs go to %s (the run dir refused %s)", generation, fallback, gen_dir)
        return fallback

    def _shape_unknown(self, exc: Exception) -> None:
        if isinstance(exc, LauncherArgsError):
            self.refused = exc  # the supervisor decides (the launcher's own exit is awaited there)
        else:
            log.warning("could not read the job's shape: %s", exc)
        self.info = LaunchInfo()
        self._describe = None

    def poll_shape(self) -> bool:
        """Whether the job's shape is known (polls the background reader; never blocks)."""
        if self.info is not None or self._describe is None:
            return self.info is not None
        try:
            info = self._describe()
        except Exception as exc:
            self._shape_unknown(exc)
        else:
            if info is None:
                return False
            self.info, self._describe = info, None
            for w in info.warnings:
                log.warning("%s", w)
        if self.gen is not None:
            self._apply_shape(self.gen.gen_dir)
        return True

    def _apply_shape(self, gen_dir: str) -> None:
        assert self.info is not None and self.gen is not None
        streams = self.gen.streams
        # Our own --log-dir moves with the generation; a user's --log-dir stays where they put it.
        ours = self.info.log_dir is None or self.info.log_dir == self._described_root
        streams.set_log_root(self.launcher.log_root(gen_dir) if ours else str(self.info.log_dir))
        if self.info.rank_offset is not None or streams.rank_offset is None:
            streams.rank_offset = self.info.rank_offset  # None: learned from the workers' RANK (see _sample)

    def liveness_plan(self) -> str:
        """Which liveness signals this node arranges for its ranks (for the start log and job_started)."""
        if self.probe is None:
            return "rank output only (flight recorder probe off: --no-rank-probe)"
        return ("rank output, and the flight recorder of each rank that imports torch.distributed "
                "(read from torch's worker server; a rank that answers is reported once)")

    def _probe_dir(self, generation: int) -> str:
        """A fresh socket directory per generation (a killed rank leaves its socket behind)."""
        if self._probe_root is None:
            self._probe_root = make_probe_root()
        elif self.gen is not None and self.gen.probe_dir:
            remove_probe_dir(self.gen.probe_dir)
        path = os.path.join(self._probe_root, f"g{generation}")
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def capture(self, incident: str, reason: str, verdict_doc: str = "") -> EvidenceReport:
        """Capture this node's evidence while its ranks are alive; returns its report for the coordinator.
        Blocks; the loop uses :meth:`begin_capture`.

        ``verdict_doc``: the coordinator's pending verdict (JSON); the bundle's ``verdict.json`` and
        ``incident.md`` are completed with the final one when the stop comes (:meth:`stop`).
        """
        poll = self.begin_capture(incident, reason, verdict_doc)
        thread = self._capture_thread
        if thread is not None:
            thread.join()
        report = poll()
        assert report is not None
        return report

    def begin_capture(self, incident: str, reason: str, verdict_doc: str = "") -> Callable[[], EvidenceReport | None]:
        """Start :meth:`capture` in a thread and return its poll (the report once done, else None).

        The capture reads rank logs, copies dumps and waits on py-spy: seconds, bounded by
        ``--evidence-timeout``, that the loop spends reading output, sampling and keeping the link
        alive meanwhile. What touches the streams (the drain before it) happens here, on the loop's thread.
        """
        gen = self.gen
        if gen is None:
            nothing = EvidenceReport(error="nothing running")
            return lambda: nothing
        # Everything the ranks printed so far is in their logs before they are copied (a root-cause
        # line written just before a burst ended must be in the bundle).
        self._drain_output(final=False, to_eof=True)
        self.incident_no += 1
        verdict: dict[str, Any] = {"incident": incident, "reason": reason, **_json_or_empty(verdict_doc)}
        ctx = IncidentContext(
            job_id=self.job_id,
            generation=gen.number,
            incident=self.incident_no,
            node=self.node,
            run_dir=Path(self.run_dir),
            rank_logs={r: Path(p) for r, p in gen.streams.rank_logs().items()},
            # ended ranks too: a rank that failed, or that torchrun ended, before the capture left
            # where it was (a skipped all_reduce: all but one rank were gone when it began)
            rank_pids={**gen.ended_pids, **gen.worker_pids},
            verdict=verdict,
            env=self.rank_env,
            core_dump_dir=Path(self.run_dir) / "core-dumps",
            compile_cache_dir=Path(self.rank_env.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache")),
            deadline_s=self.cfg.evidence_timeout,
            work_dirs=[Path.cwd()],
            artifacts_uri=self.cfg.artifacts or "",
            tool_path=self.cfg.tool_path,
            probe_sockets=({r: rank_socket(gen.probe_dir, r) for r in {**gen.ended_pids, **gen.worker_pids}}
                           if gen.probe_dir else {}),
        )
        t0 = self.clock()
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                bundle = capture_node_bundle(ctx)
            except OSError as exc:  # the bundle dir itself failed: report it, never block the recovery
                log.error("could not write the evidence bundle to %s: %s", ctx.bundle_dir, exc)
                self.health.failed("write the evidence bundle", str(ctx.bundle_dir), exc)
                out["error"] = str(exc)
                return
            except Exception as exc:  # reported in the evidence; the coordinator must hear the capture ended
                log.exception("capturing this node's evidence failed")
                out["error"] = f"{type(exc).__name__}: {exc}"
                return
            out["bundle"] = bundle
            out["dumps"] = bundle_stacks(bundle.bundle_dir, bundle.held)
            out["seconds"] = round(self.clock() - t0, 3)

        thread = threading.Thread(target=work, name="neuron-watch-capture", daemon=True)
        self._capture_thread = thread
        thread.start()

        def poll() -> EvidenceReport | None:
            if thread.is_alive():
                return None
            self._capture_thread = None
            bundle = out.get("bundle")
            if bundle is None:
                return EvidenceReport(error=str(out.get("error") or "the capture ended without a bundle"),
                                      seconds=round(self.clock() - t0, 3))
            self.bundles[incident] = bundle.bundle_dir
            if bundle.held:
                log.warning("incident %s: %d file(s) of the evidence bundle could not be written to %s (the disk "
                            "refused them); kept in memory and written when the disk allows", incident,
                            len(bundle.held), bundle.bundle_dir)
                self._held.append(bundle)
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

    def stop(self, deadline: float, verdict_doc: str = "") -> StopReport:
        """Stop every process of the job on this node, then complete this node's bundles with the final
        verdict (``verdict_doc``, JSON) and upload them (bounded). Blocks; the loop uses :meth:`begin_stop`."""
        poll = self.begin_stop(deadline, verdict_doc)
        while (report := poll()) is None:
            time.sleep(0.02)
        return report

    def begin_stop(self, deadline: float, verdict_doc: str = "") -> Callable[[], StopReport | None]:
        """Start :meth:`stop` in a thread and return its poll (the stop's report once done, else None).

        The blocking parts -- the SIGTERM deadline (a SIGSTOPped rank holds it to the end), completing
        the bundle on a slow disk, uploads to a slow or absent S3 (``--upload-timeout``) -- run in the
        thread; the loop keeps reading output, writing status and keeping the link alive meanwhile.
        What touches the link (the final drain, the detail) happens in the poll, on the loop's thread.
        """
        # A launcher that reported its failure holds nothing but its own teardown (and, under a
        # static rendezvous, the store's port the next generation needs): SIGKILL it at once.
        first = signal.SIGKILL if self.gen is not None and self.gen.gave_up else signal.SIGTERM
        running = self.gen is not None and self.gen.exit_code is None
        self.stopping("told to by the coordinator")
        final = _json_or_empty(verdict_doc)
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                # the spare (prewarmed launcher) may start the next generation: kept
                result = self.launcher.stop(deadline, first_signal=first, keep_spare=True)
                out["result"] = result
                out["uploads"] = self._finish_bundles(final)
            except Exception as exc:  # reported in the detail; the loop must learn that the stop ended
                log.exception("stopping this node's job failed")
                out["error"] = str(exc)

        thread = threading.Thread(target=work, name="neuron-watch-stop", daemon=True)
        self._stop_thread = thread
        thread.start()

        def poll() -> StopReport | None:
            if thread.is_alive():
                return None
            self._stop_thread = None
            if self.gen is not None and self.gen.exit_code is None:
                # We stopped it: its exit code is ours, not a failure (or an end) to report.
                code = self.launcher.poll()
                self.gen.exit_code = code if code is not None else -15
            self._drain_output(final=True)
            result = out.get("result")
            if result is not None and running and self.gen is not None:
                self._say_stopped(self.gen, f"{result.rung}, {result.seconds:.1f}s")
            uploads = out.get("uploads")
            return StopReport(
                rung=None if result is None else result.rung,
                seconds=None if result is None else round(result.seconds, 3),
                survivors=() if result is None else tuple(result.survivors),
                continued=() if result is None else tuple(result.continued),
                killed_stopped=() if result is None else tuple(result.killed_stopped),
                uploads=None if uploads is None else tuple(uploads), error=str(out.get("error") or ""))

        return poll

    def _write_held(self) -> None:
        """Write what a full disk refused during captures (see :func:`~neuron_watch.node.evidence.flush_held`)."""
        for bundle in list(self._held):
            if flush_held(bundle):
                self._held.remove(bundle)
                log.warning("the evidence bundle %s is whole on disk now (the files the disk refused are written)",
                            bundle.bundle_dir)

    def _finish_bundles(self, final: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Complete this incident's bundle with the final verdict; upload every bundle (bounded).
        Runs in the stop's thread (nothing else touches the bundles while a stop runs)."""
        self._write_held()
        # only this incident's bundle: without storage, earlier incidents' bundles stay in self.bundles
        current = self.bundles.get(f"incident-{final.get('incident')}") if final else None
        if current is not None:
            try:
                complete_bundle(current, final, self.cfg.artifacts or "")
            except OSError as exc:  # the capture-time files stay; say so, never block the stop
                log.error("could not complete %s with the final verdict: %s", current, exc)
        if self.storage is None or not self.bundles:
            return None
        uploads: list[dict[str, Any]] = []
        if self.storage.uri.startswith("s3://"):  # an endpoint that does not answer holds the restart this long
            log.info("uploading %d incident bundle(s) to %s; the restart waits for it (%.0fs at most: "
                     "--upload-timeout)", len(self.bundles), self.storage.uri, self.cfg.upload_timeout)
        for incident, bundle_dir in list(self.bundles.items()):
            n = int(bundle_dir.parent.name.rsplit("-", 1)[1])
            key = incident_key(self.job_id, n, self.node)
            try:
                tree = upload_tree(self.storage, bundle_dir, key, deadline_s=self.cfg.upload_timeout)
            except Exception as exc:  # a storage bug must not block the restart; it is reported
                uploads.append({"incident": incident, "ok": False, "error": str(exc)})
                continue
            self.pending_uploads.extend(tree.failed)
            uploads.append({"incident": incident, "uri": f"{self.cfg.artifacts}/{key}", "ok": tree.ok,
                            **tree.summary()})
        self.bundles.clear()
        return uploads

    def checkpoint(self) -> str:
        """The newest complete checkpoint this node sees ('' if none). When --checkpoint-dir cannot be
        read now (ESTALE/EIO on a network file system, a symlink loop), the newest one seen before:
        a restart must not silently start from scratch over a transient fault."""
        found = self.find_checkpoint()
        if found is not None and found.error is not None:
            known = self._newest_checkpoint or (self.gen.checkpoint if self.gen is not None else "")
            log.warning("cannot read %s (%s): the newest complete checkpoint seen before is %s", found.directory,
                        found.error, known or "none")
            return known
        chosen = "" if found is None or found.chosen is None else found.chosen.path
        if chosen:
            self._newest_checkpoint = chosen
        return chosen

    def find_checkpoint(self) -> Detection | None:
        """What --checkpoint-dir holds (None without one): conventions, the newest complete checkpoint."""
        if not self.cfg.checkpoint_dir:
            return None
        found = find_checkpoint(self.cfg.checkpoint_dir, self.cfg.checkpoint_glob, self.cfg.checkpoint_marker)
        if found.error is not None:
            self.health.failed("read the checkpoint directory", self.cfg.checkpoint_dir, found.error)
        else:
            self.health.ok(self.cfg.checkpoint_dir)
        return found

    def _say_checkpoints(self, generation: int) -> None:
        """At start, say what --checkpoint-dir holds; at every launch, warn when nothing in it is complete."""
        found = self.find_checkpoint()
        if found is None:
            return
        warning = found.warning()
        if warning is not None:
            log.warning("generation %d: %s", generation, warning)
        elif generation == 0:
            log.info("%s", found.summary())

    def tell_io_fault(self, kind: str, fields: dict[str, Any]) -> None:
        """An :class:`~neuron_watch.iofaults.IOHealth` listener for a node without the coordinator in
        its process: the fault (or recovery) of this node's files reaches the job's merged log."""
        what = "degraded" if kind == "watchdog_degraded" else "recovered"
        now, wall = self.clock(), self.wall()
        self._out().add_line(UNATTRIBUTED, f"neuron-watch: watchdog {what} on {self.node}: {fields.get('path')}: "
                             f"{fields.get('error')}", now, wall, str(fields.get("path") or ""), 0)

    # -- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        """Launch generation 0 from the newest complete checkpoint (before the link exists)."""
        self.launch(0, self.checkpoint())

    def introduce(self) -> None:
        """Tell the coordinator who we are and that generation 0 runs."""
        now, wall = self.clock(), self.wall()
        self.link.hello(os.uname().nodename, os.getpid(), (), now, wall, place=self.place)
        self.link.status(NodeStatus.LAUNCHED, now, wall, checkpoint=self.gen.checkpoint if self.gen else "")
        self._early.replay(self.link)

    def _out(self) -> AgentLink | EarlyObservations:
        """Where observations go: the link, or the record kept until it exists."""
        return self._link if self._link is not None else self._early

    def watch_early(self) -> bool:
        """Before the link exists (the job's shape decides where the coordinator is): read rank and
        launcher output, sample workers and notice the launcher's exit as they happen, stamped with
        their real times and replayed to the coordinator at :meth:`introduce`. Returns whether the
        job's shape is known."""
        known = self.poll_shape()
        self._drain_output(final=False)
        if self.gen is not None:
            self._check_exit(self.gen, self.clock(), self.wall())
        reap_children()
        return known

    @property
    def launcher_ended(self) -> bool:
        """This generation's launcher has exited (before the link exists too)."""
        return self.gen is not None and self.gen.exit_code is not None

    def tick(self) -> int | None:
        """One turn: forward output, samples and exits; carry out commands. Returns an exit code at shutdown."""
        now, wall = self.clock(), self.wall()
        self.poll_shape()
        self._drain_output(final=False)
        gen = self.gen
        stopping = self.link.stop_running  # the stop's thread owns the launcher's end meanwhile
        if gen is not None and not stopping:
            self._check_exit(gen, now, wall)
        if gen is not None and not stopping:
            self._maybe_prewarm(gen, now)
        reap_children()
        if self._held and not stopping and now >= self._held_retry_at:
            self._held_retry_at = now + HELD_RETRY_EVERY
            self._write_held()
        commands = self.link.tick(now, wall)
        try:
            busy = stopping or self.link.capture_running
            return self.link.dispatch(commands, self, now, wall) if commands or busy else None
        except JobRefused as exc:
            self._refused(exc)
            raise

    def activity_ago(self, now: float) -> float | None:
        """Seconds since this node's ranks last showed work (None: no generation runs here).

        Work is a progress line (once the generation has shown one), any rank output before that
        (start-up, loading), or a live compiler process. What the lost-coordinator policy judges by.
        """
        gen = self.gen
        if gen is None or gen.exit_code is not None:
            return None
        if self._link is not None and self._link.progress_lines > self._progress_seen:
            self._progress_seen = self._link.progress_lines
            self._last_progress_at = now
        signs = [gen.started, self._last_compiler_at]
        progressed = self._last_progress_at is not None and self._last_progress_at >= gen.started
        signs.append(self._last_progress_at if progressed else self._last_line_at)
        return now - max(t for t in signs if t is not None)

    def rebase(self, gap: float) -> None:
        """Our loop was paused ``gap`` seconds: shift the clocks that measure silence (ours and the link's)."""
        for name in ("_last_line_at", "_last_compiler_at", "_last_progress_at"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t + gap)
        if self.gen is not None:
            self.gen.started += gap
        if self._link is not None:
            self._link.rebase(gap)

    def _refused(self, exc: JobRefused) -> None:
        """The coordinator refused us (another job's, or ours because another live agent holds this
        node's name or place): say so, and record it in this node's events (the coordinator we reach
        does not take them)."""
        if exc.same_job:
            say(f"refused by the job's coordinator: {exc.reason}; stopping this node's ranks")
        else:
            say(f"the coordinator port {self.link.address} is held by job {exc.coordinator_job}, not this node's job "
                f"{exc.agent_job} (refused): stopping this node's ranks; give this job its own coordinator port")
        try:
            events = EventLog(os.path.join(self.run_dir, "events.jsonl"))
            try:
                events.emit(EventKind.JOB_REFUSED, self.gen.number if self.gen else 0, job=exc.agent_job,
                            other_job=exc.coordinator_job, node=self.node, address=self.link.address,
                            reason=exc.reason if exc.same_job else
                            "refused by the coordinator of another job with the same secret")
            finally:
                events.close()
        except OSError as err:  # the console line above stands; the run dir is not usable
            log.warning("cannot record the refusal in %s: %s", self.run_dir, err)

    def _check_exit(self, gen: NodeGeneration, now: float, wall: float) -> None:
        if gen.exit_code is not None:
            return
        code = self.launcher.poll()
        if code is None and gen.gave_up:
            # Judged now, not after the launcher's teardown (the stop that follows cuts it short).
            code = self.launcher.gave_up_code
        if code is not None:
            self._drain_output(final=True)
            gen.exit_code = code
            out = self._out()
            own = self.launcher.own_rank  # a task that is a rank: its exit is that rank's too
            out.add_exits([*([(own, code, self.clock())] if own is not None else []), (-1, code, self.clock())],
                          now, wall)
            out.status(NodeStatus.FINISHED if code == 0 else NodeStatus.FAILED, now, wall, detail=f"exit code {code}",
                       checkpoint=self.checkpoint(), report=LauncherExit(code))

    def stop_early(self, sig: int, timeout: float) -> None:
        """A signal before the link exists: stop this node's ranks now (its exit is ours, not the job's failure)."""
        gen = self.gen
        self.stopping(f"{signal.Signals(sig).name} forwarded")
        result = self.launcher.stop(timeout, first_signal=sig, keep_spare=False)
        if gen is not None and gen.exit_code is None:
            code = self.launcher.poll()
            gen.exit_code = code if code is not None else -sig
            self._drain_output(final=True)
            self._say_stopped(gen, f"{result.rung}, {result.seconds:.1f}s")

    def stopping(self, why: str) -> None:
        """From now on the launcher's output is its teardown after our stop (or our forwarded signal)."""
        if self.gen is not None and not self.gen.stopped_by_us:
            self.gen.stopped_by_us = why

    def _say_stopped(self, gen: NodeGeneration, how: str) -> None:
        say(f"{self.launcher.name} on {self.node} stopped by neuron-watch ({gen.stopped_by_us}; {how}): "
            f"its own output of the stop is in {gen.launcher_log.name}, not here")

    def _maybe_prewarm(self, gen: NodeGeneration, now: float) -> None:
        """Once the ranks have trained ``--prewarm-after`` seconds (start-up, which needs every core,
        is long over), get the next generation's launcher ready, so that a restart does not wait for it."""
        if gen.trained_since is None and self.link.progress_lines > gen.progress_mark:
            gen.trained_since = now
        if (gen.prewarmed or gen.exit_code is not None or gen.trained_since is None or self.cfg.no_prewarm
                or now - gen.trained_since < self.cfg.prewarm_after):
            return
        gen.prewarmed = True
        self.launcher.prewarm(gen.env)

    def _drain_output(self, final: bool, to_eof: bool = False) -> None:
        """Launcher and rank output since the last call (``final`` or ``to_eof``: every rank file
        to its end, so that a rank's last lines reach the coordinator before its exit does)."""
        gen = self.gen
        if gen is None:
            return
        now, wall = self.clock(), self.wall()
        for text in self.launcher.read_output(final):
            gen.launcher_log.write(text + "\n")
            if self.echo is not None and not gen.stopped_by_us:
                self.echo(f"[{self.launcher.name}] {text}")
            self._parse_launcher_line(gen, text, now, wall)
        gen.launcher_log.flush()
        if now - self._last_sample >= SAMPLE_EVERY or final:
            self._last_sample = now
            self._sample(gen, now, wall)
        self._drain_ranks(gen, final, to_eof or final)

    def _drain_ranks(self, gen: NodeGeneration, final: bool = False, to_eof: bool = False) -> None:
        out = self._out()
        now, wall = self.clock(), self.wall()
        for ln in gen.streams.poll(now, wall, final, to_eof):
            out.add_line(ln.key.rank, ln.text, ln.mono, ln.wall, ln.source, ln.lineno)
            self._last_line_at = now
        skipped = gen.streams.skipped_lines
        if skipped > self._skipped_told:
            # lines of a flood never read are lost lines of this node: they travel in its drop count
            # (before the link exists too, in order with what the node reports next)
            out.count_lost(skipped - self._skipped_told)
            self._skipped_told = skipped
        cut = gen.streams.cut_lines
        if cut > self._cut_told[0]:
            # lines cut to the tail's bound travel with the link's own cut lines (truncated_lines)
            cut_bytes = gen.streams.cut_bytes
            out.count_truncated(cut - self._cut_told[0], cut_bytes - self._cut_told[1])
            self._cut_told = (cut, cut_bytes)

    def _parse_launcher_line(self, gen: NodeGeneration, text: str, now: float, wall: float) -> None:
        if self.launcher.reports_end(text):
            gen.gave_up = True
        m = _TR_RANK.match(text)
        if m:
            gen.pending_rank = int(m.group(1))
            return
        m = _TR_EXIT.match(text)
        if m and gen.pending_rank is not None:
            rank, code = gen.pending_rank, int(m.group(1))
            gen.pending_rank = None
            # the rank is gone: its files are complete; its last lines (the root cause) go first
            self._drain_ranks(gen, to_eof=True)
            words = self._last_words(gen, [rank])
            if words:  # where it was in its collectives, before its exit is judged
                self._out().add_compilers(gen.compilers_seen, now, wall, collectives=words)
            self._out().add_exits([(rank, code, now)], now, wall)

    def _sample(self, gen: NodeGeneration, now: float, wall: float) -> None:
        pid = self.launcher.pid
        if pid is None or gen.exit_code is not None:
            return
        out = self._out()
        workers, compilers = self.sampler.sample(pid)
        if workers:
            w = workers[0]
            if self.group_rank is None and w.group_rank is not None:
                self.group_rank = w.group_rank
            offset = w.rank - w.local_rank
            if gen.streams.rank_offset is None:
                gen.streams.rank_offset = offset
            elif gen.streams.rank_offset != offset:  # nodes with different --nproc_per_node: the workers know
                log.warning("ranks on this node start at %d, not %d as the launch arguments implied; "
                            "lines from now on carry the workers' own ranks", offset, gen.streams.rank_offset)
                gen.streams.rank_offset = offset
        if len(workers) < len(gen.worker_pids) and not gen.finishing:
            # Ranks are ending while the launcher still runs: it is about to report how the
            # generation ended (a clean end of training, or a failure). Not a hang.
            gen.finishing = True
            self._drain_ranks(gen, to_eof=True)  # what the ended ranks printed last is judged before their end
            ended = sorted(set(gen.worker_pids) - {w.rank for w in workers})
            out.status(NodeStatus.FINISHING, now, wall, detail=f"ranks ended: {ended}")
        ended_now = sorted(set(gen.worker_pids) - {w.rank for w in workers})
        if workers or not gen.finishing:
            gen.ended_pids.update((r, p) for r, p in gen.worker_pids.items() if r in ended_now)
            gen.worker_pids = {w.rank: w.pid for w in workers}
        self._check_oom_kills(now, wall)
        self._check_new_checkpoint(gen, now, wall)
        if self.cache_dir and now - self._last_locks >= LOCKS_EVERY:
            self._last_locks = now
            self._locks = fresh_locks(self.cache_dir, wall - (now - gen.started))
        if compilers:
            self._last_compiler_at = now
        readings = self._read_probe(gen) + self._last_words(gen, ended_now)
        gen.compilers_seen = [(c.rank, c.pid, c.cpu_seconds, now) for c in compilers]
        # Sent even when empty: an absent compiler is how the coordinator learns a compile ended.
        out.add_compilers(gen.compilers_seen, now, wall,
                          locks=self._locks, always=True, workers=sorted(gen.worker_pids.items()),
                          collectives=readings,
                          activity=[WorkerActivity(w.rank, w.tree_cpu_seconds, w.state) for w in workers])

    def _last_words(self, gen: NodeGeneration, ranks: Iterable[int]) -> list[tuple[int, tuple[Any, ...], str, float]]:
        """The Flight Recorder each of ``ranks`` left as it exited (the bootstrap's ``r<RANK>.fr.json``),
        once per rank: read at once, not at the poller's next turn, so that it reaches the judge
        before the rank's exit does (a rank that ran a different collective from its peers is
        told by it; the job breaks within milliseconds of such a divergence)."""
        if self.probe is None or not gen.probe_dir:
            return []
        out: list[tuple[int, tuple[Any, ...], str, float]] = []
        for rank in ranks:
            if rank in gen.last_words or read_status(gen.probe_dir, rank).get("state") != "exited":
                continue
            gen.last_words.add(rank)
            r = read_rank(gen.probe_dir, rank)
            if not r.problem:
                out.append((r.rank, r.groups, r.problem, r.mono))
        return out

    def _read_probe(self, gen: NodeGeneration) -> list[tuple[int, tuple[Any, ...], str, float]]:
        """Hand the live ranks to the probe thread; take its new readings; log each rank's probe state
        when it changes (``flight recorder on``, or why not)."""
        if self.probe is None:
            return []
        self.probe.set_ranks(gen.probe_dir, gen.worker_pids)
        out = []
        problems = False
        for r in self.probe.take():
            out.append((r.rank, r.groups, r.problem, r.mono))
            said = "on" if not r.problem else r.problem.split(":", 1)[0].removesuffix(" (yet)")
            if gen.probe_said.get(r.rank) != said:
                gen.probe_said[r.rank] = said
                if r.problem:
                    log.debug("rank %d: no flight recorder reading: %s", r.rank, r.problem)
                    problems = True
                else:
                    on = sum(1 for v in gen.probe_said.values() if v == "on")
                    if on == len(gen.worker_pids) or on == 1:  # once at the first, once when all answer
                        log.info("liveness: flight recorder on %d of %d rank(s) of this node", on,
                                 len(gen.worker_pids))
        if problems and len(gen.probe_said) >= len(gen.worker_pids) and not gen.finishing and gen.exit_code is None:
            # one line for the node (32 or 64 ranks say the same at start-up), once every rank was read
            # and again only when what they say changes; not once ranks are ending (their servers
            # go with them: "no answer" is their exit, told by its own lines)
            line = probe_summary(gen.probe_said, len(gen.worker_pids))
            if line != gen.probe_line:
                gen.probe_line = line
                log.info("%s", line)
        return out

    def _check_new_checkpoint(self, gen: NodeGeneration, now: float, wall: float) -> None:
        """A new complete checkpoint in --checkpoint-dir is a sign of life of its own (a job that prints
        nothing still saves): tell the judge, as a line of this node's own stream, at most every
        :data:`CHECKPOINT_SCAN_EVERY` seconds (a scan reads a few bytes per entry)."""
        # faster than a fixed hang timeout, or the sign would come too late to count
        every = min(CHECKPOINT_SCAN_EVERY, (self.cfg.hang_timeout or CHECKPOINT_SCAN_EVERY) / 3)
        if not self.cfg.checkpoint_dir or now - self._last_checkpoint_scan < every:
            return
        self._last_checkpoint_scan = now
        found = self.find_checkpoint()
        chosen = None if found is None else found.chosen
        if chosen is None:
            return
        known = self._newest_checkpoint if self._newest_checkpoint is not None else gen.checkpoint
        self._newest_checkpoint = chosen.path
        if chosen.path != known:
            step = "" if chosen.step is None else f" (step {chosen.step})"
            self._out().add_line(UNATTRIBUTED, f"neuron-watch: a new complete checkpoint appeared: {chosen.path}{step}",
                                 now, wall, self.cfg.checkpoint_dir, 0)

    def _check_oom_kills(self, now: float, wall: float) -> None:
        """Tell the judge when the kernel's OOM killer killed in our cgroup: a rank killed by SIGKILL
        is labelled ``oom`` only with such evidence (the ranks live in the cgroup we were started in)."""
        seen = cgroup_memory_events()
        before = self._oom_kills
        if seen is None or before is None or seen[0] != before[0]:
            self._oom_kills = seen
            return
        if seen[1] > before[1]:
            self._out().add_line(UNATTRIBUTED, f"neuron-watch: the kernel's OOM killer killed a process of this node's "
                                 f"job ({seen[0]}: oom_kill {before[1]} -> {seen[1]})", now, wall, seen[0], 0)
        self._oom_kills = seen

    def close(self, timeout: float) -> dict[str, Any] | None:
        """Stop what runs (one deadline), retry failed uploads (bounded), release everything.

        Returns the retry's summary when uploads had failed during the run, else None.
        """
        if self._stop_thread is not None:  # a stop of ours runs: let it end (it is bounded) before the last one
            self._stop_thread.join(timeout + self.cfg.upload_timeout + 5)
        if self._capture_thread is not None:  # a capture runs: its tools (py-spy) end by its deadline; wait for that
            self._capture_thread.join(self.cfg.evidence_timeout + 5)
        self._write_held()
        for bundle in self._held:  # never silent: what the disk never took is said
            log.error("%d file(s) of the evidence bundle %s were never written (the disk refused them until the end): "
                      "%s", len(bundle.held), bundle.bundle_dir, ", ".join(sorted(bundle.held)))
        running = self.gen is not None and self.gen.exit_code is None and self.launcher.poll() is None
        if running:
            self.stopping("neuron-watch is exiting")
        result = self.launcher.stop(timeout)
        self._drain_output(final=True)
        if running and self.gen is not None:
            self._say_stopped(self.gen, f"{result.rung}, {result.seconds:.1f}s")
        summary = None
        if self.pending_uploads and self.storage is not None:
            log.info("retrying %d failed artifact upload(s) to %s before exiting (%.0fs at most)",
                     len(self.pending_uploads), self.storage.uri, self.cfg.upload_retry_timeout)
            retried = retry_pending(self.storage, self.pending_uploads, self.cfg.upload_retry_timeout)
            self.pending_uploads = retried.failed
            summary = {"ok": retried.ok, **retried.summary()}
            if retried.failed:
                log.error("%d artifact upload(s) failed for good; the files stay in %s",
                          len(retried.failed), self.run_dir)
        self.launcher.close()
        if self.probe is not None:
            self.probe.close()
            remove_probe_dir(self._probe_root)
        if self.gen is not None:
            self.gen.streams.close()
            self.gen.launcher_log.close()
        return summary


def probe_summary(said: dict[int, str], ranks: int) -> str:
    """One line for a node's ranks without a flight recorder reading, by reason:
    ``flight recorder: 0 of 32 ranks yet: torch.distributed not imported``."""
    on = sum(1 for v in said.values() if v == "on")
    why: dict[str, int] = {}
    for v in said.values():
        if v != "on":
            why[v] = why.get(v, 0) + 1
    reasons = "; ".join(w if n == ranks - on else f"{w} ({n} rank(s))" for w, n in sorted(why.items()))
    return f"flight recorder: {on} of {ranks} ranks yet: {reasons}"
