"""Where the CPU of one real run goes, process by process (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_run_cpu.py [--scenario crash|hang|clean|two-nodes] [--interval 0.1]

Runs the toy job as the process tests start it (``neuron-watch --quiet torchrun --nproc_per_node 2
examples/toy/train.py ...`` with the tests' environment: ``OMP_NUM_THREADS=1``, the stand-in
compiler at a quarter of a core, the gradients averaged by one all_reduce instead of DDP,
``TOY_GRAD_SYNC=allreduce``, unless the environment sets it) and reads ``/proc/<pid>/stat`` of
every process under the wrapper every ``--interval`` seconds (a process's figure is its last
reading: what it spent after that is not seen, at most one interval of it). Printed: each process's
CPU seconds and its role (wrapper = agent and coordinator in one process; torchrun per generation;
each rank per generation; helpers), the sum per role (a rank by its torchrun's generation), the
run's wall time, and the CPU of all the wrapper's reaped descendants as the kernel counts it (the
check on the sampled sum).

``crash``: rank 1 crashes at step 12 of 16, one restart (test_console's crash test). ``hang``:
rank 1 hangs at step 8 of 14, ``--hang-timeout 10``, one restart. ``clean``: 16 steps, no fault.
``idle``: one rank that only sleeps ``--idle-seconds`` (default 20) and prints nothing: what the
wrapper costs while nothing happens (its CPU-s per second of the run is printed).
``two-nodes``: the clean job as two nodes on this machine (test_multinode's launch: one wrapper a
node, ``--nnodes 2 --node_rank I``, a static rendezvous on loopback, one rank a node, node 0 hosting
the coordinator); both wrappers and their descendants are counted.
For the cost of one rank without neuron-watch, compare with plain ``torchrun`` on the same job.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOY = ROOT / "examples" / "toy" / "train.py"
TICKS = os.sysconf("SC_CLK_TCK")

SCENARIOS = {
    "crash": ((), ("--steps", "16", "--crash-at", "12", "--crash-rank", "1")),
    "hang": (("--hang-timeout", "10"), ("--steps", "14", "--hang-at", "8")),
    "clean": ((), ("--steps", "16")),
    "two-nodes": ((), ("--steps", "16")),
    "idle": ((), ()),
}

#: The idle scenario's rank: it sleeps, prints nothing, ends cleanly.
IDLE_RANK = "import sys, time\ntime.sleep(float(sys.argv[1]))\n"


def table() -> dict[int, tuple[int, float]]:
    """Every process: pid -> (parent pid, CPU seconds of the process and its threads)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    return out


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def role(cmd: str) -> str:
    gen = re.search(r"/gen-(\d+)/", cmd)
    if "import torch.distributed.run as run" in cmd:
        return "torchrun spare"  # started ahead for the next generation, which it becomes
    if "bin/torchrun" in cmd:
        return f"torchrun gen-{gen.group(1) if gen else '?'}"
    if "torchrun's own argument parser" in cmd:
        return "torchrun argument reader"
    if str(TOY) in cmd or "train.py" in cmd or "idle_rank.py" in cmd:
        return "rank"
    if "neuronx-cc" in cmd:
        return "stand-in compiler"
    if "guardian" in cmd:
        return "guardian"
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="crash")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="how long the idle scenario's rank sleeps")
    args = ap.parse_args()
    watch, toy = SCENARIOS[args.scenario]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1", TOY_COMPILER_CPU_SHARE="0.25")
    env.setdefault("TOY_GRAD_SYNC", "allreduce")  # as toy_env; TOY_GRAD_SYNC=ddp for the DDP job's cost
    with tempfile.TemporaryDirectory(prefix="bench-run-cpu-") as tmp:
        ckpt = f"{tmp}/ckpt"
        job = [str(TOY), "--checkpoint-dir", ckpt, *toy]
        if args.scenario == "idle":
            idle = Path(tmp) / "idle_rank.py"
            idle.write_text(IDLE_RANK)
            job = [str(idle), str(args.idle_seconds)]
        if args.scenario == "two-nodes":
            master, coordinator = _free_port(), _free_port()
            env["NEURON_WATCH_SECRET"] = secrets.token_hex(16)
            argvs = [[str(BIN / "neuron-watch"), "--quiet", "--run-dir", f"{tmp}/node{i}", "--checkpoint-dir", ckpt,
                      "--coordinator", f"127.0.0.1:{coordinator}", "--job-id", "bench-two-nodes", *watch, "torchrun",
                      "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", "1", "--master_addr", "127.0.0.1",
                      "--master_port", str(master), *job] for i in range(2)]
        else:
            argvs = [[str(BIN / "neuron-watch"), "--quiet", "--run-dir", f"{tmp}/run", "--checkpoint-dir", ckpt, *watch,
                      "torchrun", "--nproc_per_node", "1" if args.scenario == "idle" else "2", *job]]
        began = time.monotonic()
        wrappers = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True) for argv in argvs]
        ours = {p.pid for p in wrappers}
        seen: dict[int, tuple[float, str]] = {}  # pid -> (CPU seconds, role at first sight)
        steady: list[tuple[float, float]] = []  # (time, the wrappers' CPU seconds) while ranks run
        while any(p.poll() is None for p in wrappers):
            procs = table()
            grew = True
            while grew:  # descendants, however deep (torchrun starts its ranks in a session of its own)
                new = {pid for pid, (ppid, _) in procs.items() if ppid in ours and pid not in ours}
                ours |= new
                grew = bool(new)
            for pid in ours & procs.keys():
                first = seen[pid][1] if pid in seen else None
                kind = first or ("wrapper" if pid in {p.pid for p in wrappers} else role(command(pid)))
                if kind == "rank" and procs[pid][0] in seen:  # a rank of its torchrun's generation
                    kind = "rank " + seen[procs[pid][0]][1].removeprefix("torchrun ")
                seen[pid] = (procs[pid][1], kind)
            ranks_live = any(kind.startswith("rank") for pid, (_cpu, kind) in seen.items() if pid in procs)
            wrapper_now = sum(seen[p.pid][0] for p in wrappers if p.pid in seen)
            if ranks_live:  # the wrappers' CPU while ranks run (start-up and the end left out)
                steady.append((time.monotonic(), wrapper_now))
            time.sleep(args.interval)
        wall = time.monotonic() - began
    kernel = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"scenario {args.scenario}: exit {', '.join(str(p.returncode) for p in wrappers)}, wall {wall:.1f} s")
    by_role: dict[str, float] = {}
    for pid, (cpu, kind) in sorted(seen.items(), key=lambda kv: -kv[1][0]):
        by_role[kind] = by_role.get(kind, 0.0) + cpu
        if cpu >= 0.05:
            print(f"  {cpu:6.2f} s  {kind:<26} pid {pid}")
    total = sum(by_role.values())
    print("by role:")
    for kind, cpu in sorted(by_role.items(), key=lambda kv: -kv[1]):
        print(f"  {cpu:6.2f} s  {100 * cpu / total:4.0f}%  {kind}")
    wrapper_cpu = by_role.get("wrapper", 0.0)
    print(f"wrapper: {wrapper_cpu:.2f} CPU-s over {wall:.1f} s of wall, {wrapper_cpu / wall:.4f} CPU-s per second")
    if len(steady) >= 2 and steady[-1][0] > steady[0][0]:
        (t0, c0), (t1, c1) = steady[0], steady[-1]
        print(f"wrapper while ranks ran: {c1 - c0:.2f} CPU-s over {t1 - t0:.1f} s, "
              f"{(c1 - c0) / (t1 - t0):.4f} CPU-s per second")
    print(f"sampled {total:.2f} s; the kernel's count for the wrapper and its reaped descendants "
          f"{kernel.ru_utime + kernel.ru_stime:.2f} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


if __name__ == "__main__":
    main()
