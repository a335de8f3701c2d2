"""The metrics mapping (``neuron_watch.outputs.metrics``): events and status documents in, metric values out,
at a fixed ``now``; and its conversion to ``prometheus_client`` text (no server, no socket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector, CollectorRegistry

from neuron_watch.events import iso_utc
from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.metrics import (
    FINAL_SCRAPE_SLACK,
    PREFIX,
    SCRAPERS_KEPT,
    Family,
    JobMetrics,
    Missed,
    Scrapers,
    badput_seconds,
    fold_ranks,
)
from neuron_watch.outputs.metrics_http import to_prometheus
from neuron_watch.outputs.status import RANK_STATES
from tests.unit.test_layering import FORBIDDEN, PURE, WATCHDOG, _imports

T0 = 1_800_000_000.0


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


def doc(at: float, generation: int, steps: list[int | None], states: list[str], *, state: str = "running",
        label: str | None = "healthy", last_progress: float | None = None, **extra: Any) -> dict[str, Any]:
    ranks = [{"node": "n0", "rank": i, "state": s, "last_step": st, "last_line_age": 0.5, "compile_seconds": 0.0}
             for i, (st, s) in enumerate(zip(steps, states, strict=True))]
    return {"job_id": "j", "generation": generation, "restarts": generation, "state": state, "label": label,
            "updated": iso_utc(T0 + at), "updated_unix": T0 + at, "hang_timeout": 8.0, "hang_timeout_kind": "fixed",
            "last_progress": None if last_progress is None else iso_utc(T0 + last_progress),
            "last_step": max((s for s in steps if s is not None), default=None),
            "nodes": {"n0": {"state": "connected"}}, "ranks": ranks,
            "watchdog_io": {"degraded": {}, "faults": 0, "paths": [], "lost_lines": 0, "lost_bytes": 0}, **extra}


def by_name(families: list[Family]) -> dict[str, Family]:
    return {f.name: f for f in families}


def hang_restart_finish() -> tuple[JobMetrics, list[dict[str, Any]]]:
    """A job whose generation 0 hangs at step 8 (rank 2), is restarted from step_5 and finishes."""
    m = JobMetrics("job-7", RANK_STATES)
    events = [
        ev(0, "job_started", 0),
        ev(0.1, "recovery_phase", 0, phase="running", previous="starting"),
        ev(10, "progress", 0, step=1),
        ev(30, "verdict", 0, label="collective_hang", action="restart", culprit={"node": "n0", "rank": 2}),
        ev(30.1, "recovery_phase", 0, phase="capturing", previous="running"),
        ev(33, "incident", 0, incident=1, label="collective_hang", culprit={"node": "n0", "rank": 2}),
        ev(33.1, "recovery_phase", 0, phase="stopping", previous="capturing"),
        ev(35, "recovery_phase", 0, phase="restarting", previous="stopping"),
        ev(35.5, "restart", 1, checkpoint="/ckpt/step_5", restarts=1),
        ev(35.6, "recovery_phase", 1, phase="starting", previous="restarting"),
    ]
    for e in events:
        m.event(e)
    return m, events


def test_a_hang_and_restart_count_by_the_hangs_label_and_every_state_entered_is_counted() -> None:
    m, _ = hang_restart_finish()
    f = by_name(m.families(T0 + 40))
    restarts = f[PREFIX + "restarts_total"]
    assert {s.values[0]: s.value for s in restarts.samples if s.value} == {"collective_hang": 1}
    # every label has its series from the start, at 0: PromQL's increase() sees the first restart
    assert restarts.value("oom") == 0 and restarts.value("hardware_error") == 0
    assert f[PREFIX + "incidents_total"].value("collective_hang") == 1
    assert f[PREFIX + "verdicts_total"].value("collective_hang") == 1
    entries = f[PREFIX + "job_state_entries_total"]
    assert {s.values[0]: s.value for s in entries.samples} == {
        "starting": 2, "running": 1, "capturing": 1, "stopping": 1, "restarting": 1,
        "finished": 0, "failed": 0, "interrupted": 0}
    assert f[PREFIX + "generation"].value() == 1
    state = f[PREFIX + "job_state"]
    assert [s.values[0] for s in state.samples if s.value] == ["starting"]
    assert {s.values[0] for s in state.samples} >= {"running", "restarting", "finished", "failed"}
    assert f[PREFIX + "culprit_info"].samples[0].values == ("n0", "2", "collective_hang")
    assert [s.values[0] for s in f[PREFIX + "verdict"].samples if s.value] == ["collective_hang"]


def test_a_second_failure_of_another_kind_is_its_own_series() -> None:
    m, _ = hang_restart_finish()
    for e in (ev(50, "verdict", 1, label="oom", action="restart", culprit=None),
              ev(52, "incident", 1, incident=2, label="oom", culprit=None),
              ev(55, "restart", 2, checkpoint=None)):
        m.event(e)
    f = by_name(m.families(T0 + 60))[PREFIX + "restarts_total"]
    assert (f.value("collective_hang"), f.value("oom")) == (1, 1)


def test_status_documents_give_steps_rate_progress_age_timeout_and_ranks_by_state() -> None:
    m = JobMetrics("j", RANK_STATES)
    m.status(doc(100, 0, [10, 10, 9, 10], ["progressing"] * 4, last_progress=99.5))
    m.status(doc(110, 0, [30, 30, 30, 29], ["progressing", "progressing", "silent", "compiling"],
                 last_progress=109.0))
    f = by_name(m.families(T0 + 115))
    assert f[PREFIX + "last_step"].value() == 30
    assert f[PREFIX + "steps_per_second"].value() == pytest.approx(2.0)  # 20 steps in 10 s
    assert f[PREFIX + "last_progress_age_seconds"].value() == pytest.approx(6.0)
    assert f[PREFIX + "last_progress_timestamp_seconds"].value() == pytest.approx(T0 + 109.0)
    assert f[PREFIX + "hang_timeout_seconds"].value() == 8.0
    assert [s.values[0] for s in f[PREFIX + "hang_timeout_kind"].samples if s.value] == ["fixed"]
    ranks = f[PREFIX + "ranks"]
    assert (ranks.value("progressing"), ranks.value("silent"), ranks.value("compiling")) == (2, 1, 1)
    assert ranks.value("waiting") == 0 and ranks.value("exited") == 0  # every state has its series
    assert f[PREFIX + "status_age_seconds"].value() == pytest.approx(5.0)
    assert (f[PREFIX + "nodes"].value("observed"), f[PREFIX + "nodes"].value("unobserved")) == (1, 0)


def test_the_rate_restarts_with_a_generation_and_progress_age_keeps_the_jobs_last_progress() -> None:
    m = JobMetrics("j", RANK_STATES)
    m.status(doc(100, 0, [40], ["progressing"], last_progress=100))
    m.status(doc(110, 0, [50], ["progressing"], last_progress=110))
    # generation 1 resumes from step 5: no progress of its own yet (a new judge)
    m.status(doc(130, 1, [None], ["starting"], state="starting", last_progress=None))
    f = by_name(m.families(T0 + 131))
    assert f[PREFIX + "steps_per_second"].value() is None  # no two samples of generation 1
    assert f[PREFIX + "last_progress_age_seconds"].value() == pytest.approx(21.0)
    assert f[PREFIX + "last_step"].value() == 50  # the newest the job reached, not forgotten
    m.status(doc(140, 1, [6], ["progressing"], last_progress=139))
    m.status(doc(150, 1, [16], ["progressing"], last_progress=149))
    f = by_name(m.families(T0 + 150))
    assert f[PREFIX + "last_step"].value() == 16  # the step continues after the restart
    assert f[PREFIX + "steps_per_second"].value() == pytest.approx(1.0)


def test_save_seconds_and_compile_seconds_and_unknown_rank_states() -> None:
    m = JobMetrics("j", RANK_STATES)
    m.status(doc(0, 0, [5, 5], ["progressing", "progressing"]))
    m.status(doc(1, 0, [5, 5], ["saving", "waiting"]))
    m.status(doc(4, 0, [5, 5], ["saving", "waiting"]))
    f = by_name(m.families(T0 + 4))
    assert f[PREFIX + "save_seconds"].value() == pytest.approx(3.0)
    m.status(doc(6, 0, [6, 6], ["progressing", "some_new_state"]))
    f = by_name(m.families(T0 + 6))
    assert f[PREFIX + "save_seconds"].value() == 0.0
    assert f[PREFIX + "save_seconds_total"].value() == pytest.approx(3.0)
    assert f[PREFIX + "ranks"].value("some_new_state") == 1  # shown, not dropped
    d = doc(7, 0, [7], ["compiling"])
    d["ranks"][0]["compile_seconds"] = 42.5
    m.status(d)
    assert by_name(m.families(T0 + 7))[PREFIX + "compile_seconds"].value() == 42.5


def test_losses_and_the_watchdogs_own_faults_are_counted() -> None:
    m = JobMetrics("j", RANK_STATES)
    m.event(ev(1, "agent_dropped", 0, node="a", lines=10, messages=1))
    m.event(ev(2, "agent_dropped", 0, node="a", lines=25, messages=2))  # a running total per node
    m.event(ev(3, "agent_dropped", 0, node="b", lines=4, messages=1))
    m.event(ev(4, "warning", 0, kind="console_dropped", lines=7, message="..."))
    m.event(ev(5, "lines_truncated", 0, node="a", lines=3, limit_bytes=1))
    m.status(doc(6, 0, [1], ["progressing"], watchdog_io={"degraded": {"/x": "ENOSPC"}, "faults": 5,
                                                           "lost_lines": 11, "lost_bytes": 900},
                 nodes={"a": {"state": "connected"}, "b": {"state": "unobserved"}}))
    f = by_name(m.families(T0 + 6))
    dropped = f[PREFIX + "lines_dropped_total"]
    assert (dropped.value("agent"), dropped.value("console"), dropped.value("disk")) == (29, 7, 11)
    assert f[PREFIX + "lines_truncated_total"].value() == 3
    assert f[PREFIX + "watchdog_io_faults_total"].value() == 5
    assert f[PREFIX + "watchdog_degraded_paths"].value() == 1
    assert (f[PREFIX + "nodes"].value("observed"), f[PREFIX + "nodes"].value("unobserved")) == (1, 1)


def test_goodput_and_badput_by_cause_come_from_the_goodput_figures() -> None:
    m, events = hang_restart_finish()
    events += [ev(60, "progress", 1, step=6), ev(90, "job_finished", 1, exit_code=0, state="finished", restarts=1,
                                                  last_progress=iso_utc(T0 + 90), last_step=20)]
    figures = compute_goodput(events)
    m.event(events[-1])
    m.set_goodput(figures)
    f = by_name(m.families(T0 + 90))
    assert f[PREFIX + "goodput_effective_ratio"].value() == figures["effective_ratio"]
    assert f[PREFIX + "goodput_useful_ratio"].value() == figures["useful_ratio"]
    bad = badput_seconds(figures)
    assert bad["startup"] == pytest.approx(10.0)  # job start -> first progress
    assert bad["evidence"] == pytest.approx(3.0)  # verdict at 30 -> incident at 33
    assert bad["relaunch"] == pytest.approx(27.0)  # incident at 33 -> generation 1's first progress at 60
    assert f[PREFIX + "badput_seconds"].value("relaunch") == pytest.approx(27.0)
    assert [s.values[0] for s in f[PREFIX + "job_state"].samples if s.value] == ["finished"]
    assert f[PREFIX + "job_exit_code"].value() == 0


def test_nothing_known_yet_is_absent_not_zero() -> None:
    f = by_name(JobMetrics("j", RANK_STATES).families(T0))
    for name in ("last_step", "steps_per_second", "last_progress_age_seconds", "status_age_seconds",
                 "goodput_effective_ratio", "job_exit_code", "hang_timeout_seconds", "hang_timeout_kind",
                 "culprit_info"):
        assert f[PREFIX + name].samples == (), name


class _Fixed(Collector):
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Any:
        return [to_prometheus(f) for f in self.families]


def test_the_families_render_in_both_text_formats_with_conventional_names() -> None:
    m, _ = hang_restart_finish()
    m.status(doc(40, 1, [6], ["progressing"], state="running", last_progress=39))
    registry = CollectorRegistry()
    registry.register(_Fixed(m.families(T0 + 41)))
    text = generate_latest(registry).decode()
    assert 'neuron_watch_restarts_total{label="collective_hang"} 1.0' in text
    assert 'neuron_watch_culprit_info{label="collective_hang",node="n0",rank="2"} 1.0' in text
    assert 'neuron_watch_job_state{neuron_watch_job_state="running"} 1.0' in text
    assert 'neuron_watch_ranks{state="progressing"} 1.0' in text
    om = generate_openmetrics(registry).decode()
    assert "# TYPE neuron_watch_job_state stateset" in om and "# TYPE neuron_watch_culprit info" in om
    assert om.rstrip().endswith("# EOF")
    for f in m.families(T0 + 41):
        assert f.name.startswith(PREFIX) and (f.kind != "counter" or f.name.endswith("_total"))
        assert "rank" not in f.labels or f.kind == "info"  # no per-rank series except the culprit's one


def test_the_mapping_is_pure() -> None:
    imports = _imports(WATCHDOG / "outputs" / "metrics.py")
    assert not sorted(n for n in imports if n.split(".")[0] in FORBIDDEN)
    siblings = {n.removeprefix("neuron_watch.") for n in imports if n.startswith("neuron_watch.")}
    assert siblings <= set(PURE), siblings - set(PURE)
    assert "prometheus_client" not in {n.split(".")[0] for n in imports}


def test_docs_name_every_metric() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    m, _ = hang_restart_finish()
    missing = [f.name for f in m.families(T0) if f"`{f.name}`" not in readme]
    assert not missing, f"README's metrics table lacks {missing}"


def test_ranks_are_counted_from_the_newest_document_only() -> None:
    m = JobMetrics("j", RANK_STATES)
    m.status(doc(1, 0, [1, 1], ["progressing", "progressing"]))
    old = m.pending_ranks()
    assert old is not None and len(old) == 2
    m.status(doc(2, 0, [1, 1], ["silent", "silent"]))
    m.set_rank_figures(old, fold_ranks(old))  # folded outside the lock while a newer document came
    ranks = by_name(m.families(T0 + 2))[PREFIX + "ranks"]
    assert (ranks.value("silent"), ranks.value("progressing")) == (2, 0)
    assert m.pending_ranks() is None  # folded once per document


# -- the end: the final values fetched once by every scraper that has been scraping --------------------------

PROM, CURL = "10.0.0.5 Prometheus/2.45.3", "10.0.0.9 curl/7.88.1"


def scraped_every(book: Scrapers, who: str, interval: float, times: int, first: float = 0.0) -> float:
    """``times`` scrapes by ``who``, ``interval`` apart from ``first``; returns the last's start."""
    for i in range(times):
        book.scraped(who, first + i * interval)
    return first + (times - 1) * interval


def test_the_end_waits_for_a_regular_scraper_until_it_has_fetched_the_final_values() -> None:
    book = Scrapers()
    last = scraped_every(book, PROM, 15.0, 4)  # 0, 15, 30, 45
    book.scraped(CURL, 20.0)  # one scrape: a person, not a scraper to wait for
    book.close(50.0, cap=30.0)
    assert book.interval(PROM) == 15.0 and book.interval(CURL) is None
    # two of its intervals and the slack after its last scrape, at most the cap from the close
    assert book.wait(50.0) == min(last + 2 * 15.0 + FINAL_SCRAPE_SLACK, 50.0 + 30.0) - 50.0
    book.scraped(PROM, 49.0)  # a scrape that began before the close served older values
    assert book.wait(55.0) > 0 and not book.served(PROM)
    book.scraped(PROM, 60.0)  # the next one serves the final values
    assert book.served(PROM) and book.wait(60.5) == 0 and book.missed() == []


def test_the_wait_is_capped_and_a_scraper_that_never_came_back_is_named() -> None:
    book = Scrapers()
    scraped_every(book, PROM, 60.0, 3)  # 0, 60, 120: due 120 + 121 = 241
    book.close(130.0, cap=30.0)
    assert book.wait(130.0) == 30.0 and book.wait(160.0) == 0
    assert book.missed() == [Missed(PROM, 60.0, 10.0)]


def test_no_wait_without_scrapers_for_a_scraper_gone_quiet_or_without_a_cap() -> None:
    assert Scrapers().wait(0.0) == 0  # nobody ever scraped
    book = Scrapers()
    scraped_every(book, PROM, 1.0, 5)  # 0..4: due 4 + 2 + 1 = 7
    book.close(8.0, cap=30.0)  # it missed two scrapes: gone
    assert book.wait(8.0) == 0 and book.missed() == []
    book = Scrapers()
    scraped_every(book, PROM, 1.0, 5)
    book.close(4.5, cap=0.0)  # --metrics-final-wait 0, or the job was stopped by a signal
    assert book.wait(4.5) == 0 and book.missed() == []


def test_the_interval_is_the_longest_recent_gap_and_scrapers_are_kept_bounded() -> None:
    book = Scrapers()
    for t in (0.0, 1.0, 4.0, 5.0, 6.0):  # one scrape came 2 s late under load
        book.scraped(PROM, t)
    assert book.interval(PROM) == 3.0
    for t in (7.0, 8.0, 9.0, 10.0):  # the late gap leaves the last SCRAPE_GAPS_KEPT gaps
        book.scraped(PROM, t)
    assert book.interval(PROM) == 1.0
    for i in range(SCRAPERS_KEPT + 5):  # a scanner with ever-new user agents
        scraped_every(book, f"10.0.0.66 scanner/{i}", 1.0, 2, first=20.0)
    book.close(22.0, cap=30.0)
    assert book.interval(PROM) is None  # the oldest was let go ...
    assert book.wait(22.0) == 20.0 + 1 + 2 + FINAL_SCRAPE_SLACK - 22.0  # ... the book kept SCRAPERS_KEPT
