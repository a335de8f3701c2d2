"""Node health checks for the Slurm prolog (and a preflight before a job starts).

Split in two, so every decision is testable without the hardware:

* :func:`gather` (I/O) collects :class:`HostFacts` from sysfs, ``/dev``, ``/proc``, ``neuron-ls -j``
  and the host name, within a time budget; anything it could not read within the budget is left
  ``None`` (unknown).
* :func:`evaluate` (pure) turns facts into one :class:`CheckResult` per check.

Statuses: ``ok``, ``fail`` (the prolog exits non-zero), ``warn`` (reported, never fails a node),
``n/a`` (the check does not apply: no Neuron hardware on this host, or an instance type we have no
table entry for), ``unknown`` (could not be observed in time; reported, not counted as healthy).

``root`` prefixes every path (``<root>/sys/...``, ``<root>/dev``, ``<root>/proc``), so a test or a
site can point the checks at a prepared tree; ``neuron-ls`` is only run when ``root`` is ``/``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

OK, FAIL, WARN, NA, UNKNOWN = "ok", "fail", "warn", "n/a", "unknown"

#: Neuron devices per instance type (neuron-ls rows; trn2 with LNC=2 still has 16 devices).
NEURON_DEVICES: dict[str, int] = {
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16,
    "trn2.3xlarge": 1, "trn2.48xlarge": 16, "trn2u.48xlarge": 16,
    "inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12,
    "inf1.xlarge": 1, "inf1.2xlarge": 1, "inf1.6xlarge": 4, "inf1.24xlarge": 16,
}
#: EFA devices per instance type (AWS's instance specifications).
EFA_DEVICES: dict[str, int] = {
    "trn1.2xlarge": 0, "trn1.32xlarge": 8, "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16, "trn2u.48xlarge": 16,
    "inf2.xlarge": 0, "inf2.8xlarge": 0, "inf2.24xlarge": 0, "inf2.48xlarge": 0,
}
#: The Neuron runtime's "Name resolution failure" for FQDNs longer than this (nrt-troubleshoot).
FQDN_MAX = 63

ALL_CHECKS = ("driver", "devices", "efa", "stale_process", "fork_safe", "ipv6_link_local", "fqdn")


@dataclass(frozen=True)
class HostFacts:
    """What :func:`gather` saw. ``None`` = could not be observed (budget spent, unreadable)."""

    instance_type: str | None = None
    driver_loaded: bool | None = None  # /sys/module/neuron present
    neuron_devices: int | None = None  # /sys/devices/virtual/neuron_device/neuron* (or /dev/neuron*)
    efa_devices: int | None = None  # /sys/class/infiniband/* (EFA shows up as rdmap*)
    neuron_holders: tuple[tuple[int, str], ...] | None = None  # (pid, command) holding /dev/neuron*
    kernel: str | None = None  # uname -r
    ipv6_disabled: bool | None = None  # net.ipv6.conf.all.disable_ipv6
    ipv6_scopes: tuple[str, ...] | None = None  # per non-lo address: "link" / "global" / ...
    fqdn: str | None = None
    gathered_in: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)  # what could not be read, and why


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict; ``detail`` is the sentence shown to the admin (and the drain evidence)."""

    name: str
    status: str
    detail: str


def kernel_tuple(release: str) -> tuple[int, int] | None:
    """``5.10.219-208.866.amzn2.x86_64`` -> (5, 10); None when it does not start with N.N."""
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_neuron_host(f: HostFacts) -> bool:
    """A host where the Neuron checks apply: a Neuron instance type, the driver, or Neuron devices."""
    it = f.instance_type or ""
    return bool(f.driver_loaded or f.neuron_devices or it.startswith(("trn", "inf")))


def evaluate(f: HostFacts, skip: Sequence[str] = ()) -> list[CheckResult]:
    """Decide every check from ``f`` (pure). ``skip`` names checks to report as ``n/a`` (skipped)."""
    neuron = is_neuron_host(f)
    it = f.instance_type
    out: list[CheckResult] = []

    def add(name: str, status: str, detail: str) -> None:
        out.append(CheckResult(name, NA if name in skip else status,
                               f"skipped by configuration ({detail})" if name in skip else detail))

    # driver
    if not neuron:
        add("driver", NA, "no Neuron instance type, driver or device on this host")
    elif f.driver_loaded is None:
        add("driver", UNKNOWN, "could not read /sys/module")
    elif f.driver_loaded:
        add("driver", OK, "neuron driver loaded")
    else:
        add("driver", FAIL, f"neuron driver not loaded on a {it or 'Neuron'} host (no /sys/module/neuron); "
                            "install/load aws-neuronx-dkms (`modprobe neuron`)")
    # device count
    want = NEURON_DEVICES.get(it or "")
    if not neuron:
        add("devices", NA, "no Neuron hardware")
    elif f.neuron_devices is None:
        add("devices", UNKNOWN, "could not count Neuron devices")
    elif want is None:
        add("devices", NA if f.neuron_devices else FAIL,
            f"{f.neuron_devices} Neuron device(s); instance type {it or 'unknown'} has no expected count")
    elif f.neuron_devices < want:
        add("devices", FAIL, f"{f.neuron_devices} of {want} Neuron devices visible on {it}")
    else:
        add("devices", OK, f"{f.neuron_devices} Neuron devices ({it})")
    # EFA
    want_efa = EFA_DEVICES.get(it or "")
    if not neuron or want_efa is None:
        add("efa", NA, f"no EFA expectation for instance type {it or 'unknown'}")
    elif f.efa_devices is None:
        add("efa", UNKNOWN, "could not count EFA devices (/sys/class/infiniband)")
    elif f.efa_devices < want_efa:
        add("efa", FAIL, f"{f.efa_devices} of {want_efa} EFA devices visible on {it}")
    else:
        add("efa", OK, f"{f.efa_devices} EFA devices ({it})")
    # stale holders of a NeuronCore (the prolog runs before the job: any holder is stale)
    if not neuron:
        add("stale_process", NA, "no Neuron hardware")
    elif f.neuron_holders is None:
        add("stale_process", UNKNOWN, "could not list processes holding /dev/neuron*")
    elif f.neuron_holders:
        who = ", ".join(f"pid {p} ({c[:40]})" for p, c in f.neuron_holders[:4])
        add("stale_process", FAIL, f"{len(f.neuron_holders)} process(es) still hold a NeuronCore: {who}")
    else:
        add("stale_process", OK, "no process holds a NeuronCore")
    # kernel vs FI_EFA_FORK_SAFE (libfabric on < 5.15 needs it; neuron-watch's env policy sets it)
    kt = kernel_tuple(f.kernel or "")
    if not neuron or not f.efa_devices:
        add("fork_safe", NA, "no EFA devices")
    elif kt is None:
        add("fork_safe", UNKNOWN, f"kernel release {f.kernel!r} not understood")
    elif kt < (5, 15):
        add("fork_safe", WARN, f"kernel {f.kernel} < 5.15: jobs need FI_EFA_FORK_SAFE=1 "
                               "(neuron-watch sets it; plain torchrun jobs must export it)")
    else:
        add("fork_safe", OK, f"kernel {f.kernel} >= 5.15: FI_EFA_FORK_SAFE not needed")
    # IPv6 link-local bootstrap pitfall (nrt-troubleshoot: bootstrap picks a link-local address)
    if not neuron:
        add("ipv6_link_local", NA, "no Neuron hardware")
    elif f.ipv6_disabled is None or f.ipv6_scopes is None:
        add("ipv6_link_local", UNKNOWN, "could not read IPv6 settings")
    elif f.ipv6_disabled:
        add("ipv6_link_local", OK, "IPv6 disabled")
    elif f.ipv6_scopes and all(s == "link" for s in f.ipv6_scopes):
        add("ipv6_link_local", WARN, "IPv6 on with link-local addresses only: older Neuron runtimes bootstrap "
                                     "on them; set net.ipv6.conf.all.disable_ipv6=1")
    else:
        add("ipv6_link_local", OK, "no link-local-only IPv6 setup")
    # FQDN length (the Neuron runtime fails to resolve FQDNs over 63 characters)
    if not neuron:
        add("fqdn", NA, "no Neuron hardware")
    elif f.fqdn is None:
        add("fqdn", UNKNOWN, "could not read the host name")
    elif len(f.fqdn) > FQDN_MAX:
        add("fqdn", FAIL, f"FQDN is {len(f.fqdn)} > {FQDN_MAX} characters ({f.fqdn[:40]}...): the Neuron "
                          "runtime cannot resolve it; use an IP for MASTER_ADDR or shorter names "
                          "(ParallelCluster: Dns/UseEc2Hostnames: true)")
    else:
        add("fqdn", OK, f"FQDN {len(f.fqdn)} characters")
    return out


def failures(results: Sequence[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status == FAIL]


def summary(results: Sequence[CheckResult]) -> str:
    """Short evidence for a drain reason: ``devices: 0 of 16 ...; fqdn: ...``."""
    return "; ".join(f"{r.name}: {r.detail}" for r in failures(results))


# ---------------------------------------------------------------------------------------------
# I/O: gathering facts

def _count(path: Path, pattern: str) -> int | None:
    try:
        return sum(1 for p in path.iterdir() if re.fullmatch(pattern, p.name))
    except FileNotFoundError:
        return 0
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _instance_type(root: Path) -> str | None:
    # The Neuron driver publishes it; DMI product_name does not hold the EC2 type, so without the
    # driver the caller must pass it (config `instance_type`) if they want the tables applied.
    for p in sorted((root / "sys/devices/virtual/neuron_device").glob("neuron*/info/architecture/instance_type")):
        v = _read(p)
        if v:
            return v
    return None


def _holders_proc(root: Path, deadline: float, me: int) -> tuple[tuple[int, str], ...] | None:
    out: list[tuple[int, str]] = []
    try:
        pids = [p for p in (root / "proc").iterdir() if p.name.isdigit()]
    except OSError:
        return None
    for pdir in pids:
        if time.monotonic() > deadline:
            return None
        pid = int(pdir.name)
        if pid == me:
            continue
        try:
            fds = list((pdir / "fd").iterdir())
        except OSError:
            continue  # gone, or not ours to read
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if re.fullmatch(r"/dev/neuron\d+", target):
                cmd = (_read(pdir / "cmdline") or "").replace("\0", " ").strip() or "?"
                out.append((pid, cmd))
                break
    return tuple(out)


def _holders_neuron_ls(budget: float) -> tuple[tuple[int, str], ...] | None:
    exe = next((p for p in ("/opt/aws/neuron/bin/neuron-ls", "/usr/bin/neuron-ls", "/usr/local/bin/neuron-ls")
                if os.access(p, os.X_OK)), None)
    if exe is None or budget <= 0:
        return None
    try:
        r = subprocess.run([exe, "-j"], capture_output=True, text=True, timeout=budget, check=False)
        devices = json.loads(r.stdout)
        return tuple((int(p["pid"]), str(p.get("command", "?"))) for d in devices
                     for p in d.get("neuron_processes", []) or [])
    except (OSError, subprocess.TimeoutExpired, ValueError, TypeError, KeyError):
        return None


def _ipv6(root: Path) -> tuple[bool | None, tuple[str, ...] | None]:
    dis = _read(root / "proc/sys/net/ipv6/conf/all/disable_ipv6")
    disabled = None if dis is None else dis == "1"
    text = _read(root / "proc/net/if_inet6")
    if text is None:
        return disabled, (() if disabled else None)
    scopes = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[5] != "lo":
            scopes.append({"20": "link", "00": "global", "40": "site", "10": "host"}.get(parts[3], parts[3]))
    return disabled, tuple(scopes)


def gather(root: str | Path = "/", budget: float = 10.0, *, instance_type: str | None = None,
           fqdn: str | None = None, env: Mapping[str, str] | None = None) -> HostFacts:
    """Collect :class:`HostFacts`, spending at most about ``budget`` seconds.

    Args:
        root: filesystem root for sysfs/dev/proc (``/`` in production).
        budget: seconds; the slow parts (neuron-ls, the /proc scan) stop at the deadline and leave
            their fact unknown.
        instance_type: overrides the type read from the Neuron driver's sysfs.
        fqdn: overrides ``socket.getfqdn()``.
    """
    del env  # reserved: facts do not depend on the caller's environment today
    t0 = time.monotonic()
    deadline = t0 + budget
    root = Path(root)
    notes: list[str] = []
    it = instance_type or _instance_type(root)
    driver = (root / "sys/module/neuron").exists()
    ndev = _count(root / "sys/devices/virtual/neuron_device", r"neuron\d+")
    if not ndev:
        ndev = _count(root / "dev", r"neuron\d+")
    efa = _count(root / "sys/class/infiniband", r".+")
    holders: tuple[tuple[int, str], ...] | None = None
    if driver or ndev:
        if str(root) == "/":
            holders = _holders_neuron_ls(max(0.0, deadline - time.monotonic() - 0.5))
        if holders is None:
            holders = _holders_proc(root, deadline, os.getpid())
            if holders is None:
                notes.append("process scan stopped at the time budget")
    kernel = _read(root / "proc/sys/kernel/osrelease") or (os.uname().release if str(root) == "/" else None)
    disabled, scopes = _ipv6(root)
    if fqdn is None:
        try:
            fqdn = socket.getfqdn()
        except OSError as exc:
            notes.append(f"getfqdn failed: {exc}")
    facts = HostFacts(instance_type=it, driver_loaded=driver, neuron_devices=ndev, efa_devices=efa,
                      neuron_holders=holders, kernel=kernel, ipv6_disabled=disabled, ipv6_scopes=scopes,
                      fqdn=fqdn, notes=tuple(notes))
    return replace(facts, gathered_in=time.monotonic() - t0)
