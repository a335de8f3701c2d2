"""A small DDP job (gloo, CPU) that gets stuck the ways real jobs do, for the culprit tests.

Every rank prints ``step N loss X`` after each optimizer step. In generation 0 (neuron-watch's
``NEURON_WATCH_GENERATION``), at ``--at`` the rank ``--rank`` gets stuck while the others go on into
DDP's gradient all-reduce in ``backward`` and wait there (``--grad-sync ddp``, the default), or into
the one ``dist.all_reduce`` of the gradients that replaces DDP where a test's subject is a collective
and not DDP (``--grad-sync allreduce``: the same collectives at the same points, stepped by hand;
DDP's and ``torch.optim``'s constructors import ``torch._dynamo``, 2.6 CPU-s of every rank's start on
this machine at load 10):

* ``sleep``: sleeps in its own code (a slow host call, a lock);
* ``spin``: spins in a Python loop;
* ``loader``: its data-loader worker process never delivers the next batch;
* ``uneven``: its data shard has one batch fewer (DDP's classic uneven-inputs bug): it skips the
  last step's collectives, says it is done and exits cleanly while the others wait for it in
  ``backward``;
* ``skip_allreduce``: every rank averages its loss for the log with an explicit
  ``dist.all_reduce`` after each step (the common pattern); at ``--at`` the rank skips it and goes
  on into the next step's backward, so its collectives no longer match the others';
* ``abort_at_exit``: trains to the end, says so, then aborts while exiting (SIGABRT, as a C++
  thread left joinable at interpreter exit does: "terminate called without an active exception");
* ``teardown_error``: trains to the end and says nothing of it (a script that just returns); the rank
  then fails while shutting down (a RuntimeError after ``destroy_process_group``, once its peers have
  returned): its peers' exit 0 at the last step is the end;
* ``slow_teardown``: trains to the end; rank 0 alone says so (as most programs print their end:
  the DDP tutorial, HF Trainer, Lightning, Megatron), then every rank takes ``--teardown-seconds``
  to exit after ``destroy_process_group`` (an interpreter exit on a loaded machine), silently; with
  ``--teardown-until PATH``, until PATH exists (at most ``--teardown-seconds``): the test ends the
  teardown once it has seen the watchdog's word on it, so the ranks are provably running when it is said.

Later generations run clean, so a restart finishes the job.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset[torch.Tensor]):
    def __init__(self, n: int, stuck_at: int) -> None:
        self.n, self.stuck_at = n, stuck_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.stuck_at:
            time.sleep(10_000)  # in the worker process: the rank's main thread waits for the batch
        return torch.randn(32)


def stuck_in_own_code() -> None:
    time.sleep(10_000)


def spin_forever() -> None:
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


class AllReduceSGD:
    """DDP and ``torch.optim.SGD`` (no momentum) by hand: rank 0's weights to every rank at the start,
    the gradients averaged by one ``dist.all_reduce`` after ``backward`` (the collective a stuck peer
    blocks), a plain step. No DDP, no ``torch.optim``: no ``torch._dynamo`` import."""

    def __init__(self, model: torch.nn.Module, lr: float) -> None:
        self.params, self.lr = list(model.parameters()), lr
        with torch.no_grad():
            for param in self.params:
                dist.broadcast(param, 0)

    def step(self) -> None:
        grads = [param.grad for param in self.params if param.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        with torch.no_grad():
            offset = 0
            for param, g in zip(self.params, grads, strict=True):
                param.sub_(self.lr * flat[offset:offset + g.numel()].view_as(param))
                offset += g.numel()

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None


def teardown(seconds: float, until: str | None) -> None:
    """The silent teardown of ``slow_teardown``: ``seconds``, or until the file ``until`` exists."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until is not None and Path(until).exists()):
        time.sleep(0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--fault", default="none",
                   choices=["none", "sleep", "spin", "loader", "uneven", "skip_allreduce", "abort_at_exit",
                            "slow_teardown", "teardown_error"])
    p.add_argument("--at", type=int, default=5)
    p.add_argument("--rank", type=int, default=1)
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--teardown-seconds", type=float, default=8.0, help="slow_teardown: seconds to exit (at most)")
    p.add_argument("--teardown-until", help="slow_teardown: exit once this file exists")
    p.add_argument("--grad-sync", choices=("ddp", "allreduce"), default="ddp",
                   help="ddp: DistributedDataParallel and torch.optim.SGD; allreduce: one all_reduce of the "
                        "gradients after backward and a step by hand (no torch._dynamo import)")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    faulty = a.fault != "none" and rank == a.rank and os.environ.get("NEURON_WATCH_GENERATION", "0") == "0"
    torch.manual_seed(0)
    model: torch.nn.Module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt: torch.optim.Optimizer | AllReduceSGD
    if a.grad_sync == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        opt = AllReduceSGD(model, lr=0.01)
    steps = a.steps - 1 if faulty and a.fault == "uneven" else a.steps
    data = Batches(steps, a.at if faulty and a.fault == "loader" else -1)
    loader = DataLoader(data, batch_size=None, num_workers=1 if a.fault == "loader" else 0)
    for step, x in enumerate(loader, start=1):
        if faulty and step == a.at and a.fault == "sleep":
            stuck_in_own_code()
        if faulty and step == a.at and a.fault == "spin":
            spin_forever()
        loss = model(x).pow(2).mean()
        loss.backward()  # DDP's all-reduce of the gradients: the other ranks wait here
        opt.step()  # (or here: --grad-sync allreduce)
        opt.zero_grad()
        mean_loss = loss.detach().clone()
        if not (faulty and step == a.at and a.fault == "skip_allreduce"):
            dist.all_reduce(mean_loss)  # the loss averaged over the ranks, for the log
        mean_loss /= dist.get_world_size()
        time.sleep(a.step_time)
        print(f"step {step} loss {mean_loss.item():.4f}", flush=True)
    rank_0_only = a.fault == "slow_teardown" and os.environ.get("NEURON_WATCH_GENERATION", "0") == "0"
    if (not rank_0_only or rank == 0) and a.fault != "teardown_error":
        print(f"training done at step {steps}", flush=True)
    dist.destroy_process_group()
    if rank_0_only:
        teardown(a.teardown_seconds, a.teardown_until)
    if faulty and a.fault == "abort_at_exit":
        os.abort()
    if faulty and a.fault == "teardown_error":
        time.sleep(1.0)  # its peers return first
        raise RuntimeError("teardown: flushing the metrics writer failed")


if __name__ == "__main__":
    main()
