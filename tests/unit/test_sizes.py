"""The house's size rule, parsed from the source (nothing is imported here).

A module over ``MAX_MODULE_LINES`` lines or a class over ``MAX_CLASS_LINES`` lines holds more than a
new engineer reads as one thing: it is split by concern (docs/architecture.md says where each piece
lives). The exemptions are named with their reason, and each must still be over its limit: one that
shrinks under it leaves the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "watchdog").rglob("*.py"), *(ROOT / "launchers").rglob("*.py")])

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400

#: module (path under the repository) -> why it may be longer
LONG_MODULES: dict[str, str] = {
    "watchdog/diagnosis/judge.py": "the pure judge: one state machine over every rank, its handlers beside it",
    "watchdog/wire/protocol.py": "the wire codec: every message's encoding and decoding, side by side",
}
#: (module, class) -> why it may be longer
LONG_CLASSES: dict[tuple[str, str], str] = {
    ("watchdog/diagnosis/judge.py", "Judge"): "the pure judge's state and its observations, one object",
}


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _classes(path: Path) -> dict[str, int]:
    """Every class of the module (nested ones too) and its length in lines, decorators included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    sizes: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            sizes[node.name] = node.end_lineno - start + 1
    return sizes


def test_the_sources_are_found() -> None:
    names = {_name(p) for p in SOURCES}
    assert {"watchdog/job/coordinator.py", "launchers/torchrun.py"} <= names
    assert set(LONG_MODULES) <= names, f"an exempted module is gone: {sorted(set(LONG_MODULES) - names)}"


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_module_size(path: Path) -> None:
    name = _name(path)
    if name in LONG_MODULES:
        return
    lines = _lines(path)
    assert lines <= MAX_MODULE_LINES, (
        f"{name} has {lines} lines, over the house's limit of {MAX_MODULE_LINES} for a module: split it by "
        "concern into modules of its sub-package (or, for a module that reads as one thing only whole, add it "
        "to LONG_MODULES in tests/unit/test_sizes.py with its reason)")


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_class_size(path: Path) -> None:
    name = _name(path)
    over = {cls: n for cls, n in _classes(path).items()
            if n > MAX_CLASS_LINES and (name, cls) not in LONG_CLASSES}
    assert not over, (
        f"{name}: class(es) {over} over the house's limit of {MAX_CLASS_LINES} lines for a class: lift a "
        "cohesive part into an object of its own (or add it to LONG_CLASSES in tests/unit/test_sizes.py with "
        "its reason)")


@pytest.mark.parametrize("name", sorted(LONG_MODULES))
def test_a_long_module_is_still_long(name: str) -> None:
    lines = _lines(ROOT / name)
    assert lines > MAX_MODULE_LINES, (
        f"{name} has {lines} lines, within the limit of {MAX_MODULE_LINES}: remove it from LONG_MODULES")


@pytest.mark.parametrize(("name", "cls"), sorted(LONG_CLASSES))
def test_a_long_class_is_still_long(name: str, cls: str) -> None:
    sizes = _classes(ROOT / name)
    assert cls in sizes, f"{name} has no class {cls}: remove it from LONG_CLASSES"
    assert sizes[cls] > MAX_CLASS_LINES, (
        f"{name}: class {cls} has {sizes[cls]} lines, within the limit of {MAX_CLASS_LINES}: "
        "remove it from LONG_CLASSES")


def test_a_class_is_measured_from_its_decorators_to_its_end(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    src.write_text(f"import dataclasses\n\n@dataclasses.dataclass\nclass Big:\n{body}\n\nclass Small:\n    pass\n",
                   encoding="utf-8")
    sizes = _classes(src)
    assert sizes == {"Big": MAX_CLASS_LINES + 2, "Small": 2}
