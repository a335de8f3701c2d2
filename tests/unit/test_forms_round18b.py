# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-18 (CUDA's uncorrectable NVLink error, a bus error
whose code says the kernel could not back a page of a shared mapping, dynamo's recompile-limit warning as the end
of a recompile, not its start), each as a rule of its family, with real lines and the near misses the rule must
leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or from a public log of the same program
(named), or is the format a project's source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

#: error and crash lines whose words state a cause: (line, the cause)
CAUSES: list[tuple[str, Label]] = [
    # CUDA's string for CUDA_ERROR_NVLINK_UNCORRECTABLE, in a C++ terminate's what() (corpus pytorch-58155)
    ("  what():  CUDA error: uncorrectable NVLink error detected during the execution", Label.HARDWARE_ERROR),
    # ... as torch raises it (torch/csrc: "CUDA error: " + cudaGetErrorString; an EDL job master's report of a
    # worker, dlrover's docs)
    ("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution", Label.HARDWARE_ERROR),
    # ... as XLA's async allocator logs it, the driver's enum name before the string (a JAX job's E record)
    ("[rank1] E0821 04:06:44.462569 820 gpu_cudamallocasync_allocator.cc:414] cudaFreeAsync failed to free 0x27e80b9200: INTERNAL: CUDA error: : CUDA_ERROR_NVLINK_UNCORRECTABLE: uncorrectable NVLink error detected during the execution",
     Label.HARDWARE_ERROR),
    # UCX's signal handler (ucs/debug/debug.c "Caught signal %d (%s)", the si_code's description): SIGBUS with
    # BUS_ADRERR in a docker container's NCCL set-up (corpus pipedream-76)
    ("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)", Label.OOM),
    # ... in ROCm's PyTorch container on MI250x (ROCm#1777)
    ("[nid005060:78213:0:78213] Caught signal 7 (Bus error: nonexistent physical address)", Label.OOM),
    # a handler that prints the code's name and description (siginfo's "BUS_ADRERR (Nonexistent physical address)",
    # the table of signal-code names crash reporters print, filled in)
    ("Fatal signal 7 (SIGBUS), code BUS_ADRERR (Nonexistent physical address), fault addr 0x7f3a2c000000", Label.OOM),
]

#: error and crash lines near those forms that state no cause
NO_CAUSE = [
    # UCX's other bus error: an unaligned access (BUS_ADRALN), a program's bug
    "[gpu-4:1204:0:1211] Caught signal 7 (Bus error: invalid address alignment)",
    # a segfault in the same handler's words
    "[node01:2683:0:2780] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)",
    # a bus error named without its code (torchrun's report; corpus slapo-114): the code is what says the cause
    "  traceback : Signal 7 (SIGBUS) received by PID 100",
    # CUDA's other errors that name no hardware (an illegal address, a launch failure)
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: CUDA error: unspecified launch failure",
    # NVLink in the words of a set-up, not of a fault (NCCL's topology line)
    "node1:2683:2826 [0] NCCL INFO Channel 00/24 :    0   1   2   3   4   5   6   7 via P2P/NVLink error-free",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


# -- whole logs, as the judge reads them ------------------------------------------------------------

#: dynamo's recompile-limit record as torch's logger prints it (torch/_dynamo/convert_frame.py: the warning, then
#: the frame is skipped; corpus comfyui-9972, on Windows)
RECOMPILE_LIMIT = [
    "W0921 18:32:27.863000 6084 Lib\\site-packages\\torch\\_dynamo\\convert_frame.py:964] [9/64] torch._dynamo hit config.recompile_limit (64)",
    "W0921 18:32:27.863000 6084 Lib\\site-packages\\torch\\_dynamo\\convert_frame.py:964] [9/64]    function: '__call__' (ComfyUI\\comfy\\model_patcher.py:129)",
    "W0921 18:32:27.863000 6084 Lib\\site-packages\\torch\\_dynamo\\convert_frame.py:964] [9/64]    last reason: 9/63: self.key == 'diffusion_model.blocks.6.self_attn.v.weight'",
    "W0921 18:32:27.863000 6084 Lib\\site-packages\\torch\\_dynamo\\convert_frame.py:964] [9/64] To log all recompilation reasons, use TORCH_LOGS=\"recompiles\".",
]

#: the same frame under fullgraph: dynamo raises instead of skipping (corpus pytorch-167504)
FULLGRAPH_RAISED = [
    '  File "/data/users/shangdiy/pytorch/torch/_dynamo/convert_frame.py", line 1567, in _compile',
    "    raise FailOnRecompileLimitHit(",
    "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations can degrade performance due to the compilation overhead of each recompilation.",
]

#: dynamo's announcement of a recompile (guards.py's recompile message under TORCH_LOGS=recompiles)
RECOMPILING = "V1123 20:06:40.110000 8461 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling function forward in /app/model.py:30"

ENDINGS = [
    # a healthy run's end on dynamo's limit: the frame now runs without compiling, nothing is compiling
    ([*PROGRESS, *RECOMPILE_LIMIT], Label.HEALTHY, Action.WAIT),
    # ... and the limit right after a recompile was announced: that recompile gave up, it is not at work
    ([*PROGRESS, RECOMPILING, *RECOMPILE_LIMIT], Label.HEALTHY, Action.WAIT),
    # under fullgraph the limit is raised: the compiler refused the program
    ([*PROGRESS, *RECOMPILE_LIMIT, *FULLGRAPH_RAISED], Label.COMPILE_ERROR, Action.STOP),
    # a recompile announced and nothing after it is still a compile at work (the judge's reading, unchanged)
    ([*PROGRESS, RECOMPILING], Label.COMPILING, Action.WAIT),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    # an NVLink fault thrown from the caching allocator, after a peer's transport closed with it: the device's
    # fault is the cause, the node is drained
    ("hardware_error/pytorch-58155-a100-uncorrectable-nvlink-terminate.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    # UCX's bus error (BUS_ADRERR) in NCCL's set-up threads, then torchrun's ChildFailedError: shared memory ran out
    ("oom/pipedream-76-docker-shm-sigbus-ncclgroupend.log", Label.OOM, Action.RESTART),
    # dynamo's recompile-limit warning at a healthy run's end: nothing is compiling
    ("healthy/comfyui-9972-recompile-limit-warnings-generation-works.log", Label.HEALTHY, Action.WAIT),
], ids=["nvlink", "bus-adrerr", "recompile-limit"])
def test_the_corpus_excerpt(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
