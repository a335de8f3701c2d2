"""Draining bad nodes, with caps so a wrong rule can never drain a cluster.

Two layers:

* Pure policy (no I/O, ``now`` passed in): :class:`DrainRecord`, :class:`DrainCaps`,
  :func:`decide` (may this node be drained now?), :func:`encode_state` / :func:`decode_state`
  (the remembered-drains file), :func:`still_excluded` (which remembered nodes the next job
  must avoid, given what ``scontrol show node`` says now).
* :class:`Drainer`, the thin I/O shell: runs ``scontrol update nodename=X state=drain
  reason="neuron-watch: <label>: <evidence>"``, keeps the state file on shared storage (written
  atomically: temp file + rename, under an advisory lock), and answers :meth:`Drainer.excluded_nodes`.

The state file is a convenience, never the truth: if it is lost or corrupt we start empty (and
say so); Slurm's own node state decides whether a remembered node is still drained by us. A node
an admin has resumed, or re-drained with their own reason, is no longer ours to exclude.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from neuron_watch.errors import PlatformError
from neuron_watch.slurm import slurmtext

log = logging.getLogger("neuron_watch.slurm.drain")

STATE_VERSION = 1
#: Records older than this are dropped when the file is rewritten (they no longer count for any cap).
KEEP_SECONDS = 7 * 24 * 3600.0


# ---------------------------------------------------------------------------------------------
# pure policy

@dataclass(frozen=True)
class DrainRecord:
    """One drain neuron-watch performed. ``wall`` is a Unix time (reported, and the hourly window)."""

    node: str
    job_id: str
    label: str
    reason: str
    wall: float


@dataclass(frozen=True)
class DrainCaps:
    """At most ``per_job`` drains for one job and ``per_hour`` in any ``window`` seconds, cluster-wide
    (as far as the shared state file reaches). 0 disables draining."""

    per_job: int = 2
    per_hour: int = 4
    window: float = 3600.0


@dataclass(frozen=True)
class DrainDecision:
    """Whether to drain, and the sentence that says why (printed and put in events)."""

    allowed: bool
    why: str


def decide(records: Sequence[DrainRecord], node: str, job_id: str, now: float, caps: DrainCaps) -> DrainDecision:
    """May ``node`` be drained for ``job_id`` at wall time ``now``?

    Refused when the node was already drained by us for this job, when the job already used its
    ``per_job`` drains, or when ``per_hour`` drains happened in the last ``window`` seconds.
    """
    if caps.per_job <= 0 or caps.per_hour <= 0:
        return DrainDecision(False, "draining is disabled (cap 0)")
    mine = [r for r in records if r.job_id == job_id]
    if any(r.node == node for r in mine):
        return DrainDecision(False, f"{node} was already drained for job {job_id}")
    if len(mine) >= caps.per_job:
        return DrainDecision(False, f"drain cap reached: job {job_id} already drained {len(mine)} node(s) "
                                    f"({slurmtext.nodes_of([r.node for r in mine])}); cap is {caps.per_job} per job")
    recent = [r for r in records if now - r.wall < caps.window]
    if len(recent) >= caps.per_hour:
        return DrainDecision(False, f"drain cap reached: {len(recent)} node(s) drained in the last "
                                    f"{caps.window / 60:.0f} min; cap is {caps.per_hour}")
    return DrainDecision(True, f"draining {node} ({len(mine) + 1}/{caps.per_job} for job {job_id}, "
                               f"{len(recent) + 1}/{caps.per_hour} this hour)")


def encode_state(records: Sequence[DrainRecord], now: float) -> str:
    """The state file's text (JSON); records older than :data:`KEEP_SECONDS` are dropped."""
    keep = [asdict(r) for r in records if now - r.wall < KEEP_SECONDS]
    return json.dumps({"version": STATE_VERSION, "drains": keep}, indent=1, sort_keys=True) + "\n"


def decode_state(text: str) -> tuple[list[DrainRecord], str | None]:
    """Records from the state file's text, and a problem description when (part of) it was unusable.

    Never raises: a corrupt file yields ``([], "why")`` so a lost file is survivable.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return [], f"not JSON ({exc})"
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION or not isinstance(doc.get("drains"), list):
        return [], f"unknown layout (expected version {STATE_VERSION} with a 'drains' list)"
    out: list[DrainRecord] = []
    bad = 0
    for item in doc["drains"]:
        try:
            out.append(DrainRecord(node=str(item["node"]), job_id=str(item["job_id"]), label=str(item["label"]),
                                   reason=str(item["reason"]), wall=float(item["wall"])))
        except (KeyError, TypeError, ValueError):
            bad += 1
    return out, (f"{bad} unreadable record(s) skipped" if bad else None)


def still_excluded(records: Sequence[DrainRecord], live: Mapping[str, slurmtext.NodeInfo]) -> list[str]:
    """Remembered nodes that Slurm still shows drained with one of our reasons, in record order.

    A node that was resumed, re-drained by someone else, or no longer exists is not excluded
    (``--exclude`` with an unknown node name makes srun/sbatch fail).
    """
    out: list[str] = []
    for r in records:
        info = live.get(r.node)
        if info is not None and info.drained_by_us and r.node not in out:
            out.append(r.node)
    return out


# ---------------------------------------------------------------------------------------------
# I/O shell

@dataclass(frozen=True)
class DrainOutcome:
    """What :meth:`Drainer.drain` did: ``drained`` True only when scontrol accepted the drain."""

    node: str
    drained: bool
    reason: str
    message: str


class Drainer:
    """Drain nodes through ``scontrol`` within caps, remembering them in ``state_file``.

    Args:
        state_file: the remembered-drains JSON on shared storage, or None (then caps count only
            drains of this Drainer's lifetime and nothing is remembered across jobs).
        caps: the drain caps.
        scontrol: the scontrol executable (a full path in hooks, which get no PATH).
        env: environment for scontrol (``SLURM_CONF`` ...); default ``os.environ``.
        timeout: seconds for each scontrol call.
    """

    def __init__(self, state_file: str | Path | None, caps: DrainCaps | None = None, *, scontrol: str = "scontrol",
                 env: Mapping[str, str] | None = None, timeout: float = 20.0) -> None:
        self.state_file = Path(state_file) if state_file else None
        self.caps = caps or DrainCaps()
        self.scontrol = scontrol
        self.env = dict(os.environ if env is None else env)
        self.timeout = timeout
        self._memory: list[DrainRecord] = []

    # -- scontrol --------------------------------------------------------------------------------
    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([self.scontrol, *args], env=self.env, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PlatformError(f"`scontrol {' '.join(args)}` failed: {exc}",
                                "check that scontrol is installed and slurmctld answers (`scontrol ping`)") from exc

    def show_nodes(self, names: Sequence[str] = ()) -> dict[str, slurmtext.NodeInfo]:
        """``scontrol show node`` (all, or ``names``) parsed; raises PlatformError when scontrol fails."""
        args = ["show", "node"] + ([slurmtext.join_nodelist(names)] if names else [])
        r = self._run(*args)
        if r.returncode != 0:
            raise PlatformError(f"`scontrol {' '.join(args)}` exited {r.returncode}: {r.stderr.strip()}",
                                "check SLURM_CONF and that slurmctld is up (`scontrol ping`)")
        return {n.name: n for n in slurmtext.parse_nodes(r.stdout)}

    # -- state file ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.state_file is None:
            yield
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.state_file.with_name(self.state_file.name + ".lock"), "a") as lock:
            # Serialises read-modify-write between nodes/jobs; on filesystems without flock
            # support this is advisory only, and the rename below still never leaves a torn file.
            with contextlib.suppress(OSError):
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def load(self) -> list[DrainRecord]:
        """Remembered drains; a missing or corrupt file gives [] (a corrupt one is kept aside and logged)."""
        if self.state_file is None:
            return list(self._memory)
        try:
            text = self.state_file.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("drain state %s unreadable (%s); starting empty", self.state_file, exc)
            return []
        records, problem = decode_state(text)
        if problem:
            log.warning("drain state %s: %s; continuing with %d record(s)", self.state_file, problem, len(records))
            if not records:
                aside = self.state_file.with_name(f"{self.state_file.name}.corrupt-{int(time.time())}")
                with contextlib.suppress(OSError):
                    self.state_file.rename(aside)
        return records

    def save(self, records: Sequence[DrainRecord], now: float) -> None:
        """Write the state atomically (temp file in the same directory, fsync, rename)."""
        if self.state_file is None:
            self._memory = list(records)
            return
        text = encode_state(records, now)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.state_file.name}.", dir=self.state_file.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.state_file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    # -- actions ---------------------------------------------------------------------------------
    def drain(self, node: str, job_id: str, label: str, evidence: str, now: float | None = None) -> DrainOutcome:
        """Drain ``node`` with our reason if the caps allow and it is not drained already.

        Never raises for a refused or failed drain: the outcome says what happened (callers report it).
        """
        now = time.time() if now is None else now
        reason = slurmtext.format_drain_reason(label, evidence)
        with self._locked():
            records = self.load()
            decision = decide(records, node, job_id, now, self.caps)
            if not decision.allowed:
                log.warning("not draining %s: %s", node, decision.why)
                return DrainOutcome(node, False, reason, decision.why)
            try:
                current = self.show_nodes([node]).get(node)
            except PlatformError as exc:
                current = None
                log.warning("could not read %s's state before draining (%s); trying the drain anyway", node, exc)
            if current is not None and current.drained:
                msg = f"{node} is already drained ({current.reason or 'no reason'}); left as it is"
                log.info(msg)
                return DrainOutcome(node, False, reason, msg)
            try:
                r = self._run("update", f"nodename={node}", "state=drain", f"reason={reason}")
            except PlatformError as exc:
                return DrainOutcome(node, False, reason, str(exc))
            if r.returncode != 0:
                msg = f"scontrol refused to drain {node} (exit {r.returncode}): {r.stderr.strip()}"
                log.error(msg)
                return DrainOutcome(node, False, reason, msg)
            records.append(DrainRecord(node=node, job_id=job_id, label=label, reason=reason, wall=now))
            try:
                self.save(records, now)
            except OSError as exc:  # the drain happened; only the memory of it is lost
                log.warning("drained %s but could not write %s: %s", node, self.state_file, exc)
            log.warning("drained %s: %s (%s)", node, reason, decision.why)
            return DrainOutcome(node, True, reason, decision.why)

    def excluded_nodes(self) -> list[str]:
        """Nodes the next job should exclude: remembered by us and still drained with our reason.

        Raises:
            PlatformError: scontrol could not be asked (unknown is not "nothing to exclude").
        """
        records = self.load()
        if not records:
            return []
        live = self.show_nodes()
        return still_excluded(records, live)
