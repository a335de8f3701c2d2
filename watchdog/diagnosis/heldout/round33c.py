"""Failure forms read for the misses of round issue23-heldout-33 (part C: classic vision and diffusion training stacks):
torch elastic's event record of a worker that failed, the shell's report of a SIGKILLed job in its locale's words or
glued to a progress bar's last redraw, IPython's header of an exception raised in a notebook cell, and the progress
row of the YOLO trainers whose loss columns are NaN.

Pure: no I/O. :func:`round33c_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the forms
of round 32, :func:`round33c_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line
that is already an error.

Each form is read where its program prints it:

* torch elastic's agent records every change of its workers' state as an event (torch/distributed/elastic/agent/
  server/api.py ``_construct_event``: ``Event(f"torchelastic.worker.status.{state}", source=EventSource.WORKER, ...)``;
  events/api.py serialises it as JSON, ``{"name": ..., "source": "WORKER", "timestamp": 0, "metadata": {...}}``), and
  torch 1.9-1.10 printed them on the console. ``torchelastic.worker.status.FAILED`` is a worker that exited with an
  error (its ``raw_error`` is ``<NONE>`` when the worker wrote no error file): a crash whose cause is in the worker's
  own log (mmagic#531 after 5000 iterations, read as healthy; mmdetection#6934). SUCCEEDED and the other states are
  not failures (pytorch#60716's SUCCEEDED records stay healthy).
* bash reports a job a signal ended with ``strsignal``, which glibc translates (libc.mo, msgid "Killed"): ``已杀死``
  (zh_CN), ``強制結束`` (zh_TW), ``強制終了`` (ja), ``죽었음`` (ko), ``Getötet`` (de), ``Processus arrêté`` (fr),
  ``Terminado (killed)`` (es), ``Убито`` (ru) and the other locales'. It prints it alone on its line, after the job's
  number in its job table (``[1]+  已杀死    nohup java -jar ...``), or glued to the last redraw of a progress bar that
  ended without a newline: mmcv's bar ends ``ETA:   157s`` (mmcv/utils/progressbar.py "ETA: {:5}s"), so the
  report reads ``ETA:   157s已杀死`` (mmsegmentation#308, killed during validation, read as healthy). English
  ``Killed`` (alone, after a pid, after tqdm's rate) is host.killed_sigkill's and is left to it. A
  job killed from outside: the job ended (the OOM killer, a limit, an operator), a crash whose cause the log does
  not name. Only the report's own shape is read: the words in prose or in a script's echo are not a report.
* IPython (and Jupyter's kernels) print an exception raised in a cell under a header of the exception's class and
  ``Traceback (most recent call last)`` padded apart (IPython/core/ultratb.py VerboseTB: the class name left, the
  words right, after a rule of dashes): ``ProcessRaisedException                    Traceback (most recent call
  last)`` (detectron2#2861: launch() called from a notebook, pasted cut in the header, read as healthy), ``RuntimeError
  Traceback (most recent call last)`` (roboflow notebooks#208), ``Exception     Traceback ...`` (detectron2#3360). The
  cell's program raised: a crash. KeyboardInterrupt and SystemExit under the same header are the user's stop and a
  program's exit, not a failure, and are not read.
* The YOLO trainers print one row per batch of their progress table: the epoch counter, the batch counter (yolov3)
  or the GPU memory (yolov5, ultralytics), the mean losses and the targets and image size (ultralytics/yolov3
  train.py ``('%10s' * 2 + '%10.3g' * 7) % ('%g/%g' % (epoch, epochs - 1), '%g/%g' % (i, nb - 1), *mloss, ...)``;
  ultralytics engine/trainer.py ``("%11s" * 2 + "%11.4g" * (2 + loss_length)) % (f"{epoch + 1}/{self.epochs}",
  f"{mem:.3g}G", *losses, ...)``, then tqdm's ``: 12% ...``). A loss cell printed ``nan`` is a loss that is not
  finite (yolov3#215, every loss column nan, read as healthy). Rows of other tables (pandas' missing values, a
  validation row of metrics) do not begin with an epoch counter and are not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: glibc's translations of strsignal(SIGKILL) (libc.mo, msgid "Killed"), English apart (host.killed_sigkill reads it)
KILLED_WORDS: tuple[str, ...] = (
    "已杀死", "強制結束", "強制終了", "죽었음", "Getötet", "Processus arrêté", "Terminado (killed)", "Убито", "Вбито",
    "Забіты", "Убијен", "Безусловно прекъснат", "Σκοτώθηκε", "Zabit (SIGKILL)", "Zabitý", "Unicestwiony", "Dræbt",
    "Dödad", "Drept", "Tapettu", "Kilőve", "Geëlimineerd", "Ucciso", "Morto", "Matat", "Matado", "Ubijen", "Pobit",
    "Nutraukta (killed)", "Süreç durduruldu", "Bị buộc kết thúc", "Terbunuh", "Buĉita")

#: The literals (digit-free) the lines :func:`round33c_form` reads hold, besides the needles failureforms already
#: searches ("nan", a metric's value, is one): torch elastic's failed worker's event, the shell's kill report in its
#: locale's words, IPython's exception header. A word that begins outside ASCII (CJK, Cyrillic, Greek, Hangul) would
#: cost the classifier's batch a search of its own: its reports are found through what stands before them (mmcv's
#: "elapsed: 799s, ETA:", bash's job table "[1]+ ", tqdm's "%|" that progress.bar already searches), not alone on a line
NEEDLES: tuple[str, ...] = ("torchelastic.worker.status.FAILED", *(w for w in KILLED_WORDS if w[0].isascii()),
                            "s, ETA:", "[]+ ", "[]- ", "Traceback (most")

#: torch elastic's event of a worker that failed, as events/api.py serialises it (JSON, the name first)
_ELASTIC_FAILED = re.compile(r"\"name\":\s*\"torchelastic\.worker\.status\.FAILED\"")

_KILLED = "(?:" + "|".join(map(re.escape, KILLED_WORDS)) + ")"
#: the shell's kill report in its locale's words: alone on its line (markdown around it), after the job's number in
#: the job table or after the pid bash names, or glued to a progress bar's last redraw (tqdm's rate, a bracket)
_KILLED_REPORT = re.compile(rf"^[\s*>`]*{_KILLED}[\s*`]*$|^\[\d+\][+-]?\s+{_KILLED}\s+\S|\b\d+ {_KILLED}\s+\S|"
                            rf"(?:it/s|s/it|\])\s*{_KILLED}\s*$")
#: the report glued to the end of mmcv's progress bar, whose last field is the ETA in seconds
_KILLED_AFTER_ETA = re.compile(rf"\bETA:\s*\d+s{_KILLED}\s*$")

#: IPython's header of an exception raised in a cell: the class, a run of spaces, the words (cut anywhere after
#: "most" when pasted short)
_IPYTHON_HEADER = re.compile(r"^[\s>]*(?:-{10,}\s*)?((?:\w+\.)*[A-Z]\w*)\s{3,}Traceback \(most\b")
#: the classes of a stop that is no failure: the user's interrupt, a program's own exit
_NOT_A_FAILURE = frozenset({"KeyboardInterrupt", "SystemExit", "GeneratorExit"})

#: a YOLO trainer's progress row: the epoch counter, the batch counter or the GPU memory, then the numbers of the
#: row up to the end or to tqdm's ": " after its description
_YOLO_ROW = re.compile(r"^\s*\d+/\d+\s+(?:\d+/\d+|\d+(?:\.\d+)?[GM])\s+((?:\S+\s+)*?\S+)\s*(?::\s|:?$)")
_CELL = re.compile(r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)")
#: a row is looked at when it holds a "nan" (failureforms' needle for a metric's value); an inf beside it counts too
_NONFINITE = frozenset({"nan", "inf", "-inf", "+inf", "-nan"})


def _yolo_row_not_finite(text: str) -> bool:
    row = _YOLO_ROW.match(text)
    if row is None:
        return False
    cells = row.group(1).split()
    return any(c in _NONFINITE for c in cells) and all(_CELL.fullmatch(c) for c in cells)


def round33c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "torchelastic.worker.status.FAILED" in text and _ELASTIC_FAILED.search(text):
        return Form(FormKind.CRASH, "a worker torch elastic recorded as FAILED (its event record)")
    if (_KILLED_REPORT.search(text) or _KILLED_AFTER_ETA.search(text)) is not None:
        return Form(FormKind.CRASH, "a job a SIGKILL ended (the shell's report, in its locale's words or after a "
                                    "progress bar)")
    if ("Traceback (most" in text and (header := _IPYTHON_HEADER.match(text)) is not None
            and header.group(1).rsplit(".", 1)[-1] not in _NOT_A_FAILURE):
        return Form(FormKind.CRASH, "an exception raised in a notebook cell (IPython's traceback header)")
    if "nan" in text and _yolo_row_not_finite(text):
        return Form(FormKind.METRIC, "a NaN/Inf loss in a YOLO trainer's progress row", Label.NUMERICAL_ERROR)
    return None


def round33c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round33c_form(text))
