"""Failure forms read for the misses of round issue23-heldout-35 (part F: never kill a healthy job, part 3): tf.keras's
notice that the input ran out of data and training was interrupted, a trainer's count of the steps (or a data
loader's length) it will train for when that count is zero, and torch_xla's records of a graph it compiles.

Pure: no I/O. :func:`round35f_form` is asked after the forms of round 34, :func:`round35f_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* tf.keras 2.x (TensorFlow 2.1 to 2.15) ends ``fit`` early when the dataset or generator stops before
  ``steps_per_epoch * epochs`` batches: its data handler logs ``"Your input ran out of data; interrupting training.
  Make sure that your dataset or generator can generate at least `steps_per_epoch * epochs` batches (in this case,
  %d batches). You may need to use the repeat() function when building your dataset."``
  (tensorflow/python/keras/engine/data_adapter.py ``DataHandler.catch_stop_iteration``, which sets
  ``_insufficient_data`` so that ``enumerate_epochs`` stops the run). The run ends quietly with fewer epochs than
  asked: a dataset smaller than the steps asked of it (no ``repeat()``, a ``--steps`` larger than the data), which a
  restart repeats: configuration, and a stop of the run, not a warning the run goes on after (the epoch's last
  progress redraw may still follow it) (abhi8893/tensorflow-deep-learning-mrdbourke#70, jaspereb/Retinanet-Tutorial#17,
  both read as healthy; vanvalenlab/deepcell-tf#519, keras-team/keras-io#285 print the same). Only this wording, with
  the count of batches it computed, is read: Keras 3's ``UserWarning`` of the same words (epoch_iterator.py, "...
  batches. You may need to use the `.repeat()` function") is printed at the end of the first epoch of a dataset of
  unknown length while training goes on, and is not a stop.
* Trainers state how much work they will do before they start: kohya_ss's launcher ``"Total steps: %d"`` and
  ``"max_train_steps (%d / %d / %d * %d * %d) = %d"`` (kohya_gui, one line per count; bmaltais/kohya_ss#2353: no image
  counted in the dataset folder, read as healthy; #2862 and #2396 print the same lines with real counts), Hugging
  Face's ``"Total optimization steps = %d"``, and research code the length of its data loader
  (``"len(training_loader)=0"``, xcmyz/FastSpeech#78: the prepared dataset was empty, read as healthy). A count of
  zero is a run that will not train a single step: an empty or unread dataset, the same as round 31 part D's count of
  zero examples. A count with more digits, a decimal point, a fraction or a range after the zero is another number;
  the counts of other things (warm-up steps, steps the text encoder trains) are not read.
* torch_xla, with its tensor module's verbose log on (``TF_CPP_VMODULE=tensor=5``, or xla_graph_executor), brackets
  each graph it compiles with ``VLOG(3) << "Compiling IR graph hash " << hash << " on device " << device << " ..."``
  and the same words ending ``" done!"`` (torch_xla/csrc/tensor.cpp ``XLATensor::Compile``, xla_graph_executor.cpp
  ``XLAGraphExecutor::Compile``; the lazy tensor core's lazy_graph_executor.cpp prints the same). A TPU compile takes
  minutes (pytorch/xla#5058: 25-30 minutes is expected for a large model): a log whose last such record has no
  "done!" after it ends inside the compile (pytorch/xla#2757, eight cores compiling, read as healthy). The record is
  read as the compile at work, its "done!" as the compile's end.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round35f_form` reads hold, besides the needles failureforms already
#: searches: tf.keras's stop for want of data, the trainers' counts of their steps and their loaders' length,
#: torch_xla's compile records
NEEDLES: tuple[str, ...] = ("ran out of data; interrupting training", "Total steps", "max_train_steps",
                            "Total optimization steps", "Total training steps", "loader)", "Compiling IR graph hash")

#: tf.keras 2.x's stop for want of data, with the count of batches it asked for (Keras 3's warning has no count)
_INPUT_RAN_OUT = re.compile(r"\bYour input ran out of data; interrupting training\. Make sure that your dataset or "
                            r"generator can generate at least `steps_per_epoch \* epochs` batches \(in this case, "
                            r"[\d.]+ batches\)")

#: a trainer's count of the steps it will train for, or its data loader's length, when it is zero: kohya_ss's
#: "Total steps: 0" and "max_train_steps (0 / 2 / 1 * 40 * 1) = 0", Hugging Face's "Total optimization steps = 0",
#: research code's "len(training_loader)=0"; a digit, a decimal point, a comma, a slash or a range after the zero is
#: another number
_NO_WORK = re.compile(r"(?:\bTotal (?:optimization |training )?steps|\bmax_train_steps(?: \([^)]*\))?"
                      r"|\blen\(\w*loader\))\s*[:=]\s*0(?![\d.,/-])")

#: torch_xla's records of a graph compile, by its verbose tensor log: the start ends "...", the end "done!"
_XLA_COMPILE = re.compile(r"\bCompiling IR graph hash \w+ on device \S+ (\.\.\.|done!)")


def round35f_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Compiling IR graph hash" in text and (compile_record := _XLA_COMPILE.search(text)) is not None:
        if compile_record.group(1) == "done!":
            return Form(FormKind.COMPILE_DONE, "torch_xla's graph compile (its end)")
        return Form(FormKind.COMPILE_RUNNING, "torch_xla's graph compile (its verbose tensor log)")
    if "ran out of data" in text and _INPUT_RAN_OUT.search(text):
        return Form(FormKind.CRASH, "tf.keras stopping training for want of data (a dataset smaller than the steps "
                    "asked of it)", Label.CONFIG_ERROR)
    if ("steps" in text or "loader)" in text) and _NO_WORK.search(text):
        return Form(FormKind.ERROR, "a trainer that will train no step (its count of steps or its loader's length is "
                    "zero: an empty or unread dataset)", Label.CONFIG_ERROR)
    return None


def round35f_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round35f_form(text))
