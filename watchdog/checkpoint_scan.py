"""Read a checkpoint directory into :class:`CheckpointEntry` records (the I/O half of checkpoints)."""

from __future__ import annotations

import os

from neuron_watch.checkpoints import CheckpointEntry


def scan_checkpoints(directory: str, marker: str) -> list[CheckpointEntry]:
    """Entries of ``directory``; a missing directory is empty (no checkpoint yet), not an error."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = os.path.join(directory, name)
        is_dir = os.path.isdir(path)
        marker_path = os.path.join(path, marker) if (marker and is_dir) else None
        has_marker = marker_path is not None and os.path.exists(marker_path)
        try:
            mtime = os.path.getmtime(marker_path if has_marker and marker_path else path)
        except OSError:
            continue
        out.append(CheckpointEntry(name, path, is_dir, has_marker, mtime))
    return out
