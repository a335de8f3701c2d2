from __future__ import annotations

from neuron_watch.stacks import hang_culprits, in_collective

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
