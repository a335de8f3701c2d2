"""Real framework jobs under ``neuron-watch torchrun``: Hugging Face Trainer, Lightning, plain DDP.

The jobs are ``examples/frameworks/*.py`` (tiny CPU models, gloo, 2 ranks). Each is run the way a
user runs it, with only ``--checkpoint-dir`` telling neuron-watch where its checkpoints are (no
glob, no marker): neuron-watch must see the framework's own progress output (tqdm bars redrawn
with ``\\r``, HF's log dicts, the DDP tutorial's epoch lines, and Lightning's Rich bar, which
prints nothing while stdout is a file), find the framework's own checkpoints, and pass the newest
in ``NEURON_WATCH_CHECKPOINT``, which the jobs hand to ``resume_from_checkpoint`` / ``ckpt_path``
(the plain DDP job resumes from its ``snapshot.pt`` by itself). The Lightning jobs run as a Lightning
user without Hugging Face does, in a venv like this one but without transformers
(``tests/fixtures/venvs.py``: torchmetrics would import it at every rank start).

Per job, one run (module-scoped fixture ``fw_run``), observed by two tests:

* generation 0 trains to its first checkpoint, then rank 1 gets SIGSTOP: the other rank waits in
  an all-reduce, both fall silent -> ``collective_hang``, restart (``--stop-timeout 1``: a stopped
  rank takes SIGKILL at once, the others SIGTERM and a second later SIGKILL: how the job stops is
  not the subject, and a rank blocked in the all-reduce takes the whole deadline);
* generation 1 resumes, trains to its own first checkpoint, then rank 1 gets SIGKILL: a crash;
* generation 2 resumes and trains in slow steps to the end. Steps are ``STEP`` s apart with
  ``--hang-timeout HANG`` (``HANG_RICH`` for the Rich-bar job, see below). The Hugging Face job's
  last step is a checkpoint step whose save lasts ``FINAL_SAVE`` s longer on every rank (a slow
  filesystem's flush; ``--final-save-seconds``, which only that save takes): Trainer says nothing while
  it saves at its default log level, so the judge sees its bar reach the last step, then silence far
  past the hang timeout, then the final metrics.

Three generations are the fewest that show the scenarios: each fault is followed by a resume from
the framework's newest checkpoint, and the job then ends healthy (its own last words, its final
save), so the second fault's generation cannot also be the last. The slow steps ride on that last
generation, which must run anyway.

A job shows it lives in three ways, each of which restarts the hang clock: its progress output,
a new checkpoint in ``--checkpoint-dir`` (the node tells the judge, with the checkpoint's step),
and its collectives completing (the Flight Recorder, read by the rank probe in every rank).

``test_stopped_rank_is_a_hang_and_restarts``: exactly one hang, in generation 0, and the job
finishes. ``test_slow_steps_are_not_a_hang_and_a_killed_rank_resumes``: exactly one failure in
generation 1, caused by the crash (no hang verdict after generation 0), and generation 2 lived
through its slow steps. For the jobs that print progress: a progress event of generation 2 is dated
by a line of the ranks, not by the node's word of a new checkpoint (the framework's own output was
read, not only its checkpoints), and generation 2's first progress came more than
``OUTLASTS * HANG`` before the end (the Hugging Face job's slow final save not counted): a generation is on the
long startup timeout until its first progress, so progress seen only near the end would prove
nothing; two hang timeouts, so that a stretch one hang timeout long with no sign of life, and the
verdict's slack after it, fit inside it. Lightning's Rich bar prints nothing while it trains (stdout
is a file), and its checkpoints are ``SAVE_RICH`` steps apart: after generation 2's first new
checkpoint (progress: the hang timeout in force) there must be a stretch longer than ``QUIET_RICH``
in which the run's merged log got no line (no rank output, no new checkpoint), so only the
collectives kept it from being judged hung. That liveness is read every few seconds (the rank
probe's poll), so its hang timeout is a few polls long; the jobs that print progress have a short
one. The crash's restart checkpoint is the newest one the framework had written, and the job's own
output says generation 2 began at its step.
``test_a_slow_checkpoint_save_at_the_last_step_is_not_a_hang`` (the Hugging Face job): generation
2's slow final save ends in no verdict but a wait that says why (the bar at its last step), the
job's own last word and a whole last checkpoint; a run that stops during training is still a hang
(the SIGSTOPped rank, in the same run).

Waits are on conditions (a file, a line, an event) against a deadline; nothing sleeps to make time
pass. No pid of a run survives it.

These tests need: the tail to split ``\\r``-redrawn bars and the progress rules for tqdm bars and
``Epoch N | ...`` lines (branch ``progress``), the checkpoint conventions of HF / Lightning /
``snapshot.pt`` (branch ``ckpt``), and for Lightning's Rich bar the Flight-Recorder liveness
(branch ``fr``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    ROOT,
    events,
    force_cleanup,
    named,
    pids_with_env,
    rank_pid,
    started,
    toy_environment,
)
from tests.fixtures.venvs import venv_without
from tests.fixtures.wait import T, wait_for

pytestmark = pytest.mark.process

JOBS = ROOT / "examples" / "frameworks"
# seconds per training step (per epoch for the plain DDP job). Generation 2 must last a time, not a
# number of steps, and every step costs CPU (the framework's hooks and logging, a checkpoint every
# SAVE_EVERY): longer steps are fewer to pay for
STEP = 1.0
# --hang-timeout: 6 steps of silence. The silence after the last step (final save, teardown) is the
# judge's "training finished" wait: each job's last word (HF's final metrics, Lightning's
# "`Trainer.fit` stopped", the DDP job's "training done after epoch N") is a train-end signature.
HANG = 6.0
#: generation 2 trains for more than this many hang timeouts past its first progress (see above)
OUTLASTS = 2
# The Rich-bar job prints nothing: between two of its checkpoints its only liveness is its Flight
# Recorder, read every rank_probe.POLL_EVERY (5 s) plus the answer's own delay under load: silence is
# judged over a few polls
HANG_RICH = 12.0
SAVE_EVERY = 5  # steps between two checkpoints (the DDP job: 2 epochs, its snapshot's own pace)
# The Rich-bar job's checkpoints are further apart: a new checkpoint is a sign of life of its own (the
# node reports it to the judge), so generation 2 must hold a stretch between two of them, on the hang
# timeout, in which only the collectives show that the job lives: longer than QUIET_RICH
SAVE_RICH = 25
#: the Rich-bar job's quiet stretch must outlast this: the hang timeout and the verdict's slack after
#: it (a verdict comes at the loop's next tick after the timeout); a new checkpoint is seen up to a scan
#: (hang timeout / 3) after it is written, which SAVE_RICH's 25 s between two of them cover
QUIET_RICH = HANG_RICH + 3.0
MARGIN = 8.0  # seconds of generation 2's training beyond what its assertion needs
#: the Hugging Face job's last checkpoint save lasts three hang timeouts longer (only the last step's save)
FINAL_SAVE = 3 * HANG
# --startup-timeout: from a generation's start to its first progress, so it must cover the imports
# (torch + transformers: ~10 CPU-s per rank, >60 s of wall time on a 2-core machine under load 13;
# 87 s from the restart to the Rich-bar job's first checkpoint at load 18)
STARTUP = 180.0
DEADLINE = 720.0  # for one whole run of three generations, on a busy 2-core machine


# -- the jobs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """How to run one framework job, and how to read its checkpoints and its own words."""

    name: str
    argv: Callable[[Path, int, float], list[str]]  # (checkpoint dir, length, step seconds) -> args
    checkpoints: Callable[[Path], list[tuple[int, Path]]]  # the complete checkpoints: (step, path)
    began: re.Pattern[str]  # rank 0's line saying where training began (group 1: the step)
    done: str  # rank 0's last line
    #: distributions installed here that the job's environment lacks (tests/fixtures/venvs.py)
    absent: tuple[str, ...] = ()

    def newest(self, ckpt: Path) -> tuple[int, Path] | None:
        return max(self.checkpoints(ckpt), default=None)


def _hf_checkpoints(ckpt: Path) -> list[tuple[int, Path]]:
    # Trainer writes trainer_state.json last (transformers/trainer.py, Trainer._save_checkpoint)
    found = []
    for d in ckpt.glob("checkpoint-*"):
        try:
            found.append((int(json.loads((d / "trainer_state.json").read_text())["global_step"]), d))
        except (OSError, ValueError, KeyError):
            continue
    return found


def _lightning_checkpoints(ckpt: Path) -> list[tuple[int, Path]]:
    found = []
    for f in ckpt.glob("*.ckpt"):
        m = re.search(r"step=(\d+)", f.name)
        try:
            # torch.save writes a zip; its central directory comes last: complete when it reads
            with zipfile.ZipFile(f) as z:
                whole = z.testzip() is None
        except (OSError, zipfile.BadZipFile):
            whole = False
        if m and whole:
            found.append((int(m.group(1)), f))
    return found


def _ddp_checkpoints(ckpt: Path) -> list[tuple[int, Path]]:
    # the job renames a whole snapshot into place; its EPOCHS_RUN is read from the job's own log
    # (the test process does not import torch)
    return [(0, ckpt / "snapshot.pt")] if (ckpt / "snapshot.pt").exists() else []


# a bar may share the line: "\rTraining: |          | 0/? [00:00<?, ?it/s]training began at global step 0"
BEGAN = re.compile(r"training began at global step (\d+)$", re.M)

JOB_HF = Job(
    "hf_trainer",
    lambda ckpt, n, s: [str(JOBS / "hf_trainer.py"), "--output-dir", str(ckpt), "--max-steps", str(n),
                        "--save-steps", str(SAVE_EVERY), "--step-seconds", str(s),
                        "--final-save-seconds", str(FINAL_SAVE)],
    _hf_checkpoints,
    BEGAN,
    "training done at step",
)


def _lightning(bar: str, save_every: int = SAVE_EVERY) -> Job:
    return Job(
        f"lightning_job-{bar}",
        lambda ckpt, n, s: [str(JOBS / "lightning_job.py"), "--ckpt-dir", str(ckpt), "--max-steps", str(n),
                            "--save-every", str(save_every), "--bar", bar, "--step-seconds", str(s)],
        _lightning_checkpoints,
        BEGAN,
        "training done at step",
        # Lightning imports torchmetrics, which imports transformers' AutoModel and AutoTokenizer
        # whenever transformers is installed (~2-2.5 CPU-s at every rank start, 12 here); the user of
        # a Lightning job without Hugging Face has no transformers, and nor does this job
        absent=("transformers",),
    )


JOB_DDP = Job(
    "ddp_plain",
    lambda ckpt, n, s: [str(JOBS / "ddp_plain.py"), "--total-epochs", str(n), "--save-every", "2",
                        "--snapshot-path", str(ckpt / "snapshot.pt"), "--epoch-seconds", str(s),
                        "--samples", "256"],
    _ddp_checkpoints,
    re.compile(r"^Resuming training from snapshot at Epoch (\d+)$", re.M),
    "training done after epoch",
)

# Lightning's own choice: RichProgressBar, rich being importable here
JOB_RICH = _lightning("default", save_every=SAVE_RICH)
JOBS_ALL = [JOB_HF, _lightning("tqdm"), JOB_RICH, JOB_DDP]


# -- running one job under neuron-watch --------------------------------------------------------


@dataclass
class Run:
    proc: subprocess.Popen[str]
    run_dir: Path
    ckpt: Path
    out: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "".join(self.out)[-4000:]

    def rank_pid(self, rank: int, generation: int) -> int | None:
        """The pid of ``rank`` of ``generation`` (procs.rank_pid)."""
        return rank_pid(self.run_dir, rank, generation)

    def rank_log(self, rank: int, generation: int) -> str:
        try:
            return (self.run_dir / f"gen-{generation}" / f"rank-{rank}.log").read_text(errors="replace")
        except OSError:
            return ""

    def wait_for(self, what: str, cond: Callable[[], T], deadline: float) -> T:
        """Poll ``cond`` until it returns something true; fail at ``deadline`` or if the run ends."""
        return wait_for(what, cond, deadline, alive=self.proc, explain=self.output, interval=0.2)



@contextlib.contextmanager
def watched(tmp_path: Path, env: dict[str, str], job: Job, length: int, step: float,
            watch_args: tuple[str, ...] = (), startup: float = STARTUP, hang: float = HANG) -> Iterator[Run]:
    """``neuron-watch torchrun --nproc_per_node 2 <job>`` running; stopped, reaped and checked on exit."""
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    argv = [NEURON_WATCH, "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            "--hang-timeout", str(hang), "--startup-timeout", str(startup), *watch_args,
            "torchrun", "--nproc_per_node", "2", *job.argv(ckpt, length, step)]
    try:
        with started(argv, str(tmp_path), env) as p:
            run = Run(p, run_dir, ckpt)
            # drained as it comes: rank output echoed on the console must never fill the pipe
            reader = threading.Thread(target=lambda: run.out.extend(iter(p.stdout.readline, "")) if p.stdout else None,
                                      daemon=True)
            reader.start()
            yield run
            reader.join(30)
    finally:
        force_cleanup(str(run_dir))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []


def finish(run: Run, deadline: float) -> int:
    """Wait for neuron-watch to exit by ``deadline``; its exit code."""
    try:
        return run.proc.wait(max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not finish in time:\n{run.output()}")


def first_checkpoint(run: Run, job: Job, deadline: float) -> tuple[int, Path]:
    """Wait for generation 0's first complete checkpoint (for the DDP job: its first snapshot line)."""
    if job is JOB_DDP:
        line = run.wait_for("the first snapshot", lambda: re.search(r"^Epoch (\d+) \| Training snapshot saved",
                                                                     run.rank_log(0, 0), re.M), deadline)
        return int(line.group(1)) + 1, run.ckpt / "snapshot.pt"
    got: tuple[int, Path] = run.wait_for("the first checkpoint", lambda: job.newest(run.ckpt), deadline)
    return got


def saved_epochs(log: str) -> int:
    """The DDP job's EPOCHS_RUN in its newest snapshot, from its own log (epochs completed)."""
    return max(int(m) + 1 for m in re.findall(r"^Epoch (\d+) \| Training snapshot saved", log, re.M))


def _t(event: dict[str, Any]) -> float:
    return _epoch(event["time"])


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# merged.log: "<ISO time> <node>/rank<N> | <text>"; the node's own word of a new checkpoint in
# --checkpoint-dir: "<ISO time> <node>/rank? | neuron-watch: a new complete checkpoint appeared: <path> (step N)"
MERGED_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\S+Z) \S+ \| (.*)$")
APPEARED = "neuron-watch: a new complete checkpoint appeared: "


def _merged(run: Run) -> list[tuple[float, bool, str]]:
    """Every line of the run's merged.log: its time, whether it is the node's word of a new
    checkpoint (else a rank's output), and its text."""
    found = []
    for line in (run.run_dir / "merged.log").read_text(errors="replace").splitlines():
        m = MERGED_LINE.match(line)
        if m is not None:  # else a continuation of a long line
            found.append((_epoch(m.group(1)), m.group(2).startswith(APPEARED), m.group(2)))
    return found


def fw_environment() -> dict[str, str]:
    """The toy jobs' environment, plus: nothing downloads, nobody phones home."""
    env = toy_environment()
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"})
    return env


@dataclass(frozen=True)
class Record:
    """What one framework's run left: its exit, events and the checkpoints seen while it ran."""

    job: Job
    run: Run
    length: int  # the job's steps (the DDP job: epochs)
    code: int
    out: str
    evs: list[dict[str, Any]]
    first_step: int  # generation 1's first checkpoint (the DDP job: epochs saved), before the kill
    newest_at_kill: tuple[int, Path] | None


def _rank_1(run: Run, generation: int, deadline: float) -> int:
    """The pid of rank 1 of ``generation``, once it runs."""
    pid = run.wait_for(f"rank 1 of generation {generation}", lambda: run.rank_pid(1, generation), deadline)
    assert pid is not None
    return pid


def _checkpoint_of_generation_1(run: Run, job: Job, deadline: float) -> int:
    """Generation 1's first own checkpoint: its step (the DDP job: its first snapshot's epochs)."""
    if job is JOB_DDP:
        line = run.wait_for("generation 1's first snapshot", lambda: re.search(
            r"^Epoch (\d+) \| Training snapshot saved", run.rank_log(0, 1), re.M), deadline)
        assert line is not None
        return int(line.group(1)) + 1
    before = job.newest(run.ckpt)  # generation 0 is over: nothing of it writes any more
    floor = before[0] if before else -1

    def newer() -> int:
        got = job.newest(run.ckpt)
        return got[0] if got is not None and got[0] > floor else 0

    return run.wait_for("generation 1's first checkpoint", newer, deadline)


@pytest.fixture(scope="module")
def fw_run(job: Job, tmp_path_factory: pytest.TempPathFactory) -> Record:
    """One run of ``job`` under neuron-watch, observed by both tests of its framework: rank 1 is
    SIGSTOPped after generation 0's first checkpoint (a hang), SIGKILLed after generation 1's first
    checkpoint (a crash); generation 2 trains in slow steps to the end. No pid of it survives."""
    tmp_path = tmp_path_factory.mktemp(job.name)
    rich = job is JOB_RICH
    if rich:
        # generation 2 resumes at generation 1's first checkpoint (2 * SAVE_RICH), writes one more (the
        # hang timeout is then in force) and trains SAVE_RICH quiet steps on to the last one's checkpoint
        length = 4 * SAVE_RICH
    else:
        # generation 2 trains > OUTLASTS * HANG from where generation 1 was killed (its first checkpoint:
        # 2 * SAVE_EVERY steps or 4 epochs in); MARGIN more for a kill a step after that checkpoint and a
        # slow end
        length = (4 if job is JOB_DDP else 2 * SAVE_EVERY) + math.ceil((OUTLASTS * HANG + MARGIN) / STEP)
        if job is not JOB_DDP:  # the last step is a checkpoint step: its save is part of the healthy end
            length = SAVE_EVERY * math.ceil(length / SAVE_EVERY)
    env = fw_environment()
    if job.absent:
        env["PATH"] = f"{venv_without(tmp_path / 'venv', job.absent)}{os.pathsep}{env['PATH']}"
    deadline = time.monotonic() + DEADLINE
    # --no-prewarm: a torchrun started ahead for a next generation (once a generation has trained for
    # a minute) would be started, in vain, in the last one; how a restart starts is not the subject
    with watched(tmp_path, env, job, length, STEP, watch_args=("--stop-timeout", "1", "--no-prewarm"),
                 hang=HANG_RICH if rich else HANG) as run:
        first_checkpoint(run, job, deadline)
        os.kill(_rank_1(run, 0, deadline), signal.SIGSTOP)
        victim = _rank_1(run, 1, deadline)  # generation 1 runs: generation 0 is over
        first_step = _checkpoint_of_generation_1(run, job, deadline)
        newest_at_kill = job.newest(run.ckpt)
        os.kill(victim, signal.SIGKILL)
        code = finish(run, deadline)
        out = run.output()
    return Record(job, run, length, code, out, events(run.run_dir), first_step, newest_at_kill)


def _per_job(jobs: list[Job]) -> list[Any]:
    # both tests of a framework observe its one run: on the same pytest-xdist worker
    return [pytest.param(j, id=j.name, marks=pytest.mark.xdist_group(f"frameworks-{j.name}")) for j in jobs]


@pytest.mark.timeout(DEADLINE + 60)
@pytest.mark.parametrize("job", _per_job(JOBS_ALL), scope="module")
def test_slow_steps_are_not_a_hang_and_a_killed_rank_resumes(fw_run: Record, job: Job) -> None:
    run, evs, out = fw_run.run, fw_run.evs, fw_run.out
    assert fw_run.code == 0, out
    restarts = named(evs, "restart")
    assert len(restarts) == 2, [e["event"] for e in evs]
    verdicts = [v for v in named(evs, "verdict") if v["action"] != "wait" and v["generation"] == 1]
    # a SIGKILL with no OOM evidence is not "oom": the victim's exit (other_crash, "killed
    # by signal 9"), or the survivor judged first by its gloo error
    assert len(verdicts) == 1 and verdicts[0]["label"] in ("other_crash", "comm_error"), verdicts
    assert verdicts[0]["culprit"]["rank"] == 1
    assert not [v for v in named(evs, "verdict") if v["label"] == "collective_hang" and v["generation"] > 0]
    gen2 = run.rank_log(0, 2)
    assert job.done in gen2, gen2[-2000:]
    began = job.began.search(gen2)
    assert began, gen2[-2000:]
    step = fw_run.first_step
    if job is JOB_DDP:
        assert restarts[1]["checkpoint"] == str(run.ckpt / "snapshot.pt")
        assert int(began.group(1)) == saved_epochs(run.rank_log(0, 1)) >= step
    else:
        # the framework's newest checkpoint, found with --checkpoint-dir alone
        assert fw_run.newest_at_kill is not None
        chosen = Path(restarts[1]["checkpoint"])
        chosen_step = dict((p, n) for n, p in job.checkpoints(run.ckpt))[chosen]
        assert chosen_step >= fw_run.newest_at_kill[0] >= step
        assert int(began.group(1)) == chosen_step  # generation 2 began where the checkpoint was
    end = _t(named(evs, "job_finished")[0])
    restarted = _t(restarts[1])
    seen = [e for e in named(evs, "progress") if e["generation"] == 2]
    assert seen, "no progress of generation 2 seen"
    if job is JOB_RICH:
        # Rich prints nothing. Between generation 2's first new checkpoint (progress: the hang timeout
        # is in force) and the job's last word, a stretch longer than a hang timeout and its slack in
        # which merged.log got no line at all (no rank output, no word of a new checkpoint): only the
        # collectives, read by the rank probe, said that the job lived; a job whose collectives were
        # not seen would have been judged hung in it
        merged = [(t, checkpoint, text) for t, checkpoint, text in _merged(run) if t > restarted]
        appeared = [t for t, checkpoint, _ in merged if checkpoint]
        done = [t for t, _, text in merged if job.done in text]
        assert appeared and done, "no new checkpoint of generation 2, or no last word, seen"
        training = [t for t, _, _ in merged if appeared[0] <= t <= done[0]]
        quiet = max((b - a for a, b in itertools.pairwise(training)), default=0.0)
        assert quiet > QUIET_RICH, f"generation 2's longest quiet stretch was {quiet:.1f}s"
    else:
        # the framework's own progress output was read: a progress event dated by a rank's line (an
        # event is dated by the line that showed the progress; a new checkpoint is progress too)
        announced = [t for t, checkpoint, _ in _merged(run) if checkpoint]
        printed = [e for e in seen if all(abs(_t(e) - t) > 0.001 for t in announced)]
        assert printed, f"generation 2's progress came only from its new checkpoints: {seen}"
        # Until its first progress a generation is on the (long) startup timeout. Proves something
        # only if progress was seen early: generation 2 then trained for more than OUTLASTS * HANG
        # on the hang timeout, which any stretch longer than HANG with no sign of life would have fired.
        # The Hugging Face job's slow final save (FINAL_SAVE s of silence after its last step) is not
        # training: not counted.
        first = min(_t(e) for e in seen)
        trained = end - first - (FINAL_SAVE if job is JOB_HF else 0.0)
        assert trained > OUTLASTS * HANG, f"generation 2's first progress was seen only near its end: {trained:.1f}s"


@pytest.mark.timeout(DEADLINE + 60)
@pytest.mark.parametrize("job", _per_job(JOBS_ALL), scope="module")
def test_stopped_rank_is_a_hang_and_restarts(fw_run: Record, job: Job) -> None:
    evs = fw_run.evs
    assert fw_run.code == 0, fw_run.out
    hangs = [v for v in named(evs, "verdict") if v["label"] == "collective_hang"]
    assert len(hangs) == 1 and hangs[0]["generation"] == 0, named(evs, "verdict")
    restarts = named(evs, "restart")
    assert len(restarts) == 2 and restarts[0]["generation"] == 1, restarts
    assert named(evs, "job_finished")[0]["restarts"] == 2
    assert job.done in fw_run.run.rank_log(0, 2)


@pytest.mark.timeout(DEADLINE + 60)
@pytest.mark.parametrize("job", _per_job([JOB_HF]), scope="module")
def test_a_slow_checkpoint_save_at_the_last_step_is_not_a_hang(fw_run: Record, job: Job) -> None:
    run, evs, length = fw_run.run, fw_run.evs, fw_run.length
    assert fw_run.code == 0, fw_run.out
    last = [v for v in named(evs, "verdict") if v["generation"] == 2]
    assert not [v for v in last if v["action"] != "wait"], last
    assert len(named(evs, "restart")) == 2, [e["event"] for e in evs]  # the hang's and the crash's alone
    assert not [e for e in named(evs, "incident") if e["generation"] == 2], named(evs, "incident")
    # the judge did see the silence (longer than the hang timeout) and said why it waited
    waited = [v for v in last if "reached the last step" in v["reason"]]
    assert waited and waited[0]["step"] == length, last
    assert f"{length}/{length}" in waited[0]["evidence"][0]["text"], waited[0]
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    assert f"training done at step {length}" in run.rank_log(0, 2)
    state = json.loads((run.ckpt / f"checkpoint-{length}" / "trainer_state.json").read_text())
    assert state["global_step"] == length  # the slow save completed: the checkpoint is whole
