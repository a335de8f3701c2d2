"""Find, in one pass over a batch's bytes, which of the knowledge base's needles each line holds.

Pure: no I/O. Used by :class:`neuron_watch.diagnosis.classify.KnowledgeBase` (its module docstring
says how the search stays fast: one regular expression over the batch's bytes for every needle with
a trigger, a literal search each for the rest, over the batch's distinct line templates when it
repeats itself).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable
from itertools import accumulate, repeat
from operator import add
from typing import Any

#: A line-start anchored needle is searched as "\n" + needle in text that starts with "\n".
_NL = "\n"
#: The byte every trigger-starting character becomes in the translated batch, the byte each
#: character of the second set becomes (see :class:`_KeyFinder`), and what a real one of those
#: becomes, so it never poses as a marker.
_MARK = b"\x00"
_MARK2 = b"\x02"
_MARK_ESC = b"\x01"

def _trie_regex(keys: Iterable[str], leaves: dict[str, str] | None = None) -> str:
    """An alternation of ``keys`` factored into a trie (one branch per first character).

    ``leaves`` may give a key a condition (a regex, e.g. a lookbehind) checked where the key ends:
    the key matches only if it holds; a longer key through the same node is tried first."""
    trie: dict[str, Any] = {}
    for key in keys:
        node = trie
        for ch in key:
            node = node.setdefault(ch, {})
        node[""] = {}
    cond = leaves or {}

    def emit(node: dict[str, Any], path: str) -> str:
        # a run of nodes with one child and no key ending is the run's characters (most of a
        # trie of rests: walked here, not one call a character)
        run = []
        while len(node) == 1 and "" not in node:
            ((ch, node),) = node.items()
            run.append(ch)
        head = "".join(run)
        path += head
        head = re.escape(head)
        alts = [re.escape(ch) + emit(child, path + ch) for ch, child in sorted(node.items()) if ch]
        if "" not in node:
            return head + (alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")")
        leaf = cond.get(path, "")
        if not alts:
            return head + leaf
        body = alts[0] if len(alts) == 1 else "|".join(alts)
        if leaf:
            return head + "(?:" + body + "|" + leaf + ")"
        return head + "(?:" + body + ")?"  # a key ends here; longer keys go on

    return emit(trie, "")


#: Characters that start a trigger. In the translated batch each becomes one marker byte, so the
#: regex engine jumps from marker to marker and tries the trie only there; each try costs tens of
#: ns inside the engine, so the set is what needles need minus what chatter is full of. Chosen
#: greedily on runtime/NCCL/Python chatter and progress lines: "I", "O", "R", "L", "P", "D", "W",
#: "|", "=", "'", ")", "]", "k", "y", "q", "z" went (INFO, NRT, NCCL, TDRV, WARN, compiler frames,
#: seq/s, size); about seven tries a line remain on the runtime's chatter, five on real logs. The set
#: is about log text, not about any rule: a needle without a usable marker is searched literally.
_MARKERS = "ACEFGHKMNQSTUXYZ[(!\"#$&*;@^`~jvwx"
#: A trigger's rest (after its marker) must be worth this much (a plain character 1, a marker 1/8)
#: unless a lookbehind checks at least :data:`_CHECKED_BEFORE` characters of the key before it: a
#: short rest with nothing checked before it would send chatter lines to be looked at.
_REST_WORTH = 2.5
_CHECKED_BEFORE = 3
#: What a line template leaves out (see :meth:`KnowledgeBase.scan`): the characters that change
#: from line to line of one log statement (steps, losses, pids, times).
_DIGITS = b"0123456789"
#: Batches shorter than this are searched line by line, not by template; a longer batch is split
#: into templates only if its first this many bytes repeat templates.
_TEMPLATES_FROM = 8
_TEMPLATE_SAMPLE = 8192


def _trigger_start(key: bytes, markers: frozenset[int]) -> int | None:
    """Where the trigger of ``key`` (ASCII bytes) starts: a marker that ends a run of ``markers``
    ("NCCL error" -> the second "C": its rest "L error" starts with a non-marker, so a try inside
    a run of capitals fails at once), the one with the most worthwhile rest. None: no such
    marker.

    Every character of a rest is worth something, so the further left a trigger starts the more its
    rest is worth: the first marker that qualifies is the best one (the table's build tries this for
    every literal and every candidate marker set, so it stops there)."""
    for i in range(len(key) - 1):
        if key[i] in markers and key[i + 1] not in markers:
            if i >= _CHECKED_BEFORE:
                return i
            rest = key[i + 1 :]
            plain = sum(c not in markers for c in rest)
            if plain + (len(rest) - plain) / 8 >= _REST_WORTH:
                return i
    return None


_MARKER_BYTES = frozenset(_MARKERS.encode("ascii"))
#: How often each printable character occurs a line in logs (measured over the 19,292 lines of
#: tests/data/real-logs; " " occurs about 16 times). A character of the second marker set (see
#: :class:`_KeyFinder`) costs a try wherever it occurs; a literal search of the batch costs about one
#: try a line (:data:`_SEARCH_TRIES`; over the benchmark's unique batches: 32-57 ns a try, a literal
#: search 27-53 ns a line). So the second set is chosen by what each character costs against the
#: literal searches it spares (:func:`_second_set`), and the rarest character a short literal holds
#: is where its search starts (:func:`_anchor`).
_PER_LINE = {
    "$": 0.01, "&": 0.01, "Q": 0.01, "J": 0.01, "!": 0.02, ";": 0.02, "Z": 0.02, "Y": 0.02, "~": 0.02, "@": 0.03,
    "X": 0.03, "}": 0.03, "#": 0.03, "{": 0.03, "`": 0.04, "K": 0.04, "%": 0.05, "+": 0.05, "\\": 0.06, "V": 0.06,
    "H": 0.06, "q": 0.07, "j": 0.07, "<": 0.08, "z": 0.10, ">": 0.12, "B": 0.12, "W": 0.13, "U": 0.17, "|": 0.17,
    "M": 0.18, "G": 0.19, "D": 0.19, "^": 0.22, "S": 0.23, "'": 0.25, "P": 0.25, "A": 0.28, "L": 0.29, "O": 0.31,
    "F": 0.32, '"': 0.32, "*": 0.35, "I": 0.36, "?": 0.36, "T": 0.36, "x": 0.37, "w": 0.38, ")": 0.39, "E": 0.39,
    "(": 0.41, "R": 0.41, "C": 0.46, "N": 0.47, "v": 0.47, "[": 0.49, "]": 0.53, "=": 0.58, "k": 0.58, "y": 0.71,
    "9": 0.72, "8": 0.75, "7": 0.75, "b": 0.77, "6": 0.83, ",": 0.85, "5": 0.89, "f": 0.91, "4": 0.96, "g": 0.99,
    "h": 1.06, "3": 1.09, "_": 1.27, "m": 1.39, "/": 1.48, "u": 1.50, "2": 1.55, ".": 1.66, "-": 1.66, "1": 1.81,
    "p": 1.81, "d": 1.83, ":": 1.94, "c": 2.43, "l": 2.48, "0": 2.56, "s": 2.98, "i": 3.34, "n": 3.43, "a": 3.44,
    "o": 3.65, "r": 3.68, "t": 3.72, "e": 5.28,
}
_SEARCH_TRIES = 1.0
#: The characters a short literal's search may start from, rarest first (see :func:`_anchor`).
_RARE = "".join(c for c, n in sorted(_PER_LINE.items(), key=lambda cn: cn[1]) if n < 0.7)
#: Per character byte, its cost as a second-set marker (:data:`_PER_LINE`).
_MARKER_COST = {ord(c): n for c, n in _PER_LINE.items() if ord(c) not in _MARKER_BYTES}


def _second_set(literals: Iterable[bytes]) -> tuple[set[int], dict[bytes, int]]:
    """The second marker set for ``literals`` (the ones the first set gives no trigger), and where
    the literals it gives a trigger are searched from (literal -> position, see
    :func:`_trigger_start`); the others are searched alone.

    A character joins the set when the literal searches it spares outweigh its tries (greedily, the
    one that gains most first), and leaves it when the literals only it starts are worth less than
    its tries: so the set, and what it costs a line, is bounded by what characters cost, not by how
    many literals there are (a new needle holding a character of the set costs nothing more than its
    rest in the trie)."""
    left = sorted(set(literals))
    chosen: set[int] = set()
    starts: dict[bytes, int] = {}
    holders: dict[int, list[bytes]] = {}  # character -> the literals holding it
    for lit in left:
        for c in set(lit):
            if c in _MARKER_COST:
                holders.setdefault(c, []).append(lit)
    while True:
        best: tuple[float, int, dict[bytes, int]] = (0.0, 0, {})
        for c, lits in holders.items():
            if c in chosen:
                continue
            marks = frozenset(chosen | {c})
            got = {lit: at for lit in lits if lit not in starts and (at := _trigger_start(lit, marks)) is not None}
            gain = len(got) * _SEARCH_TRIES - _MARKER_COST[c]
            if gain > best[0]:
                best = (gain, c, got)
        if not best[2]:
            break
        chosen.add(best[1])
        starts.update(best[2])
    # A character added early may have been made useless by later ones (it starts only literals a
    # commoner one starts too), and a later one may take a literal's trigger away from an earlier
    # one: the set's own starts decide, dearest character first.
    starts = _starts_of(left, chosen)
    for c in sorted(chosen, key=lambda c: (-_MARKER_COST[c], c)):
        without = _starts_of(left, chosen - {c})
        if (len(starts) - len(without)) * _SEARCH_TRIES <= _MARKER_COST[c]:
            chosen.discard(c)
            starts = without
    return chosen, starts


def _starts_of(literals: Iterable[bytes], marks: set[int]) -> dict[bytes, int]:
    """Where the literals the marker set ``marks`` gives a trigger start theirs."""
    frozen = frozenset(marks)
    return {lit: at for lit in literals if (at := _trigger_start(lit, frozen)) is not None}


#: Literals shorter than this are searched in a batch by a regex of the literal, longer ones by
#: ``bytes.find`` (see :class:`_KeyFinder`; measured over the benchmark's unique batches).
_SHORT_LITERAL = 10
#: A short literal whose rarest character occurs less than this often a line (:data:`_PER_LINE`) is
#: searched by ``bytes.find`` of that one byte (memchr: about 1 ns a line of the benchmark's unique
#: batches, against 25 for the regex engine's scan), each occurrence then checked (about 125 ns).
_FIND_BYTE_BELOW = 0.2


def _anchor(literal: bytes) -> int:
    """Where the search of a short literal starts: at its rarest character (:data:`_RARE`), else
    at its first."""
    return next((i for c in _RARE.encode("ascii") for i in (literal.find(c),) if i >= 0), 0)


def _after_anchor(literal: bytes, at: int) -> bytes:
    """The regex of ``literal`` after its byte ``at``, the part before that byte checked by a lookbehind."""
    return re.escape(literal[at + 1 :]) + (b"(?<=" + re.escape(literal) + b")" if at else b"")


def _from_anchor(literal: bytes, at: int) -> bytes:
    """A regex of ``literal`` that starts at its byte ``at`` (see :func:`_after_anchor`)."""
    return re.escape(literal[at : at + 1]) + _after_anchor(literal, at)


def _literal_find(literal: bytes) -> Callable[[bytes, int], int]:
    """``find(data, pos)``: where ``literal`` first occurs in ``data`` at or after ``pos`` (-1: nowhere),
    by a regex when it is short (see :data:`_SHORT_LITERAL`), else by ``bytes.find``.

    The regex starts at the literal's rarest character (:data:`_RARE`) and checks the part before
    it by a lookbehind: the engine's scan stops only where that character is (`` -> 2`` from its
    ``>``: 0.16 ms a batch, against 0.31 from its space). Where that character is rare enough
    (:data:`_FIND_BYTE_BELOW`), ``bytes.find`` of it alone is faster still (``%|``: 1 ns a line
    against 25)."""
    if len(literal) >= _SHORT_LITERAL:
        return lambda data, pos: data.find(literal, pos)
    at = _anchor(literal)
    if _PER_LINE.get(chr(literal[at]), 1.0) < _FIND_BYTE_BELOW:
        byte = literal[at : at + 1]

        def find_byte(data: bytes, pos: int) -> int:
            p = data.find(byte, pos + at)
            while p >= 0 and not data.startswith(literal, p - at):
                p = data.find(byte, p + 1)
            return -1 if p < 0 else p - at

        return find_byte
    search = re.compile(_from_anchor(literal, at)).search

    def find(data: bytes, pos: int) -> int:
        m = search(data, pos)
        while m is not None and m.start() - at < pos:  # the lookbehind sees before pos: begun too early
            m = search(data, m.start() + 1)
        return -1 if m is None else m.start() - at

    return find


#: A short literal sharing a pass with others (see :class:`_KeyFinder`): the literal, where its
#: search starts, its last byte's offset, and what finding it reports.
_Alt = tuple[bytes, int, int, tuple[str, ...]]
_BSearch = Callable[..., "re.Match[bytes] | None"]  # a compiled bytes regex's search


#: Literals searched alone that share a piece of a word this long or longer are searched as that
#: piece, one pass for them all (``error:``, ``errors.``, ``port error``: one search for ``error``).
_SHARED_PIECE = 5
_WORDS = re.compile(rb"[A-Za-z]{%d,}" % _SHARED_PIECE)


def _literal_searches(keys: Iterable[bytes]) -> dict[bytes, list[bytes]]:
    """The literals to search for ``keys`` (the ones without a trigger), each with the keys found
    through it: a key holding another key is found through it."""
    groups: dict[bytes, list[bytes]] = {}
    for k in sorted(set(keys), key=lambda k: (len(k), k)):
        inner = next((f for f in groups if f in k), None)
        groups.setdefault(inner if inner is not None else k, []).append(k)
    return groups


def _by_shared_piece(groups: dict[bytes, list[bytes]]) -> dict[bytes, list[bytes]]:
    """``groups`` (see :func:`_literal_searches`) with the literals that share a piece of a word
    (:data:`_SHARED_PIECE`) searched as the piece shared by the most of them, their keys found
    through it."""
    groups = dict(groups)
    while True:
        holders: dict[bytes, set[bytes]] = {}  # piece of a word -> the literals holding it
        for f in groups:
            for w in _WORDS.findall(f):
                for i in range(len(w) - _SHARED_PIECE + 1):
                    for j in range(i + _SHARED_PIECE, len(w) + 1):
                        holders.setdefault(w[i:j], set()).add(f)
        shared = [(len(fs), len(w), w) for w, fs in holders.items() if len(fs) > 1]
        if not shared:
            return groups
        piece = max(shared)[2]
        merged = {k for f in holders[piece] for k in groups.pop(f)}
        groups[piece] = sorted(merged, key=lambda k: (len(k), k))


class _KeyFinder:
    """Finds, in a batch of lines, where literals occur: regex passes over the batch for the
    literals that have a trigger, one literal search for each of the few others.

    Built from ``{literal: payload}``; :meth:`hits` gives, for each line in which something was
    found, the payloads of the literals found there, plus payloads of literals that may not be
    there (a superset: the caller checks the payload's keys on the line). Literals are ASCII
    bytes; a literal starting with "\\n" is anchored at a line start.

    The trigger of a literal is the literal from one of its markers on: a character of
    :data:`_MARKERS`, or else one of a second set, chosen for the literals left by what its
    characters cost against the literal searches they spare (:func:`_second_set`). The batch is
    translated once per set so that the set's markers are one byte; for each set the regex engine
    skips from marker to marker at C speed and tries a trie of the translated trigger rests at each.
    Where a rest ends, a lookbehind checks the translated part of its literal before the marker
    ("terminate called after thro" before "wing"), so chatter ("Saving") costs one failed check, not
    a line to look at.
    """

    def __init__(self, literals: dict[bytes, tuple[str, ...]]) -> None:
        usable = [lit for lit in sorted(literals) if not {*_MARK, *_MARK_ESC, *_MARK2} & set(lit)]
        first = {lit: at for lit in usable if (at := _trigger_start(lit, _MARKER_BYTES)) is not None}
        # The literals left: a literal holding another is found through it (one trigger or one
        # search finds both); the second set gives triggers to those worth its tries; the rest are
        # searched alone, and a literal holding what is searched alone is found through that search.
        groups = _literal_searches(lit for lit in usable if lit not in first)
        unusable = [lit for lit in literals if lit not in usable]
        through: set[bytes] = set()  # literals the second set would start but a search alone finds
        while True:
            second_marks, second = _second_set(f for f in groups if f not in through)
            alone = _by_shared_piece(
                _literal_searches([*unusable, *(lit for f in groups if f not in second for lit in groups[f])])
            )
            # ("| error" through the search of "error": its trigger would cost tries for nothing)
            more = {f for f in second if any(s in f for s in alone)}
            if not more:
                break
            through |= more
        payloads = dict(literals)
        for f in second:
            payloads[f] = tuple(sorted({p for lit in groups[f] for p in literals[lit]}))
        # One table per set: a character of the second set stays itself in the first set's rests
        # and lookbehinds, which stay as selective as the first set's markers alone make them.
        marks2 = bytes(sorted(second_marks))
        escapes = _MARK + _MARK_ESC + _MARK2
        tables = (
            bytes.maketrans(_MARKERS.encode("ascii") + escapes, _MARK * len(_MARKERS) + _MARK_ESC * 3),
            bytes.maketrans(marks2 + escapes, _MARK2 * len(marks2) + _MARK_ESC * 3),
        )
        self._regexes = tuple(
            (table, *search)
            for mark, starts, table in ((_MARK, first, tables[0]), (_MARK2, second, tables[1]))
            if (search := self._trigger_search(mark, starts, payloads, table)) is not None
        )
        self._plain: tuple[tuple[bytes, tuple[str, ...]], ...] = tuple(
            (f, tuple(sorted({p for lit in ls for p in literals[lit]}))) for f, ls in sorted(alone.items())
        )
        self._plain_text = tuple((f.decode("ascii"), ps) for f, ps in self._plain)
        # How each is looked for in a batch: a short literal by the regex engine, whose scan for a
        # pattern's first byte runs 1.5-3 times as fast as ``bytes.find``'s for a needle of a few
        # bytes (``\nE``: 0.16 against 0.47 ms over a 550 kB batch); a long one by ``bytes.find``,
        # which skips ahead by the needle's length (``terminated abnormally``: 0.12 against 0.19).
        # Short literals that start their search at the same character share one pass: a regex
        # of the alternatives after that character (``\nE``, ``[E`` and ``: E`` from their ``E``: 0.19
        # ms a batch, against 0.5 for three passes); each alternative is checked where it matched.
        by_anchor: dict[int, list[_Alt]] = {}
        for f, ps in self._plain:
            if len(f) < _SHORT_LITERAL:
                at = _anchor(f)
                by_anchor.setdefault(f[at], []).append((f, at, len(f) - 1, ps))
        shared = {c: alts for c, alts in by_anchor.items() if len(alts) > 1}
        self._plain_search: tuple[tuple[Callable[[bytes, int], int], int, tuple[str, ...]], ...] = tuple(
            (_literal_find(f), len(f) - 1, ps) for f, ps in self._plain
            if len(f) >= _SHORT_LITERAL or f[_anchor(f)] not in shared
        )
        self._shared_search: tuple[tuple[_BSearch, tuple[_Alt, ...]], ...] = tuple(
            (re.compile(re.escape(bytes([c])) + b"(?:" + b"|".join(_after_anchor(f, at) for f, at, _, _ in alts)
                        + b")").search, tuple(alts))
            for c, alts in sorted(shared.items())
        )

    def _trigger_search(
        self, mark: bytes, starts: dict[bytes, int], literals: dict[bytes, tuple[str, ...]], table: bytes
    ) -> tuple[re.Pattern[bytes], dict[bytes, tuple[str, ...]]] | None:
        """The regex finding the literals of ``starts`` (literal -> where its trigger starts) at
        the ``mark`` byte of the batch translated by ``table``, and the payloads of what it reports."""
        if not starts:
            return None
        rests: dict[bytes, list[bytes]] = {}  # translated rest -> the literals whose trigger it ends
        before: dict[bytes, set[bytes]] = {}  # translated rest -> its literals, translated (b"": none to check)
        for lit, at in starts.items():
            t = lit.translate(table)
            rests.setdefault(t[at + 1 :], []).append(lit)
            before.setdefault(t[at + 1 :], set()).add(t if at else b"")
        # At each marker the longest rest whose literal is there is reported; the literals whose
        # rests are prefixes of it may be there too (their payloads come with it).
        # (a rest's prefixes are looked up, not every rest compared: the table's hundreds of rests)
        payload = {
            u: tuple(sorted({p for n in range(len(u) + 1) for lit in rests.get(u[:n], ()) for p in literals[lit]}))
            for u in rests
        }
        leaves = {}
        for u, ts in before.items():
            checks = [] if b"" in ts else ["(?<=" + re.escape(t.decode("latin-1")) + ")" for t in sorted(ts)]
            leaves[u.decode("latin-1")] = "(?:" + "|".join(checks) + ")" if checks else ""
        pattern = _trie_regex((u.decode("latin-1") for u in rests), leaves).encode("latin-1")
        # Most tries fail on the byte after the marker (inside "INFO" it is another marker): one
        # class test rejects them before the trie's alternation walks its first-level branches.
        firsts = b"".join(re.escape(bytes([c])) for c in sorted({u[0] for u in rests}))
        return re.compile(re.escape(mark) + b"(?=[" + firsts + b"])(?=(" + pattern + b"))"), payload

    def in_line(self, text: str) -> list[tuple[str, ...]]:
        """:meth:`hits` of one line: ``text`` = "\\n" + the line."""
        data = _ascii(text)
        found = []
        for table, regex, payload in self._regexes:
            translated = data.translate(table)
            search = regex.search
            m = search(translated)
            while m is not None:
                found.append(payload[m.group(1)])
                m = search(translated, m.start() + 1)
        if not text.isascii():
            text = data.decode("ascii")
        found.extend([ps for lit, ps in self._plain_text if lit in text])  # str search: no buffer set-up
        return found

    def hits(self, data: bytes, lengths: Iterable[int]) -> dict[int, list[tuple[str, ...]]]:
        """``data`` = b"\\n" + b"\\n".join(lines), ``lengths`` = the lines' lengths: for each line
        in which a literal was found, the payloads (see the class). Positions map to lines by the
        lengths, so a line holding "\\n" still maps right."""
        hits: dict[int, list[tuple[str, ...]]] = {}
        get = hits.get
        starts: list[int] | None = None  # starts[i] = position of the "\n" before line i
        for table, regex, payload in self._regexes:
            translated = data.translate(table)
            for m in regex.finditer(translated):
                if starts is None:
                    starts = list(accumulate(map(add, lengths, repeat(1)), initial=0))
                i = bisect_left(starts, m.start()) - 1  # the marker is a byte of line i
                found = get(i)
                if found is None:
                    hits[i] = [payload[m.group(1)]]
                else:
                    found.append(payload[m.group(1)])
        for search, alts in self._shared_search:
            hit = search(data)
            if hit is None:
                continue
            if starts is None:
                starts = list(accumulate(map(add, lengths, repeat(1)), initial=0))
            while hit is not None:
                a = hit.start()
                for lit, at, last, ps in alts:  # which of the alternatives are there
                    p = a - at
                    if p >= 0 and data.startswith(lit, p):
                        i = bisect_left(starts, p + last) - 1
                        found = get(i)
                        if found is None:
                            hits[i] = [ps]
                        elif ps not in found:
                            found.append(ps)
                hit = search(data, a + 1)
        # a literal may start with the line's "\n": its last byte (``last`` on) is inside the line
        for find, last, ps in self._plain_search:
            p = find(data, 0)
            if p < 0:
                continue
            if starts is None:
                starts = list(accumulate(map(add, lengths, repeat(1)), initial=0))
            while p >= 0:
                i = bisect_left(starts, p + last) - 1
                found = get(i)
                if found is None:
                    hits[i] = [ps]
                else:
                    found.append(ps)
                p = find(data, starts[i + 1])  # one hit per line is enough
        return hits


def _ascii(text: str) -> bytes:
    """One byte per character ("?" for any non-ASCII one): byte and character positions agree, and
    a literal found in ``text`` is found (as a superset) in the bytes."""
    return text.encode("ascii", "replace")
