"""Failure forms of a metric: a loss, gradient norm or loss scale that says the run is broken.

Pure: no I/O. :func:`metric_form` reads a NaN/Inf loss or gradient norm (as a key and its value, in the
framework's words, in a table of numbers), and a loss scale collapsed to nothing or overflowing at its floor.
"""

from __future__ import annotations

import math
import re

from neuron_watch.diagnosis.formkinds import Form, FormKind
from neuron_watch.events import Label

# -- metrics ---------------------------------------------------------------------------------------

#: a metric that says the run is broken: a loss (any name holding "loss"), a gradient norm, a
#: perplexity, as key=value, key: value, 'key': value, "key": value, key value, or a tqdm postfix;
#: the value NaN/Inf as Python, NumPy, torch (``tensor(nan)``) and C print it
_KEY = r"(?:[\w.-]*loss[\w.-]*|grad(?:ient)?[ _-]?norm\w*|[\w.-]*_norm|perplexity)"
#: Python's format spec pads a non-finite float with the zeros it asks for (format(float("nan"), "07.5f")
#: is "0000nan"; printf's %07f pads it with spaces)
_NONFINITE_VALUE = r"[-+]?0*(?:nan|inf(?:inity)?)\b"
#: (the value alone in a list or an array, as PaddlePaddle prints a fetched tensor: "loss: [nan]",
#: NumPy's "array([nan])")
_WRAP = r"(?:tensor\(\s*|array\(\[\s*|\[\s*)?"
_METRIC = re.compile(rf"(?i:\b({_KEY}))['\"]?\s*(?:[=:|]\s*)?['\"]?{_WRAP}(?i:{_NONFINITE_VALUE})")
#: a finite loss beside it; the number stands apart from the key's word (torch's autograd node names end in a
#: version digit, "grad_fn=<NllLossBackward0>", and are no loss value)
_FINITE_LOSS = re.compile(r"(?i:\b[\w.-]*loss[\w.-]*)['\"]?\s*[=:]?\s*['\"]?" + _WRAP
                          + r"(?<![\w.])[-+]?(?!0*(?i:nan|inf))\d")
#: the frameworks' own words: "loss is nan", "NaN loss detected", "gradients are non-finite",
#: torch.nn.utils.clip_grad_norm_'s "The total norm of order 2.0 for gradients from `parameters` is
#: non-finite"
_METRIC_WORDS = re.compile(
    r"(?i:\b(?:loss|gradients?|grad norm|total norm)\b[^.,;]{0,60}?\b(?:is|are|became|becomes|was|were) "
    r"(?:nan|inf|non-finite|not finite)\b|"
    r"\b(?:nan|inf|non-finite) (?:loss|gradients?|grad norm)(?:es)? (?:detected|encountered|found)\b)|"
    # TensorFlow's CheckNumerics op (tensorflow/core/kernels/check_numerics_op.cc: "Tensor had NaN
    # values", "Tensor had Inf values", "Tensor had Inf and NaN values") and JAX's debug_nans/debug_infs
    # check (jax/_src/dispatch.py: FloatingPointError(f"invalid value ({ty}) encountered in {name}"))
    r"\bTensor had (?:Inf and )?(?:NaN|Inf) values\b|\binvalid value \((?:nan|inf)\) encountered in\b")
#: a loss scale (fp16 GradScaler, apex, DeepSpeed, Megatron) reduced to a value no fp16 gradient can
#: use: below fp16's smallest subnormal (2**-24), or zero
#: (as key=value, key: value, "key to/is value", or key and value between pipes as fairseq's progress bars
#: print a record: fairseq/logging/progress_bar.py _str_pipes, ' | '.join(key + ' ' + stats[key].strip()))
_LOSS_SCALE = re.compile(r"(?i:\bloss[ _-]?scal(?:e|er|ing)\w*)['\"]?\s*"
                         r"(?:[=:]|\bto\b|\bis\b|(?<=\w) (?=\S+(?: \||\s*$)))\s*['\"]?"
                         r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\b")
_SCALE_FLOOR = 2.0 ** -24
#: a dynamic loss scaler that overflows at its floor: DeepSpeed's "OVERFLOW! Rank %d Skipping step.
#: Attempted loss scale: %s, reducing to %s" (runtime/fp16/loss_scaler.py update_scale,
#: new_scale = max(cur_scale / scale_factor, min_loss_scale)) with the two equal cannot reduce further,
#: and every later step overflows again: the gradients are not finite at any scale
_SCALE_AT_FLOOR = re.compile(r"\bAttempted loss scale: ([\d.]+(?:[eE][-+]?\d+)?), "
                             r"reducing to ([\d.]+(?:[eE][-+]?\d+)?)\b")
#: a row of an aligned table of numbers with a NaN/Inf among them ("   120   nan   0.0003   1.2e-4")
_NUMBER_OR_NONFINITE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?%?|nan|NaN|NAN|inf|Inf|INF)")
_NONFINITE_TOKEN = frozenset({"nan", "NaN", "NAN", "inf", "Inf", "INF", "-nan", "-inf", "+inf", "-Inf", "-INF"})
#: the columns of a row of a step-by-step table, aligned by tabs or runs of spaces: the row begins with
#: its step and its last column is a value (tf_cnn_benchmarks benchmark_cnn.py: the header
#: "Step\tImg/sec\t" + loss_name, each row "%i\t%s\t%.*f" of the step, the timing text "images/sec: %.1f
#: +/- %.1f (jitter = %.1f)" and the loss, which printf writes "nan"). A column of text between them does
#: not make the row prose: the first and last columns do the telling.
_COLUMNS = re.compile(r"\t+|\s{2,}")
_STEP_COLUMN = re.compile(r"\d+")


def metric_form(text: str) -> Form | None:
    # a loss *scale* of inf is the scaler's state on a skipped step, not a broken run; a running
    # window's NaN beside the step's own finite loss (NeMo's bar: "loss=nan ... reduced_train_loss=3.910")
    # is not the run's loss
    if any("scal" not in m.group(1).lower() for m in _METRIC.finditer(text)) and not _FINITE_LOSS.search(text):
        return Form(FormKind.METRIC, "a non-finite loss or gradient norm", Label.NUMERICAL_ERROR)
    if _METRIC_WORDS.search(text):
        return Form(FormKind.METRIC, "a non-finite loss or gradients in the framework's words", Label.NUMERICAL_ERROR)
    for s in _LOSS_SCALE.finditer(text):
        try:
            value = float(s.group(1))
        except ValueError:  # pragma: no cover - the pattern only takes numbers
            continue
        if math.isfinite(value) and abs(value) < _SCALE_FLOOR:
            return Form(FormKind.METRIC, "a loss scale collapsed to nothing", Label.NUMERICAL_ERROR)
    floor = _SCALE_AT_FLOOR.search(text)
    if floor is not None and floor.group(1).strip(".") and floor.group(1).rstrip(".") == floor.group(2).rstrip("."):
        return Form(FormKind.METRIC, "a loss scaler overflowing at its floor", Label.NUMERICAL_ERROR)
    tokens = text.replace("|", " ").replace(",", " ").split()
    if len(tokens) >= 3 and any(t in _NONFINITE_TOKEN for t in tokens) and all(
            _NUMBER_OR_NONFINITE.fullmatch(t) for t in tokens):
        return Form(FormKind.METRIC, "a NaN/Inf in a table of metrics", Label.NUMERICAL_ERROR)
    row = text.strip()
    if row[-3:] in _NONFINITE_TOKEN and len(columns := _COLUMNS.split(row)) >= 3 and \
            columns[-1] in _NONFINITE_TOKEN and _STEP_COLUMN.fullmatch(columns[0]):
        return Form(FormKind.METRIC, "a NaN/Inf in the last column of a step's row", Label.NUMERICAL_ERROR)
    return None
