"""Leave-one-batch-out: each held-out batch scored by the product as it stood before its fixes.

    .venv/bin/python tests/benchmarks/bench_heldout_history.py [--batch B] [--timeout S] [--wrong] [--graft[-blocks]]

For each collection batch of ``tests/data/real-logs/`` (their ``batch`` key, see its README), the
commit that added the batch's excerpts is found in git history: the newest commit that touched
the batch's files while ``watchdog/`` was still the tree it was before the first of them (so no
fix learnt from them yet; each file's history is read from the commit where it entered the batch).
That commit is checked out into a temporary detached git worktree,
its ``watchdog/`` imported as ``neuron_watch`` (the package mapping of ``pyproject.toml``) by a
child process of this venv's python, and it diagnoses **the batch's excerpts as they are today**
(today's text and labels). The same child runs on today's product for the second pair of
columns. Printed per batch: excerpts, blind labels % and actions % (wait / restart / drain / stop
against the label's action), healthy-misses (excerpts whose label calls for an action other than
``wait`` read as ``healthy``), today's labels % and actions %, the commit; then the confusions that
change the action, by kind, blind -> today; and a note when the choice of commit is not clean
(files of the batch touched again after the product changed). ``--wrong`` then lists every blind
miss (label or action wrong): the excerpt, the expected label and action, the blind label and action
and the evidence line the blind verdict rests on, then today's label and action; ``--wrong-json F``
writes the same list to ``F`` (one object per miss) for grouping the misses by form.

``--graft`` measures whether today's readers of structure would have generalised: into each blind
tree that has ``errorclass.py`` (the hook an error line no rule explains is asked of), today's
``diagnosis/exctaxonomy.py`` is copied beside it and ``read_error`` asks it last, as today's does;
the blind product is otherwise untouched, so what the graft changes is what the readers alone
would have caught without the batch's phrases. A tree without ``errorclass.py`` is scored as is
and its row says so. The second figure adds what ``diagnose`` reads of a whole excerpt after the
judge (commands/diagnose.py): an input that ends inside a traceback is not healthy, a stack dump whose
main thread waits on its peers or its device is a hang (one that compiles, compiling), a program-mistake
exception before any progress is configuration unless whole frames place it in the work, and so is a crash before
any progress whose message states the set-up it refuses (exctaxonomy.setup_refusal). It is applied to each grafted
answer from the excerpt's text as one stream (ranks not split), an approximation of the product.

``--graft-blocks`` does ``--graft`` and scores each grafted tree once more with today's
``diagnosis/errorblock.py`` copied beside its errorclass: after the blind judge, where today's judge
asks the error block (a verdict of unknown cause, or one resting on a vague, unexplained or form
line), the excerpt's block around the verdict's evidence line is read with the blind tree's own table
and its errorclass (with today's readers grafted): the most specific line decides. Printed per batch:
the misses the readers alone catch (before), with the block reader too (after), the misses only the
block reader catches, and the right actions it breaks. The excerpt is read as one stream (ranks not
split, launcher tags read under by the block reader): an approximation of the product.

Each child runs in its own process group against one deadline and is killed and reaped if it
passes it; each temporary worktree is removed (``git worktree remove --force``) even on error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from neuron_watch.diagnosis.dumps import DumpScanner, dump_verdict
from neuron_watch.diagnosis.exctaxonomy import (
    exception_message,
    frame_of,
    in_traceback,
    program_mistake,
    setup_refusal,
)
from neuron_watch.diagnosis.firstfailure import mistake_before_progress
from neuron_watch.diagnosis.logtext import split_rank_prefix
from neuron_watch.events import Action, Evidence, Label, LogLine, RankKey, Verdict
from tests.fixtures.corpus_score import (
    ACTION_CHANGES,
    EXPECTED_ACTIONS,
    BlindCommit,
    NoBlindCommit,
    Score,
    action_changes,
    blind_commit,
    score,
)
from tests.fixtures.real_logs import Excerpt, load_corpus

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = "watchdog"

#: Run in the child: import ``neuron_watch`` from the shim first on ``sys.path``, diagnose each log
#: named on stdin alone and print one JSON line per log. ``diagnose_paths`` lived in
#: ``neuron_watch.diagnose`` before the sub-packages and in ``neuron_watch.commands.diagnose`` after;
#: which one is read from the tree, because the venv's editable install answers for a sub-package
#: the old tree lacks. Every ``neuron_watch`` module loaded is checked to come from the tree, before
#: and after, so today's package never answers for an old one unnoticed.
CHILD = r"""
import json, os, sys
from pathlib import Path
want = Path(sys.argv[1]).resolve()
# The same checkout's launchers (``neuron_watch.launchers``), for today's tree only: a blind tree is
# its ``watchdog/`` alone, and today's launchers answering for it would be caught below.
also = [Path(p).resolve() for p in sys.argv[2:]]
import neuron_watch
if (want / "commands" / "diagnose.py").exists():
    from neuron_watch.commands.diagnose import diagnose_paths
else:
    from neuron_watch.diagnose import diagnose_paths


def check_origin():
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name.split(".")[0] == "neuron_watch" and where and not any(
                Path(where).resolve().is_relative_to(root) for root in (want, *also)):
            sys.exit(f"{name} imported from {where}, not from {want}: an installed copy answers for the tree")


check_origin()
blocks = None
if os.environ.get("NW_GRAFT_BLOCKS") == "1":
    import importlib
    sub = "diagnosis." if (want / "diagnosis" / "errorclass.py").exists() else ""
    blocks = (importlib.import_module(f"neuron_watch.{sub}errorblock"),
              importlib.import_module(f"neuron_watch.{sub}errorclass"),
              importlib.import_module(f"neuron_watch.{sub}kb").default_knowledge_base(None))


def line_cause(kb, errorclass, text):
    # as today's Judge._line_cause: a rule that names a cause, else the line's form (errorclass)
    m = kb.classify(text)
    if m is not None:
        sig = m.signature
        effect = getattr(getattr(sig, "effect", None), "value", "fatal")
        if effect == "fatal" and not sig.id.startswith("form.") and (
                not getattr(sig, "generic", False) or sig.category.value != "other_crash"):
            return sig.category, sig.action
        if effect not in ("fatal", "unexplained"):
            return None
    reading = errorclass.read_error(text)
    return None if reading is None else (reading.label, reading.action)


def read_block(path, v, out):
    # the judge's block reading applied after the blind judge, where it asks it: a verdict of unknown
    # cause, or one resting on a vague or unexplained line; the excerpt read as one stream
    errorblock, errorclass, kb = blocks
    ev = v.evidence[0] if v.evidence else None
    if ev is None or not ev.text.strip():
        return out
    sig = kb.by_id.get(ev.signature)
    effect = getattr(getattr(sig, "effect", None), "value", "")
    if not (v.label.value == "other_crash" or sig is None or getattr(sig, "generic", False)
            or effect == "unexplained" or ev.signature.startswith("form.")):
        return out
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    want_text = ev.text.strip()
    at = next((i for i in range(len(lines) - 1, -1, -1) if want_text in lines[i]), None)
    if at is None:
        return out
    for i in range(at + 1, len(lines)):  # the report ends where the process shows progress again
        m = kb.classify(lines[i])
        if m is not None and getattr(getattr(m.signature, "effect", None), "value", "") == "progress":
            del lines[i:]
            break
    said = {}

    def explain(text):
        cause = line_cause(kb, errorclass, text)
        if cause is None:
            return None
        said[text] = cause
        return cause[0]

    decision = errorblock.cause_from(lines, at, explain)
    if decision is None or (decision.index == at and decision.read == lines[at]):
        return out
    label, action = said[decision.read]
    return {**out, "label": label.value, "action": action.value, "line": lines[decision.index],
            "reason": "error block: " + out["reason"]}


for path in json.loads(sys.stdin.read()):
    try:
        v = diagnose_paths([path]).verdict
        said = [getattr(e, "text", "") for e in getattr(v, "evidence", ())]
        out = {"path": path, "label": v.label.value, "action": v.action.value,
               "reason": str(getattr(v, "reason", "")), "line": said[0] if said else "",
               "step": getattr(v, "step", None)}
        if blocks is not None:
            out = read_block(path, v, out)
    except Exception as exc:
        out = {"path": path, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
check_origin()
"""


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def product_tree(commit: str) -> str:
    """The tree hash of the product at ``commit`` (empty when it has none)."""
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{commit}:{PRODUCT}"],
                          capture_output=True, text=True)
    return done.stdout.strip()


def batch_files(excerpts: list[Excerpt]) -> list[str]:
    files: list[str] = []
    for ex in excerpts:
        for path in (ex.log, ex.log.with_suffix(".toml")):
            files.append(str(path.relative_to(ROOT)))
    return files


def entered_batch(excerpts: list[Excerpt], batch: str) -> set[str]:
    """The commits at which ``excerpts`` entered ``batch``: for each, the oldest that wrote its ``batch`` line
    as it is today (one ``git log`` for them all). An excerpt relabelled into a batch from another keeps its
    older history, which is not the batch's (round 21 once took over a round-5 excerpt; its history then
    began in round 5)."""
    tomls = [str(ex.log.with_suffix(".toml").relative_to(ROOT)) for ex in excerpts]
    out = git("log", "--full-history", "--no-merges", "--topo-order", "--format=commit %H", "--name-only",
              "-S", f'batch = "{batch}"', "--", *tomls)
    oldest: dict[str, str] = {}  # file -> the oldest commit seen (the log is newest first)
    commit = ""
    for line in out.splitlines():
        if line.startswith("commit "):
            commit = line.split()[1]
        elif line:
            oldest[line] = commit
    return set(oldest.values())


def find_blind(excerpts: list[Excerpt], batch: str) -> BlindCommit:
    """The batch's blind commit (see :func:`tests.fixtures.corpus_score.blind_commit`), from the
    history of the batch's files since each of them entered the batch."""
    files = batch_files(excerpts)
    commits = git("log", "--full-history", "--no-merges", "--topo-order", "--format=%H", "--", *files).split()
    if not commits:
        raise NoBlindCommit("its excerpts are not committed yet: commit them, alone, before any fix")
    entries = entered_batch(excerpts, batch)
    oldest = max((commits.index(c) for c in entries if c in commits), default=len(commits) - 1)
    commits = commits[:oldest + 1]
    history = [(c, product_tree(c)) for c in commits]
    base = product_tree(f"{commits[-1]}^")
    return blind_commit(history, base)


def run_child(package: Path, logs: list[str], deadline: float,
              also: tuple[Path, ...] = (), blocks: bool = False) -> dict[str, dict[str, str]]:
    """Diagnose ``logs`` with the ``watchdog/`` at ``package`` imported as ``neuron_watch`` (``blocks``: and
    read the error block of each verdict the judge would read it for, see ``--graft-blocks``)."""
    with tempfile.TemporaryDirectory(prefix="nw-shim-") as shim:
        (Path(shim) / "neuron_watch").symlink_to(package, target_is_directory=True)
        env = {**os.environ, "PYTHONPATH": shim, "PYTHONDONTWRITEBYTECODE": "1",
               "NW_GRAFT_BLOCKS": "1" if blocks else "0"}
        argv = [sys.executable, "-c", CHILD, str(package.resolve()), *map(str, also)]
        proc = subprocess.Popen(argv, env=env, cwd=shim,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(json.dumps(logs), timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise SystemExit(f"diagnosing with {package} passed the deadline: raise --timeout") from None
        finally:
            if proc.poll() is None:  # an exception other than the timeout: stop the child's group too
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"diagnosing with {package} failed ({proc.returncode}): {err.strip()[-2000:]}")
    answers = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {a["path"]: a for a in answers}


Answers = list[tuple[Label, Label, Action]]


def score_answers(excerpts: list[Excerpt], answers: dict[str, dict[str, str]]) -> tuple[Answers, int]:
    """(expected, said, action) per excerpt, and how many the product could not answer (counted)."""
    triples: list[tuple[Label, Label, Action]] = []
    failed = 0
    for ex in excerpts:
        a = answers.get(str(ex.log), {})
        try:
            triples.append((ex.label, Label(a["label"]), Action(a["action"])))
        except (KeyError, ValueError):
            # Neither a label nor an action of today: wrong on both, never read as healthy.
            failed += 1
            triples.append((ex.label, Label.UNOBSERVED, Action.WAIT))
    return triples, failed


#: today's readers of structure, and what is appended to a blind tree's errorclass.py to ask them last
GRAFTED = ROOT / PRODUCT / "diagnosis" / "exctaxonomy.py"
GRAFT_HOOK = """

from neuron_watch.{package}exctaxonomy import read_structure as _read_structure

_read_error_before_graft = read_error


def read_error(text):  # type: ignore[no-redef]
    reading = _read_error_before_graft(text)
    if reading is None:
        cause = _read_structure(text)
        if cause is not None and cause.label.value in _ACTIONS:
            return Reading(cause.label, _ACTIONS[cause.label.value], cause.form, "")
    return reading
"""


#: today's reader of error blocks, copied beside the blind tree's errorclass by ``--graft-blocks``
GRAFTED_BLOCKS = ROOT / PRODUCT / "diagnosis" / "errorblock.py"


def graft(product: Path, blocks: bool = False) -> bool:
    """Make ``product``'s errorclass ask today's readers of structure last (``blocks``: and put today's
    error-block reader beside it); False when it has no errorclass."""
    for errorclass, package in ((product / "diagnosis" / "errorclass.py", "diagnosis."),
                                (product / "errorclass.py", "")):
        if errorclass.exists():
            (errorclass.parent / GRAFTED.name).write_text(GRAFTED.read_text(encoding="utf-8"), encoding="utf-8")
            if blocks:
                (errorclass.parent / GRAFTED_BLOCKS.name).write_text(
                    GRAFTED_BLOCKS.read_text(encoding="utf-8"), encoding="utf-8")
            with errorclass.open("a", encoding="utf-8") as out:
                out.write(GRAFT_HOOK.format(package=package))
            return True
    return False


def same_launchers(commit: str) -> tuple[Path, ...]:
    """This checkout's ``launchers/`` when it is byte for byte the one at ``commit`` (else none).

    A blind tree is its ``watchdog/`` alone, but a product as new as the composition root imports
    ``neuron_watch.launchers``, which the editable install maps to this checkout's ``launchers/``.
    That copy may answer for the blind tree only when it is the commit's own: the same git tree
    and no uncommitted change; otherwise the child's origin check refuses it, as before.
    """
    theirs = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{commit}:launchers"],
                            capture_output=True, text=True).stdout.strip()
    ours = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", "HEAD:launchers"],
                          capture_output=True, text=True).stdout.strip()
    clean = not subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "launchers"],
                               capture_output=True, text=True).stdout.strip()
    return (ROOT / "launchers",) if theirs and theirs == ours and clean else ()


def own_launchers(tree: Path, commit: str) -> None:
    """The commit's own ``launchers/`` inside its ``watchdog/`` tree, where it is not this checkout's.

    ``neuron_watch.launchers`` is found in the package's own directory before the editable install's
    finder (appended last to ``sys.meta_path``) maps it to this checkout's ``launchers/``: a blind
    product whose launchers differ from today's then imports its own, which the origin check accepts.
    A commit from before ``launchers/`` existed needs none."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{commit}:launchers"],
                      capture_output=True).returncode != 0:
        return
    subprocess.run(["git", "-C", str(tree), "checkout", commit, "--", "launchers"], check=True, capture_output=True)
    (tree / "launchers").rename(tree / PRODUCT / "launchers")


def blind_answers(commit: str, excerpts: list[Excerpt], deadline: float,
                  grafted: bool = False, blocks: bool = False) -> tuple[dict[str, dict[str, str]], bool]:
    """The blind product's answers, and whether today's readers (``blocks``: and block reader) were grafted."""
    with tempfile.TemporaryDirectory(prefix="nw-heldout-") as tmp:
        tree = Path(tmp) / "tree"
        git("worktree", "add", "--detach", "--no-checkout", str(tree), commit)
        try:
            subprocess.run(["git", "-C", str(tree), "checkout", commit, "--", PRODUCT], check=True,
                           capture_output=True)
            done = grafted and graft(tree / PRODUCT, blocks)
            also = same_launchers(commit)
            if not also:
                own_launchers(tree, commit)
            return run_child(tree / PRODUCT, [str(ex.log) for ex in excerpts], deadline,
                             also=also, blocks=done and blocks), done
        finally:
            git("worktree", "remove", "--force", str(tree))


def wrong(batch: str, excerpts: list[Excerpt], blind: dict[str, dict[str, str]],
          today: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """The excerpts of ``batch`` the blind product got wrong (label or action), with its evidence."""
    out = []
    for ex in excerpts:
        b, t = blind.get(str(ex.log), {}), today.get(str(ex.log), {})
        expected_actions = EXPECTED_ACTIONS[ex.label]
        right_label = b.get("label") == ex.label.value
        right_action = b.get("action") in {a.value for a in expected_actions}
        if right_label and right_action:
            continue
        out.append({"batch": batch, "excerpt": ex.name, "path": str(ex.log), "expected": ex.label.value,
                    "expected_action": "|".join(sorted(a.value for a in expected_actions)),
                    "blind": b.get("label", b.get("error", "?")), "blind_action": b.get("action", "?"),
                    "line": b.get("line", ""), "reason": b.get("reason", ""),
                    "today": t.get("label", "?"), "today_action": t.get("action", "?")})
    return out


def graft_row(batch: str, excerpts: list[Excerpt], blind: dict[str, dict[str, str]],
              grafted: dict[str, dict[str, str]], done: bool) -> str:
    """One batch: its blind misses, how many the grafted readers get right, how many right ones they break."""
    def action_right(a: dict[str, str], ex: Excerpt) -> bool:
        return a.get("action") in {x.value for x in EXPECTED_ACTIONS[ex.label]}

    def right(a: dict[str, str], ex: Excerpt) -> bool:
        return a.get("label") == ex.label.value and action_right(a, ex)

    missed = [ex for ex in excerpts if not right(blind.get(str(ex.log), {}), ex)]
    caught = sum(right(grafted.get(str(ex.log), {}), ex) for ex in missed)
    broken = sum(action_right(blind.get(str(ex.log), {}), ex) and not action_right(grafted.get(str(ex.log), {}), ex)
                 for ex in excerpts)
    said, _ = score_answers(excerpts, grafted)
    s = score(said)
    whole = {str(ex.log): whole_log(ex, grafted.get(str(ex.log), {})) for ex in excerpts}
    caught_whole = sum(right(whole[str(ex.log)], ex) for ex in missed)
    broken_whole = sum(action_right(blind.get(str(ex.log), {}), ex) and not action_right(whole[str(ex.log)], ex)
                       for ex in excerpts)
    return (f"{batch:<20}{len(excerpts):>4}  {len(missed):>6}  {caught:>6}  {broken:>6}  "
            f"{f'{s.labels_right}/{s.excerpts} {s.labels_pct:.0f}%':>13}  "
            f"{f'{s.actions_right}/{s.excerpts} {s.actions_pct:.0f}%':>13}  "
            f"{f'caught {caught_whole}, broken {broken_whole}':>20}  "
            f"{'grafted' if done else 'no errorclass at that commit: as blind'}")


def blocks_row(batch: str, excerpts: list[Excerpt], blind: dict[str, dict[str, str]],
               readers: dict[str, dict[str, str]], blocks: dict[str, dict[str, str]], done: bool) -> str:
    """One batch: its blind misses, how many the readers catch (before), with the block reader too (after),
    how many only the block reader catches, how many right actions it breaks."""
    def action_right(a: dict[str, str], ex: Excerpt) -> bool:
        return a.get("action") in {x.value for x in EXPECTED_ACTIONS[ex.label]}

    def right(a: dict[str, str], ex: Excerpt) -> bool:
        return a.get("label") == ex.label.value and action_right(a, ex)

    missed = [ex for ex in excerpts if not right(blind.get(str(ex.log), {}), ex)]
    before = {str(ex.log) for ex in missed if right(readers.get(str(ex.log), {}), ex)}
    after = {str(ex.log) for ex in missed if right(blocks.get(str(ex.log), {}), ex)}
    broken = sum(action_right(readers.get(str(ex.log), {}), ex) and not action_right(blocks.get(str(ex.log), {}), ex)
                 for ex in excerpts)
    s = score(score_answers(excerpts, blocks)[0])
    return (f"{batch:<20}{len(excerpts):>4}  {len(missed):>6}  {len(before):>7}  {len(after):>7}  "
            f"{len(after - before):>12}  {broken:>6}  "
            f"{f'{s.labels_right}/{s.excerpts} {s.labels_pct:.0f}%':>13}  "
            f"{f'{s.actions_right}/{s.excerpts} {s.actions_pct:.0f}%':>13}  "
            f"{'grafted' if done else 'no errorclass at that commit: as blind'}")


def whole_log(ex: Excerpt, answer: dict[str, str]) -> dict[str, str]:
    """``answer`` with today's whole-log readers of commands/diagnose.py applied to the excerpt as one stream:
    a traceback still open at the end, a stack dump whose main thread waits or compiles
    (diagnosis/dumps.py), a program-mistake exception before any progress (diagnosis/firstfailure.py).
    One stream, its ranks not split, and no progress known after a dump: an approximation of the product."""
    raw = ex.log.read_text(encoding="utf-8", errors="replace").splitlines()
    lines = [t for t in raw if t.strip()]
    if answer.get("label") == "healthy":
        if in_traceback(lines[-2:]):
            return {**answer, "label": "other_crash", "action": "restart"}
        scanner = DumpScanner()
        for n, text in enumerate(raw):
            scanner.observe(LogLine(RankKey("", -1), split_rank_prefix(text)[1], float(n), float(n), "", n + 1))
        hang = dump_verdict(scanner.finish(), None)
        if hang is not None:
            return {**answer, "label": hang.label.value, "action": hang.action.value}
    if answer.get("label") == "other_crash" and answer.get("step") is None and program_mistake(answer.get("line", "")):
        key = RankKey("", -1)
        frames: list[tuple[str, str]] = []
        headed = False
        for text in lines:
            if "Traceback (most recent call last)" in text:
                frames, headed = [], True
            elif (frame := frame_of(text)) is not None:
                frames.append(frame)
            elif text == answer["line"]:
                break
        else:
            frames, headed = [], False  # the line is not in the text as one line: its frames are unknown
        crash = Verdict(Label.OTHER_CRASH, Action.RESTART, evidence=(Evidence(key, answer["line"], ""),))
        if mistake_before_progress(crash, False, {key: (answer["line"], frames, headed)}) is not None:
            return {**answer, "label": "config_error", "action": "stop"}
    elif answer.get("label") == "other_crash" and answer.get("step") is None and answer.get("line"):
        # a failure whose message states the set-up it refuses, whatever its class (exctaxonomy.setup_refusal),
        # read over the lines its message goes on to, as the product's crash reading does
        at = next((i for i, text in enumerate(lines) if text == answer["line"]), None)
        if at is not None and setup_refusal(exception_message(lines, at)) is not None:
            return {**answer, "label": "config_error", "action": "stop"}
    return answer


def change_row(name: str, blind: Answers, today: Answers) -> str:
    b, t = action_changes(blind), action_changes(today)
    return f"{name:<32}" + "".join(f"{f'{b[k]} -> {t[k]}':>26}" for k in ACTION_CHANGES)


def row(name: str, blind: Score, today: Score, commit: str) -> str:
    def pair(s: Score) -> str:
        return (f"{f'{s.labels_right}/{s.excerpts} {s.labels_pct:.0f}%':>13}  "
                f"{f'{s.actions_right}/{s.excerpts} {s.actions_pct:.0f}%':>13}")

    return f"{name:<20}{blind.excerpts:>4}  {pair(blind)}  {blind.called_healthy:>12}  {pair(today)}  {commit}".rstrip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", action="append", help="only this batch (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole run")
    parser.add_argument("--wrong", action="store_true", help="list every blind miss with the line it rests on")
    parser.add_argument("--wrong-json", type=Path, help="write the blind misses to this file as JSON")
    parser.add_argument("--graft", action="store_true",
                        help="also score each blind tree with today's readers of structure grafted in")
    parser.add_argument("--graft-blocks", action="store_true",
                        help="--graft, and score each blind tree once more with today's error-block reader too")
    args = parser.parse_args()
    args.graft = args.graft or args.graft_blocks
    deadline = time.monotonic() + args.timeout

    batches: dict[str, list[Excerpt]] = defaultdict(list)
    for ex in load_corpus():
        if ex.batch and (args.batch is None or ex.batch in args.batch):
            batches[ex.batch].append(ex)
    if not batches:
        raise SystemExit(f"no excerpts with batch {args.batch}: see `grep -h '^batch' tests/data/real-logs/*/*.toml`")

    names = sorted(batches)
    today = run_child(ROOT / PRODUCT, [str(ex.log) for n in names for ex in batches[n]], deadline,
                      also=(ROOT / "launchers",))
    header = (f"{'batch':<20}{'n':>4}  {'blind labels':>13}  {'blind actions':>13}  {'healthy-miss':>12}  "
              f"{'today labels':>13}  {'today actions':>13}  blind commit")
    rows, notes = [header], []
    blind_total = today_total = Score(0, 0, 0, 0)
    blind_all: Answers = []
    misses: list[dict[str, str]] = []
    grafted = [f"{'blind + readers':<20}{'n':>4}  {'misses':>6}  {'caught':>6}  {'broken':>6}  "
               f"{'labels':>13}  {'actions':>13}  {'+ whole-log readers':>20}  graft"]
    today_all: Answers = []
    with_blocks = [f"{'blind + blocks':<20}{'n':>4}  {'misses':>6}  {'readers':>7}  {'+blocks':>7}  "
                   f"{'blocks alone':>12}  {'broken':>6}  {'labels':>13}  {'actions':>13}  graft"]
    changes = [f"{'action-changing, blind -> today':<32}" + "".join(f"{k:>26}" for k in ACTION_CHANGES)]
    for name in names:
        excerpts = batches[name]
        try:
            chosen = find_blind(excerpts, name)
        except NoBlindCommit as exc:
            rows.append(f"{name:<20}{len(excerpts):>4}  no blind commit: {exc}")
            continue
        blind_raw, _ = blind_answers(chosen.commit, excerpts, deadline)
        blind_said, blind_failed = score_answers(excerpts, blind_raw)
        batch_misses = wrong(name, excerpts, blind_raw, today)
        misses += batch_misses
        if args.graft:
            grafted_raw, done = blind_answers(chosen.commit, excerpts, deadline, grafted=True)
            grafted.append(graft_row(name, excerpts, blind_raw, grafted_raw, done))
            if args.graft_blocks:
                blocks_raw, _ = blind_answers(chosen.commit, excerpts, deadline, grafted=True, blocks=True)
                with_blocks.append(blocks_row(name, excerpts, blind_raw, grafted_raw, blocks_raw, done))
                by_path = {str(ex.log): ex for ex in excerpts}
                for m in batch_misses:
                    answer = whole_log(by_path[m["path"]], blocks_raw.get(m["path"], {}))
                    m["blocks"], m["blocks_action"] = answer.get("label", "?"), answer.get("action", "?")
            by_log = {str(ex.log): ex for ex in excerpts}
            for m in batch_misses:
                answer = whole_log(by_log[m["path"]], grafted_raw.get(m["path"], {}))
                m["grafted"], m["grafted_action"] = answer.get("label", "?"), answer.get("action", "?")
        now_said, now_failed = score_answers(excerpts, today)
        blind, now = score(blind_said), score(now_said)
        blind_total, today_total = blind_total + blind, today_total + now
        rows.append(row(name, blind, now, chosen.commit[:10]))
        blind_all += blind_said
        today_all += now_said
        changes.append(change_row(name, blind_said, now_said))
        if chosen.later:
            notes.append(f"{name}: {len(chosen.later)} later commit(s) touched its files after the product "
                         f"changed ({', '.join(c[:10] for c in chosen.later)}): the blind run scores today's "
                         "text and labels of those files, which the blind product never saw in that form")
        for when, failed in (("blind", blind_failed), ("today", now_failed)):
            if failed:
                notes.append(f"{name}: {failed} excerpt(s) the {when} product could not diagnose (scored wrong)")
    if len(rows) > 2:
        rows.append(row("all", blind_total, today_total, ""))
        changes.append(change_row("all", blind_all, today_all))
    print("\n".join(rows))
    print()
    print("\n".join(changes))
    print()
    print("\n".join(notes) if notes else "every batch's blind commit is unambiguous")
    if args.graft:
        print()
        print("\n".join(grafted))
        print("misses: the blind product's (label or action wrong); caught: of those, label and action right with "
              "the readers grafted in; broken: excerpts whose action was right blind and is wrong grafted")
    if args.graft_blocks:
        print()
        print("\n".join(with_blocks))
        print("readers: misses caught with the readers of structure grafted (before); +blocks: with the error-block "
              "reader grafted too (after); blocks alone: misses caught after and not before; broken: action right "
              "with the readers grafted and wrong with the block reader too")
    if args.wrong:
        print()
        for m in misses:
            print(f"{m['batch']}  {m['excerpt']}  expected {m['expected']}/{m['expected_action']}  "
                  f"blind {m['blind']}/{m['blind_action']}  today {m['today']}/{m['today_action']}"
                  + (f"  grafted {m['grafted']}/{m['grafted_action']}" if "grafted" in m else "")
                  + (f"  +blocks {m['blocks']}/{m['blocks_action']}" if "blocks" in m else ""))
            print(f"    line: {m['line'][:200]!r}")
    if args.wrong_json:
        args.wrong_json.write_text(json.dumps(misses, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
