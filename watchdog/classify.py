"""Classify log lines against the knowledge base (``signatures.toml``): an ordered rule table.

Pure: no I/O. :func:`neuron_watch.kb.default_knowledge_base` loads the packaged table.

    >>> kb = KnowledgeBase.from_toml(text)
    >>> m = kb.classify("CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying")
    >>> m.signature.effect
    <Effect.COMM_WAIT: 'comm_wait'>
"""

from __future__ import annotations

import enum
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neuron_watch.errors import ConfigError
from neuron_watch.events import Action, Label

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class Effect(str, enum.Enum):
    """How the judge uses a match (see the header of ``signatures.toml``)."""

    PROGRESS = "progress"
    COMPILE_START = "compile_start"
    COMPILE_END = "compile_end"
    COMPILE_BEAT = "compile_beat"
    COMM_WAIT = "comm_wait"
    FATAL = "fatal"
    BENIGN = "benign"
    INFO = "info"


SEVERITIES = ("info", "warning", "error", "fatal")


@dataclass(frozen=True)
class Signature:
    """One rule of the table."""

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


@dataclass(frozen=True)
class Match:
    """A line matched ``signature``; ``step``/``loss`` are set for progress lines."""

    signature: Signature
    step: int | None = None
    loss: float | None = None


_REQUIRED = ("id", "category", "severity", "action", "effect", "needle", "patterns", "advice")


def _signature_from_table(entry: dict[str, object], where: str) -> Signature:
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}", "every signature needs " + ", ".join(_REQUIRED))
    try:
        patterns = tuple(re.compile(str(p)) for p in entry["patterns"])  # type: ignore[attr-defined]
        sig = Signature(
            id=str(entry["id"]),
            category=Label(entry["category"]),
            severity=str(entry["severity"]),
            action=Action(entry["action"]),
            effect=Effect(entry["effect"]),
            needle=str(entry["needle"]),
            patterns=patterns,
            advice=str(entry["advice"]),
            examples=tuple(str(x) for x in entry.get("examples", ())),  # type: ignore[attr-defined]
            near_misses=tuple(str(x) for x in entry.get("near_misses", ())),  # type: ignore[attr-defined]
        )
    except (ValueError, re.error, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}", "fix the entry in the signature table") from exc
    if sig.severity not in SEVERITIES:
        raise ConfigError(f"{where}: severity {sig.severity!r} is not one of {', '.join(SEVERITIES)}")
    if not sig.patterns:
        raise ConfigError(f"{where}: no patterns")
    return sig


def _float_or_none(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


class KnowledgeBase:
    """An ordered table of :class:`Signature`; the first signature that matches a line wins."""

    def __init__(self, signatures: Sequence[Signature]) -> None:
        ids = [s.id for s in signatures]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"duplicate signature ids: {', '.join(dupes)}")
        self.signatures: tuple[Signature, ...] = tuple(signatures)
        self.by_id = {s.id: s for s in self.signatures}
        # One alternation of all needles: a line that contains none of them cannot match any rule,
        # so most lines of a training log cost a single C-level search.
        needles = sorted({s.needle for s in self.signatures}, key=len, reverse=True)
        self._prefilter = re.compile("|".join(re.escape(n) for n in needles))

    @classmethod
    def from_toml(cls, text: str, progress_regex: str | None = None) -> KnowledgeBase:
        """Build from the TOML text of a signature table.

        ``progress_regex`` (the user's ``--progress-regex``) is put first as a progress rule; a named
        group ``step`` (and optionally ``loss``) is read when present.

        Raises:
            ConfigError: the table or the regex is malformed; the message names the entry.
        """
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"signature table is not valid TOML: {exc}") from exc
        entries = data.get("signature", [])
        sigs = [_signature_from_table(e, f"signature #{i} ({e.get('id', '?')})") for i, e in enumerate(entries)]
        if progress_regex:
            try:
                user = re.compile(progress_regex)
            except re.error as exc:
                raise ConfigError(
                    f"--progress-regex {progress_regex!r} is not a valid regular expression: {exc}",
                    "quote it for the shell and check the syntax (Python re)",
                ) from exc
            sigs.insert(
                0,
                Signature(
                    id="user.progress",
                    category=Label.HEALTHY,
                    severity="info",
                    action=Action.WAIT,
                    effect=Effect.PROGRESS,
                    needle="",
                    patterns=(user,),
                    advice="A training step finished (--progress-regex).",
                ),
            )
        return cls(sigs)

    def classify(self, line: str) -> Match | None:
        """The first signature matching ``line``, or None."""
        if not self._prefilter.search(line):
            return None
        for sig in self.signatures:
            if sig.needle not in line:
                continue
            for pat in sig.patterns:
                m = pat.search(line)
                if m is None:
                    continue
                if sig.effect is Effect.PROGRESS:
                    gd = m.groupdict()
                    step = int(gd["step"]) if gd.get("step") else None
                    loss = _float_or_none(gd.get("loss"))
                    if loss is not None and not math.isfinite(loss):
                        continue  # the numerical rule ranks earlier; a custom table may not have one
                    return Match(sig, step, loss)
                return Match(sig)
        return None

    def scan(self, lines: Iterable[str]) -> list[tuple[int, Match]]:
        """Classify a batch; returns ``(index, match)`` for the lines that matched, in order."""
        out: list[tuple[int, Match]] = []
        for i, line in enumerate(lines):
            m = self.classify(line)
            if m is not None:
                out.append((i, m))
        return out
