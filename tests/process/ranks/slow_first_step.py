"""A 2-rank gloo job whose first step is slow on rank 1 alone, while rank 0 waits in its all-reduce.

Both ranks complete a start-up all-reduce (what DDP's broadcast is), then rank 1 computes for
``--slow SECONDS`` before it joins step 1's all-reduce, burning ``--cpu-share`` of a core meanwhile
(measured on its own CPU clock, so a loaded machine does not thin it out): a first step slow on one
rank (its data, a first forward), never a hang. Then ``--steps`` steps, each printing
``step N loss X``, and a clean end.

``--then-hang``: step 1 has a second all-reduce (a second gradient bucket: the step's line comes after
both), which rank 1 never enters once its slow part is done (it says ``slow part done`` and sleeps),
while rank 0 enters it and waits: a hang in the first step, before any progress line.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def compute(seconds: float, share: float) -> None:
    """Burn ``share`` of a core for ``seconds`` of wall time, in slices of 0.1 s."""
    t0, c0 = time.monotonic(), time.process_time()
    while (now := time.monotonic()) - t0 < seconds:
        while time.process_time() - c0 < share * (now - t0):
            pass
        time.sleep(0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--slow", type=float, required=True)
    p.add_argument("--cpu-share", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--then-hang", action="store_true")
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)  # start-up: both ranks complete it
    if rank == 1:
        compute(args.slow, args.cpu_share)
    if args.then_hang:
        dist.all_reduce(t)  # step 1's first bucket: rank 0 waited for it through rank 1's slow part
        if rank == 1:
            print("slow part done", flush=True)
            time.sleep(3600)  # never enters the second bucket's all-reduce
        dist.all_reduce(t)
    for step in range(1, args.steps + 1):
        dist.all_reduce(t)
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        time.sleep(0.1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
