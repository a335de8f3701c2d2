"""The watchdog's typed configuration, loaded in one place.

Precedence: built-in defaults < ``NEURON_WATCH_<NAME>`` environment variables < command-line flags.
Every option in :data:`OPTIONS` gets both a flag (``--hang-timeout``) and a variable
(``NEURON_WATCH_HANG_TIMEOUT``); a bad value names where it came from and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from neuron_watch.errors import ConfigError
from neuron_watch.redact import mask_urls, mask_value, shown_url

ENV_PREFIX = "NEURON_WATCH_"


#: CloudWatch's limit on a namespace's length
MAX_CLOUDWATCH_NAMESPACE = 255


def check_namespace(text: str) -> str:
    """A CloudWatch namespace we may write (``--cloudwatch``): 1..255 printable ASCII characters,
    not ``AWS/`` (Amazon's own services').

    Raises:
        ValueError: it is none; the message says what CloudWatch takes.
    """
    ns = text.strip()
    if not 1 <= len(ns) <= MAX_CLOUDWATCH_NAMESPACE or not all(" " <= c <= "~" for c in ns):
        raise ValueError(f"not a CloudWatch namespace: {text!r} (1 to {MAX_CLOUDWATCH_NAMESPACE} printable ASCII "
                         "characters, e.g. NeuronWatch)")
    if ns.startswith("AWS/"):
        raise ValueError(f"{ns!r}: namespaces under AWS/ are Amazon's own services'; choose another, e.g. "
                         "NeuronWatch")
    return ns


def env_name(flag: str) -> str:
    """``--hang-timeout`` -> ``NEURON_WATCH_HANG_TIMEOUT``."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _seconds(text: str, allow_zero: bool = False) -> float:
    """A duration: ``90``, ``90s``, ``15m``, ``2h`` (positive, or also 0 with ``allow_zero``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smh]?)\s*", text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90, 90s, 15m, 2h)")
    value = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"duration must be positive: {text!r}")
    return value


def _seconds_or_zero(text: str) -> float:
    return _seconds(text, allow_zero=True)


def _send_interval(text: str) -> float:
    """Seconds between two sends to CloudWatch: at least 1 (its finest resolution)."""
    value = _seconds(text)
    if value < 1:
        raise ValueError(f"{text!r} is under a second, CloudWatch's finest resolution (use 1 or more, e.g. 60)")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or more: {text!r}")
    return value


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r} (use 1/0, true/false)")


def _regex(text: str) -> str:
    re.compile(text)
    return text


def _log_level(text: str) -> str:
    t = text.strip().lower()
    if t not in ("warning", "info", "debug"):
        raise ValueError(f"not a log level: {text!r} (use warning, info or debug)")
    return t


def _host_port(text: str) -> str:
    if not re.fullmatch(r"[^:\s]+:\d{1,5}", text):
        raise ValueError(f"not HOST:PORT: {text!r}")
    # five digits also match 65536..99999, which no socket can bind or reach
    if not 1 <= int(text.rsplit(":", 1)[1]) <= 65535:
        raise ValueError(f"port out of range in {text!r} (use 1..65535)")
    return text


def _http_url(text: str) -> str:
    """An http(s) URL with a host (``--notify``); the error shows only its scheme and host."""
    parts = urlsplit(text.strip())
    parts.port  # noqa: B018 -- a port that is not one raises ValueError here, not at the first message
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {shown_url(text)}")
    return text.strip()


def _artifacts(text: str) -> str:
    """A directory or ``s3://bucket[/prefix]``; an S3 URI carrying credentials is refused.

    An S3 URI names a bucket and a prefix, nothing else: boto3 takes credentials from the
    environment, a profile or the instance's role. ``s3://KEY:SECRET@bucket/p`` would otherwise put
    the secret in the ranks' core-dump prefix, every upload's URI and error, and the bundles."""
    if text.startswith("s3://"):
        bucket = text[len("s3://"):].split("/", 1)[0]
        if "@" in bucket or ":" in bucket:
            raise ValueError(
                f"{mask_urls(text)}: an S3 URI carries no credentials (user info before the bucket is refused); "
                "give them as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the instance's role, and "
                "use s3://BUCKET/PREFIX")
    return text


@dataclass(frozen=True)
class Option:
    """One watchdog option: flag, field name, parser, default and help."""

    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    is_flag: bool = False  # a store_true switch
    env_aliases: tuple[str, ...] = ()  # other variables read when NEURON_WATCH_<NAME> is not set

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str:
        return env_name(self.flag)


OPTIONS: tuple[Option, ...] = (
    Option("--run-dir", str, None, "where logs, events and incidents go (default ./neuron-watch-runs/<job-id>)", "DIR"),
    Option("--job-id", str, None, "job id (default: $SLURM_JOB_ID, else a time-based id)", "ID"),
    Option("--hang-timeout", _seconds, None,
           "no rank progressing and none compiling for this long = hang (default: calibrated from step times)",
           "SECONDS"),
    Option("--startup-timeout", _seconds, 1800.0,
           "grace before the first progress line, compile time excluded", "SECONDS"),
    Option("--compile-timeout", _seconds, 7200.0, "longest a single graph compile may take", "SECONDS"),
    Option("--save-timeout", _seconds, 3600.0,
           "longest a synced checkpoint save (NxD: 'synced saving of checkpoint ... began') may hold the ranks",
           "SECONDS"),
    Option("--max-restarts", _count, 3, "restarts before giving up (0 = never restart)", "N"),
    Option("--stop-timeout", _seconds, 15.0, "SIGTERM -> SIGKILL deadline when stopping the job", "SECONDS"),
    Option("--checkpoint-dir", str, None, "where the job writes checkpoints; restarts use the newest complete one",
           "DIR"),
    Option("--checkpoint-marker", str, None,
           "file inside a checkpoint directory that marks it complete (NxD: done); empty = every entry matching "
           "--checkpoint-glob (default: recognise NxD, Hugging Face, Lightning, NeMo, DCP, DeepSpeed, Megatron)",
           "NAME"),
    Option("--checkpoint-glob", str, None,
           "which entries of --checkpoint-dir are checkpoints (default: all; completeness recognised per "
           "framework unless --checkpoint-marker is given)", "GLOB"),
    Option("--evidence-timeout", _seconds, 60.0, "bound on capturing an incident's evidence", "SECONDS"),
    Option("--tool-path", str, None, "directories (PATH syntax) where py-spy, neuron-ls, neuron-det and dmesg are "
           "looked up for evidence (default: PATH, then neuron-watch's own Python's bin)", "DIRS"),
    Option("--upload-timeout", _seconds, 120.0,
           "bound on uploading one incident before the restart goes ahead (the rest is retried at exit)",
           "SECONDS"),
    Option("--upload-retry-timeout", _seconds_or_zero, 300.0,
           "bound on retrying, as neuron-watch exits, the uploads that failed during the run", "SECONDS"),
    Option("--artifacts", _artifacts, None, "where incident bundles go: a directory or s3://bucket/prefix "
           "(default <run-dir>/incidents)", "URI"),
    Option("--progress-regex", _regex, None,
           "a regex matching your progress lines (named group 'step' read if present)", "REGEX"),
    Option("--dry-run", _bool, False, "print the environment and the exact command, then exit", is_flag=True),
    Option("--no-neuron-env", _bool, False, "do not set the Neuron debugging environment", is_flag=True),
    Option("--prewarm-after", _seconds_or_zero, 60.0,
           "once the ranks have trained this long, start the next generation's torchrun ahead, so that a "
           "restart does not wait for its start-up (~1.5 CPU-s; ~200 MB while it waits)", "SECONDS"),
    Option("--no-prewarm", _bool, False, "never start the next generation's torchrun ahead", is_flag=True),
    Option("--no-rank-probe", _bool, False,
           "do not start torch's worker server in the ranks (its flight recorder tells a rank whose collectives "
           "still complete from a hung one, whatever it prints)", is_flag=True),
    Option("--quiet", _bool, False, "do not echo rank output on the console (it is still logged)", is_flag=True),
    Option("--progress", _bool, False,
           "one status line redrawn on a terminal (generation, step, steps/s, state, silent ranks); "
           "only when stderr is a terminal", is_flag=True),
    Option("--log-level", _log_level, "info",
           "what neuron-watch says on stderr: warning (failures, give-up, end), info (every decision), "
           "debug (every event); --quiet does not silence it", "LEVEL", env_aliases=("NEURON_WATCH_LOG",)),
    Option("--coordinator", _host_port, None, "HOST:PORT of the job's coordinator (multi-node)", "HOST:PORT"),
    Option("--coordinator-silence", _seconds, 30.0,
           "an agent that hears nothing from its coordinator this long says it is lost (its ranks keep running "
           "while they progress; docs/multinode.md)", "SECONDS"),
    Option("--coordinator-loss-timeout", _seconds, 600.0,
           "an agent whose coordinator is lost this long, and whose own ranks are silent past the hang timeout "
           "(or ended), stops them and exits 3; on the coordinator: how long it waits for a lost node before "
           "ending the job instead of relaunching onto it", "SECONDS"),
    Option("--absent-node-wait", _seconds, 60.0,
           "multi-node: when every node that joined has a failed launcher and others never joined (a "
           "rendezvous that timed out), wait this long for them before the job ends with that launcher's code",
           "SECONDS"),
    Option("--secret-file", str, None, "file (mode 0600) with the per-job secret for coordinator/agent links",
           "FILE"),
    Option("--mqtt", str, None, "publish events to mqtt[s]://[user:pass@]host:port/<topic-prefix>", "URL"),
    Option("--notify", _http_url, None,
           "POST a short JSON message (a chat webhook's {\"text\"} plus fields) to this http(s) URL on an "
           "incident, a give-up and the end of the job", "URL"),
    Option("--metrics", _host_port, None,
           "serve the job's metrics for Prometheus at http://HOST:PORT/metrics (where the coordinator runs)",
           "HOST:PORT"),
    Option("--metrics-final-wait", _seconds_or_zero, 30.0,
           "at the job's end, how long --metrics may keep serving so that each scraper that has been scraping "
           "fetches the final values once (it waits about two of that scraper's intervals; not after a signal; "
           "0 = stop serving at once)", "SECONDS"),
    Option("--cloudwatch", check_namespace, None,
           "send the job's metrics to CloudWatch (PutMetricData) in this namespace, with the AWS credential "
           "chain and region; another endpoint from AWS_ENDPOINT_URL_CLOUDWATCH or AWS_ENDPOINT_URL "
           "(where the coordinator runs)", "NAMESPACE"),
    Option("--cloudwatch-interval", _send_interval, 60.0,
           "seconds between two sends to CloudWatch (also at once after an incident, a restart and the end); "
           "under 60 s they are stored at one-second (high) resolution", "SECONDS"),
    Option("--drain-state", str, None,
           "srun: file on shared storage remembering the nodes neuron-watch drained (excluded by later jobs "
           "until resumed); default: remembered only for this job", "FILE"),
    Option("--drain-per-job", _count, 2, "srun: at most this many nodes drained per job (0 = never drain)", "N"),
    Option("--drain-per-hour", _count, 4,
           "srun: at most this many nodes drained per hour, cluster-wide as far as --drain-state reaches", "N"),
)


@dataclass(frozen=True)
class WatchConfig:
    """Effective configuration of one ``neuron-watch`` run."""

    run_dir: str | None = None
    job_id: str | None = None
    hang_timeout: float | None = None
    startup_timeout: float = 1800.0
    compile_timeout: float = 7200.0
    save_timeout: float = 3600.0
    max_restarts: int = 3
    stop_timeout: float = 15.0
    checkpoint_dir: str | None = None
    checkpoint_marker: str | None = None  # None: not given (automatic detection), unlike "" (any entry)
    checkpoint_glob: str | None = None
    evidence_timeout: float = 60.0
    tool_path: str | None = None
    upload_timeout: float = 120.0
    upload_retry_timeout: float = 300.0
    artifacts: str | None = None
    progress_regex: str | None = None
    dry_run: bool = False
    no_neuron_env: bool = False
    prewarm_after: float = 60.0
    no_prewarm: bool = False
    no_rank_probe: bool = False
    quiet: bool = False
    progress: bool = False
    log_level: str = "info"
    coordinator: str | None = None
    coordinator_silence: float = 30.0
    coordinator_loss_timeout: float = 600.0
    absent_node_wait: float = 60.0
    secret_file: str | None = None
    mqtt: str | None = None
    notify: str | None = None
    metrics: str | None = None
    metrics_final_wait: float = 30.0
    cloudwatch: str | None = None
    cloudwatch_interval: float = 60.0
    drain_state: str | None = None
    drain_per_job: int = 2
    drain_per_hour: int = 4
    #: where each option given came from (field -> flag or variable); not part of the config's value
    origins: dict[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def redacted(self) -> dict[str, Any]:
        """The config as a dict with credentials removed (for logs and events)."""
        out = dataclasses.asdict(self)
        out.pop("origins", None)
        if out.get("notify"):  # a webhook's secret is its path: only the scheme and host are shown
            out["notify"] = shown_url(out["notify"])
        # every URL's user info, by structure (a password may hold a raw '@'; redact.py)
        return {k: mask_value(v) for k, v in out.items()}


def add_watch_options(parser: argparse.ArgumentParser) -> None:
    """Add every :data:`OPTIONS` flag to ``parser``; defaults are resolved later by :func:`load_config`."""
    group = parser.add_argument_group("watchdog options (each also NEURON_WATCH_<NAME>)")
    for opt in OPTIONS:
        if opt.is_flag:
            group.add_argument(opt.flag, dest=opt.dest, action="store_const", const="1", default=None,
                               help=f"{opt.help} [{opt.env}]")
        else:
            group.add_argument(opt.flag, dest=opt.dest, metavar=opt.metavar, default=None,
                               help=f"{opt.help} [{opt.env}]")


def load_config(cli_values: Mapping[str, str | None], env: Mapping[str, str]) -> WatchConfig:
    """Resolve defaults < environment < CLI into a :class:`WatchConfig`.

    Args:
        cli_values: raw strings from the command line by field name (None = not given).
        env: the process environment.

    Raises:
        ConfigError: a value does not parse; the message names the flag or variable.
    """
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for opt in OPTIONS:
        raw, origin = cli_values.get(opt.dest), opt.flag
        for name in (opt.env, *opt.env_aliases):
            if raw is None and name in env:
                raw, origin = env[name], name
        if raw is None:
            values[opt.dest] = opt.default
            continue
        try:
            values[opt.dest] = opt.parse(raw)
            origins[opt.dest] = origin
        except (ValueError, re.error) as exc:
            raise ConfigError(f"{origin}: {exc}", f"see `neuron-watch --help` for {opt.flag}") from exc
    unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in _KNOWN_ENV)
    if unknown:
        raise ConfigError(
            f"unknown variable(s): {', '.join(unknown)}",
            "known ones are " + ", ".join(sorted(_KNOWN_ENV)),
        )
    return WatchConfig(**values, origins=origins)


# Variables neuron-watch sets for the ranks or reads for itself without a flag.
_RUNTIME_ENV = {
    "NEURON_WATCH_CHECKPOINT",
    "NEURON_WATCH_RESTART_COUNT",
    "NEURON_WATCH_RUN_DIR",
    "NEURON_WATCH_INSTANCE",
    "NEURON_WATCH_SECRET",
    "NEURON_WATCH_NODE",
    "NEURON_WATCH_GENERATION",
    "NEURON_WATCH_PROBE_DIR",  # the ranks' rank-probe sockets (rank_bootstrap/sitecustomize.py)
    "NEURON_WATCH_DEBUG",
    "NEURON_WATCH_HOST_COORDINATOR",  # 0: this node never hosts the coordinator (a standalone one does)
    "NEURON_WATCH_BIN",  # slurm/prolog, slurm/epilog: which neuron-watch to run
}
_KNOWN_ENV = {o.env for o in OPTIONS} | {a for o in OPTIONS for a in o.env_aliases} | _RUNTIME_ENV
