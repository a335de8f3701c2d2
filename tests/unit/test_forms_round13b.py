# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-13 (a traceback's frames inside torch.compile's
compiler or an argument validator, a gang scheduler's refusal, a pod evicted for its own limit, Ray's memory
monitor, TensorRT's timing pass, a server's answer to a client's bad request), each as a rule of its family,
with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

KB = default_knowledge_base()
E, CRASH, RUN = FormKind.ERROR, FormKind.CRASH, FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # frames of a traceback raised while torch.compile compiles (dynamo's frame conversion and graph output,
    # Inductor's entry points), in both path layouts and cut at the frame's start
    ('  File "/workspace/pytorch/torch/_dynamo/convert_frame.py", line 559, in _convert_frame', E, Label.COMPILE_ERROR, "corpus (pytorch-106513)"),
    ('  File "/opt/conda/lib/python3.11/site-packages/torch/_dynamo/output_graph.py", line 1493, in _call_user_compiler', E, Label.COMPILE_ERROR, "corpus (pytorch-144188)"),
    ('  File "/opt/conda/lib/python3.11/site-packages/torch/_inductor/compile_fx.py", line 1886, in compile_fx', E, Label.COMPILE_ERROR, "corpus (pytorch-144188)"),
    ('[rank0]:   File "C:\\venv\\Lib\\site-packages\\torch\\_inductor\\graph.py", line 1017, in call_function', E, Label.COMPILE_ERROR, "Inductor's GraphLowering under a rank prefix, Windows paths"),
    ('  File "/workspace/pytorch/torch/_dynamo/bytecode_transformation.py", line 1028, in transform_code_object', E, Label.COMPILE_ERROR, "corpus (pytorch-106513)"),
    ("    raise BackendCompilerFailed(self.compiler_fn, e).with_traceback(", E, Label.COMPILE_ERROR, "corpus (pytorch-144188)"),
    # a frame in an argument validator, cut before its path's start, under a rank prefix
    ('Megatron-LM/megatron/training/arguments.py", line 561, in validate_args', E, Label.CONFIG_ERROR, "corpus (ms-swift-5737)"),
    ('[rank3]:   File "/opt/nemo/nemo/collections/llm/recipes/config.py", line 88, in _validate_config', E, Label.CONFIG_ERROR, "a validator's frame under a rank prefix"),
    # the outermost frame of a traceback in rich's layout, its box's left edge cut off
    ("     /Data/cj/ML/train_custom_LLM-main/train.py:105 in <module>                   \u2502", E, None, "corpus (train-custom-llm-8)"),
    ("\u2502 /home/user/app/cli.py:42 in <module>  \u2502", E, None, "rich.traceback's frame"),
    # Volcano's gang scheduler that cannot place a job, as an event, a condition and its reason
    ("  Warning  Unschedulable  69s (x78789 over 26h)  volcano  1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable.", CRASH, Label.CONFIG_ERROR, "corpus (volcano-1094)"),
    ("0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable", CRASH, Label.CONFIG_ERROR, "corpus (volcano-3220)"),
    ("    Reason:                NotEnoughResources", CRASH, Label.CONFIG_ERROR, "corpus (volcano-1094)"),
    # the kubelet evicting a pod over its own storage limit
    ("  Warning  Evicted              109s  kubelet                                Pod ephemeral local storage usage exceeds the total limit of containers 5Gi.", CRASH, Label.CONFIG_ERROR, "corpus (substratus-92)"),
    ("Container trainer exceeded its local ephemeral storage limit \"10Gi\".", CRASH, Label.CONFIG_ERROR, "pkg/kubelet/eviction/eviction_manager.go"),
    # Ray's memory monitor killing a task, cut and whole
    ("Memory on the node (IP: 10.1.180.84, ID: ba65c80c8aec6b1c406693f640c53f85422d4d73b069747d69875d42) where the task (task ID: d221d26232c9bae05def6a6d00dbd292d4fc77cc01000000, name=head, rank=0,, pid=4503, memory used", CRASH, Label.OOM, "corpus (llamafactory-9258)"),
    ("(raylet) Memory on the node (IP: 10.0.0.5, ID: 3f2a) where the actor (actor ID: 9c1e, name=RolloutWorker.__init__, pid=812, memory used=61.2GB) was running was 119.4GB / 125.0GB (0.955), which exceeds the memory usage threshold of 0.95.", CRASH, Label.OOM, "Ray's worker killing policy"),
    # TensorRT's builder starting its timing pass, in both of its loggers' layouts
    ("[07/04/2024-04:11:39] [I] [TRT] Local timing cache in use. Profiling results in this builder pass will not be stored.", RUN, None, "corpus (tensorrt-alpha-135)"),
    ("[11/28/2023-12:20:54] [TRT] [I] Global timing cache in use. Profiling results in this builder pass will be stored.", RUN, None, "TensorRT-LLM's builder logger"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    # the wrapper that runs a compiled graph, and torch 2.0's compiled-graph runner in compile_fx.py: run time, not compile
    '  File "/opt/conda/lib/python3.10/site-packages/torch/_dynamo/eval_frame.py", line 328, in _fn',
    '  File "/usr/lib/python3/site-packages/torch/_inductor/compile_fx.py", line 248, in run',
    '  File "/home/user/mygraph/graph.py", line 12, in build',  # a graph.py that is not Inductor's
    "    # dynamo calls raise BackendCompilerFailed(...) when the backend fails",  # the statement named in a comment
    '  File "/app/train.py", line 40, in validate',  # a validator that is not the arguments'
    '  File "/app/train.py", line 105, in <module>',  # a frame in CPython's layout: its exception line says the error
    "\u2502 /home/user/app/cli.py:42 in main  \u2502",  # an inner frame of rich's box: the outermost frame holds the error
    "Running /home/user/app/cli.py:42 in <module> scope",  # a path and a scope in prose
    "validate_args() checks the parallel sizes before the model is built",  # the function named in prose
    "    Message:               all tasks in gang scheduled; minAvailable reached",  # the gang placed
    "  Normal   Scheduled  5s  volcano  Successfully assigned default/job-1-nginx-0 to node1",  # the scheduler placing a pod
    "Pod ephemeral storage limit is set to 5Gi by the admission webhook",  # the limit named, no eviction
    "Memory on the node is 62% used (IP: 10.0.0.5)",  # Ray's status words, no kill
    "[07/04/2024-04:11:39] [I] [TRT] Loaded engine size: 12 MiB",  # TensorRT at INFO, no build
    "Global timing cache in use for the next build of this engine, see the docs",  # the words in prose
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_compiler_frame_gives_the_cause_to_an_error_no_rule_explains() -> None:
    """errorclass reads a compiler frame's cause (the frame is the block's only line that states one)."""
    reading = read_error('  File "/opt/conda/lib/python3.11/site-packages/torch/_dynamo/output_graph.py", line 1472, in _call_user_compiler')
    assert reading is not None and reading.label is Label.COMPILE_ERROR, reading


def test_client_error_response_is_benign_and_server_error_is_not() -> None:
    """A 4xx answer to one request is the client's mistake; a 5xx, or a 404 that is not a response, stays an error."""
    client = KB.classify("ERROR 03-18 09:02:03 [serving_chat.py:133] Error with model object='error' message='The model `QwQ-32B-Q4_K_M` does not exist.' type='NotFoundError' param=None code=404")
    assert client is not None and client.signature.category is Label.HEALTHY
    server = KB.classify("ERROR 05-02 10:11:12 [serving_chat.py:200] Error in chat completion: object='error' message='EngineCore died' type='InternalServerError' param=None code=500")
    assert server is not None and server.signature.category is not Label.HEALTHY


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # a traceback cut inside the compiler's frames (no exception line): the compile failed
    (['  File "/opt/conda/lib/python3.11/site-packages/torch/_dynamo/output_graph.py", line 1493, in _call_user_compiler',
      "    raise BackendCompilerFailed(self.compiler_fn, e).with_traceback(",
      '  File "/opt/conda/lib/python3.11/site-packages/torch/_inductor/compile_fx.py", line 1886, in compile_fx',
      "    return aot_autograd("], Label.COMPILE_ERROR, Action.STOP),
    # a logger's header over a traceback through the compiler
    (["ERROR:common:Backend dynamo failed in warmup()", "Traceback (most recent call last):",
      '  File "/workspace/pytorch/torch/_dynamo/convert_frame.py", line 559, in _convert_frame',
      "    result = inner_convert(frame, cache_size, hooks, frame_state)"], Label.COMPILE_ERROR, Action.STOP),
    # a gang scheduler's refusal repeated while other lines follow; a pod evicted; Ray killing a task
    (["Warning  Unschedulable  69s (x78789 over 26h)  volcano  1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable.",
      "kubectl describe pod test-xxx", "Events:          <none>"], Label.CONFIG_ERROR, Action.STOP),
    (["Warning  Evicted  109s  kubelet  Pod ephemeral local storage usage exceeds the total limit of containers 5Gi.",
      "Normal   Killing  109s  kubelet  Stopping container model"], Label.CONFIG_ERROR, Action.STOP),
    ([*PROGRESS, "Memory on the node (IP: 10.1.180.84, ID: ba65c80c) where the task (task ID: d221d262, name=head, rank=0,, pid=4503, memory used"],
     Label.OOM, Action.RESTART),
    # a TensorRT build's timing pass as the last word
    (["[07/04/2024-04:11:13] [W] [TRT] onnx2trt_utils.cpp:375: Your ONNX model has been generated with INT64 weights.",
      "[07/04/2024-04:11:39] [I] [TRT] Local timing cache in use. Profiling results in this builder pass will not be stored."],
     Label.COMPILING, Action.WAIT),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_client_errors_between_requests_leave_a_server_healthy() -> None:
    """A server that answers two requests with 404 and goes on serving is healthy."""
    lines = ["INFO:     Application startup complete.",
             "ERROR 03-18 09:02:03 [serving_chat.py:133] Error with model object='error' message='The model `QwQ-32B-Q4_K_M` does not exist.' type='NotFoundError' param=None code=404",
             'INFO:     192.168.1.168:12475 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found',
             "INFO 03-18 09:03:16 [chat_utils.py:346] Detected the chat template content format to be 'string'."]
    assert _verdict(lines)[0] is Label.HEALTHY


def test_compile_forms_a_run_went_on_from_are_healthy() -> None:
    """dynamo logs a frame it could not convert and runs it eagerly: the steps after it make the run healthy."""
    warned = "[2024-01-26 08:48:31,543] torch._dynamo.convert_frame: [WARNING]   File \"/home/user/pt/torch/_dynamo/symbolic_convert.py\", line 787, in run"
    assert _verdict([*PROGRESS[:2], warned, *PROGRESS[2:]])[0] is Label.HEALTHY
    # a TensorRT build whose timing pass ended before the run's steps
    built = ["[10/12/2024-15:46:01] [TRT] [I] Global timing cache in use. Profiling results in this builder pass will be stored.",
             "[10/12/2024-15:46:16] [TRT] [I] Engine generation completed in 15.4544 seconds."]
    assert _verdict([*built, *PROGRESS])[0] is Label.HEALTHY
