"""A big job's status.json summarises its ranks (per state, per node, the outliers) and every
rank's row is in ranks.json for ``neuron-watch status --ranks``; a small job's is unchanged."""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.config import WatchConfig
from neuron_watch.outputs.status import FULL_RANKS, RANKS_FILE, add_arguments, assess, run, summarise, table


def doc_of(nodes: int, ranks: int, odd: dict[int, dict[str, Any]], now: float = 1000.0) -> dict[str, Any]:
    rows = []
    for g in range(nodes * ranks):
        r = {"node": f"n{g // ranks:04d}", "rank": g, "state": "progressing", "last_step": 50,
             "last_line_age": 0.5, "compile_seconds": 0.0, "pid": 100 + g}
        r.update(odd.get(g, {}))
        rows.append(r)
    return {"job_id": "j", "generation": 0, "restarts": 0, "state": "running", "updated_unix": now,
            "updated": "t", "ranks": rows}


def test_summary_counts_every_rank_and_lists_the_outliers_most_urgent_first() -> None:
    odd = {7: {"state": "silent", "last_line_age": 300.0}, 70: {"last_step": 48}, 71: {"last_step": 49},
           300: {"state": "failed"}}
    s = summarise(doc_of(8, 64, odd))
    assert s["ranks_total"] == 512 and s["ranks_by_state"] == {"progressing": 510, "silent": 1, "failed": 1}
    assert [r["rank"] for r in s["ranks"]] == [300, 7, 70]  # failed, silent, then 2 steps behind (not 1)
    assert s["ranks_omitted"] == 509 and s["ranks_file"] == RANKS_FILE
    n0 = s["node_ranks"]["n0000"]
    assert n0 == {"ranks": 64, "states": {"progressing": 63, "silent": 1}, "last_step": [50, 50],
                  "last_line_age": 300.0}
    assert s["node_ranks"]["n0001"]["last_step"] == [48, 50]
    assert len(summarise(doc_of(8, 64, {g: {"state": "waiting"} for g in range(100)}), limit=10)["ranks"]) == 10


def test_the_table_of_a_summary_names_states_nodes_and_outliers() -> None:
    view = assess(summarise(doc_of(4, 64, {5: {"state": "waiting"}})), 1001.0)
    text = table(view)
    assert "256 ranks: 1 waiting, 255 progressing" in text
    assert "1 of 4 nodes have ranks that are not progressing" in text and "63 progressing, 1 waiting" in text
    assert "255 ranks not listed: every rank with --ranks" in text
    stale = assess(summarise(doc_of(4, 64, {})), 1100.0)  # an old file of a running job
    assert stale["ranks_by_state"] == {"unobserved": 256}


def run_status(tmp_path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([str(tmp_path), "--json", "--stale-after", "1e9", *extra])
    assert run(args, WatchConfig()) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_status_ranks_shows_every_row_from_ranks_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = doc_of(FULL_RANKS // 64 + 1, 64, {3: {"state": "silent"}}, now=time.time())
    (tmp_path / "status.json").write_text(json.dumps(summarise(full)))
    every = {"updated_unix": full["updated_unix"] - 10.0, "ranks": full["ranks"]}  # 10 s before status.json
    (tmp_path / RANKS_FILE).write_text(json.dumps(every))
    brief = run_status(tmp_path, capsys=capsys)
    assert [r["rank"] for r in brief["ranks"]] == [3] and brief["ranks_total"] == len(full["ranks"])
    whole = run_status(tmp_path, "--ranks", capsys=capsys)
    assert len(whole["ranks"]) == len(full["ranks"]) > FULL_RANKS and "ranks_total" not in whole
    assert whole["ranks"][0]["last_line_age"] >= 10.5  # its age brought to status.json's time


def test_a_small_job_is_listed_whole(tmp_path: Path) -> None:
    from neuron_watch.job.coordinator import Coordinator

    c = Coordinator("127.0.0.1:0", b"k" * 32, str(tmp_path), job="j", announce=False)
    try:
        c.write_status(c.clock())
        doc = json.loads((tmp_path / "status.json").read_text())
        assert "ranks_total" not in doc and not (tmp_path / RANKS_FILE).exists()
    finally:
        c.close()


def test_a_bigger_job_writes_its_status_less_often(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """status.json every second up to STATUS_RANKS_PER_SECOND ranks, then a second per that many
    ranks: 2.5 s for 40,960. (A document's cost is taken as nothing here: the machine's speed
    stretches the interval further, see STATUS_SHARE.)"""
    from neuron_watch.iofaults import IOHealth
    from neuron_watch.job import statusfiles
    from neuron_watch.job.statusfiles import STATUS_RANKS_PER_SECOND, StatusFiles

    monkeypatch.setattr(statusfiles.time, "perf_counter", lambda: 0.0)
    for nodes, every in ((2, 1.0), (640, 40_960 / STATUS_RANKS_PER_SECOND)):
        files = StatusFiles(str(tmp_path), IOHealth())
        doc = doc_of(nodes, 64, {})
        written: list[float] = []

        def write(now: float, doc: dict[str, Any] = doc, files: StatusFiles = files,
                  written: list[float] = written) -> None:
            files.write(doc, now)
            written.append(now)

        for k in range(81):  # 8 s of ticks, 0.1 s apart
            files.turn(k / 10, False, write)
        assert written == [k * math.ceil(every * 10) / 10 for k in range(len(written))], (nodes, written)
        assert len(written) == 1 + int(8 // (math.ceil(every * 10) / 10))


def test_a_big_jobs_status_json_is_kept_by_changes_and_says_what_the_whole_document_says(tmp_path: Path) -> None:
    """The coordinator of more than FULL_RANKS ranks writes the summary its status book keeps:
    the same as summarise() of the document listing every rank; every row goes to ranks.json when
    it is due, and to a listener with every document."""
    from neuron_watch.diagnosis.kb import default_knowledge_base
    from neuron_watch.events import LogLine, RankKey, RankSpan
    from neuron_watch.job.coordinator import Coordinator
    from neuron_watch.runtime import default_judge_factory

    now = [1000.0]
    c = Coordinator("127.0.0.1:0", b"k" * 32, str(tmp_path), job="j", announce=False,
                    judge_factory=default_judge_factory(WatchConfig()), clock=lambda: now[0],
                    wall=lambda: 1.7e9 + now[0])
    try:
        judge = c.judge
        assert judge is not None
        sig = default_knowledge_base().classify("step 1 loss 2.5").signature.id  # type: ignore[union-attr]
        nodes, per = FULL_RANKS // 64 + 1, 64

        def batch(t: float, late: set[int]) -> None:
            for n in range(nodes):
                keys = [RankKey(f"n{n:02d}", n * per + i) for i in range(per)]
                steps = [int(t) - (3 if k.rank in late else 0) for k in keys]
                judge.observe_batch([RankSpan(k, t, t, f"step {s} loss 2.5") for k, s in zip(keys, steps, strict=True)],
                                    [], [LogLine(k, f"step {s} loss 2.5", t, t, "", 0, sig, s, 2.5)
                                         for k, s in zip(keys, steps, strict=True)])

        seen: list[dict[str, Any]] = []
        c.status_listeners.append(seen.append)
        for t, late in ((1000.0, set()), (1001.0, {5, 700}), (1020.0, {5})):
            now[0] = t
            batch(t, late)
            c.write_status(t)
            doc = json.loads((tmp_path / "status.json").read_text())
            whole = summarise(c.status_doc(t))
            for f in ("ranks", "ranks_total", "ranks_by_state", "node_ranks", "ranks_omitted"):
                assert doc[f] == whole[f], (t, f)
            assert len(seen[-1]["ranks"]) == nodes * per  # the listener gets every rank
        assert [r["rank"] for r in doc["ranks"]] == [5]
        every = json.loads((tmp_path / RANKS_FILE).read_text())
        assert len(every["ranks"]) == nodes * per and every["updated_unix"] == 1.7e9 + 1000.0  # due every 30 s
    finally:
        c.close()
