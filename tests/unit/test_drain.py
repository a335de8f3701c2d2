"""Drain policy (pure): caps per job and per hour, the state file codec, exclusion."""

from __future__ import annotations

import json
from pathlib import Path

from neuron_watch.slurm import drain, slurmtext
from neuron_watch.slurm.drain import DrainCaps, DrainRecord

T0 = 1_800_000_000.0


def rec(node: str, job: str, wall: float) -> DrainRecord:
    return DrainRecord(node=node, job_id=job, label="hardware_error", reason=f"neuron-watch: hardware_error: {node}",
                       wall=wall)


def test_first_drain_allowed() -> None:
    d = drain.decide([], "n1", "7", T0, DrainCaps())
    assert d.allowed and "n1" in d.why


def test_per_job_cap_refuses_and_names_the_cap() -> None:
    caps = DrainCaps(per_job=1, per_hour=10)
    d = drain.decide([rec("n1", "7", T0)], "n2", "7", T0 + 1, caps)
    assert not d.allowed and "cap is 1 per job" in d.why and "n1" in d.why
    assert drain.decide([rec("n1", "7", T0)], "n2", "8", T0 + 1, caps).allowed  # another job may


def test_per_hour_cap_counts_all_jobs_and_expires() -> None:
    caps = DrainCaps(per_job=5, per_hour=2)
    records = [rec("n1", "1", T0), rec("n2", "2", T0 + 10)]
    assert not drain.decide(records, "n3", "3", T0 + 20, caps).allowed
    assert "cap is 2" in drain.decide(records, "n3", "3", T0 + 20, caps).why
    assert drain.decide(records, "n3", "3", T0 + 3601, caps).allowed  # n1's drain left the window


def test_same_node_same_job_not_twice_and_zero_cap_disables() -> None:
    assert not drain.decide([rec("n1", "7", T0)], "n1", "7", T0, DrainCaps()).allowed
    assert "disabled" in drain.decide([], "n1", "7", T0, DrainCaps(per_job=0)).why


def test_state_roundtrip_and_pruning() -> None:
    records = [rec("n1", "1", T0 - drain.KEEP_SECONDS - 1), rec("n2", "2", T0)]
    back, problem = drain.decode_state(drain.encode_state(records, T0))
    assert problem is None and back == [records[1]]


def test_corrupt_state_is_survivable() -> None:
    assert drain.decode_state("{not json")[0] == []
    assert "not JSON" in (drain.decode_state("{not json")[1] or "")
    assert drain.decode_state(json.dumps({"version": 99, "drains": []}))[0] == []
    good = {"node": "n2", "job_id": "2", "label": "x", "reason": "r", "wall": T0}
    text = json.dumps({"version": 1, "drains": [{"node": "n1"}, good]})
    got, problem = drain.decode_state(text)
    assert [r.node for r in got] == ["n2"] and problem == "1 unreadable record(s) skipped"


def node(name: str, state: str, reason: str) -> slurmtext.NodeInfo:
    text = f"NodeName={name} Arch=x86_64\n   State={state} ThreadsPerCore=1\n"
    if reason:
        text += f"   Reason={reason} [root@2026-11-21T10:00:00]\n"
    return slurmtext.parse_nodes(text)[0]


def test_still_excluded_only_while_drained_by_us() -> None:
    records = [rec("n1", "1", T0), rec("n2", "1", T0), rec("n3", "2", T0), rec("gone", "2", T0)]
    live = {
        "n1": node("n1", "IDLE+DRAIN", "neuron-watch: hardware_error: x"),  # still ours
        "n2": node("n2", "IDLE", ""),  # resumed by an admin
        "n3": node("n3", "IDLE+DRAIN", "admin maintenance"),  # re-drained by someone else
    }
    assert drain.still_excluded(records, live) == ["n1"]


def test_drainer_without_state_file_keeps_records_in_memory(tmp_path: Path) -> None:
    d = drain.Drainer(None)
    d.save([rec("n1", "1", T0)], T0)
    assert d.load() == [rec("n1", "1", T0)]


def test_drainer_state_file_atomic_and_corrupt_kept_aside(tmp_path: Path) -> None:
    f = tmp_path / "shared" / "drains.json"
    d = drain.Drainer(f)
    f.parent.mkdir()
    d.save([rec("n1", "1", T0)], T0)
    assert d.load() == [rec("n1", "1", T0)]
    assert [p.name for p in f.parent.iterdir()] == ["drains.json"]  # no temp file left behind
    f.write_text("garbage")
    assert d.load() == []
    assert any(p.name.startswith("drains.json.corrupt-") for p in f.parent.iterdir())
