"""Choose the checkpoint to restart from. Pure: a snapshot of the directory is passed in.

By default :func:`detect` recognises each framework's own completeness convention (NxD ``done``,
Hugging Face ``checkpoint-N/trainer_state.json``, Lightning/NeMo ``.ckpt`` and ``-unfinished``
markers, torch.distributed.checkpoint ``.metadata``, DeepSpeed ``latest``, Megatron-LM
``latest_checkpointed_iteration.txt``, single ``torch.save`` files checked for a whole zip); each
rule cites the framework source it comes from. The newest complete checkpoint wins; a half-written
one never.

The user's explicit rule (``--checkpoint-glob``/``--checkpoint-marker``, :class:`CheckpointRule`)
replaces detection: a checkpoint is a subdirectory (tag) holding the marker file (NxD: ``done``).
The newest is the one with the highest step number in its name (``step_120`` > ``step_95``), ties
and names without a number ordered by the marker's mtime.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True)
class CheckpointEntry:
    """One entry of the checkpoint directory as seen on disk."""

    name: str
    path: str
    is_dir: bool
    has_marker: bool
    mtime: float  # of the marker when there is one, else of the entry


@dataclass(frozen=True)
class CheckpointRule:
    """What counts as a complete checkpoint: entries matching ``glob`` that hold ``marker``.

    ``marker=""`` accepts any directory (and plain files) matching ``glob``.
    """

    glob: str = "*"
    marker: str = "done"


def step_of(name: str) -> int | None:
    """The last number in ``name`` (``step_120`` -> 120, ``hf_llama--step=5-consumed=160.0.ckpt`` -> 160)."""
    nums = _NUMBER.findall(name)
    return int(nums[-1]) if nums else None


def _step_for_sort(name: str) -> int:
    # NxDT names end with consumed_samples; prefer an explicit "step" number when present.
    m = re.search(r"step[=_-]?(\d+)", name)
    if m:
        return int(m.group(1))
    s = step_of(name)
    return -1 if s is None else s


def complete_checkpoints(entries: Iterable[CheckpointEntry], rule: CheckpointRule) -> list[CheckpointEntry]:
    """The complete checkpoints among ``entries``, oldest first."""
    ok = [
        e
        for e in entries
        if fnmatch.fnmatchcase(e.name, rule.glob) and (e.has_marker if rule.marker else True)
        and (e.is_dir or not rule.marker)
    ]
    return sorted(ok, key=lambda e: (_step_for_sort(e.name), e.mtime, e.name))


def choose_checkpoint(entries: Iterable[CheckpointEntry], rule: CheckpointRule) -> CheckpointEntry | None:
    """The newest complete checkpoint, or None when there is none."""
    done = complete_checkpoints(entries, rule)
    return done[-1] if done else None


def incomplete_checkpoints(entries: Iterable[CheckpointEntry], rule: CheckpointRule) -> list[CheckpointEntry]:
    """Directories that match ``glob`` but lack the marker (interrupted saves), for the report."""
    if not rule.marker:
        return []
    return [e for e in entries if e.is_dir and fnmatch.fnmatchcase(e.name, rule.glob) and not e.has_marker]


# -- automatic detection: every framework's own completeness convention ---------------------------
#
# The I/O half (checkpoint_scan.snapshot_checkpoint_dir) reads the directory into a CheckpointDir
# snapshot with bounded reads; detect() below decides, from the snapshot alone, which entries are
# complete checkpoints of which convention and which one a restart resumes from.

#: Top-level tracker files whose (small) contents name the newest complete tag.
#: DeepSpeed ``runtime/engine.py`` ``save_checkpoint``: rank 0 writes ``<save_dir>/latest`` holding
#: the tag *after* every rank saved (and after ``checkpoint_engine.commit``); ``load_checkpoint(dir,
#: tag=None)`` reads it. ``latest_universal`` is the same for universal checkpoints.
#: Megatron-LM ``megatron/training/checkpointing.py`` ``save_checkpoint``: ``iter_finalize_fn``
#: writes ``latest_checkpointed_iteration.txt`` (the iteration, or ``release``) last, after the
#: (possibly async) save of ``iter_{:07d}`` finished; ``--load`` reads it (``read_metadata``).
DEEPSPEED_TRACKER = "latest"
MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
TRACKER_FILES = (DEEPSPEED_TRACKER, "latest_universal", MEGATRON_TRACKER)
#: Files inside a directory whose mtime (and, for JSON, whose tail) the scanner records.
STAMP_FILES = ("done", "trainer_state.json", ".metadata", "latest")
#: Single files whose tail is checked for a zip end-of-central-directory record (torch.save).
ZIP_SUFFIXES = (".ckpt", ".pt", ".pth", ".bin", ".pth.tar")

_HF_DIR = re.compile(r"^checkpoint-(\d+)$")  # transformers trainer_utils.py _re_checkpoint
_MEGATRON_DIR = re.compile(r"^iter_(\d{7})$")  # Megatron checkpointing.py get_checkpoint_name
_DEEPSPEED_DIR = re.compile(r"^global_step(\d+)$")  # DeepSpeed engine.py: tag = f"global_step{global_steps}"
_DEEPSPEED_STATE = re.compile(r"^(mp_rank_\d+_model_states\.pt|.*zero_pp_rank_\d+.*_optim_states\.pt)$")
_NAMED_STEP = re.compile(r"(?:^|[^a-z])(?:step|global_step|iter|iteration)[=_-]?(\d+)", re.IGNORECASE)
_NAMED_EPOCH = re.compile(r"(?:^|[^a-z])epoch[=_-]?(\d+)", re.IGNORECASE)
#: NeMo ``nemo/lightning/pytorch/callbacks/model_checkpoint.py``: ``set_checkpoint_unfinished_marker``
#: touches ``<path without .ckpt/-EMA>-unfinished`` before a save, the save's finalize removes it.
NEMO_UNFINISHED = "-unfinished"
#: transformers ``trainer.py``: ``training_args.bin`` (TRAINING_ARGS_NAME) is torch.save'd arguments,
#: not training state.
_NOT_STATE = frozenset({"training_args.bin"})

#: Human names of the conventions, for log lines.
CONVENTIONS = {
    "nxd": "NxD (done marker)",
    "hf": "Hugging Face Trainer (checkpoint-N/trainer_state.json)",
    "lightning": "Lightning (.ckpt)",
    "nemo": "NeMo (-unfinished markers)",
    "dcp": "torch.distributed.checkpoint (.metadata)",
    "deepspeed": "DeepSpeed (latest)",
    "megatron": "Megatron-LM (latest_checkpointed_iteration.txt)",
    "torch-file": "torch.save file",
    "explicit": "--checkpoint-glob/--checkpoint-marker",
}


@dataclass(frozen=True)
class DirEntry:
    """One entry of the checkpoint directory, with the few facts the conventions need.

    ``inner``: names inside a directory (one level). ``stamps``: mtime of the :data:`STAMP_FILES`
    (and the user's marker) found inside. ``json_ok``: inner JSON files whose last non-blank byte is
    ``}`` (written out in full). ``zip_ok``: a single file ends with a zip end-of-central-directory
    record (None: not checked). ``link``: the symlink's target as written. ``error``: why the entry
    could not be read (then nothing else is known).
    """

    name: str
    path: str
    is_dir: bool
    mtime: float
    size: int = 0
    inner: frozenset[str] = frozenset()
    stamps: Mapping[str, float] = field(default_factory=dict)
    json_ok: frozenset[str] = frozenset()
    zip_ok: bool | None = None
    link: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class CheckpointDir:
    """A snapshot of ``--checkpoint-dir``: its entries and the contents of its tracker files."""

    directory: str
    entries: tuple[DirEntry, ...] = ()
    trackers: Mapping[str, str] = field(default_factory=dict)  # name -> stripped contents
    tracker_mtimes: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None  # the directory itself could not be listed
    missing: bool = False  # it does not exist (yet): no checkpoint, not an error


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint a restart resumes from: the path the framework's own resume takes."""

    path: str
    convention: str  # a key of CONVENTIONS
    step: int | None


@dataclass(frozen=True)
class Candidate:
    """An entry a convention recognised, complete or not (``why`` says what is missing)."""

    name: str
    path: str
    convention: str
    step: int | None
    time: float  # when it was completed (its stamp file's mtime), else the entry's mtime
    complete: bool
    why: str = ""


@dataclass(frozen=True)
class Detection:
    """What :func:`detect` found in a :class:`CheckpointDir`."""

    directory: str
    chosen: Checkpoint | None
    candidates: tuple[Candidate, ...] = ()  # recognised entries, complete or not
    unrecognised: tuple[str, ...] = ()  # entries no convention claims
    error: str | None = None
    missing: bool = False

    @property
    def conventions(self) -> list[str]:
        return sorted({c.convention for c in self.candidates})

    @property
    def incomplete(self) -> list[Candidate]:
        return [c for c in self.candidates if not c.complete]

    @property
    def newer_incomplete(self) -> list[Candidate]:
        """Incomplete entries newer than the chosen checkpoint (the saves a restart passes over)."""
        return newer_incomplete(self, self.chosen)

    @property
    def stuck(self) -> bool:
        """Entries are there but none is a complete checkpoint: a restart would begin from scratch."""
        return self.chosen is None and (bool(self.candidates) or bool(self.unrecognised) or self.error is not None)

    def summary(self) -> str:
        """One line for the log: the conventions found and the newest complete checkpoint."""
        if self.missing:
            return f"checkpoints: {self.directory} does not exist yet: starting from scratch"
        if self.error is not None:
            return f"checkpoints: cannot read {self.directory}: {self.error}"
        if self.chosen is None:
            if not self.candidates and not self.unrecognised:
                return f"checkpoints: {self.directory} is empty: starting from scratch"
            return f"checkpoints: {self.directory}: no complete checkpoint"
        c = self.chosen
        found = ", ".join(CONVENTIONS.get(n, n) for n in self.conventions)
        step = "" if c.step is None else f" (step {c.step})"
        skipped = self.newer_incomplete
        tail = f"; {len(skipped)} newer, incomplete ({_list(skipped)})" if skipped else ""
        return f"checkpoints: {found}; newest complete: {c.path}{step}{tail}"

    def warning(self) -> str | None:
        """What to say when entries exist but none is complete (None when there is nothing to say)."""
        if not self.stuck:
            return None
        if self.error is not None:
            what = f"cannot read {self.directory}: {self.error}"
        else:
            parts = [f"{c.name} ({CONVENTIONS.get(c.convention, c.convention)}: {c.why})" for c in self.candidates]
            parts += [f"{n} (no known checkpoint convention)" for n in self.unrecognised]
            more = f", and {len(parts) - 6} more" if len(parts) > 6 else ""
            what = (f"{self.directory} holds {len(parts)} entries but no complete checkpoint: "
                    f"{', '.join(parts[:6])}{more}")
        return (f"{what}; the job starts from scratch. If your checkpoints are complete in another way, "
                "say which entries are checkpoints and the file that marks one complete: "
                "--checkpoint-glob GLOB --checkpoint-marker FILE (empty FILE = every matching entry)")


def _list(cands: Sequence[Candidate]) -> str:
    shown = ", ".join(f"{c.name}: {c.why}" for c in cands[:3])
    return shown + (f", and {len(cands) - 3} more" if len(cands) > 3 else "")


def is_temporary(name: str) -> bool:
    """Names that are never checkpoints: hidden files, temp files of an atomic write, NeMo markers.

    fsspec's local transaction (Lightning ``_atomic_save``) writes elsewhere and moves the file in;
    DCP writes ``.metadata.tmp`` then renames; editors and rsync leave ``.name`` / ``*.partial``.
    """
    return (name.startswith(".") or name.endswith((".tmp", ".partial", ".temp", ".incomplete", "~"))
            or name.endswith(NEMO_UNFINISHED))


def named_step(name: str) -> int | None:
    """The step in a file name (``epoch=2-step=300.ckpt`` -> 300), else the epoch, else None."""
    m = _NAMED_STEP.search(name) or _NAMED_EPOCH.search(name)
    return int(m.group(1)) if m else None


def _nemo_marker(name: str) -> str:
    """NeMo's marker name for a checkpoint (``format_checkpoint_unfinished_marker_path``)."""
    stem = name.removesuffix(".ckpt").removesuffix("-EMA")
    return stem + NEMO_UNFINISHED


@dataclass(frozen=True)
class _Tracked:
    """What the tracker files name: DeepSpeed's tag and Megatron's iteration directory."""

    ds_tag: str | None = None
    ds_step: int | None = None
    ds_time: float = 0.0
    mg_dir: str | None = None
    mg_time: float = 0.0


def _tracked(snap: CheckpointDir) -> _Tracked:
    ds_name = DEEPSPEED_TRACKER if snap.trackers.get(DEEPSPEED_TRACKER) else "latest_universal"
    ds_tag = snap.trackers.get(ds_name) or None
    ds_step = None
    if ds_tag:
        m = _DEEPSPEED_DIR.match(ds_tag)
        ds_step = int(m.group(1)) if m else step_of(ds_tag)
    mg_dir = None
    text = snap.trackers.get(MEGATRON_TRACKER)
    if text == "release":  # read_metadata: a release checkpoint, iteration 0, directory "release"
        mg_dir = "release"
    elif text is not None and text.isdigit():
        mg_dir = f"iter_{int(text):07d}"
    return _Tracked(ds_tag, ds_step, snap.tracker_mtimes.get(ds_name, 0.0), mg_dir,
                    snap.tracker_mtimes.get(MEGATRON_TRACKER, 0.0))


def _recognise(e: DirEntry, tr: _Tracked, names: frozenset[str]) -> Candidate | None:
    """The convention that claims ``e`` and whether ``e`` is complete under it (None: none claims it)."""
    ds_tag, ds_step, ds_time, mg_dir, mg_time = tr.ds_tag, tr.ds_step, tr.ds_time, tr.mg_dir, tr.mg_time
    unfinished = _nemo_marker(e.name) in names

    def cand(conv: str, complete: bool, why: str = "", step: int | None = None, stamp: str = "",
             time: float | None = None) -> Candidate:
        t = time if time is not None else e.stamps.get(stamp, e.mtime)
        if unfinished:  # NeMo's marker overrides every other sign of completeness
            return Candidate(e.name, e.path, "nemo", step, t, False, f"NeMo marker {_nemo_marker(e.name)} present")
        return Candidate(e.name, e.path, conv, step, t, complete, why)

    if e.is_dir:
        m = _MEGATRON_DIR.match(e.name)
        if m or (e.name == "release" and mg_dir == "release"):
            it = int(m.group(1)) if m else 0
            ok = mg_dir == e.name
            why = "" if ok else (f"{MEGATRON_TRACKER} names {mg_dir}" if mg_dir else f"no {MEGATRON_TRACKER}")
            return cand("megatron", ok, why, it, time=mg_time if ok else None)
        m = _DEEPSPEED_DIR.match(e.name)
        if m or e.name == ds_tag or any(_DEEPSPEED_STATE.match(n) for n in e.inner):
            ok = ds_tag == e.name
            why = "" if ok else (f"'latest' names {ds_tag}" if ds_tag else "no 'latest' file names it")
            step = int(m.group(1)) if m else (ds_step if ok else step_of(e.name))
            return cand("deepspeed", ok, why, step, time=ds_time if ok else None)
        m = _HF_DIR.match(e.name)
        if m:
            # transformers trainer.py _save_checkpoint: model, optimizer, scheduler, RNG, then
            # trainer_state.json last (TrainerState.save_to_json, a plain write: check its tail).
            if "trainer_state.json" not in e.inner:
                return cand("hf", False, "no trainer_state.json", int(m.group(1)))
            if "trainer_state.json" not in e.json_ok:
                return cand("hf", False, "trainer_state.json cut short", int(m.group(1)))
            return cand("hf", True, "", int(m.group(1)), "trainer_state.json")
        if "weights" in e.inner and "context" in e.inner:
            # NeMo 2 distributed checkpoint: <name>/weights (DCP) + <name>/context; complete when
            # its -unfinished marker is gone (handled in cand()).
            return cand("nemo", True, "", named_step(e.name))
        if e.name.endswith(".ckpt"):
            # Lightning's DeepSpeed strategy saves a .ckpt directory (engine.save_checkpoint(...,
            # tag="checkpoint"), 'latest' last); FSDP's sharded one is DCP (.metadata last).
            ok = "latest" in e.inner or ".metadata" in e.inner
            return cand("lightning", ok, "" if ok else "no 'latest' or .metadata inside", named_step(e.name),
                        "latest" if "latest" in e.inner else ".metadata")
        if "done" in e.inner or "checkpoint" in e.inner:
            # NxD trainer/checkpoint.py: 'checkpoint' written when a save begins, 'done' when every
            # rank finished.
            ok = "done" in e.inner
            return cand("nxd", ok, "" if ok else "no done file (save interrupted or running)",
                        _step_for_sort(e.name) if step_of(e.name) is not None else None, "done")
        if ".metadata" in e.inner or any(n.endswith(".distcp") for n in e.inner):
            # torch/distributed/checkpoint/filesystem.py FileSystemWriter.finish: the coordinator
            # writes .metadata.tmp and renames it to .metadata after every rank's data was written.
            ok = ".metadata" in e.inner
            return cand("dcp", ok, "" if ok else "no .metadata (save interrupted)", named_step(e.name), ".metadata")
        return None
    if e.name in _NOT_STATE:
        return None
    if e.name.endswith(".ckpt") or e.name.endswith(ZIP_SUFFIXES):
        # A complete torch.save file is a zip whose last record is the end of central directory
        # (torch/serialization.py writes through PyTorchFileWriter, a zip). Lightning _atomic_save
        # (lightning/fabric/utilities/cloud_io.py) writes through an fsspec transaction: a temp
        # file moved into place; across file systems that move is a copy, visible half-written.
        conv = "lightning" if e.name.endswith(".ckpt") else "torch-file"
        if e.zip_ok:
            return cand(conv, True, "", named_step(e.name))
        why = "empty" if e.size == 0 else "no zip end record at its end (half-written, or not a torch.save zip)"
        return cand(conv, False, why, named_step(e.name))
    return None


def _newest(cands: Sequence[Candidate]) -> Candidate:
    """By step when every candidate has one (ties by time), else by the time it was completed."""
    if all(c.step is not None for c in cands):
        return max(cands, key=lambda c: (c.step or 0, c.time, c.name))
    return max(cands, key=lambda c: (c.time, c.step if c.step is not None else -1, c.name))


class CheckpointChoice(NamedTuple):
    """A restart's checkpoint ('' = from scratch) and the newer entries it passed over as incomplete
    (``"step_10: no `done` (written last)"``: a save torn by the crash), for the restart event and the
    console: a user sees why the newest save on disk was not the one resumed from."""

    path: str
    passed_over: tuple[str, ...] = ()


def passed_over(found: Detection, chosen: Checkpoint | None) -> tuple[str, ...]:
    """The incomplete entries newer than ``chosen`` (every incomplete one without a choice), said as
    ``name: why``, at most 10. Pure."""
    return tuple(f"{c.name}: {c.why}" for c in newer_incomplete(found, chosen)[:10])


def newer_incomplete(found: Detection, chosen: Checkpoint | None) -> list[Candidate]:
    """The incomplete entries of ``found`` newer than ``chosen`` (all of them without one). Pure."""
    if chosen is None:
        return found.incomplete
    at = next((c for c in found.candidates if c.path == chosen.path), None)
    if at is None:
        return found.incomplete
    return [c for c in found.incomplete
            if (c.step > at.step if c.step is not None and at.step is not None else c.time > at.time)]


def newest_complete(found: Detection, avoid: Collection[str] = ()) -> Checkpoint | None:
    """The checkpoint to resume from: ``found.chosen``, or, when that one is in ``avoid`` (a
    generation started from it failed before its first step: it may not load), the newest
    complete candidate not in ``avoid`` (None: from scratch). Pure."""
    if found.chosen is None or found.chosen.path not in avoid:
        return found.chosen
    rest = [c for c in found.candidates if c.complete and c.path not in avoid]
    if not rest:
        return None
    best = _newest(rest)
    return Checkpoint(best.path, best.convention, best.step)


def detect(snap: CheckpointDir, glob: str | None = None, marker: str | None = None) -> Detection:
    """Find the newest complete checkpoint in a snapshot of the checkpoint directory.

    Args:
        snap: the directory as :func:`~neuron_watch.recovery.checkpoint_scan.snapshot_checkpoint_dir` read it.
        glob: only entries whose name matches it are considered (None: all).
        marker: the user's own rule: a complete checkpoint is a matching directory holding this file
            ('' = every matching entry); None = recognise the frameworks' conventions.

    Returns:
        A :class:`Detection`; ``chosen`` is None when there is no complete checkpoint. A Lightning
        ``last.ckpt`` symlink is followed to the file it names. Never raises on odd input.
    """
    if snap.error is not None or snap.missing:
        return Detection(snap.directory, None, error=snap.error, missing=snap.missing)
    entries = [e for e in snap.entries if glob is None or fnmatch.fnmatchcase(e.name, glob)]
    if marker is not None:
        return _detect_explicit(snap.directory, entries, CheckpointRule(glob or "*", marker))
    names = frozenset(e.name for e in snap.entries)
    tracked = _tracked(snap)
    cands: list[Candidate] = []
    unknown: list[str] = []
    generic: list[Candidate] = []
    for e in entries:
        if is_temporary(e.name) or e.name in TRACKER_FILES:
            continue
        if e.error is not None:
            cands.append(Candidate(e.name, e.path, "unknown", None, e.mtime, False, f"unreadable: {e.error}"))
            continue
        if e.link is not None and "/" not in e.link.rstrip("/") and e.link in names:
            continue  # Lightning last.ckpt -> epoch=..ckpt (_link_checkpoint): the target is its own entry
        c = _recognise(e, tracked, names)
        if c is None:
            unknown.append(e.name + ("/" if e.is_dir else ""))
        elif c.convention == "torch-file":
            generic.append(c)
        else:
            cands.append(c)
    # Loose .pt/.bin files count only where no framework's layout is there (an HF output dir also
    # holds the final pytorch_model.bin, a Lightning dir may hold exported weights).
    if not cands:
        cands = generic
    elif generic:
        unknown.extend(c.name for c in generic)
    ordered = sorted(cands, key=lambda c: (c.time, c.name))
    complete = [c for c in ordered if c.complete]
    chosen = None
    if complete:
        best = _newest(complete)
        chosen = Checkpoint(best.path, best.convention, best.step)
    return Detection(snap.directory, chosen, tuple(ordered), tuple(sorted(unknown)))


def _detect_explicit(directory: str, entries: Sequence[DirEntry], rule: CheckpointRule) -> Detection:
    """The user's rule (--checkpoint-glob/--checkpoint-marker), as before automatic detection."""
    old = [CheckpointEntry(e.name, e.path, e.is_dir, rule.marker in e.inner if rule.marker else False,
                           e.stamps.get(rule.marker, e.mtime) if rule.marker else e.mtime)
           for e in entries if e.error is None and not is_temporary(e.name)]
    chosen = choose_checkpoint(old, rule)
    done = {e.name for e in complete_checkpoints(old, rule)}
    cands = tuple(
        Candidate(e.name, e.path, "explicit", step_of(e.name), e.mtime, e.name in done,
                  "" if e.name in done else f"no {rule.marker} inside")
        for e in old if fnmatch.fnmatchcase(e.name, rule.glob) and (e.is_dir or not rule.marker)
    )
    pick = None if chosen is None else Checkpoint(chosen.path, "explicit", step_of(chosen.name))
    return Detection(directory, pick, cands)
