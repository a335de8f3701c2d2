"""A rank whose process a signal stopped (SIGSTOP, a debugger, Ctrl-Z: state ``T`` in the node's
process readings) is ``stopped`` in status: the judge's state name, the status document (and a big
job's summary, where it is an outlier), the console's status line and the metrics' ``ranks`` series.
On a fake clock (``now`` is an argument). "stopped" is no job state (``events.JobState``): a job over
shows its own state on every rank that did not fail, as before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import JobState, LogLine, RankExit, RankKey
from neuron_watch.job.statusdoc import NodeState, status_document
from neuron_watch.outputs.console import StatusLine
from neuron_watch.outputs.metrics import PREFIX, JobMetrics
from neuron_watch.outputs.status import FINAL_JOB_STATES, RANK_STATES, USUAL_STATES, assess, summarise

KB = default_knowledge_base()
N = "vm"
R0, R1, R2 = RankKey(N, 0), RankKey(N, 1), RankKey(N, 2)
T0 = 1_800_000_000.0


def ln(key: RankKey, text: str, t: float) -> LogLine:
    return LogLine(key, text, t, T0 + t, f"rank-{key.rank}.log", int(t))


def training(ranks: int = 3, steps: int = 5) -> Judge:
    """``ranks`` ranks that print ``step n`` at t = n; their processes read at t = steps + 0.5."""
    j = Judge(KB, JudgeSettings(hang_timeout=6.0), start=0.0)
    keys = [RankKey(N, r) for r in range(ranks)]
    j.expect(keys, 0.0)
    for n in range(1, steps + 1):
        for k in keys:
            j.observe_line(ln(k, f"step {n} loss 1.25", n + 0.01 * k.rank))
    return j


def stop(j: Judge, key: RankKey, t: float, halted: bool = True) -> None:
    j.observe_worker_columns([key], [3.0], [halted], [t], t)


@dataclass
class View:
    """A node as the status document reads it (the coordinator's NodeView)."""

    state: NodeState = NodeState.CONNECTED
    status: str = "running"
    last_heard: float = T0
    worker_pids: dict[int, int] = field(default_factory=lambda: {0: 100, 1: 101, 2: 102})
    recorder: dict[int, str] = field(default_factory=dict)


def document(j: Judge, now: float, job_state: str = "running", live: bool = True) -> dict[str, Any]:
    return status_document(job_id="j", generation=0, restarts=0, state=job_state, live=live, label="healthy",
                           wall=T0 + now, now=now, ranks=list(j.rank_summaries(now)), hang_timeout=6.0,
                           hang_timeout_kind="fixed", progress={}, nodes={N: View()},  # type: ignore[dict-item]
                           watchdog_io={})


def states(doc: dict[str, Any]) -> dict[int, str]:
    return {r["rank"]: r["state"] for r in doc["ranks"]}


def test_a_stopped_rank_is_named_stopped_and_continued_it_is_what_it_was() -> None:
    j = training()
    assert j.ranks[R1].state_name(5.6, j.settings) == "progressing"
    stop(j, R1, 5.5)
    assert j.ranks[R1].state_name(5.6, j.settings) == "stopped"
    assert j.ranks[R0].state_name(5.6, j.settings) == "progressing"  # the others: what they do
    assert states(document(j, 5.6)) == {0: "progressing", 1: "stopped", 2: "progressing"}
    assert R1 in {st.key for st in j.take_touched()}  # a big job's status book refreshes it
    stop(j, R1, 6.5, halted=False)  # SIGCONT
    assert j.ranks[R1].state_name(6.6, j.settings) == "progressing"


def test_stopped_is_said_over_a_stale_wait_and_a_silence_but_not_over_an_exit_or_a_failure() -> None:
    j = training()
    j.observe_line(ln(R1, "2024-Jun-06 19:42:28.0596 1402:1481 WARN  NRT:nrt_exec_collectives "
                          "Timeout waiting for RX (waited 120 sec) - retrying", 5.2))
    assert j.ranks[R1].state_name(5.3, j.settings) == "waiting"
    stop(j, R1, 5.5)
    assert j.ranks[R1].state_name(5.6, j.settings) == "stopped"
    # long silent (no line for minutes): it is still the stop that says why
    assert j.ranks[R1].state_name(500.0, j.settings) == "stopped"
    # a rank that exited or failed is that, whatever the last reading said of its process
    stop(j, R2, 5.5)
    j.observe_exit(RankExit(R2, -9, 6.0))
    assert j.ranks[R2].state_name(6.1, j.settings) == "exited"
    j.observe_line(ln(R0, "RuntimeError: CUDA error: an illegal memory access was encountered", 5.7))
    stop(j, R0, 5.8)
    assert j.ranks[R0].state_name(5.9, j.settings) == "failed"


def test_stopped_is_a_rank_state_second_to_failed_not_a_usual_one_nor_a_job_state() -> None:
    assert RANK_STATES.index("stopped") == RANK_STATES.index("failed") + 1
    assert "stopped" not in USUAL_STATES and "stopped" not in FINAL_JOB_STATES
    assert "stopped" not in {s.value for s in JobState}  # no job state of that name to collide with
    j = training()
    stop(j, R1, 5.5)
    # a big job's summary lists it as an outlier, ahead of a silent rank
    big = summarise(document(j, 5.6), limit=1)
    assert big["ranks_by_state"] == {"progressing": 2, "stopped": 1}
    assert [(r["rank"], r["state"]) for r in big["ranks"]] == [(1, "stopped")]
    # `neuron-watch status` shows it while the job runs ...
    view = assess(document(j, 5.6), T0 + 6.0)
    assert [r["state"] for r in view["ranks"]] == ["progressing", "stopped", "progressing"]
    # ... and once the job is over, every rank that did not fail is what the job is
    over = document(j, 30.0, job_state="failed", live=False)
    assert set(states(over).values()) == {"failed"}
    done = assess(document(j, 30.0, job_state="interrupted", live=False), T0 + 31.0)
    assert [r["state"] for r in done["ranks"]] == ["interrupted"] * 3


def test_the_console_status_line_counts_stopped_ranks_only_when_there_are_some() -> None:
    line = StatusLine(None)  # type: ignore[arg-type]  # render only: nothing is written
    base = {"generation": 0, "state": "running", "label": "healthy", "updated_unix": 100.0}
    ranks = [{"last_step": 5, "last_line_age": 0.5, "state": "progressing"},
             {"last_step": 5, "last_line_age": 3.0, "state": "stopped"}]
    assert line.render({**base, "ranks": ranks}).endswith("| silent 0/2 ranks | stopped 1")
    assert line.render({**base, "ranks": ranks[:1]}).endswith("| silent 0/1 ranks")
    # a big job's document lists its outliers only: the count comes from ranks_by_state
    big = {**base, "ranks": ranks[1:], "ranks_total": 4096, "ranks_by_state": {"progressing": 4093, "stopped": 3}}
    assert line.render(big).endswith("| silent 0/4096 ranks | stopped 3")


def test_the_metrics_ranks_series_counts_stopped_ranks() -> None:
    j = training()
    stop(j, R1, 5.5)
    m = JobMetrics("j", RANK_STATES)
    m.status(document(j, 5.6))
    ranks = next(f for f in m.families(T0 + 6.0) if f.name == PREFIX + "ranks")
    assert (ranks.value("stopped"), ranks.value("progressing")) == (1, 2)
    stop(j, R1, 6.5, halted=False)
    m.status(document(j, 6.6))
    ranks = next(f for f in m.families(T0 + 7.0) if f.name == PREFIX + "ranks")
    assert (ranks.value("stopped"), ranks.value("progressing")) == (0, 3)  # its series stays, at 0
