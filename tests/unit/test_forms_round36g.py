# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part G of the misses of round issue23-heldout-36 (quantized and low-precision training), each as a
rule of its family, with real lines and the near misses the rule must leave alone: a NaN under the names
sequence-to-sequence toolkits give their loss, torch's repr of a loss tensor, XLM's record of a NaN loss, the CUDA check
macro of NVIDIA's project template, and GradScaler's assertion that no parameter had a gradient. Each line is from the
corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round36g import round36g_form
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

OPENNMT_NAN = "[2018-11-26 15:12:08,893 INFO] Step 5750/50000; acc:   0.12; ppl:   nan; xent:  nan; lr: 0.00071; 1664/2365 tok/s;  21477 sec"
OPENNMT_FINITE = "[2018-11-26 15:02:57,162 INFO] Step 5600/50000; acc:  47.14; ppl:  9.83; xent: 2.29; lr: 0.00069; 1065/1591 tok/s;  20926 sec"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a NaN under a sequence-to-sequence toolkit's name for its loss
    (OPENNMT_NAN, METRIC, Label.NUMERICAL_ERROR, "corpus (opennmt-1072-ppl-nan-after-step-5600)"),
    ("[2020-09-05 20:22:42] Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan : Time 17.18s : nan words/s : gNorm 41172.8250",
     METRIC, Label.NUMERICAL_ERROR, "corpus (marian-699-fp16-cost-scaling-cost-nan-at-update-300)"),
    ("Epoch 10 ; Iter 50/213 ; LR 1.0000 ; Target tokens/s 2135 ; PPL nan ;", METRIC, Label.NUMERICAL_ERROR,
     "harvardnlp/data2text#9 (a Lua trainer's report)"),
    # torch's repr of a loss tensor whose value is not finite, whatever label was printed before it
    ("tensor(nan, device='cuda:1', dtype=torch.float16, grad_fn=<NllLossBackward0>)", METRIC, Label.NUMERICAL_ERROR,
     "corpus (gptq-for-llama-57-4bit-finetune-loss-nan-after-one-backward)"),
    ("官方loss： tensor(nan, device='cuda:0', grad_fn=<NllLossBackward>)", METRIC, Label.NUMERICAL_ERROR,
     "a public repository's note on a cross-entropy made NaN by an all-masked attention (PyTorch before 1.10: no digit)"),
    # XLM's trainer's record of a NaN loss (Trainer.optimize: logger.warning("NaN detected"))
    ("WARNING - 10/04/19 16:19:13 - 0:19:06 - NaN detected", METRIC, Label.NUMERICAL_ERROR,
     "corpus (xlm-210-fp16-amp-mlm-nan-detected)"),
    ("WARNING - 03/15/20 10:02:11 - 1:02:03 - NaN detected", METRIC, Label.NUMERICAL_ERROR,
     "XLM's src/logger.py LogFormatter ('%s - %s - %s' of level, date, elapsed, then ' - ' and the message) around trainer.py's logger.warning('NaN detected'), as its forks (TransCoder, SymbolicMathematics) print it"),
    # NVIDIA's CUDA_CHECK_RETURN: "Error <cudaGetErrorString> at line <n> in file <path>", then exit(1)
    ("Error an illegal memory access was encountered at line 74 in file /mmfs1/gscratch/zlab/timdettmers/git/bitsandbytes/csrc/ops.cu",
     CRASH, None, "corpus (bitsandbytes-553-illegal-memory-access-ops-cu-line-74)"),
    ("Error an illegal memory access was encountered at line 57 in file /src/csrc/ops.cu", CRASH, None,
     "corpus (bitsandbytes-1782-quantize-4bit-illegal-memory-access-large-tensor)"),
    # GradScaler's assertion that unscale_ checked no gradient
    ("AssertionError: No inf checks were recorded for this optimizer.", ERROR, Label.CONFIG_ERROR,
     "corpus (mmsegmentation-3230-custom-loss-no-inf-checks, hf-blog-143-wav2vec2-no-inf-checks-recorded)"),
    ('    assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were recorded for this optimizer."',
     ERROR, Label.CONFIG_ERROR, "jahongir7174/EfficientNetV2#8 (the assert's source line in the traceback)"),
    ("AssertionError: No inf checks were recorded prior to update.", ERROR, Label.CONFIG_ERROR,
     "corpus (accelerate-357-accelerator-scaler-no-inf-checks-prior-to-update): GradScaler.update's assertion"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    OPENNMT_FINITE,  # corpus (opennmt-1072-ppl-nan-after-step-5600): the same report, finite
    "[2017-10-18 18:14:31] Ep. 7 : Up. 306350 : Sen. 5630845 : Cost 34.46 : Time 6.91s : 13596.73 words/s",  # marian-nmt/marian#120
    "INFO:tensorflow:Evaluation result for step 435000: loss = 148890.718750 ; perplexity = inf",  # OpenNMT/OpenNMT-tf#744: a perplexity of inf is a large finite loss's
    "[2018-08-01 18:29:48,221 INFO] Step 50/100000000; acc:   0.00; ppl: 26881171418161356094253400435962903554686976.00; xent: 6776.20; lr: 2.00000; 4132/2064 tok/s;     52 sec",  # OpenNMT/OpenNMT-py#869
    "Epoch: 0, Iteration: 1570, Loss:",  # a public repository's training log, and the loss it printed under it:
    "    tensor(2.7372, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "Gradiente:  tensor([-969.7510,    0.0000,       nan,       nan,    0.0000],",  # nlesc-dirac/pytorch#4: gradients printed, no loss node
    "Warning: NaN or Inf found in input tensor.",  # corpus (wenet-1472-warning-nan-or-inf-in-input-tensor): a healthy run
    "[qbd487:400139] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 169",  # corpus (a healthy run): PMIx's record, another shape
    "/usr/local/lib/python3.10/dist-packages/torch/cuda/amp/grad_scaler.py:120: UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",  # torch's warning on a CPU host
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_cuda_check_states_the_cause_cudas_table_gives() -> None:
    """The macro's words are CUDA's error string, read with the cause CUDA's table gives it: a kernel image the device
    has none of is the build's (configuration); an illegal address states none (a crash)."""
    kohya = round36g_form("Error no kernel image is available for execution on the device at line 167 in file D:\\ai\\tool\\bitsandbytes\\csrc\\ops.cu")  # corpus (bitsandbytes-722-kohya-8bit-adamw-no-kernel-image-ops-cu)
    assert kohya is not None and kohya.kind is CRASH and kohya.label is Label.CONFIG_ERROR
    assert round36g_form("Error reading the vocabulary at line 12 in file vocab.txt") is None  # not CUDA's words


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 59


def test_a_plain_step_line_with_a_nan_loss_is_not_progress() -> None:
    """A progress rule that reads no loss (a plain step) does not read a line whose loss, under its program's name for
    it, is NaN as progress: the form reader's numerical failure is what the line is. The same line with finite numbers,
    and one whose only non-finite number is a loss scale (the scaler's state on a skipped step), stay progress."""
    kb = default_knowledge_base()
    broken = kb.classify(OPENNMT_NAN)
    assert broken is not None and broken.signature.category is Label.NUMERICAL_ERROR
    finite = kb.classify(OPENNMT_FINITE)
    assert finite is not None and finite.signature.category is Label.HEALTHY and finite.step == 5600
    scaler = kb.classify("Step 120/500 | lr 3.0e-04 | loss scale: inf")
    assert scaler is not None and scaler.signature.category is Label.HEALTHY and scaler.step == 120


def test_opennmt_report_gone_nan_is_a_numerical_failure(tmp_path: Path) -> None:
    """OpenNMT-py's report lines whose perplexity and cross-entropy turn NaN end a log in a numerical failure (stop),
    not a healthy run; the same lines before the NaN are a healthy run."""
    log = tmp_path / "onmt.log"
    log.write_text(OPENNMT_FINITE + "\n" + OPENNMT_NAN + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.NUMERICAL_ERROR
    log.write_text(OPENNMT_FINITE + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
