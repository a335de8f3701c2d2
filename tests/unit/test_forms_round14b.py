# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-14 (c10d's watchdog naming the work that timed
out, NCCL's suspected collective mismatch, an exception of the graph compiler's own module, vLLM's compile records,
a refusal for want of memory, CUDA's peer-access limit, a connection error raised by a socket that cannot bind),
each as a rule of its family, with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind, cause_of, read_line
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E, CRASH, RUN, DONE = FormKind.ERROR, FormKind.CRASH, FormKind.COMPILE_RUNNING, FormKind.COMPILE_DONE

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # c10d's watchdog naming the work whose timeout expired, in torch 2.2's and 2.5's layouts
    ("[rank4]:[E114 15:08:00.554388780 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 4] Timeout at NCCL work: 175, last enqueued NCCL work: 175, last completed NCCL work: 174.", E, Label.COLLECTIVE_HANG, "corpus (prodigy-35)"),
    ("[rank1]:[E ProcessGroupNCCL.cpp:1540] [PG 1 Rank 1] Timeout at NCCL work: 7, last enqueued NCCL work: 8, last completed NCCL work: 6.", E, Label.COLLECTIVE_HANG, "ProcessGroupNCCL.cpp watchdogHandler, torch 2.3"),
    ("[rank1]:[E521 19:04:23.802884296 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout at NCCL work: 131, last enqueued NCCL work: 131, last completed NCCL work: 130.", E, Label.COLLECTIVE_HANG, "corpus (ms-swift-4306)"),
    # NCCL's device-side check: a collective whose peers never came
    ("[0] init.cc:1256 NCCL WARN Your program may be hanging, this may be caused by a collective mismatch around rank 1. Please check your collective calls at and around this rank. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs", E, Label.COLLECTIVE_HANG, "corpus (lightning-8214)"),
    ("node1:2304:2340 [5] NCCL WARN Your program may be hanging, this may be caused by a collective mismatch around rank 13. Please check your collective calls at and around this rank.", E, Label.COLLECTIVE_HANG, "src/init.cc ncclDevSuspectedMismatch, NCCL's own prefix"),
    # an exception of TorchDynamo's or Inductor's own module as a traceback's last line
    ("torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations can degrade performance due to the compilation overhead of each recompilation. To monitor recompilations, enable TORCH_LOGS=recompiles. If recompilations are expected, consider increasing torch._dynamo.config.cache_size_limit to an appropriate value.", CRASH, Label.COMPILE_ERROR, "corpus (dion-23)"),
    ("[rank2]: torch._inductor.exc.InductorError: CppCompileError: C++ compile error", CRASH, Label.COMPILE_ERROR, "torch/_inductor/exc.py InductorError, under a rank prefix"),
    ("torch._dynamo.exc.UserError: Dynamic control flow is not supported at the moment.", CRASH, Label.COMPILE_ERROR, "torch/_dynamo/exc.py UserError"),
    # vLLM's records from its compilation package (relative and base names), monitor.py's total
    ("(EngineCore_DP0 pid=3419510) INFO 10-07 16:12:15 [compilation/backends.py:559] Dynamo bytecode transform time: 5.80 s", RUN, None, "corpus (vllm-26379)"),
    ("(EngineCore_DP0 pid=3419510) DEBUG 10-07 16:12:16 [compilation/vllm_inductor_pass.py:63] PostCleanupPass completed in 0.4 ms", RUN, None, "corpus (vllm-26379)"),
    ("INFO 05-09 22:20:59 [backends.py:148] Compiling a graph for general shape takes 6.06 s", RUN, None, "vllm/compilation/backends.py, vLLM 0.8"),
    ("INFO 04-09 02:06:25 [monitor.py:33] torch.compile takes 16.61 s in total", DONE, None, "vllm/compilation/monitor.py"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "[rank0]:[I1003 18:30:01.833575187 ProcessGroupNCCL.cpp:1664] timeout for NCCL work is set to 600000 ms",  # the setting, no work timed out
    "NCCL_DEBUG=INFO shows what your program is doing when it may be hanging",  # the words in prose
    "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] Graph break: torch._dynamo.exc.Unsupported: call_function",  # a graph break logged at W: dynamo runs it eagerly
    "see torch._dynamo.exc.Unsupported in the docs for the list of constructs",  # the class named in prose
    "INFO 05-09 22:20:53 [gpu_model_runner.py:1176] Model loading took 14.9888 GB and 28.719376 seconds",  # another vLLM module
    "INFO 04-09 02:06:25 [monitor.py:41] monitoring the engine every 5 s",  # monitor.py without its total
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


#: error lines no form reads (the table's unrecognised error, a bare exception line) whose words state a cause:
#: (line, the cause, where it is from)
CAUSES: list[tuple[str, Label, str]] = [
    # a refusal for want of memory, in the words of the program that refuses
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", Label.OOM, "corpus (sglang-4330)"),
    ("[2025-03-29 18:20:01 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.2", Label.OOM, "sglang model_runner.py under its scheduler's prefix"),
    ("RuntimeError: insufficient GPU memory for the requested KV cache", Label.OOM, "a serving stack's refusal"),
    # CUDA's peer-access limit, in the runtime's and the driver's words
    ("RuntimeError: CUDA error: peer mapping resources exhausted", Label.CONFIG_ERROR, "corpus (llamafactory-1213)"),
    ("cuDeviceCanAccessPeer: CUDA_ERROR_TOO_MANY_PEERS", Label.CONFIG_ERROR, "the driver API's name of it"),
]


@pytest.mark.parametrize(("line", "label", "source"), CAUSES, ids=[f"cause:{i}" for i in range(len(CAUSES))])
def test_error_line_states_its_cause(line: str, label: Label, source: str) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is label, (stated, source)


def test_vllm_error_record_is_an_error_not_a_compile_at_work() -> None:
    form = read_line("ERROR 05-09 22:20:59 [backends.py:148] compile failed")
    assert form is None or form.kind is not FormKind.COMPILE_RUNNING, form


@pytest.mark.parametrize("line", [
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",  # /dev/shm: the resource readers'
    "RuntimeError: Not enough shared memory to create the segment",
    "RuntimeError: CUDA error: peer access is already enabled",  # a peer-access state, not the limit
    "ValueError: not enough values to unpack (expected 3, got 2)",  # "not enough" of something else
])
def test_cause_near_miss_states_no_memory_or_peer_limit(line: str) -> None:
    stated = cause_of(line)
    assert stated is None or stated[1] not in ("a program refusing to go on for want of memory",
                                               "more peers mapped than CUDA's peer-access limit allows"), (line, stated)


def test_connection_error_of_a_socket_that_cannot_bind_is_the_launch() -> None:
    """c10d raises DistNetworkError (a connection error) when its own server socket cannot bind: the port it was
    given is taken or not its to use, which a restart repeats; a client that cannot reach a peer stays comm."""
    bind = read_error("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:98 (errno: 13 - Permission denied). The server socket has failed to bind to 0.0.0.0:98 (errno: 13 - Permission denied).")
    assert bind is not None and bind.label is Label.CONFIG_ERROR and bind.action is Action.STOP, bind
    reach = read_error("torch.distributed.DistNetworkError: Connection reset by peer")
    assert reach is not None and reach.label is Label.COMM_ERROR, reach


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # the watchdog's report alone, then the process taken down
    (["[rank4]:[E114 15:08:00.554388780 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 4] Timeout at NCCL work: 175, last enqueued NCCL work: 175, last completed NCCL work: 174.",
      "[rank4]:[E114 15:08:00.554406629 ProcessGroupNCCL.cpp:621] [Rank 4] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."],
     Label.COLLECTIVE_HANG, Action.RESTART),
    # dynamo giving up its recompiles with fullgraph=True: the compile failed, not one still running
    (["W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] torch._dynamo hit config.recompile_limit (8)",
      "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True."], Label.COMPILE_ERROR, Action.STOP),
    # vLLM's compile as the log's end
    (["(EngineCore_DP0 pid=3419510) INFO 10-07 16:12:15 [compilation/backends.py:559] Dynamo bytecode transform time: 5.80 s",
      "(EngineCore_DP0 pid=3419510) INFO 10-07 16:12:18 [compilation/backends.py:197] Cache the graph for dynamic shape for later use"],
     Label.COMPILING, Action.WAIT),
    # SGLang's refusal at start-up
    (["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."], Label.OOM, Action.RESTART),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_forms_a_run_went_on_from_are_healthy() -> None:
    """vLLM's compile that ended, then the server's progress: healthy; a graph break logged, then steps: healthy."""
    compiled = ["INFO 05-09 22:20:53 [backends.py:430] Dynamo bytecode transform time: 2.05 s",
                "INFO 05-09 22:21:02 [monitor.py:33] torch.compile takes 8.11 s in total"]
    assert _verdict([*compiled, *PROGRESS])[0] is Label.HEALTHY
    graph_break = "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] Graph break: torch._dynamo.exc.Unsupported: call_function"
    assert _verdict([*PROGRESS[:2], graph_break, *PROGRESS[2:]])[0] is Label.HEALTHY
