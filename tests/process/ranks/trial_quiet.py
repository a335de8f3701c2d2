"""A small deterministic 2-rank gloo job: what it prints depends only on its rank.

Each rank prints to stdout and stderr, warns through Python's ``warnings``, runs a few
all-reduces and barriers (``--linger`` seconds apart, silent; with ``--own-server`` a worker server
of its own runs meanwhile, whose start and stop torch logs in the rank's output), and tears its
process group down. Its output under ``neuron-watch`` must be the same as under plain torchrun.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--linger", type=float, default=0.0, help="seconds to wait, silent, before tearing down")
    p.add_argument("--own-server", action="store_true",
                   help="run torch's worker server of the job's own (torch's control plane) while lingering")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}: starting", flush=True)
    print(f"rank {rank}: a line on stderr", file=sys.stderr, flush=True)
    warnings.warn(f"rank {rank}: the job's own warning", stacklevel=1)
    t = torch.ones(3) * (rank + 1)
    for step in range(1, 4):
        dist.all_reduce(t)
        print(f"step {step} sum {t.tolist()}", flush=True)
    dist.barrier()
    server = None
    if args.own_server:  # logs "[c10d] Server listening to UNIX job-r<rank>.sock" and its stop: the job's lines
        from torch._C._distributed_c10d import _WorkerServer

        server = _WorkerServer(f"job-r{rank}.sock")
    time.sleep(args.linger)
    if server is not None:
        server.shutdown()
        os.unlink(f"job-r{rank}.sock")  # torch leaves it behind; the next run binds it again
    dist.barrier()
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
