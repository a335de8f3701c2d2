from __future__ import annotations

from pathlib import Path

from neuron_watch.diagnosis.stacks import (
    hang_culprits,
    in_collective,
    main_thread,
    odd_one_out,
    stack_culprit,
    top_frame,
)

WAITING = """Process 24170: python3 -u train.py
Python v3.11.7

Thread 24170 (idle): "MainThread"
    _engine_run_backward (torch/autograd/graph.py:979)
    backward (torch/autograd/__init__.py:395)
    Tensor.backward (torch/_tensor.py:623)
    main (train.py:166)
    <module> (train.py:184)
Thread 24213 (active): "Thread-1 (_run)"
    Condition.wait (threading.py:331)
"""

HUNG = """Process 24172: python3 -u train.py
Python v3.11.7

Thread 24172 (idle): "MainThread"
    main (train.py:161)
    <module> (train.py:184)
Thread 24214 (idle): "Thread-1 (_run)"
    Condition.wait (threading.py:331)
    all_reduce (torch/distributed/distributed_c10d.py:2800)
"""

ALL_REDUCE = """Thread 9 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2806)
    wrapper (torch/distributed/c10d_logger.py:81)
    main (train.py:170)
"""


def test_the_rank_outside_the_collective_is_the_culprit() -> None:
    assert hang_culprits({0: WAITING, 1: ALL_REDUCE, 2: HUNG, 3: WAITING}) == [2]


def test_other_threads_do_not_count() -> None:
    assert in_collective(HUNG) is False  # its helper thread's all_reduce frame is not the main thread


def test_stacks_that_do_not_tell() -> None:
    assert hang_culprits({0: WAITING, 1: ALL_REDUCE}) == []  # everyone waits: no one to blame
    assert hang_culprits({0: HUNG, 1: HUNG}) == []
    assert hang_culprits({0: "py-spy: Permission denied", 1: WAITING}) == []


SLEEPING_IN_OWN_CODE = """Thread 31 (idle): "MainThread"
    slow_step (train.py:88)
    main (train.py:120)
    <module> (train.py:140)
"""


def test_top_frame_has_no_line_number() -> None:
    assert top_frame(WAITING) == "_engine_run_backward (torch/autograd/graph.py)"
    assert top_frame("py-spy: Permission denied") is None


def test_the_odd_stack_out_among_ranks_waiting_in_ddp_backward() -> None:
    dumps = {0: WAITING, 1: WAITING, 2: SLEEPING_IN_OWN_CODE, 3: WAITING}
    found = stack_culprit({r: top_frame(d) for r, d in dumps.items()}, {r: in_collective(d) for r, d in dumps.items()})
    assert found is not None and found[0] == 2
    assert "differs from the 3 others, which wait in _engine_run_backward" in found[1]


def test_mixed_waits_still_single_out_the_rank_apart() -> None:
    dumps = {0: WAITING, 1: ALL_REDUCE, 2: HUNG, 3: WAITING}
    found = stack_culprit({r: top_frame(d) for r, d in dumps.items()}, {r: in_collective(d) for r, d in dumps.items()})
    assert found is not None and found[0] == 2


def test_no_culprit_when_stacks_do_not_set_one_rank_apart() -> None:
    tops = {0: top_frame(WAITING), 1: top_frame(WAITING), 2: top_frame(WAITING)}
    assert stack_culprit(tops, {0: True, 1: True, 2: True}) is None  # everyone waits
    two = {0: top_frame(HUNG), 1: top_frame(SLEEPING_IN_OWN_CODE)}
    assert stack_culprit(two, {0: False, 1: False}) is None  # two ranks apart: nothing to tell
    assert stack_culprit({0: None, 1: top_frame(WAITING)}, {0: None, 1: True}) is None


# Python's faulthandler format, as torch's worker server answers ``dump_traceback`` (no ptrace).
# Real dumps of the 4 ranks of tests/process/ranks/ddp_faults.py --fault sleep --rank 2 (paths made
# neutral): three wait in DDP's backward, rank 2 sleeps in its own code.
FAULTHANDLER = Path(__file__).resolve().parent / "data" / "stacks"


def test_faulthandler_dumps_of_a_real_ddp_hang_name_the_rank_outside_backward() -> None:
    dumps = {r: (FAULTHANDLER / f"faulthandler-ddp-backward-rank-{r}.txt").read_text() for r in range(4)}
    tops = {r: top_frame(d) for r, d in dumps.items()}
    assert tops[0] is not None and tops[0].startswith("_engine_run_backward (")
    assert tops[2] is not None and tops[2].startswith("stuck_in_own_code (")
    waiting = {r: in_collective(d) for r, d in dumps.items()}
    assert waiting == {0: True, 1: True, 2: False, 3: True}
    found = stack_culprit(tops, waiting)
    assert found is not None and found[0] == 2
    assert "which wait in _engine_run_backward (it is in stuck_in_own_code)" in found[1]


def test_faulthandler_main_thread_is_the_one_threading_did_not_start() -> None:
    # the worker server's own thread has no Python frame; a threading.Thread is listed first
    dump = """Current thread 0x00007fc0165136c0 (most recent call first):
  <no Python frame>

Thread 0x00007fc00dffb6c0 (most recent call first):
  File "/usr/lib/python3.11/http/client.py", line 1009 in send
  File "/home/user/job.py", line 11 in <lambda>
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Thread 0x00007fc038bc4b80 (most recent call first):
  File "/home/user/job.py", line 8 in inner_sleep
  File "/home/user/job.py", line 13 in <module>
"""
    assert main_thread(dump).splitlines() == ["    inner_sleep (/home/user/job.py:8)",
                                              "    <module> (/home/user/job.py:13)"]
    assert top_frame(dump) == "inner_sleep (/home/user/job.py)"
    assert in_collective(dump) is False


def test_the_one_rank_that_ended_elsewhere_is_the_odd_one_out() -> None:
    # a skipped all_reduce: two ranks end in the loss all_reduce, the one out of step in backward
    tops = {0: "all_reduce (/t/distributed_c10d.py)", 2: "_engine_run_backward (/t/autograd/graph.py)",
            3: "all_reduce (/t/distributed_c10d.py)", 1: None}
    found = odd_one_out(tops)
    assert found is not None and found[0] == 2
    assert "2's stack as the ranks ended differs from the 2 others, which were in all_reduce" in found[1]
    assert "(it was in _engine_run_backward)" in found[1]
    assert odd_one_out({0: "a (f)", 1: "b (f)"}) is None  # two ranks: neither is the odd one
    assert odd_one_out({0: "a (f)", 1: "b (f)", 2: "c (f)"}) is None  # no two agree
    assert odd_one_out({0: "a (f)", 1: "a (f)", 2: "b (f)", 3: "b (f)"}) is None  # two camps
    assert odd_one_out({0: "a (f)", 1: "a (f)", 2: "a (f)"}) is None  # all alike
