"""Goodput figures for the checkpoint naming of real frameworks, and how a job ended.

* HF Trainer: ``<output_dir>/checkpoint-<global_step>`` (transformers ``trainer.py``,
  ``PREFIX_CHECKPOINT_DIR = "checkpoint"``); its ``{'loss': ...}`` log lines carry no step.
* Lightning: ``epoch=<E>-step=<S>.ckpt`` (``ModelCheckpoint.CHECKPOINT_NAME_...``/``_format_checkpoint_name``).
* The DDP tutorial (pytorch/examples ``distributed/ddp-tutorial-series/multigpu_torchrun.py``):
  ``snapshot.pt`` with no number, "[GPU0] Epoch N | ..." printed as an epoch begins, resumed at the
  saved epoch; progress is an epoch through ``--progress-regex 'Epoch (?P<step>\\d+)'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuron_watch.cli import main
from neuron_watch.commands.report import render
from neuron_watch.events import iso_utc
from neuron_watch.outputs.goodput import checkpoint_step, compute_goodput
from tests.unit.test_goodput import T0, ev


def run(checkpoint: str | None, gen0_progress: list[tuple[float, int | None]], last: tuple[float, int | None],
        gen1_progress: list[tuple[float, int | None]], finish: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One hang at t=400 (evidence at 410), a restart at 412 from ``checkpoint``, the end at 600."""
    out = [ev(0, "job_started", 0)]
    out += [ev(t, "progress", 0, step=s) for t, s in gen0_progress]
    out += [
        ev(400, "verdict", 0, label="collective_hang", action="restart", last_progress=iso_utc(T0 + last[0]),
           last_step=last[1]),
        ev(410, "incident", 0, label="collective_hang"),
        ev(412, "restart", 1, checkpoint=checkpoint, restarts=1),
    ]
    out += [ev(t, "progress", 1, step=s) for t, s in gen1_progress]
    out.append(ev(600, "job_finished", 1, **(finish or {"exit_code": 0, "state": "finished"})))
    return out


@pytest.mark.parametrize(
    ("path", "step"),
    [("/out/checkpoint-500", 500), ("/out/checkpoint-500/", 500),
     ("/lightning_logs/version_0/checkpoints/epoch=1-step=128.ckpt", 128), ("ckpt/step_10", 10),
     ("/ckpt/iter_0000100", 100), ("/run/snapshot.pt", None), ("/ckpt/last.ckpt", None),
     ("/ds/global_step100", 100), ("/nemo/megatron_gpt--val_loss=1.23-step=128-consumed_samples=2048.0.ckpt", 128),
     ("/exp2/run3/step_10", 10), ("/out/checkpoint-500/global_step500", 500)],
)
def test_the_step_in_checkpoint_names(path: str, step: int | None) -> None:
    assert checkpoint_step({"checkpoint": path}) == step


def test_hf_checkpoint_with_stepped_progress() -> None:
    g = compute_goodput(run("/out/checkpoint-20", [(100, 10), (200, 20), (250, 25)], (250, 25), [(470, 30)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"], gen0["lost_seconds"]) == (5, "checkpoint", 50.0)
    assert gen0["time_to_detect"] == 150.0
    assert g["finished"] is True and g["outcome"] == "finished"


def test_hf_log_lines_without_steps_leave_lost_steps_unknown_not_zero() -> None:
    # the incident: "work lost 0" for an HF job whose progress lines carry no step
    g = compute_goodput(run("/out/checkpoint-20", [(100, None), (250, None)], (250, None), [(470, None)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"]) == (None, "unknown")
    assert g["lost_steps"] is None
    assert gen0["time_to_detect"] == 150.0 and gen0["progress_seconds"] == 150.0
    assert any("no step number" in n for n in g["notes"])
    text = render(g)
    assert "work lost (steps / s)" in text and "- / 0.0" in text


def test_lightning_checkpoint_name() -> None:
    ck = "/lightning_logs/version_0/checkpoints/epoch=1-step=128.ckpt"
    g = compute_goodput(run(ck, [(100, 100), (200, 128), (250, 150)], (250, 150), [(470, 160)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"], gen0["lost_seconds"]) == (22, "checkpoint", 50.0)
    assert g["generations"][1]["resumed_from_step"] == 128


def test_ddp_snapshot_without_a_step_counts_what_the_next_generation_redid() -> None:
    # the incident: "work lost 6" (from epoch 0) when epoch 5 was saved and the hang came in epoch 6
    epochs = [(10.0, 0), (40.0, 3), (60.0, 5), (70.0, 6)]
    g = compute_goodput(run("snapshot.pt", epochs, (70, 6), [(430, 5), (450, 6), (500, 9)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"], gen0["lost_seconds"]) == (1, "redone", 10.0)
    assert any("snapshot.pt names no step" in n for n in g["notes"])
    assert g["lost_steps"] == 1


def test_a_restart_from_scratch_loses_everything() -> None:
    g = compute_goodput(run(None, [(100, 1), (250, 9)], (250, 9), [(470, 1)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"], gen0["lost_seconds"]) == (9, "scratch", 150.0)


@pytest.mark.parametrize(
    ("finish", "outcome", "shown"),
    [({"exit_code": 0, "state": "finished"}, "finished", "yes"),
     ({"exit_code": 143, "state": "interrupted"}, "interrupted", "no: interrupted (exit 143)"),
     ({"exit_code": 5, "state": "failed"}, "gave_up", "no: gave_up (exit 5)"),
     ({"exit_code": 1, "state": "failed"}, "failed", "no: failed (exit 1)")],
)
def test_finished_only_for_a_job_that_finished(finish: dict[str, Any], outcome: str, shown: str) -> None:
    g = compute_goodput(run("/out/checkpoint-20", [(100, 10), (250, 25)], (250, 25), [(470, 30)], finish))
    assert g["finished"] is (outcome == "finished")
    assert (g["outcome"], g["exit_code"]) == (outcome, finish["exit_code"])
    assert g["generations"][1]["outcome"] == outcome
    line = next(x for x in render(g).splitlines() if x.strip().startswith("finished"))
    assert line.endswith(shown)


def test_a_gave_up_event_names_the_outcome_whatever_the_code() -> None:
    events = run("/out/checkpoint-20", [(100, 10)], (100, 10), [(470, 30)], {"exit_code": 4, "state": "failed"})
    events.insert(-1, ev(590, "gave_up", 1, reason="restarts exhausted", label="collective_hang"))
    assert compute_goodput(events)["outcome"] == "gave_up"


def test_a_report_of_spent_restarts_says_they_were_spent() -> None:
    """The trial: --max-restarts 2 used up on crashes (at steps 3, 5, 7: no crash loop), exit 1. The report
    said only 'no: gave_up (exit 1)'; it now says why, in job_finished's words."""
    events = run("/out/checkpoint-20", [(100, 10)], (100, 10), [(470, 30)],
                 {"exit_code": 1, "state": "failed", "reason": "--max-restarts 2 used up"})
    events.insert(-1, ev(590, "gave_up", 1, reason="--max-restarts 2 used up", label="other_crash"))
    g = compute_goodput(events)
    assert (g["outcome"], g["end_reason"]) == ("gave_up", "--max-restarts 2 used up")
    line = next(x for x in render(g).splitlines() if x.strip().startswith("finished"))
    assert line.endswith("no: gave_up (exit 1): --max-restarts 2 used up"), line


def test_a_run_still_going_is_not_finished() -> None:
    events = run("/out/checkpoint-20", [(100, 10)], (100, 10), [(470, 30)])[:-1]
    g = compute_goodput(events)
    assert (g["finished"], g["outcome"], g["generations"][1]["outcome"]) == (False, "running", None)
    assert "no (measured up to the last event)" in render(g)


def test_report_text_is_aligned_plain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events = run("snapshot.pt", [(10.0, 0), (60.0, 5), (70.0, 6)], (70, 6), [(430, 5), (500, 9)],
                 {"exit_code": 143, "state": "interrupted"})
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # no terminal styling
    lines = out.splitlines()
    finished = next(x for x in lines if x.strip().startswith("finished"))
    wall = next(x for x in lines if x.strip().startswith("wall time"))
    assert finished.endswith("no: interrupted (exit 143)") and len(finished) == len(wall)  # right-aligned values
    per_gen = next(x for x in lines if x.strip().startswith("work lost (steps)") and "/" not in x)
    assert per_gen.split()[-2:] == ["1", "-"]


def test_a_job_that_resumes_by_itself_without_a_checkpoint_from_us() -> None:
    # no --checkpoint-dir: the restart names no checkpoint, but the DDP tutorial reloads snapshot.pt
    epochs = [(10.0, 0), (60.0, 5), (70.0, 6)]
    g = compute_goodput(run(None, epochs, (70, 6), [(430, 5), (500, 8)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_steps_basis"], gen0["lost_seconds"]) == (1, "redone", 10.0)
    assert any("resumed at step 5 by itself" in n for n in g["notes"])


def test_the_checkpoint_steps_time_is_interpolated_between_throttled_samples() -> None:
    # progress events come at most every 30 s: step 128 (the checkpoint) is not one of them
    ck = "/lightning_logs/version_0/checkpoints/epoch=1-step=128.ckpt"
    g = compute_goodput(run(ck, [(100, 100), (160, 160)], (250, 250), [(470, 130)]))
    gen0 = g["generations"][0]
    assert (gen0["lost_steps"], gen0["lost_seconds"]) == (122, 250 - 128.0)  # step 128 at t=128
    assert any("interpolated" in n for n in g["notes"])
