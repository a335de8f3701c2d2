"""timeline.json of a synthetic run with a compile, a hang and a restart (real log formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.outputs.timeline import RankLog, build_trace, parse_time, write_timeline

EVENTS = [
    {"time": "2026-11-21T13:00:00.000Z", "event": "job_started", "generation": 1},
    {"time": "2026-11-21T13:20:00.000Z", "event": "verdict", "generation": 1, "label": "collective_hang",
     "action": "restart", "ranks": ["n1/rank0", "n1/rank1"], "culprit": {"node": "n1", "rank": 1},
     "evidence": [], "reason": "no progress", "advice": "", "step": 3},
    {"time": "2026-11-21T13:20:01.000Z", "event": "incident", "generation": 1, "label": "collective_hang",
     "culprit": {"node": "n1", "rank": 1}, "artifacts": "s3://b/p/job/incident-1", "incident": 1},
    {"time": "2026-11-21T13:20:05.000Z", "event": "restart", "generation": 2, "checkpoint": "/ckpt/step_3"},
    {"time": "2026-11-21T13:30:00.000Z", "event": "job_finished", "generation": 2, "exit_code": 0, "restarts": 1},
]
RANK0_GEN1 = [
    "2026-11-21 13:00:05.000297:  271334  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile "
    "--target=trn1 --framework=XLA /tmp/ubuntu/neuroncc_compile_workdir/50f2/model.MODULE_1+d41d8cd9.hlo_module.pb",
    ".....",
    "Compiler status PASS",
    "2026-11-21 13:09:00.000003: 837617 [INFO]: Compilation Successfully Completed for "
    "model.MODULE_1+d41d8cd9.hlo_module.pb",
    "2026-11-21T13:09:10Z step 1 loss 2.5 step_time 0.010s",
    "2026-11-21T13:09:20Z step 2 loss 2.4 step_time 0.010s",
    "2026-11-21T13:09:30Z step 3 loss 2.3 step_time 0.010s",
    "2026-Nov-21 13:12:00.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX "
    "(waited 120 sec) - retrying",
    "2026-Nov-21 13:14:00.0241 332066:332494 [29] include/socket.h:579 CCOM WARN Timeout waiting for RX "
    "(waited 120 sec) - retrying",
]
RANK1_GEN1 = [
    "2026-11-21T13:09:12Z step 1 loss 2.5 step_time 0.010s",
    "2026-11-21T13:09:22Z step 2 loss 2.4 step_time 0.010s",
]
RANK0_GEN2 = ["2026-11-21T13:21:00Z step 4 loss 2.2 step_time 0.010s",
              "2026-11-21T13:21:10Z step 5 loss 2.1 step_time 0.010s"]


def spans(trace: dict, cat: str) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e["ph"] == "X"]


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2024-09-23 00:08:59.000814:  27  INFO ||NEURON_CACHE||: x", "2024-09-23T00:08:59.000814+00:00"),
        ("2023-Aug-01 16:14:43.0241 332066:332494 [29] CCOM WARN", "2023-08-01T16:14:43.024100+00:00"),
        ("2026-11-21T13:05:01.123Z event", "2026-11-21T13:05:01.123000+00:00"),
        ("2026-11-21T14:05:01+01:00 event", "2026-11-21T13:05:01+00:00"),
    ],
)
def test_parse_time_formats(text: str, iso: str) -> None:
    import datetime as dt

    assert parse_time(text) == pytest.approx(dt.datetime.fromisoformat(iso).timestamp())


def test_parse_time_none_without_timestamp() -> None:
    assert parse_time("step 3 loss 1.0") is None
    assert parse_time("2026-13-40 99:00:00 nonsense") is None


def test_trace_shows_compile_hang_and_restart(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for gen, rank, lines in ((1, 0, RANK0_GEN1), (1, 1, RANK1_GEN1), (2, 0, RANK0_GEN2)):
        (run / f"gen-{gen}").mkdir(parents=True, exist_ok=True)
        (run / f"gen-{gen}" / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    path = write_timeline(run, default_knowledge_base())
    trace = json.loads(path.read_text())  # valid JSON
    evs = trace["traceEvents"]
    for e in evs:  # valid trace events: phase, pid, tid; timed ones have ts; spans have dur > 0
        assert e["ph"] in ("X", "i", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] > 0
    names = {(e["args"]["name"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"rank 0", "rank 1", "events"} <= names

    (compile_span,) = spans(trace, "compile")
    expected_us = (9 * 60 - 5 + 0.000003 - 0.000297) * 1e6  # 13:00:05.000297 -> 13:09:00.000003
    assert compile_span["tid"] == 1 and compile_span["dur"] == pytest.approx(expected_us, rel=1e-6)
    hangs = {e["tid"]: e for e in spans(trace, "hang")}
    assert set(hangs) == {1, 2}
    # rank 1 went silent after step 2 at 13:09:22; the hang verdict came at 13:20:00
    assert hangs[2]["args"]["since_last_progress_s"] == pytest.approx(10 * 60 + 38)
    assert hangs[1]["args"]["since_last_progress_s"] == pytest.approx(10 * 60 + 30)
    (wait,) = spans(trace, "comm_wait")
    assert wait["tid"] == 1 and wait["args"]["lines"] == 2
    steps = [e for e in spans(trace, "step") if e["tid"] == 1]
    assert [e["args"]["step"] for e in steps] == [2, 3, 5]
    gens = spans(trace, "generation")
    assert [g["name"] for g in gens] == ["generation 1", "generation 2"]
    markers = {e["name"] for e in evs if e["ph"] == "i"}
    assert {"incident: collective_hang", "restart", "verdict: collective_hang", "job_finished"} <= markers
    restart = next(e for e in evs if e["name"] == "restart")
    assert restart["s"] == "g" and restart["args"]["checkpoint"] == "/ckpt/step_3"


def test_bad_event_time_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no valid 'time'"):
        build_trace([{"event": "restart", "generation": 1, "time": "yesterday"}], [], default_knowledge_base())


def test_unfinished_compile_is_closed_at_the_incident() -> None:
    logs = [RankLog(1, 0, [RANK0_GEN1[0], "....."], "gen-1/rank-0.log")]
    trace = build_trace(EVENTS[:3], logs, default_knowledge_base())
    (c,) = spans(trace, "compile")
    assert c["args"]["unfinished"] is True
