"""Choose the checkpoint to restart from. Pure: the directory listing is passed in.

The default rule is the NxD convention (notes/neuron.md §2.1): a checkpoint is a subdirectory
(tag) of the checkpoint directory; it is *complete* when it holds a ``done`` file, written last.
The newest is the one with the highest step number in its name (``step_120`` > ``step_95``),
ties and names without a number ordered by the marker's mtime.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

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
