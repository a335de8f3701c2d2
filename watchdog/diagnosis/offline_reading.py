"""The judge, offline, over a log's lines: :func:`judge_offline` (``neuron-watch diagnose``'s reading).

Pure: no I/O. The lines are fed to the live :class:`~neuron_watch.diagnosis.judge.Judge` in batches, as the
coordinator feeds it, with the offline readers around it (tracebacks, stack dumps, recent lines), and judged
at the time of the last of them. A stream whose lines name no process may be read twice
(:mod:`neuron_watch.diagnosis.lastword`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.crashreading import CrashReader
from neuron_watch.diagnosis.divergence import LossSeries, diverged_verdict
from neuron_watch.diagnosis.dumps import DumpScanner, dump_verdict
from neuron_watch.diagnosis.errorclass import CONFIG_ADVICE
from neuron_watch.diagnosis.heldout import IgnoredReports, RankRegistrations
from neuron_watch.diagnosis.interleaved import RULE_START, ForeignProgress, InterleavedProgress
from neuron_watch.diagnosis.interrupted import stopped_by_user
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.lastword import UncaughtTracebacks, last_word
from neuron_watch.diagnosis.lastwords import LastWords, ends_on_error
from neuron_watch.diagnosis.offline import RecentLines, Tracebacks, open_traceback
from neuron_watch.diagnosis.signature import Effect
from neuron_watch.events import Action, Label, LogLine, RankExit, RankKey, Verdict

BATCH = 4096  # lines handed to the judge at a time


@dataclass(frozen=True)
class RunRecord:
    """What a run directory's ``events.jsonl`` says of one generation: when it began and ended
    (wall seconds) and the ranks' exits -- what the live judge knew besides the lines."""

    generation: int
    began: float
    ended: float
    exits: tuple[tuple[int, int, float, bool], ...]  # (rank, exit code, when, presumed: RankExit.presumed)



class LastWord(NamedTuple):
    """An unnamed stream's line that ends the process that printed it (:mod:`neuron_watch.diagnosis.lastword`)."""

    at: int  # its index among the lines read
    line: LogLine
    form: str


def judge_offline(lines: Iterable[LogLine], kb: KnowledgeBase, settings: JudgeSettings,
                  record: RunRecord | None = None) -> tuple[Verdict, int]:
    """The verdict for ``lines``, judged at the time of the last of them (``record``: see
    :func:`neuron_watch.commands.diagnose.diagnose_lines`); and how many lines there were.

    A stream whose lines name no process (a pasted console) may mix processes, and the judge reads it as
    one: progress after an error withdraws the error. When that reading is calm and the stream holds a
    process's last word (:mod:`neuron_watch.diagnosis.lastword`: a form after which the process that
    printed it does not go on), the lines are read again without the progress that came after it in
    that stream (another process's): if that reading is a failure, it is the verdict. So too when a line
    of progress was printed inside an error block of that stream (:mod:`neuron_watch.diagnosis.interleaved`:
    another process's): the second reading leaves out the progress of that line's convention from the
    block on. ``lines`` is then iterated twice (a one-shot iterator is kept in a list for it).
    """
    if iter(lines) is lines:
        lines = list(lines)
    first = OfflineReading(kb, settings, record)
    verdict = first.read(lines)
    if verdict.action is not Action.WAIT or not (first.last_words or first.interleaved.found):
        return verdict, first.count
    second = OfflineReading(kb, settings, record, ended=first.last_words, foreign=first.interleaved.found)
    again = second.read(lines)
    if again.action is Action.WAIT or second.count != first.count:
        return verdict, first.count
    return replace(again, reason=f"{again.reason}; {_why_left_out(first, second.dropped)}"), first.count


def _why_left_out(first: OfflineReading, dropped: int) -> str:
    """Why the second reading left ``dropped`` lines of progress out (the earliest reason of the stream)."""
    told = f"in this stream of unnamed processes, {dropped} line(s) of progress"
    ended = min(first.last_words.values(), key=lambda w: w.at, default=None)
    foreign = min(first.interleaved.found.values(), key=lambda f: f.at, default=None)
    if ended is not None and (foreign is None or ended.at <= foreign.at):
        return (f"{told} after line {ended.line.lineno} ({ended.form}: the process that printed it ends there) "
                f"are another process's ({ended.line.text.strip()[:160]})")
    assert foreign is not None
    return (f"{told} are another process's: its progress ({', '.join(sorted(foreign.conventions))}) was printed "
            f"inside the error block of line {foreign.block.lineno} (line {foreign.line.lineno}), which one "
            f"process writes in one go ({foreign.block.text.strip()[:160]})")


class OfflineReading:
    """One reading of a log's lines by a new judge (:func:`judge_offline`). ``ended``: each unnamed stream's
    last word, after which its lines of progress are left out."""

    def __init__(self, kb: KnowledgeBase, settings: JudgeSettings, record: RunRecord | None,
                 ended: dict[RankKey, LastWord] | None = None,
                 foreign: dict[RankKey, ForeignProgress] | None = None) -> None:
        self.kb, self.settings, self.record, self.ended = kb, settings, record, ended or {}
        #: each unnamed stream's progress of another process (left out from its block on, ``foreign``)
        self.foreign = foreign or {}
        self.interleaved = InterleavedProgress()
        self.count = 0
        #: each unnamed stream's last line that ends the process that printed it
        self.last_words: dict[RankKey, LastWord] = {}
        self.dropped = 0  # lines of progress left out (``ended``, ``foreign``)
        self.losses = LossSeries()  # each stream's losses, for a run that diverged (divergence.py)

    def read(self, lines: Iterable[LogLine]) -> Verdict:
        judge: Judge | None = None
        first = last = None
        batch: list[LogLine] = []
        base = 0  # the index of the batch's first line
        tails: dict[RankKey, list[LogLine]] = {}  # each rank's last two non-blank lines
        tracebacks = Tracebacks()
        uncaught = UncaughtTracebacks()
        recent = RecentLines()
        dumps = DumpScanner()
        ends: LastWords[LogLine] = LastWords()
        # an exception CPython reported as ignored is not a process's last words: its traceback is not one the log
        # was cut in, nor its exception line the error the process died of (the judge leaves it out alike)
        ignored = IgnoredReports()
        registrations = RankRegistrations()  # a process group that ends before its ranks joined (round 36 part C)
        for line in lines:
            recent.add(line)
            registrations.observe(line)
            skipped = ignored.observe(line.key, line.text)
            if not skipped:
                ends.observe(line.key, line.text, line)
            if line.text.strip():
                if not skipped:
                    tail = tails.setdefault(line.key, [])
                    tail.append(line)
                    del tail[:-2]
                tracebacks.observe(line)
                dumps.observe(line)
                if line.key.rank < 0 and uncaught.observe(line.key, line.text):
                    self.last_words[line.key] = LastWord(self.count, line, _UNCAUGHT)
            if judge is None:
                judge = Judge(self.kb, self.settings, line.mono)
                judge.context = recent.around
                # the reading the live coordinator's judge does too (runtime.default_judge_factory), here with
                # the whole log's lines and tracebacks
                judge.crash_reader = CrashReader(recent.around, tracebacks, recent).read
            first = line.mono if first is None else min(first, line.mono)
            last = line.mono if last is None else max(last, line.mono)
            batch.append(line)
            self.count += 1
            if len(batch) >= BATCH:
                self._observe(judge, batch, base)
                base += len(batch)
                batch = []
        if judge is None or first is None or last is None:
            return Verdict(Label.UNOBSERVED, Action.WAIT, reason="the logs hold no lines",
                           advice="Nothing to judge: pass the ranks' logs (rank-N.log) or the run directory.")
        if batch:
            self._observe(judge, batch, base)
        judge.start = first
        record = self.record
        if record is not None:
            judge.start = min(first, record.began)
            last = max(last, record.ended)
            for rank, code, t, presumed in record.exits:
                judge.observe_exit(RankExit(RankKey("", rank), code, t, presumed))
        verdict = judge.verdict(last, final=True)
        if verdict.label is Label.HEALTHY:
            latest = max((t for st in judge.ranks.values() for t in (st.last_progress,) if t is not None),
                         default=None)
            opened = open_traceback(tails, latest, recent)
            if opened is not None and judge.crash_reader is not None:
                # a crash like the judge's own: the traceback it was cut in may show the process setting itself up
                opened = judge.crash_reader(opened, judge.last_progress_wall is not None)
            verdict = (opened or dump_verdict(dumps.finish(), latest)
                       or ends_on_error(ends.final_errors(), latest) or stopped_by_user(tails, latest)
                       or registrations.verdict(latest, CONFIG_ADVICE) or diverged_verdict(self.losses) or verdict)
        return verdict

    def _observe(self, judge: Judge, batch: list[LogLine], base: int) -> None:
        """Hand ``batch`` (its first line's index ``base``) to the judge: without the progress of an ended
        stream, and noting each unnamed stream's last word among its failures."""
        if self.ended or self.foreign:
            batch = self._without_progress_of_others(batch, base)
        at = 0
        interleaved = self.interleaved
        for line, m in judge.observe_lines(batch):
            while batch[at] is not line:
                # a block open somewhere (its stream's plain lines may go on with it), or a help message's rule
                if interleaved.open or batch[at].text.startswith(RULE_START):
                    interleaved.observe_plain(base + at, batch[at])
                at += 1
            if m.loss is not None and m.signature.effect is Effect.PROGRESS:
                self.losses.observe(line, m.signature.id, m.loss)
            if line.key.rank < 0:
                effect = m.signature.effect
                interleaved.observe(base + at, line, m.signature.id if effect in _GOING_ON else None)
                if effect in _FAILING and (form := last_word(line.text)) is not None:
                    self.last_words[line.key] = LastWord(base + at, line, form)
            at += 1
        for rest in range(at, len(batch)):
            if interleaved.open or batch[rest].text.startswith(RULE_START):
                interleaved.observe_plain(base + rest, batch[rest])

    def _without_progress_of_others(self, batch: list[LogLine], base: int) -> list[LogLine]:
        """``batch`` without the progress of its streams' other processes: every line of progress after a
        stream's last word, and after a block where another process's progress was printed, the progress
        of that process's conventions."""
        # each line that would be another process's if it were progress, with whose (see _others)
        after = [(i, others) for i, line in enumerate(batch)
                 if (others := self._others(line.key, base + i)) is not None]
        if not after:
            return batch
        going_on = set()
        for k, m in self.kb.scan([batch[i].text for i, _ in after]):
            i, others = after[k]
            if m.signature.effect in _GOING_ON and (not others or m.signature.id in others):
                going_on.add(i)
        self.dropped += len(going_on)
        return [line for i, line in enumerate(batch) if i not in going_on]

    def _others(self, key: RankKey, at: int) -> frozenset[str] | None:
        """Whose progress line ``at`` of stream ``key`` would be if it were progress: another process's
        whatever its convention (an empty set: after the stream's last word), another's in these
        conventions, or None (it may be the stream's own)."""
        w = self.ended.get(key)
        if w is not None and at > w.at:
            return frozenset()
        f = self.foreign.get(key)
        return f.conventions if f is not None and at > f.at else None


_UNCAUGHT = "a Python exception that reached the top of its program"
#: the effects of a line that fails its process (the last word is read among them)
_FAILING = frozenset({Effect.FATAL, Effect.UNEXPLAINED})
#: the effects of a line that says its process went on (left out after another process's last word)
_GOING_ON = frozenset({Effect.PROGRESS, Effect.TRAIN_END})


