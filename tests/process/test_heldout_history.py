"""bench_heldout_history's child: a tree of the package answers for itself, or not at all."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from tests.benchmarks.bench_heldout_history import PRODUCT, ROOT, run_child
from tests.fixtures.procs import pids_with_env
from tests.fixtures.real_logs import load_corpus

MARK = "NW_TEST_HELDOUT_HISTORY"


def some_excerpts() -> list[str]:
    """The first excerpt of each label: real logs that lead to different verdicts."""
    first: dict[str, str] = {}
    for ex in load_corpus():
        first.setdefault(ex.label.value, str(ex.log))
    return sorted(first.values())


def test_a_copy_of_the_package_answers_as_the_package_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    tree = tmp_path / PRODUCT
    shutil.copytree(ROOT / PRODUCT, tree)
    logs = some_excerpts()
    # today's offline diagnose builds its table through the composition root, which imports the
    # checkout's launchers: the bench lets today's tree (only) take them from the checkout
    answers = run_child(tree, logs, time.monotonic() + 300, also=(ROOT / "launchers",))
    assert sorted(answers) == logs
    for log in logs:
        v = diagnose_paths([log]).verdict
        assert (answers[log]["label"], answers[log]["action"]) == (v.label.value, v.action.value), log
    assert pids_with_env(MARK, mark) == []


def test_a_tree_missing_a_module_is_refused_not_answered_by_the_installed_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the check, the venv's install of today's package would fill in what the tree lacks."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    tree = tmp_path / PRODUCT
    shutil.copytree(ROOT / PRODUCT, tree)
    (tree / "errors.py").unlink()
    with pytest.raises(SystemExit, match=r"neuron_watch\.errors"):
        run_child(tree, some_excerpts(), time.monotonic() + 300)
    assert pids_with_env(MARK, mark) == []
