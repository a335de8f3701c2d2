"""Goodput figures from scripted event lists whose compile, hang and restart times are known."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.events import iso_utc
from neuron_watch.outputs.goodput import checkpoint_step, compute_goodput, parse_time

T0 = 1_800_000_000.0  # a fixed wall clock origin; every time below is T0 + seconds


def ev(at: float, event: str, generation: int, **fields: Any) -> dict[str, Any]:
    return {"time": iso_utc(T0 + at), "event": event, "generation": generation, **fields}


def hang_and_restart_run() -> list[dict[str, Any]]:
    """Compile 120 s, steps to 13, checkpoint at step 10 (t=220), last step at t=250, hang detected
    at t=400, evidence at t=410, relaunch at t=412 from step_10, compile 60 s, first step at t=472,
    finish at t=600 with step 30."""
    return [
        ev(0, "job_started", 0),
        ev(0.5, "verdict", 0, label="compiling", action="wait"),
        ev(120, "progress", 0, step=1),
        ev(220, "checkpoint", 0, step=10, path="ckpt/step_10"),
        ev(230, "progress", 0, step=11),
        ev(400, "verdict", 0, label="collective_hang", action="restart",
           culprit={"node": "n0", "rank": 3}, last_progress=iso_utc(T0 + 250), last_step=13),
        ev(410, "incident", 0, label="collective_hang", artifacts="incidents/0001"),
        ev(412, "restart", 1, checkpoint="/ckpt/step_10"),
        ev(412.5, "verdict", 1, label="compiling", action="wait"),
        ev(472, "progress", 1, step=11),
        ev(540, "checkpoint", 1, step=20),
        ev(600, "job_finished", 1, exit_code=0, restarts=1, last_progress=iso_utc(T0 + 600), last_step=30),
    ]


def test_hang_and_restart_figures_match_the_script() -> None:
    g = compute_goodput(hang_and_restart_run())
    assert g["finished"] is True
    assert g["wall_seconds"] == 600.0
    assert g["restarts"] == 1
    gen0, gen1 = g["generations"]
    # compile paid per generation: verdict "compiling" until the first progress
    assert gen0["compile_seconds"] == 119.5
    assert gen1["compile_seconds"] == 59.5
    assert gen0["startup_seconds"] == 120.0
    assert gen1["startup_seconds"] == 60.0
    # detection, evidence, relaunch
    assert gen0["time_to_detect"] == 150.0  # last progress t=250 -> verdict t=400
    assert gen0["time_to_evidence"] == 10.0  # verdict -> incident
    assert gen0["time_to_relaunch"] == 62.0  # incident t=410 -> next first progress t=472
    assert gen1["time_to_detect"] is None and gen1["outcome"] == "finished"
    # work lost: steps 10..13, checkpoint seen at t=220, last progress t=250
    assert (gen0["lost_steps"], gen0["lost_seconds"]) == (3, 30.0)
    assert gen1["resumed_from_step"] == 10
    # progress: gen0 120..250 = 130 s, gen1 472..600 = 128 s
    assert (gen0["progress_seconds"], gen1["progress_seconds"]) == (130.0, 128.0)
    assert g["progress_seconds"] == 258.0
    assert g["effective_ratio"] == round(258 / 600, 4)
    assert g["useful_seconds"] == 228.0
    assert g["useful_ratio"] == round(228 / 600, 4)
    assert g["compile_seconds"] == 179.0
    assert (g["lost_steps"], g["lost_seconds"]) == (3, 30.0)
    assert g["causes"] == {"collective_hang": 1}
    assert g["failures"] == [{"generation": 0, "label": "collective_hang", "culprit": {"node": "n0", "rank": 3},
                              "action": "restart", "reason": None}]
    assert g["skipped_events"] == 0 and g["notes"] == []


def test_a_recompile_mid_training_is_not_progress() -> None:
    events = [
        ev(0, "job_started", 0),
        ev(10, "progress", 0, step=1),
        ev(50, "verdict", 0, label="compiling", action="wait"),  # a new graph at step 5
        ev(80, "progress", 0, step=6),
        ev(100, "job_finished", 0, exit_code=0, restarts=0, last_progress=iso_utc(T0 + 100), last_step=9),
    ]
    g = compute_goodput(events)
    assert g["generations"][0]["compile_seconds"] == 30.0
    assert g["progress_seconds"] == 60.0  # 10..100 less the 30 s compile
    assert g["effective_ratio"] == 0.6


def test_a_late_progress_event_of_the_compiles_own_step_does_not_end_it() -> None:
    """The progress event of step 3 is written after the "compiling" verdict given at step 3, dated
    by its line (before the verdict): the recompile goes on until the next step (seen on a loaded
    machine: 36 s counted of a 103 s recompile)."""
    events = [
        ev(0, "job_started", 0),
        ev(10, "progress", 0, step=1),
        ev(50.2, "verdict", 0, label="compiling", action="wait", step=3),
        ev(50.1, "progress", 0, step=3),  # written after the verdict, dated by its line
        ev(153, "verdict", 0, label="healthy", action="wait", step=4),
        ev(160, "job_finished", 0, exit_code=0, restarts=0, last_progress=iso_utc(T0 + 160), last_step=6),
    ]
    g = compute_goodput(events)
    assert g["generations"][0]["compile_seconds"] == 102.8  # 50.2 .. 153


def test_a_compilers_own_account_is_reported_beside_the_measured_compile_time() -> None:
    """torch-xla's CompileTime metric, printed by the ranks (compile_report): per generation, the
    newest report of each rank, the most any rank spent; absent where no rank reported."""
    events = [
        ev(0, "job_started", 0),
        ev(10, "progress", 0, step=1),
        ev(20, "compile_report", 0, node="n1", rank=0, compiles=3, seconds=4.5),
        ev(30, "compile_report", 0, node="n1", rank=0, compiles=5, seconds=7.25),  # its newest total
        ev(31, "compile_report", 0, node="n1", rank=1, compiles=5, seconds=6.0),
        ev(40, "verdict", 0, label="collective_hang", action="restart"),
        ev(41, "restart", 1, checkpoint=None, restarts=1),
        ev(60, "progress", 1, step=1),
        ev(100, "job_finished", 1, exit_code=0, restarts=1),
    ]
    gens = compute_goodput(events)["generations"]
    assert [g["reported_compile_seconds"] for g in gens] == [7.25, None]


def test_crash_without_a_checkpoint_loses_everything_and_explicit_compile_events() -> None:
    events = [
        ev(0, "job_started", 0),
        ev(5, "compile_start", 0, node="n0", rank=0),
        ev(7, "compile_start", 0, node="n0", rank=1),
        ev(25, "compile_end", 0, node="n0", rank=0),
        ev(30, "compile_end", 0, node="n0", rank=1),
        ev(30, "progress", 0, step=1),
        ev(90, "verdict", 0, label="other_crash", action="restart", last_progress=iso_utc(T0 + 88),
           last_step=7),
        ev(91, "restart", 1, checkpoint=None),
        ev(100, "progress", 1, step=1),
        ev(130, "verdict", 1, label="numerical_error", action="stop", last_progress=iso_utc(T0 + 129),
           last_step=4),
        ev(131, "job_finished", 1, exit_code=1, restarts=1),
    ]
    g = compute_goodput(events)
    gen0, gen1 = g["generations"]
    assert gen0["compile_seconds"] == 25.0  # union of 5..25 and 7..30
    assert (gen0["lost_steps"], gen0["lost_seconds"]) == (7, 58.0)  # from step 0 / first progress t=30
    assert gen0["time_to_detect"] == 2.0
    assert gen0["time_to_evidence"] is None  # no incident event
    assert gen0["time_to_relaunch"] == 10.0  # verdict t=90 -> first progress t=100
    assert gen1["outcome"] == "numerical_error"
    assert gen1["lost_steps"] is None  # nothing ran after it
    assert g["causes"] == {"other_crash": 1, "numerical_error": 1}


def test_unfinished_run_and_bad_lines_are_reported_not_hidden() -> None:
    events: list[dict[str, Any]] = [ev(0, "job_started", 0), {"event": "progress"}, {"time": "yesterday"},
                                    ev(40, "progress", 0, step=3)]
    g = compute_goodput(events)
    assert g["finished"] is False
    assert g["wall_seconds"] == 40.0
    assert g["skipped_events"] == 2
    empty = compute_goodput([])
    assert empty["wall_seconds"] is None and empty["notes"] == ["no events with a time"]


def test_goodput_already_in_job_finished_is_ignored() -> None:
    run = hang_and_restart_run()
    first = compute_goodput(run)
    run[-1] = {**run[-1], "goodput": first}
    assert compute_goodput(run) == first


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2027-01-15T08:00:00.000Z", 1_800_000_000.0), ("2027-01-15T08:00:00+00:00", 1_800_000_000.0),
     ("2027-01-15T08:00:00", 1_800_000_000.0), (12.5, 12.5), ("noon", None), (None, None), (True, None)],
)
def test_parse_time(value: Any, expected: float | None) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize(
    ("event", "step"),
    [({"checkpoint": "/fsx/ckpt/step_120/"}, 120), ({"checkpoint": "s3://b/run/step-7"}, 7),
     ({"checkpoint_step": 5, "checkpoint": "/x/step_9"}, 5), ({"checkpoint": "/x/latest"}, None),
     ({"checkpoint": None}, None)],
)
def test_checkpoint_step(event: dict[str, Any], step: int | None) -> None:
    assert checkpoint_step(event) == step


def test_goodput_is_pure() -> None:
    src = Path(__file__).resolve().parents[2] / "watchdog" / "outputs" / "goodput.py"
    names = set()
    for node in ast.walk(ast.parse(src.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    assert not names & {"os", "subprocess", "zmq", "boto3", "asyncio", "time", "socket", "aiomqtt"}
