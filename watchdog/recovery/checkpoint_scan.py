"""Read a checkpoint directory (the I/O half of :mod:`neuron_watch.recovery.checkpoints`).

:func:`snapshot_checkpoint_dir` builds the snapshot :func:`~neuron_watch.recovery.checkpoints.detect` decides
on, with bounded reads; :func:`find_checkpoint` does both. :func:`scan_checkpoints` is the older
marker-only listing.
"""

from __future__ import annotations

import os
import stat

from neuron_watch.recovery.checkpoints import (
    STAMP_FILES,
    TRACKER_FILES,
    ZIP_SUFFIXES,
    CheckpointDir,
    CheckpointEntry,
    Detection,
    DirEntry,
    detect,
)


def scan_checkpoints(directory: str, marker: str) -> list[CheckpointEntry]:
    """Entries of ``directory``; a missing directory is empty (no checkpoint yet), not an error."""
    try:
        names = os.listdir(directory)
    except OSError:  # missing or unreadable: no checkpoint (find_checkpoint says which)
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


#: Bounds on what one scan reads: entries listed, names kept per directory, bytes of a tracker file,
#: bytes from the end of a file (a zip comment is at most 65535 bytes after the 22-byte record).
MAX_ENTRIES = 10_000
MAX_INNER = 4_096
TRACKER_BYTES = 4_096
JSON_TAIL_BYTES = 64
_EOCD = b"PK\x05\x06"
_EOCD_LEN = 22
_ZIP_TAIL_MAX = _EOCD_LEN + 65_535


def zip_complete(path: str) -> bool:
    """Whether the file at ``path`` ends with a zip end-of-central-directory record.

    A ``torch.save`` zip is written front to back and the record comes last (zip64 files too: the
    classic record still closes the file), so a file cut short lacks it. Reads 22 bytes for the
    usual comment-less record, at most 64 KiB more when there is a comment. Raises OSError.
    """
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < _EOCD_LEN:
            return False
        f.seek(size - _EOCD_LEN)
        tail = f.read(_EOCD_LEN)
        if tail[:4] == _EOCD and tail[20:22] == b"\x00\x00":
            return True
        n = min(size, _ZIP_TAIL_MAX)
        f.seek(size - n)
        tail = f.read(n)
    at = tail.rfind(_EOCD)
    while at >= 0:
        if at + _EOCD_LEN <= len(tail):
            comment = int.from_bytes(tail[at + 20:at + 22], "little")
            if at + _EOCD_LEN + comment == len(tail):
                return True
        at = tail.rfind(_EOCD, 0, at)
    return False


def _json_whole(path: str) -> bool:
    """The file's last non-blank byte is ``}``: a JSON object written out in full (bounded read)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - JSON_TAIL_BYTES))
        return f.read().rstrip().endswith(b"}")


def _read_entry(directory: str, name: str, marker: str | None) -> DirEntry:
    path = os.path.join(directory, name)
    try:
        link = os.readlink(path) if os.path.islink(path) else None
        st = os.stat(path)  # follows a symlink: a dangling one is an OSError, reported below
    except OSError as exc:
        return DirEntry(name, path, False, 0.0, error=exc.strerror or str(exc))
    is_dir = stat.S_ISDIR(st.st_mode)
    if not is_dir:
        zip_ok = None
        if name.endswith(".ckpt") or name.endswith(ZIP_SUFFIXES):
            try:
                zip_ok = zip_complete(path)
            except OSError as exc:
                return DirEntry(name, path, False, st.st_mtime, st.st_size, link=link, error=exc.strerror or str(exc))
        return DirEntry(name, path, False, st.st_mtime, st.st_size, zip_ok=zip_ok, link=link)
    try:
        inner: list[str] = []
        with os.scandir(path) as it:
            for i, d in enumerate(it):
                if i >= MAX_INNER:
                    break
                inner.append(d.name)
    except OSError as exc:
        return DirEntry(name, path, True, st.st_mtime, link=link, error=exc.strerror or str(exc))
    names = frozenset(inner)
    stamps: dict[str, float] = {}
    json_ok: set[str] = set()
    for s in (*STAMP_FILES, *((marker,) if marker else ())):
        if s in names:
            try:
                stamps[s] = os.stat(os.path.join(path, s)).st_mtime
                if s.endswith(".json") and _json_whole(os.path.join(path, s)):
                    json_ok.add(s)
            except OSError:
                continue  # gone between the listing and now: the convention sees it as missing
    return DirEntry(name, path, True, st.st_mtime, inner=names, stamps=stamps, json_ok=frozenset(json_ok),
                    link=link)


def snapshot_checkpoint_dir(directory: str, marker: str | None = None) -> CheckpointDir:
    """Read ``directory`` into a :class:`CheckpointDir` for :func:`~neuron_watch.recovery.checkpoints.detect`.

    Never raises: a missing directory is ``missing`` (no checkpoint yet), an unreadable one carries
    ``error``, an unreadable entry carries its own ``error``. Reads are bounded (see the constants
    above): no file is read whole except tracker files of at most :data:`TRACKER_BYTES`.
    """
    try:
        with os.scandir(directory) as it:
            names = [d.name for _, d in zip(range(MAX_ENTRIES), it, strict=False)]
    except FileNotFoundError:
        return CheckpointDir(directory, missing=True)
    except OSError as exc:
        return CheckpointDir(directory, error=exc.strerror or str(exc))
    trackers: dict[str, str] = {}
    tracker_mtimes: dict[str, float] = {}
    for t in TRACKER_FILES:
        if t in names:
            p = os.path.join(directory, t)
            try:
                with open(p, "rb") as f:
                    trackers[t] = f.read(TRACKER_BYTES).decode("utf-8", "replace").strip()
                tracker_mtimes[t] = os.stat(p).st_mtime
            except OSError:
                continue
    entries = tuple(_read_entry(directory, n, marker) for n in sorted(names))
    return CheckpointDir(directory, entries, trackers, tracker_mtimes)


def find_checkpoint(directory: str, glob: str | None = None, marker: str | None = None) -> Detection:
    """Snapshot ``directory`` and :func:`~neuron_watch.recovery.checkpoints.detect` the checkpoint to resume from."""
    return detect(snapshot_checkpoint_dir(directory, marker), glob, marker)
