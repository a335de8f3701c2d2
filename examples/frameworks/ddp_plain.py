"""A plain DDP job in the style of PyTorch's DDP-with-torchrun tutorial, on CPU with gloo.

    torchrun --nproc_per_node 2 examples/frameworks/ddp_plain.py --total-epochs 6 --save-every 2

The shape users copy from that tutorial: a ``Trainer`` class, a ``DistributedSampler``, one console
line per epoch per rank ``[GPU{rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {steps}``, a
``snapshot.pt`` (``MODEL_STATE``, ``EPOCHS_RUN``) saved by rank 0 every ``--save-every`` epochs, and
on start a resume from that snapshot if it exists. It knows nothing about neuron-watch: a restart
resumes because the snapshot is there. ``EPOCHS_RUN`` counts the epochs completed, so a resumed
run starts at the epoch after the snapshot's. ``--epoch-seconds S`` makes every epoch S seconds
longer (on every rank).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader[tuple[torch.Tensor, ...]],
                 optimizer: torch.optim.Optimizer, save_every: int, snapshot_path: str,
                 epoch_seconds: float) -> None:
        self.rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.epoch_seconds = epoch_seconds
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, path: str) -> None:
        snapshot = torch.load(path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        sampler = self.train_data.sampler
        assert isinstance(sampler, DistributedSampler)
        sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)
        if self.epoch_seconds > 0:
            time.sleep(self.epoch_seconds)

    def _save_snapshot(self, epoch: int) -> None:
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        # Written beside and renamed into place: a rank stopped mid-save leaves the previous
        # snapshot whole (the tutorial saves in place; a torn snapshot.pt cannot be resumed).
        partial = os.path.join(os.path.dirname(self.snapshot_path) or ".",
                               "." + os.path.basename(self.snapshot_path) + ".partial")
        torch.save(snapshot, partial)
        os.replace(partial, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs(samples: int) -> tuple[Dataset[tuple[torch.Tensor, ...]], torch.nn.Module,
                                            torch.optim.Optimizer]:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(samples, 20, generator=g)
    train_set = TensorDataset(x, x.sum(dim=1, keepdim=True))
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def main() -> None:
    p = argparse.ArgumentParser(description="plain DDP training job (torchrun, gloo)")
    p.add_argument("--total-epochs", type=int, default=6)
    p.add_argument("--save-every", type=int, default=2, help="save a snapshot every N epochs")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--snapshot-path", default="snapshot.pt")
    p.add_argument("--epoch-seconds", type=float, default=0.0)
    p.add_argument("--samples", type=int, default=2048)
    a = p.parse_args()

    dist.init_process_group(backend="gloo")
    dataset, model, optimizer = load_train_objs(a.samples)
    loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=False, sampler=DistributedSampler(dataset))
    os.makedirs(os.path.dirname(os.path.abspath(a.snapshot_path)), exist_ok=True)
    Trainer(model, loader, optimizer, a.save_every, a.snapshot_path, a.epoch_seconds).train(a.total_epochs)
    if int(os.environ["RANK"]) == 0:
        print(f"training done after epoch {a.total_epochs - 1}")
    # As the tutorial's main() ends (pytorch/examples, distributed/ddp-tutorial-series/
    # multigpu_torchrun.py). Only after success, as there: an exception skips it.
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
