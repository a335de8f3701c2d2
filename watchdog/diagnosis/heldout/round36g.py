"""Failure forms read for the misses of round issue23-heldout-36 (part G: quantized and low-precision training): a
NaN under the names sequence-to-sequence toolkits give their loss, torch's repr of a loss tensor printed alone, a
trainer's record that it found a NaN loss, the CUDA check macro of NVIDIA's project template (bitsandbytes' kernels),
and the assertion of torch's GradScaler that no optimizer parameter had a gradient.

Pure: no I/O. :func:`round36g_form` is asked after the forms of round 35, :func:`round36g_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Sequence-to-sequence toolkits report the loss under their own names: OpenNMT-py's ``Statistics.output``
  (onmt/utils/statistics.py) ``"Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; ..."`` (perplexity, and the
  cross-entropy it is the exponential of), Marian's training display (src/training/scheduler.h) ``"Ep. %d : Up. %d :
  Sen. %s : Cost %.8f : Time ..."`` (its cost is the loss it minimises), fairseq's ``nll_loss`` and ``ppl``. A NaN
  there is the loss's NaN (OpenNMT-py#1072: "ppl:   nan; xent:  nan" from step 5650 on; marian-dev#699: "Cost nan"
  under fp16 from update 300 on; both read as healthy). Only NaN is read, as these programs print it (printf's and
  Python's "nan", signed or not): a perplexity of inf is the exponential of a finite loss that overflows it, at the
  start of a healthy run as well.
* PyTorch prints a tensor that came out of autograd with the node that made it (torch/_tensor_str.py ``_str_intern``:
  ``"tensor(<value>, device='cuda:1', dtype=torch.float16, grad_fn=<NllLossBackward0>)"``); a loss function's node
  is named for it (``NllLossBackward0``, ``MseLossBackward0``, ``SmoothL1LossBackward0``; before PyTorch 1.10 without
  the digit). A NaN or Inf printed with such a node is the loss's value, whatever label the program printed before it
  (GPTQ-for-LLaMa#57: the loss after one backward of a 4-bit model, printed alone, read as healthy).
* XLM's trainer and the trainers forked from it (XLM/xlm/trainer.py ``Trainer.optimize``: ``if (loss !=
  loss).data.any(): logger.warning("NaN detected")``, the same in UnsupervisedMT, TransCoder and the symbolic
  mathematics trainers) log a record whose whole message is "NaN detected" for every step whose loss is NaN
  (XLM#210, fp16 with apex level 3, read as healthy). Only that whole message is read: a program's words about NaN in
  its input ("NaN or Inf found in input tensor", which runs print and go on with) are not.
* NVIDIA's CUDA project template checks every runtime call with ``CUDA_CHECK_RETURN``: ``fprintf(stderr, "Error %s
  at line %d in file %s\\n", cudaGetErrorString(status), __LINE__, __FILE__); exit(1);`` (bitsandbytes' csrc/ops.cu
  until 0.43 and many CUDA programs since). The words between "Error" and "at line" are CUDA's error string, read
  with the cause CUDA's table gives it (forms_runtimes), and the process exits (bitsandbytes#553 and #1782: "Error
  an illegal memory access was encountered at line 74 in file .../csrc/ops.cu", read as healthy). A line of that
  shape whose words are not CUDA's is another program's and is not read.
* torch's GradScaler asserts that ``unscale_`` found the gradients it checks for infinities before it steps or
  updates (torch/amp/grad_scaler.py: ``assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were
  recorded for this optimizer."`` in ``step``, ``"No inf checks were recorded prior to update."`` in ``update``): no
  parameter the optimizer holds had a gradient -- an optimizer built over parameters the loss does not reach (a
  frozen or re-created model, a loss made of new leaf tensors, an optimizer built before the model moved to the
  GPU), or a scaler stepped by hand beside one that steps itself. A program's set-up, which a restart repeats
  (huggingface/blog#143, mmsegmentation#3230: read as crashes and restarted; openfold#98 and accelerate#357 print
  the same).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_runtimes import runtime_form
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round36g_form` reads hold, besides the needles failureforms already
#: searches (the toolkits' NaN holds "nan"): a loss function's autograd node, XLM's NaN record, the CUDA check macro's
#: words, GradScaler's assertion
NEEDLES: tuple[str, ...] = ("LossBackward", "NaN detected", " in file ", "No inf checks were recorded")

#: a NaN under a sequence-to-sequence toolkit's name for its loss, as key: value (OpenNMT-py's "ppl:   nan;"), key
#: value (Marian's "Cost nan :", a Lua trainer's "PPL nan ;") or key=value ("ppl=-nan")
_LOSS_ALIAS = re.compile(r"(?i:\b(?:ppl|xent|nll|cost))['\"]?\s*(?:[=:|]\s*)?['\"]?[-+]?0*nan\b")

#: torch's repr of a tensor whose value is NaN/Inf and whose autograd node is a loss function's
_LOSS_TENSOR = re.compile(r"\btensor\(\s*[-+]?(?:nan|inf)\b[^()]*\bgrad_fn=<\w*LossBackward\d*>")

#: XLM's record of a NaN loss: the whole message after the record's head (" - ", ": " or "] ")
_NAN_DETECTED = re.compile(r"(?:^|\s-\s|:\s|\]\s)NaN detected\s*$")

#: NVIDIA's CUDA_CHECK_RETURN: "Error <cudaGetErrorString> at line <n> in file <path>"
_CUDA_CHECK_RETURN = re.compile(r"\bError (.+?) at line \d+ in file \S")

#: GradScaler's assertion that unscale_ recorded no gradient's check
_NO_INF_CHECKS = re.compile(r"\bNo inf checks were recorded (?:for this optimizer|prior to update)\b")


def round36g_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "No inf checks were recorded" in text and _NO_INF_CHECKS.search(text):
        return Form(FormKind.ERROR, "torch's GradScaler with no gradient to check (an optimizer over parameters the "
                    "loss does not reach)", Label.CONFIG_ERROR)
    if " in file " in text and (check := _CUDA_CHECK_RETURN.search(text)) is not None:
        # the macro prints cudaGetErrorString as torch's "CUDA error: " prefix does: CUDA's table reads the words
        cuda = runtime_form(f"CUDA error: {check.group(1)}")
        if cuda is not None:
            return Form(FormKind.CRASH, f"{cuda.name} at a CUDA check that exits", cuda.label)
    if "LossBackward" in text and _LOSS_TENSOR.search(text):
        return Form(FormKind.METRIC, "a loss tensor whose value is not finite", Label.NUMERICAL_ERROR)
    if "NaN detected" in text and _NAN_DETECTED.search(text):
        return Form(FormKind.METRIC, "a trainer's record of a NaN loss", Label.NUMERICAL_ERROR)
    if "nan" in text and _LOSS_ALIAS.search(text):
        return Form(FormKind.METRIC, "a NaN loss under the toolkit's name for it (perplexity, cross-entropy, cost)",
                    Label.NUMERICAL_ERROR)
    return None


def round36g_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round36g_form(text))
