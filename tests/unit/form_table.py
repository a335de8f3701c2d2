"""The checks every round's table of failure forms makes of its rows (tests/unit/test_forms_round*.py):
a row's line reads as its kind with the cause it states, holds a needle of the classifier's batch
search, and a near miss reads as nothing."""

from __future__ import annotations

from neuron_watch.diagnosis.failureforms import NEEDLES, FormKind, cause_of, read_line
from neuron_watch.events import Label


def assert_read_with_cause(line: str, kind: FormKind, label: Label | None, source: str, *,
                           cause_of_kinds: frozenset[FormKind] | None = None) -> None:
    """``line`` reads as ``kind`` and states ``label`` (checked for ``cause_of_kinds`` only, when given)."""
    form = read_line(line)
    assert form is not None, f"not read ({source})"
    assert form.kind is kind, f"{form} ({source})"
    if cause_of_kinds is None or kind in cause_of_kinds:
        stated = cause_of(line)
        assert (stated[0] if stated else None) is label, f"{stated} ({source})"


def assert_holds_a_needle(line: str, source: str) -> None:
    """The classifier reads a line only when its batch search found a needle in it."""
    assert any(n in "\n" + line for n in NEEDLES), source


def assert_reads_as_nothing(line: str) -> None:
    assert read_line(line) is None, line
