"""The scenario map in ``tests/README.md`` names every test of the process and integration tiers,
under its file's heading, and no test that is gone: a test added, renamed or merged without its row
fails here, so the map stays what the suite runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIERS = ("process", "integration")


def _tests_of(path: Path) -> set[str]:
    """The names of the tests ``path`` defines: module-level ``test_*`` functions and those of ``Test*`` classes."""
    tree = ast.parse(path.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.name.startswith("test_")}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")):
        names |= {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name.startswith("test_")}
    return names


def _map_rows(readme: str) -> dict[str, set[str]]:
    """The test names in the map's table rows, by the file heading they sit under."""
    rows: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in readme.splitlines():
        heading = re.match(r"### `(tests/[^`]+\.py)`", line)
        if heading:
            current = rows.setdefault(heading.group(1), set())
        elif current is not None and line.startswith("|"):
            current.update(re.findall(r"`(test_\w+)`", line))
    return rows


def _suite() -> dict[str, set[str]]:
    return {str(path.relative_to(ROOT)): _tests_of(path)
            for tier in TIERS for path in sorted((ROOT / "tests" / tier).glob("test_*.py"))}


def test_every_process_and_integration_test_has_a_row_and_no_row_names_a_test_that_is_gone() -> None:
    rows = _map_rows((ROOT / "tests" / "README.md").read_text())
    suite = _suite()
    missing = sorted(f"{file}::{name}" for file, names in suite.items() for name in names - rows.get(file, set()))
    gone = sorted(f"{file}::{name}" for file, names in rows.items() for name in names - suite.get(file, set()))
    assert not missing, (f"tests without a row in tests/README.md's scenario map (add one under the file's "
                         f"heading): {missing}")
    assert not gone, f"rows of tests/README.md's scenario map whose test is gone (move the row with the test): {gone}"


def test_the_readers_see_a_missing_row_and_a_row_whose_test_is_gone(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text("def test_kept():\n    pass\n\nclass TestGroup:\n    def test_inner(self):\n        pass\n\n"
                      "def helper():\n    pass\n")
    assert _tests_of(source) == {"test_kept", "test_inner"}
    readme = ("### `tests/process/test_x.py`\n\n| Scenario | Test | Cases | Real run |\n|---|---|---|---|\n"
              "| kept | `test_kept` | 1 | its own |\n| old | `test_old` | 1 | its own |\n\nprose `test_not_a_row`\n")
    assert _map_rows(readme) == {"tests/process/test_x.py": {"test_kept", "test_old"}}
