"""The package as a user gets it: built into a wheel, installed into a fresh virtualenv."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from neuron_watch import __version__

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("wheel")
    # One build of the tree at a time: two pytest-xdist workers (tests/run) may each build it for
    # this module, and a build writes the tree's own build/ directory.
    with open(Path(tempfile.gettempdir()) / "neuron-watch-wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(d),
                        str(ROOT)], check=True, timeout=300)
    wheel = next(d.glob("neuron_watch-*.whl"))
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # --no-deps: --version/--help/imports must not need the heavy dependencies to be importable
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    return wheel, venv


def test_wheel_installs_neuron_watch_not_watchdog(wheel_venv: tuple[Path, Path]) -> None:
    wheel, _ = wheel_venv
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("neuron_watch/launchers/torchrun.py") for n in names)
    assert "neuron_watch/diagnosis/signatures.toml" in names
    assert "neuron_watch/node/rank_bootstrap/sitecustomize.py" in names  # the ranks' probe (rank_probe.BOOTSTRAP_DIR)
    assert not any(n.startswith("watchdog/") for n in names)  # would clobber the PyPI `watchdog` package
    # every module of every sub-package
    modules = {f"neuron_watch/{p.relative_to(ROOT / 'watchdog').as_posix()}" for p in (ROOT / "watchdog").rglob("*.py")}
    assert modules - set(names) == set()


def test_version_and_help_from_the_installed_wheel(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = wheel_venv
    exe = str(venv / "bin" / "neuron-watch")
    v = subprocess.run([exe, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and v.stdout.strip() == f"neuron-watch {__version__}"
    h = subprocess.run([exe, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--hang-timeout" in h.stdout and "NEURON_WATCH_HANG_TIMEOUT" in h.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import neuron_watch; print(neuron_watch.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert str(venv) in where.stdout


def test_pyproject_lists_every_sub_package() -> None:
    """setuptools still packs a sub-package pyproject does not list (as data, with a deprecation
    warning), so the wheel alone would not show a missing one: the list itself is read."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"neuron_watch." + ".".join(p.parent.relative_to(ROOT / "watchdog").parts)
             for p in (ROOT / "watchdog").rglob("__init__.py") if p.parent != ROOT / "watchdog"}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
