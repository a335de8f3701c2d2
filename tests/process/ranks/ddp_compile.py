"""A DDP job (gloo, CPU) whose model is ``torch.compile``d, for the compile tests.

Every rank prints ``step N loss X`` after each step. In generation 0, at ``--at`` the rank
``--rank`` gets a batch of another shape: dynamo's guard on the input size fails and that rank
alone recompiles (inductor writes C++ and runs the system compiler) while the others wait for it
in DDP's gradient all-reduce. ``--storm``: every step of that rank has a new shape (a recompile on
every step until dynamo's recompile limit). ``--cold-cache DIR``: the recompiles use inductor's
cache in ``DIR`` (an empty one: the recompile is real, the system compiler runs), while the first
compile uses the cache the environment names (``TORCHINDUCTOR_CACHE_DIR``; it is not the subject).
``--backend``: torch.compile's backend (``inductor``, the default, writes C++ and runs the system
compiler; ``aot_eager`` traces the same graphs through dynamo and AOT autograd and runs them eagerly;
``eager`` hands dynamo's graphs to eager PyTorch: both a real recompile, guards and dynamo's recompile
lines included, without the C++ compile).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def model(width: int, depth: int) -> torch.nn.Module:
    """``depth`` blocks of different widths: each block's fused kernels differ, so the compile
    grows with the depth (identical blocks would share one kernel)."""
    layers: list[torch.nn.Module] = []
    for i in range(depth):
        w_in, w_out = width + i, width + i + 1
        layers += [torch.nn.Linear(w_in, w_out), torch.nn.GELU(), torch.nn.LayerNorm(w_out)]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width + depth, 1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--at", type=int, default=4)
    p.add_argument("--rank", type=int, default=1)
    p.add_argument("--depth", type=int, default=24)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--storm", action="store_true")
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--cold-cache", default="")
    p.add_argument("--backend", default="inductor")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    faulty = rank == a.rank and os.environ.get("NEURON_WATCH_GENERATION", "0") == "0"
    torch.manual_seed(0)
    # the model compiled inside DDP (DDP's hooks stay eager); static shapes: a new shape is a whole
    # new compile, as on Neuron
    compiled = DDP(torch.compile(model(a.width, a.depth), backend=a.backend, dynamic=False))
    opt = torch.optim.SGD(compiled.parameters(), lr=0.01)
    for step in range(1, a.steps + 1):
        batch = 8
        if faulty and (step == a.at or (a.storm and step >= a.at)):
            batch = 8 + step  # a shape dynamo has not seen: this rank alone recompiles
            if a.cold_cache:  # inductor reads the variable at each cache look-up
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = a.cold_cache
        loss = compiled(torch.randn(batch, a.width)).pow(2).mean()
        loss.backward()  # DDP's all-reduce: the other ranks wait here while it compiles
        opt.step()
        opt.zero_grad()
        time.sleep(a.step_time)
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    print(f"training done at step {a.steps}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
