from __future__ import annotations

from pathlib import Path

from neuron_watch.recovery.checkpoint_scan import scan_checkpoints
from neuron_watch.recovery.checkpoints import (
    CheckpointEntry,
    CheckpointRule,
    choose_checkpoint,
    incomplete_checkpoints,
    step_of,
)


def entry(name: str, done: bool = True, mtime: float = 0.0, is_dir: bool = True) -> CheckpointEntry:
    return CheckpointEntry(name, f"/ck/{name}", is_dir, done, mtime)


def test_newest_complete_by_step_number_not_by_name_or_mtime() -> None:
    entries = [entry("step_95", mtime=300), entry("step_120", mtime=100), entry("step_130", done=False, mtime=400)]
    chosen = choose_checkpoint(entries, CheckpointRule())
    assert chosen is not None and chosen.name == "step_120"


def test_no_complete_checkpoint_is_none() -> None:
    assert choose_checkpoint([entry("step_5", done=False)], CheckpointRule()) is None
    assert choose_checkpoint([], CheckpointRule()) is None


def test_glob_and_marker_rules() -> None:
    entries = [entry("pretrained_weight"), entry("step_5"), entry("notes.txt", done=False, is_dir=False)]
    chosen = choose_checkpoint(entries, CheckpointRule(glob="step_*"))
    assert chosen is not None and chosen.name == "step_5"
    files = [entry("ckpt_10.pt", done=False, is_dir=False), entry("ckpt_200.pt", done=False, is_dir=False)]
    chosen = choose_checkpoint(files, CheckpointRule(glob="ckpt_*.pt", marker=""))
    assert chosen is not None and chosen.name == "ckpt_200.pt"


def test_nxdt_names_use_the_step_not_consumed_samples() -> None:
    a, b = "hf_llama3_8B--step=5-consumed_samples=960.0.ckpt", "hf_llama3_8B--step=10-consumed_samples=160.0.ckpt"
    chosen = choose_checkpoint([entry(a), entry(b)], CheckpointRule())
    assert chosen is not None and chosen.name == b
    assert step_of("step_120") == 120 and step_of("latest") is None


def test_incomplete_are_reported() -> None:
    assert [
        e.name for e in incomplete_checkpoints([entry("step_5"), entry("step_10", done=False)], CheckpointRule())
    ] == ["step_10"]


def test_scan_reads_markers_from_disk(tmp_path: Path) -> None:
    (tmp_path / "step_5").mkdir()
    (tmp_path / "step_5" / "done").write_text("1")
    (tmp_path / "step_10").mkdir()
    (tmp_path / "step_10" / "checkpoint").write_text("1")  # interrupted save: no done
    chosen = choose_checkpoint(scan_checkpoints(str(tmp_path), "done"), CheckpointRule())
    assert chosen is not None and chosen.path == str(tmp_path / "step_5")
    assert scan_checkpoints(str(tmp_path / "missing"), "done") == []


def test_newest_complete_skips_a_checkpoint_that_would_not_load() -> None:
    """The fallback takes the previous complete checkpoint, never an incomplete one."""
    from neuron_watch.recovery.checkpoints import Candidate, Checkpoint, Detection, newest_complete

    cands = (Candidate("step_5", "/c/step_5", "nxd", 5, 1.0, True),
             Candidate("step_8", "/c/step_8", "nxd", 8, 2.0, False),
             Candidate("step_10", "/c/step_10", "nxd", 10, 3.0, True))
    found = Detection("/c", Checkpoint("/c/step_10", "nxd", 10), cands)
    assert newest_complete(found) == Checkpoint("/c/step_10", "nxd", 10)
    assert newest_complete(found, {"/c/step_10"}) == Checkpoint("/c/step_5", "nxd", 5)
    assert newest_complete(found, {"/c/step_10", "/c/step_5"}) is None
