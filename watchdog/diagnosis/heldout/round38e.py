"""Failure forms read for the misses of round issue23-heldout-38 (part E: speech and audio model training): a TTS
trainer's own words for a loss it found NaN, icefall's optimizer zeroing a gradient whose norm was not finite, the
Coqui trainer's refusal of a machine with more than one visible GPU, and a connection the operating system refused by
policy. (icefall's "grad_scale is too small, exiting" is round 33 part B's.)

Pure: no I/O. :func:`round38e_form` is asked after the forms of round 37, :func:`round38e_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Speech and audio trainers check their loss and raise in their own words, which name the loss's NaN before or
  after the word "loss" rather than as a value the metric reader knows ("loss: nan", "NaN loss detected"): Coqui/
  mozilla TTS's losses (TTS/tts/layers/losses.py, every loss class) ``raise RuntimeError(f" [!] NaN loss with
  {key}.")``; DiffWave-style vocoder and diffusion learners (learner.py) ``raise RuntimeError(f'Detected NaN loss at
  step {self.step}.')`` or "... at iteration {i}", Coqui's older trainer "> Detected NaN loss ...". A Tacotron
  training whose every run stopped near step 2k on " [!] NaN loss with decoder_loss." glued behind its traceback's
  ``main(args)`` was read as a crash of no cause (round issue23-heldout-38: mozilla/TTS#668). A trainer that
  "Detected NaN loss. Skipping" a step and goes on is not this form (its own words: the step was skipped).
* icefall's ScaledAdam (zipformer/optim.py, and its copies in the recipes) clips by the model's gradient norm and
  warns ``logging.warning(f"Scaling gradients by {ans}, model_norm_threshold=...")``; it sets ``ans = 0.0`` when
  the ratio is NaN (``if ans != ans``) and then zeroes every gradient: a scale of exactly 0 is a gradient norm
  that was not finite (round issue23-heldout-38: icefall#1895, a Zipformer-CTC run that warned "Scaling gradients
  by 0.0" and died in scaler.step, read as a crash of no cause). A small non-zero scale is the clipping doing its
  work and is not this form; a scale of 0 followed by the run's progress is cleared by it, like every metric form.
* The Coqui trainer (trainer/trainer_utils.py setup_torch_training_env, and TTS/utils before it) refuses to start
  when more than one GPU is visible and DDP was not asked for: ``raise RuntimeError(f" [!] {num_gpus} active GPUs.
  Define the target GPU by `CUDA_VISIBLE_DEVICES`. For multi-gpu training use `TTS/bin/distribute.py`.")`` (newer:
  "python -m trainer.distribute"). The machine's GPUs and the command line disagree: configuration, which a restart
  on the same machine meets again (round issue23-heldout-38: xtts-finetune-webui#28, read as a crash to restart).
* urllib3 reports a connection the operating system refused as ``NewConnectionError('<...>: Failed to establish a
  new connection: [Errno N] ...')``, inside requests' MaxRetryError/ConnectionError. errno 13 (EACCES, "Permission
  denied") and Windows' WSAEACCES ([WinError 10013] "An attempt was made to access a socket in a way forbidden by
  its access permissions") are not a peer that is down but a firewall or policy that forbids the socket: a
  restart meets the same rule (round issue23-heldout-38: alltalk_tts#16, the Coqui trainer's telemetry blocked on
  a machine denied the internet, read as a crash to restart). A refused, reset or unreachable peer (111, 104, 113,
  10061) is not this form.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38e_form` reads hold, besides the needles failureforms already
#: searches: a trainer's "NaN loss with"/"Detected NaN loss", icefall's gradient scaling, the Coqui
#: trainer's GPU count, urllib3's refused connection
NEEDLES: tuple[str, ...] = (
    "NaN loss with", "etected NaN loss", "etected nan loss",
    "Scaling gradients by",
    "active GPUs. Define the target GPU",
    "Failed to establish a new connection",
)

#: a trainer's raise of a NaN it found in its loss: Coqui's " [!] NaN loss with <key>", a learner's "Detected NaN
#: loss at step N" / "at iteration N" / "> Detected NaN loss - ..."; not a trainer that skips the step and goes on
_NAN_LOSS_RAISED = re.compile(
    r"(?:\[!\] NaN loss with \w|(?i:\bdetected nan loss\b)(?![^\n]{0,40}?(?i:skip)))")

#: icefall's ScaledAdam: a gradient scale of exactly zero (the norm was NaN or infinite), then the threshold
_SCALING_BY_ZERO = re.compile(r"\bScaling gradients by [-+]?0*(?:\.0*)?(?:[eE][-+]?\d+)?, model_norm_threshold=")

#: the Coqui trainer's refusal of several visible GPUs without DDP
_ACTIVE_GPUS = re.compile(r"\[!\] \d+ active GPUs\. Define the target GPU by")

#: urllib3's NewConnectionError for a socket the OS forbade by policy (EACCES, WSAEACCES)
_CONNECT_FORBIDDEN = re.compile(r"Failed to establish a new connection: \[(?:Errno 13|WinError 10013)\]")


def round38e_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("NaN loss" in text or "nan loss" in text) and _NAN_LOSS_RAISED.search(text):
        return Form(FormKind.METRIC, "a trainer's raise of a NaN it found in its loss", Label.NUMERICAL_ERROR)
    if "Scaling gradients by" in text and _SCALING_BY_ZERO.search(text):
        return Form(FormKind.METRIC, "an optimizer zeroed gradients whose norm was not finite",
                    Label.NUMERICAL_ERROR)
    if "active GPUs" in text and _ACTIVE_GPUS.search(text):
        return Form(FormKind.ERROR, "the trainer refuses several visible GPUs without distributed training",
                    Label.CONFIG_ERROR)
    if "Failed to establish" in text and _CONNECT_FORBIDDEN.search(text):
        return Form(FormKind.ERROR, "the operating system forbade the connection by policy", Label.CONFIG_ERROR)
    return None


def round38e_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round38e_form(text))
