"""The classification engine: first match wins, needles prefilter exactly, scan() == classify()."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_watch.diagnosis.classify import (
    Effect,
    KnowledgeBase,
    Match,
    Signature,
)
from neuron_watch.diagnosis.failureforms import NEEDLES
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.diagnosis.keyfinder import (
    _DIGITS,
    _MARKER_BYTES,
    _MARKER_COST,
    _ascii,
    _KeyFinder,
    _literal_find,
    _literal_searches,
    _second_set,
    _starts_of,
    _trie_regex,
    _trigger_start,
)
from neuron_watch.errors import ConfigError
from neuron_watch.events import Action, Label
from tests.benchmarks import bench_classify

KB = default_knowledge_base()

TABLE = """
[[signature]]
id = "a.first"
category = "comm_error"
severity = "error"
action = "restart"
effect = "fatal"
needle = "BOOM"
patterns = ['BOOM now']
advice = "first rule"
examples = ["BOOM now"]

[[signature]]
id = "b.second"
category = "other_crash"
severity = "error"
action = "restart"
effect = "fatal"
needles = ["BOOM", "bang"]
patterns = ['BOOM', 'bang']
advice = "second rule"

[[signature]]
id = "c.overlap"
category = "healthy"
severity = "info"
action = "wait"
effect = "benign"
needle = "OMNI"
patterns = ['OMNI']
advice = "needle that overlaps another"

[[signature]]
id = "d.anchored"
category = "compiling"
severity = "info"
action = "wait"
effect = "compile_beat"
needle = "~"
anchor = "start"
patterns = ['^~+$']
advice = "anchored needle"
"""


def test_first_match_wins_and_needles_gate_rules() -> None:
    kb = KnowledgeBase.from_toml(TABLE)
    assert kb.classify("xx BOOM now").signature.id == "a.first"  # type: ignore[union-attr]
    assert kb.classify("xx BOOM later").signature.id == "b.second"  # type: ignore[union-attr]
    assert kb.classify("bang").signature.id == "b.second"  # type: ignore[union-attr]
    assert kb.classify("nothing here") is None


def test_overlapping_needles_are_all_found() -> None:
    """'BOOMNI' holds 'BOOM' and 'OMNI' overlapping: a non-overlapping search alone would miss one."""
    kb = KnowledgeBase.from_toml(TABLE.replace("patterns = ['BOOM', 'bang']", "patterns = ['BOOM!', 'bang']"))
    assert kb.classify("BOOMNI").signature.id == "c.overlap"  # type: ignore[union-attr]
    assert kb.scan(["x", "BOOMNI"]) == [(1, kb.classify("BOOMNI"))]


def test_anchored_needle_only_at_line_start() -> None:
    kb = KnowledgeBase.from_toml(TABLE)
    assert kb.classify("~~~").signature.id == "d.anchored"  # type: ignore[union-attr]
    assert kb.classify("a~~~") is None
    assert [i for i, _ in kb.scan(["a~", "~~", "", "~"])] == [1, 3]


def test_trie_regex_matches_exactly_the_keys() -> None:
    keys = ["loss", "lo", "step_loss", "|", "||X"]
    rx = re.compile(_trie_regex(keys))
    for k in keys:
        assert rx.fullmatch(k), k
    assert not rx.fullmatch("los")


def test_requires_skips_a_rule_whose_literals_are_absent() -> None:
    """``requires`` is checked on the lowercased line before the patterns: absent -> next rule."""
    table = TABLE.replace("patterns = ['BOOM now']", "patterns = ['BOOM']\nrequires = ['now', 'soon']")
    kb = KnowledgeBase.from_toml(table)
    assert kb.classify("BOOM NOW").signature.id == "a.first"  # type: ignore[union-attr]
    assert kb.classify("xx BOOM Soon").signature.id == "a.first"  # type: ignore[union-attr]
    assert kb.classify("xx BOOM later").signature.id == "b.second"  # type: ignore[union-attr]
    assert kb.scan(["BOOM later", "BOOM now"]) == [(0, kb.classify("BOOM later")), (1, kb.classify("BOOM now"))]


def test_rules_with_requires_match_their_examples_only_through_it() -> None:
    """Every example of a rule with ``requires`` holds one of the literals (else the rule could
    never have matched it: the table test would fail first, this names the cause)."""
    for sig in KB.signatures:
        for ex in sig.examples if sig.requires else ():
            assert any(r in ex.lower() for r in sig.requires), (sig.id, ex)


def test_user_progress_regex_goes_first_and_scans_every_line() -> None:
    kb = default_knowledge_base(r"it=(?P<step>\d+) l=(?P<loss>[\d.]+)")
    m = kb.classify("it=7 l=0.5 Timeout waiting for RX (waited 120 sec)")
    assert m is not None and m.signature.id == "user.progress" and (m.step, m.loss) == (7, 0.5)
    assert [i for i, _ in kb.scan(["nothing", "it=8 l=1"])] == [1]


def test_progress_with_nan_loss_is_never_progress() -> None:
    m = KB.classify("step 3 loss nan")
    assert m is not None and m.signature.effect is Effect.FATAL


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[[signature]]\nid='x'", "missing"),
        ("not toml ===", "not valid TOML"),
        (TABLE.replace('severity = "error"', 'severity = "bad"', 1), "severity"),
        (TABLE.replace("patterns = ['BOOM now']", "patterns = ['(']"), "a.first"),
        (TABLE.replace('needle = "OMNI"', 'needle = "OMNI"\nbogus = 1'), "unknown keys"),
        (TABLE.replace('anchor = "start"', 'anchor = "end"'), "anchor"),
        (TABLE + TABLE, "duplicate"),
        (TABLE.replace('needle = "OMNI"', 'needle = "OMNI"\nrequires = ["NaN"]'), "lowercase"),
    ],
)
def test_malformed_tables_are_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        KnowledgeBase.from_toml(text)


def test_bad_progress_regex_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="progress-regex"):
        KnowledgeBase.from_toml(TABLE, progress_regex="(")


# -- scan() and classify() agree -------------------------------------------------------------------

CORPUS = [ex for s in KB.signatures for ex in (*s.examples, *s.near_misses)] + [
    "",
    ".",
    "plain chatter with no needle",
    "2024-04-12 07:13:06,123 - INFO - loading shard 3",
    "...done",
    "step 5 loss 1.0 and Timeout waiting for RX (waited 120 sec)",
    # capital runs and markers next to needles (the translated marker search)
    "2024-04-12 07:13:08.000296:  271334  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache",
    "NCCL INFO NCCL error NCCL_SOCKET NRT_TIMEOUT NRT_RESOURCE SIGSEGV DEREG_MR",
    "xKilled\x00Killed \x01 NVRM: Xid (PCI:0000:00:1e): 79",
    "Called Killed Filled",
    "{'loss': nan, 'grad_norm': 1.0}",
    "step 7 loss INF grad norm 1.0",
    "%|%|██ 3/10 [00:01<00:02, 3.2it/s, loss=1.5]",
    "loss loss loss=1.0 step_loss {'loss': 2.0,",  # one literal several times in a line
    ".....",
    "a..... not at the start",
]


def test_scan_agrees_with_classify_on_the_corpus() -> None:
    expected = [(i, m) for i, line in enumerate(CORPUS) if (m := KB.classify(line)) is not None]
    assert KB.scan(CORPUS) == expected
    assert KB.scan(iter(CORPUS)) == expected
    assert KB.scan(list(reversed(CORPUS))) == [
        (len(CORPUS) - 1 - i, m) for i, m in reversed(expected)
    ]
    assert len(expected) > len(KB.signatures)


_fragments = st.sampled_from(
    ["loss", " ", "nan", ".", "|", "||", "NRT_", "Timeout waiting for RX (waited 120 sec)", "step 3 ", "x", "\n",
     "Killed", "%|", "err: 1200", "Inference completed with err: 5", "\u2588", "\r", "FATAL",
     "NCCL error", "SIGSEGV", "NRT_TIMEOUT", "INFO", "{'loss': ", "exitcode", "\x00", "\x01", "NRT_", "(ms)",
     "Connection closed by ", "remote peer", "NaN", "Xid", "NVRM: "]
)
_lines = st.lists(st.text(_fragments.map(str), max_size=0) | st.lists(_fragments, max_size=8).map("".join), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_lines)
def test_scan_agrees_with_classify_on_generated_lines(lines: list[str]) -> None:
    expected = [(i, m) for i, line in enumerate(lines) if (m := KB.classify(line)) is not None]
    assert KB.scan(lines) == expected
    assert expected == _plain(KB, lines)


def test_trigger_searches_miss_no_needle_on_the_corpus() -> None:
    """The marker search and the literal searches find every needle: same answers as trying every
    rule whose needle the line holds."""
    for line in CORPUS:
        assert KB.classify(line) == KB.classify_plain(line), line


def test_scan_of_a_large_batch_equals_per_line() -> None:
    lines = list(itertools.islice(itertools.cycle(CORPUS), 5000))
    assert KB.scan(lines) == [(i, m) for i, line in enumerate(lines) if (m := KB.classify(line)) is not None]


# -- the fast paths against the plain reference --------------------------------------------------
#
# scan() searches a batch once: by line template when the batch repeats itself (the usual log),
# line by line when it does not; classify() searches one line. For every line each must give the
# answer of classify_plain(): the first rule in table order whose needle the line holds and whose
# patterns match, found without any search.

REAL_LOGS = sorted((Path(__file__).resolve().parents[1] / "data" / "real-logs").glob("**/*.log"))
#: the logs and command outputs the unit tests read (framework runs, progress bars, stack dumps, Slurm)
UNIT_LOGS = sorted(p for ext in ("log", "txt") for p in (Path(__file__).resolve().parent / "data").glob(f"**/*.{ext}"))
_SHIFT = str.maketrans("0123456789", "1234567890")


def _plain(kb: KnowledgeBase, lines: list[str], memo: dict[str, Match | None] | None = None) -> list[tuple[int, Match]]:
    """classify_plain's answers; ``memo`` keeps each distinct line's (the reference tries every rule of
    the table on every line, the costly part of a check over the whole corpus)."""
    if memo is None:
        return [(i, m) for i, line in enumerate(lines) if (m := kb.classify_plain(line)) is not None]
    for line in lines:
        if line not in memo:
            memo[line] = kb.classify_plain(line)
    return [(i, m) for i, line in enumerate(lines) if (m := memo[line]) is not None]


def _by_template(kb: KnowledgeBase, lines: list[str]) -> bool:
    """Whether scan(lines) searches line templates (else every line)."""
    return kb._template_hits(lines, _ascii("\n" + "\n".join(lines))) is not None


def _repeated(lines: list[str]) -> list[str]:
    """Each of ``lines`` three times, the 2nd and 3rd with every digit changed: the same templates,
    other lines (a log repeats its statements with other numbers)."""
    once = [line.translate(_SHIFT) for line in lines]
    return [x for triple in zip(lines, once, [line.translate(_SHIFT) for line in once], strict=True) for x in triple]


def _agree(
    kb: KnowledgeBase, lines: list[str], memo: dict[str, Match | None] | None = None,
    one: dict[str, Match | None] | None = None,
) -> None:
    """scan() of ``lines`` and classify() of each give the reference's answers. ``memo`` keeps the
    reference's answer for each distinct line, ``one`` classify()'s (both depend on the line alone;
    scan() is of the batch, so it runs whole)."""
    plain = _plain(kb, lines, memo)
    assert kb.scan(lines) == plain
    if one is None:
        assert [(i, m) for i, line in enumerate(lines) if (m := kb.classify(line)) is not None] == plain
        return
    for line in lines:
        if line not in one:
            one[line] = kb.classify(line)
    assert [(i, m) for i, line in enumerate(lines) if (m := one[line]) is not None] == plain


#: The real logs are checked in this many shares (every fourth file from a start): each share is a
#: test of its own, so that the shares run on several workers and none nears the test timeout.
_SHARES = 4


@pytest.mark.parametrize("share", range(_SHARES))
def test_fast_paths_equal_the_plain_reference_on_every_real_log_line(share: int) -> None:
    """Every line of every real excerpt and of the unit tests' logs, verbatim (ANSI codes, non-ASCII
    bars, lone surrogates of undecodable bytes): as the excerpt (searched line by line: excerpts
    rarely repeat) and as a log repeating its lines with other numbers (searched by template)."""
    assert len(REAL_LOGS) > 200 and len(UNIT_LOGS) > 10
    every: list[str] = []
    # the reference's and classify()'s answer for each distinct line, computed once: a line recurs
    # in its repeated log and in other excerpts, and the answer depends on the line alone
    memo: dict[str, Match | None] = {}
    one: dict[str, Match | None] = {}
    for path in (REAL_LOGS + UNIT_LOGS)[share::_SHARES]:
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        _agree(KB, lines, memo, one)
        _agree(KB, _repeated(lines), memo, one)
        every += lines
    assert not _by_template(KB, every) and _by_template(KB, _repeated(every))
    assert len(_plain(KB, every, memo)) > 800 // _SHARES  # the table is exercised


def test_fast_paths_equal_the_plain_reference_on_the_benchmark_lines() -> None:
    for base in (bench_classify.TYPICAL, bench_classify.DENSE):
        lines = bench_classify._log(base, 3000)
        assert _by_template(KB, lines)
        _agree(KB, lines)
        unique = bench_classify._unique(lines)
        assert not _by_template(KB, unique)
        _agree(KB, unique)


_pieces = st.sampled_from(
    ["loss", " ", "nan", ".", "|", "%|", "NRT_", "status=1002", "status=12", "EOOM00", "code -9", "-9", "7", "42",
     "Killed", "FATAL", "\u2588", "\u00e9", "?", "\r", "\n", "\x00", "\x01", "\ud800", "Timeout waiting for RX",
     "step 3 ", "{'loss': ", "NCCL error", "Traceback (most recent call last):", "Out of memory", "error: ", "x",
     "NaN", "Connection closed by ", "remote peer", "UserWarning: ", "terminate called after throwing", "Saving"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_pieces, max_size=8).map("".join), min_size=1, max_size=40))
def test_fast_paths_equal_the_plain_reference_on_generated_lines(lines: list[str]) -> None:
    _agree(KB, lines)
    _agree(KB, _repeated(lines))


_needle_chars = "ACNRTloes_:-=?19 \u00e9"


@st.composite
def _tables(draw: st.DrawFn) -> KnowledgeBase:
    """Any table: needles of markers, plain characters, digits only, non-ASCII, none at all;
    anchored or not; a pattern that is the needle or one that matches anything."""
    sigs = []
    for n in range(draw(st.integers(1, 6))):
        needles = tuple(draw(st.lists(st.text(_needle_chars, min_size=1, max_size=7), max_size=2)))
        pattern = re.escape(needles[0]) if needles and draw(st.booleans()) else "."
        sigs.append(
            Signature(
                id=f"r{n}", category=Label.OTHER_CRASH, severity="error", action=Action.RESTART,
                effect=Effect.FATAL, needle=needles[0] if needles else "", needles=needles,
                anchor_start=draw(st.booleans()), patterns=(re.compile(pattern),), advice="",
            )
        )
    return KnowledgeBase(sigs)


# 150 tables a run (each builds its two key finders over the reader's needles too, ~0.08 CPU-s): 300 took
# 48 CPU-s of the suite's unit tier and 115 s of wall at four workers on two cores, and a worker under a load of
# ten reached the 300 s test timeout; Hypothesis draws new tables on every run, so the runs add up
@settings(max_examples=150, deadline=None)
@given(_tables(), st.lists(st.text(_needle_chars + "\nxyz", max_size=20), min_size=1, max_size=30))
def test_fast_paths_equal_the_plain_reference_for_any_table(kb: KnowledgeBase, lines: list[str]) -> None:
    """The table another engineer extends tomorrow: the searches are built from whatever needles it
    holds (a rule without needles sees every line), not from a list of rules."""
    _agree(kb, lines)
    _agree(kb, _repeated(lines))


@pytest.mark.parametrize(
    "literal",
    # short ones by a regex from their rarest character (a lookbehind for the part before it), one
    # anchored at a line start, one without any rare character, a long one by bytes.find; short ones
    # whose rarest character is rarer still by bytes.find of that byte (" -> 2" from its ">", "%|")
    [b" -> 2", b"\nE", b"[E", b"status=", b"nan", b"terminated abnormally", b"%|", b"Z ["],
)
def test_literal_find_agrees_with_bytes_find_at_every_position(literal: bytes) -> None:
    data = _ascii("\n" + "\n".join([
        "ip-10-0-1-12:2251:2390 [3] NCCL INFO init.cc:1079 -> 2",
        "E0208 21:12:26.795 1460 api.py:869] failed",
        "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught",
        "exit status=1 after the process was terminated abnormally, loss nan",
        "-> 2 at the start, ->2 and - > 2 are not it; banana; Status=2",
        "%| at the start, 22%|\u2588\u2588 3/10, 5% | and %% are not it; 12:00:32Z [XTP003], Z[ and Z  [ are not",
    ]))
    find = _literal_find(literal)
    assert [find(data, p) for p in range(len(data) + 1)] == [data.find(literal, p) for p in range(len(data) + 1)]
    assert data.find(literal) >= 0


def _held(
    finder: _KeyFinder, literals: dict[bytes, tuple[str, ...]], lines: list[str]
) -> tuple[dict[int, list[tuple[str, ...]]], dict[int, list[str]]]:
    """The finder's hits on ``lines``, and for each line hit the payloads (one name each) whose
    literal the line holds: the caller's check of the superset the finder reports."""
    hits = finder.hits(_ascii("\n" + "\n".join(lines)), map(len, lines))
    held = {v[0]: lit.decode() for lit, v in literals.items()}
    return hits, {i: sorted({p for ps in found for p in ps if held[p] in "\n" + lines[i]}) for i, found in hits.items()}


def test_short_literals_sharing_a_pass_are_each_found_on_their_lines() -> None:
    # glog's "\nE", its bracketed "[E" and TensorFlow's ": E" start their search at one "E": one pass
    # finds them all, twice in a line, two in a line, none in a near miss ("ERROR" after a space).
    literals = {b"\nE": ("glog",), b"[E": ("bracketed",), b": E": ("tf",), b"terminated abnormally": ("long",)}
    finder = _KeyFinder(literals)
    assert finder._shared_search and len(finder._shared_search[0][1]) == 3
    lines = [
        "E0208 21:12:26.795 1460 api.py:869] failed",
        "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] and [E again",
        "2022-05-26 01:44:11.574098: E tensorflow/neuron/runtime/model.cc:706] shard error [E",
        "an ERROR here, then terminated abnormally",
        "Epoch 3",
    ]
    hits, got = _held(finder, literals, lines)
    assert got == {0: ["glog"], 1: ["bracketed"], 2: ["bracketed", "tf"], 3: ["long"], 4: ["glog"]}
    assert all(len(found) == len(set(found)) for found in hits.values())  # a literal twice in a line: once


#: Literal searches a batch of the packaged table costs beside the marker passes: each is a pass over
#: every batch (about 30 ns a line), where a needle with a trigger costs nothing more than its rest in
#: the marker passes' tries. Raise it only with bench_classify's unique figure before and after. Ten
#: since the second marker set is chosen by cost (keyfinder._second_set: "/ping", "loss", "nan", the
#: Neuron compiler's "...:32Z [XTP003]" found by the time's "Z [", ...).
LITERAL_SEARCHES = 10


def test_no_form_needle_is_only_characters_beyond_ascii() -> None:
    """The key finder reads a line as ASCII with every other character replaced by "?" (keyfinder's ascii/replace):
    a needle of such characters alone is searched as a run of "?" (round 38 part G's Chinese page-file words were
    b"??????", a literal search of its own in every batch that any six such characters in a row would match). A
    localized word with ASCII letters in it ("Getötet", "Dræbt") is still found by those letters."""
    odd = [n for n in NEEDLES if not any(c.isascii() and not c.isspace() for c in n)]
    assert not odd, f"needles of no printable ASCII character: {odd}; find the line through an ASCII needle beside them"


def test_needles_searched_alone_stay_few() -> None:
    """A needle holding no marker (keyfinder's _MARKERS, or a character of the second set, which joins
    it when it pays for itself) before its last character is searched alone in every batch. The message names the rules
    that own such needles, so that a new rule's needle can be changed, not the budget."""
    finder = KB._finder
    searches = len(finder._plain_search) + len(finder._shared_search)
    owners = {
        f.decode(): sorted({KB.signatures[i].id if i < len(KB.signatures) else "failureforms.NEEDLES"
                            for k in ks for i in KB._by_key[k]})
        for f, ks in finder._plain
    }
    assert searches <= LITERAL_SEARCHES, (
        f"{searches} literal searches a batch, at most {LITERAL_SEARCHES}; needles searched alone, with their rules: "
        f"{owners}. A needle searched alone holds no marker character before its last (see keyfinder's _MARKERS, "
        "_second_set, _PER_LINE): give the new rule a longer needle from the line it matches, one holding a rarer "
        "character (a capital, a bracket, 'u', 'i', 'e'), or one holding a needle already searched (found through it)"
    )


def test_a_needle_of_common_characters_joins_the_marker_pass_when_it_pays() -> None:
    # "u" (1.4 a line) spares three literal searches: those needles are found in the second set's
    # pass; "loss" and "nan" hold only commoner characters and are searched alone.
    literals = {b"unsupported display ": ("a",), b"is insufficient for ": ("b",), b"build stopped: ": ("c",),
                b"loss": ("d",), b"nan": ("e",)}
    finder = _KeyFinder(literals)
    assert sorted(f for f, _ in finder._plain) == [b"loss", b"nan"]
    lines = ["run: unsupported display x", "ninja: build stopped: subcommand failed", "loss nan", "is insufficient",
             "unsupported displa"]
    got = _held(finder, literals, lines)[1]
    assert {i: ps for i, ps in got.items() if ps} == {0: ["a"], 1: ["c"], 2: ["d", "e"]}


def test_needles_sharing_a_piece_of_a_word_are_one_search() -> None:
    # "error:", "errors." and "port error" hold no character that pays for a marker: one search for
    # "error" finds them all ("nan" shares no piece of five letters with them and is searched alone)
    literals = {b"error:": ("a",), b"errors.": ("b",), b"port error": ("c",), b"nan": ("d",)}
    finder = _KeyFinder(literals)
    assert [f for f, _ in finder._plain] == [b"error", b"nan"]
    lines = ["srun: error: node failed", "tf.errors.UnavailableError", "ib port error 12", "an error here", "nan"]
    got = _held(finder, literals, lines)[1]
    assert got == {0: ["a"], 1: ["b"], 2: ["c"], 3: [], 4: ["d"]}  # line 3 holds "error" alone: checked, none held


def test_a_needle_holding_a_piece_searched_alone_is_found_through_that_search() -> None:
    # "| error" alone would bring "|" into the second set (0.17 tries a line, a search spared); but
    # "error" is searched anyway for "error:" and "errors.": found through it, "|" costs nothing
    literals = {b"error:": ("a",), b"errors.": ("b",), b"| error": ("c",), b"nan": ("d",)}
    finder = _KeyFinder(literals)
    assert [f for f, _ in finder._plain] == [b"error", b"nan"]
    assert not finder._regexes
    lines = ["2024 | error | disk full", "srun: error: node failed", "an error here", "| err"]
    assert _held(finder, literals, lines)[1] == {0: ["c"], 1: ["a"], 2: []}


def test_the_rarest_character_of_a_needle_joins_the_second_set_only_when_it_pays() -> None:
    # "]" is the rarest character of "]: segfault at" (0.53 a line); "u" (1.50) starts it and three
    # other needles, so "u" alone is the set: "]" would cost tries for a needle already found
    literals = [b"]: segfault at", b"unsupported display ", b"is insufficient for ", b"build stopped: "]
    marks, starts = _second_set(literals)
    assert marks == {ord("u")}
    assert sorted(starts) == sorted(literals)


def test_a_character_the_later_ones_make_useless_leaves_the_second_set() -> None:
    # "B" (0.12 a line) starts three needles and is taken first; "k", "J" and "q" then start those
    # three among others: "B" spares no search any more and leaves the set
    literals = [b"Bear keen", b"Bore Jars", b"Bent quota", b"keen nose", b"kiss rate", b"Jeer tone", b"quit near"]
    marks, starts = _second_set(literals)
    assert marks == {ord("J"), ord("k"), ord("q")}
    assert sorted(starts) == sorted(literals)


def test_each_character_of_the_second_set_starts_more_needles_than_it_costs() -> None:
    """The packaged table's second set: each character starts more needles that no other starts
    (each a literal search spared) than it occurs a line (its tries): none is kept for nothing."""
    usable = [lit for lit in map(_ascii, KB._by_key) if not {0, 1, 2} & set(lit)]
    left = list(_literal_searches(lit for lit in usable if _trigger_start(lit, _MARKER_BYTES) is None))
    marks, starts = _second_set(left)
    assert marks and starts == _starts_of(left, marks)
    for c in marks:
        assert len(starts) - len(_starts_of(left, marks - {c})) > _MARKER_COST[c], chr(c)


def test_every_needle_of_the_form_reader_is_found_on_a_line_holding_it() -> None:
    """Every round's module adds needles (failureforms.NEEDLES gathers them): wherever their
    characters put one (first marker set, second set, a search alone), the batch search finds it on
    a line holding it, over all-distinct lines and over line templates (the lines without digits)."""
    lines = [n[1:] + " ok" if n.startswith("\n") else f"at step 12: {n} (rank 3)" for n in NEEDLES]
    data = _ascii("\n" + "\n".join(lines))
    templates = [_ascii(line).translate(None, _DIGITS) for line in lines]
    assert KB._template_finder is not None
    for finder, text, lengths in (
        (KB._finder, data, list(map(len, lines))),
        (KB._template_finder, b"\n" + b"\n".join(templates), list(map(len, templates))),
    ):
        hits = finder.hits(text, lengths)
        missed = [n for i, n in enumerate(NEEDLES) if n not in {k for ps in hits.get(i, ()) for k in ps}]
        assert not missed


@pytest.mark.parametrize(("timeout_ms", "sig", "action"), [
    # instructlab/training#520: the timeout set to 1 ms on purpose; no healthy job's first collective
    # fits in it, so the setting is the failure and a restart repeats it
    ("1", "gpu.nccl.watchdog_timeout_too_short", Action.STOP),
    ("999", "gpu.nccl.watchdog_timeout_too_short", Action.STOP),
    # near misses: a timeout of a second or more is a collective that really did not finish
    ("1000", "gpu.nccl.watchdog_timeout", Action.RESTART),
    ("600000", "gpu.nccl.watchdog_timeout", Action.RESTART),
])
def test_a_collective_timeout_under_a_second_is_the_setting(timeout_ms: str, sig: str, action: Action) -> None:
    line = (f"[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for "
            f"{int(timeout_ms) + 90} milliseconds before timing out.")
    m = KB.classify(line)
    assert m is not None and m.signature.id == sig and m.signature.action is action


@pytest.mark.parametrize(("line", "sig"), [
    # desihub/desitarget#628: the debug queue's limit ended the step; the same submission ends the same way
    ("slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***",
     "slurm.step_time_limit"),
    ("slurmstepd: error: *** JOB 7 CANCELLED AT 2016-01-04T10:00:00 DUE TO TIME LIMIT ***", "slurm.step_time_limit"),
    ("slurmstepd: error: *** STEP 1943824.0 ON jean-zay-iam17 CANCELLED AT 2023-03-06T03:17:51 DUE TO NODE FAILURE, "
     "SEE SLURMCTLD LOG FOR DETAILS ***", "slurm.node_failure"),
])
def test_slurm_says_why_it_ended_the_step(line: str, sig: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == sig


@pytest.mark.parametrize("line", [
    # near misses: a preemption, a cancel with no reason, and the time limit quoted in prose
    "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-09-21T10:00:00 DUE TO PREEMPTION ***",
    "slurmstepd: error: *** STEP 6053.0 ON DEL2212S020 CANCELLED AT 2024-04-23T12:18:08 ***",
    "INFO: jobs cancelled due to time limit are requeued by the wrapper",
])
def test_slurm_ends_that_say_nothing_of_the_job_are_not_its_cause(line: str) -> None:
    m = KB.classify(line)
    assert m is None or m.signature.id not in ("slurm.step_time_limit", "slurm.node_failure")
