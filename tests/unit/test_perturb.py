"""The corpus perturbations of bench_form_robustness: what they change, and what they never touch."""

from __future__ import annotations

import json
import random

import pytest

from tests.fixtures.perturb import (
    ENVELOPE_NAMES,
    interleave,
    is_debugger_session,
    line_form,
    perturb_identifiers,
    perturb_words,
    wrap_envelope,
)

# real lines (NCCL's prefix, torchrun's failure report, a Neuron runtime record, glog, a frame)
IDENTIFIED = "\n".join([
    "ip-10-0-1-12:2251:2390 [3] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
    "[rank3]: RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "  exitcode  : -11 (pid: 69812)",
    "  error_file: <N/A>",
    "  traceback : Signal 11 (SIGSEGV) received by PID 69812",
    "2023-Aug-01 16:14:43.0241 332066:332494 ERROR  TDRV:dmem_alloc  Failed to allocate 0x00007f3a2b1c0000",
    "E1126 12:00:00.123456  1234 socket.cc:56] connect to 10.0.1.12:29500 failed: errno 111",
    '  File "/home/alice/proj/train.py", line 42, in <module>',
    "step 120 loss nan",
])


def test_identifiers_change_consistently_and_keep_the_subject() -> None:
    out = perturb_identifiers(IDENTIFIED, random.Random(1))
    lines = out.split("\n")
    assert len(lines) == len(IDENTIFIED.split("\n"))
    # changed: the IP (and the host named by it, consistently), pids, the hex address, users, the script, ranks
    assert "10.0.1.12" not in out and "ip-10-0-1-12" not in out
    new_ip = lines[6].split("connect to ")[1].split(":")[0]
    assert lines[0].startswith("ip-" + new_ip.replace(".", "-") + ":")
    assert "69812" not in out and lines[2].split("pid: ")[1].rstrip(")") == lines[4].split("by PID ")[1]
    assert "0x00007f3a2b1c0000" not in out and "/home/alice/" not in out and "train.py" not in out
    assert not lines[1].startswith("[rank3]:")
    # kept: the exit code, the signal, the errno, the NaN, the status words, the form heads
    for kept in ("exitcode  : -11", "Signal 11 (SIGSEGV)", "errno 111", "loss nan", "ERROR  TDRV:dmem_alloc",
                 "RuntimeError: NCCL error: unhandled system error", "E1126 ", "Aug-01"):
        assert kept in out, kept


def test_dates_move_by_whole_leap_cycles_and_times_by_one_shift() -> None:
    text = "2024-02-29 10:00:00,000 INFO start\n2024-02-29 11:30:00,000 INFO step 1"
    out = perturb_identifiers(text, random.Random(7)).split("\n")
    (y1, t1), (y2, t2) = (ln.split(" ")[:2] for ln in out)
    assert y1 == y2 and y1.endswith("-02-29") and (int(y1[:4]) - 2024) % 4 == 0 and y1 != "2024-02-29"
    assert int(t2[:2]) - int(t1[:2]) == 1 and t1[2:] == ":00:00,000" and t2[2:] == ":30:00,000" and t1 != "10:00:00,000"


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_every_line_is_wrapped_once(name: str) -> None:
    text = "Traceback (most recent call last):\n\nValueError: bad\n"
    out, got = wrap_envelope(text, random.Random(3), name)
    assert got == name and out.endswith("\n")
    lines = out[:-1].split("\n")
    assert len(lines) == 3
    if name == "docker-json":
        assert [json.loads(ln)["log"] for ln in lines] == [
            "Traceback (most recent call last):\n", "\n", "ValueError: bad\n"]
    else:
        assert lines[2].endswith("ValueError: bad") and lines[2] != "ValueError: bad"


@pytest.mark.parametrize(("line", "form", "kept"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "exception", "torch."),
    ("E1126 12:00:00.123456  1234 socket.cc:56] connect failed: Connection refused", "glog",
     "E1126 12:00:00.123456  1234 socket.cc:56] "),
    ("F0810 09:11:12.000000 77 tpu.cc:9] Check failed: status.ok() Unavailable: socket closed", "glog", "Unavailable"),
    ("2024-01-01 12:00:00,123 - ERROR - trainer - Something broke badly", "level-field",
     "2024-01-01 12:00:00,123 - ERROR - "),
    ("iteration 10 | lm loss: nan | grad norm: nan |", "metric-nan", "grad norm: nan"),
    ("*** SIGSEGV received at time=1700000000 on cpu 3 ***", "signal", "SIGSEGV"),
])
def test_words_change_and_the_form_stays(line: str, form: str, kept: str) -> None:
    words = ["meadow", "lantern", "quartz"]
    done = perturb_words(line + "\nplain text stays", random.Random(5), words)
    new, plain = done.text.split("\n")
    assert done.forms == {0: form} and plain == "plain text stays"
    assert kept in new and new != line
    assert line_form(new) is not None and line_form(new)[0] == form  # type: ignore[index]


def test_an_exception_type_is_renamed_everywhere_with_its_suffix() -> None:
    text = '    raise ValueError("x")\nValueError: the port must be an integer'
    out = perturb_words(text, random.Random(2), ["meadow", "lantern"]).text.split("\n")
    new_type = out[1].split(":")[0]
    assert new_type.endswith("Error") and new_type != "ValueError" and f"raise {new_type}(" in out[0]
    assert "port" not in out[1] and "integer" not in out[1]


@pytest.mark.parametrize("seed", range(5))
def test_interleave_keeps_each_stream_in_order(seed: int) -> None:
    """Two processes writing to one stream: every line of both is there once, each stream's in its order, the
    neighbour cut to the excerpt's length, the excerpt's final newline kept."""
    own = "".join(f"own {i}\n" for i in range(6))
    neighbour = "".join(f"step {i} loss 1.0\n" for i in range(10))
    mixed = interleave(own, neighbour, random.Random(seed)).split("\n")
    assert mixed[-1] == ""
    assert [ln for ln in mixed if ln.startswith("own")] == [f"own {i}" for i in range(6)]
    assert [ln for ln in mixed if ln.startswith("step")] == [f"step {i} loss 1.0" for i in range(6)]
    assert len(mixed) == 13


def test_interleave_mixes_the_streams() -> None:
    """Over a few seeds, a neighbour's line lands between two of the excerpt's (not always all after them)."""
    own = "a\nb\nc\nd\n"
    placements = {interleave(own, "x\ny\nz\nw\n", random.Random(s)).index("x") for s in range(20)}
    assert len(placements) > 1


#: gdb's ``thread apply all bt`` as horovod-1799 pasted it; py-spy's dump (deepspeed-6524); lldb's (nccl-788)
SESSIONS = [
    "(gdb) thread apply all bt\nThread 307 (Thread 0x7fb67c314700 (LWP 55522)):\n"
    "#0  0x00007fb6932cbc81 in ?? () from /lib64/libcuda.so.1\n"
    "#1  0x00007fb6932cbd85 in ?? () from /lib64/libcuda.so.1\n",
    'Thread 4886 (idle): "MainThread"\n    _engine_run_backward (torch/autograd/graph.py:769)\n'
    "    backward (torch/autograd/__init__.py:289)\n",
    "  thread #149, name = 'python', stop reason = signal SIGSTOP\n"
    "    frame #0: 0x00007ff4c42944df libcuda.so.1`___lldb_unnamed_symbol5986$$libcuda.so.1 + 175\n",
]


@pytest.mark.parametrize("session", SESSIONS)
def test_a_debugger_session_is_kept_whole_among_the_neighbours_lines(session: str) -> None:
    """A dump is printed in one go: the neighbour's lines land before or after it, never between its lines,
    and at more than one place over a few seeds."""
    assert is_debugger_session(session)
    neighbour = "".join(f"step {i} loss 1.0\n" for i in range(10))
    places = set()
    for seed in range(20):
        mixed = interleave(session, neighbour, random.Random(seed))
        assert session in mixed and mixed.endswith("\n")
        places.add(mixed.index(session))
    assert len(places) > 1


def test_faulthandlers_dump_and_a_traceback_are_not_a_debugger_session() -> None:
    """faulthandler writes its dump to the job's own stderr line by line; a traceback is the program's."""
    faulthandler = 'Thread 0x00007f57caf71740 (most recent call first):\n  File "train.py", line 9 in step\n'
    assert not is_debugger_session(faulthandler)
    assert not is_debugger_session('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n')
