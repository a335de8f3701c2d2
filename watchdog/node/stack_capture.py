"""Every rank's stacks for an incident's bundle, taken while the ranks are alive.

The rank's own worker server answers first (the bootstrap's ``neuron_watch_stacks``: every Python
thread's stack in faulthandler's text, no ptrace, so it works in containers without
``CAP_SYS_PTRACE``); ``py-spy dump`` where the rank has no server or it does not answer; a rank
that already ended left its stacks beside its server's socket. Each rank's way and what failed
land in the bundle's notes and ``missing``.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuron_watch.node.bundle import TOOL_TIMEOUT_S, Recorder
from neuron_watch.node.procs import run_bounded
from neuron_watch.node.rank_probe import STACKS_HANDLER, call_handler


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


def _proc_state(pid: int) -> str:
    """``pid``'s one-letter /proc state, or ''."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _py_spy_failure(pid: int, rc: int, err: str, state_before: str = "") -> str:
    """Why py-spy could not read ``pid``, in plain words (its stderr ends in a Rust backtrace).
    ``state_before``: the process state read before py-spy ran (attaching and detaching moves a
    stopped process through other states, so the state after may no longer say it)."""
    state = state_before if state_before in ("T", "t") else _proc_state(pid)
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
    """The rank's stacks from its own worker server (the bootstrap's ``neuron_watch_stacks``, not
    torch's ``dump_traceback``, which can kill the rank; no ptrace needed), or ``("", why)``. Waits
    for a probe's request to the rank in flight (:func:`call_handler`), within ``budget``."""
    try:
        text = call_handler(sock, STACKS_HANDLER, timeout=budget).decode("utf-8", "replace")
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


def collect_stacks(rec: Recorder, rank_pids: Mapping[int, int], probe_sockets: Mapping[int, str]) -> None:
    """Every rank's stacks, all ranks at once (the bound is one tool timeout, not one per rank).

    The rank's own worker server first (``neuron_watch_stacks``: no ptrace, so it works in containers
    without ``CAP_SYS_PTRACE`` such as EKS and SageMaker); ``py-spy dump`` where the rank has no
    server or it does not answer (a rank stuck while holding the GIL, a stopped process).
    """
    if not rank_pids:
        rec.miss("stacks", "no rank pids given")
        return
    exe = rec.which("py-spy")
    if exe is None and not probe_sockets:
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
        sock = probe_sockets.get(rank)
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
            why.append(f"worker server {STACKS_HANDLER}: {failure}")
        if exe is None:
            why.append("py-spy not installed (pip install 'neuron-watch[stacks]')")
            return rank, pid, note, "", why
        state_before = _proc_state(pid)
        rc, out, err, timed_out = run_bounded([exe, "dump", "--pid", str(pid)], budget)
        note.update(via="py-spy", returncode=rc, timed_out=timed_out)
        if rc == 0 and out.strip():
            return rank, pid, note, out, []
        failure = "timed out" if timed_out else _py_spy_failure(pid, rc, err, state_before)
        why.append(f"py-spy dump --pid {pid}: {failure}")
        return rank, pid, note, out, why

    workers = max(1, min(16, len(rank_pids)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stacks") as pool:
        for rank, _pid, note, text, why in pool.map(lambda kv: one(*kv), sorted(rank_pids.items())):
            name = f"stacks/rank-{rank}.txt"
            taken[str(rank)] = note
            if note.get("timed_out"):
                rec.timed_out.append(name)
            if text.strip():
                rec.write(name, text)
            if why:
                rec.miss(name, "; ".join(why))
    rec.notes["stacks"] = taken
