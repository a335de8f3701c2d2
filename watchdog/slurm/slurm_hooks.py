"""``neuron-watch slurm prolog|epilog``: node-side Slurm hooks.

    neuron-watch slurm prolog [--observe-only] [--config FILE] [--json]
    neuron-watch slurm epilog [--config FILE]

Slurm runs these (through the thin ``slurm/prolog`` and ``slurm/epilog`` scripts) as root with no
PATH and no HOME, with ``SLURM_JOB_ID``, ``SLURMD_NODENAME`` and ``SLURM_NODELIST`` set (node-side
hooks get no ``SLURM_JOB_NODELIST``).

**prolog**: runs the health checks of :mod:`neuron_watch.slurm.health` within a time budget (default
10 s; ParallelCluster allows the whole prolog 180 s). A failed check prints the reason and exits 1,
so Slurm drains the node (``Reason=Prolog error``) and requeues or cancels the job; before that we
also try ``scontrol update ... state=drain reason="neuron-watch: health: <evidence>"`` (within the
drain caps) so the node says *why*. ``--observe-only`` (or ``observe_only = true``) reports and
always exits 0. Prints the time the checks took. neuron-watch's own problems (a bad config file,
a bug) are reported and exit 0: they must never drain every node of a cluster.

**epilog**: kills what the job left behind on this node (processes whose environment carries this
``SLURM_JOB_ID`` and this node's ``SLURMD_NODENAME``; other hooks are spared): SIGTERM, one
deadline, SIGKILL. Soft problems never fail it; only a process surviving SIGKILL does (exit 1, so
Slurm drains the node: an unkillable process may still hold a NeuronCore).

Configuration: a TOML file (``--config``, default ``/etc/neuron-watch/slurm.toml`` if present);
see docs/slurm.md for every key. Unknown keys are an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import ConfigError, NeuronWatchError, UsageError
from neuron_watch.slurm import health
from neuron_watch.slurm.drain import DrainCaps, Drainer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_CONFIG = "/etc/neuron-watch/slurm.toml"
#: Where scontrol lives on plain Slurm, ParallelCluster and HyperPod (hooks get no PATH).
SCONTROL_DIRS = ("/opt/slurm/bin", "/usr/bin", "/usr/local/bin", "/usr/sbin")


@dataclass(frozen=True)
class HookConfig:
    """Settings of the Slurm hooks (the TOML file's ``[health]``, ``[drain]``, ``[epilog]`` tables)."""

    budget: float = 10.0
    root: str = "/"
    instance_type: str | None = None
    fqdn: str | None = None
    skip: tuple[str, ...] = ()
    observe_only: bool = False
    state_file: str | None = None
    per_job: int = 2
    per_hour: int = 4
    scontrol: str | None = None
    stop_timeout: float = 10.0
    artifacts_dir: str | None = None  # where the epilog keeps evidence of failed jobs (None: not kept)
    core_dump_dir: str = "/tmp/neuron-core-dump"  # the runtime's default
    evidence_budget: float = 20.0  # seconds the epilog may spend collecting evidence
    extra: dict[str, Any] = field(default_factory=dict)


_KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "health": {"budget": (int, float), "root": str, "instance_type": str, "fqdn": str, "skip": list,
               "observe_only": bool},
    "drain": {"state_file": str, "per_job": int, "per_hour": int, "scontrol": str},
    "epilog": {"stop_timeout": (int, float), "artifacts_dir": str, "core_dump_dir": str,
               "evidence_budget": (int, float)},
}


def parse_hook_config(text: str, origin: str) -> HookConfig:
    """Parse the hooks' TOML text.

    Raises:
        ConfigError: not TOML, an unknown table/key, or a value of the wrong type (the message
            names the file and the key).
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}", "fix the file (see docs/slurm.md)") from exc
    values: dict[str, Any] = {}
    for table, body in doc.items():
        if table not in _KEYS or not isinstance(body, dict):
            raise ConfigError(f"{origin}: unknown table [{table}]", f"known tables: {', '.join(_KEYS)}")
        for key, value in body.items():
            want = _KEYS[table].get(key)
            if want is None:
                raise ConfigError(f"{origin}: unknown key {table}.{key}",
                                  f"known keys in [{table}]: {', '.join(_KEYS[table])}")
            if not isinstance(value, want) or (isinstance(value, bool) and want in (int, (int, float))):
                raise ConfigError(f"{origin}: {table}.{key} has the wrong type ({type(value).__name__})",
                                  "see docs/slurm.md for the expected type")
            values[key] = value
    if "skip" in values:
        unknown = [s for s in values["skip"] if s not in health.ALL_CHECKS]
        if unknown:
            raise ConfigError(f"{origin}: health.skip names unknown check(s) {unknown}",
                              f"checks are {', '.join(health.ALL_CHECKS)}")
        values["skip"] = tuple(values["skip"])
    if values.get("budget", 1) <= 0:
        raise ConfigError(f"{origin}: health.budget must be positive", "use e.g. 10")
    return HookConfig(**values)


def load_hook_config(path: str | None) -> HookConfig:
    """The hook config from ``path``, or the default file if it exists, or built-in defaults."""
    if path is None:
        if not Path(DEFAULT_CONFIG).is_file():
            return HookConfig()
        path = DEFAULT_CONFIG
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read hook config {path}: {exc.strerror}", "check --config") from exc
    return parse_hook_config(text, path)


def find_scontrol(configured: str | None, env: Mapping[str, str]) -> str:
    """scontrol's path: the configured one, else PATH, else the usual install dirs."""
    if configured:
        return configured
    found = shutil.which("scontrol", path=env.get("PATH") or os.pathsep.join(SCONTROL_DIRS))
    return found or next((f"{d}/scontrol" for d in SCONTROL_DIRS if os.access(f"{d}/scontrol", os.X_OK)),
                         "scontrol")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``neuron-watch slurm prolog|epilog`` arguments."""
    parser.add_argument("hook", choices=("prolog", "epilog"), help="which Slurm hook is running")
    parser.add_argument("--observe-only", action="store_true",
                        help="prolog: report failed checks but exit 0 (the node is not drained)")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help=f"hook settings (TOML; default {DEFAULT_CONFIG} if it exists)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")


def _say(msg: str) -> None:
    # Slurm puts a failing prolog's output into slurmd's log ("prolog failed: rc:1 output:...").
    print(f"neuron-watch {msg}", flush=True)


def run_prolog(cfg: HookConfig, observe_only: bool, as_json: bool, env: Mapping[str, str]) -> int:
    """Run the checks; on failure try our own drain reason, then exit 1 (unless observing only)."""
    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "?"
    t0 = time.monotonic()
    facts = health.gather(cfg.root, cfg.budget, instance_type=cfg.instance_type, fqdn=cfg.fqdn)
    results = health.evaluate(facts, cfg.skip)
    took = time.monotonic() - t0
    failed = health.failures(results)
    observe_only = observe_only or cfg.observe_only
    if as_json:
        print(json.dumps({"hook": "prolog", "node": node, "job": job, "seconds": round(took, 4),
                          "observe_only": observe_only,
                          "checks": [r.__dict__ for r in results], "notes": list(facts.notes)}), flush=True)
    for r in results:
        if r.status != health.NA:
            _say(f"prolog {node} job {job}: {r.name} {r.status}: {r.detail}")
    verdict = "FAIL" if failed else "ok"
    _say(f"prolog {node} job {job}: {len(results)} checks in {took:.3f} s (budget {cfg.budget:g} s): {verdict}"
         + (" (observe-only)" if failed and observe_only else ""))
    if not failed or observe_only:
        return 0
    evidence = health.summary(results)
    drainer = Drainer(cfg.state_file, DrainCaps(per_job=cfg.per_job, per_hour=cfg.per_hour),
                      scontrol=find_scontrol(cfg.scontrol, env), env=env, timeout=min(10.0, cfg.budget))
    outcome = drainer.drain(node, job, "health", evidence)
    _say(f"prolog {node} job {job}: drain: {outcome.message}" + (f" [{outcome.reason}]" if outcome.drained else ""))
    print(f"neuron-watch prolog failed on {node}: {evidence}", file=sys.stderr, flush=True)
    return 1


# ---------------------------------------------------------------------------------------------
# epilog

def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead (reaped lazily by pid 1)


def job_leftovers(job: str, node: str | None) -> list[int]:
    """Pids of processes of ``job`` on ``node`` still running: ``SLURM_JOB_ID`` (or ``SLURM_JOBID``)
    in their environment, not a Slurm hook (``SLURM_SCRIPT_CONTEXT``), not us or our ancestors, and
    not another node's task (``SLURMD_NODENAME``, which matters where several slurmd share a host)."""
    spare = _ancestors(os.getpid())
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) in spare:
            continue
        env = _environ(int(p.name))
        if not env or job not in (env.get("SLURM_JOB_ID"), env.get("SLURM_JOBID")):
            continue
        if "SLURM_SCRIPT_CONTEXT" in env:
            continue
        if node and env.get("SLURMD_NODENAME", node) != node:
            continue
        out.append(int(p.name))
    return sorted(out)


def kill_pids(pids: list[int], timeout: float) -> tuple[list[int], list[int]]:
    """SIGTERM ``pids``, wait until one deadline, SIGKILL the rest. Returns (needed SIGKILL, survived)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    killed = [p for p in pids if _alive(p)]
    for pid in killed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(_alive(p) for p in killed):
        time.sleep(0.05)
    return killed, [p for p in killed if _alive(p)]


def run_epilog(cfg: HookConfig, env: Mapping[str, str]) -> int:
    """Kill the job's leftovers on this node; exit 1 only if one survives SIGKILL."""
    node = env.get("SLURMD_NODENAME")
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job:
        _say("epilog: no SLURM_JOB_ID in the environment; nothing to clean up")
        return 0
    exit_code = env.get("SLURM_JOB_EXIT_CODE2") or env.get("SLURM_JOB_EXIT_CODE")
    if exit_code and exit_code not in ("0", "0:0"):
        # Evidence first (core dumps, kernel messages, device state), then the cleanup.
        _say(f"epilog {node} job {job}: job ended with {exit_code}")
        collect_failed_job(cfg, env, job, node or "node", exit_code)
    try:
        pids = job_leftovers(job, node)
    except OSError as exc:  # soft: report, never fail the epilog for it
        _say(f"epilog {node} job {job}: could not scan /proc: {exc}")
        return 0
    if not pids:
        _say(f"epilog {node} job {job}: no leftover processes")
        return 0
    killed, survived = kill_pids(pids, cfg.stop_timeout)
    _say(f"epilog {node} job {job}: stopped {len(pids)} leftover process(es) {pids}"
         + (f"; SIGKILL needed for {killed}" if killed else ""))
    if survived:
        print(f"neuron-watch epilog on {node}: pid(s) {survived} of job {job} survived SIGKILL", file=sys.stderr)
        return 1
    return 0


def collect_failed_job(cfg: HookConfig, env: Mapping[str, str], job: str, node: str, exit_code: str) -> Path | None:
    """Keep this node's evidence of a failed job (kernel messages, neuron-ls, ECC counters, runtime core
    dumps, compiler logs, versions) under ``<artifacts_dir>/<job>/``; bounded, never raises.

    Returns the bundle directory, or None when ``[epilog] artifacts_dir`` is not set or it failed.
    """
    if not cfg.artifacts_dir:
        return None
    from neuron_watch.node.bundle import flush_held
    from neuron_watch.node.evidence import IncidentContext, capture_node_bundle

    restart = env.get("SLURM_JOB_RESTART_COUNT") or env.get("SLURM_RESTART_COUNT") or "0"
    ctx = IncidentContext(
        job_id=job,
        generation=int(restart) if restart.isdigit() else 0,
        incident=int(restart) if restart.isdigit() else 0,
        node=node,
        run_dir=Path(cfg.artifacts_dir) / job,
        verdict={"label": "other_crash", "reason": f"Slurm job {job} ended with {exit_code} (epilog)"},
        env=dict(env),
        core_dump_dir=Path(cfg.core_dump_dir),
        deadline_s=cfg.evidence_budget,
        work_dirs=[Path(env["SLURM_JOB_WORK_DIR"])] if env.get("SLURM_JOB_WORK_DIR") else [],
    )
    try:
        bundle = capture_node_bundle(ctx)
    except Exception as exc:  # soft: an epilog failure would drain the node
        _say(f"epilog {node} job {job}: evidence not kept: {exc}")
        return None
    if bundle.held and not flush_held(bundle):  # an epilog cannot wait for a full disk: say what it lost
        _say(f"epilog {node} job {job}: {len(bundle.held)} file(s) of the evidence not written, the disk refused "
             f"them: {', '.join(sorted(bundle.held))}")
    _say(f"epilog {node} job {job}: evidence kept in {bundle.bundle_dir} ({len(bundle.missing)} item(s) missing)")
    return bundle.bundle_dir


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Entry point of ``neuron-watch slurm``."""
    del config  # the hooks have their own settings file; the watchdog options do not apply
    env = dict(os.environ)
    if args.hook == "prolog":
        # Fail open on our own problems: a broken config or a bug in neuron-watch must not drain
        # every node of the cluster. Only a failed health check fails the prolog.
        try:
            cfg = load_hook_config(args.config)
            return run_prolog(cfg, args.observe_only, args.json, env)
        except NeuronWatchError as exc:
            _say(f"prolog: checks not run: {exc}")
            return 0
        except Exception as exc:
            _say(f"prolog: internal error, checks not run: {exc!r}")
            return 0
    if args.hook == "epilog":
        if args.observe_only:
            raise UsageError("--observe-only applies to the prolog only", "drop it from the epilog command")
        try:
            return run_epilog(load_hook_config(args.config), env)
        except Exception as exc:  # an epilog failure drains the node; soft problems must not
            _say(f"epilog: internal error ignored: {exc!r}")
            return 0
    raise UsageError(f"unknown hook {args.hook!r}", "use prolog or epilog")
