"""diagnosis/firstfailure.py: a program-mistake exception before any progress is configuration.

Lines are real (the corpus excerpts, and the threads each case names); torchrun's rank prefixes
(``[rank0]:`` from its ``--local-ranks-filter``/``tee``, ``[default0]:`` from ``--tee``/``--redirects``)
are put before each line of a real traceback the way torchrun writes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.events import Action, Evidence, Label, RankKey, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"

#: the lines of huggingface/accelerate#2240 (one pasted line) and NVIDIA-BioNeMo/bionemo-recipes#784
#: (the frames of a model build)
ONE_LINE = "ValueError: The port number of the rendezvous endpoint 'None:None' must be an integer between 0 and 65536."
BUILD_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/workspace/bionemo/train.py", line 88, in <module>',
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 271, '
    "in __init__",
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 201, '
    "in _get_block_submodules",
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_block.py", line 110, '
    "in get_num_layers_to_build",
    "AssertionError: num_layers should be divisible by pipeline_model_parallel_size",
]


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("lines", "label"), [
    ([ONE_LINE], Label.CONFIG_ERROR),
    (BUILD_TRACEBACK, Label.CONFIG_ERROR),
    ([f"[rank0]:{t}" for t in BUILD_TRACEBACK], Label.CONFIG_ERROR),
    ([f"[default0]:{t}" for t in BUILD_TRACEBACK], Label.CONFIG_ERROR),
    # near misses: progress before it; a class that says nothing of a value refused
    (["{'loss': 2.3412, 'learning_rate': 5e-05, 'epoch': 0.01}", ONE_LINE], Label.OTHER_CRASH),
    (["RuntimeError: CUDA error: an illegal memory access was encountered"], Label.OTHER_CRASH),
], ids=["one-line", "build-frames", "rank-prefix", "default-prefix", "after-progress", "runtime-error"])
def test_a_program_mistake_before_progress_is_configuration(tmp_path: Path, lines: list[str], label: Label) -> None:
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.label is label
    assert verdict.action is (Action.STOP if label is Label.CONFIG_ERROR else Action.RESTART)


@pytest.mark.parametrize(("excerpt", "label"), [
    # the frames run through the work (evaluate, forward): the program's own crash
    ("other_crash/deepdeblur-49-keyerror-10-at-test", Label.OTHER_CRASH),
    ("other_crash/fairmot-242-keyerror-replica-0", Label.OTHER_CRASH),
    # a whole traceback of the script's own <module> and helpers: the program's own bug
    ("other_crash/deepspeed-618-nameerror", Label.OTHER_CRASH),
    ("other_crash/instructlab-217-user-valueerror", Label.OTHER_CRASH),
    # a configuration file launched as the script
    ("config_error/accelerate-77-config-json-run-as-script", Label.CONFIG_ERROR),
    # one pasted line
    ("config_error/accelerate-2240-rendezvous-endpoint-none-none-same-network", Label.CONFIG_ERROR),
    # the innermost frames of a traceback cut above them, under interleaved rank prefixes
    ("config_error/bionemo-recipes-784-esm2-num-layers-not-divisible-by-pp", Label.CONFIG_ERROR),
])
def test_the_frames_decide_where_they_were_read(excerpt: str, label: Label) -> None:
    verdict = diagnose_paths([str(CORPUS / f"{excerpt}.log")]).verdict
    assert verdict.label is label


def _crash(text: str, step: int | None = None) -> Verdict:
    key = RankKey("", 0)
    return Verdict(Label.OTHER_CRASH, Action.RESTART, ranks=(key,), culprit=key,
                   evidence=(Evidence(key, text, "host.unrecognised_error"),), step=step)


def test_the_rule_itself() -> None:
    key = RankKey("", 0)
    text = "KeyError: 'RANK'"
    assert mistake_before_progress(_crash(text), progressed=False) is not None
    assert mistake_before_progress(_crash(text), progressed=True) is None
    assert mistake_before_progress(_crash(text, step=3), progressed=False) is None
    work = {key: (text, [("train.py", "<module>"), ("train.py", "train_step")], True)}
    assert mistake_before_progress(_crash(text), False, work) is None
    setup = {key: (text, [("train.py", "<module>"), ("train.py", "setup_distributed")], True)}
    found = mistake_before_progress(_crash(text), False, setup)
    assert found is not None and "setup_distributed" in found.reason
    other = dict(setup)
    assert mistake_before_progress(_crash("KeyError: 'WORLD_SIZE'"), False, other) is not None  # frames of another line
    hang = Verdict(Label.COLLECTIVE_HANG, Action.RESTART, evidence=(Evidence(key, text, ""),))
    assert mistake_before_progress(hang, False) is None
