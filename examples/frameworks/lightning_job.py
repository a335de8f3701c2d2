"""A real Lightning job on CPU: DDP over torchrun's ranks, a small MLP, random data made here.

    torchrun --nproc_per_node 2 examples/frameworks/lightning_job.py --ckpt-dir ckpt --max-steps 30

What a user's Lightning job looks like to neuron-watch: Lightning reads torchrun's environment
(``TorchElasticEnvironment``), so ``devices`` is torchrun's ``--nproc_per_node``. Checkpoints are
``ModelCheckpoint(dirpath=..., every_n_train_steps=..., save_top_k=-1)`` files
(``epoch=E-step=S.ckpt``). ``--bar tqdm`` passes ``TQDMProgressBar`` explicitly (its ``\\r``-redrawn
bar on stdout); ``--bar default`` lets Lightning choose, which is ``RichProgressBar`` whenever
``rich`` is importable (lightning/pytorch/trainer/connectors/callback_connector.py,
``_configure_progress_bar``) and that prints nothing while stdout is not a terminal. It resumes the
way a user wires it for neuron-watch: ``trainer.fit(ckpt_path=$NEURON_WATCH_CHECKPOINT)``.

Rank 0 prints ``training began at global step N`` (``on_train_start``, after the checkpoint is
restored) and ``training done at step N``. ``--step-seconds S`` makes every training step S
seconds slower on every rank.
"""

from __future__ import annotations

import argparse
import os
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self, step_seconds: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
        self.step_seconds = step_seconds

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        if self.step_seconds > 0:
            time.sleep(self.step_seconds)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_start(self) -> None:
        if self.trainer.is_global_zero:
            print(f"training began at global step {self.trainer.global_step}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt-dir", required=True, help="ModelCheckpoint's dirpath")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--save-every", type=int, default=10, help="ModelCheckpoint(every_n_train_steps=...)")
    p.add_argument("--bar", choices=("tqdm", "default"), default="tqdm")
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--samples", type=int, default=512)
    a = p.parse_args()

    pl.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(a.samples, 16, generator=g)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    callbacks: list[pl.Callback] = [
        ModelCheckpoint(dirpath=a.ckpt_dir, every_n_train_steps=a.save_every, save_top_k=-1),
    ]
    if a.bar == "tqdm":
        callbacks.append(TQDMProgressBar())
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),  # torchrun's --nproc_per_node
        num_nodes=int(os.environ.get("GROUP_WORLD_SIZE", "1")),
        strategy="ddp",
        max_steps=a.max_steps,
        max_epochs=-1,  # max_steps alone ends training
        callbacks=callbacks,
        log_every_n_steps=1,
        logger=False,
        enable_model_summary=False,
    )
    # neuron-watch passes the newest complete checkpoint of --checkpoint-dir in this variable
    # (empty on the first generation: start from scratch).
    trainer.fit(Regressor(a.step_seconds), DataLoader(data, batch_size=16),
                ckpt_path=os.environ.get("NEURON_WATCH_CHECKPOINT") or None)
    if trainer.is_global_zero:
        print(f"training done at step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
