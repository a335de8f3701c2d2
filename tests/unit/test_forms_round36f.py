# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-36 (contrastive, embedding and vision-language model
training), as a rule of its family, with real lines and the near misses the rule must leave alone: a tensor printed by
its repr whose every value is NaN (or infinite), and FastChat's and LLaVA's notice of a sample ignored for a
tokenization that does not match its template. Each line is from the corpus (named by its excerpt) or from a public
thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

METRIC = FormKind.METRIC
NUMERICAL = Label.NUMERICAL_ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a tensor's repr: its first row, a later row, a row cut short, a row elided around "...", its last row
    ("tensor([[nan, nan, nan, nan, nan, nan, nan, nan],", METRIC, NUMERICAL,
     "corpus (openai-clip-40-fp16-adam-nan-after-one-step): CLIP's logits after one fp16 Adam step"),
    ("        [nan, nan, nan,", METRIC, NUMERICAL, "corpus (openai-clip-40-fp16-adam-nan-after-one-step): the paste cut in a row"),
    ("        [nan, nan, nan,  ..., nan, nan, nan],", METRIC, NUMERICAL,
     "corpus (amp-for-hardware-1-normal-loc-nan-a1-amp): a long row elided by torch's repr"),
    ("        [nan, nan, nan,  ..., nan, nan, nan]], device='cuda:0',", METRIC, NUMERICAL,
     "corpus (amp-for-hardware-1-normal-loc-nan-a1-amp): the last row with the repr's keyword arguments"),
    ("        [nan, nan, nan, nan, nan, nan, nan, nan]], device='cuda:0',", METRIC, NUMERICAL,
     "corpus (isaaclab-147-skrl-normal-loc-nan-lift-franka)"),
    # a column's rows of one value each
    ("        [nan],", METRIC, NUMERICAL, "corpus (ray-36801-rllib-learner-tensor-of-nan-before-thread-died): RLlib's value column"),
    # FastChat's and LLaVA's preprocessing: a sample whose labels were masked
    ("WARNING: tokenization mismatch: 276 vs. 272. (ignored)", FormKind.ERROR, Label.CONFIG_ERROR,
     "corpus (llava-more-7-llama3-1-finetune-tokenization-mismatch-ignored)"),
    ("WARNING: tokenization mismatch: 385 vs. 399. (ignored)", FormKind.ERROR, Label.CONFIG_ERROR, "corpus (llava-1706)"),
    ("WARNING: tokenization mismatch: 185 vs. 186. (ignored)", FormKind.ERROR, Label.CONFIG_ERROR,
     "lm-sys/FastChat#1290 (FastChat's own fine-tuning of llama-7b)"),
    ("  0%|          | 1/2883 [00:37<30:17:38, 37.84s/it]WARNING: tokenization mismatch: 195 vs. 197. (ignored)",
     FormKind.ERROR, Label.CONFIG_ERROR, "corpus (llava-pp-14-tokenization-mismatch-ignored-progress): glued to the bar's redraw"),
]

#: lines of the same words that are not this form
NEAR_MISSES = [
    # rows with a finite value: another tensor (a mask, a per-class metric with an absent class)
    "tensor([[ 0.1234,     nan, -0.5678],",  # torch's repr of a mixed row (torch/_tensor_str.py layout)
    "        [nan, 0.4471, nan],",  # a per-class row with one class scored
    # print() of an array, without its repr's commas: a per-class table's empty classes
    "[nan nan nan]",
    # a column's last row (one value, closing the tensor): read only as a row followed by another
    "        [nan]])",
    # a progress bar's postfix with a NaN display, which a healthy run printed (the key names it, not a repr)
    "Loss=3.920, gradient_norm=1.070, parameter_norm=1536.0, global_step=563.0, consumed_samples=1.44e+5, throughput=19.00, Epoch 0:   3%|▎         | 565/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_n",  # corpus (neuronx-nemo-megatron-28-ptl-bar-loss-nan-display)
    # a list in a record, after its key
    "values: [nan, nan]",
    # transformers' tokenizer warning of a long sample (truncated later, not ignored)
    "Token indices sequence length is longer than the specified maximum sequence length for this model (564 > 512). Running this sequence through the model will result in indexing errors",  # corpus (lisa-18-token-length-warnings-then-epoch-progress)
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_printed_tensor_of_nan_is_numerical_one_with_values_is_healthy(tmp_path: Path) -> None:
    """A paste of a tensor whose rows are all NaN is a numerical error to stop for; the same repr with finite values
    (a training script printing its logits) is a healthy log."""
    not_finite = tmp_path / "nan.log"
    not_finite.write_text("tensor([[nan, nan, nan, nan, nan, nan, nan, nan],\n"
                          "        [nan, nan, nan, nan, nan, nan, nan, nan]], device='cuda:0',\n"
                          "       grad_fn=<MmBackward0>)\n")
    assert diagnose_paths([str(not_finite)], now=0.0).verdict.label is Label.NUMERICAL_ERROR
    finite = tmp_path / "finite.log"
    finite.write_text("tensor([[ 0.2874,  0.1044, -0.0312,  0.1990],\n"
                      "        [ 0.0577,  0.3120,  0.0101, -0.0833]], device='cuda:0',\n"
                      "       grad_fn=<MmBackward0>)\n")
    assert diagnose_paths([str(finite)], now=0.0).verdict.label is Label.HEALTHY


def test_every_sample_ignored_is_configuration_a_few_among_steps_are_healthy(tmp_path: Path) -> None:
    """A log of nothing but LLaVA's tokenization-mismatch notices (every sample ignored) is a configuration error to
    stop for; the same notices among steps that train with a finite loss are a warning while the run goes on."""
    every = tmp_path / "every.log"
    every.write_text("WARNING: tokenization mismatch: 55 vs. 54. (ignored)\n"
                     "WARNING: tokenization mismatch: 60 vs. 59. (ignored)\n"
                     "WARNING: tokenization mismatch: 62 vs. 61. (ignored)\n")  # Victorwz/LLaVA-Llama-3#1
    assert diagnose_paths([str(every)], now=0.0).verdict.label is Label.CONFIG_ERROR
    among = tmp_path / "among.log"
    among.write_text("WARNING: tokenization mismatch: 390 vs. 393. (ignored)\n"
                     "WARNING: tokenization mismatch: 287 vs. 290. (ignored)\n"
                     "  0%|          | 1/2883 [00:37<30:17:38, 37.84s/it]\n"
                     "{'loss': 2.8514, 'grad_norm': 9.077989765362483, 'learning_rate': 2.2988505747126437e-06, 'epoch': 0.0}\n"
                     "  0%|          | 2/2883 [00:51<18:41:34, 23.36s/it]\n")  # mbzuai-oryx/LLaVA-pp#14
    assert diagnose_paths([str(among)], now=0.0).verdict.label is Label.HEALTHY
