"""Failure forms read for the misses of round issue23-heldout-34 (part D: whole-run logs of LLM pre-training and
fine-tuning): torch elastic's agent stopping the workers that are still running, and Megatron's iteration record
without its loss.

Pure: no I/O. :func:`round34d_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 33, :func:`round34d_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

The form is read where its program prints it:

* torch elastic's agent (torchrun, ``python -m torch.distributed.launch``, accelerate's and DeepSpeed's launchers
  built on it) stops its worker group through ``PContext.close``, and ``SubprocessContext._close``
  (torch/distributed/elastic/multiprocessing/api.py) logs, for each worker *still running* (``proc.poll() is
  None``), ``logger.warning("Sending process %s closing signal %s", pid, death_sig.name)`` before it sends the
  signal. A group whose workers all ended well has none left to signal: the notice is printed only when the agent
  tears down live workers, because one of them failed (the agent's monitor saw the group FAILED) or because the
  agent itself was told to stop (a signal from the scheduler or the user). The run does not go on in that group:
  a failure of unknown cause (LlamaFactory#620: the archive writer's error at a checkpoint save, then a progress
  bar's closing redraw, then the notice; read as healthy, the bar having withdrawn the error). Where the agent
  restarts the group (``--max-restarts``, a membership change), the workers' progress after it withdraws the form as
  it withdraws any crash. Only SIGTERM is read: the agent stops a failed group with its default ``death_sig``
  (SIGTERM), and relays a signal it received itself (``SignalException``: SIGHUP from a terminal that hung up, the
  user's SIGINT) as that signal, after round 24 part B's ``Received <n> death signal, shutting down workers``, which
  says why; that teardown alone stays that round's near miss. The notice states no cause.
* Megatron-LM's ``training_log`` (megatron/training/training.py, and the forks that keep it: Megatron-DeepSpeed,
  Megatron-LLM, Pai-Megatron-Patch, NeMo's and Megatron-Bridge's) writes one record per logging interval, ``iteration
  <n>/ <total> | consumed samples: ... | ... | loss scale: ... | number of skipped iterations: <k> | number of nan
  iterations: <j> |`` (with ``elapsed time per iteration (ms): ...`` always among its fields), and each loss of its
  ``total_loss_dict`` in it only ``if avg > 0.0`` (the loss summed over the
  interval's advanced iterations, divided by their count). A loss that is NaN fails the comparison, so a record
  whose iterations all advanced (``number of skipped iterations: 0``) and that holds no loss field (``lm loss``,
  ``load_balancing_loss``...) beside its ``loss scale`` has a loss that is not a finite positive number: NaN, as
  the NaN check missed it (Megatron-DeepSpeed#434, read as healthy; #396, the user asking where the loss went; the
  run goes on computing nothing). Iterations an fp16 loss scaler skipped add nothing to the sums, so a record of
  skipped iterations holds no loss either (the scaler's search at the start: nccl-743's ``number of skipped
  iterations:  10``): it is not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literal (digit-free) the line :func:`round34d_form` reads holds, besides the needles failureforms already
#: searches: torch elastic's notice of a worker it signals as it stops the group
NEEDLES: tuple[str, ...] = (" closing signal SIGTERM", " number of skipped iterations: ")

#: torch elastic's notice (api.py SubprocessContext._close): the pid, then the signal's name (signal.Signals.name)
_CLOSING_SIGTERM = re.compile(r"\bSending process \d+ closing signal SIGTERM\b")


#: Megatron's iteration record: its head, the time per iteration it always prints, and the count of skipped
#: iterations of the interval at zero
_ITERATION_RECORD = re.compile(r"\biteration\s+\d+/\s*\d+ \|.*\| elapsed time per iteration \((?:ms|s)\): [^|]*\|"
                               r".*\| number of skipped iterations:\s+0 \|")
#: a field of the record naming a loss (``lm loss: 2.39E+00``, ``load_balancing_loss: 1.02E+00``, ``mtp_1 loss: ...``)
_LOSS_FIELD = re.compile(r"^[\w\- ]*loss[\w\-]*:\s")


def _iteration_without_loss(text: str) -> bool:
    if _ITERATION_RECORD.search(text) is None:
        return False
    fields = (f.strip() for f in text.split("|"))
    return not any(_LOSS_FIELD.match(f) and not f.startswith("loss scale") for f in fields)


def round34d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if " closing signal SIGTERM" in text and _CLOSING_SIGTERM.search(text):
        return Form(FormKind.CRASH, "torch elastic stopping workers still running (one failed, or the agent was "
                                    "told to stop)")
    if " number of skipped iterations: " in text and _iteration_without_loss(text):
        return Form(FormKind.METRIC, "a Megatron iteration record with no loss (its loss not finite)",
                    Label.NUMERICAL_ERROR)
    return None


def round34d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round34d_form(text))
