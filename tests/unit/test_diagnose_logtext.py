# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Pure normalization of pasted logs (neuron_watch.diagnosis.logtext)."""

from __future__ import annotations

import calendar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_watch.diagnosis.logtext import (
    LineSplitter,
    TimeParser,
    logical_lines,
    rank_from_path,
    split_process,
    split_rank_prefix,
    strip_ansi,
    unwrap,
)


def test_splitter_across_chunk_boundaries_and_last_line() -> None:
    sp = LineSplitter()
    assert sp.feed(b"ab") == []
    assert sp.feed(b"c\nde\n\nf") == ["abc", "de", ""]
    assert sp.close() == ["f"]
    assert sp.close() == []


def test_splitter_caps_huge_lines_and_counts_them() -> None:
    sp = LineSplitter(max_line=10)
    out = sp.feed(b"0123456789ABCDEF")
    out += sp.feed(b"GHIJ" * 1000)
    out += sp.feed(b"tail\nnext\n")
    assert out == ["0123456789", "next"]
    assert sp.truncated == 1


def test_splitter_decodes_bad_bytes_with_replacement() -> None:
    sp = LineSplitter()
    assert sp.feed(b"ok \xff\xc3\x28 end\n") == ["ok \ufffd\ufffd( end"]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=50))
def test_splitter_is_chunking_independent(data: bytes, size: int) -> None:
    whole = LineSplitter(max_line=40)
    a = whole.feed(data) + whole.close()
    parts = LineSplitter(max_line=40)
    b: list[str] = []
    for i in range(0, len(data), size):
        b += parts.feed(data[i : i + size])
    b += parts.close()
    assert a == b and whole.truncated == parts.truncated


def test_ansi_and_carriage_return_bars() -> None:
    assert strip_ansi("\x1b[1;31mERROR\x1b[0m x\x1b]0;title\x07") == "ERROR x"
    assert logical_lines("a 1%\rb 50%\rc 100%\r\n") == ["c 100%"]
    assert logical_lines("\r\r") == [""]


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (".....2024-04-12 07:13:06.000297: INFO x", [".....", "2024-04-12 07:13:06.000297: INFO x"]),
        ("...Compiler status PASS", ["...", "Compiler status PASS"]),
        ("...done", ["...done"]),
        ("[rank0]: step 1 loss 2 [rank1]: step 1 loss 3", ["[rank0]: step 1 loss 2", "[rank1]: step 1 loss 3"]),
        ("[trainer0]: step 1 loss 2[trainer1]: step 1 loss 3", ["[trainer0]: step 1 loss 2", "[trainer1]: step 1 loss 3"]),
        ("validation [epoch3]: loss 0.31", ["validation [epoch3]: loss 0.31"]),
        ("[rank0]: plain", ["[rank0]: plain"]),
        # Open MPI --tag-output interleaved mid-line (a bar's redraw, then another stream's record)
        ("    Loss:6.7539 [1,0]<stdout>:[INFO] loss: 6.7462,", ["    Loss:6.7539", "[1,0]<stdout>:[INFO] loss: 6.7462,"]),
    ],
)
def test_logical_lines(raw: str, want: list[str]) -> None:
    assert logical_lines(raw) == want


def test_rank_prefixes_and_paths() -> None:
    assert split_rank_prefix("[rank3]: hello") == (3, "hello")
    assert split_rank_prefix("[default12]:world") == (12, "world")
    assert split_rank_prefix("7: Traceback (most recent call last):") == (7, "Traceback (most recent call last):")
    assert split_rank_prefix("2024-04-12 07:13:06 x") == (None, "2024-04-12 07:13:06 x")
    assert split_rank_prefix("12:30:01 clock") == (None, "12:30:01 clock")
    # Open MPI's --tag-output: [<job>,<rank>]<stream>: (mpirun -tag-output, MPIJob launchers)
    assert split_rank_prefix("[1,3]<stdout>:test-nccl-efa-worker-0:23:75 [3] NCCL INFO Connected NVLS tree") == (
        3, "test-nccl-efa-worker-0:23:75 [3] NCCL INFO Connected NVLS tree")
    assert split_rank_prefix("[1,0]<stderr>:Traceback (most recent call last):") == (0, "Traceback (most recent call last):")
    assert rank_from_path("run/gen-2/rank-3.log") == 3
    assert rank_from_path("logs/none/attempt_0/5/stdout.log") == 5
    assert rank_from_path("logs/rank_7.txt") == 7
    assert rank_from_path("slurm-123.out") is None


@pytest.mark.parametrize(
    ("line", "rank", "rest"),
    [
        # torch elastic's tail_log header under a role of another name, and its ${rank} template
        ("[trainer0]: foobar", 0, "foobar"),
        ("[worker1]:Traceback (most recent call last):", 1, "Traceback (most recent call last):"),
        # near misses: torchrun's error summary numbering its failures, a program's own bracketed
        # words, glog's bracketed head
        ("[0]:", None, "[0]:"),
        ("[epoch3]: loss 0.31", None, "[epoch3]: loss 0.31"),
        ("[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout", None,
         "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout"),
    ],
)
def test_rank_prefixes_of_torch_elastic(line: str, rank: int | None, rest: str) -> None:
    assert split_rank_prefix(line) == (rank, rest)


@pytest.mark.parametrize(
    ("line", "host", "process", "rest"),
    [
        # NCCL's own prefix (src/debug.cc): host:pid:tid [dev]; kept on the line
        ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", None,
         "ng30903 pid 3063028", "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"),
        ("[2026-05-04 19:55:27] GPU-606:534134:535429 [1] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: ncclIbResiliency",
         None, "GPU-606 pid 534134",
         "[2026-05-04 19:55:27] GPU-606:534134:535429 [1] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: ncclIbResiliency"),
        ("ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed", None,
         "ip-172-31-3-90 pid 1929", "ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed"),
        # pdsh's host (DeepSpeed's runner), then NCCL's line of one process on it
        ("rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19491:21059 [7] proxy.cc:1143 NCCL WARN Socket recv failed",
         "rdma-gpu-train-worker-0", "rdma-gpu-train-worker-0 pid 19491",
         "rdma-gpu-train-worker-0:19491:21059 [7] proxy.cc:1143 NCCL WARN Socket recv failed"),
        ("worker-1: [rank3]: Traceback (most recent call last):", "worker-1", None, "[rank3]: Traceback (most recent call last):"),
        # NCCL 2.2's records, without the word NCCL: kept
        ("tesla-node:1473:1473 [0] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]", None, "tesla-node pid 1473",
         "tesla-node:1473:1473 [0] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]"),
        ("tesla-node:1473:1473 [0] INFO Launch mode Group/CGMD", None, "tesla-node pid 1473",
         "tesla-node:1473:1473 [0] INFO Launch mode Group/CGMD"),
        ("ip-10-0-0-5:1929:1937 [0] nccl_net_ofi_init:1443 NET/OFI Selected provider is efa", None, "ip-10-0-0-5 pid 1929",
         "ip-10-0-0-5:1929:1937 [0] nccl_net_ofi_init:1443 NET/OFI Selected provider is efa"),
        # ... another program's line carried under the same prefix: the prefix names the process and goes
        ("gpu-015:8588:64405 [5] ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model.", None,
         "gpu-015 pid 8588", "ValueError: Target modules ['q_proj', 'v_proj'] not found in the base model."),
        ("gpu-015:8588:64405 [5]     raise ValueError(", None, "gpu-015 pid 8588", "    raise ValueError("),
        # pdsh's host before a line that starts with spaces (py-spy's frame under DeepSpeed's runner)
        ("queue1-dy-p4d24xlarge-37:     backward (torch/autograd/__init__.py:199)", "queue1-dy-p4d24xlarge-37", None,
         "    backward (torch/autograd/__init__.py:199)"),
        # vLLM's workers (_add_prefix), Ray's worker logs (print_worker_logs), SkyPilot's task
        ("(VllmWorker rank=2 pid=3717) ERROR 06-26 23:10:13 [multiproc_executor.py:527] WorkerProc hit an exception.", None,
         "VllmWorker rank=2 pid 3717", "ERROR 06-26 23:10:13 [multiproc_executor.py:527] WorkerProc hit an exception."),
        ("(VllmWorkerProcess pid=1288) INFO 08-02 10:11:12 multiproc_worker_utils.py:215] Worker ready; awaiting tasks", None,
         "VllmWorkerProcess pid 1288", "INFO 08-02 10:11:12 multiproc_worker_utils.py:215] Worker ready; awaiting tasks"),
        ("(RayTrainWorker pid=80551, ip=10.67.132.202) Setting up process group for: env:// [rank=0, world_size=2]", None,
         "10.67.132.202 RayTrainWorker pid 80551", "Setting up process group for: env:// [rank=0, world_size=2]"),
        ("(pid=4521) *** SIGSEGV received at time=1745480384 on cpu 3 ***", None, "pid 4521",
         "*** SIGSEGV received at time=1745480384 on cpu 3 ***"),
        ("(task, pid=2093) About to crash", None, "task pid 2093", "About to crash"),
        # near misses: a tool's own "NAME-LEVEL:", a setting, a time of day, a tuple, a host:port
        ("SG-ERROR: File /opt/pkg/generic-flow.py line 12", None, None, "SG-ERROR: File /opt/pkg/generic-flow.py line 12"),
        ("bf16: True", None, None, "bf16: True"),
        # an exception line of a module whose name holds a digit (contactdb-prediction-2): the class, not a host
        ("urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='localhost', port=8097): Max retries exceeded", None,
         None, "urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='localhost', port=8097): Max retries exceeded"),
        ("boto3.exceptions.S3UploadFailedError: Failed to upload", None, None,
         "boto3.exceptions.S3UploadFailedError: Failed to upload"),
        # ... while a host named like a module, without a class's name last, stays a host
        ("node-1.cluster2.local: step 3 done", "node-1.cluster2.local", None, "step 3 done"),
        ("learning-rate:   0.001", None, None, "learning-rate:   0.001"),
        ("fp-16:" + " " * 20 + "x", None, None, "fp-16:" + " " * 20 + "x"),
        ("12:30:01 clock", None, None, "12:30:01 clock"),
        ("(pid, status) = os.waitpid(child, 0)", None, None, "(pid, status) = os.waitpid(child, 0)"),
        ("localhost:29500:12 connections open", None, None, "localhost:29500:12 connections open"),
        ("2023-Aug-01 16:14:43.0241 332066:332494 INFO  NRT:nrt_init   Neuron Runtime initialized", None, None,
         "2023-Aug-01 16:14:43.0241 332066:332494 INFO  NRT:nrt_init   Neuron Runtime initialized"),
    ],
)
def test_process_prefixes(line: str, host: str | None, process: str | None, rest: str) -> None:
    assert tuple(split_process(line)) == (host, process, rest)


def _utc(*a: int) -> float:
    return float(calendar.timegm((*a, 0, 0, 0)))


def test_time_formats() -> None:
    tp = TimeParser()
    assert tp.parse("2023-Aug-01 16:14:43.0241 332066:332494 [29] CCOM WARN x") == pytest.approx(_utc(2023, 8, 1, 16, 14, 43) + 0.0241)
    assert tp.parse("2024-04-12 07:13:06.000296:  271334  INFO ||NEURON_CACHE||: x") == pytest.approx(_utc(2024, 4, 12, 7, 13, 6) + 0.000296)
    assert tp.parse("2024-04-12T07:13:07.5Z step") == pytest.approx(_utc(2024, 4, 12, 7, 13, 7) + 0.5)
    assert tp.parse("2024-04-12 07:13:08,123 - INFO - x") == pytest.approx(_utc(2024, 4, 12, 7, 13, 8) + 0.123)
    assert tp.parse("[rank0]:[E0412 07:13:09.408271257 ProcessGroupNCCL.cpp:607] x") == pytest.approx(_utc(2024, 4, 12, 7, 13, 9) + 0.408271257)
    assert tp.parse("[07:13:10] loss 1") == pytest.approx(_utc(2024, 4, 12, 7, 13, 10))
    assert tp.parse("[23:59:50] late") == pytest.approx(_utc(2024, 4, 12, 23, 59, 50))
    assert tp.parse("[00:00:05] past midnight") == pytest.approx(_utc(2024, 4, 13, 0, 0, 5))
    assert tp.parse("no time here") is None
    assert tp.parse("2024-13-45 99:99:99 bogus") is None
    assert tp.parse("x" * 100 + " 2024-04-12 07:13:06 quoted later") is None


def test_unwrap_rejoins_fixed_width_wrapping() -> None:
    long = "2024-04-12 07:13:06 ERROR " + "x" * 54  # 80 chars
    lines = [long[:80], "continued here", long[:80], "[rank1]: new record", long[:80], "tail", "short"]
    assert unwrap(lines) == [long[:80] + "continued here", long[:80], "[rank1]: new record", long[:80] + "tail", "short"]
    assert unwrap(["a" * 80, "b"]) == ["a" * 80, "b"]  # one long line is not a wrapping width


def test_unwrap_leaves_natural_logs_alone() -> None:
    # identical-format progress lines share a length: not a terminal width -> never joined
    steps = [f"step {i} step_time 1.2034s throughput 850.1 seq/s step loss 2.0417 grad norm 1.07" for i in range(100, 200)]
    assert unwrap(steps) == steps
    # a common width, but lengths spread below it as natural lines do
    spread = ["y" * n for n in range(70, 81)] * 3 + ["z"]
    assert unwrap(spread) == spread
    # longer lines exist: the width cannot be a wrap
    mixed = ["w" * 80] * 5 + ["v" * 90]
    assert unwrap(mixed) == mixed


def test_a_shells_kill_report_glued_to_a_progress_bar_is_its_own_record() -> None:
    # real: simsg issue 3, a tqdm bar's last redraw, then bash's job status on the same line
    bar = "  6%|██████                                 | 3787/62565 [04:47<1:10:53, 13.82it/s]"
    assert logical_lines(bar + "Killed") == [bar, "Killed"]
    assert logical_lines("100%|██| 9/9 [00:01<00:00]Segmentation fault (core dumped)")[-1] == "Segmentation fault (core dumped)"
    assert logical_lines("Segmentation fault (core dumped)") == ["Segmentation fault (core dumped)"]
    assert logical_lines("INFO: worker pool Killed") == ["INFO: worker pool Killed"]
