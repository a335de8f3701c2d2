"""The site-packages entries a venv made by ``tests/fixtures/venvs.py`` takes from this one: its own,
and those of a site-packages another venv lends it by a ``.pth`` line (a git worktree's venv), so
that a distribution left out is out of both."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.venvs import site_entries


def _tree(root: Path, files: list[str]) -> Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


def test_a_pth_line_naming_another_site_packages_lends_its_entries_not_itself(tmp_path: Path) -> None:
    lender = _tree(tmp_path / "main-site", ["transformers/__init__.py", "shared/__init__.py", "six.py",
                                            "__pycache__/six.cpython-311.pyc", "__pycache__/ours.cpython-311.pyc"])
    site = _tree(tmp_path / "site", ["shared/__init__.py", "ours.py", "__pycache__/ours.cpython-311.pyc"])
    (site / "zz_lender.pth").write_text(f"{lender}\n")
    (site / "finder.pth").write_text("import finder; finder.install()\n")  # runs code: kept as a file

    got = site_entries(site)

    assert got == {
        "finder.pth": site / "finder.pth",
        "ours.py": site / "ours.py",
        "shared": site / "shared",  # the first on sys.path wins: this venv's own
        "transformers": lender / "transformers",
        "six.py": lender / "six.py",
        "__pycache__/ours.cpython-311.pyc": site / "__pycache__" / "ours.cpython-311.pyc",
        "__pycache__/six.cpython-311.pyc": lender / "__pycache__" / "six.cpython-311.pyc",
    }


def test_a_pth_line_that_names_no_directory_keeps_the_file_as_it_is(tmp_path: Path) -> None:
    site = _tree(tmp_path / "site", ["pkg/__init__.py"])
    (site / "odd.pth").write_text(f"{tmp_path / 'gone'}\n")

    assert site_entries(site) == {"pkg": site / "pkg", "odd.pth": site / "odd.pth"}
