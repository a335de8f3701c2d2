"""The log's last words: an error a log ends on, in whatever layout the log itself uses.

Pure: no I/O. The readers of forms know the record heads of the common logging conventions
(:mod:`neuron_watch.diagnosis.forms_severity`); a program with a layout of its own (``[NeMo E ...]``, a
framework's ``<date> | ERR | ...``) escapes them, and a log that ends on its error reads as healthy. The
convention is read from the log instead of from a list of conventions: the place where its healthy records
put ``INFO``/``WARNING``/``DEBUG`` (or glog-like ``I``/``W``/``D``) is where its failing records put
``ERROR``/``FATAL``/``CRITICAL`` (or ``E``/``F``). A place is the index of the level among a record's first
fields and the shapes of the fields before it (``2022-07-05 13:49:18,605 - mmcv - INFO``: three fields of
shapes ``9-9-9``, ``9:9:9,9``, ``a`` before the level), so prose that happens to hold the word elsewhere is
not read. The other shape read is the exception line (``pkg.mod.ClassError: message``, printed by Python and
Java alike) that a log ends on without its traceback.

:class:`LastWords` is fed every line of a log (per stream); at the end, :meth:`LastWords.final_errors` gives
each stream's error when it is among the stream's last lines and no record of the stream's own layout
with a quiet level came after it (the process went on logging). The caller withdraws it if any rank made
progress after it (:func:`neuron_watch.diagnosis.offline_reading.judge_offline` asks only when the
reading is otherwise healthy).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from typing import Generic, TypeVar

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.exctaxonomy import exception_class
from neuron_watch.events import Action, Evidence, Label, LogLine, Verdict

#: the levels of a record that is no failure, and of one that is (in the spellings the conventions use:
#: Python logging, log4j/logback and java.util.logging, syslog's keywords, glog's letters)
QUIET_LEVELS = frozenset({"INFO", "WARNING", "WARN", "DEBUG", "TRACE", "NOTICE", "VERBOSE", "FINE", "CONFIG",
                          "I", "W", "D", "V"})
ERROR_LEVELS = frozenset({"ERROR", "ERR", "FATAL", "CRITICAL", "CRIT", "SEVERE", "EMERG", "ALERT", "PANIC",
                          "E", "F"})
#: records of one layout seen with a quiet level before its place is trusted as the log's level column
MIN_RECORDS = 3
#: a stream's last lines kept, where the log's layout is learned
WINDOW = 100
#: lines a stream may print after its error and still end on it (the error's message, its traceback)
TAIL = 12
#: the fields of a record's head read for its level
_HEAD_FIELDS = 12
#: ... within the line's first characters (a record's head; a message's words after it are not split)
_HEAD_CHARS = 120
_FIELD_SPLIT = re.compile(r"[\s\[\]|(){}<>:,;=]+")
_SHAPE = re.compile(r"\d+|[A-Z]+|[a-z]+")
#: the class an exception line names ends in a word of failure (not ``UserWarning``, not a module path)
_FAILING_CLASS = re.compile(r"(?:Error|Exception|Failure|Fault|Failed|Timeout|Exceeded|Refused|Denied)$")


def _shape(field: str) -> str:
    """A field's shape: its runs of digits, capitals and small letters as 9, A, a (``2022-07-05`` -> ``9-9-9``)."""
    return _SHAPE.sub(lambda m: "9" if m.group(0)[0].isdigit() else "A" if m.group(0)[0].isupper() else "a", field)


def level_places(text: str) -> list[tuple[tuple[int, tuple[str, ...]], str]]:
    """Each level word among ``text``'s first fields, with its place: (its index, the shapes before it).

    A level of one letter (``I``/``E``) is a word of prose as often as a level ("I think", "E = mc^2"): its
    place holds the kind of the field after it too, a number or a word (``I 11-26 17:48:00`` and ``E 11-26
    17:52:19`` share one; ``I think`` and ``E 11-26`` do not)."""
    fields = [f for f in _FIELD_SPLIT.split(text[:_HEAD_CHARS], _HEAD_FIELDS) if f][:_HEAD_FIELDS]
    found = []
    for i, field in enumerate(fields):
        word = field.upper() if len(field) > 1 else field  # spdlog and zap print theirs in small letters
        if word in QUIET_LEVELS or word in ERROR_LEVELS:
            shapes = tuple(_shape(f) for f in fields[:i])
            if len(word) == 1:
                after = fields[i + 1][:1] if i + 1 < len(fields) else ""
                shapes += ("9" if after.isdigit() else "a" if after.isalpha() else after,)
            found.append(((i, shapes), word))
    return found


def failing_exception(text: str) -> str | None:
    """The class of an exception line whose class names a failure, or None."""
    name = exception_class(text)
    if name is None or not _FAILING_CLASS.search(name.rsplit(".", 1)[-1]):
        return None
    return name


#: what the caller feeds with each line and gets back with its error (its own line record)
T = TypeVar("T")


class LastWords(Generic[T]):
    """Reads each stream's last error in the log's own layout (see the module's docstring).

    A stream's last :data:`WINDOW` lines are kept and read at the end only: the layout is learned from the
    records around the end of the log, where its last words are, and a line costs an append while it is read
    (the fields of every line of a long log would cost a sixth of ``diagnose``'s time)."""

    def __init__(self) -> None:
        self._streams: dict[object, deque[tuple[T, str]]] = {}

    def observe(self, key: object, text: str, line: T) -> None:
        """Feed one line of stream ``key`` (every line of the log, in order); ``line`` is given back with an error."""
        window = self._streams.get(key)
        if window is None:
            window = self._streams[key] = deque(maxlen=WINDOW)
        window.append((line, text))

    def final_errors(self) -> dict[object, tuple[T, str]]:
        """Each stream's error among its last lines, with no quiet record of a level column after it:
        (its line as fed, what form it is)."""
        read = {key: [(line, text, level_places(text)) for line, text in window if text.strip()]
                for key, window in self._streams.items()}
        quiet: dict[tuple[int, tuple[str, ...]], int] = {}  # quiet records per place, over every stream
        for lines in read.values():
            for _, _, places in lines:
                for place, word in places:
                    if word in QUIET_LEVELS:
                        quiet[place] = quiet.get(place, 0) + 1
        columns = {place for place, n in quiet.items() if n >= MIN_RECORDS}
        found: dict[object, tuple[T, str]] = {}
        for key, lines in read.items():
            tail = lines[-(TAIL + 1):]
            for line, text, places in reversed(tail):
                levels = [word for place, word in places if place in columns]
                if any(word in QUIET_LEVELS for word in levels):
                    break  # the process went on logging after any error above
                if any(word in ERROR_LEVELS for word in levels):
                    found[key] = (line, "a record of error level in the log's own level column")
                elif (name := failing_exception(text)) is not None:
                    found[key] = (line, f"an exception line ({name})")
            # the earliest error of the run the stream ends on is kept: a cause is printed before its echoes
        return found


#: the signature an error read so names in a verdict's evidence
LAST_WORDS_SIGNATURE = "form.last_words"


def ends_on_error(errors: Mapping[object, tuple[LogLine, str]], latest_progress: float | None) -> Verdict | None:
    """Not healthy: a stream whose input ends on an error (:meth:`LastWords.final_errors`) with no progress of
    any rank after it. Its cause is what the error's form states
    (:func:`~neuron_watch.diagnosis.errorclass.read_error`), else a crash to restart. (A rank that printed an
    error and went on while the others progressed is not judged so: their progress after it withdraws it, as the
    judge withdraws a warning.)"""
    ended = [(line, form) for line, form in errors.values()
             if latest_progress is None or line.mono >= latest_progress]
    if not ended:
        return None
    line, form = min(ended, key=lambda e: (e[0].mono, e[0].lineno))
    text = line.text.strip()
    reading = read_error(text)
    if reading is not None and reading.action is not Action.WAIT:
        label, action, advice, why = reading.label, reading.action, reading.advice, f"; its form: {reading.form}"
    else:
        label, action, why = Label.OTHER_CRASH, Action.RESTART, ""
        advice = ("The log ends on this error, with no progress after it: read it for the cause; restart from the "
                  "last complete checkpoint if it is transient.")
    return Verdict(
        label, action, ranks=(line.key,), culprit=line.key,
        evidence=(Evidence(line.key, line.text, LAST_WORDS_SIGNATURE, line.source, line.lineno, line.mono),),
        reason=f"the input ends on {form}, with no progress after it{why} ({text[:160]})",
        advice=advice, culprit_source="failure")
