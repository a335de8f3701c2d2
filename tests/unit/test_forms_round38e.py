# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-38 (speech and audio model training), each as a rule
of its family, with real lines and the near misses the rule must leave alone: a trainer's raise of a NaN it found in
its loss, icefall's optimizer's gradients scaled by zero, the Coqui trainer's refusal
of several visible GPUs, a connection the operating system forbade by policy; and the trainers' notices of a step
they skipped, read as progress. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round38e import round38e_form
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

COQUI_NAN = "    main(args)RuntimeError:  [!] NaN loss with decoder_loss."
SCALED_BY_ZERO = "2025-03-23 10:22:40,442 WARNING [optim.py:385] Scaling gradients by 0.0, model_norm_threshold=911.5296020507812"
ACTIVE_GPUS = "RuntimeError:  [!] 2 active GPUs. Define the target GPU by `CUDA_"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a trainer's raise of a NaN loss
    (COQUI_NAN, METRIC, Label.NUMERICAL_ERROR, "corpus (mozilla-tts-668-tacotron-nan-loss-decoder-loss)"),
    ("RuntimeError:  [!] NaN loss with loss_dur.", METRIC, Label.NUMERICAL_ERROR,
     "Coqui TTS's losses (TTS/tts/layers/losses.py GlowTTSLoss: raise RuntimeError(f\" [!] NaN loss with {key}.\"))"),
    ("RuntimeError: Detected NaN loss at step 31250.", METRIC, Label.NUMERICAL_ERROR,
     "DiffWave-style learners (learner.py: raise RuntimeError(f'Detected NaN loss at step {self.step}.'))"),
    ("[rank0]: RuntimeError: Detected NaN loss at iteration 1200.", METRIC, Label.NUMERICAL_ERROR,
     "a public vocoder learner's raise RuntimeError(f\"Detected NaN loss at iteration {self.iter}.\"), under torchrun's rank tag"),
    # icefall's ScaledAdam
    (SCALED_BY_ZERO, METRIC, Label.NUMERICAL_ERROR, "corpus (icefall-1895-zipformer-ctc-gradient-explosion-scaling-zero)"),
    ("2024-05-02 11:40:12,101 WARNING [optim.py:487] (3/4) Scaling gradients by 0.0, model_norm_threshold=345.12", METRIC,
     Label.NUMERICAL_ERROR, "icefall zipformer/optim.py (ans = 0.0 when the ratio is NaN), under a multi-GPU rank tag"),
    # the Coqui trainer's refusal of several GPUs
    (ACTIVE_GPUS, ERROR, Label.CONFIG_ERROR, "corpus (xtts-finetune-webui-28-two-active-gpus)"),
    ("RuntimeError:  [!] 4 active GPUs. Define the target GPU by `CUDA_VISIBLE_DEVICES`. For multi-gpu training use `TTS/bin/distribute.py`.",
     ERROR, Label.CONFIG_ERROR, "Coqui TTS#2997 (trainer/trainer_utils.py setup_torch_training_env)"),
    # a connection the OS forbade
    ("urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='coqui.gateway.scarf.sh', port=443): Max retries exceeded with url: /trainer/training_run (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x0000029092034490>: Failed to establish a new connection: [WinError 10013] An attempt was made to a",
     ERROR, Label.CONFIG_ERROR, "corpus (alltalk_tts-16-coqui-trainer-telemetry-offline)"),
    ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /api/models (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f2c>: Failed to establish a new connection: [Errno 13] Permission denied'))",
     ERROR, Label.CONFIG_ERROR, "urllib3's NewConnectionError for EACCES (a firewall's reject rule), as requests wraps it"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "    raise RuntimeError(f\" [!] NaN loss with {key}.\")",  # the traceback's source line: its f-string, no key
    " Detected NaN loss. Skipping backward pass.",  # a trainer that skips the step and goes on
    "2024-01-14 01:03:00,826 INFO [train.py:1057] Scaling gradients by 0.0312, model_norm_threshold=120.5",  # clipping at work
    "    num_gpus = 1  # [!] active GPUs are pinned by CUDA_VISIBLE_DEVICES",  # prose about the rule
]

#: lines other readers read (an exception of no stated cause, the metric reader's words) that are not this round's forms
NOT_THIS_ROUND = [
    "NaN loss detected: check your inputs",  # the metric reader's order of words
    "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a new connection: [Errno 111] Connection refused",  # a peer that is down
    "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [WinError 10061] No connection could be made because the target machine actively refused it",  # Windows' refused peer
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_other_readers_lines_are_not_this_rounds_forms() -> None:
    for line in NOT_THIS_ROUND:
        assert round38e_form(line) is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63


def test_a_skipped_step_is_progress_not_a_failure() -> None:
    """fairseq's loss scaler's and ESPnet 1's notices of a step they skipped are the table's progress, not forms."""
    kb = default_knowledge_base()
    for line in ("2021-01-26 03:02:32 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0",
                 "`2019-06-13 02:30:01,545 (e2e_asr:302) WARNING: loss (=nan) is not correct`"):
        match = kb.classify(line)
        assert match is not None and match.signature.id == "progress.trainer_skipped_update", line
    assert round38e_form("NOTE: overflow detected, setting loss scale to: 64.0") is None


def test_skipped_steps_an_hour_apart_are_not_a_hang(tmp_path: Path) -> None:
    """A log of the scaler's skipped updates spread over an hour (round 38's
    self-supervised-speech-recognition-20) is a run that goes on: healthy, not a hang for want of progress."""
    log = tmp_path / "fairseq.log"
    log.write_text("2021-01-26 03:01:31 | INFO | fairseq.trainer | begin training epoch 1\n"
                   "2021-01-26 03:02:32 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0\n"
                   "2021-01-26 03:10:26 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 8.0\n"
                   "2021-01-26 03:56:38 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 4.0\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY


def test_a_log_ending_on_gradients_scaled_by_zero_is_numerical(tmp_path: Path) -> None:
    """icefall's warning that it zeroed the gradients ends the log: numerical (stop); followed by the run's progress
    it is cleared, like every metric form."""
    log = tmp_path / "icefall.log"
    log.write_text(SCALED_BY_ZERO + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.NUMERICAL_ERROR


def test_the_coqui_gpu_refusal_is_configuration(tmp_path: Path) -> None:
    """The trainer's refusal ends a traceback: configuration (stop), not a crash to restart."""
    log = tmp_path / "xtts.log"
    log.write_text("Traceback (most recent call last):\n  File \"trainer_utils.py\", line 100, in setup_torch_training_env\n"
                   "    raise RuntimeError(\n" + ACTIVE_GPUS + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
