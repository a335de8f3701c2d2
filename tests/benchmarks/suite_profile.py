"""Where the suite's CPU goes, by file and by test, from a recorded run (prints figures; no pass/fail).

    NW_RECORD_DURATIONS=1 tests/run ...          # or: NW_RECORD_DURATIONS=1 .venv/bin/python -m pytest FILE
    .venv/bin/python tests/benchmarks/suite_profile.py [PROFILE] [--top 25] [--files 30]

Reads ``tests/profile.json`` (written by ``tests/fixtures/cputime.py``: each test's wall and CPU
seconds without the shared fixtures it set up or tore down, and each shared fixture's own) and
prints, sorted by CPU: by file (tests, wall, CPU; a shared fixture counts in the file that defines
it, as a row ``<file>::<fixture>`` in the by-test table), then the top tests and fixtures.
Wall seconds are a worker's, so they add up to more than the suite's wall under xdist.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

PROFILE = Path(__file__).resolve().parents[1] / "profile.json"


def load(path: Path) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float, int]]]:
    """(by test: (wall, cpu)), (by shared fixture: (wall, cpu, set-ups)) from ``path``. A profile
    recorded before set-ups were counted apart holds set-ups and teardowns together there (a run
    started once counted 2)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"{path} does not exist: record one with NW_RECORD_DURATIONS=1 tests/run FILE") from None
    except ValueError as e:
        raise SystemExit(f"{path} is not a profile ({e}): record it again with NW_RECORD_DURATIONS=1") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), dict):
        raise SystemExit(f"{path} has no 'tests' table: record it again with NW_RECORD_DURATIONS=1") from None
    tests = {k: (float(v[0]), float(v[1])) for k, v in data["tests"].items()}
    fixtures = {k: (float(v[0]), float(v[1]), int(v[2])) for k, v in (data.get("fixtures") or {}).items()}
    return tests, fixtures


def by_file(tests: dict[str, tuple[float, float]],
            fixtures: dict[str, tuple[float, float, int]]) -> list[tuple[str, int, float, float]]:
    """(file, tests, wall, cpu) sorted by CPU, highest first; fixtures count in their file."""
    files: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for nodeid, (wall, cpu) in tests.items():
        row = files[nodeid.split("::", 1)[0]]
        row[0] += 1
        row[1] += wall
        row[2] += cpu
    for key, (wall, cpu, _n) in fixtures.items():
        row = files[key.split("::", 1)[0]]
        row[1] += wall
        row[2] += cpu
    rows = [(f, int(n), w, c) for f, (n, w, c) in files.items()]
    return sorted(rows, key=lambda r: -r[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", nargs="?", type=Path, default=PROFILE)
    parser.add_argument("--top", type=int, default=25, help="tests and fixtures printed (default 25)")
    parser.add_argument("--files", type=int, default=30, help="files printed (default 30)")
    args = parser.parse_args()
    tests, fixtures = load(args.profile)
    total_wall = sum(w for w, _c in tests.values()) + sum(w for w, _c, _n in fixtures.values())
    total_cpu = sum(c for _w, c in tests.values()) + sum(c for _w, c, _n in fixtures.values())
    print(f"{args.profile}: {len(tests)} tests, {len(fixtures)} shared fixtures, "
          f"{total_wall:.0f} worker wall-s, {total_cpu:.0f} CPU-s")
    print(f"\nby file (top {args.files} by CPU)\n{'CPU-s':>8} {'%':>5} {'wall-s':>8} {'tests':>6}  file")
    for file, n, wall, cpu in by_file(tests, fixtures)[:args.files]:
        print(f"{cpu:8.1f} {100 * cpu / max(total_cpu, 1e-9):5.1f} {wall:8.1f} {n:6d}  {file}")
    rows = [(c, w, k, "") for k, (w, c) in tests.items()]
    rows += [(c, w, k, f" (shared, {n} set-up{'s' if n != 1 else ''})") for k, (w, c, n) in fixtures.items()]
    rows.sort(key=lambda r: -r[0])
    print(f"\nby test (top {args.top} by CPU)\n{'CPU-s':>8} {'wall-s':>8}  test")
    for cpu, wall, key, note in rows[:args.top]:
        print(f"{cpu:8.1f} {wall:8.1f}  {key}{note}")


if __name__ == "__main__":
    main()
