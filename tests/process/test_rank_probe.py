"""The rank bootstrap and torch's private worker server, for real (subprocesses of this venv's Python).

Pins what neuron-watch relies on in the installed torch: ``_WorkerServer`` on a unix socket, the
``fr_trace_json`` / ``dump_traceback`` / ``ping`` handlers, and the JSON shape of a gloo dump.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neuron_watch.diagnosis.flight_recorder import summarize
from neuron_watch.node.rank_probe import BOOTSTRAP_DIR, DIR_ENV, STACKS_HANDLER, call_handler, probe_env, read_rank
from tests.fixtures.gloo_exit import run_pair
from tests.fixtures.probe_ask import ask_raw

pytestmark = pytest.mark.process


def run(code: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", DIR_ENV, "PYTHONPATH")}
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, start_new_session=True, check=False)


def test_probe_env_prepends_the_bootstrap_and_keeps_the_users_buffer_size() -> None:
    e = probe_env({"PYTHONPATH": "/job/lib"}, "/tmp/nw-x/g0")
    assert e["PYTHONPATH"] == f"{BOOTSTRAP_DIR}{os.pathsep}/job/lib" and e[DIR_ENV] == "/tmp/nw-x/g0"
    assert e["TORCH_FR_BUFFER_SIZE"] == "64"
    assert "TORCH_FR_BUFFER_SIZE" not in probe_env({"TORCH_FR_BUFFER_SIZE": "2000"}, "/d")
    assert "TORCH_FR_BUFFER_SIZE" not in probe_env({"TORCH_NCCL_TRACE_BUFFER_SIZE": "100"}, "/d")
    assert (Path(BOOTSTRAP_DIR) / "sitecustomize.py").is_file()


def test_the_jobs_own_sitecustomize_still_runs_and_a_non_torch_rank_stays_inert(tmp_path: Path) -> None:
    job = tmp_path / "joblib"
    job.mkdir()
    (job / "sitecustomize.py").write_text("import os\nos.environ['JOB_SITE_RAN'] = 'yes'\n")
    probe = tmp_path / "p"
    probe.mkdir()
    env = {**probe_env({"PYTHONPATH": str(job)}, str(probe)), "RANK": "3", "LOCAL_RANK": "3"}
    code = ("import os, sys; print(os.environ.get('JOB_SITE_RAN'), 'torch' in sys.modules, "
            f"os.environ.get({DIR_ENV!r}))")
    p = run(code, env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["yes", "False", "None"]  # chained; torch never imported; our variable taken
    status = json.loads((probe / "r3.json").read_text())
    assert status["state"] == "armed" and not (probe / "r3.sock").exists()
    assert "not imported" in read_rank(str(probe), 3).problem


def test_a_process_that_is_not_a_rank_does_nothing(tmp_path: Path) -> None:
    probe = tmp_path / "p"
    probe.mkdir()
    p = run("import os; print(os.environ.get('NEURON_WATCH_PROBE_DIR') is not None)",
            probe_env({}, str(probe)), tmp_path)  # torchrun itself: no RANK
    assert p.returncode == 0 and p.stdout.strip() == "True", p.stderr
    assert list(probe.iterdir()) == []


RANK_WITH_GLOO = """
import os, json, torch, torch.distributed as dist
from neuron_watch.node.rank_probe import call_handler, read_rank
dist.init_process_group("gloo", init_method="file://" + os.environ["INIT_FILE"], rank=0, world_size=1)
t = torch.ones(2)
for _ in range(3):
    dist.all_reduce(t)
sock = os.path.join(os.environ["PROBE"], "r0.sock")
print(json.dumps({
    "ping": call_handler(sock, "ping").decode(),
    "traceback": "most recent call first" in call_handler(sock, "dump_traceback").decode(),
    "stacks": call_handler(sock, "neuron_watch_stacks").decode(),
    "fr": json.loads(call_handler(sock, "fr_trace_json")),
    "problem": read_rank(os.environ["PROBE"], 0).problem,
}))
os._exit(0)
"""


def test_torchs_worker_server_in_a_gloo_rank_answers_what_we_rely_on(tmp_path: Path) -> None:
    probe = tmp_path / "p"
    probe.mkdir()
    env = {**probe_env({}, str(probe)), "RANK": "0", "LOCAL_RANK": "0", "PROBE": str(probe),
           "INIT_FILE": str(tmp_path / "init")}
    p = run(RANK_WITH_GLOO, env, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ping"] == "pong" and out["traceback"] and out["problem"] == ""
    # ours: faulthandler's text, the main thread in the call above, the handler's own thread left out
    assert out["stacks"].startswith("Thread 0x") and "(most recent call first):" in out["stacks"]
    assert "in call_handler" in out["stacks"] and "in <module>" in out["stacks"], out["stacks"]
    assert "in _stacks" not in out["stacks"], out["stacks"]
    fr = out["fr"]
    assert {"version", "pg_config", "pg_status", "entries"} <= set(fr)
    e = fr["entries"][-1]
    assert {"pg_id", "collective_seq_id", "profiling_name", "state", "retired", "time_created_ns"} <= set(e)
    assert e["profiling_name"] == "gloo:all_reduce"
    (group,) = summarize(fr)
    assert group.enqueued == 3 and group.op == "gloo:all_reduce"
    assert json.loads((probe / "r0.json").read_text())["state"] == "listening"


# The rank works (all-reduces) for two seconds after its group is up, whatever the machine's speed: 200
# all-reduces alone took less than the probe's start on a quiet machine, and no stack was asked (the test's
# "asked > 0" failed once). The work is the rank's, not a sleep of the test's: the test still asks without pause.
RANK_THAT_EXITS = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + os.environ["INIT_FILE"], rank=0, world_size=1)
t = torch.ones(1000)
until = time.monotonic() + 2.0
n = 0
while n < 200 or time.monotonic() < until:
    dist.all_reduce(t)
    n += 1
print("done", flush=True)
"""


def _start_rank_that_exits(tmp_path: Path, attempt: int) -> tuple[Path, subprocess.Popen[str]]:
    """A gloo rank of one under the bootstrap (RANK_THAT_EXITS), its probe dir ``p<attempt>``."""
    probe = tmp_path / f"p{attempt}"
    probe.mkdir()
    env = {**probe_env({}, str(probe)), "RANK": "0", "LOCAL_RANK": "0", "INIT_FILE": str(tmp_path / f"init{attempt}")}
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", DIR_ENV, "PYTHONPATH")}
    return probe, subprocess.Popen([sys.executable, "-c", RANK_THAT_EXITS], env={**base, **env}, cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)


def test_a_rank_exits_cleanly_while_its_stacks_are_being_asked(tmp_path: Path) -> None:
    # torch's _WorkerServer.shutdown() holds the GIL while it joins the server's threads, and the
    # dump_traceback handler needs the GIL: unguarded, a shutdown at exit during a stack dump hangs
    # the rank for ever after "Server shutting down". Asked without a pause, each of these ranks
    # exits while a request is in flight or near.
    for attempt in range(5):
        probe, rank = _start_rank_that_exits(tmp_path, attempt)
        asked = 0
        give_up = time.monotonic() + 90  # a hang's bound, not a speed limit: the rank needs ~2 s
        try:
            sock = str(probe / "r0.sock")
            while rank.poll() is None and time.monotonic() < give_up:
                try:
                    call_handler(sock, STACKS_HANDLER, timeout=5)
                    asked += 1
                except (OSError, http.client.HTTPException):
                    pass  # not listening yet, or gone
            out = rank.communicate(timeout=max(1.0, give_up - time.monotonic()))[0]
        except subprocess.TimeoutExpired:
            out = "(still running: hung at exit)"
        finally:
            if rank.poll() is None:
                os.killpg(rank.pid, signal.SIGKILL)
                rank.wait()
        assert rank.returncode == 0 and "done" in out, (attempt, rank.returncode, out[-2000:])
        assert "terminate called" not in out
        assert asked > 0  # the stacks were really asked while the rank ran
        assert not (probe / "r0.sock").exists()


def test_overlapping_requests_from_the_sockets_first_moment_never_kill_a_rank(tmp_path: Path) -> None:
    # Three askers at once past call_handler's turns (as a user's curl asks), both handlers
    # neuron-watch asks (the probe's fr_trace_json polls, a capture's stacks), from the moment the
    # socket appears to the rank's exit. With the server started inside `import torch`
    # (torch/__init__.py imports torch.distributed) and the stacks from torch's dump_traceback,
    # which walks Python's thread list without its lock while another handler thread links a
    # half-made thread state into it, ranks died of SIGSEGV: 3 of 40 so asked here (the stacks
    # asked of dump_traceback), none of 40 now (tests/benchmarks/bench_probe_overlap.py). Every
    # rank must exit 0 having trained.
    asked = {STACKS_HANDLER: 0, "fr_trace_json": 0}
    for attempt in range(6):
        probe, rank = _start_rank_that_exits(tmp_path, attempt)
        sock = str(probe / "r0.sock")

        def ask(handler: str, rank: subprocess.Popen[str] = rank, sock: str = sock) -> None:
            while rank.poll() is None:
                try:
                    if ask_raw(sock, handler).startswith(b"HTTP/1.1 200"):
                        asked[handler] += 1
                except OSError:
                    pass  # not listening yet, or gone

        askers = [threading.Thread(target=ask, args=(h,)) for h in (STACKS_HANDLER, "fr_trace_json", STACKS_HANDLER)]
        for t in askers:
            t.start()
        try:
            out = rank.communicate(timeout=90)[0]  # a hang's bound, not a speed limit: the rank needs ~2 s
        except subprocess.TimeoutExpired:
            out = "(still running: hung)"
        finally:
            if rank.poll() is None:
                os.killpg(rank.pid, signal.SIGKILL)
                rank.wait()
            for t in askers:
                t.join()
        assert rank.returncode == 0 and "done" in out, (attempt, rank.returncode, out[-2000:])
        assert json.loads((probe / "r0.json").read_text())["state"] == "exited"
    assert asked[STACKS_HANDLER] > 0 and asked["fr_trace_json"] > 0, asked  # the rank was really asked


def test_a_request_that_completes_after_the_server_began_to_stop_does_not_hang_the_exit(tmp_path: Path) -> None:
    # A connection accepted before the rank exits whose request is complete only once the rank has
    # begun to shut its server down (all but the request's last CRLF is sent before; the rest once
    # torch logs "Server shutting down"): shutdown() joins the server's threads while holding the
    # GIL, the handler that then runs needs the GIL, and the rank hung for ever after "Server
    # shutting down" (3 of 3 with the bootstrap of before, which only paused 50 ms first). Now the
    # read side of every open connection is shut and the server has closed them before the
    # shutdown: the late request is refused, no handler runs, the rank exits 0.
    probe = tmp_path / "p"
    probe.mkdir()
    # TORCH_CPP_LOG_LEVEL=INFO: torch logs the probe's server stopping (at WARNING it is not logged)
    env = {**probe_env({}, str(probe)), "RANK": "0", "LOCAL_RANK": "0", "INIT_FILE": str(tmp_path / "init"),
           "TORCH_CPP_LOG_LEVEL": "INFO"}
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", DIR_ENV, "PYTHONPATH")}
    code = RANK_THAT_EXITS + "import time; time.sleep(0.3)\n"  # to connect while it still runs
    rank = subprocess.Popen([sys.executable, "-c", code], env={**base, **env}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out, answer = "", b""
    try:
        assert rank.stdout is not None
        line = ""
        while not line.startswith("done"):
            line = rank.stdout.readline()
            assert line, "the rank ended before it trained"
            out += line
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(30)
        client.connect(str(probe / "r0.sock"))
        client.sendall(b"POST /handler/dump_traceback HTTP/1.1\r\nHost: rank\r\nContent-Length: 0\r\n")
        while "Server shutting down" not in line:
            line = rank.stdout.readline()
            assert line, f"the rank ended without shutting its server down:\n{out}"
            out += line
        with contextlib.suppress(OSError):  # refused: the read side is shut
            client.sendall(b"\r\n")
        try:
            out += rank.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            out += "(still running: hung at exit)"
        with contextlib.suppress(OSError):
            answer = client.recv(64)
        client.close()
    finally:
        if rank.poll() is None:
            os.killpg(rank.pid, signal.SIGKILL)
            rank.wait()
    # exited by itself, within the 30 s (a hang is killed above: -9), through the stop (its socket
    # is gone). Not "Server exited": torch's server thread logs it, and one CI run's output lacked
    # it though the rank exited 0 after "Server shutting down"; the exit is what this test is about.
    assert rank.returncode == 0, out[-2000:]
    assert "terminate called" not in out and not (probe / "r0.sock").exists(), out[-2000:]
    assert not answer.startswith(b"HTTP/1.1 200"), answer  # no handler ran for it


@pytest.mark.timeout(300)
def test_gloo_ranks_that_exit_right_after_their_last_collective_do_not_abort(tmp_path: Path) -> None:
    # Without neuron-watch, one of two gloo ranks that exit right after their last all_reduce
    # (no destroy_process_group, as HF Trainer jobs end) dies of "terminate called without an
    # active exception" in most runs here (tests/benchmarks/bench_exit_abort.py: 11 of 18; torch's
    # gloo worker drops the finished work once Python is finalizing; tests/fixtures/gloo_exit.py).
    # The bootstrap's exit, the last atexit handler, leaves the GIL to gloo's workers before
    # the teardown: no abort. (Not a proof in one run: with the GIL never left, 6 runs here would
    # show an abort with a probability of about 0.99.)
    for attempt in range(6):
        work = tmp_path / f"run{attempt}"
        work.mkdir()
        run = run_pair(str(work), bootstrap=True)
        assert not run.aborted and run.codes == (0, 0), (attempt, run.codes, run.outputs)
        # the bootstrap ran: each rank's status says it exited, and its stop removed the socket
        for r in (0, 1):
            assert json.loads((work / "p" / f"r{r}.json").read_text())["state"] == "exited", run.outputs
            assert not (work / "p" / f"r{r}.sock").exists()


RANK_STUCK = """
import os, signal, sys, time, torch.distributed as dist
r, w = os.pipe()
child = os.fork()
if child == 0:  # a data-loader worker: its SIGTERM is not the rank's death
    os.write(w, b"x")
    time.sleep(60)
    os._exit(0)
os.read(r, 1)  # the child is past fork
os.kill(child, signal.SIGTERM)
os.waitpid(child, 0)
if sys.argv[1] == "own":
    signal.signal(signal.SIGTERM, lambda *a: (print("job's own handler", flush=True), os._exit(7)))
def stuck_in_the_job():
    print("ready", flush=True)  # from in here: a SIGTERM right after it finds the rank in this function
    if sys.argv[1] == "raise":
        raise ValueError("the job's own error")
    time.sleep(60)
stuck_in_the_job()
"""


@pytest.mark.parametrize("handler", ["default", "own", "raise"])
def test_sigterm_ends_a_rank_as_before_and_leaves_where_it_was(tmp_path: Path, handler: str) -> None:
    # torchrun SIGTERMs the rest of a failed job within 0.1 s: faulthandler's C handler writes the
    # stack, then the signal goes on to SIG_DFL (killed by SIGTERM, as without neuron-watch). A job
    # with its own handler keeps it. A rank ended by its own exception leaves that traceback, and
    # Python still reports it and exits 1.
    probe = tmp_path / "p"
    probe.mkdir()
    env = {**probe_env({}, str(probe)), "RANK": "0", "LOCAL_RANK": "0"}
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", DIR_ENV, "PYTHONPATH")}
    rank = subprocess.Popen([sys.executable, "-c", RANK_STUCK, handler], env={**base, **env}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert rank.stdout is not None and rank.stdout.readline().strip() == "ready"
        if handler != "raise":
            rank.send_signal(signal.SIGTERM)
        out, err = rank.communicate(timeout=60)
    finally:
        if rank.poll() is None:
            os.killpg(rank.pid, signal.SIGKILL)
            rank.wait()
    death = (probe / "r0.death.txt").read_text() if (probe / "r0.death.txt").exists() else ""
    if handler == "default":
        assert rank.returncode == -signal.SIGTERM
        assert "in stuck_in_the_job" in death and death.count("most recent call first") == 1, death
    elif handler == "own":
        assert rank.returncode == 7 and "job's own handler" in out
        assert death == ""
    else:
        assert rank.returncode == 1 and "ValueError: the job's own error" in err  # reported as before
        assert "in stuck_in_the_job" in death and death.count("most recent call first") == 1, death


def test_an_absent_worker_server_is_reported_not_raised(tmp_path: Path) -> None:
    # A torch without the private API: the job runs on, the status says why.
    fake = tmp_path / "fake"
    (fake / "torch" / "distributed").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("")
    (fake / "torch" / "distributed" / "__init__.py").write_text("VALUE = 42\n")
    probe = tmp_path / "p"
    probe.mkdir()
    env = {**probe_env({"PYTHONPATH": str(fake)}, str(probe)), "RANK": "1", "LOCAL_RANK": "1"}
    p = run("import torch.distributed as d; print(d.VALUE)", env, tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "42", p.stderr
    status = json.loads((probe / "r1.json").read_text())
    assert status["state"] == "failed" and "torch._C" in status["error"]
    assert read_rank(str(probe), 1).problem.startswith("no recorder: ")


def test_the_server_starts_once_import_torch_has_returned_not_inside_it(tmp_path: Path) -> None:
    # torch/__init__.py imports torch.distributed half-way through its body: a server started then
    # answered while torch was half-executed (most ranks the overlapping asks killed died there). A
    # stand-in torch shaped so (no torch._C: the start is then reported as failed, which is the sign
    # it was tried) says what the status was inside its body; its loader still answers for it.
    fake = tmp_path / "fake"
    (fake / "torch" / "distributed").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "import json, os\nfrom . import distributed\n"
        "DURING = json.load(open(os.path.join(os.environ['PROBE'], 'r2.json')))['state']\n")
    (fake / "torch" / "distributed" / "__init__.py").write_text("")
    probe = tmp_path / "p"
    probe.mkdir()
    env = {**probe_env({"PYTHONPATH": str(fake)}, str(probe)), "RANK": "2", "LOCAL_RANK": "2", "PROBE": str(probe)}
    code = ("import importlib.resources, json, os, torch\n"
            "after = json.load(open(os.path.join(os.environ['PROBE'], 'r2.json')))['state']\n"
            "print(torch.DURING, after, importlib.resources.files('torch').joinpath('__init__.py').is_file())")
    p = run(code, env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["armed", "failed", "True"], (p.stdout, p.stderr)
    assert "torch._C" in json.loads((probe / "r2.json").read_text())["error"]


def test_a_pre_started_torchrun_still_takes_the_next_generation_with_its_own_probe_dir() -> None:
    from neuron_watch.launchers.torchrun import _same_but_generation

    base = {"PATH": "/usr/bin", "NEURON_WATCH_GENERATION": "0"}
    g0 = {**base, **probe_env(base, "/tmp/nw-a/g0")}
    g1 = {**base, **probe_env(base, "/tmp/nw-a/g1"), "NEURON_WATCH_GENERATION": "1"}
    assert g0[DIR_ENV] != g1[DIR_ENV] and _same_but_generation(g0, g1)
