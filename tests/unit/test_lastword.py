"""A process's last word (``diagnosis/lastword.py``) and the second reading of a stream of unnamed processes
(``diagnosis/offline_reading.py``): the forms after which the process that printed them does not go on, so
that another process's progress after them in one stream does not withdraw the failure."""

# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_lines, diagnose_paths
from neuron_watch.diagnosis.lastword import UncaughtTracebacks, last_word
from neuron_watch.events import Action, Label, LogLine, RankKey

#: (a line, whether it ends the process that printed it): real lines (the corpus's excerpts, the programs'
#: sources) and near misses of the same programs
LINES = [
    # glog/absl: LOG(FATAL) and CHECK abort (byteps-138, smarts-975)
    ("[2019-10-29 01:02:51.983028: F byteps/common/nccl_manager.cc:120] Check failed: r == ncclSuccess NCCL error: unhandled system error", True),
    ("*** Check failure stack trace: ***", True),
    ("*** SIGSEGV received at time=1700000000 on cpu 3 ***", True),
    ("I1126 12:00:00.123456 4242 checks.cc:10] Check passed: every shard present", False),
    # libstdc++'s terminate handler; CPython's fatal error
    ("terminate called after throwing an instance of 'c10::DistBackendError'", True),
    ("Fatal Python error: Segmentation fault", True),
    ("Python error handling: see the docs on fatal errors", False),
    # the shell's report of the program it ran
    ("Segmentation fault (core dumped)", True),
    ("a segmentation fault was reported by a worker, retrying", False),
    # MPICH's abort record; Open MPI's end of the job
    ("Abort(1094543) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:", True),
    ("a non-zero exit code. Per user-direction, the job has been aborted.", True),
    ("mpirun detected that one or more processes exited with non-zero status, thus causing", False),  # the sentence's first line only
    # Slurm and Hydra that could not start the program
    ("srun: error: Unable to create step for job 17627941: Requested node configuration is not available", True),
    ("`slurmstepd: error: execve(): /usr/bin/ls: No such file or directory`", True),
    ("srun: error: Timeout waiting for nodes, retrying", False),
    ("[mpiexec@lenzcs35] HYDU_create_process (./utils/launch/launch.c:69): execvp error on file /opt/app/bin/solver (No such file or directory)", True),
    # argparse's usage error (exit 2)
    ("Accelerate launch command: error: argument --num_cpu_threads_per_process/--num-cpu-threads-per-process: expected one argument", True),
    ("train.py: error: unrecognized arguments: --local_rank=0", True),
    ("error: the data loader was slow", False),
    # the main thread's panic or uncaught exception ends the program; another thread's does not
    ("thread 'main' panicked at src/main.rs:4:5:", True),
    ("thread 'tokio-runtime-worker' panicked at src/server.rs:12:9:", False),
    ('Exception in thread "main" java.lang.IllegalStateException: no GPU', True),
    ('Exception in thread "pool-1-thread-3" java.lang.RuntimeException: retry', False),
    # a report of another process's end: its printer may go on
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault.", False),
    ("[  123.456] python[4242]: segfault at 0 ip 00007f0000000000 sp 00007ffd00000000 error 4", False),
    ("The actor died unexpectedly before finishing this task.", False),
    # a plain exception line: whether it ends its process is its traceback's (UncaughtTracebacks)
    ("RuntimeError: CUDA error: peer mapping resources exhausted", False),
]


@pytest.mark.parametrize(("text", "ends"), LINES)
def test_a_last_word_is_read_by_its_form(text: str, ends: bool) -> None:
    assert (last_word(text) is not None) is ends, last_word(text)


def _ends(lines: list[str]) -> list[int]:
    reader = UncaughtTracebacks()
    return [i for i, text in enumerate(lines) if reader.observe("stream", text)]


def test_a_traceback_that_reached_the_scripts_module_code_ends_its_process() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "train.py", line 40, in <module>',
             "    main()",
             '  File "train.py", line 31, in main',
             "    model.to(device)",
             "RuntimeError: CUDA error: peer mapping resources exhausted"]
    assert _ends(lines) == [5]


def test_python_dash_m_and_a_class_with_no_message_end_it_too() -> None:
    # torch.distributed.launch run by `python -m` on Windows (yolov7-pose-6): runpy's frame is the outermost,
    # and torch elastic's ChildFailedError prints its message on the lines after its class
    lines = ["Traceback (most recent call last):",
             '  File "C:\\Users\\u\\anaconda3\\envs\\pose\\lib\\runpy.py", line 194, in _run_module_as_main',
             "    return _run_code(code, main_globals, None,",
             '  File "C:\\Users\\u\\anaconda3\\envs\\pose\\lib\\site-packages\\torch\\distributed\\launcher\\api.py", line 250, in launch_agent',
             "    raise ChildFailedError(",
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
             "============================================================"]
    assert _ends(lines) == [5]


@pytest.mark.parametrize("outermost", [
    '  File "/srv/app/worker.py", line 88, in handle',  # caught and printed by the function (logging.exception)
    '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner',  # a thread's
    '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',  # a child process's
])
def test_a_traceback_caught_or_of_a_thread_or_child_does_not_end_the_process(outermost: str) -> None:
    lines = ["Traceback (most recent call last):", outermost, "    self.run()",
             "ValueError: bad item 17"]
    assert _ends(lines) == []


def test_another_process_lines_inside_the_traceback_do_not_end_it_and_a_cut_traceback_is_not_read() -> None:
    lines = ["Traceback (most recent call last):",
             "{'loss': 0.9466, 'grad_norm': 0.357, 'learning_rate': 3.08e-06, 'epoch': 0.75}",
             '  File "run.py", line 9, in <module>',
             "  5%|▌         | 40/800 [00:20<06:20,  2.00it/s]",
             "AssertionError: Each process is one gpu"]
    assert _ends(lines) == [4]
    # the head of the traceback not pasted: where it began is unknown
    assert _ends(lines[2:]) == []
    assert _ends(['  File "/opt/tgi/utils/dist.py", line 15, in initialize_torch_distributed',
                  "AssertionError: Each process is one gpu"]) == []


#: a healthy program's progress (hf Trainer's log lines, as printed by a real run)
PROGRESS = [
    "{'loss': 0.9678, 'grad_norm': 0.3437, 'learning_rate': 2.3e-06, 'epoch': 0.81}",
    "{'loss': 0.9466, 'grad_norm': 0.3571, 'learning_rate': 3.08e-06, 'epoch': 0.85}",
    "{'loss': 0.9401, 'grad_norm': 0.3349, 'learning_rate': 3.85e-06, 'epoch': 0.9}",
]


def _diagnose(tmp_path: Path, lines: list[str]) -> tuple[Label, Action, str]:
    log = tmp_path / "console.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    v = diagnose_paths([str(log)]).verdict
    return v.label, v.action, v.reason


def test_another_process_progress_after_a_glog_fatal_in_one_unnamed_stream_does_not_withdraw_it(tmp_path: Path) -> None:
    fatal = "[2019-10-29 01:02:51.983028: F byteps/common/nccl_manager.cc:120] Check failed: r == ncclSuccess NCCL error: unhandled system error"
    label, action, reason = _diagnose(tmp_path, [PROGRESS[0], fatal, *PROGRESS[1:]])
    assert (label, action) == (Label.COMM_ERROR, Action.RESTART)
    assert "another process's" in reason and "line 2" in reason
    # the same fatal record at the end, with nothing after it: read as before, in one reading
    assert _diagnose(tmp_path, [*PROGRESS, fatal])[:2] == (Label.COMM_ERROR, Action.RESTART)


def test_an_uncaught_exception_followed_by_progress_in_one_unnamed_stream_is_the_failure(tmp_path: Path) -> None:
    traceback = ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>', "    main()",
                 "RuntimeError: CUDA error: peer mapping resources exhausted"]
    label, action, _ = _diagnose(tmp_path, [PROGRESS[0], *traceback, *PROGRESS[1:]])
    assert action is not Action.WAIT and label is not Label.HEALTHY


def test_an_exception_a_function_caught_and_printed_then_progress_stays_healthy(tmp_path: Path) -> None:
    handled = ["ERROR:root:evaluation failed, skipping", "Traceback (most recent call last):",
               '  File "train.py", line 77, in evaluate', "    score = metric(batch)",
               "ValueError: empty batch"]
    assert _diagnose(tmp_path, [PROGRESS[0], *handled, *PROGRESS[1:]])[:2] == (Label.HEALTHY, Action.WAIT)


def test_a_named_rank_stream_is_left_as_the_live_judge_reads_it() -> None:
    """A rank's own stream (rank-N.log, a rank's prefix) holds its subprocesses' lines too: a compile worker's
    crash there, and the rank's steps after it, are a healthy rank; only a stream of unnamed processes is
    read twice."""
    fatal = "[2019-10-29 01:02:51.983028: F byteps/common/nccl_manager.cc:120] Check failed: r == ncclSuccess NCCL error: unhandled system error"
    for rank, expected in ((3, Action.WAIT), (-1, Action.RESTART)):
        key = RankKey("", rank)
        lines = [LogLine(key, text, 100.0 + i, 1.7e9 + i, "console.log", i + 1)
                 for i, text in enumerate([PROGRESS[0], fatal, *PROGRESS[1:]])]
        verdict, count = diagnose_lines(lines)
        assert count == 4 and verdict.action is expected, (rank, verdict)
        # a one-shot iterator of the same lines is read twice as well
        assert diagnose_lines(iter(lines))[0] == verdict
