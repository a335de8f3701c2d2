"""One rule of the signature table (``signatures.toml``): what it means, how an entry is read, what a match holds.

Pure: no I/O. :class:`Signature` is a rule (its label, action and :class:`Effect` on the judge, its
needles and patterns); :func:`signature_from_table` reads one table entry into one, naming what is
wrong with it; :class:`Match` is a line a rule matched, with the step and loss a progress rule reads
(:data:`STEP_GROUPS`). :class:`~neuron_watch.diagnosis.classify.KnowledgeBase` matches lines against
an ordered table of them.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

from neuron_watch.diagnosis.failureforms import FORM_SIGNATURES
from neuron_watch.diagnosis.keyfinder import _NL
from neuron_watch.errors import ConfigError
from neuron_watch.events import Action, Label


class Effect(str, enum.Enum):
    """How the judge uses a match (see the header of ``signatures.toml``)."""

    PROGRESS = "progress"
    COMPILE_START = "compile_start"
    COMPILE_END = "compile_end"
    COMPILE_BEAT = "compile_beat"
    COMPILE_WAIT = "compile_wait"
    COMM_WAIT = "comm_wait"
    SAVE_START = "save_start"
    SAVE_END = "save_end"
    TRAIN_END = "train_end"
    RECOMPILE = "recompile"
    RECOMPILE_REASON = "recompile_reason"  # why the recompile before it happened (a failed guard)
    COMPILE_METRIC = "compile_metric"  # a compiler's own account of its compile time (torch-xla's metrics)
    FATAL = "fatal"
    #: an error line no other rule explains: a warning while the job progresses, a failure of
    #: unknown cause when nothing follows it (see :meth:`neuron_watch.diagnosis.judge.Judge.verdict`)
    UNEXPLAINED = "unexplained"
    BENIGN = "benign"
    INFO = "info"


SEVERITIES = ("info", "warning", "error", "fatal")
#: The table's last rule, for an error line no other rule explains
#: (see :meth:`~neuron_watch.diagnosis.classify.KnowledgeBase._refined`).
CATCH_ALL_ID = "host.unrecognised_error"



@dataclass(frozen=True)
class Signature:
    """One rule of the table. ``needle`` is the first of ``needles`` ("" = every line is a candidate)."""

    id: str
    category: Label
    severity: str
    action: Action
    effect: Effect
    needle: str
    patterns: tuple[re.Pattern[str], ...]
    advice: str
    examples: tuple[str, ...] = ()
    near_misses: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    anchor_start: bool = False
    generic: bool = False
    requires: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The literals searched for in ``"\\n" + line`` (anchored needles carry the newline)."""
        needles = self.needles or ((self.needle,) if self.needle else ())
        return tuple(_NL + n if self.anchor_start else n for n in needles)


@dataclass(frozen=True)
class Match:
    """A line matched ``signature``; ``step``/``loss`` are set for progress lines (see :data:`STEP_GROUPS`)."""

    signature: Signature
    step: int | None = None
    loss: float | None = None


_REQUIRED = ("id", "category", "severity", "action", "effect", "patterns", "advice")
_KNOWN = frozenset(
    {*_REQUIRED, "needle", "needles", "anchor", "generic", "examples", "near_misses", "requires"}
)


def _str_list(entry: dict[str, object], key: str) -> tuple[str, ...]:
    value = entry.get(key, ())
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError(f"{key} must be a list of strings")
    return tuple(str(x) for x in value)


def signature_from_table(entry: dict[str, object], where: str) -> Signature:
    """The rule a table entry describes (``where`` names the entry in an error)."""
    missing = [k for k in _REQUIRED if k not in entry]
    if "needle" not in entry and "needles" not in entry:
        missing.append("needle (or needles)")
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}", "every signature needs " + ", ".join(_REQUIRED))
    unknown = sorted(set(entry) - _KNOWN)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}", "known keys: " + ", ".join(sorted(_KNOWN)))
    try:
        needles = _str_list(entry, "needles") if "needles" in entry else (str(entry["needle"]),)
        anchor = entry.get("anchor")
        if anchor not in (None, "start"):
            raise ValueError(f"anchor must be \"start\" or absent, not {anchor!r}")
        sig = Signature(
            id=str(entry["id"]),
            category=Label(entry["category"]),
            severity=str(entry["severity"]),
            action=Action(entry["action"]),
            effect=Effect(entry["effect"]),
            needle=needles[0] if needles else "",
            patterns=tuple(re.compile(p) for p in _str_list(entry, "patterns")),
            advice=str(entry["advice"]),
            examples=_str_list(entry, "examples"),
            near_misses=_str_list(entry, "near_misses"),
            needles=needles,
            anchor_start=anchor == "start",
            generic=bool(entry.get("generic", False)),
            requires=_str_list(entry, "requires"),
        )
    except (ValueError, re.error, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}", "fix the entry in the signature table") from exc
    if sig.severity not in SEVERITIES:
        raise ConfigError(f"{where}: severity {sig.severity!r} is not one of {', '.join(SEVERITIES)}")
    if not sig.patterns:
        raise ConfigError(f"{where}: no patterns")
    if any(not r or r != r.lower() for r in sig.requires):
        raise ConfigError(f"{where}: requires holds an empty or non-lowercase literal", "list lowercase literals")
    if any(not n or _NL in n for n in needles):
        raise ConfigError(f"{where}: a needle is empty or contains a newline", "needles are one-line literals")
    return sig


def _float_or_none(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def int_or_none(text: str | None) -> int | None:
    """Steps print as ``12``, ``4512.0`` or ``3.2e+4`` (PTL's global_step)."""
    if text is not None and text.isdecimal():
        return int(text)  # the common case, without the float round trip
    value = _float_or_none(text)
    if value is None or not math.isfinite(value):
        return None
    return int(value)


#: Bumped when the meaning of a progress pattern's named groups changes (part of the KB fingerprint).
STEP_RULES = 2

#: The named groups a progress pattern may hold, and what :class:`Match` makes of them:
#:
#: * ``step``: the global step as printed (``12``, ``4512.0``); it wins over the groups below.
#: * ``loss``: the loss; a non-finite loss is not progress (the numerical rule ranks earlier).
#: * ``n``, ``epoch``, ``total``: a count, for lines that do not print the global step.
#:   ``n`` = units done in the current epoch (or in the run, without ``epoch``), ``epoch`` = the
#:   current epoch's index counted from 0 (= epochs completed), ``total`` = units per epoch.
#:   The step is ``epoch * total + n``; ``n`` alone gives ``n``; ``epoch`` and ``total`` without
#:   ``n`` give ``epoch * total`` (a line printed as an epoch starts); ``epoch`` without a
#:   numeric ``total`` (``9/?``) gives no step (liveness only). A count of 0 (a bar at ``0/800``,
#:   ``Epoch 0`` starting) reports nothing done: that pattern does not match the line.
STEP_GROUPS = ("step", "loss", "n", "epoch", "total")


def counted_step(m: re.Match[str], has_epoch: bool, has_n: bool, has_total: bool) -> tuple[bool, int | None]:
    """``(is progress, step)`` from the count groups of ``m`` (see :data:`STEP_GROUPS`)."""
    n = m.group("n") if has_n else None
    epoch = m.group("epoch") if has_epoch else None
    total = m.group("total") if has_total else None
    count = int(n) if n is not None and n.isdecimal() else None
    if epoch is not None and epoch.isdecimal():
        if total is not None and total.isdecimal():
            count = int(epoch) * int(total) + (count or 0)
        elif count is not None:
            return count > 0, None  # the count within an epoch of unknown length: alive, no step
    if count is None:
        return True, None
    return count > 0, count


def form_signatures() -> tuple[Signature, ...]:
    """The signatures the failure-form reader reports under (:data:`neuron_watch.FORM_SIGNATURES`)."""
    return tuple(
        Signature(id=i, category=Label(cat), severity=sev, action=Action(act), effect=Effect(eff), needle="",
                  patterns=(), advice=advice, generic=generic)
        for i, cat, sev, act, eff, generic, advice in FORM_SIGNATURES
    )

