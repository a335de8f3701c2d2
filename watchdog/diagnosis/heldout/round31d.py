"""Failure forms read for the misses of round issue23-heldout-31 (part D: healthy runs that look frightening, and
failures whose log reads calm): CPython's report of an exception it ignored, a trainer's notice that it skipped one
update for a gradient that was not finite, the same trainer's report that it stopped because no update of an epoch
was valid, and a trainer that found no examples to train on.

Pure: no I/O. :func:`round31d_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 30, :func:`round31d_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of`, :func:`round31d_quiet`
before every form (a notice that holds a failure's words but reports the failure handled), and
:class:`IgnoredReports` by :mod:`neuron_watch.diagnosis.offline_reading` for the lines its last-words readers skip.

Each form is read where its program prints it:

* CPython prints an exception it cannot raise (in a destructor, a finaliser, a weakref callback, at interpreter
  shutdown) through ``sys.unraisablehook``, whose default (Python/errors.c ``write_unraisable_exc_file``) writes
  "Exception ignored in: <object>" (3.13: also "Exception ignored while ..."), then the traceback ("Traceback (most
  recent call last):", its frames and source lines, indented) and the exception line, and goes on: the exception
  is not the process's. The live judge already leaves the report's traceback and exception line out
  (signatures.toml ``python.exception_ignored``), but the offline readers of a log's last lines read the report's
  frames as a traceback the log was cut in and its exception line as the error the process died of. At exit such
  reports are the usual last words of a run that ended well: Ray's ``ActorHandle.__del__`` after ``ray.shutdown``
  (ray#4467, ray#6239, ray#16947), tqdm's monitor thread (fairseq#369), multiprocessing's ``Pool.__del__``
  (IsoNet#25), PyTorch 0.4's DataLoader iterator shutting its workers down (RFBNet#71,
  pytorch-CycleGAN-and-pix2pix#778): round issue23-heldout-31 part D, seven healthy runs read as crashes. An
  interrupt the report holds (``KeyboardInterrupt``, Detectron.pytorch#140: a DataLoader deadlock its user stopped)
  is the user's, read by :mod:`~neuron_watch.diagnosis.interrupted`: its exception line is not skipped.
* ESPnet's trainers (espnet2/train/trainer.py and the many trainers copied from it) skip the optimizer's step when
  the clipped gradient norm is not finite, with ``logging.warning(f"The grad norm is {grad_norm}. Skipping updating
  the model.")``; ESPnet 1's chainer and pytorch backends with "grad norm is nan. Do not update model.". The trainer
  handled the value and goes on (espnet#186: the maintainer, "You can ignore the warning"), as apex's and
  DeepSpeed's "Skipping step" do: a notice, not a NaN that stopped the job (round issue23-heldout-31 part D's
  espnet-186, read as numerical_error). Whether every step was skipped is said by the next form.
* The same trainers count the epoch's valid updates and, when there was none, stop the run: ``logging.warning(
  "The gradients at all steps are invalid in this epoch. " f"Something seems wrong. This training was stopped at
  {iepoch}epoch")`` then ``break``. The gradients were not finite at every step: numerical_error, at a WARNING
  level under an INFO record (espnet#3104 turn 10, read as healthy; espnet#3630).
* Trainers state how many examples they train on as they start: Hugging Face's ``Trainer`` (and its Flax and TF
  trainers, and the trainers built on it) log ``"  Num examples = {num_examples:,}"`` under "***** Running training
  *****", Unsloth's banner "Num examples = {n:,} | Num Epochs = ...", and research code its own "the number of
  examples : {n}" (Key.Net_PyTorch#5). A count of zero is a dataset that is empty or was not read (a path, a filter
  that drops everything): the run does nothing, or fails later on an index out of range, and a restart reads the
  same nothing: configuration (Key.Net_PyTorch#5, round issue23-heldout-31 part D, read as healthy;
  transformers#23893's "Num examples = 0" before its IndexError).
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from neuron_watch.diagnosis.exctaxonomy import exception_class
from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round31d_form` reads hold, besides the needles failureforms already
#: searches: ESPnet's stopped training, a trainer's count of its examples
NEEDLES: tuple[str, ...] = ("gradients at all steps are invalid", "Num examples", "number of examples",
                            "Number of examples")

#: ESPnet's trainer stopping a run in which no update of an epoch was valid
_ALL_STEPS_INVALID = re.compile(r"\bThe gradients at all steps are invalid in this epoch\b")

#: a trainer's count of the examples it trains on, when it is zero (Hugging Face's "Num examples = 0", Unsloth's
#: "Num examples = 0 |", "the number of examples : 0"); a digit, a decimal point or a thousands comma after the
#: zero is another number
_NO_EXAMPLES = re.compile(r"\b(?:Num|[Nn]umber of) examples\s*[:=]\s*0(?![\d.,])")

#: ESPnet's notices of one update skipped for a gradient norm that is not finite (ESPnet 2, ESPnet 1)
_UPDATE_SKIPPED = re.compile(r"\bThe grad norm is (?:nan|-?inf)\. Skipping updating the model\b|"
                             r"\bgrad norm is nan\. Do not update model\b")


def round31d_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "all steps are invalid" in text and _ALL_STEPS_INVALID.search(text):
        return Form(FormKind.ERROR, "ESPnet's trainer stopping the run: no update of an epoch had finite gradients",
                    Label.NUMERICAL_ERROR)
    if "examples" in text and _NO_EXAMPLES.search(text):
        return Form(FormKind.ERROR, "a trainer that found no examples to train on (an empty or unread dataset)",
                    Label.CONFIG_ERROR)
    return None


def round31d_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round31d_form(text))


def round31d_quiet(text: str) -> bool:
    """Whether ``text`` is a trainer's notice that it skipped one update for a gradient that was not finite: it holds
    a NaN's words but reports the value handled, so it holds no failure form."""
    return "model" in text and _UPDATE_SKIPPED.search(text) is not None


#: the unraisable hook's announcement (glued to a progress bar it interrupted, as tqdm's own ``__del__`` prints it)
_ANNOUNCED = re.compile(r"Exception ignored (?:in|on|while)\b")
#: the traceback's header
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
#: a prefix a launcher or a paste puts before each line: markdown's quote, Ray's "(pid=N)", "[rank]:", mpirun's
#: "[1,0]<stderr>:"
_PREFIX = re.compile(r"^(?:>\s?|\((?:\w+ )?pid=\d+[^)]*\)\s?|\[[^\]]*\](?:<\w+>)?:\s?)*")
#: a traceback's frame
_FRAME = re.compile(r'\s*File "[^"]*", line \d+')
#: the exception line of an interrupt (the unraisable hook prints it with an empty message after a colon), which
#: interrupted.py reads (its own pattern; importing that module here would close a cycle through failureforms)
_INTERRUPT = re.compile(r"KeyboardInterrupt:?\s*$")


class IgnoredReports:
    """Which lines of each stream belong to CPython's report of an exception it ignored (the announcement, the
    traceback's header, its frames and the source lines under them, and the exception line that ends it).

    Python writes the report at once, but another process writing to the same stream may put its lines between the
    report's (the live judge leaves such lines aside alike): a line of another shape is not the report's and does not
    end it, unless :data:`TOLERATED` such lines came since the report's last. A new traceback's header ends it (that
    traceback is the process's own); so does its exception line, which is the report's unless it is an interrupt
    (``KeyboardInterrupt``, the user's: read by :mod:`~neuron_watch.diagnosis.interrupted`)."""

    #: lines of another shape a report may hold between two of its own before it counts as ended (cut)
    TOLERATED = 10

    def __init__(self) -> None:
        #: per stream: (1 after the announcement or 2 inside the traceback, lines of another shape since its last)
        self._state: dict[Hashable, tuple[int, int]] = {}

    def observe(self, key: Hashable, text: str) -> bool:
        """Whether line ``text`` of stream ``key`` (every line, in order) is part of an ignored exception's report."""
        if "Exception ignored" in text and _ANNOUNCED.search(text):
            self._state[key] = (1, 0)
            return True
        state = self._state.get(key)
        if state is None:
            return False
        phase, foreign = state
        prefix = _PREFIX.match(text)
        body = text[prefix.end():] if prefix is not None else text
        if not body.strip():
            return False
        if _TRACEBACK.match(body):
            if phase == 1:
                self._state[key] = (2, 0)
                return True
            del self._state[key]  # a traceback of the process's own
            return False
        if phase == 2 and (_FRAME.match(body) or body.startswith("    ")):
            self._state[key] = (2, 0)
            return True
        if exception_class(body) is not None or _INTERRUPT.match(body):
            del self._state[key]
            return _INTERRUPT.match(body) is None
        if foreign >= self.TOLERATED:
            del self._state[key]
        else:
            self._state[key] = (phase, foreign + 1)
        return False
