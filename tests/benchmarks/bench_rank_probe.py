"""The rank probe's cost (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_rank_probe.py [--ranks 32] [--seconds 30] [--steps 3000]

(1) Agent side: one child process stands in for a node's ranks: it runs a gloo process group
(world size 1), fills the Flight Recorder with collectives (``TORCH_FR_BUFFER_SIZE`` as the agent
sets it, 64, or ``--buffer``) and starts ``--ranks`` real ``_WorkerServer``s on their own sockets
(the recorder is per process, so every server dumps the same full buffer: the size a real rank
answers). This process runs the agent's :class:`RankProbe` thread over them for ``--seconds``.
Printed: the agent's CPU share of one core, and the stand-in's CPU per answered dump (what each
rank pays per poll), as a share of a rank's core at the poll interval.

(2) Rank side: the same small training step (a linear layer, backward, all_reduce of the
gradient) timed in a child without the bootstrap, with it, and with it while being polled every
``--poll`` seconds. Printed: mean step time of each and the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from neuron_watch.node.rank_probe import DIR_ENV, POLL_EVERY, RankProbe, probe_env

SERVERS = """
import os, sys, time, torch, torch.distributed as dist
from torch._C._distributed_c10d import _WorkerServer
d, n = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "init"), rank=0, world_size=1)
t = torch.ones(16)
for _ in range(max(200, int(os.environ.get("TORCH_FR_BUFFER_SIZE", "2000")))):
    dist.all_reduce(t)
servers = [_WorkerServer(os.path.join(d, f"r{r}.sock")) for r in range(n)]
for r in range(n):
    with open(os.path.join(d, f"r{r}.json"), "w") as f:
        f.write('{"state": "listening"}')
ru = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF)
print("ready", ru.ru_utime + ru.ru_stime, flush=True)
sys.stdin.read()  # until the benchmark closes it
ru = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF)
print(ru.ru_utime + ru.ru_stime, flush=True)
os._exit(0)
"""

STEPS = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
model = torch.nn.Linear(256, 256)
x = torch.randn(64, 256)
n = int(sys.argv[2])
for i in range(n + 50):
    if i == 50:
        t0 = time.perf_counter()
    model.zero_grad()
    model(x).square().mean().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
print((time.perf_counter() - t0) / n, flush=True)
os._exit(0)
"""


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def agent_side(ranks: int, seconds: float, buffer: str) -> None:
    with tempfile.TemporaryDirectory(prefix="nwb-", dir="/tmp") as d:
        env = {**os.environ, "TORCH_FR_BUFFER_SIZE": buffer, "OMP_NUM_THREADS": "1"}
        p = subprocess.Popen([sys.executable, "-c", SERVERS, d, str(ranks)], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert p.stdout is not None and p.stdin is not None
            word, ready_cpu = p.stdout.readline().split()
            assert word == "ready"
            probe = RankProbe()
            c0, t0 = cpu(), time.monotonic()
            probe.set_ranks(d, range(ranks))
            readings = 0
            while time.monotonic() - t0 < seconds:
                time.sleep(1.0)  # the agent's _sample cadence
                got = probe.take()
                readings += len(got)
                bad = [r.problem for r in got if r.problem]
                assert not bad, bad[:1]
            probe.close()
            c1, t1 = cpu(), time.monotonic()
            p.stdin.close()
            server_cpu = float(p.stdout.readline()) - float(ready_cpu)
        finally:
            p.kill()
            p.wait()
    share = (c1 - c0) / (t1 - t0)
    per_dump = server_cpu / max(readings, 1)
    print(f"agent side: {ranks} ranks, TORCH_FR_BUFFER_SIZE={buffer}, poll every {POLL_EVERY:.0f}s, "
          f"{readings} readings in {t1 - t0:.1f}s")
    print(f"  agent CPU {c1 - c0:.3f}s = {100 * share:.2f}% of one core "
          f"({1000 * (c1 - c0) / max(readings, 1):.2f} ms per reading)")
    print(f"  rank side: {1000 * per_dump:.2f} ms CPU per dump "
          f"= {100 * per_dump / POLL_EVERY:.3f}% of a rank's core at one dump per {POLL_EVERY:.0f}s")


def step_time(steps: int, extra: dict[str, str], poll: float | None) -> float:
    with tempfile.TemporaryDirectory(prefix="nwb-", dir="/tmp") as d:
        env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
        if DIR_ENV in extra:
            env[DIR_ENV] = d
        p = subprocess.Popen([sys.executable, "-c", STEPS, os.path.join(d, "init"), str(steps)], env=env,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
        probe = None
        if poll is not None:
            probe = RankProbe(poll_every=poll)
            probe.set_ranks(d, [0])
        try:
            out, _ = p.communicate(timeout=600)
        finally:
            if probe is not None:
                probe.close()
            p.kill()
            p.wait()
        return float(out.strip().splitlines()[-1])


def rank_side(steps: int, poll: float) -> None:
    base = {"RANK": "0", "LOCAL_RANK": "0"}
    boot = {**base, **probe_env({k: v for k, v in os.environ.items()}, "set-below")}
    runs = {"plain": [], "bootstrap": [], f"bootstrap+poll {poll:g}s": []}  # type: dict[str, list[float]]
    for _ in range(3):  # interleaved: the shared machine's load drifts
        runs["plain"].append(step_time(steps, base, None))
        runs["bootstrap"].append(step_time(steps, boot, None))
        runs[f"bootstrap+poll {poll:g}s"].append(step_time(steps, boot, poll))
    plain = min(runs["plain"])
    print(f"rank side: {steps} steps (Linear 256x256, backward, gloo all_reduce of 2 grads), best of 3 runs")
    for name, ts in runs.items():
        best = min(ts)
        print(f"  {name:22s} {1e6 * best:8.1f} us/step  ({100 * (best / plain - 1):+.2f}% vs plain; "
              f"runs: {json.dumps([round(1e6 * t, 1) for t in ts])})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--buffer", default="64", help="TORCH_FR_BUFFER_SIZE of the stand-in ranks")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--poll", type=float, default=POLL_EVERY, help="poll interval for the rank-side run")
    ap.add_argument("--only", choices=("agent", "rank"), default=None)
    args = ap.parse_args()
    if args.only != "rank":
        agent_side(args.ranks, args.seconds, args.buffer)
    if args.only != "agent":
        rank_side(args.steps, args.poll)


if __name__ == "__main__":
    main()
