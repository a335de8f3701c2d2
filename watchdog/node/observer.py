"""The node's observer: everything the agent sees of its generation, as one typed stream.

It drains the launcher's and the ranks' output (torchrun's failure summary names each failed
rank's exit), samples the process table (workers, compilers, the kernel's OOM kills), reads the
ranks' flight recorders, notices new complete checkpoints and the launcher's exit, and writes each
to its :class:`~neuron_watch.node.observations.ObservationSink`. It also keeps this node's own
signs of work for the lost-coordinator policy (:meth:`Observer.activity_ago`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable

from neuron_watch.events import LauncherExit, LogLine, NodeStatus, RankKey
from neuron_watch.node.generation import (
    Generations,
    NodeCheckpoints,
    NodeContext,
    NodeGeneration,
    compile_cache_dir,
    fresh_locks,
)
from neuron_watch.node.observations import (
    LinesCut,
    LinesLost,
    ObservationSink,
    ProcessesSeen,
    RanksExited,
    Reading,
    StatusSeen,
)
from neuron_watch.node.procs import ProcessSampler, cgroup_memory_events
from neuron_watch.node.rank_probe import read_rank, read_status
from neuron_watch.node.tail import UNATTRIBUTED
from neuron_watch.recovery.turns import chore_due
from neuron_watch.wire.protocol import WorkerActivity

log = logging.getLogger("neuron_watch")

SAMPLE_EVERY = 1.0  # seconds between process-table samples
LOCKS_EVERY = 5.0  # seconds between compile-cache lock scans
CHECKPOINT_SCAN_EVERY = 15.0  # seconds between looks for a new complete checkpoint (a liveness signal)
READ_EVERY = 0.05  # seconds between reads of the rank files until the agent sets the link's batch age

# torchrun's failure summary: "rank      : 1 (local_rank: 1)" then "exitcode  : 3 (pid: 1234)"
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


class Observer:
    """Reads what this node's generation shows and writes it to the sink ``out()`` returns."""

    def __init__(self, ctx: NodeContext, generations: Generations, checkpoints: NodeCheckpoints,
                 out: Callable[[], ObservationSink]) -> None:
        self.ctx = ctx
        self.generations = generations
        self.checkpoints = checkpoints
        self.out = out
        self.sampler = ProcessSampler()
        #: the place an elastic rendezvous gave this node in its first generation (the workers'
        #: GROUP_RANK); None until the workers tell it
        self.group_rank: int | None = None
        self.last_sample = -1e18
        self._last_locks = -1e18
        self._locks: list[str] = []
        self.cache_dir = compile_cache_dir(ctx.rank_env)
        self._oom_kills = cgroup_memory_events()  # the kernel's OOM kills in our cgroup so far
        self._last_checkpoint_scan = -1e18
        # This node's own signs of work (monotonic), for the lost-coordinator policy (lostlink.py).
        self.last_line_at: float | None = None
        self.last_compiler_at: float | None = None
        self._progress_seen = 0  # the link's progress-line count when last looked at
        self.last_progress_at: float | None = None
        self._skipped_told = 0  # flood lines skipped unread, already added to the link's drop count
        self._cut_told = (0, 0)  # over-long lines cut by the tail (lines, bytes), already added to the link's
        #: seconds between reads of the rank files (regular files: nothing wakes the loop when a rank
        #: writes to one): the link's batch age, which the agent keeps current (a line read sooner
        #: would wait in the batch for as long anyway)
        self.read_every = READ_EVERY
        self.last_read = -1e18

    def new_generation(self) -> None:
        """The new generation's streams count from zero, and are sampled at once."""
        self._skipped_told, self._cut_told = 0, (0, 0)
        self.last_sample = -1e18
        self.last_read = -1e18

    def drain(self, final: bool, to_eof: bool = False) -> None:
        """Launcher and rank output since the last call (``final`` or ``to_eof``: every rank file
        to its end, so that a rank's last lines reach the coordinator before its exit does)."""
        gen = self.generations.gen
        if gen is None:
            return
        ctx = self.ctx
        launcher = ctx.launcher
        now, wall = ctx.clock(), ctx.wall()
        for text in launcher.read_output(final):
            gen.launcher_log.write(text + "\n")
            if ctx.echo is not None and not gen.stopped_by_us:
                ctx.echo(f"[{launcher.name}] {text}")
            self._parse_launcher_line(gen, text, now, wall)
        gen.launcher_log.flush()
        if now - self.last_sample >= SAMPLE_EVERY or final:
            self.last_sample = now
            self._sample(gen, now, wall)
        if final or to_eof or chore_due(now, self.last_read, self.read_every) or gen.streams.behind:
            self.last_read = now
            self._drain_ranks(gen, final, to_eof or final)

    def next_due(self) -> float | None:
        """When the observer next has something to do by time (monotonic; None: no generation):
        the next read of the rank files (at once when a flood left one behind) or process sample."""
        gen = self.generations.gen
        if gen is None:
            return None
        if gen.streams.behind:
            return self.last_read
        return min(self.last_read + self.read_every, self.last_sample + SAMPLE_EVERY)

    def _drain_ranks(self, gen: NodeGeneration, final: bool = False, to_eof: bool = False) -> None:
        out = self.out()
        now, wall = self.ctx.clock(), self.ctx.wall()
        for ln in gen.streams.poll(now, wall, final, to_eof):
            out.observe(ln)
            self.last_line_at = now
        skipped = gen.streams.skipped_lines
        if skipped > self._skipped_told:
            # lines of a flood never read are lost lines of this node: they travel in its drop count
            # (before the link exists too, in order with what the node reports next)
            out.observe(LinesLost(skipped - self._skipped_told))
            self._skipped_told = skipped
        cut = gen.streams.cut_lines
        if cut > self._cut_told[0]:
            # lines cut to the tail's bound travel with the link's own cut lines (truncated_lines)
            cut_bytes = gen.streams.cut_bytes
            out.observe(LinesCut(cut - self._cut_told[0], cut_bytes - self._cut_told[1]))
            self._cut_told = (cut, cut_bytes)

    def _parse_launcher_line(self, gen: NodeGeneration, text: str, now: float, wall: float) -> None:
        if self.ctx.launcher.reports_end(text):
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
                self.out().observe(ProcessesSeen(tuple(gen.compilers_seen), now, wall, collectives=tuple(words)))
            gen.exits_told.add(rank)
            self.out().observe(RanksExited(((rank, code, now),), now, wall))

    def _sample(self, gen: NodeGeneration, now: float, wall: float) -> None:
        launcher = self.ctx.launcher
        pid = launcher.pid
        if pid is None or gen.exit_code is not None:
            return
        out = self.out()
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
            out.observe(StatusSeen(NodeStatus.FINISHING, now, wall, detail=f"ranks ended: {ended}"))
        if gen.finishing and workers and not {w.pid for w in workers} <= set(gen.worker_pids.values()):
            # New workers after some ended, the launcher still the same: torchrun restarted them itself
            # (an elastic job's members changed): the generation runs again, it is not ending.
            gen.finishing = False
            out.observe(StatusSeen(NodeStatus.LAUNCHED, now, wall, detail="torchrun restarted its workers"))
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
            self.last_compiler_at = now
        readings = self._read_probe(gen) + self._last_words(gen, ended_now)
        gen.compilers_seen = [(c.rank, c.pid, c.cpu_seconds, now) for c in compilers]
        # Sent even when empty: an absent compiler is how the coordinator learns a compile ended.
        out.observe(ProcessesSeen(tuple(gen.compilers_seen), now, wall, locks=tuple(self._locks), always=True,
                                  workers=tuple(sorted(gen.worker_pids.items())), collectives=tuple(readings),
                                  activity=tuple(WorkerActivity(w.rank, w.tree_cpu_seconds, w.state)
                                                 for w in workers)))
        self._clean_exits(gen, ended_now, now, wall)

    def _clean_exits(self, gen: NodeGeneration, ended: Iterable[int], now: float, wall: float) -> None:
        """Report, once, the ranks among ``ended`` (their process gone) whose own record says their
        interpreter finished normally with no uncaught exception (the rank bootstrap's ``exited``
        status): exit code 0 presumed (:class:`RanksExited` ``presumed``). torchrun's workers are its
        children, not ours, and it reports failed ranks only: without this, a rank that ended cleanly
        while others run is never known to have exited, and a teardown grace waits on it. A rank with
        no such record (killed by a signal, ``os._exit``, no torch.distributed, ``--no-rank-probe``) is
        left to the launcher's report. Its last lines first (its files to their end), then its exit."""
        if gen.probe_dir is None:
            return
        clean = []
        for rank in ended:
            if rank in gen.exits_told:
                continue
            status = read_status(gen.probe_dir, rank)
            if status.get("state") == "exited" and not status.get("uncaught"):
                gen.exits_told.add(rank)
                clean.append((rank, 0, now))
        if clean:
            self._drain_ranks(gen, to_eof=True)
            self.out().observe(RanksExited(tuple(clean), now, wall, presumed=True))

    def _last_words(self, gen: NodeGeneration, ranks: Iterable[int]) -> list[Reading]:
        """The Flight Recorder each of ``ranks`` left as it exited (the bootstrap's ``r<RANK>.fr.json``),
        once per rank: read at once, not at the poller's next turn, so that it reaches the judge
        before the rank's exit does (a rank that ran a different collective from its peers is
        told by it; the job breaks within milliseconds of such a divergence)."""
        if self.generations.probe is None or not gen.probe_dir:
            return []
        out: list[Reading] = []
        for rank in ranks:
            if rank in gen.last_words or read_status(gen.probe_dir, rank).get("state") != "exited":
                continue
            gen.last_words.add(rank)
            r = read_rank(gen.probe_dir, rank)
            if not r.problem:
                out.append((r.rank, r.groups, r.problem, r.mono))
        return out

    def _read_probe(self, gen: NodeGeneration) -> list[Reading]:
        """Hand the live ranks to the probe thread; take its new readings; log each rank's probe state
        when it changes (``flight recorder on``, or why not)."""
        probe = self.generations.probe
        if probe is None:
            return []
        probe.set_ranks(gen.probe_dir, gen.worker_pids)
        out: list[Reading] = []
        problems = False
        for r in probe.take():
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
        cfg = self.ctx.cfg
        # faster than a fixed hang timeout, or the sign would come too late to count
        every = min(CHECKPOINT_SCAN_EVERY, (cfg.hang_timeout or CHECKPOINT_SCAN_EVERY) / 3)
        if not cfg.checkpoint_dir or now - self._last_checkpoint_scan < every:
            return
        self._last_checkpoint_scan = now
        found = self.checkpoints.find()
        chosen = None if found is None else found.chosen
        if chosen is None:
            return
        known = self.checkpoints.newest if self.checkpoints.newest is not None else gen.checkpoint
        self.checkpoints.newest = chosen.path
        if chosen.path != known:
            step = "" if chosen.step is None else f" (step {chosen.step})"
            self.out().observe(LogLine(RankKey(self.ctx.node, UNATTRIBUTED),
                                       f"neuron-watch: a new complete checkpoint appeared: {chosen.path}{step}",
                                       now, wall, cfg.checkpoint_dir, 0))

    def _check_oom_kills(self, now: float, wall: float) -> None:
        """Tell the judge when the kernel's OOM killer killed in our cgroup: a rank killed by SIGKILL
        is labelled ``oom`` only with such evidence (the ranks live in the cgroup we were started in)."""
        seen = cgroup_memory_events()
        before = self._oom_kills
        if seen is None or before is None or seen[0] != before[0]:
            self._oom_kills = seen
            return
        if seen[1] > before[1]:
            self.out().observe(LogLine(RankKey(self.ctx.node, UNATTRIBUTED),
                                       f"neuron-watch: the kernel's OOM killer killed a process of "
                                       f"this node's job ({seen[0]}: oom_kill {before[1]} -> {seen[1]})",
                                       now, wall, seen[0], 0))
        self._oom_kills = seen

    def check_exit(self, gen: NodeGeneration, now: float, wall: float) -> None:
        """The launcher's own exit (or its report that the generation failed): its last output first,
        then, once, the node's status that carries the exit code, with the newest complete checkpoint."""
        if gen.exit_code is not None:
            return
        launcher = self.ctx.launcher
        code = launcher.poll()
        if code is None and gen.gave_up:
            # Judged now, not after the launcher's teardown (the stop that follows cuts it short).
            code = launcher.gave_up_code
        if code is not None:
            self.drain(final=True)
            gen.exit_code = code
            out = self.out()
            own = launcher.own_rank  # a task that is a rank: its exit is that rank's too
            if own is not None:
                out.observe(RanksExited(((own, code, self.ctx.clock()),), now, wall))
            else:  # the ranks that ended since the last sample (torchrun exits 0.1 s after its last worker)
                self._clean_exits(gen, sorted(set(gen.worker_pids) | set(gen.ended_pids)), now, wall)
            out.observe(StatusSeen(NodeStatus.FINISHED if code == 0 else NodeStatus.FAILED, now, wall,
                                   detail=f"exit code {code}",
                                   checkpoint=self.checkpoints.newest_complete(gen.checkpoint),
                                   report=LauncherExit(code)))

    def maybe_prewarm(self, gen: NodeGeneration, now: float) -> None:
        """Once the ranks have trained ``--prewarm-after`` seconds (start-up, which needs every core,
        is long over), get the next generation's launcher ready, so that a restart does not wait for it."""
        cfg = self.ctx.cfg
        if gen.trained_since is None and self.out().progress_lines > gen.progress_mark:
            gen.trained_since = now
        if (gen.prewarmed or gen.exit_code is not None or gen.trained_since is None or cfg.no_prewarm
                or now - gen.trained_since < cfg.prewarm_after):
            return
        gen.prewarmed = True
        self.ctx.launcher.prewarm(gen.env)

    def activity_ago(self, now: float) -> float | None:
        """Seconds since this node's ranks last showed work (None: no generation runs here).

        Work is a progress line (once the generation has shown one), any rank output before that
        (start-up, loading), or a live compiler process. What the lost-coordinator policy judges by.
        """
        gen = self.generations.gen
        if gen is None or gen.exit_code is not None:
            return None
        progress = self.out().progress_lines
        if progress > self._progress_seen:
            self._progress_seen = progress
            self.last_progress_at = now
        signs = [gen.started, self.last_compiler_at]
        progressed = self.last_progress_at is not None and self.last_progress_at >= gen.started
        signs.append(self.last_progress_at if progressed else self.last_line_at)
        return now - max(t for t in signs if t is not None)

    def rebase(self, gap: float) -> None:
        """Our loop was paused ``gap`` seconds: shift the clocks that measure silence."""
        if self.last_line_at is not None:
            self.last_line_at += gap
        if self.last_compiler_at is not None:
            self.last_compiler_at += gap
        if self.last_progress_at is not None:
            self.last_progress_at += gap


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
