"""diagnosis/dumps.py: stack dumps found by their layouts, and what their main thread says.

The dumps are real: users' pastes (py-spy, faulthandler, gdb, gstack) from the threads each case
names, cut to the threads that matter; the corpus excerpts are read from the corpus itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.dumps import INNERMOST, Activity, DumpScanner, dump_verdict, finding
from neuron_watch.events import Label, LogLine, RankKey

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"

#: DeepSpeed#6524 (py-spy dump of a ZeRO-3 run that stopped making progress)
PYSPY_ZERO3 = """\
Thread 4886 (idle): "MainThread"
    _engine_run_backward (torch/autograd/graph.py:769)
    backward (torch/autograd/__init__.py:289)
    backward (torch/_tensor.py:521)
    backward (deepspeed/runtime/fp16/loss_scaler.py:63)
Thread 5408 (idle): "Thread-1"
    wait (threading.py:324)
    wait (threading.py:607)
    run (tqdm/_monitor.py:60)
    _bootstrap_inner (threading.py:1016)
    _bootstrap (threading.py:973)
Thread 8294 (idle)
"""

#: DeepSpeed#860 (faulthandler dump of ZeRO-3 inference hanging at 100% GPU)
FAULTHANDLER_ZERO3 = """\
Thread 0x00007f57caf71740 (most recent call first):
  File "/home/stas/anaconda3/envs/main-38/lib/python3.8/site-packages/torch/cuda/streams.py", line 95 in synchronize
  File "/mnt/nvme1/code/github/00optimize/DeepSpeed/deepspeed/runtime/zero/stage3.py", line 490 in _synchronize_communication
  File "/mnt/nvme1/code/github/00optimize/DeepSpeed/deepspeed/runtime/zero/stage3.py", line 406 in fetch_sub_module
"""  # noqa: E501 (the lines as pasted)

#: NVIDIA/nccl#901 (gdb ``thread apply all bt`` of a rank whose NcclAllReduceSum hangs): a proxy
#: thread, then thread 1 in cudaStreamSynchronize under libcuda's own frames
GDB_ALLREDUCE = """\
(gdb) thread apply all bt

Thread 10 (Thread 0x7f322e3fa000 (LWP 496156)):
#0  futex_wait_cancelable (private=<optimized out>, expected=0, futex_word=0x7f322e7fb158) at ../sysdeps/nptl/futex-internal.h:183
#1  __pthread_cond_wait_common (abstime=0x0, clockid=0, mutex=0x7f322e7fb108, cond=0x7f322e7fb130) at pthread_cond_wait.c:508
#2  __pthread_cond_wait (cond=cond@entry=0x7f322e7fb130, mutex=mutex@entry=0x7f322e7fb108) at pthread_cond_wait.c:647
#3  0x00007f326f3d9740 in ncclProxyGetPostedOps (added=<synthetic pointer>, proxyState=0x5603cb96d1e0) at proxy.cc:713
#4  ncclProxyProgress (proxyState_=0x5603cb96d1e0) at proxy.cc:868

Thread 1 (Thread 0x7fd4cb6ee000 (LWP 500838)):
#0  0x00007fd4ca0afb41 in ?? () from /lib/x86_64-linux-gnu/libcuda.so
#1  0x00007fd4ca0915c2 in ?? () from /lib/x86_64-linux-gnu/libcuda.so
#2  0x00007fd4ca2d31b5 in ?? () from /lib/x86_64-linux-gnu/libcuda.so
#3  0x00007fd4ca0c6ebd in ?? () from /lib/x86_64-linux-gnu/libcuda.so
#4  0x00007fd4dbc14c90 in ?? () from /usr/local/cuda-11.6/lib64/libcudart.so.11.0
#5  0x00007fd4dbc6ba38 in cudaStreamSynchronize () from /usr/local/cuda-11.6/lib64/libcudart.so.11.0
"""  # noqa: E501 (the lines as pasted)

#: NVIDIA/nccl#117 (gstack of an all_reduce_test that hangs): gdb's frames under gstack's header
GSTACK_ALLREDUCE = """\
Thread 1 (process 24745):
#0  0x00007ffed7dd47c2 in clock_gettime ()
#1  0x00002b1973e0424d in __GI___clock_gettime (clock_id=<optimized out>, tp=<optimized out>) at ../sysdeps/unix/clock_gettime.c:115
#2  0x00002b196e2fb3ee in ?? () from /usr/lib64/libcuda.so.1
#3  0x00002b196e38e805 in ?? () from /usr/lib64/libcuda.so.1
#4  0x00002b196e2e66c3 in ?? () from /usr/lib64/libcuda.so.1
#5  0x00002b196e2e6819 in ?? () from /usr/lib64/libcuda.so.1
#6  0x00002b196e200287 in ?? () from /usr/lib64/libcuda.so.1
#7  0x00002b196e344ae2 in cuStreamSynchronize () from /usr/lib64/libcuda.so.1
"""  # noqa: E501 (the lines as pasted)

#: pytorch/pytorch#95944 (gdb ``bt`` of the one rank not in cudaDeviceSynchronize): twelve frames of the
#: stripped CUDA driver, then the runtime's, under the API call that entered them (corpus
#: collective_hang/pytorch-95944-gdb-backtrace-last-rank-cudamemcpyasync)
GDB_STRIPPED_DRIVER = (CORPUS / "collective_hang/pytorch-95944-gdb-backtrace-last-rank-cudamemcpyasync.log").read_text(
    encoding="utf-8")

#: the same backtrace cut before the call that entered the driver: nothing in it is named
GDB_ONLY_UNNAMED = "".join(GDB_STRIPPED_DRIVER.splitlines(keepends=True)[:12])

#: huggingface/transformers#17308 (py-spy of a hung test): the main thread in autograd's
#: ``backward`` under a test runner; no frame that names a wait on peers or the device
PYSPY_BACKWARD_ONLY = """\
Thread 530235 (idle): "MainThread"
    backward (torch/autograd/__init__.py:173)
    backward (torch/_tensor.py:399)
    _backward (functorch/_src/monkey_patching.py:97)
    training_step (transformers/trainer.py:2263)
"""

#: DeepSpeed#3032 (py-spy of a ZeRO-2 run hung at its first step on 32 GPUs): the main thread idle in
#: torch < 2.3's autograd entry, under ZeRO's backward; no frame names a collective
PYSPY_ZERO2_IDLE_IN_ENGINE = """\
Thread 4939 (idle): "MainThread"
    backward (torch/autograd/__init__.py:199)
    backward (torch/_tensor.py:488)
    backward (deepspeed/runtime/fp16/loss_scaler.py:51)
    backward (deepspeed/runtime/zero/stage_1_and_2.py:2013)
    backward (deepspeed/runtime/engine.py:1860)
    wrapped_fn (deepspeed/utils/nvtx.py:11)
Thread 5031 (idle): "Thread-1"
    wait (threading.py:316)
    run (threading.py:1264)
"""

#: The same frames dumped while the backward computes (py-spy's ``active``): a busy rank, not a wait
PYSPY_ZERO2_ACTIVE_IN_ENGINE = PYSPY_ZERO2_IDLE_IN_ENGINE.replace("Thread 4939 (idle)", "Thread 4939 (active+gil)")

#: Idle under ZeRO's backward, but innermost in a Python hook of the model (not in the engine's entry):
#: the hook's own frame is where the thread is, and it names nothing
PYSPY_ZERO2_IDLE_IN_HOOK = """\
Thread 4939 (idle): "MainThread"
    _log_activation (mymodel/hooks.py:40)
    _call_hook (torch/utils/hooks.py:125)
    backward (torch/autograd/__init__.py:199)
    backward (deepspeed/runtime/zero/stage_1_and_2.py:2013)
"""

#: A data loader worker dumped by py-spy while the job runs (the layout of py-spy's dump.rs; the
#: frames of torch's worker loop waiting for its next index): idle, not hung
PYSPY_DATALOADER_WORKER = """\
Thread 3141 (idle): "MainThread"
    poll (multiprocessing/popen_fork.py:27)
    get (multiprocessing/queues.py:113)
    _worker_loop (torch/utils/data/_utils/worker.py:275)
    run (multiprocessing/process.py:108)
Thread 3150 (idle): "Thread-2"
    all_reduce (torch/distributed/distributed_c10d.py:2806)
    _bootstrap (threading.py:973)
"""

#: A raised exception's traceback through all_reduce (CPython's traceback.format_list: ", in",
#: outermost first): not a dump, whatever frames it names
TRACEBACK_THROUGH_ALL_REDUCE = """\
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2050, in all_reduce
    work = group.allreduce([tensor], opts)
RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error
"""

#: A finished call named in a frame's own layout but outside any thread header: a profiler's or
#: a log's line, not a dump
FINISHED_ALL_REDUCE = """\
step 10 done
    all_reduce (torch/distributed/distributed_c10d.py:2806)
step 11 done
"""


def _lines(text: str, start: float = 100.0) -> list[LogLine]:
    key = RankKey("", 0)
    return [LogLine(key, t, start + i, start + i, "paste.log", i + 1) for i, t in enumerate(text.splitlines())]


def _scan(text: str) -> DumpScanner:
    scanner = DumpScanner()
    for line in _lines(text):
        scanner.observe(line)
    return scanner


@pytest.mark.parametrize(("text", "tool", "doing", "function"), [
    (PYSPY_ZERO3, "py-spy", Activity.WAIT, "_engine_run_backward"),
    (FAULTHANDLER_ZERO3, "faulthandler", Activity.WAIT, "synchronize"),
    (GDB_ALLREDUCE, "gdb", Activity.WAIT, "cudaStreamSynchronize"),
    (GSTACK_ALLREDUCE, "gdb", Activity.WAIT, "cuStreamSynchronize"),
    (GDB_STRIPPED_DRIVER, "gdb", Activity.WAIT, "cudaMemcpyAsync"),
    (PYSPY_BACKWARD_ONLY, "py-spy", Activity.OTHER, None),
    (PYSPY_DATALOADER_WORKER, "py-spy", Activity.DATA, "_worker_loop"),
    (PYSPY_ZERO2_IDLE_IN_ENGINE, "py-spy", Activity.WAIT, "backward"),
    (PYSPY_ZERO2_ACTIVE_IN_ENGINE, "py-spy", Activity.OTHER, None),
    (PYSPY_ZERO2_IDLE_IN_HOOK, "py-spy", Activity.OTHER, None),
], ids=["py-spy-zero3", "faulthandler-zero3", "gdb-nccl-allreduce", "gstack-allreduce",
        "gdb-unnamed-driver-frames-under-a-copy", "py-spy-backward-only",
        "py-spy-dataloader-worker", "py-spy-idle-in-engine-under-zero2", "py-spy-active-in-engine-busy",
        "py-spy-idle-in-a-hook"])
def test_each_layout_is_read_to_its_main_threads_activity(text: str, tool: str, doing: Activity,
                                                          function: str | None) -> None:
    dumps = _scan(text).finish()
    assert len(dumps) == 1
    dump = dumps[0]
    assert (dump.tool, dump.doing, dump.crash) == (tool, doing, False)
    assert (dump.frame.function if dump.frame else None) == function
    assert dump.main is not None and dump.main.main


def test_frames_gdb_could_not_name_say_nothing_and_take_no_place() -> None:
    """A backtrace of unnamed frames only (the driver's, cut before the call that entered it) names nothing;
    under them, the named call decides though it is beyond the innermost window of frames."""
    dumps = _scan(GDB_ONLY_UNNAMED).finish()
    assert [(d.tool, d.doing, d.frame) for d in dumps] == [("gdb", Activity.OTHER, None)]
    assert finding(dumps) is None
    assert len(GDB_ONLY_UNNAMED.splitlines()) > INNERMOST  # the call is beyond the window of frames
    assert finding(_scan(GDB_STRIPPED_DRIVER).finish()) is not None


@pytest.mark.parametrize("text", [TRACEBACK_THROUGH_ALL_REDUCE, FINISHED_ALL_REDUCE],
                         ids=["raised-traceback", "finished-call-line"])
def test_lines_that_name_a_collective_outside_a_dump_are_no_dump(text: str) -> None:
    assert _scan(text).finish() == []


@pytest.mark.parametrize(("text", "label", "function"), [
    (PYSPY_ZERO3, Label.COLLECTIVE_HANG, "_engine_run_backward"),
    (FAULTHANDLER_ZERO3, Label.COLLECTIVE_HANG, "synchronize"),
    (GDB_ALLREDUCE, Label.COLLECTIVE_HANG, "cudaStreamSynchronize"),
    (PYSPY_BACKWARD_ONLY, None, None),
    (PYSPY_DATALOADER_WORKER, None, None),  # a helper thread in all_reduce: the main thread decides
], ids=["py-spy", "faulthandler", "gdb", "nothing-named", "healthy-worker"])
def test_a_main_thread_waiting_is_a_collective_hang_with_the_frame_as_evidence(
        text: str, label: Label | None, function: str | None) -> None:
    verdict = dump_verdict(_scan(text).finish(), latest_progress=None)
    if label is None:
        assert verdict is None
        return
    assert verdict is not None
    assert (verdict.label, verdict.action.value) == (label, "restart")
    assert function is not None and function in verdict.evidence[0].text
    assert verdict.evidence[0].lineno > 1  # the frame's own line, not the header


def test_progress_after_the_dump_says_the_job_moved_on() -> None:
    dumps = _scan(PYSPY_ZERO3).finish()
    first = dumps[0].first.mono
    assert dump_verdict(dumps, latest_progress=first + 30) is None
    assert dump_verdict(dumps, latest_progress=first - 30) is not None


def test_a_compile_in_one_dump_outweighs_a_wait_in_another() -> None:
    # the frames of torch.compile's worker pool waiting on its compile subprocess (pytorch#162199's
    # traceback), in py-spy's layout, as a second process's dump after DeepSpeed#6524's
    compiling = ('Thread 77 (idle): "MainThread"\n'
                 "    _wait (subprocess.py:2038)\n"
                 "    wait (subprocess.py:1264)\n"
                 "    shutdown (torch/_inductor/compile_worker/subproc_pool.py:269)\n")
    dumps = _scan(PYSPY_ZERO3 + compiling).finish()
    assert [d.doing for d in dumps] == [Activity.WAIT, Activity.COMPILE]
    found = finding(dumps)
    assert found is not None and found.doing is Activity.COMPILE
    verdict = dump_verdict(dumps, None)
    assert verdict is not None and verdict.label is Label.COMPILING and verdict.action.value == "wait"


def test_a_dump_under_faulthandlers_timeout_header_is_a_live_process() -> None:
    # Modules/faulthandler.c's dump_traceback_later heads its dump "Timeout (h:mm:ss)!": the process
    # was still running when the timer fired, unlike under "Fatal Python error"
    dumps = _scan("Timeout (0:30:00)!\n" + FAULTHANDLER_ZERO3).finish()
    assert [(d.crash, d.doing) for d in dumps] == [(False, Activity.WAIT)]
    crashed = _scan("Fatal Python error: Aborted\n\n" + FAULTHANDLER_ZERO3).finish()
    assert [d.crash for d in crashed] == [True]


@pytest.mark.parametrize("excerpt", [
    "other_crash/pytorch-72086-fatal-segv-elastic-store.log",  # faulthandler under "Fatal Python error"
    "other_crash/pytorch-24983-gdb-sigsegv-libcudart.log",  # gdb under "received signal SIGSEGV"
])
def test_a_dump_under_a_crash_report_says_nothing_of_a_hang(excerpt: str) -> None:
    text = (CORPUS / excerpt).read_text(encoding="utf-8", errors="replace")
    dumps = _scan(text).finish()
    assert dumps and all(d.crash for d in dumps)
    assert finding(dumps) is None


@pytest.mark.parametrize("excerpt", [
    "collective_hang/deepspeed-6524-zero3-stuck-in-partition-grads-py-spy.log",
    "collective_hang/deepspeed-860-zero3-inference-hangs-in-synchronize-faulthandler.log",
    "collective_hang/deepspeed-3032-torch-compile-zero2-32gpu-pyspy-backward.log",
    "collective_hang/pytorch-95944-gdb-backtrace-last-rank-cudamemcpyasync.log",
    # native dumps cut by their users to Horovod's helper threads, no main thread shown (round issue23-heldout-18)
    "collective_hang/horovod-1182-gdb-pmpi-gather-missing-ranks.log",
    "collective_hang/horovod-1799-gdb-ncclbarrierenqueuewait-stuck.log",
    "collective_hang/horovod-2944-gdb-data-parallel-hang-culaunchkernel.log",
    "collective_hang/nccl-788-lldb-alltoallv-horovod-hang.log",
])
def test_offline_diagnose_reads_a_pasted_dump_as_a_hang(excerpt: str) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action.value) == (Label.COLLECTIVE_HANG, "restart")
    assert verdict.evidence[0].signature == "form.stack_dump"


def test_a_prefixed_dump_is_read_through_the_rank_prefix(tmp_path: Path) -> None:
    log = tmp_path / "combined.log"
    log.write_text("".join(f"[rank3]:{line}\n" for line in FAULTHANDLER_ZERO3.splitlines()), encoding="utf-8")
    verdict = diagnose_paths([str(log)]).verdict
    assert verdict.label is Label.COLLECTIVE_HANG
    assert verdict.culprit is not None and verdict.culprit.rank == 3


def test_dumps_beyond_the_bound_are_counted() -> None:
    from neuron_watch.diagnosis import dumps as module

    scanner = DumpScanner()
    for n in range(module.MAX_DUMPS + 3):
        for line in _lines(f'Process {n}: python train.py\n' + PYSPY_ZERO3, start=n * 100.0):
            scanner.observe(line)
    assert len(scanner.finish()) == module.MAX_DUMPS
    assert scanner.dropped == 3


#: lldb's ``bt all`` (lldb/docs/use/formatting.rst, the default thread and frame formats): the main thread
#: (#1, selected) in a sleep, a helper thread innermost in the runtime's synchronize under unnamed driver frames
LLDB_MAIN_AND_HELPER = """\
* thread #1, name = 'python', stop reason = signal SIGSTOP
  * frame #0: 0x00007ff58f2a0bd1 libc.so.6`__nanosleep + 17
    frame #1: 0x00007ff58f2a0aa4 libc.so.6`sleep + 52
  thread #12, name = 'python'
    frame #0: 0x00007ff4c42944df libcuda.so.1`___lldb_unnamed_symbol5986$$libcuda.so.1 + 175
    frame #1: 0x00007ff58df57708 libcudart.so.11.0`cudaEventSynchronize + 344
"""

#: The same dump cut by its user to the helper thread (NVIDIA/nccl#788 pasted Horovod's finalizer only)
LLDB_HELPER_ONLY = "".join(LLDB_MAIN_AND_HELPER.splitlines(keepends=True)[3:])

#: lldb stopped the process on a fatal signal: a crash, not a hang
LLDB_SEGV = LLDB_HELPER_ONLY.replace("thread #12, name = 'python'",
                                     "* thread #12, name = 'python', stop reason = signal SIGSEGV")

#: gdb's ``thread apply all bt`` cut to Horovod's background thread (horovod/horovod#1799's layout): no thread 1,
#: the thread shown in ncclAllReduce, with a frame gdb wrapped before its "from"
GDB_HELPER_IN_NCCL = """\
Thread 39 (Thread 0x7f2b5effd700 (LWP 2187)):
#0  0x00007f2c2a4c7b2f in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1
#1  0x00007f2b7c51b5f0 in ncclAllReduce ()
   from /usr/local/lib/python3.6/dist-packages/horovod/torch/mpi_lib_v2.cpython-36m-x86_64-linux-gnu.so
#2  0x00007f2b7c4a1e6c in horovod::common::NCCLAllreduce::Execute ()
   from /usr/local/lib/python3.6/dist-packages/horovod/torch/mpi_lib_v2.cpython-36m-x86_64-linux-gnu.so
---Type <return> to continue, or q <return> to quit---
#3  0x00007f2b7c4733a1 in horovod::common::RunLoopOnce ()
"""

#: A kernel launch over a condition variable (horovod/horovod#2944's thread): the launch queue full, the thread
#: waits on its device; the same launch with no blocking frame under it is a launch sampled while it runs
GDB_LAUNCH_BLOCKED = """\
Thread 204 (Thread 0x7f00d3e5e700 (LWP 6483)):
#0  0x00007f01da356de2 in pthread_cond_timedwait@@GLIBC_2.3.2 () from /usr/lib64/libpthread.so.0
#1  0x00007f00e53edaa7 in ?? () from /usr/local/nvidia/cpu_lib/libcuda.so.1
#2  0x00007f00e54674f3 in cuLaunchKernel () from /usr/local/nvidia/cpu_lib/libcuda.so.1
"""
GDB_LAUNCH_RUNNING = """\
Thread 204 (Thread 0x7f00d3e5e700 (LWP 6483)):
#0  0x00007f00e53edaa7 in ?? () from /usr/local/nvidia/cpu_lib/libcuda.so.1
#1  0x00007f00e54674f3 in cuLaunchKernel () from /usr/local/nvidia/cpu_lib/libcuda.so.1
"""


def test_lldbs_layout_is_read_and_its_thread_1_is_the_main_thread() -> None:
    dumps = _scan(LLDB_MAIN_AND_HELPER).finish()
    assert [(d.tool, d.crash, d.doing) for d in dumps] == [("lldb", False, Activity.OTHER)]
    assert dumps[0].main is not None and dumps[0].main.frames[0].function == "__nanosleep"
    # the helper's synchronize says nothing while the main thread sleeps
    assert dump_verdict(dumps, latest_progress=None) is None


def test_a_native_dump_without_its_main_thread_speaks_through_the_thread_that_waits() -> None:
    dumps = _scan(LLDB_HELPER_ONLY).finish()
    assert [(d.tool, d.doing) for d in dumps] == [("lldb", Activity.WAIT)]
    assert dumps[0].main is None
    assert dumps[0].frame is not None and dumps[0].frame.function == "cudaEventSynchronize"
    verdict = dump_verdict(dumps, latest_progress=None)
    assert verdict is not None and (verdict.label, verdict.action.value) == (Label.COLLECTIVE_HANG, "restart")


def test_lldbs_fatal_stop_reason_is_a_crash() -> None:
    dumps = _scan(LLDB_SEGV).finish()
    assert [d.crash for d in dumps] == [True]
    assert finding(dumps) is None


def test_gdbs_core_file_report_heads_a_crash() -> None:
    dumps = _scan("Program terminated with signal SIGABRT, Aborted.\n" + GDB_HELPER_IN_NCCL).finish()
    assert [d.crash for d in dumps] == [True]


def test_gdbs_wrapped_frames_and_pager_prompt_stay_in_the_dump() -> None:
    dumps = _scan(GDB_HELPER_IN_NCCL).finish()
    assert [(d.doing, d.frame.function if d.frame else None) for d in dumps] == [(Activity.WAIT, "ncclAllReduce")]
    # thread 1, after the wrapped frames and the prompt, is read into the same dump: its sleep speaks
    main = ("Thread 1 (Thread 0x7f2c2b4f1740 (LWP 2101)):\n"
            "#0  0x00007f2c2b0c6c20 in __nanosleep () from /lib/x86_64-linux-gnu/libc.so.6\n")
    whole = _scan(GDB_HELPER_IN_NCCL + main).finish()
    assert len(whole) == 1 and whole[0].main is not None
    assert [f.function for f in whole[0].main.frames] == ["__nanosleep"]
    assert whole[0].doing is Activity.OTHER


def test_a_kernel_launch_waits_only_over_a_blocking_frame() -> None:
    blocked = _scan(GDB_LAUNCH_BLOCKED).finish()
    assert [(d.doing, d.frame.function if d.frame else None) for d in blocked] == [(Activity.WAIT, "cuLaunchKernel")]
    running = _scan(GDB_LAUNCH_RUNNING).finish()
    assert [(d.doing, d.frame) for d in running] == [(Activity.OTHER, None)]

