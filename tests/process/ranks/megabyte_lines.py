"""A rank that prints megabyte lines (a tensor or a config dumped on one line), then finishes.

    megabyte_lines.py --lines 6 --size 1048576

Each line is ``rank <R> line <i> `` then ``size`` bytes of filler; the last line is
``training done rank <R>``. No torch: 16 of these run on two cores.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=6)
    ap.add_argument("--size", type=int, default=(1 << 20) - 64)
    a = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    filler = "m" * a.size
    out = sys.stdout
    for i in range(a.lines):
        out.write(f"rank {rank} line {i} {filler}\n")
        out.flush()
    out.write(f"training done rank {rank}\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
