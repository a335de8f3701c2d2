# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-15 (Click's usage error, a weights or checkpoint
file its loader cannot read, CUDA's words for a binary without code for the device, Triton's record of a model it
failed to load whatever the status), each as a rule of its family, with real lines and the near misses the rule
must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Click's hint under the usage it printed (Click 7+ quotes with ', older Click with ")
    ("Try 'tune --help' for help.", E, Label.CONFIG_ERROR, "corpus (torchtune-2001)"),
    ("Try 'accelerate launch --help' for help.", E, Label.CONFIG_ERROR, "click/exceptions.py UsageError.show, a subcommand's path"),
    ('Try "ray start --help" for help.', E, Label.CONFIG_ERROR, "click < 7.0 UsageError.show"),
    ("[rank0]: Try 'train.py -h' for help.", E, Label.CONFIG_ERROR, "a Typer script under a rank's prefix, help option -h"),
    # CUDA's words for a binary without code for this device, inside NCCL's "Cuda failure" and PyTorch's "CUDA error"
    ("gcn75:2336636:2336906 [0] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'", E, Label.CONFIG_ERROR, "corpus (nccl-1372)"),
    ("c76d92cccb6e:72:457 [1] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'", E, Label.CONFIG_ERROR, "NCCL src/enqueue.cc CUDACHECK of cudaFuncGetAttributes (nccl#1528)"),
    ("RuntimeError: CUDA error: invalid device function", E, Label.CONFIG_ERROR, "c10/cuda/CUDAException.cpp, cudaErrorInvalidDeviceFunction"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "Try `tune --help` for help.",  # backticks: a document's prose, not Click's hint
    "Tip: Try 'ds_report --help' for help. It lists the ops",  # more after the hint: prose
    "Try 'pip install --upgrade torchtune' for help.",  # not a help option
    "named symbol not found means the kernels were not built for this architecture",  # the words in prose
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


#: error lines no form reads (the table's unrecognised error, a bare exception line) whose words state a cause:
#: (line, the cause, where it is from)
CAUSES: list[tuple[str, Label, str]] = [
    # Click's usage error messages after its "Error: "
    ("Error: No such command 'run'.", Label.CONFIG_ERROR, "corpus (torchtune-2001)"),
    ("Error: No such option: --nproc-per-node", Label.CONFIG_ERROR, "click/exceptions.py NoSuchOption"),
    ("Error: Missing argument 'CONFIG'.", Label.CONFIG_ERROR, "click/exceptions.py MissingParameter"),
    ("Error: Invalid value for '--precision': 'bf32' is not one of 'fp32', 'bf16'.", Label.CONFIG_ERROR, "click/exceptions.py BadParameter"),
    ("Error: Got unexpected extra argument (recipes/8B_lora.yaml)", Label.CONFIG_ERROR, "click/core.py Context.fail"),
    ("Error: Option '--config' requires an argument.", Label.CONFIG_ERROR, "click/parser.py"),
    # a weights or checkpoint file its loader cannot read
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge", Label.CONFIG_ERROR, "corpus (processpainter-5)"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer", Label.CONFIG_ERROR, "safetensors bindings/python/src/lib.rs, a shard cut short"),
    ("[rank3]: safetensors_rust.SafetensorError: Error while deserializing header: InvalidHeaderDeserialization", Label.CONFIG_ERROR, "safetensors SafeTensorError::InvalidHeaderDeserialization under a rank's prefix"),
    ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory", Label.CONFIG_ERROR, "caffe2/serialize/inline_container.cc, a truncated checkpoint"),
    ("_pickle.UnpicklingError: invalid load key, 'v'.", Label.CONFIG_ERROR, "torch/serialization.py legacy load of a Git LFS pointer"),
    # Triton's record of a model it failed to load, whatever the status: the reason, or the load itself
    ("E0720 03:42:54.944486 1 model_repository_manager.cc:810] failed to load 'hrnet_libtorch' version 1: Internal: load failed for libtorch model -> 'hrnet_libtorch': ", Label.CONFIG_ERROR, "corpus (triton-server-1808)"),
    ("E0101 00:00:00.000000 1 model_lifecycle.cc:626] failed to load 'llama' version 1: Internal: load failed for libtorch model -> 'llama': CUDA out of memory. Tried to allocate 2.00 GiB", Label.OOM, "triton core model_lifecycle.cc, a reason that states memory"),
]


@pytest.mark.parametrize(("line", "label", "source"), CAUSES, ids=[f"cause:{i}" for i in range(len(CAUSES))])
def test_error_line_states_its_cause(line: str, label: Label, source: str) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is label, (stated, source)


@pytest.mark.parametrize("line", [
    "ValueError: Missing argument 'x' in the config",  # Error glued to a class name: not Click's "Error: "
    "Error: No such file or directory: 'data/train.json'",  # another program's "Error: " (a missing path's rule, not Click's)
    "INFO safetensors: deserializing header of model-00001-of-00004.safetensors",  # a loader at work
    "RuntimeError: CUDA error: an illegal memory access was encountered",  # a kernel's fault, not a binary without code
])
def test_cause_near_miss_is_not_these_forms(line: str) -> None:
    stated = cause_of(line)
    assert stated is None or stated[1] not in (
        "Click's usage error (the command line refused)", "a weights or checkpoint file its loader cannot read",
        "a CUDA driver refusing a binary built for another device or driver"), (line, stated)


def test_triton_unavailable_without_a_cause_stays_unread() -> None:
    """Unavailable is the code a backend gives a model it cannot reach, read by its message only (as before)."""
    assert cause_of("E0101 00:00:00.000000 1 model_lifecycle.cc:626] failed to load 'm' version 1: Unavailable: busy") is None


def test_click_usage_error_is_a_configuration_error() -> None:
    reading = read_error("Error: No such command 'run'.")
    assert reading is not None and reading.label is Label.CONFIG_ERROR and reading.action is Action.STOP, reading


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # Click's usage error: the prompt, the usage, the hint, the message (corpus torchtune-2001)
    (["(torchtune) aginart@ip-10-1-78-193:~/dev$ tune run --nproc_per_node 8 full_finetune_distributed --config 1_5B_full.yaml ",
      "Usage: tune [OPTIONS] COMMAND [ARGS]...", "Try 'tune --help' for help.", "", "Error: No such command 'run'."],
     Label.CONFIG_ERROR, Action.STOP),
    # a weights file that is not one, at the end of transformers' traceback (corpus processpainter-5)
    (['  File "/root/miniconda3/lib/python3.10/site-packages/transformers/modeling_utils.py", line 429, in load_state_dict',
      '    with safe_open(checkpoint_file, framework="pt") as f:',
      "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge"], Label.CONFIG_ERROR, Action.STOP),
    # NCCL built without code for this GPU (corpus nccl-1372)
    (["gcn75:2336636:2336906 [0] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'"], Label.CONFIG_ERROR, Action.STOP),
    # Triton's libtorch backend refusing a TorchScript file (corpus triton-server-1808)
    (["E0720 03:42:54.944486 1 model_repository_manager.cc:810] failed to load 'hrnet_libtorch' version 1: Internal: load failed for libtorch model -> 'hrnet_libtorch': ",
      "Unknown type name '__torch__.torch.nn.modules.module.___torch_mangle_312.Module':",
      "Compiled from code."], Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_a_server_that_loaded_its_model_is_healthy() -> None:
    """Triton loading a model, then serving: no failure read into the load records."""
    loaded = ["I0720 03:42:54.944486 1 model_repository_manager.cc:1052] loading: hrnet_libtorch:1",
              "I0720 03:42:58.123456 1 model_repository_manager.cc:1183] successfully loaded 'hrnet_libtorch' version 1"]
    assert _verdict([*loaded, *PROGRESS])[0] is Label.HEALTHY
