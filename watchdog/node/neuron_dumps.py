"""What the Neuron runtime and compiler left on this node, copied into an incident's bundle.

Core dumps (this incident's ``NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY``), complete input dumps
(``input_dump_*`` with its ``model_name.txt``), NDET logs and ``neuron-det``'s reading of them, and
the newest failed-compile logs (``log-neuron-cc.txt``; a cache entry with ``model.log`` and no
``model.neff``). The copies share one byte budget and stop at the capture's deadline; what is
skipped is said in the manifest.
"""

from __future__ import annotations

import contextlib
import glob
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from neuron_watch.diagnosis.logread import tail_bytes
from neuron_watch.node.bundle import Recorder

#: Never copy more than this many bytes of core dumps / input dumps per incident (disk is finite).
COPY_BUDGET_BYTES = 8 * 1024**3
#: At most this many failed-compile logs (a poisoned cache can hold hundreds).
MAX_COMPILE_LOGS = 20
#: Lines kept from the end of each compile log, at most this many bytes of them (as a rank log's
#: tail: a log of multi-megabyte lines must not fill the bundle or memory).
COMPILE_LOG_LINES = 2000
COMPILE_LOG_BYTES = 4 << 20


def _tail(path: Path) -> bytes:
    """The end of a compile log (:data:`COMPILE_LOG_LINES`, :data:`COMPILE_LOG_BYTES`), read from its end only."""
    return tail_bytes(str(path), COMPILE_LOG_LINES, COMPILE_LOG_BYTES)[0]


def copy_tree(src: Path, dest_rel: str, rec: Recorder, budget: list[int], what: str) -> int:
    """Copy files under ``src`` into the bundle; stops at the deadline or the byte budget."""
    copied = 0
    for p in sorted(src.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        if rec.remaining() <= 0:
            rec.miss(what, f"deadline passed while copying {src}; copied {copied} files")
            rec.timed_out.append(what)
            return copied
        size = p.stat().st_size
        if size > budget[0]:
            rec.miss(f"{dest_rel}/{p.relative_to(src).as_posix()}", f"over the copy budget ({size} bytes)")
            continue
        dest = rec.root / dest_rel / p.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(p, dest)
        except OSError as exc:
            rec.miss(f"{dest_rel}/{p.relative_to(src).as_posix()}", f"cannot copy: {exc.strerror or exc}")
            continue
        budget[0] -= size
        copied += 1
    return copied


def collect_core_dumps(rec: Recorder, d: Path | None, budget: list[int]) -> None:
    if d is None:
        rec.miss("core-dump", "no core-dump directory configured for this incident")
    elif not d.is_dir():
        rec.miss("core-dump", f"{d} does not exist (the runtime wrote no core dump)")
    elif copy_tree(d, "core-dump", rec, budget, "core-dump") == 0:
        rec.miss("core-dump", f"{d} is empty")


def search_dirs(run_dir: Path, work_dirs: Sequence[Path]) -> list[Path]:
    """The run directory and the ranks' working directories that exist, each once."""
    seen: list[Path] = []
    for d in (run_dir, *work_dirs):
        if d not in seen and d.is_dir():
            seen.append(d)
    return seen


def collect_input_dumps(rec: Recorder, dirs: Sequence[Path], budget: list[int]) -> None:
    found = 0
    for base in dirs:
        for d in sorted(base.glob("input_dump_*")) + sorted(base.glob("gen-*/input_dump_*")):
            if not d.is_dir():
                continue
            # The runtime docs: a dump is complete when model_name.txt is fully written.
            if not (d / "model_name.txt").is_file():
                rec.miss(f"input-dumps/{d.name}", "incomplete (no model_name.txt yet); not copied")
                continue
            copy_tree(d, f"input-dumps/{d.name}", rec, budget, "input-dumps")
            found += 1
    if not found:
        rec.miss("input-dumps", "no complete input_dump_* directory "
                 "(NEURON_RT_DBG_DUMP_INPUTS_ON_ERR unset or no error)")


def collect_ndet(rec: Recorder, env: Mapping[str, str], budget: list[int]) -> None:
    flush = env.get("NEURON_RT_DBG_NDET_FLUSH_USEC", "0").strip()
    location = Path(env.get("NEURON_RT_DBG_NDET_LOG_LOCATION", "/tmp"))
    if flush in ("", "0"):
        rec.miss("ndet", "NDET logging is off (NEURON_RT_DBG_NDET_FLUSH_USEC unset or 0)")
        return
    files = sorted(p for p in location.glob("ndet_*") if p.is_file()) if location.is_dir() else []
    if not files:
        rec.miss("ndet", f"no ndet_* files in {location}")
        return
    for p in files:
        if rec.remaining() <= 0:
            rec.timed_out.append("ndet")
            rec.miss("ndet", "deadline passed while copying NDET logs")
            return
        size = p.stat().st_size
        if size <= budget[0]:
            shutil.copyfile(p, _mkdir(rec.root / "ndet") / p.name)
            budget[0] -= size
    res = rec.tool("ndet/neuron-det.txt", ["neuron-det", "--log-prefix", str(location), "-o",
                                           str(rec.root / "ndet" / "trace.json")])
    if res is not None:
        rc, out, err = res
        rec.write("ndet/neuron-det.txt", f"# exit {rc}\n{out}{err}")


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def collect_compile_logs(rec: Recorder, dirs: Sequence[Path], workdir_glob: str, cache: Path | None) -> None:
    n = 0
    cands: list[Path] = [Path(p) for p in glob.glob(workdir_glob)]
    for d in dirs:
        cands += sorted(d.glob("log-neuron-cc.txt")) + sorted(d.glob("*/log-neuron-cc.txt"))
    # newest first: the failing graph is the most recent compile
    for p in sorted(set(cands), key=lambda q: q.stat().st_mtime if q.exists() else 0, reverse=True):
        if n >= MAX_COMPILE_LOGS:
            break
        with contextlib.suppress(OSError):
            rec.write(f"compile/workdir-{n}-{p.parent.name}-log-neuron-cc.txt", _tail(p))
            n += 1
    failed = 0
    if cache is not None and cache.is_dir():
        for log in sorted(cache.glob("neuronxcc-*/MODULE_*/model.log")):
            # A failed (poisoned) cache entry has model.log and no model.neff (the compile cache's layout).
            if (log.parent / "model.neff").exists() or failed >= MAX_COMPILE_LOGS:
                continue
            with contextlib.suppress(OSError):
                rec.write(f"compile/cache-{log.parent.parent.name}-{log.parent.name}-model.log", _tail(log))
                failed += 1
    if n == 0 and failed == 0:
        rec.miss("compile", "no log-neuron-cc.txt and no failed cache entry (model.log without model.neff)")
