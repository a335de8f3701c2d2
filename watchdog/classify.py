"""Classify log lines against the knowledge base (``signatures.toml``): an ordered rule table.

Pure: no I/O. :func:`neuron_watch.kb.default_knowledge_base` loads the packaged table.

    >>> kb = KnowledgeBase.from_toml(text)
    >>> m = kb.classify("CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying")
    >>> m.signature.effect
    <Effect.COMM_WAIT: 'comm_wait'>

How it stays fast (a training log is mostly lines no rule cares about): every signature names
literal *needles* that any line it matches must contain, each found through a *trigger* that
starts at a marker character (see ``_MARKERS``). A whole batch is joined into one string, encoded
and translated so that every marker becomes one byte; one regular expression (that byte, then a
trie of the translated trigger rests) is searched over it, so the engine skips from marker to
marker at memchr speed. Needles without a usable marker get one literal search each. Only the
lines these searches hit get the ordered rule table, and only the rules whose needles occur in
that line. :meth:`KnowledgeBase.classify` (one line) and :meth:`KnowledgeBase.scan` (a batch)
give the same answers: both find exactly the needles the line holds.
"""

from __future__ import annotations

import enum
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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
    #: unknown cause when nothing follows it (see :meth:`neuron_watch.judge.Judge.verdict`)
    UNEXPLAINED = "unexplained"
    BENIGN = "benign"
    INFO = "info"


SEVERITIES = ("info", "warning", "error", "fatal")

#: A line-start anchored needle is searched as "\n" + needle in text that starts with "\n".
_NL = "\n"
#: The byte every trigger-starting character becomes in the translated batch (and what a real
#: one becomes, so it never poses as a marker).
_MARK = b"\x00"
_MARK_ESC = b"\x01"


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


def _signature_from_table(entry: dict[str, object], where: str) -> Signature:
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


def _int_or_none(text: str | None) -> int | None:
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


def _counted(m: re.Match[str], has_epoch: bool, has_n: bool, has_total: bool) -> tuple[bool, int | None]:
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


def _trie_regex(keys: Iterable[str]) -> str:
    """An alternation of ``keys`` factored into a trie (one branch per first character)."""
    trie: dict[str, Any] = {}
    for key in keys:
        node = trie
        for ch in key:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return "(?:" + body + ")?" if "" in node else body  # a key ends here; longer keys go on

    return emit(trie)


#: Characters that start a trigger. In the translated batch each becomes one marker byte, so the
#: regex engine jumps from marker to marker at memchr speed and tries the trie only there; each
#: try that fails costs tens of ns inside the engine, so the set is what needles need minus what
#: chatter is full of. Chosen greedily on runtime/NCCL/Python chatter and progress lines (total
#: cost = tries per line + one literal pass per needle left without a marker): "I", "O", "R",
#: "L", "P", "D", "W", "|", "=", "'", ")", "]", "k", "y", "q", "z" went (INFO, NRT, NCCL, TDRV,
#: WARN, compiler frames, seq/s, size). About eight tries a line remain, and five literal passes
#: ("loss", the dots, "%|", "Instance ID:", "suspected hang in collectives").
_MARKERS = "ACEFGHKMNQSTUXYZ[(!\"#$&*;@^`~jvwx"


def _trigger(key: str) -> tuple[str, bool]:
    """``key`` from the last marker of its first run of markers on ("NCCL error" -> "L error"), and
    whether it is searched literally instead (then it is the whole key). The rest is long (few
    false hits) and starts with a non-marker, so a try at a run of capitals ("INFO") fails at once.

    A rest of mostly markers would hit any run of capitals ("%|", "SIGSEGV"): such a key, or one
    without markers, is its own trigger, searched literally (a key holding another literal key
    shares its search).
    """
    for i, ch in enumerate(key):
        if ch in _MARKERS:
            while i + 1 < len(key) and key[i + 1] in _MARKERS:
                i += 1
            rest = key[i + 1 :]
            plain = sum(c not in _MARKERS for c in rest)
            if plain + (len(rest) - plain) / 8 >= 2.5:
                return key[i:], False
            break
    return key, True


class KnowledgeBase:
    """An ordered table of :class:`Signature`; the first signature that matches a line wins."""

    def __init__(self, signatures: Sequence[Signature]) -> None:
        ids = [s.id for s in signatures]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"duplicate signature ids: {', '.join(dupes)}")
        self.signatures: tuple[Signature, ...] = tuple(signatures)
        self.by_id = {s.id: s for s in self.signatures}
        self._always: tuple[int, ...] = tuple(i for i, s in enumerate(self.signatures) if not s.keys)
        by_key: dict[str, list[int]] = {}
        for i, s in enumerate(self.signatures):
            for k in s.keys:
                by_key.setdefault(k, []).append(i)
        self._by_key = {k: tuple(v) for k, v in by_key.items()}
        self._all_keys = tuple(sorted(by_key))
        # Each key is found through a *trigger*: the rest of the key from its rarest character.
        # Rare triggers are searched together in a translated copy of the batch where every
        # trigger-starting character became one marker byte, so the regex engine skips to the next
        # marker at memchr speed (a leading character class would cost ~4 ns per character).
        # Keys made only of common characters ("loss", the dots' "\n.") get a literal search each.
        keys_of: dict[str, list[str]] = {}
        literal: set[str] = set()
        for k in self._all_keys:
            t, lit = _trigger(k)
            keys_of.setdefault(t, []).append(k)
            if lit:
                literal.add(t)
        rare = sorted(t for t in keys_of if t not in literal)
        common = sorted(literal, key=len)
        for t in list(common):  # a common trigger holding a shorter one is found through it
            inner = next((u for u in common if u != t and u in t), None)
            if inner is not None:
                keys_of[inner].extend(keys_of.pop(t))
                common.remove(t)
        self._keys_of = {t: tuple(ks) for t, ks in keys_of.items()}
        self._common = tuple(common)
        self._common_res = tuple(re.compile(re.escape(t)) for t in common)
        self._table = bytes.maketrans(_MARKERS.encode("ascii") + _MARK, _MARK * len(_MARKERS) + _MARK_ESC)
        # Translated trigger rests (several triggers may translate alike: they share the keys).
        tkeys: dict[bytes, set[str]] = {}
        for t in rare:
            tkeys.setdefault(_encode(t[1:]).translate(self._table), set()).update(keys_of[t])
        # The search tries every marker (a match consumes only the marker; the rest is a
        # lookahead), and at each reports the longest rest: the triggers that are prefixes of it
        # are found with it.
        self._tcand: dict[bytes, tuple[str, ...]] = {
            u: tuple(sorted({k for o, ks in tkeys.items() if u.startswith(o) for k in ks})) for u in tkeys
        }
        pattern = _trie_regex(u.decode("latin-1") for u in tkeys).encode("latin-1")
        # Most tries fail on the byte after the marker (inside "INFO" it is another marker): one
        # class test rejects them before the trie's alternation walks its first-level branches.
        firsts = b"".join(re.escape(bytes([c])) for c in sorted({u[0] for u in tkeys if u}))
        guard = b"(?=[" + firsts + b"])" if all(tkeys) else b""
        self._prefilter = re.compile(re.escape(_MARK) + guard + b"(?=(" + pattern + b"))" if tkeys else rb"(?!)")
        self._cand_cache: dict[frozenset[str], tuple[int, ...]] = {}
        # Per rule, what _match needs without attribute look-ups (it runs on every progress line).
        self._plans = tuple(
            (
                s,
                s.requires,
                s.effect is Effect.PROGRESS,
                tuple(
                    (
                        p.search,
                        "step" in p.groupindex,
                        "loss" in p.groupindex,
                        ("epoch" in p.groupindex, "n" in p.groupindex, "total" in p.groupindex)
                        if {"epoch", "n", "total"} & set(p.groupindex)
                        else None,
                    )
                    for p in s.patterns
                ),
            )
            for s in self.signatures
        )

    @classmethod
    def from_toml(cls, text: str, progress_regex: str | None = None) -> KnowledgeBase:
        """Build from the TOML text of a signature table.

        ``progress_regex`` (the user's ``--progress-regex``) is put first as a progress rule; its named
        groups are read as :data:`STEP_GROUPS` says (``step``, ``loss``, ``n``/``epoch``/``total``).

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

    # -- matching -------------------------------------------------------------------------------

    def _candidates_of(self, keys: frozenset[str]) -> tuple[int, ...]:
        """Indices (in table order) of the signatures having a needle in ``keys`` (plus keyless ones)."""
        idx = self._cand_cache.get(keys)
        if idx is None:
            by_key = self._by_key
            idx = tuple(sorted({i for k in keys for i in by_key[k]}.union(self._always)))
            if len(self._cand_cache) < 4096:
                self._cand_cache[keys] = idx
        return idx

    def _match(self, line: str, candidates: Iterable[int]) -> Match | None:
        plans = self._plans
        low: str | None = None
        for i in candidates:
            sig, requires, progress, searches = plans[i]
            if requires:
                if low is None:
                    low = line.lower()
                for r in requires:
                    if r in low:
                        break
                else:
                    continue  # none of the patterns can match: skip them unsearched
            for search, has_step, has_loss, counts in searches:
                m = search(line)
                if m is None:
                    continue
                if progress:
                    loss = _float_or_none(m.group("loss")) if has_loss else None
                    if loss is not None and not math.isfinite(loss):
                        continue  # the numerical rule ranks earlier; a custom table may not have one
                    step = _int_or_none(m.group("step")) if has_step else None
                    if step is None and counts is not None:
                        alive, step = _counted(m, *counts)
                        if not alive:
                            continue  # a bar at 0 reports nothing done
                    return Match(sig, step, loss)
                return Match(sig)
        return None

    def classify(self, line: str) -> Match | None:
        """The first signature matching ``line``, or None (the same answer :meth:`scan` gives)."""
        if _NL in line:
            # Not a line of a batch: no trigger search, every key is looked for in it.
            text = _NL + line
            keys = frozenset(k for k in self._all_keys if k in text)
            if not keys and not self._always:
                return None
            return self._match(line, self._candidates_of(keys))
        text = _NL + line
        cands: set[str] = set()
        for m in self._prefilter.finditer(_encode(text).translate(self._table)):
            cands.update(self._tcand[m.group(1)])
        for t in self._common:
            if t in text:
                cands.update(self._keys_of[t])
        keys = frozenset(k for k in cands if k in text)
        if not keys and not self._always:
            return None
        return self._match(line, self._candidates_of(keys))

    def scan(self, lines: Iterable[str]) -> list[tuple[int, Match]]:
        """Classify a batch; returns ``(index, match)`` for the lines that matched, in order.

        Same answers as :meth:`classify` on each line. The trigger searches run over the joined
        batch (one regex pass over a translated copy, plus one literal pass per common trigger);
        only the lines they hit are classified one by one.
        """
        batch = lines if isinstance(lines, list) else list(lines)
        if not batch:
            return []
        joined = _NL + _NL.join(batch)
        if self._always or joined.count(_NL) != len(batch):
            # A user regex must see every line; a line holding "\n" would break the index mapping.
            return [(i, m) for i, line in enumerate(batch) if (m := self.classify(line)) is not None]
        return self._scan_joined(batch, joined)

    def _scan_joined(self, batch: list[str], joined: str) -> list[tuple[int, Match]]:
        """The matches of ``batch`` (lines without "\n"), ``joined`` = "\n" + "\n".join(batch):
        the engine behind both :meth:`scan` and :meth:`classify`."""
        hits: dict[int, list[tuple[str, ...]]] = {}
        get = hits.get
        data = _encode(joined).translate(self._table)
        count = data.count
        tcand = self._tcand
        q = cnt = 0  # cnt = number of "\n" in data[:q]; a match never holds one
        for m in self._prefilter.finditer(data):
            p = m.start()
            cnt += count(b"\n", q, p)
            q = p
            found = get(cnt - 1)
            if found is None:
                hits[cnt - 1] = [tcand[m.group(1)]]
            else:
                found.append(tcand[m.group(1)])
        for t, rx in zip(self._common, self._common_res, strict=True):
            ks = self._keys_of[t]
            for i in _lines_hit(rx, joined):
                found = get(i)
                if found is None:
                    hits[i] = [ks]
                else:
                    found.append(ks)
        out: list[tuple[int, Match]] = []
        for i in sorted(hits):
            line = batch[i]
            text = _NL + line
            keys = frozenset([k for ks in hits[i] for k in ks if k in text])
            if keys:
                match = self._match(line, self._candidates_of(keys))
                if match is not None:
                    out.append((i, match))
        return out


def _encode(text: str) -> bytes:
    """UTF-8 bytes of any str (lone surrogates included): one byte per ASCII character, and a
    newline byte exactly where the text has one, so newline counts map bytes to lines."""
    return text.encode("utf-8", "surrogatepass")


def _lines_hit(rx: re.Pattern[str], joined: str) -> list[int]:
    """Indices of the lines of ``joined`` ("\n" + lines joined by "\n") in which ``rx`` matches.

    ``rx`` matches one-line literals that may begin with the line's leading "\n", so the last
    character of a match always lies inside the line it belongs to. Each line is listed once.
    """
    out: list[int] = []
    count = joined.count
    q = cnt = 0  # cnt = number of "\n" in joined[:q]
    last = -1
    for m in rx.finditer(joined):
        p = m.end() - 1
        cnt += count(_NL, q, p)
        q = p
        if cnt != last:
            out.append(cnt - 1)
            last = cnt
    return out
