"""The single-node supervisor: launch a generation, watch it, judge it, capture, stop, restart.

This is the I/O shell around the pure parts (:mod:`judge`, :mod:`policy`, :mod:`checkpoints`,
:mod:`envpolicy`). One loop, one ``tick(now)`` every :data:`TICK` seconds; signal handlers only
set a flag, and one shutdown path does the work.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os
import re
import secrets
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from neuron_watch import __version__
from neuron_watch.checkpoint_scan import scan_checkpoints
from neuron_watch.checkpoints import CheckpointRule, choose_checkpoint
from neuron_watch.config import WatchConfig
from neuron_watch.envpolicy import HostFacts, plan_environment
from neuron_watch.errors import ExitCode
from neuron_watch.eventlog import EventLog, write_json_atomic
from neuron_watch.events import Action, CompilerSample, Label, RankExit, RankKey, Verdict, iso_utc
from neuron_watch.evidence import IncidentContext, capture_node_bundle
from neuron_watch.goodput import compute_goodput
from neuron_watch.guardian import release, start_guardian
from neuron_watch.judge import Judge, JudgeSettings
from neuron_watch.kb import default_knowledge_base
from neuron_watch.launchers.base import Launcher, LaunchInfo
from neuron_watch.mqtt import MqttSink, parse_mqtt_url
from neuron_watch.policy import Decision, JobState, JobStateMachine, RestartPolicy
from neuron_watch.procs import MARKER_ENV, ProcessSampler, become_subreaper, reap_children
from neuron_watch.stacks import hang_culprits
from neuron_watch.storage import Storage, UploadResult, incident_key, open_storage, retry_pending, upload_tree
from neuron_watch.tail import RankStreams, console_echo
from neuron_watch.timeline import write_timeline

log = logging.getLogger("neuron_watch")

TICK = 0.1  # seconds between loop iterations
SAMPLE_EVERY = 1.0  # seconds between process-table samples
LOCKS_EVERY = 5.0  # seconds between compile-cache lock scans
STATUS_EVERY = 1.0  # seconds between status.json writes
#: After a failure is first seen, wait this long for the rest of the story (the launcher's own exit,
#: the root-cause rank's exit code) before judging: peers report "connection closed" before the
#: launcher reports which rank died first.
SETTLE = 3.0
PROGRESS_EVENT_EVERY = 30.0  # seconds between `progress` events (the first of a generation at once)
RETRY_AT_EXIT = 300.0  # bound on retrying failed uploads when the job ends

# torchrun's failure summary: "rank      : 1 (local_rank: 1)" then "exitcode  : 3 (pid: 1234)"
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


def make_job_id(env: dict[str, str] | os._Environ[str]) -> str:
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    return time.strftime("nw-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def host_facts() -> HostFacts:
    import shutil

    return HostFacts(
        kernel_release=os.uname().release,
        has_neuron_det=shutil.which("neuron-det") is not None,
        has_neuron_device=os.path.exists("/dev/neuron0"),
    )


@dataclass
class Generation:
    number: int
    checkpoint: str
    gen_dir: str
    started: float
    streams: RankStreams
    judge: Judge
    info: LaunchInfo | None = None
    first_progress: float | None = None
    last_progress: float | None = None
    last_label: Label | None = None
    failure_seen: float | None = None
    pending_rank: int | None = None  # parsing torchrun's failure summary
    launcher_log: Any = None
    exits: dict[int, int] = field(default_factory=dict)
    worker_pids: dict[int, int] = field(default_factory=dict)  # global rank -> pid
    last_step: int | None = None
    last_progress_wall: float | None = None
    last_progress_event: float | None = None


class Supervisor:
    """Runs the job on this node until it finishes, gives up, or is interrupted."""

    def __init__(
        self,
        config: WatchConfig,
        launcher: Launcher,
        job_id: str,
        run_dir: str,
        node: str,
        marker: str,
        rank_env: dict[str, str],
        events: EventLog,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = config
        self.launcher = launcher
        self.job_id = job_id
        self.run_dir = run_dir
        self.node = node
        self.marker = marker
        self.rank_env = rank_env
        self.events = events
        self.clock = clock
        self.wall = wall
        self.kb = default_knowledge_base(config.progress_regex)
        self.settings = JudgeSettings(
            hang_timeout=config.hang_timeout,
            startup_timeout=config.startup_timeout,
            compile_timeout=config.compile_timeout,
        )
        self.policy = RestartPolicy(max_restarts=config.max_restarts)
        self.sm = JobStateMachine()
        self.sampler = ProcessSampler()
        self.stop_signal: int | None = None
        self.incidents = 0
        self.gen: Generation | None = None
        self._last_sample = 0.0
        self._last_locks = 0.0
        self.cache_dir = compile_cache_dir(rank_env)
        self._last_status = 0.0
        self.echo = None if config.quiet else console_echo
        self.storage: Storage | None = None
        self.pending_uploads: list[UploadResult] = []
        self._capture_info: dict[str, Any] = {}

    # -- signals: handlers only record; the loop acts -------------------------------------------

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    # -- one generation -------------------------------------------------------------------------

    def _start_generation(self, number: int, checkpoint: str) -> Generation:
        gen_dir = os.path.join(self.run_dir, f"gen-{number}")
        os.makedirs(gen_dir, exist_ok=True)
        now = self.clock()
        env = dict(self.rank_env)
        env.update(
            {
                "NEURON_WATCH_CHECKPOINT": checkpoint,
                "NEURON_WATCH_RESTART_COUNT": str(number),
                "NEURON_WATCH_GENERATION": str(number),
            }
        )
        streams = RankStreams(self.node, gen_dir, self.echo)
        streams.set_log_root(os.path.join(gen_dir, "torchrun"))
        gen = Generation(number, checkpoint, gen_dir, now, streams, Judge(self.kb, self.settings, now))
        gen.launcher_log = open(os.path.join(gen_dir, "launcher.log"), "a", encoding="utf-8")  # noqa: SIM115
        cmd = self.launcher.command(gen_dir, checkpoint)
        with open(os.path.join(gen_dir, "command.json"), "w", encoding="utf-8") as f:
            json.dump({"argv": cmd, "checkpoint": checkpoint}, f)
        self.launcher.start(gen_dir, checkpoint, env)
        try:
            gen.info = self.launcher.describe(gen_dir)
        except Exception as exc:  # the launcher itself will report a bad argument; keep watching
            log.warning("could not read the job's shape: %s", exc)
            gen.info = LaunchInfo()
        for w in gen.info.warnings:
            log.warning("%s", w)
        if gen.info.log_dir:
            streams.set_log_root(gen.info.log_dir)
        if gen.info.nnodes == 1:
            streams.rank_offset = 0
        if gen.info.nproc_per_node and gen.info.nnodes == 1:
            gen.judge.expect((RankKey(self.node, r) for r in range(gen.info.nproc_per_node)), now)
        return gen

    def _tick(self, gen: Generation, now: float, final: bool = False) -> None:
        wall = self.wall()
        for text in self.launcher.read_output(final):
            gen.launcher_log.write(text + "\n")
            if self.echo is not None:
                self.echo(f"[{self.launcher.name}] {text}")
            self._parse_launcher_line(gen, text, now)
        gen.launcher_log.flush()
        if now - self._last_sample >= SAMPLE_EVERY or final:
            self._last_sample = now
            self._sample(gen, now)
        lines = gen.streams.poll(now, wall, final)
        if lines:
            for _line, m in gen.judge.observe_lines(lines):
                if m.signature.effect.value == "progress":
                    gen.first_progress = gen.first_progress or now
                    gen.last_progress, gen.last_progress_wall = now, wall
                    if m.step is not None:
                        gen.last_step = m.step if gen.last_step is None else max(gen.last_step, m.step)
            if gen.last_progress is not None and (
                gen.last_progress_event is None or now - gen.last_progress_event >= PROGRESS_EVENT_EVERY
            ):
                gen.last_progress_event = now
                self.events.emit("progress", gen.number, step=gen.last_step)
        if now - self._last_status >= STATUS_EVERY:
            self._last_status = now
            self._write_status(gen, now)

    def _parse_launcher_line(self, gen: Generation, text: str, now: float) -> None:
        m = _TR_RANK.match(text)
        if m:
            gen.pending_rank = int(m.group(1))
            return
        m = _TR_EXIT.match(text)
        if m and gen.pending_rank is not None:
            rank, code = gen.pending_rank, int(m.group(1))
            gen.pending_rank = None
            gen.exits[rank] = code
            gen.judge.observe_exit(RankExit(RankKey(self.node, rank), code, now))

    def _sample(self, gen: Generation, now: float) -> None:
        pid = self.launcher.pid
        if pid is None:
            return
        workers, compilers = self.sampler.sample(pid)
        if workers and gen.streams.rank_offset is None:
            w = workers[0]
            gen.streams.rank_offset = w.rank - w.local_rank
        gen.judge.observe_compilers(
            [CompilerSample(RankKey(self.node, c.rank), c.pid, c.cpu_seconds, now) for c in compilers], now
        )
        gen.worker_pids = {w.rank: w.pid for w in workers}
        if self.cache_dir and now - self._last_locks >= LOCKS_EVERY:
            self._last_locks = now
            gen.judge.observe_cache_locks(fresh_locks(self.cache_dir, self.wall() - (now - gen.started)), now)

    def _write_status(self, gen: Generation, now: float) -> None:
        ranks = gen.judge.rank_summaries(now)
        for r in ranks:
            r["pid"] = gen.worker_pids.get(int(str(r["rank"])))
        status: dict[str, Any] = {
            "job_id": self.job_id,
            "generation": gen.number,
            "restarts": self.policy.restarts,
            "state": self.sm.state.value,
            "label": gen.last_label.value if gen.last_label else None,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall())),
            "updated_unix": self.wall(),
            "hang_timeout": gen.judge.hang_timeout(),
            "ranks": ranks,
        }
        try:
            write_json_atomic(os.path.join(self.run_dir, "status.json"), status)
        except OSError as exc:
            log.warning("cannot write status.json: %s", exc)

    def _progress_fields(self, gen: Generation) -> dict[str, Any]:
        return {
            "last_progress": None if gen.last_progress_wall is None else iso_utc(gen.last_progress_wall),
            "last_step": gen.last_step,
        }

    def _emit_verdict(self, gen: Generation, verdict: Verdict) -> None:
        gen.last_label = verdict.label
        self.events.emit("verdict", gen.number, **verdict.to_dict(), **self._progress_fields(gen))
        if verdict.label is not Label.HEALTHY:
            log.info("verdict: %s%s", verdict.label.value, f" ({verdict.reason})" if verdict.reason else "")

    # -- incidents ------------------------------------------------------------------------------

    def _capture(self, gen: Generation, verdict: Verdict) -> tuple[IncidentContext, Path | None]:
        """Capture this node's evidence while every rank is still alive (bounded by --evidence-timeout)."""
        self.incidents += 1
        ctx = IncidentContext(
            job_id=self.job_id,
            generation=gen.number,
            incident=self.incidents,
            node=self.node,
            run_dir=Path(self.run_dir),
            rank_logs={r: Path(p) for r, p in gen.streams.rank_logs().items()},
            rank_pids=dict(gen.worker_pids),
            verdict=verdict.to_dict(),
            env=self.rank_env,
            core_dump_dir=Path(self.run_dir) / "core-dumps",
            compile_cache_dir=Path(self.rank_env.get("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache")),
            deadline_s=self.cfg.evidence_timeout,
            work_dirs=[Path.cwd()],
            artifacts_uri=self.cfg.artifacts or "",
        )
        t0 = self.clock()
        try:
            bundle = capture_node_bundle(ctx)
            self._capture_info = {"capture_seconds": round(self.clock() - t0, 3), "missing_items": len(bundle.missing)}
            return ctx, bundle.bundle_dir
        except OSError as exc:  # the bundle dir itself failed: report it, never stop the recovery
            log.error("could not write the evidence bundle to %s: %s", ctx.bundle_dir, exc)
            self._capture_info = {"capture_seconds": round(self.clock() - t0, 3), "capture_error": str(exc)}
            return ctx, None

    @staticmethod
    def _culprit_from_stacks(verdict: Verdict, bundle_dir: Path | None) -> Verdict:
        """A silent hang names no culprit in the logs; the rank outside every collective is it."""
        if verdict.label is not Label.COLLECTIVE_HANG or verdict.culprit is not None or bundle_dir is None:
            return verdict
        dumps: dict[int, str] = {}
        for f in sorted((bundle_dir / "stacks").glob("rank-*.txt")):
            try:
                dumps[int(f.stem.split("-", 1)[1])] = f.read_text(errors="replace")
            except (OSError, ValueError):
                continue
        culprits = hang_culprits(dumps)
        if len(culprits) != 1:
            return verdict
        node = verdict.ranks[0].node if verdict.ranks else ""
        return dataclasses.replace(
            verdict,
            culprit=RankKey(node, culprits[0]),
            reason=f"{verdict.reason}; rank {culprits[0]} is the only one not waiting in a collective (stacks)",
        )

    def _emit_incident(self, gen: Generation, verdict: Verdict, ctx: IncidentContext) -> None:
        culprit = None if verdict.culprit is None else {"node": verdict.culprit.node, "rank": verdict.culprit.rank}
        self.events.emit(
            "incident",
            gen.number,
            incident=ctx.incident,
            label=verdict.label.value,
            culprit=culprit,
            artifacts=str(ctx.bundle_dir.parent),
            **self._capture_info,
        )

    def _upload(self, gen: Generation, ctx: IncidentContext) -> None:
        """Upload a captured bundle (after the stop, bounded); failures are reported and retried at exit."""
        if self.storage is None:
            return
        key = incident_key(self.job_id, ctx.incident, self.node)
        try:
            tree = upload_tree(self.storage, ctx.bundle_dir, key, deadline_s=self.cfg.upload_timeout)
        except Exception as exc:  # a storage bug must not block the restart; it is reported
            log.error("upload of incident %d failed: %s", ctx.incident, exc)
            self.events.emit("upload", gen.number, incident=ctx.incident, ok=False, error=str(exc))
            return
        self.pending_uploads.extend(tree.failed)
        self.events.emit("upload", gen.number, incident=ctx.incident, uri=f"{self.cfg.artifacts}/{key}",
                         ok=tree.ok, **tree.summary())

    def _choose_checkpoint(self) -> str:
        if not self.cfg.checkpoint_dir:
            return ""
        rule = CheckpointRule(glob=self.cfg.checkpoint_glob, marker=self.cfg.checkpoint_marker)
        chosen = choose_checkpoint(scan_checkpoints(self.cfg.checkpoint_dir, rule.marker), rule)
        return "" if chosen is None else chosen.path

    def _finish_generation(self, gen: Generation) -> None:
        self._tick(gen, self.clock(), final=True)
        self.launcher.close()
        gen.streams.close()
        gen.launcher_log.close()

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        checkpoint = self._choose_checkpoint()
        self.events.emit(
            "job_started",
            0,
            job_id=self.job_id,
            node=self.node,
            version=__version__,
            command=self.launcher.command(os.path.join(self.run_dir, "gen-0"), checkpoint),
            checkpoint=checkpoint or None,
            config=self.cfg.redacted(),
        )
        number = 0
        exit_code = 0
        while True:
            gen = self.gen = self._start_generation(number, checkpoint)
            self.sm.move(JobState.RUNNING, self.clock())
            outcome = self._watch(gen)
            self._finish_generation(gen)
            if outcome is None:  # finished
                exit_code = 0
                self.sm.move(JobState.FINISHED, self.clock())
                break
            kind, value = outcome
            if kind == "signal":
                exit_code = 128 + value
                self.sm.move(JobState.INTERRUPTED, self.clock())
                break
            if kind == "give_up":
                exit_code = value
                self.sm.move(JobState.FAILED, self.clock())
                break
            number += 1
            checkpoint = self._choose_checkpoint()
            self.events.emit("restart", number, checkpoint=checkpoint or None, restarts=self.policy.restarts)
            log.info("restarting as generation %d from %s", number, checkpoint or "the beginning (no checkpoint)")
            self.sm.move(JobState.STARTING, self.clock())
        if self.pending_uploads and self.storage is not None:
            retried = retry_pending(self.storage, self.pending_uploads, RETRY_AT_EXIT)
            self.pending_uploads = retried.failed
            self.events.emit("upload", number, retry_at_exit=True, ok=retried.ok, **retried.summary())
        fields: dict[str, Any] = {
            "exit_code": exit_code,
            "restarts": self.policy.restarts,
            "state": self.sm.state.value,
            "incidents": self.incidents,
            "uploads_failed": len(self.pending_uploads),
        }
        if self.gen is not None:
            fields.update(self._progress_fields(self.gen))
        closing = {"time": iso_utc(self.wall()), "event": "job_finished", "generation": number, **fields}
        try:
            fields["goodput"] = compute_goodput([*self.events.history, closing])
        except Exception as exc:  # figures are a report, never a reason to lose the final event
            log.warning("goodput figures failed: %s", exc)
        self.events.emit("job_finished", number, **fields)
        if self.gen is not None:
            self._write_status(self.gen, self.clock())
        try:
            write_timeline(Path(self.run_dir), self.kb)
        except Exception as exc:
            log.warning("timeline.json not written: %s", exc)
        return exit_code

    def _watch(self, gen: Generation) -> tuple[str, int] | None:
        """Watch one generation. None = finished OK; ("restart", 0); ("give_up", code); ("signal", n)."""
        while True:
            now = self.clock()
            self._tick(gen, now)
            reap_children()
            if self.stop_signal is not None:
                sig = self.stop_signal
                log.info("received %s: stopping the job", signal.Signals(sig).name)
                self.launcher.stop(self.cfg.stop_timeout, first_signal=sig)
                self._tick(gen, self.clock(), final=True)
                return ("signal", sig)
            code = self.launcher.poll()
            if code is not None:
                self._tick(gen, self.clock(), final=True)
                if code == 0:
                    verdict = gen.judge.verdict(self.clock())
                    if verdict.label is not gen.last_label and verdict.label is not Label.HEALTHY:
                        self._emit_verdict(gen, verdict)
                    self.launcher.stop(self.cfg.stop_timeout)  # stray children of the job, if any
                    return None
                gen.judge.observe_exit(RankExit(RankKey(self.node, -1), code, self.clock()))
                return self._fail(gen, gen.judge.verdict(self.clock()), launcher_code=code)
            verdict = gen.judge.verdict(now)
            if verdict.action is Action.WAIT:
                gen.failure_seen = None
                if verdict.label is not gen.last_label and not (
                    gen.last_label is None and verdict.label is Label.HEALTHY
                ):
                    self._emit_verdict(gen, verdict)
            elif verdict.label is Label.COLLECTIVE_HANG or (
                gen.failure_seen is not None and now - gen.failure_seen >= SETTLE
            ):
                return self._fail(gen, verdict, launcher_code=None)
            elif gen.failure_seen is None:
                gen.failure_seen = now
            time.sleep(TICK)

    def _fail(self, gen: Generation, verdict: Verdict, launcher_code: int | None) -> tuple[str, int]:
        self.sm.move(JobState.CAPTURING, self.clock())
        if verdict.action is Action.WAIT:  # the launcher failed and no rank said why
            verdict = Verdict(Label.OTHER_CRASH, Action.RESTART, reason=f"launcher exited with {launcher_code}",
                              step=verdict.step)
        ctx, bundle_dir = self._capture(gen, verdict)
        verdict = self._culprit_from_stacks(verdict, bundle_dir)
        self._emit_verdict(gen, verdict)
        self._emit_incident(gen, verdict, ctx)
        self.sm.move(JobState.STOPPING, self.clock())
        result = self.launcher.stop(self.cfg.stop_timeout)
        log.info("job stopped (%s, %.1fs)", result.rung, result.seconds)
        self.events.emit("stopped", gen.number, rung=result.rung, seconds=round(result.seconds, 3),
                         survivors=result.survivors)
        self._upload(gen, ctx)
        progressed = 0.0
        if gen.first_progress is not None and gen.last_progress is not None:
            progressed = gen.last_progress - gen.first_progress
        outcome = self.policy.on_failure(verdict, progressed, launcher_code)
        if outcome.decision is Decision.RESTART:
            self.sm.move(JobState.RESTARTING, self.clock())
            log.info("%s: %s", verdict.label.value, outcome.reason)
            return ("restart", 0)
        log.error("not restarting: %s", outcome.reason)
        self.events.emit("gave_up", gen.number, reason=outcome.reason, label=verdict.label.value)
        return ("give_up", outcome.exit_code)


def run_supervised(config: WatchConfig, make_launcher: Callable[[str], Launcher]) -> int:
    """Entry point for ``neuron-watch torchrun``: set up, run, and always clean up."""
    env = os.environ
    job_id = config.job_id or make_job_id(env)
    run_dir = os.path.abspath(config.run_dir or os.path.join("neuron-watch-runs", job_id))
    node = env.get("NEURON_WATCH_NODE") or socket.gethostname().split(".")[0]
    marker = f"{job_id}-{secrets.token_hex(4)}"
    launcher = make_launcher(marker)

    rank_env = dict(env)
    plan_lines: list[str] = []
    if not config.no_neuron_env:
        plan = plan_environment(
            env,
            host_facts(),
            core_dump_dir=os.path.join(run_dir, "core-dumps"),
            s3_core_dump_prefix=(config.artifacts.rstrip("/") + f"/{job_id}/core-dumps")
            if config.artifacts and config.artifacts.startswith("s3://")
            else None,
            ndet_dir=os.path.join(run_dir, "ndet"),
        )
        rank_env.update(plan.to_set())
        plan_lines = plan.describe()
    if "PYTHONUNBUFFERED" not in env:
        rank_env["PYTHONUNBUFFERED"] = "1"
        plan_lines.append("set          PYTHONUNBUFFERED=1  # rank output reaches the watchdog as it is printed")
    rank_env.update({"NEURON_WATCH_RUN_DIR": run_dir, MARKER_ENV: marker})

    if config.dry_run:
        print("neuron-watch --dry-run: environment added for the ranks:")
        for line in plan_lines:
            print(f"  {line}")
        print("  set          NEURON_WATCH_CHECKPOINT, NEURON_WATCH_RESTART_COUNT  # per generation")
        print("command:")
        print("  " + shlex.join(launcher.command(os.path.join(run_dir, "gen-0"), "")))
        launcher.describe(os.path.join(run_dir, "gen-0"))  # lets torchrun's parser reject bad arguments
        return 0

    os.makedirs(run_dir, exist_ok=True)
    print(f"neuron-watch {__version__}: job {job_id} on {node}, run dir {run_dir}", file=sys.stderr)
    for line in plan_lines:
        print(f"neuron-watch:   {line}", file=sys.stderr)
    default_knowledge_base(config.progress_regex)  # a bad table or regex fails here, before anything starts
    mqtt_target = parse_mqtt_url(config.mqtt) if config.mqtt else None  # a bad URL exits 2 before anything starts
    storage = _artifact_storage(config, run_dir)
    become_subreaper()
    events = EventLog(os.path.join(run_dir, "events.jsonl"))
    if mqtt_target is not None:
        events.sinks.append(MqttSink(mqtt_target, job_id))
    sup = Supervisor(config, launcher, job_id, run_dir, node, marker, rank_env, events)
    sup.storage = storage
    guardian, guardian_fd = start_guardian(marker, min(config.stop_timeout, 5.0))
    old = {s: signal.signal(s, sup._on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        code = sup.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        launcher.stop(config.stop_timeout)
        events.close()
        release(guardian, guardian_fd)
    print(f"neuron-watch: job {job_id} finished with exit code {code}; events in {events.path}", file=sys.stderr)
    return code


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


def _artifact_storage(config: WatchConfig, run_dir: str) -> Storage | None:
    """Where bundles are uploaded; None when they stay where they are captured (the default)."""
    if not config.artifacts:
        return None
    if not config.artifacts.startswith("s3://") and os.path.abspath(config.artifacts) == os.path.join(
        run_dir, "incidents"
    ):
        return None
    return open_storage(config.artifacts, os.environ)


def events_path(run_dir: str) -> str:
    return os.path.join(run_dir, "events.jsonl")


_ = ExitCode  # re-exported for callers that map outcomes
