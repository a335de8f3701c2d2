"""What the job side uses of its judge, as a type: the coordinator holds one, the job report reads it.

Its own module so that both import it from below (neither imports the other for it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.flight_recorder import GroupProgress
from neuron_watch.diagnosis.judge import BlindWarning, FirstCollectiveStall, LauncherExits, RecompileNote
from neuron_watch.events import (
    BatchColumns,
    CompilerSample,
    Evidence,
    LogLine,
    RankExit,
    RankKey,
    Verdict,
    WorkerSample,
)


class JudgeLike(Protocol):
    """Everything the coordinator uses of its judge (:class:`neuron_watch.diagnosis.judge.Judge` is the one
    implementation; a test's stand-in subclasses it). What the judge is fed, what it answers, and
    what it keeps for the job's events and status."""

    launchers: LauncherExits | None  # where it reads the launchers' exits (the coordinator's node views)

    @property
    def kb(self) -> KnowledgeBase | None: ...  # its table: an agent's batch classified with the same one is taken as is
    @property
    def max_step(self) -> int | None: ...  # the newest step any rank reached
    @property
    def max_step_wall(self) -> float | None: ...  # wall time of the line that first showed it
    @property
    def last_progress_wall(self) -> float | None: ...  # wall time of the newest progress line (steps or not)
    @property
    def step_times(self) -> list[float]: ...  # monotonic time each new job-level step was first seen
    @property
    def unexplained(self) -> list[Evidence]: ...  # error lines no signature explains (the first of a generation)
    @property
    def recompile_notes(self) -> list[RecompileNote]: ...
    @property
    def compile_reports(self) -> list[tuple[RankKey, int, float]]: ...  # (rank, compiles, seconds) as a compiler said

    def observe_lines(self, lines: Sequence[LogLine]) -> object: ...
    def observe_blocks(self, runs: Iterable[Sequence[LogLine]]) -> None: ...
    def observe_columns(self, batch: BatchColumns) -> None: ...
    def observe_compilers(self, samples: Sequence[CompilerSample], now: float, node: str | None = None) -> None: ...
    def observe_workers(self, samples: Sequence[WorkerSample], now: float) -> None: ...
    def observe_cache_locks(self, fresh_lock_paths: Iterable[str], now: float) -> None: ...
    def observe_collectives(self, key: RankKey, groups: Sequence[GroupProgress], now: float) -> bool: ...
    def observe_readings(self, keys: Sequence[RankKey], readings: Sequence[Sequence[GroupProgress]],
                         times: Sequence[float]) -> None: ...
    def observe_worker_columns(self, keys: Sequence[RankKey], tree_cpu: Sequence[float], stopped: Sequence[bool],
                               mono: Sequence[float], now: float) -> None: ...
    def observe_exit(self, ex: RankExit) -> None: ...
    def mark_unobserved(self, node: str, now: float) -> None: ...
    def mark_observed(self, node: str) -> None: ...
    def verdict(self, now: float, final: bool = False) -> Verdict: ...
    def blind(self, now: float) -> BlindWarning | None: ...
    def recompile_storms(self) -> list[tuple[RankKey, int, Evidence]]: ...
    def rank_summaries(self, now: float) -> list[dict[str, object]]: ...
    def timeout_in_force(self, now: float | None = None) -> tuple[float, str]: ...
    def first_collective_stall(self, now: float) -> FirstCollectiveStall | None: ...
