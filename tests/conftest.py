"""Shared test helpers: process hygiene checks and the CI rule for missing system packages.

Fixtures for real services live in ``tests/fixtures/`` (one module per service) and are
registered here as plugins.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest_plugins = [
    "tests.fixtures.procs",
    "tests.fixtures.s3",
    "tests.fixtures.mqtt",
    "tests.fixtures.slurm",
    "tests.fixtures.disk",
    "tests.fixtures.starts",
    "tests.fixtures.runs",
    "tests.fixtures.cputime",
]

IN_CI = os.environ.get("CI", "").lower() == "true"


def require_binary(name: str) -> str:
    """Path of a system binary; skip on a laptop without it, fail in CI (CI=true installs everything)."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None
    )
    if path:
        return path
    if IN_CI:
        pytest.fail(f"{name} is missing in CI: tests/run installs it; check its apt-get step")
    pytest.skip(f"{name} not installed (tests/run installs it)")


# --- Scheduling: the longest tests first --------------------------------------------------------
# tests/run hands tests to its xdist workers one at a time in collection order; a slow process
# test collected last leaves the other worker idle while it runs, so the suite is ordered by each
# test's last measured seconds (tests/durations.json, rewritten by `tests/run --record-durations`),
# longest first. A test not yet measured is placed by its tier: real processes and real services
# cost seconds, unit tests milliseconds.
DURATIONS = ROOT / "tests" / "durations.json"
_TIER_SECONDS = {"process": 20.0, "integration": 8.0}


def _load_durations() -> dict[str, float]:
    import json

    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _plain(nodeid: str) -> str:
    """``nodeid`` without the ``@<group>`` suffix pytest-xdist's loadgroup gives a grouped test on a
    worker (the durations are kept under the id pytest shows without workers)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known = _load_durations()

    def cost(item: pytest.Item) -> float:
        if _plain(item.nodeid) in known:
            return known[_plain(item.nodeid)]
        if unit(item) in measured_groups:
            # a reader of a shared run: the run's seconds are measured on the test that set it up,
            # and a reader's own (under the file's half second) are not kept
            return 0.05
        return max((s for m, s in _TIER_SECONDS.items() if item.get_closest_marker(m)), default=0.05)

    # The tests of one xdist_group read one shared real run (a module-scoped fixture, set up by the
    # first of them): they are placed together, by their sum, so that the run starts once in a
    # single process too (pytest-xdist's loadgroup keeps them on one worker).
    units: dict[str, tuple[float, int]] = {}

    def unit(item: pytest.Item) -> str:
        group = item.get_closest_marker("xdist_group")
        return f"group {(group.args or [group.kwargs.get('name')])[0]}" if group else item.nodeid

    measured_groups = {unit(item) for item in items
                       if item.get_closest_marker("xdist_group") and _plain(item.nodeid) in known}
    for i, item in enumerate(items):
        spent, first = units.get(unit(item), (0.0, i))
        units[unit(item)] = (spent + cost(item), first)
    # ties keep their collected order; a group keeps its own
    items.sort(key=lambda item: (-units[unit(item)][0], units[unit(item)][1]))


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs in the controller for every worker's report: set-up and teardown of a test's fixtures
    # count towards it, since they are what a worker spends on it. Its CPU seconds are recorded
    # beside, with shared fixtures apart (tests/fixtures/cputime.py).
    if os.environ.get("NW_RECORD_DURATIONS"):
        nodeid = _plain(report.nodeid)
        _measured[nodeid] = _measured.get(nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not os.environ.get("NW_RECORD_DURATIONS") or hasattr(session.config, "workerinput") or not _measured:
        return
    import json

    # Only tests that take a noticeable time are kept; the rest are placed by their tier.
    merged = {k: v for k, v in _load_durations().items() if k not in _measured}
    merged.update({k: round(v, 1) for k, v in _measured.items() if v >= 0.5})
    DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")


#: The signals a wrapper catches (SIGINT and SIGHUP only when not ignored at its start: ``nohup``).
_WRAPPER_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _signal_state() -> tuple[tuple[object, ...], frozenset[int]]:
    import signal

    return (tuple(signal.getsignal(getattr(signal, s)) for s in _WRAPPER_SIGNALS),
            frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])))


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """A test leaves this worker's signal handlers and mask as it found them: an ignored or blocked
    SIGINT is inherited by every process a later test starts here, and a wrapper started with SIGINT
    ignored keeps ignoring it (as under ``nohup``), so a Ctrl-C test would fail far from the cause."""
    before = _signal_state()
    yield
    after = _signal_state()
    assert after == before, f"this test changed the worker's signal state ({_WRAPPER_SIGNALS}, blocked): " \
                            f"{before} -> {after}; restore it"


def pytest_configure(config: pytest.Config) -> None:
    """The processes the tests start see a terminal's signals as a user's shell gives them.

    A suite started in the background of a non-interactive shell (``tests/run &``, a CI step that
    backgrounds it) inherits SIGINT and SIGQUIT ignored, and every process it starts would too: a
    wrapper started with SIGINT ignored keeps ignoring it, as under ``nohup`` (by design), so a
    Ctrl-C test would see its signal dropped. A test about an ignored signal ignores it itself.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if not hasattr(config, "workerinput"):  # once, before pytest-xdist starts its workers
        compile_project_bytecode()


#: the project's own sources, imported by the processes the tests start (wrappers, agents, the line
#: writer, the guardian, the ranks' probe, the rank programs' imports)
_PROJECT_SOURCES = ("watchdog", "launchers", "examples", "tests")


def compile_project_bytecode() -> None:
    """Write the project's bytecode (``__pycache__``, ignored by git) before any test starts a process.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's environment sets it), Python reads a
    ``.pyc`` but never writes one, so every process the suite starts compiled the whole
    ``neuron_watch`` package from source again: ~0.4 CPU-s for each wrapper and agent, in hundreds
    of them a run (pip compiled the installed packages' bytecode when it installed them; torch
    and the frameworks are not concerned). ``compileall`` writes what is missing or stale whatever
    that variable says, and an import still checks each file's time stamp: a source edited later is
    compiled again in memory, never read stale."""
    import compileall

    for name in _PROJECT_SOURCES:
        compileall.compile_dir(str(ROOT / name), quiet=2)
