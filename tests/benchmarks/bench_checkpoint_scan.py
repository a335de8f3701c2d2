"""Checkpoint-directory scan cost (prints figures; no pass/fail).

    .venv/bin/python tests/benchmarks/bench_checkpoint_scan.py [--entries N] [--big-gb G]

Builds, in a temp dir, N Hugging Face ``checkpoint-K`` directories (each with the files the
Trainer writes) plus N Lightning ``.ckpt`` files, and one sparse G-GB ``.ckpt`` (its tail is a
zip end record, so a scan that read it whole would take seconds and G GB of I/O), then times
:func:`find_checkpoint` (wall and CPU, least of 5) and counts the bytes it reads.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from neuron_watch.recovery.checkpoint_scan import find_checkpoint

EOCD = b"PK\x05\x06" + b"\x00" * 18


def build(root: Path, n: int, big_gb: float) -> None:
    for k in range(n):
        d = root / f"checkpoint-{k * 10}"
        d.mkdir()
        for name in ("config.json", "model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
            (d / name).write_bytes(b"x")
        (d / "trainer_state.json").write_text(json.dumps({"global_step": k * 10}) + "\n")
    lk = root / "lightning"
    lk.mkdir()
    for k in range(n):
        (lk / f"epoch=0-step={k * 10}.ckpt").write_bytes(b"PK\x03\x04" + b"\x00" * 1000 + EOCD)
    with open(lk / "epoch=9-step=99999.ckpt", "wb") as f:
        f.truncate(int(big_gb * 2**30) - len(EOCD))  # sparse
        f.seek(0, os.SEEK_END)
        f.write(EOCD)


def measure(directory: str) -> tuple[float, float, int, str]:
    read_bytes = 0
    real_open = builtins.open

    class Counting:
        def __init__(self, f: Any) -> None:
            self.f = f

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *a: object) -> None:
            self.f.close()

        def read(self, n: int = -1) -> Any:
            nonlocal read_bytes
            data = self.f.read(n)
            read_bytes += len(data)
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

    builtins.open = lambda *a, **k: Counting(real_open(*a, **k))  # type: ignore[assignment]
    try:
        best_wall = best_cpu = float("inf")
        found = None
        for _ in range(5):
            read_bytes = 0
            w, c = time.perf_counter(), time.process_time()
            found = find_checkpoint(directory)
            best_wall = min(best_wall, time.perf_counter() - w)
            best_cpu = min(best_cpu, time.process_time() - c)
    finally:
        builtins.open = real_open
    chosen = found.chosen.path if found and found.chosen else "none"
    return best_wall, best_cpu, read_bytes, chosen


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--entries", type=int, default=200)
    p.add_argument("--big-gb", type=float, default=8.0)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, a.entries, a.big_gb)
        print(f"load average {os.getloadavg()[0]:.2f}")
        for label, d in (("hf", root), ("lightning", root / "lightning")):
            wall, cpu, nbytes, chosen = measure(str(d))
            print(f"{label:9s} {a.entries} entries: {wall * 1000:.1f} ms wall, {cpu * 1000:.1f} ms CPU, "
                  f"{nbytes} bytes read; chosen {Path(chosen).name}")


if __name__ == "__main__":
    main()
