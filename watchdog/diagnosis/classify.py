"""Classify log lines against the knowledge base (``signatures.toml``): an ordered rule table.

Pure: no I/O. :func:`neuron_watch.diagnosis.kb.default_knowledge_base` loads the packaged table.

    >>> kb = KnowledgeBase.from_toml(text)
    >>> m = kb.classify("CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying")
    >>> m.signature.effect
    <Effect.COMM_WAIT: 'comm_wait'>

How it stays fast (a training log is mostly lines no rule cares about, printed by a few log
statements over and over with other numbers): every signature names literal *needles* that any line
it matches must contain. A batch is searched once for all needles, not line by line
(:mod:`neuron_watch.diagnosis.keyfinder`): one regular expression over the batch's bytes, translated
so that each *marker* character (see ``_MARKERS`` there) is one byte, finds every needle that has a
trigger (the needle from one of its markers on); the few needles without one get a literal search
each. When the batch repeats itself, that search runs over its distinct *line templates* (each line
without its digits): a needle without its digits is in the template of any line holding it, so the
lines of a template without any needle hold none and cost a dictionary look-up. Only the lines the
search hits get the ordered rule table, and only the rules whose needles occur in that line.
:meth:`KnowledgeBase.classify` (one line), :meth:`KnowledgeBase.scan` (a batch) and the plain
reference :meth:`KnowledgeBase.classify_plain` give the same answers.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count

from neuron_watch.diagnosis.failureforms import FORM_RULES, NEEDLES, SIGNATURE_IDS, FormKind, read_line, read_quiet
from neuron_watch.diagnosis.keyfinder import _DIGITS, _NL, _TEMPLATE_SAMPLE, _TEMPLATES_FROM, _ascii, _KeyFinder
from neuron_watch.diagnosis.signature import (
    CATCH_ALL_ID,
    STEP_RULES,
    Effect,
    Match,
    Signature,
    counted_step,
    form_signatures,
    int_or_none,
    signature_from_table,
)
from neuron_watch.errors import ConfigError
from neuron_watch.events import Action, Label, LogLine

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: the rule's types come from :mod:`neuron_watch.diagnosis.signature`; the table's users read them here,
#: beside the knowledge base that matches by them
__all__ = [
    "BATCH_RULES", "COMPILER_DOTS", "GOING_ON_SIGNATURES", "PHASE_RUNNING", "UNRAISABLE_SIGNATURE", "ClassifiedBatch",
    "Effect", "KnowledgeBase", "Match", "Signature", "classify_batch", "coalesce_progress", "compact_matches",
    "kb_fingerprint", "sig_is_compiler_line",
]

#: What :meth:`KnowledgeBase._match` needs of a rule without attribute look-ups: the signature, its
#: ``requires``, whether it is a progress rule, and per pattern (search, has step, has loss, count
#: groups); the form reader's entry has no patterns (see :meth:`KnowledgeBase._match`).
_Search = tuple[Callable[[str], "re.Match[str] | None"], bool, bool, "tuple[bool, bool, bool] | None"]
_Plan = tuple["Signature", tuple[str, ...], bool, "tuple[_Search, ...]"]


#: a word a non-finite number prints as: a progress line without one has no broken metric to read
_NOT_FINITE = re.compile(r"(?<![A-Za-z])(?:nan|NaN|NAN|inf|Inf|INF)(?![A-Za-z])")


def _metric_form(line: str) -> bool:
    """The form reader sees a metric that is not finite in ``line`` (:class:`FormKind` ``METRIC``)."""
    form = read_line(line)
    return form is not None and form.kind is FormKind.METRIC


def _plan(s: Signature) -> _Plan:
    return (
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


class KnowledgeBase:
    """An ordered table of :class:`Signature`; the first signature that matches a line wins.

    After the table, the failure-form reader (:mod:`neuron_watch.diagnosis.failureforms`) reads a line no
    rule matched: a line in a form of failure no rule knows is reported under one of
    :attr:`form_signatures` (in :attr:`by_id`, not in :attr:`signatures`). ``forms=False``: the
    table alone."""

    def __init__(self, signatures: Sequence[Signature], forms: bool = True) -> None:
        ids = [s.id for s in signatures]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"duplicate signature ids: {', '.join(dupes)}")
        self.signatures: tuple[Signature, ...] = tuple(signatures)
        self.form_signatures: tuple[Signature, ...] = form_signatures() if forms else ()
        clash = sorted(set(ids) & {s.id for s in self.form_signatures})
        if clash:
            raise ConfigError(f"signature ids reserved for the failure-form reader: {', '.join(clash)}",
                              "rename the table's entries")
        self.by_id = {s.id: s for s in (*self.signatures, *self.form_signatures)}
        self._form_matches = {kind: Match(self.by_id[sid]) for kind, sid in SIGNATURE_IDS.items()
                              if sid in self.by_id}
        # each rule's keys, once (Signature.keys builds them on every read; the plain reference
        # reads every rule's for every line)
        self._keys: tuple[tuple[str, ...], ...] = tuple(s.keys for s in self.signatures)
        self._always: tuple[int, ...] = tuple(i for i, ks in enumerate(self._keys) if not ks)
        self._plain_keys = tuple({*(k for ks in self._keys for k in ks), *(NEEDLES if forms else ())})
        by_key: dict[str, list[int]] = {}
        for i, s in enumerate(self.signatures):
            for k in s.keys:
                by_key.setdefault(k, []).append(i)
        # The reader is one more candidate, after every rule of the table: a line holding one of
        # its needles (and matching no rule) is read by it.
        self._forms_index = len(self.signatures)
        # the table's rule for an error line no rule explains: a form may say more of that line
        self._catch_all = next((i for i, s in enumerate(self.signatures) if s.id == CATCH_ALL_ID), -1) if forms else -1
        for k in NEEDLES if forms else ():
            at = by_key.setdefault(k, [])
            if self._forms_index not in at:
                at.append(self._forms_index)
        self._by_key = {k: tuple(v) for k, v in by_key.items()}
        exact: dict[bytes, set[str]] = {}
        for k in by_key:
            exact.setdefault(_ascii(k), set()).add(k)
        self._finder = _KeyFinder({b: tuple(sorted(ks)) for b, ks in exact.items()})
        # The same keys with digits left out, to search line templates (see scan). A key that is
        # nothing but digits would be in every template: then templates are not searched.
        templ: dict[bytes, set[str]] = {}
        for b, ks in exact.items():
            templ.setdefault(b.translate(None, _DIGITS), set()).update(ks)
        self._template_finder = (
            _KeyFinder({t: tuple(sorted(ks)) for t, ks in templ.items()}) if not ({b"", b"\n"} & set(templ)) else None
        )
        self._cand_cache: dict[frozenset[str], tuple[int, ...]] = {}
        self._bare = tuple(Match(s) for s in self.signatures)  # matches are immutable: one per rule
        # Per rule, what _match needs without attribute look-ups (it runs on every progress line).
        self._plans: tuple[_Plan, ...] = (
            *(_plan(s) for s in self.signatures),
            *((s, (), False, ()) for s in self.form_signatures[:1]),  # the form reader (see _match)
        )

    @classmethod
    def from_toml(cls, text: str, progress_regex: str | None = None) -> KnowledgeBase:
        """Build from the TOML text of a signature table.

        ``progress_regex`` (the user's ``--progress-regex``) is put first as a progress rule; its named
        groups are read as :data:`~neuron_watch.diagnosis.signature.STEP_GROUPS` says (``step``, ``loss``,
        ``n``/``epoch``/``total``).

        Raises:
            ConfigError: the table or the regex is malformed; the message names the entry.
        """
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"signature table is not valid TOML: {exc}") from exc
        entries = data.get("signature", [])
        sigs = [signature_from_table(e, f"signature #{i} ({e.get('id', '?')})") for i, e in enumerate(entries)]
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

    def _match(self, line: str, candidates: Sequence[int]) -> Match | None:
        """The first of ``candidates`` (rule indices in table order) that matches ``line``; the form
        reader's index, always last, is tried after them (its plan has no patterns)."""
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
                if not progress:
                    if i == self._catch_all:
                        return self._refined(line, self._bare[i])
                    return self._bare[i]
                # the float and int_or_none, inlined: this runs on every progress line
                loss = None
                if has_loss and (text := m.group("loss")) is not None:
                    try:
                        loss = float(text)
                    except ValueError:
                        pass
                    else:
                        if not math.isfinite(loss):
                            continue  # the numerical rule ranks earlier; a custom table may not have one
                        if candidates[-1] == self._forms_index and (">" in line or "\u2192" in line) \
                                and _NOT_FINITE.search(line) and _metric_form(line):
                            # the rule read the finite value before a metric's transition and the form reader
                            # the value after it, which is not finite ("loss: 8.3066 -> nan": heldout.round37c);
                            # its arrow (->, =>, \u2192) asked first: a search of every progress line cost a fifth
                            # of bench_classify's typical rate
                            continue
                elif candidates[-1] == self._forms_index and (has_loss or _NOT_FINITE.search(line)) and \
                        _metric_form(line):
                    # a progress line whose loss the rule reads is absent, and the form reader sees broken
                    # numbers in it: its program leaves out a loss that is not finite (Megatron's record); or
                    # a rule that reads no loss (a plain step) on a line whose loss, under whatever name its
                    # program gives it, is not finite (OpenNMT-py's "Step 5650/50000; ... ppl:   nan;")
                    continue
                text = m.group("step") if has_step else None
                step = None if text is None else int(text) if text.isdecimal() else int_or_none(text)
                if step is None and counts is not None:
                    alive, step = counted_step(m, *counts)
                    if not alive:
                        continue  # a bar at 0 reports nothing done
                return Match(sig, step, loss)
        if candidates and candidates[-1] == self._forms_index:
            form = read_line(line)
            return None if form is None else self._form_matches[form.kind]
        return None

    def _refined(self, line: str, unrecognised: Match) -> Match | None:
        """The table's last rule says only "an error no rule explains": a crash or a non-finite metric
        the form reader sees in the line says more (the process is dying, the numbers are broken). A
        record its program prints at ERROR whatever it reports (read_quiet: TensorRT's builder skipping a
        tactic whose check threw, round issue23-heldout-34 part G) is no error at all."""
        if read_quiet(line):
            return None
        form = read_line(line)
        if form is not None and form.kind in (FormKind.CRASH, FormKind.METRIC):
            return self._form_matches[form.kind]
        return unrecognised

    def classify(self, line: str) -> Match | None:
        """The first signature matching ``line``, or None (the same answer :meth:`scan` gives)."""
        text = _NL + line
        return self._match_found(line, text, self._finder.in_line(text))

    def classifier_of(self, ids: frozenset[str]) -> Callable[[str], Match | None]:
        """One line's match when it is of the signatures ``ids``, else None: :meth:`classify`'s answer
        kept only when in ``ids``, asked only of the lines that hold a needle of one of them (the form
        reader's needles too when one of its signatures is in ``ids``; every line when one of them has no
        needle). A line such a signature matches holds one of its needles, so the answer is the same as
        ``classify`` filtered; most lines cost one search of those needles (~1-2 us here)."""
        keys = {k for s in self.signatures if s.id in ids for k in s.keys}
        if any(not s.keys for s in self.signatures if s.id in ids):
            keys = set()  # a rule without a needle may match any line: no gate
        elif any(s.id in ids for s in self.form_signatures):
            keys.update(NEEDLES)
        if not keys:
            def of_ids_ungated(line: str) -> Match | None:
                m = self.classify(line)
                return m if m is not None and m.signature.id in ids else None
            return of_ids_ungated
        exact: dict[bytes, set[str]] = {}
        for k in keys:
            exact.setdefault(_ascii(k), set()).add(k)
        finder = _KeyFinder({b: tuple(sorted(ks)) for b, ks in exact.items()})

        def of_ids(line: str) -> Match | None:
            text = _NL + line
            if not any(k in text for ks in finder.in_line(text) for k in ks):
                return None
            m = self.classify(line)
            return m if m is not None and m.signature.id in ids else None
        return of_ids

    def scan(self, lines: Iterable[str]) -> list[tuple[int, Match]]:
        """Classify a batch; returns ``(index, match)`` for the lines that matched, in order.

        Same answers as :meth:`classify` and :meth:`classify_plain` on each line. Only the lines
        in which the batch searches found a key are classified one by one (every line, if a rule
        has no needle). When lines repeat a few log statements with other numbers (the usual
        log), the searches run once per *line template* (the line without its digits): a key in a
        line is, without its digits, in the line's template, so a template without any is a line
        without any.
        """
        batch = lines if isinstance(lines, list) else list(lines)
        return self._scan(batch) if batch else []

    def classify_plain(self, line: str) -> Match | None:
        """The reference answer, without any batch search: the first rule in table order whose
        needle ``"\\n" + line`` holds (anchored needles carry the newline) and whose patterns match.
        Slow (every key is looked for); tests hold :meth:`scan` and :meth:`classify` to it."""
        text = _NL + line
        # each distinct key looked for once (rules share keys, and the reader's needles are many)
        held = {k for k in self._plain_keys if k in text}
        rules = [i for i, ks in enumerate(self._keys) if not ks or not held.isdisjoint(ks)]
        if self.form_signatures and not held.isdisjoint(NEEDLES):
            rules.append(self._forms_index)
        return self._match(line, rules)

    def _scan(self, batch: list[str]) -> list[tuple[int, Match]]:
        """:meth:`scan` of a non-empty list of str."""
        data = _ascii(_NL + _NL.join(batch))
        hits = self._template_hits(batch, data)
        if hits is None:
            hits = self._finder.hits(data, map(len, batch))
        out: list[tuple[int, Match]] = []
        match_found = self._match_found
        for i in range(len(batch)) if self._always else sorted(hits):
            line = batch[i]
            m = match_found(line, _NL + line, hits.get(i, ()))
            if m is not None:
                out.append((i, m))
        return out

    def _match_found(self, line: str, text: str, found: Sequence[tuple[str, ...]]) -> Match | None:
        """The match of ``line`` (``text`` = "\\n" + line) given what the searches ``found`` in it:
        the keys it may hold; those it holds select the rules tried, in table order (with the rules
        without needles)."""
        if self._always:
            held = [k for ks in found for k in ks if k in text]
        elif len(found) == 1 and len(found[0]) == 1:  # the commonest case: one candidate needle
            key = found[0][0]
            return self._match(line, self._by_key[key]) if key in text else None
        else:
            held = [k for ks in found for k in ks if k in text]
            if len(held) == 1:  # one needle held: its rules
                return self._match(line, self._by_key[held[0]])
        keys = frozenset(held)
        if not keys and not self._always:
            return None
        return self._match(line, self._candidates_of(keys))

    def _template_hits(self, batch: list[str], data: bytes) -> dict[int, list[tuple[str, ...]]] | None:
        """The hits of :meth:`_scan` found through line templates, or None when the batch does not
        repeat itself enough for that to pay (then every line is searched).

        ``data`` is the batch as :meth:`_scan` joined it. A template holds every key of its lines
        with the key's digits left out, so the templates without such a key are lines without a
        key; the others' lines get the candidate keys of their template (checked on the line)."""
        finder = self._template_finder
        if finder is None or len(batch) < _TEMPLATES_FROM:
            return None
        if len(data) > _TEMPLATE_SAMPLE:
            sample = data[:_TEMPLATE_SAMPLE].translate(None, _DIGITS).split(b"\n")
            if 2 * len(set(sample)) > len(sample):
                return None  # its first lines do not repeat: the whole batch is not split up
        templates = data.translate(None, _DIGITS).split(b"\n")  # [b"", line 0, line 1, ...]
        if len(templates) != len(batch) + 1:
            return None  # a line holds "\n"
        distinct = list(dict.fromkeys(templates))
        if 2 * len(distinct) > len(batch):
            return None
        found = finder.hits(b"\n" + b"\n".join(distinct), map(len, distinct))
        hot = {distinct[i]: ks for i, ks in found.items()}
        return {i: hot[templates[i + 1]] for i in compress(count(-1), map(hot.__contains__, templates))}


# ---- batches: what a node sends the judge ------------------------------------------------

#: The bare progress dots (signatures.toml). A lone ``.`` is what a keep-alive thread prints, and
#: what a stretch of binary output decodes to; so a dot is a compile's heartbeat only beside a compile
#: that cannot be noise: opened by the compiler wrapper's command line, the compiler's own pass lines,
#: or a live compiler process of the rank (:meth:`~neuron_watch.diagnosis.judge.RankState.compile_opened`).
COMPILER_DOTS = "neuron.compile.dots"
#: Lines that show a rank's setup going on after an error it printed (NCCL connecting its channels
#: and rings, or picking another network, after a failed probe: nccl src/init.cc, transport.cc;
#: NVIDIA/nccl#229's "include/net.h:24 -> 2" followed by every ring built). Like progress, they
#: withdraw an error line no rule explains and a vague (generic) failure the rank went on from; they
#: are not progress (a hang is still measured from the last step).
GOING_ON_SIGNATURES = frozenset({"gpu.nccl.setup_progress"})
#: Python's "Exception ignored in: ..." (signatures.toml): the traceback header after it and that
#: traceback's exception line are the ignored exception's, not the rank's failure
UNRAISABLE_SIGNATURE = "python.exception_ignored"
#: A compile the program announced in its own words (a TensorRT engine build, an XLA module: the form
#: signature of failureforms.py): a compiler line that opens a compile the judge waits on
#: (``RankState.phase_running``), which no other compiler line does.
PHASE_RUNNING = SIGNATURE_IDS[FormKind.COMPILE_RUNNING]

#: Bumped whenever :func:`compact_matches`, :func:`coalesce_progress` or :meth:`Judge._apply` change
#: what a match does: it is part of :func:`kb_fingerprint`, so a sender with other rules is never
#: trusted to compact. (5: an announced compile followed by another compiler line is kept.)
BATCH_RULES = 5


def kb_fingerprint(kb: KnowledgeBase) -> int:
    """A 63-bit fingerprint of ``kb`` (signature ids, order, effects, patterns), of the batch rules
    and of the step rules (:data:`~neuron_watch.diagnosis.signature.STEP_RULES`).

    Two processes with equal fingerprints classify every line alike, so one may classify for the
    other (:meth:`Judge.observe_batch`). Never 0 (0 on the wire means "not classified").
    """
    h = hashlib.blake2b(digest_size=8)
    h.update(f"rules {BATCH_RULES} steps {STEP_RULES} forms {FORM_RULES}\n".encode())
    for s in (*kb.signatures, *kb.form_signatures):
        h.update(f"{s.id}\t{s.effect.value}\t{s.category.value}\t{s.action.value}\t{int(s.generic)}\t".encode())
        h.update("\t".join(p.pattern for p in s.patterns).encode())
        h.update("\t".join(s.keys).encode() + b"\n")
    return (int.from_bytes(h.digest(), "big") >> 1) or 1


_SUPERSEDED_BY_SAME = frozenset({Effect.COMM_WAIT, Effect.COMPILE_BEAT})


def sig_is_compiler_line(m: Match) -> bool:
    """A compile beat in the compiler's own words (any but the bare dots)."""
    return m.signature.effect is Effect.COMPILE_BEAT and m.signature.id != COMPILER_DOTS


def compact_matches(matches: Sequence[tuple[Hashable, Match]]) -> list[int]:
    """Indices of the matches :meth:`Judge.observe_batch` must see; the rest change nothing.

    ``matches``: ``(rank, match)`` in line order for one batch. Training logs are mostly
    progress lines, so a batch can match almost every line; most of those matches are
    overwritten before a verdict can look. A match is left out only when applying it provably
    makes no difference to the judge's state after the whole batch (see :meth:`Judge._apply`):

    * ``benign`` matches (but :data:`GOING_ON_SIGNATURES`') and ``info`` matches of a healthy
      category (no effect at all);
    * an ``info`` match whose signature appeared earlier in the batch (a hint is kept once);
    * a progress match with a step that does not raise the batch's running maximum step (so
      it cannot raise the job's), when the same rank's next match is also a progress match
      with a step at least as high (which sets the same fields again, later, and ends a
      "training finished" whenever this one would: it is later, and its step is no lower);
    * a ``comm_wait`` / ``compile_beat`` match when the same rank's next match has the same
      effect (only the latest time and line are kept by the judge), except a compiler's own line
      followed by dots (it opens the compile the dots beat for) and an announced compile
      (:data:`PHASE_RUNNING`) followed by anything but another announcement (it opens a compile
      the judge waits on; a compiler's pass line or dots after it do not).
    """
    n = len(matches)
    keep = [True] * n
    top: int | None = None
    raises = [False] * n
    seen_info: set[str] = set()
    for i, (_rank, m) in enumerate(matches):
        sig = m.signature
        effect = sig.effect
        if effect is Effect.PROGRESS:
            if m.step is not None and (top is None or m.step > top):
                top = m.step
                raises[i] = True
        elif effect is Effect.BENIGN:
            keep[i] = sig.id in GOING_ON_SIGNATURES or sig.id == UNRAISABLE_SIGNATURE
        elif effect is Effect.INFO:
            if sig.category is Label.HEALTHY or sig.id in seen_info:
                keep[i] = False
            seen_info.add(sig.id)
    following: dict[Hashable, Match] = {}
    for i in range(n - 1, -1, -1):
        rank, m = matches[i]
        nxt = following.get(rank)
        following[rank] = m
        if nxt is None or not keep[i]:
            continue
        effect = m.signature.effect
        if effect is Effect.PROGRESS:
            if (m.step is not None and not raises[i] and nxt.signature.effect is Effect.PROGRESS
                    and nxt.step is not None and nxt.step >= m.step):
                keep[i] = False
        elif effect in _SUPERSEDED_BY_SAME and nxt.signature.effect is effect:
            # a compiler's own line opens a compile for the dots after it (RankState.compile_opened);
            # an announcement opens one that only a later announcement sets again (phase_running)
            keep[i] = (sig_is_compiler_line(m) and not sig_is_compiler_line(nxt)) or (
                m.signature.id == PHASE_RUNNING and nxt.signature.id != PHASE_RUNNING)
    return [i for i in range(n) if keep[i]]


def coalesce_progress(matches: Sequence[tuple[Hashable, Match]], lines_of: Mapping[Hashable, int]) -> list[int]:
    """Indices of the matches that may travel as a rank's progress row (see :meth:`Judge.observe_batch`).

    ``matches``: ``(rank, match)`` in line order for one batch; ``lines_of``: how many lines each
    rank has in the batch. A rank qualifies when every one of its lines matched a progress
    signature that read a step: its last match is then all the judge needs of its lines beyond
    the ones :func:`compact_matches` keeps for raising the batch's step, so it goes as a row --
    unless it raises the batch's running maximum step itself (a new job-level step is timed by the
    first line that shows it, in line order with every rank's: it stays a match). Such a row
    touches nothing another rank's match reads (its rank's state, and maxima over all ranks), so it
    is applied after the batch's matches. The caller sends the row with the rank's newest line time:
    it must be the time of this last match's line.
    """
    counts: dict[Hashable, int] = {}
    last: dict[Hashable, int] = {}
    top: int | None = None
    raises: set[int] = set()
    for i, (rank, m) in enumerate(matches):
        if m.signature.effect is Effect.PROGRESS and m.step is not None:
            counts[rank] = counts.get(rank, 0) + 1
            if top is None or m.step > top:
                top = m.step
                raises.add(i)
        else:
            counts[rank] = -1 << 30  # a line of another kind: this rank's batch is not plain progress
        last[rank] = i
    return sorted(i for rank, i in last.items() if counts[rank] == lines_of.get(rank) and i not in raises)


@dataclass(frozen=True, slots=True)
class ClassifiedBatch:
    """One batch of a node's lines, classified for the judge (see :func:`classify_batch`).

    ``matches``: the matched lines the judge must see, in read order, each with its match
    (:attr:`LogLine.signature`, ``step``, ``loss``); ``progress``: for each rank that printed only
    steps, its latest step line, with its match (:func:`coalesce_progress`); ``progress_lines``:
    how many lines of the batch read a step.
    """

    matches: list[LogLine]
    progress: list[LogLine]
    progress_lines: int


def classify_batch(kb: KnowledgeBase, lines: Sequence[LogLine]) -> ClassifiedBatch:
    """Classify one batch of one node's ``lines`` (in read order) with ``kb``, the way the judge takes
    it (:meth:`~neuron_watch.diagnosis.judge.Judge.observe_batch`): the matches it must see
    (:func:`compact_matches`) and the ranks that printed only steps as their latest step
    (:func:`coalesce_progress`: only when that step is the rank's newest line, as its row is timed
    by the rank's newest line)."""
    found = kb.scan([ln.text for ln in lines])
    by_rank = [(lines[i].key, m) for i, m in found]
    counts: dict[Hashable, int] = {}
    newest: dict[Hashable, float] = {}
    for ln in lines:
        key = ln.key
        counts[key] = counts.get(key, 0) + 1
        if ln.mono > newest.get(key, -math.inf):
            newest[key] = ln.mono
    rows = {j for j in coalesce_progress(by_rank, counts) if lines[found[j][0]].mono == newest[by_rank[j][0]]}
    matches: list[LogLine] = []
    progress: list[LogLine] = []
    for j in compact_matches(by_rank):
        i, m = found[j]
        ln = lines[i]
        line = LogLine(ln.key, ln.text, ln.mono, ln.wall, ln.source, ln.lineno, m.signature.id, m.step, m.loss)
        (progress if j in rows and m.step is not None else matches).append(line)  # (coalesce takes only steps)
    return ClassifiedBatch(matches, progress, sum(1 for _i, m in found if m.step is not None))
