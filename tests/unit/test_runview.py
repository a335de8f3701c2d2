"""The HTML report's model and page, from a scripted run whose phases are known to the second, and
from a synthetic status of 2,048 nodes: the phases, the step curve, the incident and its bundle,
time by cause adding up to the wall time, the ranks by node; the page escapes what the run wrote."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from neuron_watch.events import iso_utc
from neuron_watch.outputs.goodput import compute_goodput
from neuron_watch.outputs.report_html import bundle_link, render
from neuron_watch.outputs.runview import LOST_CAUSE, Phase, PhaseKind, RunView, StepPoint, build_view, step_curve
from neuron_watch.outputs.status import RANK_STATES

T0 = 1_800_000_000.0  # a fixed wall clock origin; every time below is T0 + seconds


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


def hang_restart_finish(reason: str = "no rank progressed for 140s; n0/rank3 is 1 collective behind",
                        culprit_node: str = "n0", bundle: str = "/runs/r/incidents/incident-1") -> list[dict[str, Any]]:
    """Events in the order a real run writes them: compile until t=120, steps to 13 (checkpoint 10 at
    t=220, last progress t=250), recovery enters capture at t=390, the hang's verdict and incident at
    t=400/410 (its verdict is written when the incident is), stopped t=411, restart t=412 from
    step_10, compile until t=472, finish at t=600 on step 30."""
    return [
        ev(0, "job_started", 0, job_id="job-7"),
        ev(0.5, "verdict", 0, label="compiling", action="wait"),
        ev(120, "progress", 0, step=1),
        ev(220, "checkpoint", 0, step=10, path="ckpt/step_10"),
        ev(230, "progress", 0, step=11),
        ev(390, "recovery_phase", 0, phase="capturing", previous="running"),
        ev(400, "verdict", 0, label="collective_hang", action="restart", culprit={"node": culprit_node, "rank": 3},
           culprit_source="flight_recorder", reason=reason, advice="restart from the last checkpoint",
           last_progress=iso_utc(T0 + 250), last_step=13),
        ev(410, "incident", 0, incident=1, label="collective_hang", culprit={"node": culprit_node, "rank": 3},
           artifacts=bundle, capture_seconds=9.5, missing_items=1, missing={"ndet": 1}),
        ev(410.5, "upload", 0, node="n0", incident=1, uri="s3://bucket/job-7/incident-1/n0", ok=True),
        ev(411, "stopped", 0, node="n0", rung="sigterm"),
        ev(412, "restart", 1, checkpoint="/ckpt/step_10"),
        ev(412.5, "verdict", 1, label="compiling", action="wait"),
        ev(472, "progress", 1, step=11),
        ev(540, "checkpoint", 1, step=20),
        ev(600, "job_finished", 1, exit_code=0, restarts=1, state="finished", last_progress=iso_utc(T0 + 600),
           last_step=30),
    ]


def status(nodes: int, ranks_per_node: int, odd: dict[tuple[int, int], str] | None = None,
           usual: str = "progressing") -> dict[str, Any]:
    odd = odd or {}
    return {"job_id": "job-7", "generation": 1, "state": "running", "updated": "2027-01-15T08:10:00Z",
            "ranks": [{"node": f"node-{n}", "rank": n * ranks_per_node + r, "state": odd.get((n, r), usual)}
                      for n in range(nodes) for r in range(ranks_per_node)]}


def view_of(events: list[dict[str, Any]], st: dict[str, Any] | None = None) -> RunView:
    return build_view(events, compute_goodput(events), st, state_order=RANK_STATES, run_dir="/runs/r")


def spans(view: RunView, generation: int) -> list[tuple[str, float, float]]:
    g = next(g for g in view.generations if g.number == generation)
    return [(p.kind.value, round(p.start - T0, 3), round(p.end - T0, 3)) for p in g.phases]


def test_each_generation_is_cut_into_its_phases_at_the_times_the_events_give() -> None:
    view = view_of(hang_restart_finish())
    assert [g.number for g in view.generations] == [0, 1]
    assert spans(view, 0) == [("start-up", 0, 0.5), ("compiling", 0.5, 120), ("progressing", 120, 250),
                              ("hang", 250, 390), ("capture", 390, 410), ("stop", 410, 411), ("relaunch", 411, 412)]
    assert spans(view, 1) == [("start-up", 412, 412.5), ("compiling", 412.5, 472), ("progressing", 472, 600)]
    gen0, gen1 = view.generations
    assert (gen0.outcome, gen1.outcome) == ("collective_hang", "finished")
    assert (gen0.first_step, gen0.last_step, gen1.first_step, gen1.last_step) == (1, 13, 11, 30)
    assert gen1.resumed_from == "/ckpt/step_10" and [s for _t, s in gen0.checkpoints] == [10]


def test_the_step_curve_goes_on_after_the_restart_from_the_checkpoint() -> None:
    view = view_of(hang_restart_finish())
    by_gen = {g: [(round(p.time - T0), p.step) for p in view.steps if p.generation == g] for g in (0, 1)}
    assert by_gen[0] == [(120, 1), (230, 11), (250, 13)]
    assert by_gen[1] == [(472, 11), (600, 30)]
    curve = re.search(r'<polyline class="steps" data-generation="1" points="([^"]+)"', render(view))
    assert curve and len(curve.group(1).split()) == 2


def test_the_curve_holds_the_step_through_a_compile_between_two_samples() -> None:
    points = [StepPoint(T0, 0, 0), StepPoint(T0 + 100, 10, 0)]
    phases = [Phase(PhaseKind.PROGRESSING, T0, T0 + 20), Phase(PhaseKind.COMPILING, T0 + 20, T0 + 80),
              Phase(PhaseKind.PROGRESSING, T0 + 80, T0 + 100)]
    curve = [(round(t - T0), s) for t, s in step_curve(points, phases)]
    assert curve == [(0, 0.0), (20, 5.0), (80, 5.0), (100, 10.0)]
    # without a progressing phase between the samples: a straight line
    assert [(round(t - T0), s) for t, s in step_curve(points, phases[1:2])] == [(0, 0.0), (100, 10.0)]


def test_the_incident_has_its_verdict_culprit_reason_and_both_bundles() -> None:
    (inc,) = view_of(hang_restart_finish()).incidents
    assert (inc.number, inc.generation, inc.label, inc.action) == (1, 0, "collective_hang", "restart")
    assert (inc.culprit, inc.culprit_source) == ("n0 / rank 3", "flight_recorder")
    assert "1 collective behind" in inc.reason and inc.advice
    assert inc.bundles == ("/runs/r/incidents/incident-1", "s3://bucket/job-7/incident-1/n0")
    assert inc.missing == ("ndet",) and inc.capture_seconds == 9.5


def test_time_by_cause_adds_up_to_the_wall_time_and_takes_the_redone_work_off_goodput() -> None:
    view = view_of(hang_restart_finish())
    causes = {c.cause: c.seconds for c in view.causes}
    assert abs(sum(causes.values()) - 600.0) < 1e-6
    # progressing 130 + 128 s, of which steps 10..13 (t=220..250) were done again after the restart
    assert causes[LOST_CAUSE] == 30.0 and causes["progressing (goodput)"] == 228.0
    assert causes["hang (collective_hang)"] == 140.0 and causes["capture (collective_hang)"] == 20.0
    assert causes["compiling"] == 119.5 + 59.5
    assert view.causes[0].cause == "progressing (goodput)"
    assert abs(sum(c.share for c in view.causes) - 1.0) < 1e-3


def test_a_run_still_going_or_failing_before_any_progress_has_no_invented_phase() -> None:
    crash = [ev(0, "job_started", 0), ev(30, "verdict", 0, label="config_error", action="stop", reason="EFA off"),
             ev(31, "job_finished", 0, exit_code=1, state="failed")]
    view = view_of(crash)
    assert spans(view, 0) == [("start-up", 0, 30), ("ending", 30, 31)]
    assert view.outcome == "failed" and view.steps == ()
    running = hang_restart_finish()[:5]  # no job_finished: measured up to the last event
    assert spans(view_of(running), 0) == [("start-up", 0, 0.5), ("compiling", 0.5, 120), ("progressing", 120, 230)]


def test_a_synced_save_that_outlasts_the_hang_timeout_is_a_saving_phase() -> None:
    events = [ev(0, "job_started", 0), ev(10, "progress", 0, step=1),
              ev(50, "verdict", 0, label="healthy", action="wait",
                 reason="node0/rank 0 has been saving a checkpoint for 31s (synced: every rank waits for it)"),
              ev(90, "progress", 0, step=6), ev(100, "job_finished", 0, exit_code=0, state="finished",
                                                 last_progress=iso_utc(T0 + 100), last_step=8)]
    assert spans(view_of(events), 0) == [("start-up", 0, 10), ("progressing", 10, 50), ("saving", 50, 90),
                                         ("progressing", 90, 100)]


def test_ranks_are_counted_per_state_and_only_the_odd_nodes_are_outliers() -> None:
    st = status(3, 4, odd={(1, 2): "silent", (2, 0): "waiting"})
    ranks = view_of(hang_restart_finish(), st).ranks
    assert ranks is not None
    assert ranks.total == 12 and ranks.usual == "progressing"
    assert dict(ranks.counts) == {"silent": 1, "waiting": 1, "progressing": 10}
    assert [n.node for n in ranks.outliers] == ["node-1", "node-2"]  # the silent one first
    assert ranks.nodes[1].states == ("progressing", "progressing", "silent", "progressing")
    assert ranks.nodes[1].worst == "silent"


def test_a_2048_node_job_is_drawn_by_node_with_strips_for_its_outliers_only() -> None:
    odd = {(n, 5): "silent" for n in (7, 1500)} | {(300, 0): "exited"}
    view = view_of(hang_restart_finish(culprit_node="node-9"), status(2048, 32, odd=odd))
    assert view.ranks is not None and len(view.ranks.nodes) == 2048
    # the odd nodes, most urgent first, and the incident's culprit although all its ranks progress now
    assert [n.node for n in view.ranks.outliers] == ["node-7", "node-1500", "node-300", "node-9"]
    page = render(view)
    assert page.count('class="strip"') == 4  # not 2,048 strips of 32 ranks
    assert page.count("<rect") < 2048 + 4 * 32 + 200  # a cell per node, the outliers' ranks, the charts
    assert "node-9 <span" in page and "culprit of #1" in page
    assert "node-7: progressing 31, silent 1" in page or "node-7: silent 1, progressing 31" in page
    assert "node-1500" in page and "Outlier nodes" in page


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    p.close()
    return p


def test_markup_in_a_culprit_reason_node_name_or_bundle_is_shown_as_text_never_run() -> None:
    hostile = "<script>document.title='owned'</script>"
    node = '"><img src=x onerror=alert(1)>'
    events = hang_restart_finish(reason=f"rank 3 printed {hostile}", culprit_node=node, bundle="javascript:alert(1)")
    page = render(view_of(events, status(2, 2, odd={(0, 1): "silent"})))
    doc = parsed(page)
    assert not [t for t, _a in doc.tags if t in ("script", "img", "iframe", "object", "embed")]
    assert not [(t, k) for t, a in doc.tags for k in a if k.startswith("on")]
    assert not [a.get("href") for t, a in doc.tags if t == "a" and "javascript" in (a.get("href") or "")]
    text = "".join(doc.text)
    assert hostile in text and node in text  # shown, as text
    assert "&lt;script&gt;" in page


def test_the_page_is_self_contained() -> None:
    page = render(view_of(hang_restart_finish(), status(2, 2)))
    doc = parsed(page)
    assert not [t for t, a in doc.tags if "src" in a or t in ("link", "script")]
    links = [a["href"] for t, a in doc.tags if t == "a" and a.get("href")]
    assert links == ["file:///runs/r/incidents/incident-1", "s3://bucket/job-7/incident-1/n0"]  # the bundles only
    csp = [a for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")
    for section in ("goodput", "generations", "steps", "incidents", "ranks"):
        assert ("section", {"id": section}) in doc.tags


def test_a_bundle_link_is_made_only_for_urls_and_absolute_paths() -> None:
    assert 'href="s3://b/k"' in bundle_link("s3://b/k")
    assert 'href="file:///a%20b/c"' in bundle_link("/a b/c")
    assert "href" not in bundle_link("javascript:alert(1)") and "href" not in bundle_link("incidents/1")
    assert "href" not in bundle_link("data:text/html,<b>")


def test_the_bundles_of_a_large_job_are_shown_by_where_they_are_and_the_culprits_own() -> None:
    nodes = [f"node-{i}" for i in range(2048)]
    events = hang_restart_finish(culprit_node="node-77")
    events[7]["artifacts"] = {n: f"s3://b/job-7/incident-1/{n}" for n in nodes}
    events[8]["uri"] = "s3://b/job-7/incident-1/node-0"  # its upload: one of them
    page = render(view_of(events))
    incident = re.search(r'<tr class="incident".*?</tr>', page, re.S)
    assert incident is not None
    links = re.findall(r'href="([^"]+)"', incident.group(0))
    assert links == ["s3://b/job-7/incident-1/node-77", "s3://b/job-7/incident-1/"]
    assert "all 2048 bundles" in incident.group(0)


def test_a_run_without_events_is_a_page_that_says_so() -> None:
    view = build_view([], compute_goodput([]), None)
    assert view.generations == () and view.incidents == () and view.ranks is None
    page = render(view)
    assert "No progress with a step number" in page and "No incident" in page and "no events with a time" in page


def test_a_crash_after_progress_is_a_failure_phase_with_its_label_and_an_unknown_state_is_most_urgent() -> None:
    events = [ev(0, "job_started", 0), ev(10, "progress", 0, step=1),
              ev(40, "verdict", 0, label="other_crash", action="restart", culprit=None,
                 last_progress=iso_utc(T0 + 35), last_step=4),
              ev(41, "incident", 0, incident=1, label="other_crash"), ev(42, "restart", 1, checkpoint=None),
              ev(50, "progress", 1, step=1), ev(60, "job_finished", 1, exit_code=0, state="finished")]
    view = view_of(events, status(1, 3, odd={(0, 1): "rebooting"}))
    assert spans(view, 0) == [("start-up", 0, 10), ("progressing", 10, 35), ("failure", 35, 40), ("capture", 40, 41),
                              ("relaunch", 41, 42)]
    assert {c.cause for c in view.causes} >= {"failure (other_crash)", "capture (other_crash)"}
    assert view.incidents[0].culprit == "" and "not named" in render(view)
    assert view.ranks is not None and view.ranks.counts[0] == ("rebooting", 1)  # a state this version does not know
