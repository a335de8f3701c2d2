"""Normalize log text as people paste it: pure functions, no I/O.

Real saved logs are not one clean record per line. This module turns raw bytes into logical
lines the classifier can read, and reads what a line says about itself (rank, time):

* :class:`LineSplitter` splits a byte stream into lines with a length cap (a single line of many
  megabytes costs at most :data:`MAX_LINE` characters of memory) and decodes non-UTF-8 bytes with
  replacement characters. It counts what it cut (``truncated``): nothing is lost silently.
* :func:`logical_lines` strips ANSI escapes, keeps the last state of ``\\r`` progress bars (a bar
  drawn below another, e.g. an evaluation bar, is marked :data:`INNER_BAR`),
  splits compiler progress dots glued to the next record (``.....2024-04-12 07:13:06.000297: ...``)
  and splits ranks interleaved mid-line (``... [rank1]: step 3``).
* :func:`split_rank_prefix` reads and removes ``[rank3]:``, ``[default3]:``, ``3: `` and Open MPI's
  ``[1,3]<stdout>:`` prefixes; :func:`split_process` reads the prefixes that name a process
  without a rank (NCCL's ``host:pid:tid``, pdsh's ``host: ``, vLLM's and Ray's ``(Worker pid=N)``);
  :func:`rank_from_path` reads the rank from ``rank-3.log`` or ``attempt_0/3/stdout.log``.
* :class:`TimeParser` reads the timestamp formats in use (runtime ``2023-Aug-01 16:14:43.0241``,
  compiler ``2024-04-12 07:13:06.000296``, ISO 8601, Python logging ``,123``, glog ``I0402 10:11:12``,
  bare ``[HH:MM:SS]``) as seconds, the clock of an offline judgement.
* :func:`unwrap` rejoins lines a terminal wrapped at a fixed width (only when unmistakable).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Sequence

#: The longest line kept, in characters; the rest of a longer line is dropped (and counted).
MAX_LINE = 64 * 1024

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: Compiler dots glued to what follows: only when a new record starts there (a timestamp, a
#: bracket, a capital), so "...done" stays one line.
_GLUED_DOTS = re.compile(r"^(\.+)(?=[0-9\[A-Z])")
#: What a shell prints when a job dies by a signal (bash's job status: "Killed", "Segmentation fault
#: (core dumped)", "Aborted (core dumped)"), glued to a progress bar's last redraw ("...13.82it/s]Killed").
_SHELL_ENDS = ("Killed", "(core dumped)", "Segmentation fault", "Aborted")
_GLUED_SHELL = re.compile(r"(?<=[\]|])((?:Killed|Segmentation fault|Aborted)(?: \(core dumped\))?)\s*$")
#: ... or to Keras's bar, which ends on its last metric's value, not a bracket ("249/441 [=====>.....] - ETA: 17:56 -
#: loss: 26.6288 - class_loss: 2.3435Killed", keras-YOLOv3-model-set#42; Keras 3's "63/63 ━━━━ 1s 20ms/step - loss:
#: 0.1Killed"): keras/utils/generic_utils.py Progbar redraws with "\r" and leaves the line unterminated
_GLUED_SHELL_KERAS = re.compile(r"^\s*\d+/\d+ (?:\[[=>.]*\]|━+) .*\d"
                                r"((?:Killed|Segmentation fault|Aborted)(?: \(core dumped\))?)\s*$")
#: A record in Python logging's default format (``logging.BASIC_FORMAT``, "%(levelname)s:%(name)s:%(message)s")
#: glued to a tqdm bar's last redraw: tqdm leaves its line unterminated on stderr and the record written to the
#: same stream starts where the bar ends, after its rate and postfix ("... 15.79s/it]WARNING:torch.distributed.
#: elastic.agent.server.api:Received 1 death signal, ...", "... 87.80it/s]WARNING:root:Segment ... exceeds ...").
#: ... or in glog's layout, which torch's own logging uses since 2.2 (torch/_logging/_internal.py's formatter:
#: level letter, MMDD, time with microseconds, pid, path:line, "] "): "... 153.30s/it]W1221 17:13:59.240000
#: 46660 torch/distributed/elastic/agent/server/api.py:704] Received 1 death signal, ...", "... 49.97s/it]E0825
#: 17:31:27.240000 139795859210880 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: -9)"
_GLUED_RECORD = re.compile(r"[\d?](?:it/s|s/it)(?:, [^\]\n]*)?\](?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):"
                           r"[A-Za-z_][\w.]*:\S|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s:]+:\d+\] )")
#: launchers' rank prefixes: torch's own ``[rank3]: `` (``distributed_c10d``'s excepthook, and c10's
#: log lines once the process group is up: ``[rank0]:[E321 ...``), torch elastic's ``tail_log``
#: header ``[{role}{local_rank}]:`` (``[default3]:``; ``[trainer0]:``, ``[worker0]:`` under a role of
#: that name; not a bare ``[3]:``: torchrun's error summary numbers its failures ``[0]:``, ``[1]:``
#: on lines of their own), a bare ``3: `` (srun --label),
#: and Open MPI's ``--tag-output`` ``[<job>,<rank>]<stdout>:`` (mpirun, and Horovod or DeepSpeed
#: jobs launched through it: "[1,3]<stdout>:test-nccl-efa-worker-0:23:75 [3] NCCL INFO ..."). Other
#: words in brackets (``[epoch3]:``, ``[step10]:``) are a program's own text, not a launcher's.
_ROLE = r"(?:rank|default|trainer|worker)"
#: SageMaker's mpirun adds the host: ``[1,mpirank:3,algo-2]<stderr>:INFO:root:...``
#: (aws-samples/sagemaker-distributed-training-workshop#6).
_MPI_TAG = r"\[\d+,(?:mpirank:)?(\d+)(?:,[\w.-]+)?\]<std(?:out|err)>:"
_MIDLINE_RANK = re.compile(r"(?<=\S)\s*(?=\[" + _ROLE + r"\d+\]:|" + _MPI_TAG.replace("(\\d+)", "\\d+") + ")")
_RANK_PREFIX = re.compile(r"^\s*\[" + _ROLE + r"(\d+)\]:\s?|^(\d{1,5}): |^\s*" + _MPI_TAG)
_PATH_RANK = (
    re.compile(r"(?:^|[/\\])rank[-_.]?(\d+)(?:\.[A-Za-z]+)*$"),
    re.compile(r"(?:^|[/\\])attempt_\d+[/\\](\d+)[/\\](?:stdout|stderr|error)\.(?:log|txt|json)$"),
    re.compile(r"(?:^|[/\\])(?:rank|worker)[-_]?(\d+)[/\\][^/\\]+$"),
)


class LineSplitter:
    """Split a byte stream into decoded lines, each at most ``max_line`` characters.

    Feed chunks of any size with :meth:`feed`; call :meth:`close` at the end for the last line
    (a log cut mid-line still has its last line). Memory stays bounded by ``max_line`` plus one
    chunk whatever the input.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._dropping = False  # inside an over-long line, skipping to its end
        self.truncated = 0  # lines cut to max_line

    def feed(self, chunk: bytes) -> list[str]:
        """The complete lines in ``chunk`` (with what was buffered before)."""
        out: list[str] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            if not self._dropping:
                room = self.max_line - len(self._buf)
                if len(piece) > room:
                    self._buf += piece[:room]
                    self._dropping = True
                    self.truncated += 1
                else:
                    self._buf += piece
            if nl < 0:
                if self._dropping and self._buf:
                    out.append(self._take())  # emit the kept head now; the tail is skipped
                return out
            if self._buf or not self._dropping:
                out.append(self._take())
            self._dropping = False
            start = nl + 1

    def close(self) -> list[str]:
        """The last, unterminated line (if any)."""
        if self._buf:
            return [self._take()]
        return []

    def _take(self) -> str:
        text = bytes(self._buf).decode("utf-8", errors="replace")
        self._buf.clear()
        return text


#: Colour/style only (SGR, ``ESC [ ... m``): it cannot move the cursor or erase, so the console
#: drops it rather than print ``^[[32m`` all over a coloured logger's lines.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
#: Characters that reorder what follows (bidi overrides/isolates) or end a line in some viewers.
_INVISIBLE = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def visible(text: str) -> str:
    """``text`` safe to print on an operator's terminal: every control character shown, none obeyed.

    A rank that prints ``\\r\\x1b[2K[neuron-watch] verdict: healthy`` must not erase its own
    ``[rankN]`` prefix and pass for a watchdog line, nor set the terminal's
    title, clear the screen or hide text. C0 controls and DEL are shown in caret notation
    (``ESC`` -> ``^[``, ``CR`` -> ``^M``, ``DEL`` -> ``^?``), C1 controls and bidi/line-separator
    characters as ``<U+XXXX>``; tabs stay; SGR colour sequences are dropped (they only style text).
    """
    if text.isprintable():
        return text
    if "\x1b[" in text:
        text = _SGR.sub("", text)
    out: list[str] = []
    for c in text:
        o = ord(c)
        if o < 0x20 and c != "\t":
            out.append("^" + chr(o + 0x40))
        elif o == 0x7F:
            out.append("^?")
        elif 0x80 <= o < 0xA0 or c in _INVISIBLE:
            out.append(f"<U+{o:04X}>")
        else:
            out.append(c)
    return "".join(out)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves, titles)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


#: A tqdm bar drawn below another (``position`` >= 1: Hugging Face's evaluation bar under the
#: training bar, an inner loop's bar) ends each redraw by moving the cursor back up.
_CURSOR_UP_END = re.compile(r"\x1b\[\d*A\s*$")
#: What :func:`logical_lines` puts before such a bar: its count is an inner loop's, not the step.
INNER_BAR = "[inner bar] "


#: A line that reads as an error, whatever comes after it: an exception's name, a logger's or a
#: tool's error level, Python's traceback header, the shell's report of a killed process, NCCL's
#: warning. A redraw with ``\\r`` after such a line (a bar the next moment, a spinner) hides it on a
#: terminal; it is kept as a record of its own (here, and in the tail's records). Bytes, as the tail
#: reads them.
_ERROR_LIKE = (r"\w(?:Error|Exception)\b|\b(?:ERROR|FATAL|CRITICAL|Traceback|Segmentation fault|Aborted|Killed"
               r"|NCCL WARN)\b|\b(?:[Ee]rror|[Ff]atal|panic):")
ERROR_LIKE = re.compile(_ERROR_LIKE.encode())
_ERROR_LIKE_TEXT = re.compile(_ERROR_LIKE)


def _final_state(raw: str) -> str:
    """What the terminal finally shows of a line redrawn with ``\\r``, escapes removed; a bar
    drawn below another is marked :data:`INNER_BAR`."""
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if strip_ansi(p).strip()]
        raw = parts[-1] if parts else ""
    text = strip_ansi(raw)
    if "%|" in text and _CURSOR_UP_END.search(raw):
        text = INNER_BAR + text.lstrip()
    return text


def logical_lines(raw: str) -> list[str]:
    """The records one physical line holds, cleaned (see the module docstring)."""
    raw = raw.rstrip("\r\n")
    out: list[str] = []
    if "\r" in raw and _ERROR_LIKE_TEXT.search(raw):  # what a redraw hides and reads as an error stays
        parts = [strip_ansi(p).strip() for p in raw.split("\r")]
        shown = max((i for i, p in enumerate(parts) if p), default=0)
        out.extend(p for p in parts[:shown] if _ERROR_LIKE_TEXT.search(p))
    text = _final_state(raw) if ("\r" in raw or "\x1b" in raw) else raw
    if "\x00" in text:
        text = text.replace("\x00", "")
    m = _GLUED_DOTS.match(text)
    if m:
        out.append(m.group(1))
        text = text[m.end() :]
    if text.endswith(_SHELL_ENDS) and (
            (g := _GLUED_SHELL.search(text)) is not None or (g := _GLUED_SHELL_KERAS.match(text)) is not None):
        # the shell's report of a killed job lands on the line its last redraw left unterminated
        return [*logical_lines(text[: g.start(1)]), g.group(1)]
    if "]" in text and ("it/s]" in text or "s/it]" in text) and (r := _GLUED_RECORD.search(text)) is not None:
        # a logging record written where a progress bar's last redraw left the line unterminated: two records
        return [*logical_lines(text[: r.end()]), *logical_lines(text[r.end() :])]
    if ("]:" in text or "]<std" in text) and _MIDLINE_RANK.search(text):
        out.extend(p for p in _MIDLINE_RANK.split(text) if p)
    else:
        out.append(text)
    return out


def split_rank_prefix(line: str) -> tuple[int | None, str]:
    """``(rank, text)``: the rank a prefix names (``[rank3]:``, ``[default3]:``, ``[trainer3]:``, ``3: ``,
    ``[1,3]<stdout>:``) and the rest."""
    m = _RANK_PREFIX.match(line)
    if m is None:
        return None, line
    return int(m.group(1) or m.group(2) or m.group(3)), line[m.end() :]


#: Prefixes that name the *process* a line comes from (no rank: the processes of a stream are told
#: apart, not numbered). Each is read where its program writes it:
#:
#: * pdsh's ``%h: `` before each line of a remote command (DeepSpeed's default multi-node runner
#:   starts every node's launcher under pdsh): ``rdma-gpu-train-worker-0: <line>``. A host name of
#:   dash- or dot-separated parts holding a digit, so that ``SG-ERROR: ``, ``top-k: `` or
#:   ``bf16: `` are not hosts. Removed: what follows is the node's own line.
#:   The remote line may start with spaces (py-spy's frames, a traceback's): ``%h:     backward (...)``.
#:   A dotted name whose last part is a class of exception or warning is an exception line of a module whose
#:   name holds a digit (``urllib3.exceptions.MaxRetryError: ``, ``boto3...``), not a host.
_PDSH = re.compile(r"([A-Za-z][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)+): (?= {0,15}\S)")
_CLASS_NOT_HOST = re.compile(r"\.[A-Z]\w*(?:Error|Exception|Warning)$")
#: * a worker's name and pid before its line: vLLM's multiprocessing workers
#:   (``_add_prefix``: ``(VllmWorkerProcess pid=123) ``, V1's ``(VllmWorker rank=2 pid=123) ``,
#:   ``(EngineCore_DP0 pid=123) ``, ``(APIServer pid=123) ``), Ray's worker logs on the driver
#:   (``print_worker_logs``: ``(pid=123) ``, ``(pid=123, ip=10.0.0.5) ``, an actor's or task's name
#:   first: ``(RayTrainWorker pid=123, ip=...) ``, ``(RayWorkerWrapper pid=...)``), SkyPilot's
#:   ``(task, pid=123) ``. Removed: what follows is the worker's own line.
_WORKER = re.compile(r"\((?:([A-Za-z_][\w.-]*(?: rank=\d+)?),? )?pid=(\d+)(?:, ip=([\w.:-]+))?\) ?")
#: * NCCL's own prefix (``src/debug.cc``, ``ncclDebugLog``): an optional timestamp
#:   (``NCCL_DEBUG_TIMESTAMP_FORMAT``, by default ``[%F %T] ``), ``hostname:pid:tid `` (the host
#:   name cut at its first dot), then ``[cudaDev] `` (INFO, WARN, TRACE) or ``NCCL CALL``:
#:   ``ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'``.
#:   Network plugins log through it (aws-ofi-nccl's ``NET/OFI`` lines). Kept: the table reads it.
_NCCL = re.compile(r"(?:\[[^\]\n]{1,40}\] )?([\w-]+):(\d+):\d+ (?:\[-?\d+\] |NCCL CALL )")
#:   What NCCL writes after its prefix: its own record (``NCCL INFO``/``NCCL WARN``, a source location
#:   first; NCCL 2.2's ``INFO ...``, ``misc/ibvwrap.cu:60 WARN ...`` without the word NCCL; a network
#:   plugin's ``NET/OFI`` through it). Anything else under the prefix is another program's line that a
#:   collector carried under the same prefix (each line of a process stamped ``host:pid:tid [dev] ``):
#:   the prefix names the process and is removed, so the line is read as its program wrote it (a
#:   traceback, an exception, a severity at its head).
_NCCL_OWN = re.compile(r"(?:[\w./-]+:\d+ )?(?:NCCL|INFO|WARN|TRACE|ABORT)\b|.{0,80}?\bNCCL\b|.{0,80}?\bNET/")


#: What :func:`split_process` reads of a line: ``(host, process, text)`` (a plain tuple: it is made
#: for every line read, and a named tuple costs three times as much to make).
Stream = tuple[str | None, str | None, str]


def split_process(line: str) -> Stream:
    """``(host, process, text)``: the node pdsh's prefix names (or None); the process a line's
    prefixes name (see :data:`_PDSH`, :data:`_WORKER`, :data:`_NCCL`), e.g. ``"ng30903 pid 3063028"``,
    ``"VllmWorker rank=2 pid 4101"`` (the worker's ``ip`` or the pdsh host first when given), or
    None; and the line without pdsh's or a server's prefix (NCCL's prefix stays on NCCL's own
    record: it is part of NCCL's line).

    One file often holds several processes' streams (a node's ranks, a server's workers, pdsh's
    nodes); told apart, one process's readable error is not taken for the sequel of another's.
    """
    host = None
    if line[:1].isalpha() and (m := _PDSH.match(line)) is not None and any(c.isdigit() for c in m.group(1)) \
            and not _CLASS_NOT_HOST.search(m.group(1)):
        host, line = m.group(1), line[m.end() :]
    if line.startswith("(") and (w := _WORKER.match(line)) is not None:
        name, pid, ip = w.groups()
        where = ip or host
        label = f"{name} pid {pid}" if name else f"pid {pid}"
        return host, f"{where} {label}" if where else label, line[w.end() :]
    if ":" in line and (n := _NCCL.match(line)) is not None:
        own = _NCCL_OWN.match(line, n.end()) is not None
        return host, f"{n.group(1)} pid {n.group(2)}", line if own else line[n.end():]
    return host, None, line


def rank_from_path(path: str) -> int | None:
    """The rank a log file's name gives (``gen-0/rank-3.log``, ``attempt_0/3/stdout.log``), or None."""
    for rx in _PATH_RANK:
        m = rx.search(path)
        if m:
            return int(m.group(1))
    return None


_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
#: One search finds whichever stamp a line starts with; the group names say which kind it is.
_TS = re.compile(
    # runtime: 2023-Aug-01 16:14:43.0241
    r"(?P<mon>\d{4})-(?P<mon_b>[A-Z][a-z]{2})-(?P<mon_d>\d{2})[ T](?P<mon_t>\d{2}:\d{2}:\d{2})(?:[.,](?P<mon_f>\d+))?"
    # compiler, ISO, Python logging: 2024-04-12 07:13:06.000296 / 2024-04-12T07:13:06Z / ,123
    r"|(?P<iso>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})[ T](?P<iso_t>\d{2}:\d{2}:\d{2})(?:[.,](?P<iso_f>\d+))?"
    # glog / c10d: I0402 10:11:12.123000 or [E321 02:07:08.408271257
    r"|(?:^|(?<=[\[\]:\s]))[IWEF](?P<glog>\d{2})(?P<glog_d>\d{2}) (?P<glog_t>\d{2}:\d{2}:\d{2})(?:\.(?P<glog_f>\d+))?"
    # a bare time of day: [HH:MM:SS] or [HH:MM:SS.fff]
    r"|\[(?P<tod>\d{2}:\d{2}:\d{2})(?:[.,](?P<tod_f>\d+))?\]"
)
#: Timestamps are looked for near the start of a line only (a record's own time, not one it quotes).
_TS_WINDOW = 80


def _frac(text: str | None) -> float:
    return float("0." + text) if text else 0.0


def _hms(text: str) -> tuple[int, int, int]:
    h, m, s = text.split(":")
    return int(h), int(m), int(s)


class TimeParser:
    """Reads a line's own timestamp as seconds since the epoch (UTC assumed; only differences matter).

    Stateful only to complete partial stamps: a glog stamp has no year and ``[HH:MM:SS]`` no date;
    they take the date of the last full stamp seen (a day is added when the time of day runs
    backwards by more than 12 hours: midnight passed).
    """

    def __init__(self, year: int = 1970, start: float | None = None) -> None:
        """``year``: the year of stamps that carry none (glog's ``W1123 15:00:49``) until a full stamp
        says it; ``start``: the time of lines before the first stamp (None: unknown). A reader
        that knows them (the first full stamp of the file, the file's date) passes them, so that
        stamps of one file never mix the epoch with real dates."""
        self.last: float | None = start
        self._year = year
        self.year_seen: int | None = None  # the year of the last full stamp read
        # epoch seconds of the current day, for bare times of day
        self._day0 = start - start % 86400.0 if start is not None else 0.0
        self._days: dict[tuple[int, int, int], float] = {}
        self._last_stamp = ""

    def parse(self, line: str) -> float | None:
        """The timestamp at the start of ``line`` (after any prefix), or None."""
        for m in _TS.finditer(line, 0, _TS_WINDOW):
            stamp = m.group()
            if stamp == self._last_stamp and m.start(15) < 0:
                return self.last  # same full stamp as the previous line (common: many lines a second)
            (mon, mon_b, mon_d, mon_t, mon_f, iso, iso_m, iso_d, iso_t, iso_f,
             glog, glog_d, glog_t, glog_f, tod, tod_f) = m.groups()
            try:
                if mon is not None:
                    mo = _MONTHS.get(mon_b)
                    if mo is None:
                        continue
                    t = self._full(int(mon), mo, int(mon_d), mon_t, mon_f)
                elif iso is not None:
                    t = self._full(int(iso), int(iso_m), int(iso_d), iso_t, iso_f)
                elif glog is not None:
                    t = self._full(self._year, int(glog), int(glog_d), glog_t, glog_f, True)
                else:
                    t = self._tod(tod, tod_f)
            except ValueError:
                continue
            self.last, self._last_stamp = t, stamp
            return t
        return None

    def _day(self, y: int, mo: int, d: int) -> float:
        key = (y, mo, d)
        day = self._days.get(key)
        if day is None:
            if not (1 <= mo <= 12 and 1 <= d <= 31):
                raise ValueError("not a date")
            day = self._days[key] = float(calendar.timegm((y, mo, d, 0, 0, 0, 0, 0, 0)))
        return day

    def _full(self, y: int, mo: int, d: int, hms: str, frac: str | None, keep_year: bool = False) -> float:
        h, mi, s = _hms(hms)
        if h > 23 or mi > 59 or s > 60:
            raise ValueError("not a time")
        day = self._day(y, mo, d)
        if not keep_year:
            self._year = self.year_seen = y
        self._day0 = day
        return day + h * 3600 + mi * 60 + s + _frac(frac)

    def _tod(self, hms: str, frac: str | None) -> float:
        h, mi, s = _hms(hms)
        if h > 23 or mi > 59 or s > 60:
            raise ValueError("not a time")
        t = self._day0 + h * 3600 + mi * 60 + s + _frac(frac)
        if self.last is not None and t < self.last - 12 * 3600:
            self._day0 += 86400.0
            t += 86400.0
        return t


_RECORD_START = re.compile(
    r"\s*(?:\d{4}-|\[|[IWEF]\d{4} |\d{1,5}: |\S+:\d+:\d+ |Traceback|[A-Z][A-Za-z]+(?:Error|Exception)\b)"
)


def _starts_record(line: str) -> bool:
    """Does ``line`` look like the start of a new record (so it is not a wrapped continuation)?"""
    return _RECORD_START.match(line) is not None


def unwrap(lines: Iterable[str]) -> list[str]:
    """Rejoin lines a terminal wrapped at a fixed width (see :func:`unwrap_numbered`)."""
    return [t for _, t in unwrap_numbered(list(enumerate(lines)))]


#: Terminal widths a paste is wrapped at (the widths people run terminals and web log viewers at).
WRAP_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256})


def unwrap_numbered(items: Sequence[tuple[int, str]], min_count: int = 3) -> list[tuple[int, str]]:
    """Rejoin ``(line number, text)`` lines a terminal wrapped at a fixed width.

    Wrapping is assumed only when it is unmistakable: the longest line of the batch has a common
    terminal width, at least ``min_count`` lines have exactly that length, and they are most of
    the lines within ten characters of it (natural logs spread their lengths; a wrapped paste
    piles them up at the width). A line of that width is then joined with the next unless the
    next starts a record. A joined record keeps the number of its first line.
    """
    if not items:
        return []
    width = max(len(t) for _, t in items)
    if width not in WRAP_WIDTHS:
        return list(items)
    at = sum(1 for _, t in items if len(t) == width)
    near = sum(1 for _, t in items if width - 10 <= len(t) < width)
    if at < min_count or at < 2 * near:
        return list(items)
    out: list[tuple[int, str]] = []
    cur: tuple[int, str] | None = None
    for num, line in items:
        if cur is not None and not _starts_record(line):
            cur = (cur[0], cur[1] + line)
        else:
            if cur is not None:
                out.append(cur)
            cur = (num, line)
        if len(line) != width:
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    return out
