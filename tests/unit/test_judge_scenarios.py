"""Multi-line scenarios from the real formats, through the live judge and through ``diagnose``:
both must give the expected label and culprit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.events import Action, Label

from .scenario_lines import (
    Scenario,
    compile_then_train,
    crash_then_closed,
    hardware_then_hangs,
    live_verdict,
    mid_compile,
    rx_nobody_compiling,
    rx_while_other_compiles,
    write_rank_logs,
)

CASES: list[tuple[str, Callable[[], Scenario], Label, int | None]] = [
    ("compile-then-train", compile_then_train, Label.HEALTHY, None),
    ("mid-compile", mid_compile, Label.COMPILING, 0),
    ("rx-while-another-compiles", rx_while_other_compiles, Label.COMPILING, 1),
    ("rx-nobody-compiling", rx_nobody_compiling, Label.COLLECTIVE_HANG, 1),
    ("hardware-then-hangs", hardware_then_hangs, Label.HARDWARE_ERROR, 2),
    ("crash-then-closed", crash_then_closed, Label.OTHER_CRASH, 1),
]


@pytest.mark.parametrize(("name", "make", "label", "culprit"), CASES, ids=[c[0] for c in CASES])
def test_live_judge(name: str, make: Callable[[], Scenario], label: Label, culprit: int | None) -> None:
    v = live_verdict(make())
    assert v.label is label, v
    if culprit is not None:
        assert v.culprit is not None and v.culprit.rank == culprit, v


@pytest.mark.parametrize(("name", "make", "label", "culprit"), CASES, ids=[c[0] for c in CASES])
def test_diagnose_gives_the_same_answer(
    tmp_path: Path, name: str, make: Callable[[], Scenario], label: Label, culprit: int | None
) -> None:
    sc = make()
    write_rank_logs(sc, tmp_path / "logs")
    d = diagnose_paths([str(tmp_path / "logs")])
    live = live_verdict(sc)
    assert d.verdict.label is live.label is label
    assert (d.verdict.culprit.rank if d.verdict.culprit else None) == (live.culprit.rank if live.culprit else None)
    if culprit is not None:
        ev = d.to_dict()["evidence"][0]
        assert ev["file"].endswith(f"rank-{culprit}.log") and ev["line"] >= 1


def test_hardware_error_drains_and_names_the_evidence_line() -> None:
    v = live_verdict(hardware_then_hangs())
    assert v.action is Action.DRAIN_AND_RESTART
    assert v.evidence[0].signature == "neuron.hw.mem_ue" and "Uncorrectable memory error" in v.evidence[0].text
    # the peers' hang lines are kept as supporting evidence, after the root cause
    assert {e.signature for e in v.evidence[1:]} == {"neuron.rt.collectives_hang"}


def test_rx_timeouts_are_transient_until_the_hang_timeout() -> None:
    sc = rx_nobody_compiling()  # last step at t=100; steps every 10 s -> calibrated timeout 180 s
    assert live_verdict(sc, now=250.0).label is Label.COMM_TIMEOUT_TRANSIENT
    assert live_verdict(sc, now=280.0).label is Label.COMM_TIMEOUT_TRANSIENT
    assert live_verdict(sc, now=281.0).label is Label.COLLECTIVE_HANG


def test_mid_compile_stays_compiling_within_the_budget_only() -> None:
    sc = mid_compile()
    assert live_verdict(sc, now=3600.0).label is Label.COMPILING
    assert live_verdict(sc, now=7300.0).label is Label.COLLECTIVE_HANG  # past the 2 h compile budget
