"""``neuron-watch diagnose [--json] PATH ...``: the judge, offline, on saved logs.

PATH is a log file, ``-`` (stdin), a run directory (``gen-*/rank-*.log``: the latest generation
is judged), or any directory of rank logs (``rank-3.log``, torchrun's ``attempt_0/3/stdout.log``,
``*.log``/``*.out``/``*.txt``). Lines go through :mod:`neuron_watch.logtext` (ANSI, ``\\r`` bars,
glued dots, interleaved ranks, wrapped lines, odd bytes, huge lines) and then through the same
knowledge base and :class:`~neuron_watch.judge.Judge` as the live watchdog, with the logs' own
timestamps as the clock. A log that ends mid-compile is ``compiling``; one that ends progressing
with no failure is ``healthy``.

Exit status: 0 whenever a diagnosis was made (whatever the label); 2 when the input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from neuron_watch.config import WatchConfig
from neuron_watch.errors import UsageError
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict
from neuron_watch.judge import Judge, JudgeSettings
from neuron_watch.kb import default_knowledge_base
from neuron_watch.logtext import (
    LineSplitter,
    TimeParser,
    logical_lines,
    rank_from_path,
    split_rank_prefix,
    unwrap_numbered,
)

CHUNK = 1 << 20  # bytes read at a time
BATCH = 4096  # lines handed to the judge at a time
_LOG_NAMES = re.compile(r"\.(?:log|out|err|txt)$|^(?:stdout|stderr)(?:\.\w+)?$")
_GEN_DIR = re.compile(r"^gen-(\d+)$")
#: torchrun's error summary names the failed rank on its own line, then exitcode/traceback lines
_TR_BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")
#: torchrun's agent line: "failed (exitcode: -9) local_rank: 3 (pid: 1234) of binary: ..."
_TR_LOCAL_RANK = re.compile(r"\blocal_rank: (\d+) \(pid: \d+\)")
_TR_BLOCK_LINES = 4


@dataclass
class Source:
    """One input: where it is read from and how it is shown in evidence."""

    display: str
    path: str | None  # None = stdin
    rank: int | None = None
    timed: bool = False  # set once a line with a timestamp was read


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


def run(args: argparse.Namespace, config: WatchConfig) -> int:
    """Diagnose, print, return 0. Raises UsageError (exit 2) when an input cannot be read."""
    settings = JudgeSettings(
        hang_timeout=getattr(config, "hang_timeout", None),
        startup_timeout=getattr(config, "startup_timeout", JudgeSettings.startup_timeout),
        compile_timeout=getattr(config, "compile_timeout", JudgeSettings.compile_timeout),
        save_timeout=getattr(config, "save_timeout", JudgeSettings.save_timeout),
    )
    diag = diagnose_paths(args.paths, settings=settings, progress_regex=getattr(config, "progress_regex", None))
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
            out.append(Source("<stdin>", None))
        elif os.path.isdir(p):
            found, note = _dir_sources(p)
            if not found:
                raise UsageError(f"{p}: no log files found in this directory",
                                 "pass the log files themselves, a run directory (gen-*/rank-*.log) or - for stdin")
            out.extend(found)
            if note:
                notes.append(note)
        elif os.path.isfile(p):
            out.append(Source(p, p, rank_from_path(p)))
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
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        files.extend(os.path.join(dirpath, f) for f in sorted(filenames) if _LOG_NAMES.search(f))
    return [Source(f, f, rank_from_path(f)) for f in files], note


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
    clock = TimeParser()
    lineno = 0
    seq = 0
    default_rank = src.rank if src.rank is not None else -1
    pending: list[tuple[int, str]] = []

    block_rank, block_left = -1, 0  # inside torchrun's "Root Cause" block: the rank it names

    def emit(batch: list[tuple[int, str]]) -> Iterator[LogLine]:
        nonlocal seq, block_rank, block_left
        for n, raw in unwrap_numbered(batch):
            for piece in logical_lines(raw):
                rank, text = split_rank_prefix(piece)
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
                key = RankKey(node, rank if rank is not None else default_rank)
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
                yield from emit(pending)
                pending = []
            if not chunk:
                return
    except UnicodeError as exc:  # pragma: no cover - decoding uses errors="replace"
        raise UsageError(f"{src.display}: cannot decode: {exc}") from exc


# -- judging -----------------------------------------------------------------------------------------


def diagnose_lines(
    lines: Iterable[LogLine], settings: JudgeSettings | None = None, progress_regex: str | None = None
) -> tuple[Verdict, int]:
    """The verdict for these lines, judged at the time of the last of them; and how many there were.

    This is the live judge fed in batches, exactly as the supervisor feeds it.
    """
    judge: Judge | None = None
    first = last = None
    count = 0
    batch: list[LogLine] = []
    kb = default_knowledge_base(progress_regex)
    for line in lines:
        if judge is None:
            judge = Judge(kb, settings or JudgeSettings(), line.mono)
        first = line.mono if first is None else min(first, line.mono)
        last = line.mono if last is None else max(last, line.mono)
        batch.append(line)
        count += 1
        if len(batch) >= BATCH:
            judge.observe_lines(batch)
            batch = []
    if judge is None or first is None or last is None:
        empty = Verdict(Label.UNOBSERVED, Action.WAIT, reason="the logs hold no lines",
                        advice="Nothing to judge: pass the ranks' logs (rank-N.log) or the run directory.")
        return empty, 0
    if batch:
        judge.observe_lines(batch)
    judge.start = first
    return judge.verdict(last, final=True), count


def diagnose_paths(
    paths: Iterable[str], settings: JudgeSettings | None = None, progress_regex: str | None = None
) -> Diagnosis:
    """Read ``paths`` (see the module docstring) and judge them.

    Raises:
        UsageError: a path does not exist or cannot be read (exit 2).
    """
    sources, notes = resolve_sources(paths)
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

    verdict, count = diagnose_lines(all_lines(), settings, progress_regex)
    untimed = [s.display for s in sources if not s.timed]
    if untimed and len(untimed) < len(sources):
        notes.append(
            f"{len(untimed)} source(s) have no timestamps ({', '.join(untimed[:3])}"
            f"{', ...' if len(untimed) > 3 else ''}): their order relative to the others is unknown"
        )
    truncated = sum(s.truncated for s in splitters)
    if truncated:
        notes.append(f"{truncated} over-long line(s) were cut to their first 64 KiB")
    return Diagnosis(verdict, [s.display for s in sources], count, truncated, notes)


def render_text(diag: Diagnosis) -> str:
    """The human-readable report."""
    v = diag.verdict
    out = [f"label:    {v.label.value}  (action: {v.action.value})"]
    if v.culprit is not None:
        who = f"rank {v.culprit.rank}" if v.culprit.rank >= 0 else "unknown rank"
        if v.culprit.node:
            who += f" on {v.culprit.node}"
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
