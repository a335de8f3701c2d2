"""Automatic checkpoint detection: real layouts of each framework's convention, built on disk.

Each builder writes what the framework writes, in the order its source writes it (see the
citations in watchdog/recovery/checkpoints.py); "half-written" stops where a crash would.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_watch.recovery.checkpoint_scan import find_checkpoint, snapshot_checkpoint_dir, zip_complete
from neuron_watch.recovery.checkpoints import CheckpointDir, DirEntry, detect, is_temporary, named_step


def torch_file(path: Path, step: int = 0) -> Path:
    # imported here, not at the module's top: every pytest-xdist worker imports every test module
    # at collection, and torch costs seconds of CPU in each that never runs these tests
    import torch

    torch.save({"state_dict": {"w": torch.zeros(64)}, "global_step": step}, path)
    return path


def truncated(src: Path, dst: Path, keep: float = 0.6) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * keep)])
    return dst


def stamp(path: Path, t: float) -> None:
    os.utime(path, (t, t))


# -- builders: one per convention, complete or cut short ------------------------------------------

def nxd(root: Path, tag: str, done: bool = True, t: float = 1000.0) -> None:
    d = root / tag
    d.mkdir()
    (d / "checkpoint").write_text("1")
    (d / "model").mkdir()
    torch_file(d / "model" / "dp_rank_00_tp_rank_00_pp_rank_00.pt")
    if done:
        (d / "done").write_text("1")
        stamp(d / "done", t)


def hf(root: Path, step: int, state: str = "whole", t: float = 1000.0) -> None:
    d = root / f"checkpoint-{step}"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\x00" * 64)
    torch_file(d / "optimizer.pt")
    torch_file(d / "rng_state.pth")
    text = json.dumps({"global_step": step, "log_history": [{"loss": 1.0, "step": step}]}, indent=2) + "\n"
    if state == "whole":
        (d / "trainer_state.json").write_text(text)
        stamp(d / "trainer_state.json", t)
    elif state == "cut":
        (d / "trainer_state.json").write_text(text[: len(text) // 2])


def lightning(root: Path, name: str, whole: bool = True, t: float = 1000.0) -> None:
    src = torch_file(root / ".staging.tmp", named_step(name) or 0)
    if whole:
        shutil.move(src, root / name)
    else:
        truncated(src, root / name)
        src.unlink()
    stamp(root / name, t)


def deepspeed(root: Path, steps: list[int], latest: int | None) -> None:
    for s in steps:
        d = root / f"global_step{s}"
        d.mkdir()
        torch_file(d / "mp_rank_00_model_states.pt")
        torch_file(d / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    if latest is not None:
        (root / "latest").write_text(f"global_step{latest}")


def megatron(root: Path, iters: list[int], tracked: int | None) -> None:
    for i in iters:
        d = root / f"iter_{i:07d}" / "mp_rank_00"
        d.mkdir(parents=True)
        torch_file(d / "model_optim_rng.pt")
    if tracked is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(str(tracked))


def dcp(root: Path, name: str, finished: bool = True) -> None:
    import torch
    import torch.distributed.checkpoint as dist_cp

    d = root / name
    with warnings.catch_warnings():  # "assuming the intent is to save in a single process": it is
        warnings.simplefilter("ignore", UserWarning)
        dist_cp.save({"w": torch.ones(8)}, checkpoint_id=str(d), no_dist=True)
    assert (d / ".metadata").exists()
    if not finished:  # FileSystemWriter.finish had not renamed .metadata.tmp into place yet
        (d / ".metadata").rename(d / ".metadata.tmp")


Layout = Callable[[Path], None]

LAYOUTS: list[tuple[str, Layout, str | None, str | None, int | None]] = [
    # id, builder, chosen entry name (None: none), its convention, its step
    ("nxd-complete", lambda r: (nxd(r, "step_5"), nxd(r, "step_10", t=2000)), "step_10", "nxd", 10),
    ("nxd-newest-half", lambda r: (nxd(r, "step_5"), nxd(r, "step_10", done=False)), "step_5", "nxd", 5),
    ("nxd-none", lambda r: nxd(r, "step_5", done=False), None, None, None),
    ("hf-complete", lambda r: (hf(r, 500), hf(r, 1000, t=900)), "checkpoint-1000", "hf", 1000),
    ("hf-newest-no-state", lambda r: (hf(r, 500), hf(r, 1000, state="none")), "checkpoint-500", "hf", 500),
    ("hf-newest-state-cut", lambda r: (hf(r, 500), hf(r, 1000, state="cut")), "checkpoint-500", "hf", 500),
    ("hf-none", lambda r: hf(r, 500, state="none"), None, None, None),
    ("lightning-complete",
     lambda r: (lightning(r, "epoch=0-step=100.ckpt"), lightning(r, "epoch=1-step=200.ckpt", t=2000)),
     "epoch=1-step=200.ckpt", "lightning", 200),
    ("lightning-newest-half",
     lambda r: (lightning(r, "epoch=0-step=100.ckpt"), lightning(r, "epoch=1-step=200.ckpt", whole=False)),
     "epoch=0-step=100.ckpt", "lightning", 100),
    # save_top_k=1 keeps the best (older step); last.ckpt, a copy, is the newest save
    ("lightning-last-copy",
     lambda r: (lightning(r, "epoch=0-step=100.ckpt"), lightning(r, "last.ckpt", t=2000)),
     "last.ckpt", "lightning", None),
    ("nemo-unfinished-marker",
     lambda r: (lightning(r, "m--step=10-last.ckpt"), lightning(r, "m--step=20-last.ckpt", t=2000),
                (r / "m--step=20-last-unfinished").touch()),
     "m--step=10-last.ckpt", "lightning", 10),
    ("nemo2-dist-dirs",
     lambda r: [((r / n / "weights").mkdir(parents=True), (r / n / "context").mkdir())
                for n in ("m--step=10-consumed_samples=80.0-last", "m--step=20-consumed_samples=160.0-last")]
     and (r / "m--step=20-consumed_samples=160.0-last-unfinished").touch(),
     "m--step=10-consumed_samples=80.0-last", "nemo", 10),
    ("dcp-complete", lambda r: (dcp(r, "step-10"), dcp(r, "step-20")), "step-20", "dcp", 20),
    ("dcp-newest-half", lambda r: (dcp(r, "step-10"), dcp(r, "step-20", finished=False)), "step-10", "dcp", 10),
    ("deepspeed-latest", lambda r: deepspeed(r, [100, 200], latest=200), "global_step200", "deepspeed", 200),
    # the save of 300 had not reached its 'latest' write: 200 is the newest complete
    ("deepspeed-newest-half", lambda r: deepspeed(r, [100, 200, 300], latest=200), "global_step200", "deepspeed", 200),
    ("deepspeed-no-latest", lambda r: deepspeed(r, [100], latest=None), None, None, None),
    ("megatron-tracker", lambda r: megatron(r, [100, 200, 300], tracked=200), "iter_0000200", "megatron", 200),
    ("megatron-no-tracker", lambda r: megatron(r, [100], tracked=None), None, None, None),
    ("torch-files-newest-cut",
     lambda r: (torch_file(r / "ckpt_step_10.pt"), truncated(torch_file(r / "src.tmp"), r / "ckpt_step_20.pt")),
     "ckpt_step_10.pt", "torch-file", 10),
    # an HF output dir: the final model and training_args.bin beside the checkpoints do not win
    ("hf-mixed-with-final-model",
     lambda r: (hf(r, 500), torch_file(r / "training_args.bin"), torch_file(r / "pytorch_model.bin"),
                (r / "runs").mkdir(), (r / "config.json").write_text("{}")),
     "checkpoint-500", "hf", 500),
    # temp names are not even candidates (nothing to warn about: a save may be under way)
    ("temp-files-never", lambda r: (torch_file(r / "step_9.pt.tmp"), torch_file(r / ".step_9.pt"),
                                    torch_file(r / "step_9.partial")), None, None, None),
]
QUIET = {"temp-files-never"}


@pytest.mark.parametrize(("builder", "name", "convention", "step", "quiet"),
                         [pytest.param(b, n, c, s, i in QUIET, id=i) for i, b, n, c, s in LAYOUTS])
def test_layouts(tmp_path: Path, builder: Layout, name: str | None, convention: str | None,
                 step: int | None, quiet: bool) -> None:
    root = tmp_path / "ck"
    root.mkdir()
    builder(root)
    found = find_checkpoint(str(root))
    if quiet:
        assert found.chosen is None and not found.candidates and found.warning() is None
    elif name is None:
        assert found.chosen is None, found
        assert found.warning() is not None and "--checkpoint-glob" in found.warning()  # type: ignore[operator]
    else:
        assert found.chosen is not None, found.summary()
        assert found.chosen.path == str(root / name)
        assert (found.chosen.convention, found.chosen.step) == (convention, step)
        assert found.warning() is None and name in found.summary()


def test_newest_incomplete_is_named_in_the_summary(tmp_path: Path) -> None:
    hf(tmp_path, 500)
    hf(tmp_path, 1000, state="cut")
    found = find_checkpoint(str(tmp_path))
    assert "1 newer, incomplete (checkpoint-1000: trainer_state.json cut short)" in found.summary()
    assert [c.name for c in found.incomplete] == ["checkpoint-1000"]


def test_lightning_last_symlink_is_followed(tmp_path: Path) -> None:
    lightning(tmp_path, "epoch=0-step=100.ckpt")
    lightning(tmp_path, "epoch=1-step=200.ckpt", t=2000)
    (tmp_path / "last.ckpt").symlink_to("epoch=1-step=200.ckpt")  # ModelCheckpoint._link_checkpoint
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "epoch=1-step=200.ckpt")
    assert found.chosen.step == 200


def test_empty_missing_and_unreadable(tmp_path: Path) -> None:
    empty = find_checkpoint(str(tmp_path))
    assert empty.chosen is None and empty.warning() is None and "empty" in empty.summary()
    missing = find_checkpoint(str(tmp_path / "nope"))
    assert missing.missing and missing.chosen is None and missing.warning() is None
    (tmp_path / "f").write_text("x")
    not_dir = find_checkpoint(str(tmp_path / "f"))  # os.scandir fails: reported, never raised
    assert not_dir.error is not None and not_dir.warning() is not None


def test_an_unreadable_entry_is_reported_and_the_rest_still_counts(tmp_path: Path) -> None:
    nxd(tmp_path, "step_5")
    (tmp_path / "step_10").symlink_to(tmp_path / "gone")  # stat fails: unreadable
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "step_5")
    bad = [c for c in found.candidates if c.name == "step_10"]
    assert bad and not bad[0].complete and "unreadable" in bad[0].why
    os.remove(tmp_path / "step_5" / "done")
    alone = find_checkpoint(str(tmp_path))
    assert alone.chosen is None and "step_10" in (alone.warning() or "")


def test_zip_tail_on_a_real_torch_save_and_a_truncated_copy(tmp_path: Path) -> None:
    whole = torch_file(tmp_path / "m.pt")
    assert zip_complete(str(whole))
    for keep in (0.99, 0.5, 0.01):
        assert not zip_complete(str(truncated(whole, tmp_path / f"cut{keep}.pt", keep)))
    data = whole.read_bytes()
    (tmp_path / "short.pt").write_bytes(data[:-1])  # one byte short of the end record
    assert not zip_complete(str(tmp_path / "short.pt"))
    (tmp_path / "tiny.pt").write_bytes(b"PK")
    assert not zip_complete(str(tmp_path / "tiny.pt"))


def test_zip_tail_accepts_a_zip_comment(tmp_path: Path) -> None:
    import zipfile

    p = tmp_path / "c.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a", b"1")
        z.comment = b"x" * 300
    assert zip_complete(str(p))


def test_the_user_rule_wins(tmp_path: Path) -> None:
    hf(tmp_path, 500)
    nxd(tmp_path, "step_10")
    (tmp_path / "mine_7").mkdir()
    (tmp_path / "mine_7" / "SUCCESS").write_text("")
    found = find_checkpoint(str(tmp_path), glob="mine_*", marker="SUCCESS")
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "mine_7")
    assert found.chosen.convention == "explicit"
    # the NxD rule alone, as before detection existed
    found = find_checkpoint(str(tmp_path), marker="done")
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "step_10")
    # an empty marker: every matching entry, files too
    torch_file(tmp_path / "w_3.pt")
    found = find_checkpoint(str(tmp_path), glob="w_*.pt", marker="")
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "w_3.pt")


def test_a_glob_alone_narrows_detection(tmp_path: Path) -> None:
    hf(tmp_path, 500)
    nxd(tmp_path, "step_10", t=5000)
    found = find_checkpoint(str(tmp_path), glob="checkpoint-*")
    assert found.chosen is not None and found.chosen.convention == "hf"


def test_snapshot_reads_trackers_and_stamps_bounded(tmp_path: Path) -> None:
    deepspeed(tmp_path, [100], latest=100)
    (tmp_path / "latest").write_text("global_step100\n" + "x" * 10_000)  # an absurd tracker: bounded read
    snap = snapshot_checkpoint_dir(str(tmp_path))
    assert len(snap.trackers["latest"]) <= 4096
    hf(tmp_path, 7)
    snap = snapshot_checkpoint_dir(str(tmp_path))
    entry = next(e for e in snap.entries if e.name == "checkpoint-7")
    assert "trainer_state.json" in entry.stamps and "trainer_state.json" in entry.json_ok


# -- the pure chooser on snapshots ---------------------------------------------------------------

def d(name: str, inner: tuple[str, ...] = (), t: float = 0.0, **kw: object) -> DirEntry:
    stamps = {n: t for n in inner}
    return DirEntry(name, f"/ck/{name}", True, t, inner=frozenset(inner), stamps=stamps,
                    json_ok=frozenset(n for n in inner if n.endswith(".json")), **kw)  # type: ignore[arg-type]


def f(name: str, zip_ok: bool, t: float = 0.0, size: int = 100) -> DirEntry:
    return DirEntry(name, f"/ck/{name}", False, t, size, zip_ok=zip_ok)


def test_pure_by_step_not_by_mtime_when_every_candidate_has_one() -> None:
    snap = CheckpointDir("/ck", (d("checkpoint-20", ("trainer_state.json",), t=10),
                                 d("checkpoint-100", ("trainer_state.json",), t=5)))
    found = detect(snap)
    assert found.chosen is not None and found.chosen.path == "/ck/checkpoint-100"


def test_pure_megatron_release_and_bad_tracker() -> None:
    snap = CheckpointDir("/ck", (d("release", ("mp_rank_00",)),), {"latest_checkpointed_iteration.txt": "release"})
    found = detect(snap)
    assert found.chosen is not None and (found.chosen.convention, found.chosen.step) == ("megatron", 0)
    garbled = CheckpointDir("/ck", (d("iter_0000010", ("mp_rank_00",)),), {"latest_checkpointed_iteration.txt": "x"})
    assert detect(garbled).chosen is None


def test_pure_deepspeed_custom_tag_named_by_latest() -> None:
    snap = CheckpointDir("/ck", (d("best", ("mp_rank_00_model_states.pt",)),), {"latest": "best"})
    found = detect(snap)
    assert found.chosen is not None and found.chosen.path == "/ck/best"


def test_pure_lightning_strategy_dirs() -> None:
    snap = CheckpointDir("/ck", (d("epoch=0-step=5.ckpt", ("latest", "checkpoint"), t=1),
                                 d("epoch=0-step=9.ckpt", ("checkpoint",), t=2)))
    found = detect(snap)
    assert found.chosen is not None and found.chosen.path == "/ck/epoch=0-step=5.ckpt"


def test_pure_error_and_names() -> None:
    assert detect(CheckpointDir("/ck", error="Permission denied")).stuck
    assert is_temporary(".metadata.tmp") and is_temporary("x.ckpt.partial") and is_temporary("a-unfinished")
    assert not is_temporary("epoch=1-step=2.ckpt")
    assert named_step("epoch=3-step=450.ckpt") == 450 and named_step("epoch=3.ckpt") == 3
    assert named_step("last.ckpt") is None
    assert detect(CheckpointDir("/ck", (f("a.ckpt", zip_ok=False, size=0),))).candidates[0].why == "empty"


# -- what the agent says at launch -----------------------------------------------------------------

def _agent(tmp_path: Path, **cfg: str) -> object:
    from neuron_watch.config import WatchConfig
    from neuron_watch.launchers.command import CommandLauncher
    from neuron_watch.node.agent import NodeAgent

    return NodeAgent(WatchConfig(**cfg), CommandLauncher(["true"], "m"), None, job_id="j", node="n0",  # type: ignore[arg-type]
                     run_dir=str(tmp_path / "run"), rank_env={})


def test_agent_says_the_convention_at_start_and_warns_at_every_launch(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    hf(ck, 500)
    agent = _agent(tmp_path, checkpoint_dir=str(ck))
    caplog.set_level("INFO", logger="neuron_watch")
    agent.checkpoints.say(0)  # type: ignore[attr-defined]
    assert [r.getMessage() for r in caplog.records] == [
        f"checkpoints: {CONVENTIONS_HF}; newest complete: {ck / 'checkpoint-500'} (step 500)"]
    assert agent.checkpoint() == str(ck / "checkpoint-500")  # type: ignore[attr-defined]
    caplog.clear()
    agent.checkpoints.say(1)  # type: ignore[attr-defined]
    assert caplog.records == []  # a restart with a complete checkpoint: nothing to add
    os.remove(ck / "checkpoint-500" / "trainer_state.json")
    for gen in (0, 1):
        caplog.clear()
        agent.checkpoints.say(gen)  # type: ignore[attr-defined]
        (rec,) = caplog.records
        assert rec.levelname == "WARNING" and f"generation {gen}:" in rec.getMessage()
        assert "checkpoint-500 (Hugging Face" in rec.getMessage() and "--checkpoint-marker" in rec.getMessage()
    assert agent.checkpoint() == ""  # type: ignore[attr-defined]


CONVENTIONS_HF = "Hugging Face Trainer (checkpoint-N/trainer_state.json)"


def test_config_tells_not_given_from_empty() -> None:
    from neuron_watch.config import load_config

    cfg = load_config({}, {})
    assert (cfg.checkpoint_marker, cfg.checkpoint_glob) == (None, None)  # automatic detection
    assert load_config({"checkpoint_marker": ""}, {}).checkpoint_marker == ""  # every matching entry
    assert load_config({}, {"NEURON_WATCH_CHECKPOINT_MARKER": "done"}).checkpoint_marker == "done"


def test_the_coordinators_chooser_detects_too(tmp_path: Path) -> None:
    from neuron_watch.config import WatchConfig
    from neuron_watch.runtime import checkpoint_chooser

    deepspeed(tmp_path, [100, 200], latest=100)
    assert checkpoint_chooser(WatchConfig(checkpoint_dir=str(tmp_path)))({}).path == str(tmp_path / "global_step100")
    # the user's rule: directories holding mp_rank_00_model_states.pt, newest by step in the name
    rule = WatchConfig(checkpoint_dir=str(tmp_path), checkpoint_marker="mp_rank_00_model_states.pt")
    assert checkpoint_chooser(rule)({}).path == str(tmp_path / "global_step200")


def test_a_save_torn_by_the_crash_is_passed_over_and_the_restart_says_so(tmp_path: Path) -> None:
    """The trial: rank 0 killed half-way through saving step_10 (no ``done`` yet). The restart resumes
    from step_5 and its event and console line say step_10 was passed over, and why."""
    from neuron_watch.config import WatchConfig
    from neuron_watch.outputs.console import ConsoleSink
    from neuron_watch.runtime import checkpoint_chooser

    nxd(tmp_path, "step_5", t=1000.0)
    nxd(tmp_path, "step_10", done=False, t=1010.0)
    choice = checkpoint_chooser(WatchConfig(checkpoint_dir=str(tmp_path)))({})
    assert choice.path == str(tmp_path / "step_5")
    (said,) = choice.passed_over
    assert said.startswith("step_10: ") and "done" in said, said
    # a complete newest save passes nothing over
    nxd(tmp_path, "step_15", t=1020.0)
    assert checkpoint_chooser(WatchConfig(checkpoint_dir=str(tmp_path)))({}).passed_over == ()
    line = ConsoleSink(max_restarts=3).format({"event": "restart", "generation": 1, "checkpoint": "ck/step_5",
                                               "restarts": 1, "passed_over": [said]})
    assert line is not None and f"from ck/step_5 (newer, incomplete: {said}); restart 1 of 3" in line, line


def test_a_directory_entry_that_cannot_be_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root here, chmod 000 does not stop us: make os.scandir refuse one entry as NFS/Lustre would.
    import neuron_watch.recovery.checkpoint_scan as scan

    hf(tmp_path, 500)
    hf(tmp_path, 1000, t=2000)
    real = os.scandir

    def refuse(path: str) -> object:
        if str(path).endswith("checkpoint-1000"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(scan.os, "scandir", refuse)
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "checkpoint-500")
    assert "checkpoint-1000: unreadable: Permission denied" in found.summary()


def test_the_summary_names_only_the_saves_a_restart_passes_over(tmp_path: Path) -> None:
    deepspeed(tmp_path, [100, 200, 300], latest=200)
    found = find_checkpoint(str(tmp_path))
    assert [c.name for c in found.newer_incomplete] == ["global_step300"]
    assert "1 newer, incomplete (global_step300: 'latest' names global_step200)" in found.summary()
