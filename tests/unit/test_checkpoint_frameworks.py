"""Real framework checkpoints (tiny models built from config, CPU, no downloads): the chooser picks
what Hugging Face's Trainer and Lightning's ModelCheckpoint wrote, and the path it returns is one
the framework's own resume accepts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuron_watch.recovery.checkpoint_scan import find_checkpoint

# torch is imported in the tests, not at the module's top: every pytest-xdist worker imports every
# test module at collection, and torch costs seconds of CPU in each that never runs these tests


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")
def test_hugging_face_trainer_checkpoints(tmp_path: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    class _Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.arange(8) % 50
            return {"input_ids": ids, "labels": ids}

    steps_run: list[int] = []

    class Count(TrainerCallback):
        def on_step_end(self, args: object, state: object, control: object, **kw: object) -> None:
            steps_run.append(state.global_step)  # type: ignore[attr-defined]

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=16))

    def trainer(max_steps: int) -> Trainer:
        args = TrainingArguments(output_dir=str(tmp_path), max_steps=max_steps, save_steps=2,
                                 per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                 logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
        return Trainer(model=model, args=args, train_dataset=_Tokens(), callbacks=[Count()])

    trainer(4).train()
    trainer(4).save_model()  # the final model beside the checkpoints (model.safetensors, training_args.bin)
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None, found.summary()
    assert (found.chosen.path, found.chosen.convention, found.chosen.step) == (str(tmp_path / "checkpoint-4"), "hf", 4)
    # A save cut short before its last write: the older checkpoint wins, the newer is named.
    os.remove(tmp_path / "checkpoint-4" / "trainer_state.json")
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "checkpoint-2")
    assert "checkpoint-4: no trainer_state.json" in found.summary()
    # The path is what trainer.train(resume_from_checkpoint=...) takes: it resumes at step 2.
    t = trainer(6)
    steps_run.clear()
    t.train(resume_from_checkpoint=found.chosen.path)
    assert steps_run == [3, 4, 5, 6]
    assert find_checkpoint(str(tmp_path)).chosen.path == str(tmp_path / "checkpoint-6")  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("save_last", [True, "link"])
def test_lightning_model_checkpoint(tmp_path: Path, save_last: bool | str) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.steps_run = 0

        def training_step(self, batch: list[torch.Tensor], _i: int) -> torch.Tensor:
            self.steps_run += 1
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1)),
                                       batch_size=4)

    def trainer(max_steps: int) -> L.Trainer:
        ck = ModelCheckpoint(dirpath=str(tmp_path), every_n_train_steps=2, save_top_k=-1, save_last=save_last)
        return L.Trainer(max_steps=max_steps, accelerator="cpu", devices=1, callbacks=[ck], logger=False,
                         enable_progress_bar=False, enable_model_summary=False)

    trainer(4).fit(Tiny(), data)
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None, found.summary()
    assert found.chosen.convention == "lightning"
    if save_last == "link":  # last.ckpt -> epoch=0-step=4.ckpt: followed
        assert (tmp_path / "last.ckpt").is_symlink()
        assert (found.chosen.path, found.chosen.step) == (str(tmp_path / "epoch=0-step=4.ckpt"), 4)
    else:  # last.ckpt is a copy written after epoch=0-step=4.ckpt
        assert found.chosen.path in {str(tmp_path / "last.ckpt"), str(tmp_path / "epoch=0-step=4.ckpt")}
    # The newest file cut short (a copy across file systems interrupted): never chosen.
    for name in ("last.ckpt", "epoch=0-step=4.ckpt"):
        p = tmp_path / name
        if p.is_symlink():
            p.unlink()
            continue
        data_ = p.read_bytes()
        p.write_bytes(data_[: len(data_) // 2])
    found = find_checkpoint(str(tmp_path))
    assert found.chosen is not None and found.chosen.path == str(tmp_path / "epoch=0-step=2.ckpt")
    # The path is what Trainer.fit(ckpt_path=...) takes: it resumes at step 2.
    t, model = trainer(6), Tiny()
    t.fit(model, data, ckpt_path=found.chosen.path)
    assert (t.global_step, model.steps_run) == (6, 4)
