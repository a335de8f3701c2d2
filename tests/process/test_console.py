"""What the operator reads on the console of real runs: every decision as one ``[neuron-watch]``
line, in order, and no torchrun teardown traceback after neuron-watch stopped torchrun.

The first test runs the demo's own command (read from examples/toy/demo.sh) and checks that every
``[neuron-watch]`` line the README shows appears, in order, in what the run really printed.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, ROOT, STEP_RANKS, force_cleanup, pids_with_env, run_to_end
from tests.fixtures.runs import TwoNodeRun

pytestmark = pytest.mark.process


def pattern(shown: str) -> re.Pattern[str]:
    """A README line as a pattern: ``...`` stands for anything (paths, times, ids)."""
    return re.compile(".*".join(re.escape(part) for part in shown.split("...")))


def assert_in_order(console: str, expected: list[str]) -> list[int]:
    """Each expected line (``...`` wildcards) matches a whole console line, in this order; their indices."""
    lines = console.splitlines()
    found, i = [], 0
    for want in expected:
        pat = pattern(want)
        while i < len(lines) and not pat.fullmatch(lines[i]):
            i += 1
        assert i < len(lines), f"not found in order: {want!r}\n--- console:\n" + "\n".join(lines[-80:])
        found.append(i)
        i += 1
    return found


def assert_no_teardown_after_our_stop(console: str) -> None:
    lines = console.splitlines()
    stops = [i for i, ln in enumerate(lines) if "stopped by neuron-watch" in ln]
    for i in stops:
        after = lines[i + 1 :]
        assert not [ln for ln in after if "Traceback" in ln or "SignalException" in ln], "\n".join(after[:60])


def readme_console_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("What you see in the demo", 1)[1].split("```", 2)[1]
    return [ln for ln in block.splitlines() if ln.startswith("[neuron-watch]")]


def demo_argv(tmp: Path) -> list[str]:
    """The demo's neuron-watch command, as examples/toy/demo.sh runs it, with $D = ``tmp``."""
    script = (ROOT / "examples" / "toy" / "demo.sh").read_text()
    m = re.search(r"^neuron-watch .*?[^\\]$", script, re.MULTILINE | re.DOTALL)
    assert m, "demo.sh runs no neuron-watch command"
    text = m.group(0).replace("\\\n", " ").replace('"$D', f'"{tmp}')
    argv = shlex.split(text)
    return [NEURON_WATCH, *argv[1:]]


def run(tmp_path: Path, env: dict[str, str], argv: list[str], run_dir: Path, timeout: float = 300) -> tuple[int, str]:
    code, out = run_to_end(argv, str(ROOT), env, run_dir, timeout)
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir)) == []
    return code, out


def test_demo_console_shows_what_the_readme_shows(tmp_path: Path, toy_env: dict[str, str]) -> None:
    shown = readme_console_lines()
    assert len(shown) >= 6  # start, capture, verdict, evidence, stop, restart, finish
    # the demo as a user runs it: the toy's DDP, not the all_reduce by hand the other tests' toy uses
    env = {k: v for k, v in toy_env.items() if k != "TOY_GRAD_SYNC"}
    code, out = run(tmp_path, env, demo_argv(tmp_path), tmp_path / "run")
    assert code == 0, out[-3000:]
    assert_in_order(out, shown)
    assert_no_teardown_after_our_stop(out)
    assert "stopped by neuron-watch" in out


@pytest.mark.xdist_group("crash-restart")
def test_crash_console_says_verdict_evidence_stop_restart_finish(crash_restart: tuple[int, str, Path, Path]) -> None:
    code, out, _, ckpt = crash_restart
    assert code == 0, out[-3000:]
    assert "[rank" not in out  # --quiet: no rank echo ...
    assert_in_order(out, [  # ... but every decision
        "[neuron-watch] start: job ... (1 node); watching torchrun --nproc_per_node 2 ...; hang timeout calibrated ...",
        "[neuron-watch] failure seen: capturing evidence (incident-1) on 1 node(s) before anything is stopped",
        "[neuron-watch] verdict: ..., culprit .../rank1 (...) -> restart",
        "[neuron-watch] evidence captured: incident 1 in ...",
        "[neuron-watch] job stopped on ... (...)",
        f"[neuron-watch] restarting as generation 1 from {ckpt}/step_10; restart 1 of 3, 2 left",
        "[neuron-watch] job finished: exit code 0, 1 restart(s), 1 incident(s), last step 16 (every node finished)...",
    ])
    assert_no_teardown_after_our_stop(out)


@pytest.mark.xdist_group("long-compile")
def test_compile_console_says_when_the_wait_begins_and_ends(long_compile: tuple[int, str, Path, Path]) -> None:
    from tests.process.conftest import COMPILE_HANG_TIMEOUT

    code, out, _, _ = long_compile
    assert code == 0, out[-3000:]
    assert_in_order(out, [
        f"[neuron-watch] start: ...; hang timeout {COMPILE_HANG_TIMEOUT:.0f}s (--hang-timeout)...",
        "[neuron-watch] verdict: compiling, culprit .../rank0 (...)",
        "[neuron-watch] verdict: healthy (...)",
        "[neuron-watch] job finished: exit code 0, 0 restart(s), 0 incident(s)...",
    ])
    # one line when the wait begins, one when it ends: not one per second
    assert sum("verdict: compiling" in ln for ln in out.splitlines()) == 1, out


DIES_AT_ONCE = """
import os, sys, time
rank = int(os.environ["RANK"])
if rank == 1:
    print("fatal: injected failure at start-up of rank 1", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(120)
"""


def test_a_rank_dying_at_once_under_cpu_load_is_judged(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """torchrun's parser (the job's shape) is slow under load; rank exits are watched meanwhile."""
    import os
    import signal
    import subprocess
    import sys

    from tests.fixtures.procs import events, named

    script = tmp_path / "dies.py"
    script.write_text(DIES_AT_ONCE)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
               for _ in range(3)]
    try:
        argv = [NEURON_WATCH, "--run-dir", str(tmp_path / "run"), "--max-restarts", "0", "--no-prewarm",
                "torchrun", "--nproc_per_node", "2", str(script)]
        code, out = run(tmp_path, toy_env, argv, tmp_path / "run")
    finally:
        for b in burners:
            os.killpg(b.pid, signal.SIGKILL)
            b.wait()
    assert code != 0, out[-3000:]
    evs = events(tmp_path / "run")
    failures = [e for e in named(evs, "verdict") if e["action"] != "wait"]
    assert failures, out[-3000:]
    assert failures[-1]["culprit"]["rank"] == 1, failures[-1]
    assert any(e["rank"] == 1 and e["exit_code"] == 3 for e in named(evs, "rank_exit")), evs
    assert "injected failure at start-up" in out  # echoed as it happened, before the shape was known
    assert_in_order(out, ["[neuron-watch] verdict: ..., culprit .../rank1 (...) -> ...",
                          "[neuron-watch] giving up: ... exit code ...",
                          "[neuron-watch] job failed: exit code ..."])


def test_progress_is_one_redrawn_line_on_a_terminal(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """--progress under a real terminal (tmux): one status line, redrawn in place, read with capture-pane."""
    import shutil
    import subprocess
    import time

    from tests.conftest import require_binary

    tmux = shutil.which("tmux") or require_binary("tmux")
    sock = f"nw-test-{os.getpid()}-{tmp_path.name}"  # tmp_path.name repeats across concurrent sessions
    done = tmp_path / "done"
    # 6 s of steps: a dozen half-second looks at the screen, each step's line redrawn in place; torch-free
    # ranks (a step line every 0.1 s) under the real torchrun: the subject is the status line, not torch
    argv = [NEURON_WATCH, "--run-dir", str(tmp_path / "run"), "--progress", "--quiet",
            "torchrun", "--nproc_per_node", "2", STEP_RANKS, "steady", "6"]
    shell = f"{shlex.join(argv)} ; echo $? > {shlex.quote(str(done))}; sleep 600"
    tm = [tmux, "-L", sock, "-f", "/dev/null"]
    env = {**toy_env, "TERM": "xterm"}
    subprocess.run([*tm, "new-session", "-d", "-x", "200", "-y", "50", "-s", "nw", shell], env=env, check=True,
                   timeout=30, cwd=str(ROOT))
    screens: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.5)  # polling a terminal's screen: nothing to wait on but the screen itself
            screen = subprocess.run([*tm, "capture-pane", "-p", "-t", "nw"], capture_output=True, text=True,
                                    timeout=30).stdout
            if "steps/s" in screen:
                screens.append(screen)
        assert done.exists(), screens[-1:] or "no screen"
        assert done.read_text().strip() == "0", screens[-1:]
    finally:
        subprocess.run([*tm, "kill-server"], capture_output=True, timeout=30)
        force_cleanup(str(tmp_path / "run"))
    assert pids_with_env("NEURON_WATCH_RUN_DIR", str(tmp_path / "run")) == []
    running = [s for s in screens if re.search(r"gen 0 \| step \d+ \| [\d.]+ steps/s \| running", s)]
    assert running, screens[-1:]
    for s in screens:  # at any moment exactly one status line: redrawn in place, never scrolled
        assert sum("steps/s" in ln for ln in s.splitlines()) == 1, s
    steps = {int(m.group(1)) for s in running for m in [re.search(r"\| step (\d+) \|", s)] if m}
    assert len(steps) > 1  # it moved


@pytest.mark.xdist_group("slow-save")
def test_a_long_save_is_a_line_when_it_begins_and_when_it_ends(slow_save: tuple[int, str, Path, Path]) -> None:
    code, out, _, _ = slow_save
    assert code == 0, out[-3000:]
    assert_in_order(out, [
        "[neuron-watch] verdict: healthy, culprit .../rank0 (.../rank0 has been saving a checkpoint for ...)",
        "[neuron-watch] verdict: healthy (ranks make progress)",
        "[neuron-watch] job finished: exit code 0, 0 restart(s), 0 incident(s)...",
    ])
    assert sum("has been saving" in ln for ln in out.splitlines()) == 1, out  # not one per second


@pytest.mark.xdist_group("two-node-hang")
def test_two_nodes_coordinator_node_says_the_decisions_every_node_says_its_stop(two_node_hang: TwoNodeRun) -> None:
    from tests.process.test_multinode import host_node

    codes, tmp_path, _, _ = two_node_hang
    n0, n1 = host_node(0), host_node(1)
    node0, node1 = ((tmp_path / f"node{i}.out").read_text() for i in range(2))
    assert codes == [0, 0], node0[-3000:] + node1[-3000:]
    assert_in_order(node0, [
        f"[neuron-watch] start: job mn-... on {n0} (2 nodes); watching torchrun --nnodes 2 --node_rank 0 ...; "
        "hang timeout 6s (--hang-timeout)...",
        "[neuron-watch] failure seen: capturing evidence (incident-1) on 2 node(s) before anything is stopped",
        f"[neuron-watch] verdict: collective_hang, culprit {n1}/rank3 (...) -> restart",
        f"[neuron-watch] evidence captured: incident 1 in ... -> {n0}: ..., {n1}: ...",
        f"[neuron-watch] job stopped on {n0} (...)",
        f"[neuron-watch] job stopped on {n1} (...)",
        "[neuron-watch] restarting as generation 1 from .../step_5; restart 1 of 3, 2 left",
        "[neuron-watch] job finished: exit code 0, 1 restart(s), 1 incident(s), last step 14 (every node finished)...",
    ])
    # node 1 hosts no coordinator: it says its own stop and its end, and no decision of the job's
    assert_in_order(node1, [
        f"[neuron-watch] torchrun on {n1} stopped by neuron-watch (told to by the coordinator; ...): its own output "
        "of the stop is in .../gen-0/launcher-....log, not here",
        f"[neuron-watch] node {n1} done: exit code 0 (the job's decisions are on the coordinator's console)",
    ])
    assert "verdict:" not in node1
    assert_no_teardown_after_our_stop(node0)
    assert_no_teardown_after_our_stop(node1)
