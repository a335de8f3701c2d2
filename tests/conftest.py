"""Shared test helpers: process hygiene checks and the CI rule for missing system packages.

Fixtures for real services live in ``tests/fixtures/`` (one module per service) and are
registered here as plugins.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest_plugins = [
    "tests.fixtures.procs",
    "tests.fixtures.s3",
    "tests.fixtures.mqtt",
    "tests.fixtures.slurm",
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
