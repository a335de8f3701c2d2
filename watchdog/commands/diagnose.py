"""``neuron-watch diagnose [--json] PATH ...``: the judge, offline, on saved logs.

PATH is a log file, ``-`` (stdin), a run directory (``gen-*/rank-*.log``: the latest generation
is judged), or any directory of rank logs (``rank-3.log``, torchrun's ``attempt_0/3/stdout.log``,
``*.log``/``*.out``/``*.txt``). Lines go through :mod:`neuron_watch.diagnosis.logtext` (ANSI, ``\\r`` bars,
glued dots, interleaved ranks, wrapped lines, odd bytes, huge lines) and then through the same
knowledge base and :class:`~neuron_watch.diagnosis.judge.Judge` as the live watchdog, with the logs' own
timestamps as the clock. A log that ends mid-compile is ``compiling``; one that ends progressing
with no failure is ``healthy``.

Exit status: 0 whenever a diagnosis was made (whatever the label); 2 when the input cannot be read.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from neuron_watch.config import OPTIONS, WatchConfig
from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.envelopes import EnvelopeReader
from neuron_watch.diagnosis.judge import JudgeSettings
from neuron_watch.diagnosis.logtext import (
    LineSplitter,
    TimeParser,
    logical_lines,
    rank_from_path,
    split_process,
    split_rank_prefix,
    unwrap_numbered,
)
from neuron_watch.diagnosis.offline_reading import RunRecord, judge_offline
from neuron_watch.errors import UsageError
from neuron_watch.events import Action, Evidence, LogLine, RankKey, Verdict

CHUNK = 1 << 20  # bytes read at a time
BATCH = 4096  # lines handed to the judge at a time
_LOG_NAMES = re.compile(r"\.(?:log|out|err|txt)$|^(?:stdout|stderr)(?:\.\w+)?$")
_GEN_DIR = re.compile(r"^gen-(\d+)$")
#: torchrun's error summary names the failed rank on its own line, then exitcode/traceback lines
_TR_BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")
#: torchrun's agent line: "failed (exitcode: -9) local_rank: 3 (pid: 1234) of binary: ..."
_TR_LOCAL_RANK = re.compile(r"\blocal_rank: (\d+) \(pid: \d+\)")
_TR_BLOCK_LINES = 4
#: what neuron-watch writes per rank in a generation directory (README "Run directory")
_OUR_RANK_LOG = re.compile(r"^(?:rank-\d+|unattributed-[^/]+)\.log$")
#: bytes of a log's head read to learn its clock before it is judged
_HEAD = 256 * 1024
#: the watchdog options that mean something offline
DIAGNOSE_OPTIONS = ("--hang-timeout", "--startup-timeout", "--compile-timeout", "--save-timeout", "--progress-regex")


@dataclass
class Source:
    """One input: where it is read from and how it is shown in evidence."""

    display: str
    path: str | None  # None = stdin
    rank: int | None = None
    timed: bool = False  # set once a line with a timestamp was read
    year: int = 1970  # the year of stamps without one (glog) until a full stamp says it
    start: float | None = None  # the time of lines before the first stamp
    #: neuron-watch's time index of a rank log (``rank-R.times``): (lines written, wall time), in order
    times: list[tuple[int, float]] | None = None
    #: the processes whose prefixes the lines bore (see :func:`~neuron_watch.diagnosis.logtext.split_process`)
    processes: set[str] = field(default_factory=set)


@dataclass
class Diagnosis:
    """A verdict plus what the offline reading saw."""

    verdict: Verdict
    sources: list[str]
    lines: int = 0
    truncated: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        culprit: dict[str, Any] | None = None
        if v.culprit is not None:
            ev = next((e for e in v.evidence if e.key == v.culprit), None)
            culprit = {
                "node": v.culprit.node or None,
                "rank": v.culprit.rank if v.culprit.rank >= 0 else None,
                "file": ev.source if ev else None,
                "line": ev.lineno if ev else None,
            }
        return {
            "label": v.label.value,
            "action": v.action.value,
            "culprit": culprit,
            "reason": v.reason,
            "evidence": [
                {"file": e.source, "line": e.lineno, "text": e.text, "signature": e.signature, "rank": _rank_or_none(e)}
                for e in v.evidence
            ],
            "advice": v.advice,
            "step": v.step,
            "lines": self.lines,
            "truncated_lines": self.truncated,
            "sources": self.sources,
            "notes": self.notes,
        }


def _rank_or_none(e: Evidence) -> int | None:
    return e.key.rank if e.key.rank >= 0 else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="log file, run dir, directory of rank logs, or - for stdin"
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    # The judge's options also work after the word (`diagnose --hang-timeout 30 PATH`), as users
    # type them; given here they override the same options given before the word.
    for opt in OPTIONS:
        if opt.flag in DIAGNOSE_OPTIONS:
            parser.add_argument(opt.flag, dest=opt.dest, metavar=opt.metavar, default=argparse.SUPPRESS,
                                help=f"{opt.help} [{opt.env}]")


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Diagnose, print, return 0. Raises UsageError (exit 2) when an input cannot be read."""
    settings = JudgeSettings(
        hang_timeout=getattr(config, "hang_timeout", None),
        startup_timeout=getattr(config, "startup_timeout", JudgeSettings.startup_timeout),
        compile_timeout=getattr(config, "compile_timeout", JudgeSettings.compile_timeout),
        save_timeout=getattr(config, "save_timeout", JudgeSettings.save_timeout),
    )
    from neuron_watch.runtime import knowledge_base  # (the root's imports cost a second; the command needs one)

    diag = diagnose_paths(args.paths, settings=settings, kb=knowledge_base(config))
    if args.json:
        sys.stdout.write(json.dumps(diag.to_dict()) + "\n")
    else:
        sys.stdout.write(render_text(diag))
    return 0


# -- finding the inputs ------------------------------------------------------------------------------


def resolve_sources(paths: Iterable[str]) -> tuple[list[Source], list[str]]:
    """The files to read for ``paths``, and notes on choices made (which generation)."""
    out: list[Source] = []
    notes: list[str] = []
    for p in paths:
        if p == "-":
            out.append(Source("<stdin>", None, year=time.gmtime().tm_year))
        elif os.path.isdir(p):
            found, note = _dir_sources(p)
            if not found:
                raise UsageError(f"{p}: no log files found in this directory",
                                 "pass the log files themselves, a run directory (gen-*/rank-*.log) or - for stdin")
            out.extend(found)
            if note:
                notes.append(note)
        elif os.path.isfile(p):
            out.append(_file_source(p))
        elif os.path.exists(p):
            raise UsageError(f"{p}: not a regular file or directory", "pass log files, directories or -")
        else:
            raise UsageError(
                f"{p}: no such file or directory", "check the path (a run dir, a rank log, or - for stdin)"
            )
    return out, notes


def _dir_sources(root: str) -> tuple[list[Source], str]:
    gens = sorted(
        ((int(m.group(1)), e.path) for e in os.scandir(root) if e.is_dir() and (m := _GEN_DIR.match(e.name))),
    )
    note = ""
    if gens:
        number, root = gens[-1]
        note = f"run directory: judged generation {number} (of {len(gens)})"
    ours = sorted((e.name for e in os.scandir(root) if e.is_file() and _OUR_RANK_LOG.match(e.name)),
                  key=lambda n: (rank_from_path(n) is None, rank_from_path(n) or 0, n))
    if ours:
        # neuron-watch's own generation directory: the rank logs hold every line once; torchrun's
        # attempt_*/R/stdout.log copies and the launcher's log (not judged live either) are not read
        return [_rank_log_source(os.path.join(root, n)) for n in ours], note
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        files.extend(os.path.join(dirpath, f) for f in sorted(filenames) if _LOG_NAMES.search(f))
    return [_file_source(f) for f in files], note


def _rank_log_source(path: str) -> Source:
    """A rank log of neuron-watch's run directory, dated by its time index when there is one."""
    src = _file_source(path)
    index = path[: -len(".log")] + ".times"
    try:
        with open(index, encoding="utf-8") as f:
            times = [(int(n), float(t)) for n, t in (ln.split() for ln in f if ln.strip())]
    except (OSError, ValueError):
        return src
    src.times = times
    return src


def _file_source(path: str) -> Source:
    """A log file, with what its head says about its clock (see :func:`_clock_hints`)."""
    src = Source(path, path, rank_from_path(path))
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
        mtime = os.stat(path).st_mtime
    except OSError:
        return src  # reported when it is read
    src.year, src.start = _clock_hints(head, mtime)
    return src


def _clock_hints(head: bytes, mtime: float | None) -> tuple[int, float | None]:
    """(year, start) for a log whose first bytes are ``head``: the year of its first full stamp
    (else the file's), and its first stamp's time (else the file's modification time: the lines of
    a log without stamps are known only to have been written by then; None for stdin)."""
    lines = head.decode("utf-8", errors="replace").splitlines()
    if len(head) >= _HEAD:
        lines = lines[:-1]  # cut mid-line
    # through the envelope, if any, as the lines are read: its stamp first, else the message's own
    lines = [stamp or text for _, text, stamp, _ in EnvelopeReader[int]().read(list(enumerate(lines)), final=True)]
    # as read_lines reads them: a record a progress bar's unterminated redraw glued to its line ("...it/s]W0301
    # 14:50:21.667000 ...") is a line of its own, and its stamp may be the log's first
    lines = [piece for text in lines for piece in logical_lines(text)]
    probe = TimeParser()
    year = None
    for text in lines:
        if probe.parse(text) is not None and probe.year_seen is not None:
            year = probe.year_seen
            break
    if year is None:
        year = time.gmtime(mtime).tm_year if mtime is not None else time.gmtime().tm_year
    clock = TimeParser(year=year)
    for text in lines:
        t = clock.parse(text)
        if t is not None:
            # just before it: the lines above the first stamp were printed before that line (each
            # untimed line adds a microsecond to the time of the line before it)
            return year, t - 0.5
    return year, mtime


# -- reading -----------------------------------------------------------------------------------------


def _open(src: Source) -> BinaryIO:
    if src.path is None:
        return sys.stdin.buffer
    try:
        return open(src.path, "rb")
    except OSError as exc:
        raise UsageError(f"{src.display}: cannot read: {exc.strerror}", "check the path and its permissions") from exc


def read_lines(src: Source, stream: BinaryIO, splitter: LineSplitter, node: str = "") -> Iterator[LogLine]:
    """The logical lines of one source as :class:`LogLine`, timed by their own timestamps.

    Lines without a timestamp take the last one seen in this source (plus a microsecond per line,
    to keep their order); a source with no timestamps at all counts from 0.
    """
    clock = TimeParser(year=src.year, start=src.start)
    times = src.times
    at = 0  # index into times: the first entry covering the line
    lineno = 0
    seq = 0
    default_rank = src.rank if src.rank is not None else -1
    pending: list[tuple[int, str]] = []

    block_rank, block_left = -1, 0  # inside torchrun's "Root Cause" block: the rank it names
    envelopes = EnvelopeReader[int]()  # a shipper's envelope around every line (JSON, CRI, prefixes), if any

    def emit(batch: list[tuple[int, str]], final: bool) -> Iterator[LogLine]:
        nonlocal seq, block_rank, block_left, at
        # the envelope's time and name, by line number (where it has them)
        told: dict[int, tuple[str | None, str | None]] = {}
        if not envelopes.plain:
            opened = envelopes.read(batch, final)
            batch = [(n, text) for n, text, _, _ in opened]
            told = {n: (stamp, who) for n, _, stamp, who in opened if stamp is not None or who is not None}
        for n, raw in unwrap_numbered(batch):
            stamp, pod = told.get(n, (None, None)) if told else (None, None)
            for piece in logical_lines(raw):
                rank, text = split_rank_prefix(piece)
                host, process, text = split_process(text)
                if pod is not None and host is None:
                    host = pod  # the pod, container or host the envelope names: the lines' node
                if host is not None and rank is None:
                    rank, text = split_rank_prefix(text)  # pdsh's host, then the node's launcher's rank
                # a rank prefix names the process best; otherwise the process a prefix names is a
                # stream of its own (a node's ranks in one file, a server's workers)
                if process is not None:
                    src.processes.add(process)
                who = process if rank is None and process is not None else host or node
                if times is not None:
                    # neuron-watch's time index: when the rank's n-th line was written (wall clock)
                    while at < len(times) - 1 and times[at][0] < n:
                        at += 1
                    t = times[at][1] if times else None
                else:
                    # the envelope's clock where it has one (on every line, never running backwards)
                    # rather than the message's own stamps, which may be in another zone: one clock
                    # per source
                    t = clock.parse(stamp) if stamp is not None else None
                    if t is None:
                        t = clock.parse(text)
                if t is not None:
                    src.timed = True
                seq += 1
                mono = t if t is not None else (clock.last or 0.0) + seq * 1e-6
                if rank is None and src.rank is None:
                    # a combined log: torchrun's own reports name the rank they are about
                    m = _TR_BLOCK_RANK.match(text)
                    if m:
                        block_rank, block_left = int(m.group(1)), _TR_BLOCK_LINES + 1
                    elif (lr := _TR_LOCAL_RANK.search(text)) is not None:
                        rank = int(lr.group(1))
                    if block_left > 0:
                        block_left -= 1
                        rank = block_rank
                key = RankKey(who, rank if rank is not None else default_rank)
                yield LogLine(key, text, mono, mono, src.display, n)

    try:
        while True:
            try:
                chunk = stream.read(CHUNK)
            except OSError as exc:
                raise UsageError(f"{src.display}: read failed: {exc.strerror}", "check the file") from exc
            lines = splitter.feed(chunk) if chunk else splitter.close()
            for line in lines:
                lineno += 1
                pending.append((lineno, line))
            if len(pending) >= BATCH or not chunk:
                yield from emit(pending, not chunk)
                pending = []
            if not chunk:
                return
    except UnicodeError as exc:  # pragma: no cover - decoding uses errors="replace"
        raise UsageError(f"{src.display}: cannot decode: {exc}") from exc


# -- judging -----------------------------------------------------------------------------------------


def _wall(iso: object) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_run_record(run_dir: str, generation: int) -> RunRecord | None:
    """The generation's record from ``run_dir/events.jsonl`` (None: no such file or no event of it)."""
    try:
        f = open(os.path.join(run_dir, "events.jsonl"), encoding="utf-8")  # noqa: SIM115
    except OSError:
        return None
    times: list[float] = []
    exits: list[tuple[int, int, float, bool]] = []
    with f:
        for raw in f:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue  # a line torn by a crash of the watchdog
            if not isinstance(ev, dict) or ev.get("generation") != generation:
                continue
            t = _wall(ev.get("time"))
            if t is None:
                continue
            times.append(t)
            rank, code = ev.get("rank"), ev.get("exit_code")
            if ev.get("event") == "rank_exit" and isinstance(rank, int) and isinstance(code, int):
                exits.append((rank, code, t, ev.get("presumed") is True))
    if not times:
        return None
    return RunRecord(generation, min(times), max(times), tuple(exits))


def diagnose_lines(
    lines: Iterable[LogLine], settings: JudgeSettings | None = None, kb: KnowledgeBase | None = None,
    record: RunRecord | None = None,
) -> tuple[Verdict, int]:
    """The verdict for these lines, judged at the time of the last of them; and how many there were.

    This is the live judge fed in batches, exactly as the supervisor feeds it. ``record``: what the
    run's events say of the generation (its ranks' exits; it is judged at its end, not at its last
    line: a hung job's last line is long before the watchdog stopped it). ``kb``: the entry point's
    knowledge base (:func:`neuron_watch.runtime.knowledge_base`; by default that of the default options).

    A stream whose lines name no process may be read twice (:func:`~neuron_watch.diagnosis.offline_reading.
    judge_offline`): ``lines`` is then iterated twice.
    """
    if kb is None:
        from neuron_watch.runtime import knowledge_base

        kb = knowledge_base(WatchConfig())
    return judge_offline(lines, kb, settings or JudgeSettings(), record)


def diagnose_paths(
    paths: Iterable[str], settings: JudgeSettings | None = None, kb: KnowledgeBase | None = None,
    now: float | None = None,
) -> Diagnosis:
    """Read ``paths`` (see the module docstring) and judge them with ``kb`` (see :func:`diagnose_lines`).
    ``now`` (wall time; default the clock's): when the files' last writes are measured from (:func:`after_the_end`).

    Raises:
        UsageError: a path does not exist or cannot be read (exit 2).
    """
    paths = list(paths)
    sources, notes = resolve_sources(paths)
    record = _run_record(paths, sources)
    if record is not None:
        notes.append(f"events.jsonl: generation {record.generation} ran {record.ended - record.began:.0f}s, "
                     f"{len(record.exits)} rank exit(s)")
    splitters: list[LineSplitter] = []

    def all_lines() -> Iterator[LogLine]:
        for src in sources:
            splitter = LineSplitter()
            splitters.append(splitter)
            stream = _open(src)
            try:
                yield from read_lines(src, stream, splitter)
            finally:
                if src.path is not None:
                    stream.close()

    class AllLines:
        """The sources' lines, read anew each time they are iterated (:func:`diagnose_lines` may read twice)."""

        def __iter__(self) -> Iterator[LogLine]:
            splitters.clear()
            return all_lines()

    verdict, count = diagnose_lines(AllLines(), settings, kb, record)
    untimed = [s.display for s in sources if not s.timed]
    if untimed and len(untimed) < len(sources):
        notes.append(
            f"{len(untimed)} source(s) have no timestamps ({', '.join(untimed[:3])}"
            f"{', ...' if len(untimed) > 3 else ''}): their order relative to the others is unknown"
        )
    for s in sources:
        if len(s.processes) > 1:
            shown = ", ".join(sorted(s.processes)[:3]) + (", ..." if len(s.processes) > 3 else "")
            notes.append(f"{s.display}: {len(s.processes)} processes told apart by their line prefixes ({shown}), "
                         "each judged as a stream of its own")
    truncated = sum(s.truncated for s in splitters)
    if truncated:
        notes.append(f"{truncated} over-long line(s) were cut to their first 64 KiB")
    if verdict.action is Action.WAIT and record is None:
        notes.append(after_the_end(_last_written(sources), time.time() if now is None else now))
    return Diagnosis(verdict, [s.display for s in sources], count, truncated, notes)


def _run_record(paths: list[str], sources: list[Source]) -> RunRecord | None:
    """The events of the generation judged, when the input is one neuron-watch generation directory."""
    dirs = {os.path.dirname(s.path) for s in sources if s.path is not None}
    if len(paths) != 1 or len(dirs) != 1 or not all(s.path and _OUR_RANK_LOG.match(os.path.basename(s.path))
                                                     for s in sources):
        return None
    gen_dir = dirs.pop()
    m = _GEN_DIR.match(os.path.basename(gen_dir))
    if m is None:
        return None
    return read_run_record(os.path.dirname(gen_dir) or ".", int(m.group(1)))


def _last_written(sources: list[Source]) -> float | None:
    """The newest modification time of the sources that are files (None: only stdin, or none readable)."""
    times = []
    for src in sources:
        if src.path is not None:
            try:
                times.append(os.stat(src.path).st_mtime)
            except OSError:
                continue
    return max(times, default=None)


def after_the_end(last_written: float | None, now: float) -> str:
    """What a calm verdict of a log cannot say: the log is judged at its last line, and a job that hung
    after it printed nothing more (a hang is silence). Where the files' last write is known, how long
    ago it was: a log still being written shows a silence the reader of a copy cannot."""
    said = ("judged at the last line read: a hang after it is silence, which a log cannot show; "
            "to judge a silence, run the job under neuron-watch")
    if last_written is None:
        return said
    age = max(0.0, now - last_written)
    return f"{said} (the newest file was last written {_age(age)} ago)"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def render_text(diag: Diagnosis) -> str:
    """The human-readable report."""
    v = diag.verdict
    out = [f"label:    {v.label.value}  (action: {v.action.value})"]
    if v.culprit is not None:
        if v.culprit.rank >= 0:
            who = f"rank {v.culprit.rank}" + (f" on {v.culprit.node}" if v.culprit.node else "")
        else:  # a process its prefix names (``ng30903 pid 3063028``), or nobody known
            who = v.culprit.node or "unknown rank"
        ev = next((e for e in v.evidence if e.key == v.culprit), None)
        if ev is not None:
            who += f"  ({ev.source}:{ev.lineno})"
        out.append(f"culprit:  {who}")
    if v.reason:
        out.append(f"reason:   {v.reason}")
    if v.step is not None:
        out.append(f"step:     {v.step}")
    if v.evidence:
        out.append("evidence:")
        for e in v.evidence:
            text = e.text if len(e.text) <= 300 else e.text[:297] + "..."
            out.append(f"  {e.source}:{e.lineno}  [{e.signature}]  {text}")
    if v.advice:
        out.append(f"advice:   {v.advice}")
    out.append(f"read:     {diag.lines} line(s) from {len(diag.sources)} source(s)")
    out.extend(f"note:     {n}" for n in diag.notes)
    return "\n".join(out) + "\n"
