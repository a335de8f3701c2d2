"""The tests every round's table of failure forms makes of its rows (tests/unit/test_forms_round*.py):
a row's line reads as its kind with the cause it states and holds a needle of the classifier's batch
search; a near miss reads as nothing; an error line states its cause, or none. A round's module binds them
to its tables with :func:`table_tests` and :func:`cause_tests`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import NEEDLES, FormKind, cause_of, read_line
from neuron_watch.events import Label

_NO_DIGITS = str.maketrans("", "", "0123456789")

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FormRow = tuple[str, FormKind, "Label | None", str]


def table_tests(forms: Sequence[FormRow], near_misses: Sequence[str], *,
                cause_of_kinds: frozenset[FormKind] | None = None,
                classified_by: KnowledgeBase | None = None) -> tuple[Callable[..., None], ...]:
    """The three parametrized tests of a round's ``forms`` and ``near_misses``: the cause is checked
    for ``cause_of_kinds`` only (all kinds when None); with ``classified_by``, a row's line must also
    be matched by that knowledge base."""

    @pytest.mark.parametrize(("line", "kind", "label", "source"), forms,
                             ids=[f"{k.value}:{i}" for i, (_, k, _, _) in enumerate(forms)])
    def test_form_is_read_with_its_cause(line: str, kind: FormKind, label: Label | None, source: str) -> None:
        form = read_line(line)
        assert form is not None, f"not read ({source})"
        assert form.kind is kind, f"{form} ({source})"
        if cause_of_kinds is None or kind in cause_of_kinds:
            stated = cause_of(line)
            assert (stated[0] if stated else None) is label, f"{stated} ({source})"

    @pytest.mark.parametrize(("line", "source"), [(row[0], row[3]) for row in forms],
                             ids=[f"needle:{i}" for i in range(len(forms))])
    def test_form_line_holds_a_needle(line: str, source: str) -> None:
        """The classifier reads a line only when its batch search found a needle in it (the search reads a
        line's template: the line without its digits)."""
        template = "\n" + line.translate(_NO_DIGITS)
        assert any(n in template for n in NEEDLES), source
        if classified_by is not None:
            assert classified_by.classify(line) is not None, source

    @pytest.mark.parametrize("line", near_misses)
    def test_near_miss_reads_as_nothing(line: str) -> None:
        assert read_line(line) is None, line

    return test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing


def cause_tests(causes: Sequence[tuple[str, Label]], no_cause: Sequence[str]) -> tuple[Callable[..., None], ...]:
    """The two parametrized tests of a round's ``causes`` (an error line, the cause its form states: both
    :func:`cause_of` and the judge's reading of the error say it) and ``no_cause`` (error lines whose form
    states none)."""

    @pytest.mark.parametrize(("line", "label"), causes)
    def test_cause_of_error(line: str, label: Label) -> None:
        stated = cause_of(line)
        assert stated is not None and stated[0] is label, stated
        reading = read_error(line)
        assert reading is not None and reading.label is label

    @pytest.mark.parametrize("line", no_cause)
    def test_error_without_cause(line: str) -> None:
        assert cause_of(line) is None

    return test_cause_of_error, test_error_without_cause
