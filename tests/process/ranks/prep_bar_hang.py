"""A DDP job (gloo, CPU) that prepares its data on rank 0, then hangs in its first collective.

Rank 0 tokenises ``--items`` short texts under a bare tqdm bar (no description, as a preparation
loop draws it: ``100%|##########| 1000/1000 [...]`` at its end), on stderr as tqdm writes it, then
every rank joins the process group. Rank 0 calls the first ``all_reduce``; rank 1 is stuck in its
own code before it (a wait on a file that never comes): rank 0 waits for it, and neither prints
again. No loss is logged and no checkpoint is written: nothing says that training ran.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
from tqdm import tqdm


def prepare(items: int) -> list[list[int]]:
    """Tokenise ``items`` texts into byte ids, one bar step each."""
    out = []
    for i in tqdm(range(items)):
        out.append(list(f"example {i}: the quick brown fox".encode()))
        time.sleep(0.002)  # a real tokeniser's pace: the bar is redrawn on the way to its total
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--items", type=int, default=1000)
    a = p.parse_args()
    rank = int(os.environ["RANK"])
    if rank == 0:
        prepare(a.items)
    # gloo's own timeout far beyond the watchdog's: the watchdog, not gloo, ends this hang
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    if rank == 1:
        while True:
            time.sleep(3600)  # stuck in its own code: never reaches the collective
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"rank {rank}: all_reduce done {t.tolist()}", flush=True)  # never reached
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
