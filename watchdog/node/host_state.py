"""The node's own state for an incident's bundle: the kernel's Neuron driver lines (``dmesg``),
the devices (``neuron-ls -j``), the devices' hardware counters (sysfs: ECC and the like) and the
versions of Python, the kernel and the packages a training job depends on.

A tool missing, forbidden (``dmesg`` in an unprivileged container) or overrunning is said in the
manifest, never fatal to the capture.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from neuron_watch.node.bundle import Recorder

SYSFS_NEURON = Path("/sys/devices/virtual/neuron_device")
PACKAGES = (
    "neuron-watch", "torch", "torch-neuronx", "torch-xla", "libneuronxla", "neuronx-cc", "neuronx-distributed",
    "neuronx-distributed-training", "transformers", "optimum-neuron", "numpy", "boto3", "py-spy",
)


def kernel_lines(lines: Iterable[str]) -> list[str]:
    """The Neuron driver lines of a kernel log: ``NEURON_HW_ERR=...`` and ``neuron:`` lines. Pure."""
    return [ln.rstrip("\n") for ln in lines if "NEURON_HW_ERR" in ln or "neuron:" in ln.lower()]


def collect_kernel(rec: Recorder) -> None:
    res = rec.tool("kernel.txt", ["dmesg", "--ctime"])
    if res is None:
        return
    rc, out, err = res
    if rc != 0:
        # Unprivileged containers often forbid dmesg (kernel.dmesg_restrict): recorded, not fatal.
        rec.miss("kernel.txt", f"dmesg failed (exit {rc}): {err.strip()[:200] or 'no output'}")
        return
    lines = kernel_lines(out.splitlines())
    rec.write("kernel.txt", "\n".join(lines) + ("\n" if lines else ""))
    rec.notes["kernel_lines"] = len(lines)


def collect_neuron_ls(rec: Recorder) -> None:
    res = rec.tool("neuron-ls.json", ["neuron-ls", "-j"])
    if res is None:
        return
    rc, out, err = res
    if rc == 0:
        rec.write("neuron-ls.json", out)
    else:
        rec.miss("neuron-ls.json", f"neuron-ls -j exit {rc}: {err.strip()[:200]}")


def collect_sysfs(rec: Recorder, sysfs_root: Path) -> None:
    counters: dict[str, dict[str, int | str]] = {}
    for dev in sorted(sysfs_root.glob("neuron*")):
        hw = dev / "stats" / "hardware"
        if not hw.is_dir():
            continue
        vals: dict[str, int | str] = {}
        for f in sorted(hw.iterdir()):
            try:
                text = f.read_text().strip()
                vals[f.name] = int(text) if text.lstrip("-").isdigit() else text
            except OSError as exc:
                vals[f.name] = f"unreadable: {exc.strerror or exc}"
        counters[dev.name] = vals
    if counters:
        rec.write("sysfs-ecc.json", json.dumps(counters, indent=2, sort_keys=True))
    else:
        rec.miss("sysfs-ecc.json", f"no Neuron devices under {sysfs_root}")


def collect_versions(rec: Recorder) -> None:
    pkgs: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = None
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "kernel": platform.release(),
        "packages": pkgs,
    }
    rec.write("versions.json", json.dumps(info, indent=2, sort_keys=True))
