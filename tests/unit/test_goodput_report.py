"""`neuron-watch report RUN-DIR` on an events.jsonl written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_watch.cli import main
from tests.unit.test_goodput import hang_and_restart_run


def write_events(run_dir: Path, extra: str = "") -> None:
    run_dir.mkdir(exist_ok=True)
    lines = [json.dumps(e) for e in hang_and_restart_run()]
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n" + extra)


def test_report_json_has_the_scripted_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_events(tmp_path / "run", extra='{"time": "2027-01-15T08:10:00.000Z", "event": "job_fin')  # torn line
    assert main(["report", str(tmp_path / "run"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["effective_ratio"] == round(258 / 600, 4)
    assert out["generations"][0]["time_to_detect"] == 150.0
    assert out["generations"][0]["time_to_relaunch"] == 62.0
    assert out["skipped_events"] == 1
    assert out["run_dir"] == str(tmp_path / "run")


def test_report_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_events(tmp_path / "run")
    assert main(["report", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "effective training time ratio" in out and "43.0%" in out
    assert "collective_hang x1" in out


@pytest.mark.parametrize("make", ["missing", "no_events"])
def test_report_bad_directory_is_a_usage_error(tmp_path: Path, make: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "run"
    if make == "no_events":
        target.mkdir()
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err and "next step" in err


def test_report_html_writes_one_page_of_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_events(tmp_path / "run")
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "run"), "--html", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'data-incident="1"' in page and "n0 / rank 3" in page
    # no status.json in this run dir: the page says why there is no strip of ranks
    assert "no status.json in" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "run"]  # no temp file left


def test_report_html_to_a_directory_that_does_not_exist_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_events(tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "--html", str(tmp_path / "nowhere" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and "next step" in err
