"""Open the envelopes that log shippers, schedulers and terminals wrap around every line: pure, no I/O.

A failure users paste is often not the program's own text but that text *inside an envelope*
added to every line by whatever carried it: Docker's json-file driver, the container runtime's
CRI log, ``kubectl logs --prefix``/``--timestamps``, ``docker compose``, a CloudWatch export, a
fluent-bit/fluentd record, a JSON logger, journald, a CI runner, ``ts``. Left closed, the
envelope hides what the classifier reads (``[rank3]:`` and signatures anchored at the start of a
line, tracebacks JSON-escaped onto one line, long lines cut in pieces).

:class:`EnvelopeReader` recognises a log's envelope **once, from its first lines** (never from one
ambiguous line: the envelope must be on most of the first :data:`DETECT_LINES` non-blank lines, and
a weak form -- a bare prefix or time a program could print itself -- on at least two; one line is
enough only for a form no program prints as its own text: a JSON record with a shipper's ``log``
key or a logger's level/time/name beside its message, a CRI record, ``[pod/p/c] ``, a syslog
``host program[pid]: ``), and then
yields each line's inner message, with the envelope's time stamp and the name of the process or
pod where the envelope has one. A log with no envelope pays for the detection once and nothing
per line after it (:attr:`EnvelopeReader.plain`). Pieces of one long line (CRI ``P`` records,
json-file records without their final ``\\n``) are joined back into the line.

Each form is read as its writer writes it (cited beside it). What a program prints itself stays
what it is: a metrics line ``{"loss": nan, ...}`` is not an envelope (no message key, and not
JSON), a line that starts with a date is not stripped of it unless the date is an envelope's
machine stamp (RFC 3339 with 7 or 9 fraction digits: the kubelet's and GitHub's; or 6 and a ``Z``: Rust
tracing's, Cloud Logging's; not a logger's ``2024-05-01 12:00:00,123`` or ``...T12:00:00.123Z``) on most of the
first lines.
"""

from __future__ import annotations

import datetime
import enum
import json
import re
from collections.abc import Sequence
from typing import Generic, TypeVar

#: How many of a log's first non-blank lines decide its envelope.
DETECT_LINES = 8
#: The share of those lines an envelope must be on (a header line or two above it is common:
#: ``Attaching to trainer-1``, a ``$ kubectl logs ...`` command pasted with the output).
DETECT_SHARE = 0.75

#: Lines remembered for the decision at most (blank lines do not count towards DETECT_LINES).
_HEAD_MAX = 256

K = TypeVar("K")
#: One inner record: (the caller's key of the line it came from, its text, the envelope's time
#: stamp as text or None, the process or pod the envelope names or None).
Opened = tuple[K, str, str | None, str | None]
#: What :meth:`Envelope.open` reads of one line: (text, stamp, who, partial: the line continues in
#: the next record).
_Parts = tuple[str, str | None, str | None, bool]


class Envelope:
    """One envelope format: a name, how many first lines it needs, and how a line is opened."""

    name = ""
    #: lines that must carry it before it is believed (1: the form cannot be a program's own text)
    min_lines = 2

    def open(self, line: str) -> _Parts | None:
        """The line's inner message and what the envelope says of it, or None (not this envelope)."""
        raise NotImplementedError

    def hits(self, sample: Sequence[str]) -> list[str]:
        """The lines of ``sample`` (a log's first non-blank lines) this envelope is on."""
        return [ln for ln in sample if self.open(ln) is not None]

    def primed(self, sample: Sequence[str]) -> Envelope:
        """This envelope, told what the detected lines showed (e.g. whether its records keep their
        newline); by default itself."""
        return self


# -- JSON records ------------------------------------------------------------------------------------

#: The key that holds the message, in the order they are tried: Docker's json-file driver
#: (moby ``daemon/logger/jsonfilelog/jsonlog``: ``{"log":"...\\n","stream":"stderr","time":"..."}``)
#: and fluent-bit's/fluentd's tail of it (``log``), Python's JSON loggers and fluentd (``message``),
#: zap, zerolog, logrus, pino (``msg``), journald's JSON (``MESSAGE``). structlog's ``event`` is not
#: read: a program's own JSON often names its records so.
_MESSAGE_KEYS = ("log", "message", "msg", "MESSAGE")
#: Keys only a logger or a shipper puts beside the message: a JSON object with a ``msg`` and one of
#: these is a log record, not a program's own JSON output.
_RECORD_KEYS = frozenset({
    "level", "levelname", "severity", "lvl", "loglevel", "time", "ts", "timestamp", "@timestamp", "asctime",
    "date", "stream", "logger", "name", "caller", "logtag", "kubernetes", "container_name", "_HOSTNAME",
    "PRIORITY", "__REALTIME_TIMESTAMP",
})
#: Where the record's time is, in the order tried (a string stamp, or epoch seconds as a number).
_TIME_KEYS = ("time", "timestamp", "@timestamp", "ts", "asctime", "date", "t")
_LEVEL_KEYS = ("level", "levelname", "severity", "lvl", "loglevel")
#: Levels that say the record is an error: said in the text (``ERROR ...``), where the classifier's
#: reader of failure forms sees it, because the message itself rarely repeats it.
_ERROR_LEVELS = frozenset({"error", "err", "fatal", "critical", "crit", "panic", "dpanic", "alert", "emerg",
                           "emergency"})
#: Fields loggers put an exception or stack in beside the message (zap ``error``/``stacktrace``,
#: python-json-logger ``exc_info``, structlog ``exception``, logrus ``error``).
_ERROR_KEYS = ("error", "err", "exc_info", "exception", "stacktrace", "stack_trace", "stack")


def _epoch_stamp(value: float) -> str | None:
    # zap's "ts" and fluent-bit's "date" are epoch seconds; milliseconds where they are that large
    seconds = value / 1000.0 if value > 1e11 else value
    try:
        return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, OSError, ValueError):
        return None


def _record(line: str) -> dict[str, object] | None:
    if not (line.startswith("{") and line.rstrip().endswith("}")):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


class JsonRecords(Envelope):
    """One JSON object a line holding the message under a known key (see :data:`_MESSAGE_KEYS`)."""

    name = "json"
    #: one record is enough: a message under a shipper's key, or beside a logger's level, time or
    #: name, is a log record whatever wrote it (a program's metrics have no message key)
    min_lines = 1

    def __init__(self, keeps_newline: bool = False) -> None:
        #: the records end their message with "\\n" (Docker's json-file does): one without it is a
        #: piece of a longer line (the copier's 16 KiB buffer, moby ``daemon/logger/copier.go``)
        self.keeps_newline = keeps_newline

    @staticmethod
    def _key(obj: dict[str, object]) -> str | None:
        for key in _MESSAGE_KEYS:
            if isinstance(obj.get(key), str):
                # "log" is a shipper's own key; the others are common words: a logger's record
                # has a level, a time or a logger name beside them
                if key == "log" or not _RECORD_KEYS.isdisjoint(obj):
                    return key
                return None
        return None

    def primed(self, sample: Sequence[str]) -> Envelope:
        texts = [obj.get("log") for obj in map(_record, sample) if obj is not None]
        return JsonRecords(any(isinstance(t, str) and t.endswith("\n") for t in texts))

    def open(self, line: str) -> _Parts | None:
        obj = _record(line)
        if obj is None:
            return None
        key = self._key(obj)
        if key is None:
            return None
        text = str(obj[key])
        partial = False
        tag = obj.get("logtag")  # fluent-bit's CRI parser keeps the CRI tag (P: a piece)
        if tag == "P":
            partial = True
        elif self.keeps_newline and key == "log":
            partial = not text.endswith("\n")
        if text.endswith("\n"):
            text = text[:-1]
        level = next((v for k in _LEVEL_KEYS if isinstance(v := obj.get(k), str)), None)
        if level is not None and level.lower() in _ERROR_LEVELS and not text.lstrip().upper().startswith(level.upper()):
            text = f"{level.upper()} {text}"
        for k in _ERROR_KEYS:
            extra = obj.get(k)
            if isinstance(extra, str) and extra and extra not in text:
                text = f"{text}\n{extra}"
        stamp: str | None = None
        for k in _TIME_KEYS:
            v = obj.get(k)
            if isinstance(v, str) and v:
                stamp = v
                break
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                stamp = _epoch_stamp(float(v))
                break
        who = None
        kube = obj.get("kubernetes")
        if isinstance(kube, dict) and isinstance(kube.get("pod_name"), str):
            who = f"{kube['pod_name']}/{kube.get('container_name', '')}"
        return text, stamp, who, partial


# -- prefixes ------------------------------------------------------------------------------------------


_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"


class Cri(Envelope):
    """The CRI container log (containerd, CRI-O; what the kubelet reads and ``/var/log/pods`` holds):
    ``2024-05-01T12:00:00.123456789Z stderr F message`` (kubelet ``pkg/kubelet/kuberuntime/logs``
    ``parseCRILog``: time, stream, tag, content; tag ``P`` is a piece of a line longer than the
    runtime's buffer, ``F`` ends it)."""

    name = "cri"
    min_lines = 1
    _rx = re.compile(r"(" + _RFC3339 + r") (?:stdout|stderr) ([PF])(?::\S*)? ?")

    def open(self, line: str) -> _Parts | None:
        m = self._rx.match(line)
        if m is None:
            return None
        return line[m.end():], m.group(1), None, m.group(2) == "P"


#: A terminal escape sequence (SGR colours above all): the tools that print an envelope colour it
#: when they write to a terminal (stern's pod and container names, ``aws logs tail``'s time and
#: stream, ``docker compose``'s service names), and a paste keeps the escapes.
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _match_coloured(rx: re.Pattern[str], line: str) -> tuple[int, dict[str, str | None]] | None:
    """``rx`` matched at the start of ``line`` read without its escape sequences: where the prefix
    ends in ``line`` (escapes just after it included) and its groups; None if it does not match."""
    kept: list[int] = []  # index in line of each character kept
    parts: list[str] = []
    pos = 0
    for esc in _ESCAPE.finditer(line):
        parts.append(line[pos:esc.start()])
        kept.extend(range(pos, esc.start()))
        pos = esc.end()
    parts.append(line[pos:])
    kept.extend(range(pos, len(line)))
    m = rx.match("".join(parts))
    if m is None:
        return None
    end = kept[m.end()] if m.end() < len(kept) else len(line)
    while (reset := _ESCAPE.match(line, end)) is not None:  # a colour reset right after the prefix
        end = reset.end()
    return end, m.groupdict()


class Prefix(Envelope):
    """A prefix before every line, removed; its groups name the time (``stamp``) and the process (``who``).
    The prefix is read through the colour escapes a terminal tool puts in it."""

    def __init__(self, name: str, rx: str, min_lines: int = 2) -> None:
        self.name = name
        self.min_lines = min_lines
        self._rx = re.compile(rx)

    def open(self, line: str) -> _Parts | None:
        m = self._rx.match(line)
        if m is not None:
            end, groups = m.end(), m.groupdict()
        elif "\x1b" in line and (found := _match_coloured(self._rx, line)) is not None:
            end, groups = found
        else:
            return None
        who = groups.get("who")
        if groups.get("pod") is not None:
            who = f"{groups['pod']}/{groups.get('container') or ''}"
        return line[end:], groups.get("stamp"), who, False


class Padded(Envelope):
    """A terminal's screen saved as text (``screen``'s hardcopy, ``tmux capture-pane -J``/``-N``, a
    copy of a terminal window): every line padded with spaces to the terminal's width, a line longer
    than the width wrapped onto the next rows (graphgpt-44's paste in the corpus, at 75 columns).
    The padding is removed, and a row that fills the width without padding (no trailing space, or
    one) joined with the next (it was cut there). Known only from the lines together: most of the first lines have the
    same length, at least :data:`PAD_MIN_WIDTH`, and at least two of them end in padding, two spaces or more (a
    log whose lines merely share a length never ends them so, nor a fixed-width table: sacct ends each row in
    the one space after its last column, which is no padding)."""

    name = "padded"

    def __init__(self, width: int = 0) -> None:
        self.width = width

    def hits(self, sample: Sequence[str]) -> list[str]:
        lengths = [len(ln) for ln in sample if len(ln) >= PAD_MIN_WIDTH]
        if not lengths:
            return []
        width = max(set(lengths), key=lengths.count)
        rows = [ln for ln in sample if len(ln) == width]
        return rows if sum(1 for ln in rows if ln.endswith("  ")) >= 2 else []

    def primed(self, sample: Sequence[str]) -> Envelope:
        return Padded(len(sample[0]))

    def open(self, line: str) -> _Parts | None:
        if not self.width:  # not primed: a row that may be padded (what a live reader holds back)
            return (line.rstrip(" "), None, None, False) if len(line) >= PAD_MIN_WIDTH and line.endswith("  ") else None
        if len(line) != self.width:
            return None
        if line.endswith("  "):  # padded: the line ends here
            return line.rstrip(" "), None, None, False
        # cut at the width, mid-word or just after a space (one space: a line of width - 1
        # characters padded by one is rarer than a cut after a word): it goes on in the next row
        return line, None, None, True


#: What only a collector's record holds as its message, never a program's own logging call: nothing, a
#: line that starts with spaces (a traceback's frame, a stack dump's), a traceback's head, an exception
#: line, a launcher's rank prefix, another record's head with its own time or glog letter; another
#: program's own line heads: a command's error ("srun: error: ", "<prog>: error: " of argparse or a linker),
#: a debugger's frame (gdb's "#14 0x00007f.. in <function> ()"), Ray's prefix of a worker's or the raylet's
#: line ("(Worker pid=6625) ", "(raylet, ip=10.0.3.179) ", python/ray/_private/log_monitor.py), with the
#: colour escape a terminal program puts before it (its ESC often lost in a paste: "[33m(raylet) ...").
_CARRIED = re.compile(r"$|\s|Traceback \(most recent call last\):|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): |"
                      r"\[(?:rank|default)\d+\]:|\d{4}-\d\d-\d\d[ T]\d\d:\d\d|[IWEF]\d{4} \d\d:\d\d|"
                      r"[\w.-]+: error: |#\d+ +0x[0-9a-f]+ in |(?:\x1b?\[[0-9;]*m)?\((?:raylet|[\w:]+ pid=\d+)[,)]")


class CollectorLogger(Prefix):
    """A program's output relayed line by line through a Python logger at a quiet level: each line of
    the child becomes the message of one record of the same logger (Airflow's SubprocessHook and
    BashOperator: ``[2024-01-01, 12:00:00 UTC] {subprocess.py:93} INFO - <line>``; a wrapper logging
    its child's stdout with the logging cookbook's ``%(asctime)s - %(name)s - %(levelname)s -
    %(message)s``). The record's level is the relay's, not the line's: left on, it hides the child's own
    exception or severity behind an INFO. A program's own records look the same, so the prefix is
    taken for a relay only when the first lines show one: the same logger and level on each, and a
    message no logging call makes (:data:`_CARRIED`); a short log (fewer than :data:`DETECT_LINES`
    non-blank lines, two of them relayed) needs no such line, a single relayed line is one."""

    def __init__(self, name: str, rx: str) -> None:
        super().__init__(name, rx, min_lines=1)

    def hits(self, sample: Sequence[str]) -> list[str]:
        found = [(ln, m) for ln in sample if (m := self._rx.match(ln)) is not None]
        if len({m.group("who") for _, m in found}) > 1:
            return []
        carried = any(_CARRIED.match(ln, m.end()) for ln, m in found)
        if (len(sample) >= DETECT_LINES or len(found) < 2) and not carried:
            return []
        return [ln for ln, _ in found]


#: The narrowest terminal whose padded rows are read as :class:`Padded` (80 is the common default;
#: graphgpt-44's was 75).
PAD_MIN_WIDTH = 40


#: The envelopes, most specific first (the first that fits the first lines is taken).
ENVELOPES: tuple[Envelope, ...] = (
    JsonRecords(),
    Cri(),
    # kubectl logs --prefix (staging/src/k8s.io/kubectl/pkg/cmd/logs/logs.go, addPrefixIfNeeded):
    # "[pod/<pod>/<container>] "; a name cannot hold "/" or "]"
    # "[pod/<pod>/<container>] "; a name cannot hold "/" or "]"; with --timestamps too the kubelet's
    # stamp follows it (the prefix is added around the stream the kubelet already stamped)
    Prefix("kubectl-prefix", r"\[(?P<who>pod/[^/\]\s]+/[^\]\s]*)\] (?:(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}"
           r"(?:Z|[+-]\d\d:\d\d)) )?", min_lines=1),
    # stern's default output (stern/stern cmd/cmd.go generateTemplate, output "default"):
    # "{{color .PodColor .PodName}} {{color .ContainerColor .ContainerName}} {{.Message}}". On a
    # terminal each name is in its own colour (fatih/color: "\x1b[96m" ... "\x1b[0m"): sure from one
    # line. Plain (stern ... > file, --color never) two words are only stern's where the pod's name is
    # one Kubernetes generates (a ReplicaSet's "-<hash>-<5 chars>", a Job's or StatefulSet's "-<n>").
    # (With --all-namespaces the namespace comes first: read as the pod, the pod as the container.)
    Prefix("stern", r"\x1b\[[0-9;]*m(?P<pod>[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)\x1b\[0m "
           r"\x1b\[[0-9;]*m(?P<container>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\x1b\[0m ", min_lines=1),
    Prefix("stern-plain", r"(?P<pod>[a-z0-9][-a-z0-9.]*-(?:[a-z0-9]{5}|\d{1,4})) "
           r"(?P<container>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?) "),
    # aws logs tail, its default --format detailed (aws/aws-cli awscli/customizations/logs/tail.py,
    # DetailedLogEventsFormatter): "<time.isoformat(timespec='microseconds')> <log stream> <message>",
    # the time green and the stream cyan on a terminal. A stream name holds no ":" (CloudWatch refuses
    # it) and has a digit or a separator ("algo-1-1714564800", "ecs/trainer/0a1b2c"): a logger's own
    # "<time> INFO ..." or "<time> [rank0]: ..." is not taken for it
    Prefix("aws-logs-tail", r"(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d) "
           r"(?P<who>[^\s:]*[-/._\d][^\s:]*) "),
    # the kubelet's RFC 3339 with nanoseconds before each line (kubectl logs --timestamps) and a
    # GitHub Actions job's raw log (seven fraction digits): a machine's stamp, not a logger's; and six digits
    # with a Z: tracing-subscriber's default time (tokio-rs/tracing, fmt::time::SystemTime: RFC 3339 in
    # microseconds, UTC), which TGI's launcher prints, and Cloud Logging's exports. The message after it is
    # read as the line (a status word or a launcher's record at its head); the stamp stays its time
    Prefix("rfc3339-stamp",
           r"(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.(?:\d{9}|\d{7}|\d{6}(?=Z))(?:Z|[+-]\d\d:\d\d)) "),
    # a CloudWatch Logs export or a copy of the console's table: "<time>\t<message>"
    Prefix("tab-stamp", r"(?P<stamp>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\t"),
    # journald's short output and syslog files (RFC 3164): "May 01 12:00:00 host ident[pid]: "
    # (the kernel's lines have no pid: "Nov 27 12:00:00 host kernel: NVRM: Xid ..."); a single line
    # is enough with a pid after the program
    Prefix("syslog", r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<who>[\w.-]+ [\w./@-]+(?:\[\d+\])?): "),
    Prefix("syslog-pid", r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<who>[\w.-]+ [\w./@-]+\[\d+\]): ", min_lines=1),
    # moreutils ts with its default format "%b %d %H:%M:%S" (no host, no program)
    Prefix("ts", r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d "),
    # docker compose logs: the container's name padded to the widest, " | " (v2 "trainer-1  | ",
    # v1 "project_trainer_1  | "; SageMaker local mode "algo-1-8gd7b_1  | ",
    # aws/sagemaker-training-toolkit#37); the name ends in the replica number, so a table's
    # "epoch | loss" is not taken for it
    Prefix("compose", r"(?P<who>[A-Za-z0-9][\w.-]*[-_]\d+) *\| ?"),
    # a child's lines relayed through a logger at INFO (CollectorLogger): Airflow's task log (2.x
    # "[2024-01-01, 12:00:00 UTC] {subprocess.py:93} INFO - ", 1.x "[2021-01-01 12:00:00,123]
    # {bash_operator.py:157} INFO - "), the logging cookbook's format
    CollectorLogger("airflow-relay", r"\[(?P<stamp>\d{4}-\d\d-\d\d,? \d\d:\d\d:\d\d(?:[.,]\d+)?"
                    r"(?: ?UTC|[+-]\d\d:?\d\d)?)\] \{(?P<who>[\w.-]+\.py):\d+\} (?:INFO|DEBUG) - "),
    CollectorLogger("logger-relay", r"(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (?P<who>[\w.-]+) - "
                    r"(?:INFO|DEBUG) - "),
    Padded(),
)


class Undecided(enum.Enum):
    """:func:`detect`'s answer while the lines still to come could change it."""

    MORE_LINES = "more lines may change the decision"


#: :func:`detect`'s answer while undecided (the only member of :class:`Undecided`)
UNDECIDED = Undecided.MORE_LINES


def detect(lines: Sequence[str], complete: bool) -> Envelope | Undecided | None:
    """The envelope of a log whose first lines are ``lines``, one of three answers: an
    :class:`Envelope` (decided: this one), None (decided: the log has no envelope), or
    :data:`UNDECIDED` (only while more lines may come, ``complete`` false: they could change it).

    A decision is made only where the lines still to come cannot change it: the answer for a log
    is the same whether its lines arrive at once (``diagnose``) or a few at a time (a live rank), so
    the live judge reads a rank as ``diagnose`` reads its log. With more to come, that is when
    :data:`DETECT_LINES` non-blank lines are in, or earlier, None, once no envelope can still be on
    :data:`DETECT_SHARE` of them (three plain lines of a healthy rank decide it)."""
    sample = [ln for ln in lines if ln.strip()][:DETECT_LINES]
    if not sample:
        return None if complete else UNDECIDED
    enough = complete or len(sample) >= DETECT_LINES
    still_possible = False
    for env in ENVELOPES:
        hits = env.hits(sample)
        if enough:
            if len(hits) >= env.min_lines and (len(hits) == len(sample) or len(hits) >= DETECT_SHARE * len(sample)):
                return env.primed(hits)
        elif len(hits) + DETECT_LINES - len(sample) >= DETECT_SHARE * DETECT_LINES:
            # the lines still to come could give it its share (whether they will is theirs to say)
            still_possible = True
    return UNDECIDED if still_possible else None


class EnvelopeReader(Generic[K]):
    """Reads one stream's lines (a file, a rank's output) through the envelope its first lines show.

    :meth:`read` takes ``(key, line)`` pairs (the caller's line number, a record) and returns the
    inner records as :data:`Opened`, in order; a line the envelope does not fit passes unchanged
    (a header above the records, a line a shipper did not wrap).

    Until the envelope is decided (see :func:`detect`), a line that some envelope would open is held
    back, and every line after it (the order is kept); a line no envelope opens, with nothing held
    before it, passes at once (it comes out the same whatever is decided). Held lines come out when
    the decision does, so the records are the same however the lines were cut into reads: a live
    rank's lines are what ``diagnose`` reads in its log. A caller that cannot wait for the decision
    (a live rank gone quiet after its first lines, or ended) takes the held lines with
    :meth:`release`.
    """

    def __init__(self) -> None:
        self.envelope: Envelope | None = None
        #: decided: no envelope (every later line passes unchanged; a caller may skip :meth:`read`)
        self.plain = False
        self._head: list[str] = []
        self._held: list[tuple[K, str]] = []  # lines held back until the envelope is decided
        self._piece: Opened[K] | None = None  # a line's pieces so far

    @property
    def holding(self) -> int:
        """How many lines are held back for the decision."""
        return len(self._held)

    def read(self, items: Sequence[tuple[K, str]], final: bool = False) -> list[Opened[K]]:
        """The inner records of ``items`` (``final``: no more lines will come: decide now, and end a
        line still in pieces)."""
        if self.plain:
            return [(k, line, None, None) for k, line in items]
        if self.envelope is None:
            room = _HEAD_MAX - len(self._head)
            if room > 0:
                self._head.extend(line for _, line in items[:room])
            # a head of _HEAD_MAX lines decides with what it has (mostly blank lines: nothing to wait for)
            found = detect(self._head, final or len(self._head) >= _HEAD_MAX)
            if found is UNDECIDED:
                return self._hold(items)
            items = [*self._held, *items]
            self._head, self._held = [], []
            if found is None:
                self.plain = True
                return [(k, line, None, None) for k, line in items]
            self.envelope = found
        return self._open(self.envelope, items, final)

    def release(self) -> list[Opened[K]]:
        """The lines held back for the decision, now: opened as the lines seen so far decide if no
        more came (:func:`detect` with ``complete``). The decision itself stays open: the lines after
        them are read as the first :data:`DETECT_LINES` decide. A rank that printed three lines and
        ended is read as ``diagnose`` reads its three-line log."""
        if not self._held:
            return []
        held, self._held = self._held, []
        found = detect(self._head, True)  # complete: decided, never UNDECIDED
        if not isinstance(found, Envelope):
            return [(k, line, None, None) for k, line in held]
        return self._open(found, held, final=True)

    def _hold(self, items: Sequence[tuple[K, str]]) -> list[Opened[K]]:
        out: list[Opened[K]] = []
        for key, line in items:
            if self._held or any(env.open(line) is not None for env in ENVELOPES):
                self._held.append((key, line))
            else:
                out.append((key, line, None, None))
        return out

    def _open(self, env: Envelope, items: Sequence[tuple[K, str]], final: bool) -> list[Opened[K]]:
        out: list[Opened[K]] = []
        for key, line in items:
            parts = env.open(line)
            if parts is None:
                self._end_piece(out)
                out.append((key, line, None, None))
                continue
            text, stamp, who, partial = parts
            if self._piece is not None:
                first, head, stamp0, who0 = self._piece
                text, key, stamp, who = head + text, first, stamp0, who0
                self._piece = None
            if partial:
                self._piece = (key, text, stamp, who)
                continue
            self._emit(out, key, text, stamp, who)
        if final:
            self._end_piece(out)
        return out

    def _end_piece(self, out: list[Opened[K]]) -> None:
        if self._piece is not None:
            key, text, stamp, who = self._piece
            self._piece = None
            self._emit(out, key, text, stamp, who)

    @staticmethod
    def _emit(out: list[Opened[K]], key: K, text: str, stamp: str | None, who: str | None) -> None:
        if "\n" in text:  # a JSON message holding a traceback: one record a line, as printed
            out.extend((key, part, stamp, who) for part in text.split("\n"))
        else:
            out.append((key, text, stamp, who))
