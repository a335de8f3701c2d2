"""Comments and docstrings of the product say why in the present: they point to no issue tracker
of ours and to no file outside the repository (history goes to commit messages, and a file that
is not shipped cannot be read by whoever reads the code).

Exact by construction: an issue is named as ``issue N`` or ``finding N``; a document is named by
its ``.md`` file, and a project document (a capitalised name such as ``README.md``) must exist in
the repository; absolute paths of a development machine and the session notes (``notes/``) are
not part of it. Upstream citations (``owner/repo#N``, an upstream project's ``docs/...md``) are
sources of a rule and stay, and so does a file the product writes (``incident.md``).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / "watchdog", ROOT / "launchers", ROOT / "slurm"]

ISSUE = re.compile(r"\b(?:issues?|findings?)\s+\d+", re.I)
OUTSIDE = re.compile(r"(?<![\w/.-])(?:notes/[\w./-]*|/work/[\w./-]*)|\(notes:")
DOC = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[A-Z][A-Z_]*\.md)\b")
#: the repository's own documents, by name and by path
DOCS = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.md")
        if not {".venv", "build", "node_modules"} & set(p.relative_to(ROOT).parts)}
DOC_NAMES = {Path(d).name for d in DOCS}


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and string of a Python file, of every comment line elsewhere."""
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                yield tok.start[0], tok.string
    else:
        for n, line in enumerate(source.splitlines(), 1):
            if line.lstrip().startswith("#"):
                yield n, line


def _files() -> list[Path]:
    return sorted(p for base in PRODUCT for p in base.rglob("*")
                  if p.suffix in (".py", ".sh", ".toml", ".conf") and "__pycache__" not in p.parts)


def problems_of(where: str, text: str) -> list[str]:
    """What one comment or string says that it must not."""
    return ([f"{where}: names an issue ({m.group(0)!r})" for m in ISSUE.finditer(text)]
            + [f"{where}: points outside the repository ({m.group(0)!r})" for m in OUTSIDE.finditer(text)]
            + [f"{where}: names a document the repository does not hold ({m.group(1)!r})"
               for m in DOC.finditer(text) if m.group(1) not in DOCS and Path(m.group(1)).name not in DOC_NAMES])


def test_product_comments_name_no_issue_and_no_file_outside_the_repository() -> None:
    found = [p for path in _files() for line, text in _texts(path)
             for p in problems_of(f"{path.relative_to(ROOT)}:{line}", text)]
    assert not found, "say why in the present instead:\n" + "\n".join(found)


@pytest.mark.parametrize("text", [
    "# the wrapper crashed at a flush (issue 16, finding 2)",
    "# see DESIGN.md section 4",
    "# (notes: compile cache layout)",
    "# recipe in notes/infra.md",
])
def test_each_kind_of_reference_is_caught(text: str) -> None:
    assert problems_of("probe", text)


def test_an_upstream_citation_a_document_of_the_repository_and_a_written_file_pass() -> None:
    assert problems_of("probe", "# aws-neuron-sdk#1222 (openxla/xla docs/errors/error_0100.md); see README.md, "
                                "incident.md") == []
