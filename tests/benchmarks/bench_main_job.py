"""Figures, no pass/fail: the toy job under ``neuron-watch torchrun`` against plain ``torchrun``.

1. Wall time of a clean run of examples/toy/train.py with 4 CPU ranks, N runs of each, interleaved
   (the order alternates so that a load change on the shared machine hits both sides alike).
2. Time from a rank's death to the relaunched ranks' first step: rank 1 crashes at step k in
   generation 0 only. neuron-watch relaunches torchrun itself; plain torchrun recovers with
   ``--rdzv-backend=c10d --max-restarts 1`` and ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``
   (the only way its own restart works in torch 2.13).

Both recovery figures use one clock and one method: a reader thread stamps every console line with
``time.time()`` as it arrives. Death = the line holding "injected crash" (neuron-watch echoes rank
lines as ``[rankN] ...``; plain torchrun shows them through ``--tee 3``); first step = the first
``step <resume> loss`` line after it, where <resume> is the step the relaunch starts at (neuron-watch:
the checkpoint's step + 1, read from the restart event; plain torchrun: 1, since it hands the job no
checkpoint). k is chosen so that no late line of the dead generation can carry that step number.
For neuron-watch the events.jsonl timestamps (same wall clock) split the interval into its phases.

Every process runs in its own session, is stopped against one deadline (SIGTERM, then SIGKILL) and
reaped; the ranks, which torchrun puts in sessions of their own, are found by a marker variable in
their environment and killed if anything is left.

    .venv/bin/python -m tests.benchmarks.bench_main_job [--runs 3] [--steps 60] [--step-time 0.05]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fixtures.procs import pids_with_env

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
NEURON_WATCH = str(VENV_BIN / "neuron-watch")
TORCHRUN = str(VENV_BIN / "torchrun")
TOY = str(ROOT / "examples" / "toy" / "train.py")
NPROC = "4"

MARKER = "NW_BENCH_MARKER"  # in every process we start (and so in every rank): how leftovers are found
RUN_DEADLINE = 240.0  # seconds one launch may take before it is stopped
STOP_GRACE = 20.0  # SIGTERM -> SIGKILL

STEP_RE = re.compile(r"\bstep (\d+) loss\b")


@dataclass
class Run:
    """One launch: exit code, wall seconds, every console line with its arrival time (time.time())."""

    argv: list[str]
    code: int | None = None
    wall: float = 0.0
    lines: list[tuple[float, str]] = field(default_factory=list)
    stopped: str = ""  # "" = exited by itself; else the rung we had to reach ("SIGTERM"/"SIGKILL")
    leftovers: int = 0  # processes carrying our marker after the launch ended (killed)
    load: tuple[float, float] = (0.0, 0.0)  # 1-min load average before/after
    cpu: float = 0.0  # user+sys CPU seconds of the launch and every descendant reaped in its tree




def sweep(marker: str, grace: float = 5.0) -> int:
    """Stop every process still carrying ``marker`` (SIGTERM, SIGKILL at the deadline); returns how many."""
    left = pids_with_env(MARKER, marker)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while pids_with_env(MARKER, marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pids_with_env(MARKER, marker):
            break
    return len(left)


def launch(argv: list[str], env: dict[str, str], cwd: str) -> Run:
    """Run ``argv`` in its own session with a timestamping reader; stop it at RUN_DEADLINE; reap it."""
    marker = uuid.uuid4().hex
    env = {**env, MARKER: marker}
    run = Run(argv)
    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    assert p.stdout is not None
    out = p.stdout

    def reader() -> None:
        for raw in out:  # one line as soon as the child writes it (the pipe is read unbuffered per line)
            run.lines.append((time.time(), raw.decode("utf-8", "replace").rstrip("\n")))

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        p.wait(timeout=RUN_DEADLINE)
    except subprocess.TimeoutExpired:
        run.stopped = "SIGTERM"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            run.stopped = "SIGKILL"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    run.wall = time.monotonic() - t0
    run.code = p.returncode
    # Every rank is reaped by torchrun and torchrun by neuron-watch, so the delta holds the whole tree:
    # CPU seconds do not depend on what else the shared cores are running, unlike the wall time.
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    with contextlib.suppress(ProcessLookupError):  # stray members of the launcher's own group
        os.killpg(p.pid, signal.SIGKILL)
    run.leftovers = sweep(marker)
    th.join(timeout=10)  # EOF once every holder of the pipe is gone
    out.close()
    run.load = (load0, os.getloadavg()[0])
    with open(os.path.join(cwd, "console.txt"), "w", encoding="utf-8") as f:  # stamped, for a post-mortem
        f.writelines(f"{t:.3f} {text}\n" for t, text in run.lines)
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toy_args(ckpt: Path, steps: int, step_time: float, extra: list[str]) -> list[str]:
    return [TOY, "--steps", str(steps), "--step-time", str(step_time), "--checkpoint-dir", str(ckpt), *extra]


NW_ARGS: list[str] = []  # --nw-args: extra neuron-watch options (e.g. --no-prewarm)


def nw_argv(d: Path, toy: list[str], max_restarts: int) -> list[str]:
    return [NEURON_WATCH, "--run-dir", str(d / "run"), "--checkpoint-dir", str(d / "ckpt"),
            "--max-restarts", str(max_restarts), *NW_ARGS, "torchrun", "--nproc_per_node", NPROC, *toy]


def events(run_dir: Path) -> list[dict[str, Any]]:
    p = run_dir / "events.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def iso_ts(s: str) -> float:
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def tail(run: Run, n: int = 25) -> str:
    return "\n".join("    | " + t for _, t in run.lines[-n:])


def fmt(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    return f"median {statistics.median(xs):6.2f}s  min {min(xs):6.2f}s  (n={len(xs)}: " + \
        ", ".join(f"{x:.2f}" for x in xs) + ")"


def recovery_times(run: Run, resume_step: int) -> tuple[float, float, float] | None:
    """(death time, first-step time, death->first step) from the stamped console lines, or None."""
    death = next((t for t, s in run.lines if "injected crash" in s), None)
    if death is None:
        return None
    for t, s in run.lines:
        m = STEP_RE.search(s)
        if t >= death and m and int(m.group(1)) == resume_step and "injected crash" not in s:
            return death, t, t - death
    return None


def bench_wall(args: argparse.Namespace, env: dict[str, str], base: Path) -> dict[str, list[float]]:
    print(f"\n== 1. wall time, clean run ({args.steps} steps, step time {args.step_time}s, {NPROC} ranks) ==")
    res: dict[str, list[float]] = {"neuron-watch": [], "torchrun": []}
    cpu: dict[str, list[float]] = {"neuron-watch": [], "torchrun": []}
    for i in range(args.runs):
        order = ["neuron-watch", "torchrun"] if i % 2 == 0 else ["torchrun", "neuron-watch"]
        for who in order:
            d = base / f"wall-{who}-{i}"
            d.mkdir()
            toy = toy_args(d / "ckpt", args.steps, args.step_time, [])
            argv = nw_argv(d, toy, 0) if who == "neuron-watch" else [TORCHRUN, "--nproc_per_node", NPROC, *toy]
            if i == 0:
                print(f"  {who}: {shlex.join(argv)}")
            run = launch(argv, env, str(d))
            ok = run.code == 0 and not run.stopped
            print(f"  run {i} {who:12}: {run.wall:6.2f}s cpu {run.cpu:6.2f}s rc={run.code} "
                  f"load {run.load[0]:.2f}->{run.load[1]:.2f}"
                  + (f" STOPPED({run.stopped})" if run.stopped else "")
                  + (f" leftovers killed={run.leftovers}" if run.leftovers else ""))
            if ok:
                res[who].append(run.wall)
                cpu[who].append(run.cpu)
            else:
                print(tail(run))
    if cpu["neuron-watch"] and cpu["torchrun"]:
        nw, tr = statistics.median(cpu["neuron-watch"]), statistics.median(cpu["torchrun"])
        print(f"  CPU seconds of the whole process tree (median): neuron-watch {nw:.2f}s, torchrun {tr:.2f}s, "
              f"difference {nw - tr:+.2f}s, ratio {nw / tr:.3f} (load-independent, unlike the wall time)")
    return res


def bench_recovery(args: argparse.Namespace, env: dict[str, str], base: Path) -> dict[str, list[float]]:
    k, every = args.crash_at, args.checkpoint_every
    print(f"\n== 2. rank 1 dies at step {k} of generation 0 -> first step of the relaunched ranks "
          f"(checkpoint every {every}) ==")
    res: dict[str, list[float]] = {"neuron-watch": [], "torchrun": []}
    phases: dict[str, list[dict[str, float]]] = {"neuron-watch": [], "torchrun": []}
    fault = ["--crash-at", str(k), "--crash-rank", "1", "--checkpoint-every", str(every)]
    for i in range(args.runs):
        order = ["neuron-watch", "torchrun"] if i % 2 == 0 else ["torchrun", "neuron-watch"]
        for who in order:
            d = base / f"rec-{who}-{i}"
            d.mkdir()
            toy = toy_args(d / "ckpt", args.recovery_steps, args.step_time, fault)
            if who == "neuron-watch":
                argv = nw_argv(d, toy, 1)
                run_env = env
            else:
                argv = [TORCHRUN, "--nproc_per_node", NPROC, "--rdzv-backend=c10d",
                        f"--rdzv-endpoint=127.0.0.1:{free_port()}", f"--rdzv-id=nwbench{i}", "--max-restarts", "1",
                        "--tee", "3", *toy]
                run_env = {**env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
            if i == 0:
                extra = " TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" if who == "torchrun" else ""
                print(f"  {who}:{extra} {shlex.join(argv)}")
            run = launch(argv, run_env, str(d))
            note = ""
            resume = 1
            evs: list[dict[str, Any]] = []
            if who == "neuron-watch":
                evs = events(d / "run")
                restarts = [e for e in evs if e["event"] == "restart"]
                if len(restarts) != 1:
                    note += f" restart events={len(restarts)}!"
                if restarts and restarts[0].get("checkpoint"):
                    resume = int(str(restarts[0]["checkpoint"]).rstrip("/").rsplit("_", 1)[-1]) + 1
            got = recovery_times(run, resume)
            ok = run.code == 0 and not run.stopped and got is not None
            shown = f"{got[2]:6.2f}s (resumed at step {resume})" if got else "   n/a"
            print(f"  run {i} {who:12}: death->first step {shown}  total {run.wall:6.2f}s rc={run.code} "
                  f"load {run.load[0]:.2f}->{run.load[1]:.2f}" + note
                  + (f" STOPPED({run.stopped})" if run.stopped else "")
                  + (f" leftovers killed={run.leftovers}" if run.leftovers else ""))
            if ok and got is not None:
                res[who].append(got[2])
                ph = agent_phases(run, got[0], got[1])
                if who == "neuron-watch":
                    ph.update(nw_phases(evs, got[0]))
                phases[who].append(ph)
            else:
                print(tail(run))
    for who, found in phases.items():
        if not found:
            continue
        print(f"  {who} phases (median seconds after the crash line arrived):")
        for name in sorted({n for p in found for n in p}, key=lambda n: statistics.median(
                [p[n] for p in found if n in p])):
            vals = [p[name] for p in found if name in p]
            print(f"    {name:52} {statistics.median(vals):6.2f}")
    return res


def agent_phases(run: Run, death: float, first: float) -> dict[str, float]:
    """Console landmarks after the crash line: torchrun's agent reporting the failed worker, first step."""
    out: dict[str, float] = {}
    failed = next((t for t, s in run.lines if t >= death and "failed (exitcode" in s), None)
    if failed is not None:
        out["torchrun agent: 'failed (exitcode ...)' line"] = failed - death
    out["first step line of the relaunched ranks"] = first - death
    return out


def nw_phases(evs: list[dict[str, Any]], death: float) -> dict[str, float]:
    """Offsets of neuron-watch's recovery events from the crash line's arrival (ISO UTC, same clock)."""
    out: dict[str, float] = {}
    for name in ("verdict", "incident", "stopped"):
        found = [e for e in evs if e["event"] == name and e["generation"] == 0]
        if found:  # the last one of generation 0 is the one that acted
            out[f"events.jsonl: {name} (gen 0)"] = iso_ts(found[-1]["time"]) - death
    restart = next((e for e in evs if e["event"] == "restart"), None)
    if restart is not None:
        out["events.jsonl: restart"] = iso_ts(restart["time"]) - death
    prog = next((e for e in evs if e["event"] == "progress" and e["generation"] == 1), None)
    if prog is not None:
        out["events.jsonl: first progress (gen 1)"] = iso_ts(prog["time"]) - death
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each launcher per measurement")
    ap.add_argument("--steps", type=int, default=60, help="steps of the clean run")
    ap.add_argument("--step-time", type=float, default=0.05)
    ap.add_argument("--recovery-steps", type=int, default=20)
    ap.add_argument("--crash-at", type=int, default=14)
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--skip-wall", action="store_true")
    ap.add_argument("--nw-args", default="", help="extra neuron-watch options, e.g. '--no-prewarm'")
    ap.add_argument("--skip-recovery", action="store_true")
    ap.add_argument("--keep", metavar="DIR", help="keep run dirs and stamped consoles (console.txt) under DIR")
    args = ap.parse_args()
    NW_ARGS.extend(shlex.split(args.nw_args))
    # The first step after a relaunch must not be the step number a late line of the dead
    # generation can carry (k-1: every rank finished step k-1's all-reduce before rank 1 died).
    if (args.crash_at - 1) // args.checkpoint_every * args.checkpoint_every + 1 == args.crash_at - 1:
        ap.error("--crash-at k must not be one after a checkpoint step + 1 (the resume step would equal k-1)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    print(f"command: {shlex.join([sys.executable, '-m', 'tests.benchmarks.bench_main_job', *sys.argv[1:]])}")
    print(f"cpus: {os.cpu_count()}  load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  "
          f"(shared machine: other engineers' jobs run at the same time)")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nw-bench-") as tmp:
        base = Path(args.keep or tmp)
        base.mkdir(parents=True, exist_ok=True)
        wall = {} if args.skip_wall else bench_wall(args, env, base)
        rec = {} if args.skip_recovery else bench_recovery(args, env, base)
    print("\n== summary ==")
    print(f"{'measure':34} {'neuron-watch':>14} {'torchrun':>14} {'ratio nw/tr':>12}  aim")
    for title, res, aim in (("clean run wall time (median)", wall, "< 1.05"),
                            ("death -> first step (median)", rec, "<= 1.0")):
        if not res:
            continue
        nw, tr = res["neuron-watch"], res["torchrun"]
        m_nw = statistics.median(nw) if nw else float("nan")
        m_tr = statistics.median(tr) if tr else float("nan")
        ratio = m_nw / m_tr if nw and tr else float("nan")
        print(f"{title:34} {m_nw:13.2f}s {m_tr:13.2f}s {ratio:12.3f}  {aim}")
        if title.startswith("clean"):
            r_min = min(nw) / min(tr) if nw and tr else float("nan")
            print(f"{'clean run wall time (min)':34} {min(nw) if nw else float('nan'):13.2f}s "
                  f"{min(tr) if tr else float('nan'):13.2f}s {r_min:12.3f}")
        print(f"    neuron-watch: {fmt(nw)}\n    torchrun:     {fmt(tr)}")
    print(f"\ntotal benchmark time {time.monotonic() - t0:.0f}s; load average at end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
