"""Our own console lines are one per node and say what they count: the flight recorder's start-up
line, the missing items of an incident, a stop whose details a node did not report; a progress
regex without a step group is said at start."""

from __future__ import annotations

import io
import logging

import pytest

from neuron_watch.config import load_config
from neuron_watch.events import EvidenceReport
from neuron_watch.node.observer import probe_summary
from neuron_watch.outputs.console import ConsoleSink
from neuron_watch.recovery.incident_summary import missing_by_item
from neuron_watch.runtime import default_judge_factory


def line(event: dict[str, object]) -> str:
    out = ConsoleSink(stream=io.StringIO()).format(event)
    assert out is not None
    return out


def test_the_flight_recorder_start_up_is_one_line_per_node() -> None:
    said = {r: "torch.distributed not imported" for r in range(32)}
    assert probe_summary(said, 32) == "flight recorder: 0 of 32 ranks yet: torch.distributed not imported"
    said.update({0: "on", 1: "no answer"})
    assert probe_summary(said, 32) == ("flight recorder: 1 of 32 ranks yet: no answer (1 rank(s)); "
                                       "torch.distributed not imported (30 rank(s))")


def test_an_incident_line_names_what_is_missing() -> None:
    manifest = {"missing": [{"item": "stacks/rank-1.txt", "reason": "pid 7 had already exited"},
                            {"item": "neuron-ls.json", "reason": "neuron-ls not installed"}]}
    missing = missing_by_item({"n1": EvidenceReport(bundle="/r/i/n1", missing=2, manifest=manifest)})
    assert missing == {"stacks/rank-1.txt": 1, "neuron-ls.json": 1}
    text = line({"event": "incident", "incident": 1, "artifacts": "/r/incidents/incident-1", "capture_seconds": 0.4,
                 "missing_items": 2, "missing": missing, "nodes_without_evidence": []})
    assert text == ("evidence captured: incident 1 in 0.4s, 2 item(s) missing: stacks/rank-1.txt, neuron-ls.json "
                    "(why: manifest.json) -> /r/incidents/incident-1")


def test_missing_items_of_many_nodes_are_counted_by_item() -> None:
    manifest = {"missing": [{"item": "neuron-ls.json", "reason": "not installed"}]}
    reports = {f"n{i}": EvidenceReport(missing=1, manifest=manifest) for i in range(16)}
    reports["n16"] = None  # no answer: listed apart (nodes_without_evidence)
    assert missing_by_item(reports) == {"neuron-ls.json": 16}
    text = line({"event": "incident", "incident": 2, "artifacts": {}, "capture_seconds": 1.0, "missing_items": 16,
                 "missing": {"neuron-ls.json": 16}, "nodes_without_evidence": ["n16"]})
    assert "16 item(s) missing: neuron-ls.json (16 nodes) (why: manifest.json), no evidence from n16" in text


def test_a_stop_a_node_did_not_report_shows_no_placeholders() -> None:
    text = line({"event": "stopped", "node": "n1", "rung": None, "seconds": None, "survivors": [], "answered": False})
    assert text == "job stopped on n1, the node did not answer"
    assert line({"event": "stopped", "node": "n1", "rung": "sigterm", "seconds": 0.7, "survivors": [],
                 "answered": True}) == "job stopped on n1 (sigterm, 0.7s)"


def test_a_progress_regex_without_a_step_group_is_accepted_and_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="neuron_watch"):
        default_judge_factory(load_config({"progress_regex": r"iter \d+ done"}, {}))
    assert any("--progress-regex has no (?P<step>...) group" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="neuron_watch"):
        default_judge_factory(load_config({"progress_regex": r"iter (?P<step>\d+) done"}, {}))
    assert not any("--progress-regex" in r.getMessage() for r in caplog.records)
