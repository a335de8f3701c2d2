# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-33 (speech, audio and multimodal stacks), each as a
rule of its family, with real lines and the near misses the rule must leave alone: an exception quoted in a markdown
code span, a gradient scaler's scale collapsed to nothing, torch's legacy THC check of a CUDA call, and PyTorch's
archive writer refused by its storage. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.heldout.round33b import round33b_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # an exception quoted in a markdown code span: its class (or its message's refusal) says its cause
    ("`omegaconf.errors.MissingMandatoryValue: Missing mandatory value: channels`",
     ERROR, Label.CONFIG_ERROR, "corpus (audiocraft-477-missing-mandatory-value-channels)"),
    ("Getting `RuntimeError: Dataset scripts are no longer supported, but found common_voice_11_0.py` when finetuning whisper.",
     ERROR, Label.CONFIG_ERROR, "corpus (transformers-40977-whisper-dataset-scripts-unsupported)"),
    ("I am getting a ```TypeError: __init__() got multiple values for argument 'model'``` .",
     ERROR, None, "vasistalodagala/whisper-finetune#5 (a span of three backticks)"),
    # a gradient scaler's scale below fp16's smallest subnormal, or the recipe exiting on it
    ("2024-01-14 01:03:00,826 WARNING [train.py:1057] (2/4) Grad scale is small: 1.2924697071141057e-26",
     METRIC, Label.NUMERICAL_ERROR, "corpus (icefall-1463-grad-scale-is-small-bad-model)"),
    ("RuntimeError: grad_scale is too small, exiting: 5.960464477539063e-08",
     ERROR, Label.NUMERICAL_ERROR, "icefall egs/*/ASR/zipformer/train.py (the raise under 1e-5)"),
    # THC's record of a failed CUDA call, and the raised error under Lua Torch's own head
    ("THCudaCheck FAIL file=/tmp/luarocks_cutorch-scm-1-6130/cutorch/lib/THC/generic/THCStorage.cu line=40 error=2 : out of memory",
     ERROR, Label.OOM, "corpus (deepspeech-torch-60-lua-thcudacheck-out-of-memory)"),
    ("THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
     ERROR, Label.OOM, "corpus (espnet-219-thcudacheck-out-of-memory)"),
    ("THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1502009910772/work/torch/lib/THC/generic/THCStorage.c line=32 error=4 : unspecified launch failure",
     ERROR, None, "corpus (pytorch-3912-thcudacheck-unspecified-launch-failure-mid-training)"),
    ("/home/sbp3624/torch/install/share/lua/5.1/cudnn/RNN.lua:308: cuda runtime error (2) : out of memory at /tmp/luarocks_cutorch-scm-1-6130/cutorch/lib/THC/generic/THCStorage.cu:40",
     ERROR, Label.OOM, "corpus (deepspeech-torch-60-lua-thcudacheck-out-of-memory)"),
    # PyTorch's archive writer finding a write cut short by its storage
    ("enforce fail at inline_container.cc_595] . unexpected pos 1457862912 vs 1457862800",
     ERROR, Label.CONFIG_ERROR, "corpus (styletts-webui-18-inline-container-unexpected-pos)"),
    ("  what():  [enforce fail at inline_container.cc:659] . unexpected pos 64 vs 0",
     ERROR, Label.CONFIG_ERROR, "pytorch#156955 (/tmp full)"),
    ("RuntimeError: [enforce fail at inline_container.cc:857] . PytorchStreamWriter failed writing file data/37: file write failed",
     ERROR, Label.CONFIG_ERROR, "verl#3346 (a checkpoint save)"),
    ("RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/176: file write failed",
     ERROR, Label.CONFIG_ERROR, "LlamaFactory#1223"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # a code span that holds a warning, or a setting, not an exception
    "`wandb: WARNING Tried to log to step 31 that is less than the current step 744. Steps must be monotonically increasing, so this data will be ignored. See https://wandb.me/define-metric to log data out of order.`",  # musubi-tuner#150
    "try `overlap_comm=False` in zero2.json",  # Qwen-VL-Series-Finetune#10
    # a gradient scale the scaler still works with: the recipe's progress field, and its warning above the floor
    "2025-10-27 17:32:39 2025-10-27 17:32:39,748 INFO [train_zipvoice.py:731] Epoch 1, batch 49, global_batch_idx: 50, batch size: 25, loss[loss=0.06789, over 17994.00 frames. ], tot_loss[loss=0.06891, over 778288.75 frames. ], cur_lr: 1.00e-04, grad_scale: 65536.0",  # ZipVoice#3
    "2025-05-20 02:38:47,195 WARNING [train_phone.py:1047] (7/8) Grad scale is small: 3.0517578125e-05",  # icefall#1946
    "2024-01-14 00:03:35,116 WARNING [optim.py:500] (2/4) Scaling gradients by 0.07831460982561111, model_norm_threshold=53.983238220214844",  # icefall#1463
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_the_archive_reader_is_not_the_full_storage() -> None:
    """The reader's failure is a damaged or truncated file, not a write the storage refused."""
    assert round33b_form("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory") is None


def test_an_exception_quoted_in_prose_is_a_failure(tmp_path: Path) -> None:
    """A user's report whose error sits in a code span, above a stack trace cut before its last line, is the
    configuration error its class names (audiocraft#477, as pasted)."""
    log = tmp_path / "quoted.log"
    log.write_text(
        "But i come across the following error:\n\n"
        "`omegaconf.errors.MissingMandatoryValue: Missing mandatory value: channels`\n\n"
        "stacktrace:\n\n```\nTraceback (most recent call last):\n"
        '  File "/share/home/cgy/miniconda/envs/audiocraft/lib/python3.9/site-packages/dora/hydra.py", line 67, in _compare_config\n'
        "    ref_value = ref[key]\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
