"""Capture one node's incident bundle *before* anything is stopped, within a time bound.

    ctx = IncidentContext(job_id="job-7", generation=1, incident=2, node="ip-10-0-0-1",
                          run_dir=run_dir, rank_logs={0: run_dir / "gen-1/rank-0.log"},
                          rank_pids={0: 4242}, verdict=verdict.to_dict(), env=os.environ,
                          core_dump_dir=Path("/tmp/neuron-core-dump/inc-2"), deadline_s=60)
    result = capture_node_bundle(ctx)        # then stop the ranks, then upload result.bundle_dir

The bundle directory is ``<run-dir>/incidents/incident-<n>/<node>/`` and holds what exists on this node
(docs/evidence.md lists every file): rank log tails, ``verdict.json``, ``stacks/rank-<R>.txt`` from
``py-spy dump``, the incident's core-dump directory, complete input dumps, NDET logs and
``neuron-det`` output, failed-compile logs, kernel messages, ``neuron-ls -j``, sysfs ECC counters,
package versions, the redacted environment, ``timeline.json``, ``incident.md`` and last
``manifest.json`` (path, size, sha256 of every file; what is missing and why; what timed out).

Nothing here raises for a missing tool or an unreadable file: it is recorded in the manifest.
Every external tool runs in its own process group and is killed (SIGTERM, then SIGKILL) at the
deadline; the whole capture returns by ``deadline`` plus a short kill grace.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.logread import tail_bytes
from neuron_watch.node import incident_report
from neuron_watch.node.rank_probe import call_handler
from neuron_watch.redact import mask_urls

#: Seconds one py-spy / neuron-ls / dmesg call may take at most (less when the deadline is nearer).
TOOL_TIMEOUT_S = 10.0
#: Grace between SIGTERM and SIGKILL for a tool that overran.
KILL_GRACE_S = 1.0
#: Lines kept from the end of each rank log ...
TAIL_LINES = 1000
#: ... and at most this many bytes of it (a log of multi-megabyte lines must not fill the bundle or memory).
TAIL_BYTES = 4 << 20
#: The incident's timeline reads at most the last this-many bytes of each rank log ...
TIMELINE_LOG_BYTES = 8 << 20
#: ... and at most this share of the time left to the capture (the copies that follow need the rest).
TIMELINE_SHARE = 0.5
#: Never copy more than this many bytes of core dumps / input dumps per incident (disk is finite).
COPY_BUDGET_BYTES = 8 * 1024**3
#: Bytes of one bundle kept in memory while its disk refuses them (a full disk during a capture).
HOLD_BYTES = 64 << 20
#: How a held file's entry in ``missing`` begins (it leaves ``missing`` once written).
HELD_REASON = "not written yet: the disk refused it"
#: At most this many failed-compile logs (a poisoned cache can hold hundreds).
MAX_COMPILE_LOGS = 20
SYSFS_NEURON = Path("/sys/devices/virtual/neuron_device")
PACKAGES = (
    "neuron-watch", "torch", "torch-neuronx", "torch-xla", "libneuronxla", "neuronx-cc", "neuronx-distributed",
    "neuronx-distributed-training", "transformers", "optimum-neuron", "numpy", "boto3", "py-spy",
)

_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|KEY|AUTH|SESSION", re.IGNORECASE)
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
REDACTED = "***redacted***"


# ---------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------
def redact_value(value: str) -> str:
    """``value`` with the user info of URLs (``user:pass@``, ``token@``) and AWS access key ids masked. Pure."""
    value = mask_urls(value)
    return _AWS_KEY_ID.sub("AKIA" + "*" * 16, value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` safe to upload. Pure.

    Values of names containing SECRET, TOKEN, PASSWORD/PASSWD/PASSPHRASE, CREDENTIAL, KEY, AUTH or
    SESSION (any case; covers AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, NEURON_WATCH_SECRET,
    HF_TOKEN, ...) become ``***redacted***``; other values keep their text minus URL passwords and
    AWS key ids.
    """
    out: dict[str, str] = {}
    for name in sorted(env):
        value = env[name]
        out[name] = REDACTED if (_SECRET_NAME.search(name) and value) else redact_value(value)
    return out


def kernel_lines(lines: Iterable[str]) -> list[str]:
    """The Neuron driver lines of a kernel log: ``NEURON_HW_ERR=...`` and ``neuron:`` lines. Pure."""
    return [ln.rstrip("\n") for ln in lines if "NEURON_HW_ERR" in ln or "neuron:" in ln.lower()]


# ---------------------------------------------------------------------------------------------
# the context and the result
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IncidentContext:
    """Everything the capture needs to know about one incident on one node.

    ``rank_logs``/``rank_pids`` are this node's ranks only. ``verdict`` is ``Verdict.to_dict()``.
    ``env`` is the ranks' effective environment (redacted before it is written).
    ``core_dump_dir`` is this incident's ``NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY`` (format variables
    already replaced, or its parent when ``%d-%c`` is not known yet: every subdirectory is taken).
    ``work_dirs`` are where ranks run (input dumps ``input_dump_*`` and ``log-neuron-cc.txt`` land
    in the working directory); the run directory is always searched.
    """

    job_id: str
    generation: int
    incident: int
    node: str
    run_dir: Path
    rank_logs: Mapping[int, Path] = field(default_factory=dict)
    rank_pids: Mapping[int, int] = field(default_factory=dict)
    verdict: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    core_dump_dir: Path | None = None
    compile_cache_dir: Path | None = None
    deadline_s: float = 60.0
    work_dirs: Sequence[Path] = ()
    artifacts_uri: str = ""
    #: the job's knowledge base, for the timeline (None outside a job: a Slurm epilog's capture)
    kb: KnowledgeBase | None = None
    tail_lines: int = TAIL_LINES
    sysfs_root: Path = SYSFS_NEURON
    compile_workdir_glob: str = "/tmp/*/neuroncc_compile_workdir/*/log-neuron-cc.txt"
    #: Where tools (py-spy, neuron-ls, neuron-det, dmesg) are looked up; None: PATH, then this
    #: Python's bin directory (py-spy installed as the ``stacks`` extra lands there).
    tool_path: str | None = None
    #: rank -> its worker server's unix socket (the rank probe; empty with --no-rank-probe)
    probe_sockets: Mapping[int, str] = field(default_factory=dict)

    def which(self, name: str) -> str | None:
        if self.tool_path is not None:
            return shutil.which(name, path=self.tool_path)
        default = os.pathsep.join([os.environ.get("PATH", os.defpath), str(Path(sys.executable).parent)])
        return shutil.which(name, path=default)

    @property
    def bundle_dir(self) -> Path:
        # Same layout as the supervisor's own incident directory (watchdog/commands/supervisor.py).
        return self.run_dir / "incidents" / f"incident-{self.incident}" / self.node


@dataclass
class BundleResult:
    """Where the bundle is and what the manifest says (``manifest`` is the written JSON)."""

    bundle_dir: Path
    manifest_path: Path
    manifest: dict[str, Any]
    elapsed_s: float
    #: bundle-relative path -> content the disk refused so far (the manifest too, as ``manifest.json``)
    held: dict[str, bytes] = field(default_factory=dict)

    @property
    def missing(self) -> list[dict[str, str]]:
        return list(self.manifest["missing"])

    @property
    def timed_out(self) -> list[str]:
        return list(self.manifest["timed_out"])


class _Recorder:
    """Collects 'missing' and 'timed out' notes while the collectors run."""

    def __init__(self, root: Path, deadline: float, clock: Callable[[], float],
                 which: Callable[[str], str | None] = shutil.which) -> None:
        self.root = root
        self.which = which
        self.deadline = deadline
        self.clock = clock
        self.missing: list[dict[str, str]] = []
        self.timed_out: list[str] = []
        self.notes: dict[str, Any] = {}
        #: files the disk refused (full, read-only, EIO), kept to write when it allows (see flush_held)
        self.held: dict[str, bytes] = {}

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def miss(self, what: str, why: str) -> None:
        self.missing.append({"item": what, "reason": why})

    def write(self, rel: str, data: str | bytes) -> Path:
        """Write ``rel`` in the bundle; a disk that refuses it (full, read-only, EIO) does not lose it:
        it is kept in memory (up to HOLD_BYTES a bundle), listed as missing until it is written
        (:func:`flush_held`), and counted as lost beyond the bound."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        p = self.root / rel
        try:
            _write_file(p, raw)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if sum(len(v) for v in self.held.values()) + len(raw) > HOLD_BYTES:
                self.miss(rel, f"lost: the disk refused it ({why}) and the bundle's in-memory bound "
                          f"({HOLD_BYTES} bytes) is reached")
            else:
                self.held[rel] = raw
                self.miss(rel, f"{HELD_REASON} ({why}); kept in memory, written when the disk allows")
        return p

    def tool(self, what: str, argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[int, str, str] | None:
        """Run ``argv`` in its own process group, killed at min(timeout, deadline). None: not run."""
        exe = self.which(argv[0])
        if exe is None:
            self.miss(what, f"{argv[0]} not installed")
            return None
        budget = min(timeout, self.remaining())
        if budget <= 0:
            self.miss(what, "deadline passed before it could run")
            self.timed_out.append(what)
            return None
        rc, out, err, timed_out = run_bounded([exe, *argv[1:]], budget)
        if timed_out:
            self.timed_out.append(what)
            self.miss(what, f"{argv[0]} did not finish within {budget:.1f}s; killed")
        return rc, out, err


def run_bounded(argv: Sequence[str], timeout: float) -> tuple[int, str, str, bool]:
    """Run ``argv`` in a new session; SIGTERM its group at ``timeout``, SIGKILL after a grace; reap.

    Returns ``(returncode, stdout, stderr, timed_out)``.
    """
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True, text=True, errors="replace",
    )
    try:
        out, err = proc.communicate(timeout=max(0.01, timeout))
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:  # pragma: no cover - SIGKILL always ends communicate(None)
            out, err = "", ""
        return proc.returncode if proc.returncode is not None else -9, out or "", err or "", True


# ---------------------------------------------------------------------------------------------
# collectors (each records what it could not get)
# ---------------------------------------------------------------------------------------------
def _tail(path: Path, lines: int, max_bytes: int = TAIL_BYTES) -> bytes:
    """The last ``lines`` lines of a file, at most its last ``max_bytes``, read from its end only."""
    return tail_bytes(str(path), lines, max_bytes)[0]


def _collect_logs(ctx: IncidentContext, rec: _Recorder) -> None:
    if not ctx.rank_logs:
        rec.miss("rank logs", "no rank log paths given")
    cut: dict[str, int] = {}
    for rank, path in sorted(ctx.rank_logs.items()):
        try:
            data, before = tail_bytes(str(path), ctx.tail_lines, TAIL_BYTES)
        except OSError as exc:
            rec.miss(f"logs/rank-{rank}.log", f"cannot read {path}: {exc.strerror or exc}")
            continue
        if before and data.count(b"\n") < ctx.tail_lines:
            cut[str(rank)] = before  # long lines: the byte bound came before the line count
        rec.write(f"logs/rank-{rank}.log", data)
    if cut:
        rec.notes["log_tails_cut_at_bytes"] = {"max_bytes": TAIL_BYTES, "bytes_before_by_rank": cut}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie answers kill(0) but has no stack to dump
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _py_spy_failure(pid: int, rc: int, err: str) -> str:
    """Why py-spy could not read ``pid``, in plain words (its stderr ends in a Rust backtrace)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = ""
    if state in ("T", "t"):
        return f"the process is stopped (state {state}); py-spy cannot read a stopped process"
    if "Failed to find a python interpreter" in err:
        return "py-spy found no running Python in the process (it is starting up or shutting down)"
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    # py-spy's own message ("Error: Failed to ...", "Permission denied") comes before any backtrace
    first = next((ln for ln in lines if ln.startswith("Error") or "denied" in ln or "ptrace" in ln.lower()), None)
    if first is None:
        first = next((ln for ln in lines if not ln[:1].isdigit() and not ln.startswith("at ")), f"exit {rc}")
    return first


def _worker_server_stack(sock: str, budget: float) -> tuple[str, str]:
    """The rank's stacks from its own worker server (``dump_traceback``: Python's faulthandler,
    no ptrace needed), or ``("", why)``."""
    try:
        text = call_handler(sock, "dump_traceback", timeout=budget).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        return "", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return (text, "") if text.strip() else ("", "empty answer")


def _death_stack(sock: str) -> str:
    """The stacks an ended rank left beside its worker server's socket (``r<RANK>.death.txt``: its
    unhandled exception, or faulthandler's dump at SIGTERM), or ''."""
    try:
        with open(sock.removesuffix(".sock") + ".death.txt", encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def _collect_stacks(ctx: IncidentContext, rec: _Recorder) -> None:
    """Every rank's stacks, all ranks at once (the bound is one tool timeout, not one per rank).

    The rank's own worker server first (``dump_traceback``: no ptrace, so it works in containers
    without ``CAP_SYS_PTRACE`` such as EKS and SageMaker); ``py-spy dump`` where the rank has no
    server or it does not answer (a rank stuck while holding the GIL, a stopped process).
    """
    if not ctx.rank_pids:
        rec.miss("stacks", "no rank pids given")
        return
    exe = ctx.which("py-spy")
    if exe is None and not ctx.probe_sockets:
        rec.miss("stacks", "py-spy not installed (pip install 'neuron-watch[stacks]') and no rank worker server")
        return
    budget = min(TOOL_TIMEOUT_S, rec.remaining())
    if budget <= 0:
        rec.miss("stacks", "deadline passed before stacks could be taken")
        rec.timed_out.append("stacks")
        return
    taken: dict[str, Any] = {}

    def one(rank: int, pid: int) -> tuple[int, int, dict[str, Any], str, list[str]]:
        """(rank, pid, what was tried, the dump or '', why each way failed)."""
        note: dict[str, Any] = {"pid": pid, "taken_at": time.time()}
        sock = ctx.probe_sockets.get(rank)
        if not _pid_alive(pid):
            # where it was when it ended (the rank bootstrap's record of its exception or SIGTERM)
            text = _death_stack(sock) if sock is not None else ""
            if text:
                note["via"] = "at_exit"
                return rank, pid, note, text, []
            return rank, pid, note, "", [f"pid {pid} had already exited"]
        why: list[str] = []
        if sock is not None and os.path.exists(sock):
            # Half the budget: a server that cannot answer still leaves py-spy its turn.
            text, failure = _worker_server_stack(sock, budget / 2 if exe else budget)
            if text:
                note["via"] = "worker_server"
                return rank, pid, note, text, []
            why.append(f"worker server dump_traceback: {failure}")
        if exe is None:
            why.append("py-spy not installed (pip install 'neuron-watch[stacks]')")
            return rank, pid, note, "", why
        rc, out, err, timed_out = run_bounded([exe, "dump", "--pid", str(pid)], budget)
        note.update(via="py-spy", returncode=rc, timed_out=timed_out)
        if rc == 0 and out.strip():
            return rank, pid, note, out, []
        why.append(f"py-spy dump --pid {pid}: " + ("timed out" if timed_out else _py_spy_failure(pid, rc, err)))
        return rank, pid, note, out, why

    workers = max(1, min(16, len(ctx.rank_pids)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stacks") as pool:
        for rank, _pid, note, text, why in pool.map(lambda kv: one(*kv), sorted(ctx.rank_pids.items())):
            name = f"stacks/rank-{rank}.txt"
            taken[str(rank)] = note
            if note.get("timed_out"):
                rec.timed_out.append(name)
            if text.strip():
                rec.write(name, text)
            if why:
                rec.miss(name, "; ".join(why))
    rec.notes["stacks"] = taken


def _copy_tree(src: Path, dest_rel: str, rec: _Recorder, budget: list[int], what: str) -> int:
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


def _collect_core_dumps(ctx: IncidentContext, rec: _Recorder, budget: list[int]) -> None:
    d = ctx.core_dump_dir
    if d is None:
        rec.miss("core-dump", "no core-dump directory configured for this incident")
    elif not d.is_dir():
        rec.miss("core-dump", f"{d} does not exist (the runtime wrote no core dump)")
    elif _copy_tree(d, "core-dump", rec, budget, "core-dump") == 0:
        rec.miss("core-dump", f"{d} is empty")


def _search_dirs(ctx: IncidentContext) -> list[Path]:
    seen: list[Path] = []
    for d in (ctx.run_dir, *ctx.work_dirs):
        if d not in seen and d.is_dir():
            seen.append(d)
    return seen


def _collect_input_dumps(ctx: IncidentContext, rec: _Recorder, budget: list[int]) -> None:
    found = 0
    for base in _search_dirs(ctx):
        for d in sorted(base.glob("input_dump_*")) + sorted(base.glob("gen-*/input_dump_*")):
            if not d.is_dir():
                continue
            # The runtime docs: a dump is complete when model_name.txt is fully written.
            if not (d / "model_name.txt").is_file():
                rec.miss(f"input-dumps/{d.name}", "incomplete (no model_name.txt yet); not copied")
                continue
            _copy_tree(d, f"input-dumps/{d.name}", rec, budget, "input-dumps")
            found += 1
    if not found:
        rec.miss("input-dumps", "no complete input_dump_* directory "
                 "(NEURON_RT_DBG_DUMP_INPUTS_ON_ERR unset or no error)")


def _collect_ndet(ctx: IncidentContext, rec: _Recorder, budget: list[int]) -> None:
    flush = ctx.env.get("NEURON_RT_DBG_NDET_FLUSH_USEC", "0").strip()
    location = Path(ctx.env.get("NEURON_RT_DBG_NDET_LOG_LOCATION", "/tmp"))
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


def _collect_compile_logs(ctx: IncidentContext, rec: _Recorder) -> None:
    n = 0
    cands: list[Path] = [Path(p) for p in glob.glob(ctx.compile_workdir_glob)]
    for d in _search_dirs(ctx):
        cands += sorted(d.glob("log-neuron-cc.txt")) + sorted(d.glob("*/log-neuron-cc.txt"))
    # newest first: the failing graph is the most recent compile
    for p in sorted(set(cands), key=lambda q: q.stat().st_mtime if q.exists() else 0, reverse=True):
        if n >= MAX_COMPILE_LOGS:
            break
        with contextlib.suppress(OSError):
            rec.write(f"compile/workdir-{n}-{p.parent.name}-log-neuron-cc.txt", _tail(p, 2000))
            n += 1
    cache = ctx.compile_cache_dir
    failed = 0
    if cache is not None and cache.is_dir():
        for log in sorted(cache.glob("neuronxcc-*/MODULE_*/model.log")):
            # A failed (poisoned) cache entry has model.log and no model.neff (the compile cache's layout).
            if (log.parent / "model.neff").exists() or failed >= MAX_COMPILE_LOGS:
                continue
            with contextlib.suppress(OSError):
                rec.write(f"compile/cache-{log.parent.parent.name}-{log.parent.name}-model.log", _tail(log, 2000))
                failed += 1
    if n == 0 and failed == 0:
        rec.miss("compile", "no log-neuron-cc.txt and no failed cache entry (model.log without model.neff)")


def _collect_kernel(rec: _Recorder) -> None:
    res = rec.tool("kernel.txt", ["dmesg", "--ctime"])
    if res is None:
        return
    rc, out, err = res
    if rc != 0:
        # Unprivileged containers often forbid dmesg (kernel.dmesg_restrict): recorded, not fatal.
        rec.miss("kernel.txt", f"dmesg failed (exit {rc}): {err.strip()[:200] or 'no output'}")
        return
    lines = kernel_lines(out.splitlines())
    rec.write("kernel.txt", "\n".join(lines) + ("\n" if lines else ""))
    rec.notes["kernel_lines"] = len(lines)


def _collect_neuron_ls(rec: _Recorder) -> None:
    res = rec.tool("neuron-ls.json", ["neuron-ls", "-j"])
    if res is None:
        return
    rc, out, err = res
    if rc == 0:
        rec.write("neuron-ls.json", out)
    else:
        rec.miss("neuron-ls.json", f"neuron-ls -j exit {rc}: {err.strip()[:200]}")


def _collect_sysfs(ctx: IncidentContext, rec: _Recorder) -> None:
    counters: dict[str, dict[str, int | str]] = {}
    for dev in sorted(ctx.sysfs_root.glob("neuron*")):
        hw = dev / "stats" / "hardware"
        if not hw.is_dir():
            continue
        vals: dict[str, int | str] = {}
        for f in sorted(hw.iterdir()):
            try:
                text = f.read_text().strip()
                vals[f.name] = int(text) if text.lstrip("-").isdigit() else text
            except OSError as exc:
                vals[f.name] = f"unreadable: {exc.strerror or exc}"
        counters[dev.name] = vals
    if counters:
        rec.write("sysfs-ecc.json", json.dumps(counters, indent=2, sort_keys=True))
    else:
        rec.miss("sysfs-ecc.json", f"no Neuron devices under {ctx.sysfs_root}")


def _collect_versions(rec: _Recorder) -> None:
    pkgs: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = None
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "kernel": platform.release(),
        "packages": pkgs,
    }
    rec.write("versions.json", json.dumps(info, indent=2, sort_keys=True))


def _collect_timeline(ctx: IncidentContext, rec: _Recorder) -> None:
    """The run's timeline so far, from the end of each rank log (newest generation first), within
    its share of the capture's time: a flood of hundreds of megabytes costs neither memory nor time
    beyond these bounds. What it left out is in the trace's ``otherData`` and the manifest."""
    from neuron_watch.outputs import timeline

    deadline = rec.clock() + max(0.0, rec.remaining()) * TIMELINE_SHARE
    try:
        if ctx.kb is None:  # a capture outside a job has no composition root: the packaged table
            from neuron_watch.diagnosis.kb import default_knowledge_base

            kb = default_knowledge_base()
        else:
            kb = ctx.kb
        trace = timeline.build_from_run_dir(ctx.run_dir, kb, max_bytes_per_log=TIMELINE_LOG_BYTES,
                                            deadline=deadline, clock=rec.clock)
    except (OSError, ValueError) as exc:
        rec.miss("timeline.json", f"cannot build the timeline: {exc}")
        return
    other = trace.get("otherData", {})
    unread = other.get("unread_logs", [])
    stopped = sorted({x["path"] for x in other.get("logs", []) if x.get("unread_bytes")}
                     | set(other.get("stopped_at_deadline", {})))
    if unread or stopped:
        rec.timed_out.append("timeline.json")
        rec.miss("timeline.json", f"partial: the time for it ran out; {len(stopped)} rank log(s) read in part, "
                 f"{len(unread)} not read (otherData says which)")
    rec.write("timeline.json", json.dumps(trace))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def capture_node_bundle(
    ctx: IncidentContext, deadline: float | None = None, clock: Callable[[], float] = time.monotonic
) -> BundleResult:
    """Write this node's bundle under ``ctx.bundle_dir``; return by ``deadline`` (+ a kill grace).

    ``deadline`` is a ``clock()`` (monotonic) value; when None it is ``clock() + ctx.deadline_s``.
    Stacks are taken first (the ranks are still alive: call this *before* stopping anything),
    then the cheap files, then the copies that may be large. Missing items and tools that timed
    out are listed in the manifest; this function does not raise for them.

    A disk that refuses the bundle's files (full, read-only) loses none of them: they are kept in
    memory (``BundleResult.held``, at most :data:`HOLD_BYTES`), listed as missing with why, and
    written by :func:`flush_held` when the disk allows. This function does not raise for it.
    """
    start = clock()
    deadline = start + ctx.deadline_s if deadline is None else deadline
    root = ctx.bundle_dir
    rec = _Recorder(root, deadline, clock, ctx.which)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a full disk: every file is held (rec.write) and written when it allows
        rec.notes["bundle_dir_error"] = exc.strerror or str(exc)
    budget = [COPY_BUDGET_BYTES]

    _collect_stacks(ctx, rec)
    rec.write("verdict.json", json.dumps(dict(ctx.verdict), indent=2, sort_keys=True, default=str))
    rec.write("env.json", json.dumps(redact_env(ctx.env), indent=2))
    _collect_logs(ctx, rec)
    _collect_versions(rec)
    _collect_sysfs(ctx, rec)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("kernel.txt", lambda: _collect_kernel(rec)),
        ("neuron-ls.json", lambda: _collect_neuron_ls(rec)),
        ("compile", lambda: _collect_compile_logs(ctx, rec)),
        ("timeline.json", lambda: _collect_timeline(ctx, rec)),
        ("core-dump", lambda: _collect_core_dumps(ctx, rec, budget)),
        ("input-dumps", lambda: _collect_input_dumps(ctx, rec, budget)),
        ("ndet", lambda: _collect_ndet(ctx, rec, budget)),
    ]
    for name, step in steps:
        if rec.remaining() <= 0:
            rec.miss(name, "skipped: the capture deadline passed")
            rec.timed_out.append(name)
            continue
        try:
            step()
        except OSError as exc:  # one unreadable source must not lose the rest of the bundle
            rec.miss(name, f"{type(exc).__name__}: {exc}")

    files = _file_entries(root)
    manifest: dict[str, Any] = {
        "job_id": ctx.job_id,
        "generation": ctx.generation,
        "incident": ctx.incident,
        "node": ctx.node,
        "created": time.time(),
        "deadline_s": round(deadline - start, 3),
        "elapsed_s": round(clock() - start, 3),
        "files": files,
        "missing": rec.missing,
        "timed_out": rec.timed_out,
        "notes": rec.notes,
    }
    md = incident_report.render_incident_md(ctx.verdict, manifest, ctx.artifacts_uri)
    rec.write("incident.md", md)
    if "incident.md" not in rec.held:
        manifest["files"].append(_file_entry(root, "incident.md"))
    manifest["held_in_memory"] = sorted(rec.held)
    result = BundleResult(root, root / "manifest.json", manifest, clock() - start, rec.held)
    _write_manifest(result)
    result.elapsed_s = clock() - start
    return result


def _write_file(p: Path, raw: bytes) -> None:
    """Write ``p`` whole or not at all (a full disk must not leave half a file that looks complete)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        p.write_bytes(raw)
    except OSError:
        with contextlib.suppress(OSError):
            p.unlink()
        raise


def _file_entry(root: Path, rel: str) -> dict[str, Any]:
    p = root / rel
    return {"path": rel, "size": p.stat().st_size, "sha256": _sha256(p)}


def _file_entries(root: Path) -> list[dict[str, Any]]:
    if not root.is_dir():
        return []
    return [_file_entry(root, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", "incident.md") and not p.name.startswith(".")]


def _write_manifest(result: BundleResult) -> bool:
    """Write the manifest atomically (a manifest present means the bundle is complete as it says);
    a disk that refuses it keeps it held with the rest. Returns whether it was written."""
    root = result.bundle_dir
    tmp = root / ".manifest.json.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(result.manifest, indent=2, sort_keys=True))
        os.replace(tmp, result.manifest_path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        result.held["manifest.json"] = b""  # (re)written from result.manifest by flush_held
        return False
    result.held.pop("manifest.json", None)
    return True


def flush_held(result: BundleResult) -> bool:
    """Write what the disk refused during the capture (see :meth:`_Recorder.write`), in order, then the
    manifest without them in ``missing``. Returns True when nothing is held any more. Never raises:
    what still cannot be written stays held for the next call."""
    wrote = False
    for rel in [r for r in result.held if r != "manifest.json"]:
        try:
            _write_file(result.bundle_dir / rel, result.held[rel])
        except OSError:
            break  # the disk is still full: try again later, in the same order
        del result.held[rel]
        wrote = True
        m = result.manifest
        m["missing"] = [x for x in m["missing"] if not (x["item"] == rel and x["reason"].startswith(HELD_REASON))]
        m["files"] = sorted([*(f for f in m["files"] if f["path"] != rel), _file_entry(result.bundle_dir, rel)],
                            key=lambda f: str(f["path"]))
    if wrote or "manifest.json" in result.held:
        result.manifest["held_in_memory"] = sorted(r for r in result.held if r != "manifest.json")
        _write_manifest(result)
    return not result.held


def bundle_stacks(root: Path, held: Mapping[str, bytes] | None = None) -> dict[int, str]:
    """The stacks a bundle holds, by rank (``stacks/rank-<R>.txt``, on disk or ``held`` in memory);
    unreadable ones are left out."""
    dumps: dict[int, str] = {}
    for f in sorted((root / "stacks").glob("rank-*.txt")):
        try:
            dumps[int(f.stem.split("-", 1)[1])] = f.read_text(errors="replace")
        except (OSError, ValueError):
            continue
    for rel, raw in (held or {}).items():
        m = re.fullmatch(r"stacks/rank-(\d+)\.txt", rel)
        if m:
            dumps[int(m.group(1))] = raw.decode("utf-8", "replace")
    return dumps


def complete_bundle(root: Path, verdict: Mapping[str, Any], artifacts_uri: str = "") -> None:
    """Rewrite a captured bundle's ``verdict.json`` and ``incident.md`` with the final verdict.

    A bundle is captured while the ranks are alive, before the coordinator has heard every node
    (the culprit of a hang comes from all nodes' stacks), so its first ``verdict.json`` holds the
    pending verdict. The manifest's entries for both files are updated and the manifest replaced
    atomically, so the bundle stays whole and checkable.

    Raises:
        OSError: the bundle cannot be read or written.
    """
    manifest_path = root / "manifest.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    (root / "verdict.json").write_text(json.dumps(dict(verdict), indent=2, sort_keys=True, default=str))
    (root / "incident.md").write_text(incident_report.render_incident_md(verdict, manifest, artifacts_uri))
    entries = {f["path"]: f for f in manifest.get("files", []) if isinstance(f, dict)}
    for name in ("verdict.json", "incident.md"):
        p = root / name
        entries[name] = {"path": name, "size": p.stat().st_size, "sha256": _sha256(p)}
    manifest["files"] = sorted(entries.values(), key=lambda f: str(f["path"]))
    manifest["verdict_final"] = True
    tmp = root / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(tmp, manifest_path)
