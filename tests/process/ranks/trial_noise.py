"""A 2-rank gloo job whose output carries what once passed for something else.

``--noise keepalive``: rank 0 runs a thread printing ``.`` every second from start to end (a
keep-alive some jobs print so that a batch system sees output). ``--noise binary``: rank 1 writes
seeded random bytes to its stdout before each step, each burst ending in a partial ``.`` (what a
lone dot in binary output looks like to a tail). ``--noise cr-error``: at ``--hang-at`` of
generation 0, rank 1 prints an error line ended by ``\r`` and a progress bar over it on the same
line, then exits 1 (a terminal shows only the bar). ``--noise none``: none of these.

``--hang-at N`` (generation 0 only; not with ``cr-error``): rank 1 stops at step N without joining
the all-reduce, and rank 0 waits in it; from generation 1 the job runs to ``--steps`` and says so.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def keep_alive() -> None:
    while True:
        print(".", flush=True)
        time.sleep(1.0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--noise", choices=("keepalive", "binary", "cr-error", "none"), default="none")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--hang-at", type=int, default=-1)
    p.add_argument("--env-out", default=None, help="write each rank's environment to DIR/env-<rank>.txt")
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=1800))
    rank = dist.get_rank()
    if args.env_out:
        with open(os.path.join(args.env_out, f"env-{rank}.txt"), "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in sorted(os.environ.items()))
    generation = int(os.environ.get("NEURON_WATCH_GENERATION", "0"))
    if args.noise == "keepalive" and rank == 0:
        threading.Thread(target=keep_alive, daemon=True).start()
    noise = random.Random(20261126 + rank)
    t = torch.ones(1)
    for step in range(1, args.steps + 1):
        if args.noise == "binary" and rank == 1:
            sys.stdout.buffer.write(bytes(noise.getrandbits(8) for _ in range(512)) + b"\n.")
            sys.stdout.buffer.flush()
        if generation == 0 and step == args.hang_at and rank == 1 and args.noise == "cr-error":
            sys.stdout.write(f"RuntimeError: trial failure at step {step}\r")
            sys.stdout.write(f"Epoch 0:  50%|#####     | {step}/{2 * step} [00:01<00:01]\n")
            sys.stdout.flush()
            os._exit(1)
        if generation == 0 and step == args.hang_at and rank == 1:
            print(f"rank {rank}: stuck before step {step}", flush=True)
            while True:
                time.sleep(1.0)
        dist.all_reduce(t)
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        time.sleep(0.3)
    print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
