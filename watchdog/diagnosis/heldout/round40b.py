"""Failure forms read for the misses of round issue23-heldout-40 (part B: experiment trackers and MLOps sidecars around
training runs): a histogram writer refusing values that are not finite, and the W&B server's refusal of a run's
entity, project or credentials. pynvml's exception for a lost GPU, this part's third miss, is read with NVML's other
spellings of that status by round 35 part D.

Pure: no I/O. :func:`round40b_form` is asked after the forms of round 39, :func:`round40b_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error (an exception
line, a tracker's ERROR record).

Each form is read where its program prints it:

* A histogram summary of a tensor whose values are NaN or infinite. torch.utils.tensorboard's and tensorboardX's
  ``make_histogram`` (torch/utils/tensorboard/summary.py, tensorboardX/summary.py) count the values into fixed
  buckets from -1e20 to 1e20 and raise ``ValueError("The histogram is empty, please file a bug report.")`` when no
  value fell in any bucket: every value was NaN or infinite (an empty tensor is refused earlier, "The input has no
  element."). TensorFlow's HistogramSummary kernel (tensorflow/core/kernels/summary_op.cc) fails with
  ``InvalidArgument("Nan in summary histogram for: ", name)`` (TF 2's eager op appends ``[Op:WriteHistogramSummary]``),
  and numpy's ``np.histogram`` of such values, which W&B's Histogram calls, raises ``ValueError("autodetected range
  of [nan, nan] is not finite")`` (numpy/lib/histograms.py ``_get_outer_edges``). The run diverged and the logger
  died on its weights, gradients or outputs: a numerical failure, not a logger's (round issue23-heldout-40:
  tacotron2#549, a validation logger's add_histogram after NaN grad norms, read as a configuration error for its
  ValueError; VT-ADL#12, the same error after "loss3 : nan"). A source line that raises it, or prose quoting it, is
  not the form.
* The W&B client's GraphQL call the server refused: ``InternalApi.execute`` (wandb/sdk/internal/internal_api.py)
  prints ``termerror("Error while calling W&B API: {error} ({response})")``, and its retry wrapper does not retry
  401, 403 or 404 (``util.no_retry_auth``): the entity, project or API key the run names does not exist or is not the
  user's, and ``wandb.init`` gives up ("It appears that you do not have permission to access the requested
  resource"). A restart names them again (round issue23-heldout-40: functional-diffusion-processes#4, a config file's
  placeholder entity "your_entity not found during upsertBucket (<Response [404]>)", read as a crash to restart).
  The server's 5xx errors stay the benign signature ``benign.wandb_api_server_error`` (retried while the run goes
  on); 400 and 409 (a duplicate run id, a bad query) are left to the other rules.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round40b_form` reads hold, besides the needles failureforms already
#: searches: the histogram writers' refusals, the W&B client's API error
NEEDLES: tuple[str, ...] = (
    "The histogram is empty", "Nan in summary histogram", "autodetected range of [",
    "Error while calling W&B API: ",
)

#: a histogram writer that got only values that are not finite: torch's and tensorboardX's make_histogram, TF's
#: HistogramSummary kernel, numpy's np.histogram (an endpoint NaN or infinite); after an exception's class or at the
#: head of the line (a quote mark, a bold marker, a TF log record's head), not inside quotes or a raise
_HISTOGRAM_NOT_FINITE = re.compile(
    r"(?:^[\s>*]*(?:[\w.]*(?:Error|Exception)\**:\s*)?|\]\s+(?:Invalid argument: )?)"
    r"(?:The histogram is empty, please file a bug report\b"
    r"|Nan in summary histogram for: \S"
    r"|autodetected range of \[(?:[-+]?(?:nan|inf), [^\]\n]+|[^\],\n]+, [-+]?(?:nan|inf))\] is not finite\b)")

#: the W&B client's record of a GraphQL call the server refused with 401, 403 or 404 (not retried)
_WANDB_API_REFUSED = re.compile(r"\bError while calling W&B API: .*\(<Response \[(?:401|403|404)\]>\)\s*$")


def round40b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("istogram" in text or "autodetected range" in text) and _HISTOGRAM_NOT_FINITE.search(text):
        return Form(FormKind.ERROR, "a histogram writer got values that are all NaN or infinite (the run "
                    "diverged)", Label.NUMERICAL_ERROR)
    if "Error while calling W&B API: " in text and _WANDB_API_REFUSED.search(text):
        return Form(FormKind.ERROR, "the W&B server refused the run's entity, project or API key (401/403/404, "
                    "not retried)", Label.CONFIG_ERROR)
    return None


def round40b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round40b_form(text))
