"""A real Hugging Face ``Trainer`` job on CPU: a tiny GPT-2 built from a config, random tokens.

    torchrun --nproc_per_node 2 examples/frameworks/hf_trainer.py --output-dir ckpt --max-steps 30

What a user's job looks like to neuron-watch: Trainer's own tqdm bar (``\\r``-redrawn, on stderr),
its ``{'loss': ...}`` log dicts on rank 0, ``checkpoint-<step>/`` directories every ``--save-steps``
steps under ``--output-dir``. It resumes the way a user wires it for neuron-watch:
``trainer.train(resume_from_checkpoint=$NEURON_WATCH_CHECKPOINT)``. Nothing is downloaded.

Rank 0 prints ``training began at global step N`` (from ``on_train_begin``, which Trainer calls
after it has restored the checkpoint's state) and ``training done at step N`` at the end.
``--step-seconds S`` sleeps S seconds after every optimizer step on every rank (a slow model).
``--final-save-seconds S`` makes the checkpoint save of the last step S seconds longer on every rank
(a slow filesystem's flush, silent as Trainer's saves are at its default log level).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

VOCAB, SEQ = 128, 16


class RandomTokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Fixed random sequences (the same on every rank: seeded), labels = inputs (causal LM)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Announce(TrainerCallback):
    """Says where training began and ended (rank 0), and makes steps slow if asked."""

    def __init__(self, step_seconds: float, final_save_seconds: float = 0.0) -> None:
        self.step_seconds = step_seconds
        self.final_save_seconds = final_save_seconds

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        if state.is_world_process_zero:
            print(f"training began at global step {state.global_step}", flush=True)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if self.step_seconds > 0:
            time.sleep(self.step_seconds)

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if self.final_save_seconds > 0 and state.global_step >= state.max_steps:
            time.sleep(self.final_save_seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", required=True, help="where checkpoint-<step>/ directories go")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--save-steps", type=int, default=10)
    p.add_argument("--logging-steps", type=int, default=1)
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--final-save-seconds", type=float, default=0.0)
    p.add_argument("--samples", type=int, default=256)
    a = p.parse_args()

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir=a.output_dir,
        max_steps=a.max_steps,
        save_strategy="steps",
        save_steps=a.save_steps,
        logging_strategy="steps",
        logging_steps=a.logging_steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        use_cpu=True,
        ddp_backend="gloo",  # CPU ranks under torchrun
        ddp_find_unused_parameters=False,  # every GPT-2 parameter takes part in the loss
        report_to="none",
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(a.samples, seed=1),
                      callbacks=[Announce(a.step_seconds, a.final_save_seconds)])
    # neuron-watch passes the newest complete checkpoint of --checkpoint-dir in this variable
    # (empty on the first generation: start from scratch).
    trainer.train(resume_from_checkpoint=os.environ.get("NEURON_WATCH_CHECKPOINT") or None)
    if trainer.is_world_process_zero():
        print(f"training done at step {trainer.state.global_step}", flush=True)
    # No trainer.end() (Accelerator.end_training: destroy_process_group), as users' scripts end.
    # With it, torch itself can hang the exit: plain torchrun, 4 ranks, hung in 4 of 5 runs (the
    # DDP reducer frees the group, ~ProcessGroupGloo joins a gloo worker that waits for the GIL to
    # drop the last all_gather's tensors; gdb); neuron-watch then stops it as a hang after training.


if __name__ == "__main__":
    main()
