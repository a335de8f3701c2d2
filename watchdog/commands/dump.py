"""``neuron-watch dump``: a drop-in ``neuron-dump`` hook for the Neuron runtime's core dumps.

The runtime runs ``/opt/aws/neuron/bin/neuron-dump`` on a fatal error with documented flags::

    neuron-dump --neff-name N --neff-uuid U --date-time D --pid P --tid T --log-id L \\
                --instance-id I --cluster-id C --error-location E --error-code X \\
                --local-output-dir DIR [--s3-output-prefix s3://bucket/prefix]

The runtime itself never uploads. This hook (1) runs the original AWS script first where one is
installed (``neuron-dump.aws`` beside the hook), with the same arguments, bounded by a timeout;
(2) writes ``neuron-watch-dump.json`` (the flags, unknown flags, the original's exit code) into
the local output directory; (3) uploads that directory to ``--s3-output-prefix`` through
:mod:`neuron_watch.outputs.storage` (bounded retries, resumable, verified). Flags a newer runtime adds are
kept and recorded, never fatal.

``neuron-watch dump --install [--prefix DIR]`` writes the hook to ``DIR/neuron-dump`` (default
``/opt/aws/neuron/bin``) and keeps an existing original as ``DIR/neuron-dump.aws``. A later
``aws-neuronx-tools`` upgrade overwrites the hook: run ``--install`` again (e.g. in the prolog).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import UsageError
from neuron_watch.node.procs import run_bounded
from neuron_watch.outputs.storage import open_storage, upload_tree

log = logging.getLogger("neuron_watch.commands.dump")

DEFAULT_PREFIX = "/opt/aws/neuron/bin"
HOOK_NAME = "neuron-dump"
ORIGINAL_NAME = "neuron-dump.aws"
HOOK_MARKER = "# neuron-watch neuron-dump hook"
#: The runtime's documented flags (values are strings; the runtime formats them).
RUNTIME_FLAGS = (
    "neff-name", "neff-uuid", "date-time", "pid", "tid", "log-id", "instance-id", "cluster-id",
    "error-location", "error-code", "local-output-dir", "s3-output-prefix",
)
ORIGINAL_TIMEOUT_S = 300.0
UPLOAD_DEADLINE_S = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runtime's flags, ``--install``/``--prefix``, and our own bounds. Unknown flags are kept."""
    for flag in RUNTIME_FLAGS:
        parser.add_argument(f"--{flag}", dest=f"rt_{flag.replace('-', '_')}", default=None, metavar="VALUE")
    parser.add_argument("--install", action="store_true", help="install this hook as DIR/neuron-dump")
    parser.add_argument("--prefix", dest="dump_prefix", default=DEFAULT_PREFIX,
                        help=f"directory of the runtime's neuron-dump (default {DEFAULT_PREFIX})")
    parser.add_argument("--original", dest="dump_original", default=None,
                        help="the original AWS neuron-dump to run first (default: DIR/neuron-dump.aws)")
    parser.add_argument("--original-timeout", dest="dump_original_timeout", type=float,
                        default=ORIGINAL_TIMEOUT_S, help="seconds the original script may take")
    parser.add_argument("--upload-timeout", dest="dump_upload_timeout", type=float,
                        default=UPLOAD_DEADLINE_S, help="seconds the upload may take in all")

    # A newer runtime may pass flags we do not know. argparse would reject them; instead they are
    # stashed in ``args.dump_unknown`` (the subparser action calls this instance's
    # parse_known_args, so wrapping it here keeps the change local to `dump`).
    original = parser.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extra = original(args, namespace)
        ns.dump_unknown = list(getattr(ns, "dump_unknown", []) or []) + list(extra)
        return ns, []

    setattr(parser, "parse_known_args", parse_known_args)  # noqa: B010 - instance-level wrap


def hook_script(python: str) -> str:
    """The installed hook: runs the original first (``--original``), then ``neuron-watch dump``."""
    here = '"$(dirname "$0")"'
    return (
        "#!/bin/sh\n"
        f"{HOOK_MARKER} (installed by `neuron-watch dump --install`; the original is {ORIGINAL_NAME})\n"
        f"exec {shlex.quote(python)} -m neuron_watch.cli dump --original {here}/{ORIGINAL_NAME} \"$@\"\n"
    )


def install(prefix: Path, python: str = sys.executable) -> dict[str, str]:
    """Install the hook at ``prefix/neuron-dump``; keep an existing original as ``neuron-dump.aws``.

    Idempotent: re-installing over our own hook keeps the saved original untouched.

    Raises:
        UsageError: ``prefix`` does not exist or is not writable.
    """
    if not prefix.is_dir():
        raise UsageError(f"{prefix} is not a directory",
                         "install aws-neuronx-tools first, or pass --prefix DIR (created by you)")
    hook, orig = prefix / HOOK_NAME, prefix / ORIGINAL_NAME
    done: dict[str, str] = {"hook": str(hook)}
    try:
        if hook.exists() and HOOK_MARKER not in hook.read_text(errors="replace"):
            if orig.exists():
                # Both exist: a package upgrade put a new original in place; it wins over the old copy.
                orig.unlink()
            os.replace(hook, orig)
            done["original"] = str(orig)
        elif orig.exists():
            done["original"] = str(orig)
        tmp = prefix / f".{HOOK_NAME}.tmp-{os.getpid()}"
        tmp.write_text(hook_script(python))
        tmp.chmod(0o755)
        os.replace(tmp, hook)
    except PermissionError as exc:
        raise UsageError(f"cannot write {hook}: {exc.strerror}",
                         "run the install as root (e.g. in the prolog)") from exc
    return done


def _runtime_argv(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for flag in RUNTIME_FLAGS:
        v = getattr(args, f"rt_{flag.replace('-', '_')}", None)
        if v is not None:
            out += [f"--{flag}", str(v)]
    return out + list(getattr(args, "dump_unknown", []) or [])


def _find_original(args: argparse.Namespace) -> Path | None:
    cand = Path(args.dump_original) if args.dump_original else Path(args.dump_prefix) / ORIGINAL_NAME
    return cand if cand.is_file() and os.access(cand, os.X_OK) else None


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Install the hook, or handle one runtime invocation. Returns 0, or 1 if the upload failed."""
    if args.install:
        done = install(Path(args.dump_prefix))
        print(f"installed the neuron-watch hook at {done['hook']}"
              + (f"; the original is kept as {done['original']}" if "original" in done else
                 "; no original neuron-dump was there (core dumps go through neuron-watch only)"))
        return 0
    unknown = list(getattr(args, "dump_unknown", []) or [])
    if unknown:
        log.warning("neuron-dump: keeping unknown flags from a newer runtime: %s", " ".join(unknown))
    local = args.rt_local_output_dir
    if not local:
        raise UsageError("neuron-dump was called without --local-output-dir",
                         "this hook is meant to be run by the Neuron runtime; see docs/evidence.md")
    local_dir = Path(local)
    local_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "time": time.time(),
        "flags": {f: getattr(args, f"rt_{f.replace('-', '_')}") for f in RUNTIME_FLAGS},
        "unknown_flags": unknown,
        "original": None,
    }
    original = _find_original(args)
    if original is not None:
        # The AWS script first: it captures the hardware state while the device is still as it was.
        rc, out, err, timed_out = run_bounded([str(original), *_runtime_argv(args)], args.dump_original_timeout)
        record["original"] = {"path": str(original), "returncode": rc, "timed_out": timed_out,
                              "stdout_tail": out[-2000:], "stderr_tail": err[-2000:]}
        if rc != 0 or timed_out:
            log.warning("neuron-dump: the original %s exited %s%s", original, rc, " (timed out)" if timed_out else "")
    (local_dir / "neuron-watch-dump.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    prefix = args.rt_s3_output_prefix
    if not prefix:
        log.info("neuron-dump: no --s3-output-prefix; the core dump stays in %s", local_dir)
        return 0
    if not prefix.startswith("s3://"):
        raise UsageError(f"--s3-output-prefix {prefix!r} is not an s3:// URI",
                         "set NEURON_RT_S3_CORE_DUMP_PREFIX=s3://bucket/prefix/%d-%c")
    storage = open_storage(prefix, os.environ)
    tree = upload_tree(storage, local_dir, "", deadline_s=args.dump_upload_timeout)
    s = tree.summary()
    if tree.ok:
        log.info("neuron-dump: %d files (%d bytes) in %s (%d already there)", s["files"], s["bytes"], prefix,
                 s["skipped"])
        return 0
    log.error("neuron-dump: %d of %d files not uploaded to %s: %s; they stay in %s",
              s["failed"], s["files"], prefix, s["error"], local_dir)
    return 1
