"""A node's generations: what the agent's parts share, the launch, the job's shape, the checkpoints.

:class:`NodeContext` is what every part of a node agent reads (configuration, launcher, the node's
name and place, clocks); :class:`Generations` launches generation G from checkpoint C and owns
the current :class:`NodeGeneration` (its ranks, their streams, its exit) and the job's shape as the
launcher's own parser reads it; :class:`NodeCheckpoints` reads ``--checkpoint-dir``.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_watch.config import WatchConfig
from neuron_watch.errors import LauncherArgsError
from neuron_watch.iofaults import AppendFile, IOHealth
from neuron_watch.launchers.base import Launcher, LaunchInfo
from neuron_watch.node.rank_probe import RankProbe, make_probe_root, probe_env, remove_probe_dir
from neuron_watch.node.tail import RankStreams
from neuron_watch.recovery.checkpoint_scan import find_checkpoint
from neuron_watch.recovery.checkpoints import Detection

log = logging.getLogger("neuron_watch")


@dataclass
class NodeContext:
    """What every part of one node's agent shares. ``node``, ``place`` and ``job_id`` change once,
    when the job's shape tells them (files of generation 0 opened before keep their names)."""

    cfg: WatchConfig
    launcher: Launcher
    job_id: str
    node: str
    place: int
    run_dir: str
    rank_env: dict[str, str]
    health: IOHealth
    echo: Callable[[str], None] | None = None
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


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
    #: ranks whose exit this node has reported (the launcher's failure report, or a clean exit read from
    #: the rank's own record: Observer._clean_exits), so that each is reported once
    exits_told: set[int] = field(default_factory=set)
    #: the compilers of the newest sample, (rank, pid, cpu seconds, mono): a message sent between
    #: two samples carries them again, as the coordinator reads every such message as the whole set
    compilers_seen: list[tuple[int, int, float, float]] = field(default_factory=list)
    #: we are stopping the launcher: what it prints from now on (torchrun's SignalException
    #: traceback, twice chained) is its teardown, not the job's crash: launcher log only
    stopped_by_us: str = ""


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


class NodeCheckpoints:
    """What ``--checkpoint-dir`` holds as this node sees it, and the newest complete one seen so far."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.newest: str | None = None  # the newest complete checkpoint seen so far

    def find(self) -> Detection | None:
        """What --checkpoint-dir holds (None without one): conventions, the newest complete checkpoint."""
        cfg, health = self.ctx.cfg, self.ctx.health
        if not cfg.checkpoint_dir:
            return None
        found = find_checkpoint(cfg.checkpoint_dir, cfg.checkpoint_glob, cfg.checkpoint_marker)
        if found.error is not None:
            health.failed("read the checkpoint directory", cfg.checkpoint_dir, found.error)
        else:
            health.ok(cfg.checkpoint_dir)
        return found

    def newest_complete(self, launched_from: str) -> str:
        """The newest complete checkpoint this node sees ('' if none). When --checkpoint-dir cannot be
        read now (ESTALE/EIO on a network file system, a symlink loop), the newest one seen before
        (else ``launched_from``): a restart must not silently start from scratch over a transient fault."""
        found = self.find()
        if found is not None and found.error is not None:
            known = self.newest or launched_from
            log.warning("cannot read %s (%s): the newest complete checkpoint seen before is %s", found.directory,
                        found.error, known or "none")
            return known
        chosen = "" if found is None or found.chosen is None else found.chosen.path
        if chosen:
            self.newest = chosen
        return chosen

    def say(self, generation: int) -> None:
        """At start, say what --checkpoint-dir holds; at every launch, warn when nothing in it is complete."""
        found = self.find()
        if found is None:
            return
        warning = found.warning()
        if warning is not None:
            log.warning("generation %d: %s", generation, warning)
        elif generation == 0:
            log.info("%s", found.summary())


class Generations:
    """Launches this node's generations and owns the current one, and the job's shape."""

    def __init__(self, ctx: NodeContext, checkpoints: NodeCheckpoints) -> None:
        self.ctx = ctx
        self.checkpoints = checkpoints
        self.gen: NodeGeneration | None = None
        self._described_root: str | None = None
        self._describe: Callable[[], LaunchInfo | None] | None = None  # the shape, being read
        self.info: LaunchInfo | None = None
        #: the launcher refused its own arguments (its shape reader said so): a configuration error
        self.refused: LauncherArgsError | None = None
        # The ranks' flight recorders, read from a thread (a rank's server may be slow to answer).
        self.probe = None if ctx.cfg.no_rank_probe else RankProbe()
        self._probe_root: str | None = None

    def launch(self, generation: int, checkpoint: str, progress_mark: int) -> NodeGeneration:
        """Start generation ``generation`` from ``checkpoint`` (``progress_mark``: the link's progress
        count now, from which this generation's own progress counts)."""
        ctx, launcher = self.ctx, self.ctx.launcher
        if self.gen is not None:  # the previous generation was stopped and drained: release its files
            self.gen.streams.close()
            self.gen.launcher_log.close()
        self.checkpoints.say(generation)
        gen_dir = self._gen_dir(generation)
        env = dict(ctx.rank_env)
        env.update({"NEURON_WATCH_CHECKPOINT": checkpoint, "NEURON_WATCH_RESTART_COUNT": str(generation),
                    "NEURON_WATCH_GENERATION": str(generation)})
        probe_dir = None
        if self.probe is not None:
            probe_dir = self._probe_dir(generation)
            env.update(probe_env(env, probe_dir))
        if generation == 0:
            log.info("liveness: %s", self.liveness_plan())
        streams = RankStreams(ctx.node, gen_dir, ctx.echo, health=ctx.health)
        # Nodes may share a run dir (a shared home, /fsx): everything per node carries its name.
        log_file = AppendFile(os.path.join(gen_dir, f"launcher-{ctx.node}.log"), ctx.health)
        self.gen = NodeGeneration(generation, checkpoint, gen_dir, streams, log_file, started=ctx.clock(), env=env,
                                  progress_mark=progress_mark, probe_dir=probe_dir)
        command_file = os.path.join(gen_dir, f"command-{ctx.node}.json")
        try:
            with open(command_file, "w", encoding="utf-8") as f:
                json.dump({"argv": launcher.command(gen_dir, checkpoint), "checkpoint": checkpoint}, f)
        except OSError as exc:  # a record for the operator, never a reason not to launch
            ctx.health.failed("write", command_file, exc)
        launcher.start(gen_dir, checkpoint, env)
        if self.info is None and self._describe is None:
            # The job's shape does not change between generations: read once, in the background
            # (torchrun's own parser takes seconds under load; rank output and exits are watched meanwhile).
            self._described_root = launcher.log_root(gen_dir)
            try:
                self._describe = launcher.describe_later(gen_dir)
            except Exception as exc:  # the launcher itself reports a bad argument; keep watching
                self._shape_unknown(exc)
        if self.info is None:  # until the shape is known: our own --log-dir, ranks from the workers' RANK
            streams.set_log_root(launcher.log_root(gen_dir))
            streams.rank_offset = None
        else:
            self._apply_shape(gen_dir)
        return self.gen

    def _gen_dir(self, generation: int) -> str:
        """``<run-dir>/gen-<G>``; when the run dir refuses it (turned read-only, full, gone), a directory
        under the system's temp dir instead: the restart goes on, the fault is reported."""
        ctx = self.ctx
        gen_dir = os.path.join(ctx.run_dir, f"gen-{generation}")
        try:
            os.makedirs(gen_dir, exist_ok=True)
            return gen_dir
        except OSError as exc:
            ctx.health.failed("create", gen_dir, exc)
        fallback = os.path.join(tempfile.gettempdir(), f"neuron-watch-{ctx.job_id}-{ctx.node}", f"gen-{generation}")
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

    @property
    def shape_pending(self) -> bool:
        """The job's shape is still being read in the background (nothing wakes the loop when it is known)."""
        return self.info is None and self._describe is not None

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
        streams.set_log_root(self.ctx.launcher.log_root(gen_dir) if ours else str(self.info.log_dir))
        if self.info.rank_offset is not None or streams.rank_offset is None:
            streams.rank_offset = self.info.rank_offset  # None: learned from the workers' RANK (the observer)

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

    def close(self) -> None:
        """Release the probe and the current generation's files."""
        if self.probe is not None:
            self.probe.close()
            remove_probe_dir(self._probe_root)
        if self.gen is not None:
            self.gen.streams.close()
            self.gen.launcher_log.close()
