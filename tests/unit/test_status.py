"""`neuron-watch status`: states from status.json, staleness shown as unobserved, never healthy."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.cli import main
from neuron_watch.events import iso_utc
from neuron_watch.outputs.status import assess, table

NOW = 1_800_000_000.0


def status_doc(updated: float, state: str = "running") -> dict[str, Any]:
    """Four ranks on two nodes in every live state the supervisor reports."""
    def rank(node: str, r: int, st: str, step: int | None, age: float, comp: float) -> dict[str, Any]:
        return {"node": node, "rank": r, "state": st, "last_step": step, "last_line_age": age,
                "compile_seconds": comp, "pid": 1000 + r}

    return {
        "job_id": "4242", "generation": 1, "restarts": 1, "state": state,
        "updated": iso_utc(updated), "updated_unix": updated,
        "ranks": [rank("n1", 3, "waiting", 12, 4.0, 0.0), rank("n0", 0, "progressing", 12, 0.5, 30.0),
                  rank("n0", 1, "compiling", None, 1.0, 95.5), rank("n1", 2, "exited", 11, 20.0, 0.0)],
    }


def test_fresh_status_shows_each_ranks_state() -> None:
    v = assess(status_doc(NOW - 1.0), NOW)
    assert v["observed"] and v["state"] == "running" and v["reason"] == ""
    assert [(r["node"], r["rank"], r["state"]) for r in v["ranks"]] == [
        ("n0", 0, "progressing"), ("n0", 1, "compiling"), ("n1", 2, "exited"), ("n1", 3, "waiting")]
    r1 = v["ranks"][1]
    assert (r1["compile_seconds"], r1["last_line_age"], r1["last_step"]) == (95.5, 2.0, None)  # 1.0 + 1 s old file
    assert (v["generation"], v["restarts"], v["age"]) == (1, 1, 1.0)


@pytest.mark.parametrize("age", [5.1, 60.0, 3600.0])
def test_stale_status_is_unobserved_never_healthy(age: float) -> None:
    v = assess(status_doc(NOW - age), NOW)
    assert not v["observed"] and v["state"] == "unobserved"
    assert {r["state"] for r in v["ranks"]} == {"unobserved"}
    assert "not finished" in v["reason"]


def test_the_stale_limit_is_inclusive_and_configurable() -> None:
    assert assess(status_doc(NOW - 5.0), NOW)["observed"] is True
    assert assess(status_doc(NOW - 5.0), NOW, stale_after=2.0)["observed"] is False


def test_finished_job_may_be_old() -> None:
    v = assess(status_doc(NOW - 3600, state="finished"), NOW)
    assert v["observed"] and v["state"] == "finished"
    assert v["ranks"][0]["last_line_age"] == 0.5  # ages are as of the end, not brought forward


@pytest.mark.parametrize(
    ("doc", "why"),
    [(None, "no status.json"), ({"state": "running", "ranks": []}, "no updated_unix")],
)
def test_missing_information_is_unobserved(doc: dict[str, Any] | None, why: str) -> None:
    v = assess(doc, NOW)
    assert v["state"] == "unobserved" and why in v["reason"]


def test_unknown_rank_state_is_unobserved() -> None:
    doc = status_doc(NOW)
    doc["ranks"][0]["state"] = "healthy-ish"
    assert assess(doc, NOW)["ranks"][3]["state"] == "unobserved"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_once_json_on_a_fresh_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Written "now" and read with a generous limit: the states, not the clock, are under test here.
    (tmp_path / "status.json").write_text(json.dumps(status_doc(time.time())))
    code, out, _err = run_cli(["status", str(tmp_path), "--once", "--json", "--stale-after", "600"], capsys)
    v = json.loads(out)
    assert code == 0
    assert {(r["rank"], r["state"]) for r in v["ranks"]} == {(0, "progressing"), (1, "compiling"),
                                                            (2, "exited"), (3, "waiting")}


def test_cli_once_json_on_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "status.json").write_text(json.dumps(status_doc(time.time() - 3600)))
    code, out, _err = run_cli(["status", str(tmp_path), "--once", "--json"], capsys)
    assert code == 3
    assert json.loads(out)["state"] == "unobserved"


def test_cli_once_table_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(["status", str(tmp_path), "--once"], capsys)
    assert code == 3 and "unobserved" in out and "no status.json" in out
    (tmp_path / "status.json").write_text(json.dumps(status_doc(time.time())))
    code, out, _err = run_cli(["status", str(tmp_path), "--once", "--stale-after", "600"], capsys)
    assert code == 0 and "compiling" in out and "4242" in out


@pytest.mark.parametrize(
    ("argv", "problem"),
    [(["status", "--coordinator", "h:1", "--once"], "no job secret"),
     (["status", "/nonexistent-run-dir", "--once"], "is not a directory"),
     (["status", "--once"], "no run directory given")],
)
def test_cli_usage_errors(argv: list[str], problem: str, capsys: pytest.CaptureFixture[str],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEURON_WATCH_SECRET", raising=False)  # the coordinator query needs the job's secret
    code, _out, err = run_cli(argv, capsys)
    assert code == 2 and problem in err and "next step" in err


def test_json_view_carries_the_verdict_and_the_timeout_in_force() -> None:
    doc = status_doc(NOW - 1.0)
    doc.update(label="compiling", hang_timeout=1800.0, hang_timeout_kind="startup")
    v = assess(doc, NOW)
    assert (v["label"], v["hang_timeout"], v["hang_timeout_kind"]) == ("compiling", 1800.0, "startup")
    assert "hang timeout 1800s (startup)" in table(v) and "verdict compiling" in table(v)


def test_a_stuck_first_collective_is_said_with_the_hang_timeout_and_when() -> None:
    """status.json's ``first_collective`` (written by the coordinator from the judge) in words: what the
    judge will do and in how long, brought forward by the file's age; not shown once the job is over."""
    doc = status_doc(NOW - 2.0)
    doc.update(label="healthy", hang_timeout=20.0, hang_timeout_kind="first_collective", first_collective={
        "how": "vm/rank1 never entered collective 5 of group 0, which the other rank entered and waits in",
        "stalled_for": 6.0, "timeout": 20.0, "timeout_name": "hang timeout", "hang_in": 14.0})
    text = table(assess(doc, NOW))
    assert "hang timeout 20s (first_collective)" in text
    assert ("before the first step, vm/rank1 never entered collective 5 of group 0, which the other rank entered "
            "and waits in for 8s: a collective_hang at the hang timeout 20s (in 12s), not at the startup timeout"
            ) in text
    assert "before the first step" not in table(assess({**doc, "state": "failed"}, NOW))


@pytest.mark.parametrize("job_state", ["finished", "interrupted", "failed"])
def test_ranks_of_an_ended_job_show_the_job_state_not_progressing(job_state: str) -> None:
    doc = status_doc(NOW - 3600, state=job_state)
    doc["ranks"][1]["state"] = "failed"  # n0/rank0 stays marked: it is what failed
    v = assess(doc, NOW)
    assert [r["state"] for r in v["ranks"]] == ["failed", job_state, job_state, job_state]


def test_printing_is_a_known_state() -> None:
    doc = status_doc(NOW)
    doc["ranks"][0]["state"] = "printing"
    assert assess(doc, NOW)["ranks"][3]["state"] == "printing"


def test_table_is_plain_aligned_text() -> None:
    text = table(assess(status_doc(NOW - 1.0), NOW))
    assert "\x1b" not in text
    rows = [x for x in text.splitlines() if x.startswith(("  n0", "  n1"))]
    assert len(rows) == 4 and len({len(x) for x in rows}) == 1  # pid is right-aligned in a fixed width
    header = next(x for x in text.splitlines() if "last step" in x)
    assert header.index("state") == rows[0].index("progressing")


@pytest.mark.parametrize("tty", [True, False])
def test_live_view_redraws_with_ansi_only_on_a_terminal(tty: bool, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from neuron_watch.outputs import status as status_mod

    class Out(io.StringIO):
        def isatty(self) -> bool:
            return tty

    def stop(_seconds: float) -> None:
        raise KeyboardInterrupt  # Ctrl-C at the first refresh: the one way the live view ends

    (tmp_path / "status.json").write_text(json.dumps(status_doc(time.time())))
    out = Out()
    monkeypatch.setattr(status_mod.sys, "stdout", out)
    monkeypatch.setattr(status_mod.time, "sleep", stop)
    assert main(["status", str(tmp_path), "--stale-after", "600"]) == 0
    text = out.getvalue()
    assert text.startswith(status_mod.CLEAR) is tty and text.count("\x1b") == (2 if tty else 0)
    assert "compiling" in text and "4242" in text
