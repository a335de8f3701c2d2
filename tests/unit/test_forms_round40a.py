# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-40 (object detection, segmentation and
medical-imaging training), each as a rule of its family, with real lines and the near misses the rule must leave
alone: MONAI's wrapper of an exception a transform raised on a data item, Hydra's instantiate that could not import a
configured target (under its exception class's name or quoted as a repr), and NCCL's internal error in the words
NCCL printed before 2.19 (a signature of the knowledge base). Each line is from the corpus (named by its excerpt) or
from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40a import round40a_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

MONAI_COMPOSE = "RuntimeError: applying transform <monai.transforms.compose.Compose object at 0x7fc49d16de80>"
HYDRA_CALL = "[rank0]: hydra.errors.InstantiationException: Error in call to target 'training.trainer.Trainer':"
HYDRA_LOCATE_REPR = ("[rank0]: InstantiationException(\"Error locating target 'training.dataset.vos_dataset.VOSDataset', "
                     "set env var HYDRA_FULL_ERROR=1 to see chained exception.\\nfull_key: data.train.datasets[0].dataset.datasets0\")")
NCCL_INTERNAL = ("RuntimeError: NCCL error in: ***/spack-src/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
                 "internal error, NCCL version 2.14.3")

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # MONAI's apply_transform wrapper
    (MONAI_COMPOSE, ERROR, Label.CONFIG_ERROR, "corpus (monai-3604-randspatialcrop-grayscale-images)"),
    ("RuntimeError: applying transform <monai.transforms.io.dictionary.LoadImaged object at 0x7f0f84fb8a90>",
     ERROR, Label.CONFIG_ERROR, "Project-MONAI/research-contributions#313 (BRATS21, fixed by another MONAI version)"),
    ("[2023-09-25T15:50:45.480Z] RuntimeError: applying transform <monai.transforms.compose.Compose object at 0x7f566c30a2c0>",
     ERROR, Label.CONFIG_ERROR, "Project-MONAI/tutorials#1530 (a notebook's Jenkins log)"),
    ("ValueError: applying transform <monai.transforms.utility.dictionary.ConcatItemsd object at 0x7fb80495f7b8>.",
     ERROR, Label.CONFIG_ERROR, "Project-MONAI/MONAI#794 (MONAI 0.2's wrapper keeps the original's class)"),
    ("RuntimeError: applying transform &lt;monai.transforms.io.dictionary.LoadImaged object at 0x000001EB09410400&gt;",
     ERROR, Label.CONFIG_ERROR, "a 3D Slicer forum thread's MONAILabel LoadImaged failure (HTML-escaped paste)"),
    # Hydra's instantiate of a target that does not import, as a repr and under its class's name
    (HYDRA_LOCATE_REPR, ERROR, Label.CONFIG_ERROR,
     "corpus (sam2-415-hydra-instantiation-torchvision-cuda-mismatch)"),
    ("hydra.errors.InstantiationException: Error locating target 'training.trainer.Trainer', set env var HYDRA_FULL_ERROR=1 to see chained exception.",
     ERROR, Label.CONFIG_ERROR, "facebookresearch/sam2#629 and #395 (SAM2.1 fine-tuning; tensordict against torch)"),
    # the outer instantiate's head: a crash whose cause is the repr on the next line
    (HYDRA_CALL, CRASH, None, "corpus (sam2-415-hydra-instantiation-torchvision-cuda-mismatch)"),
    ("hydra.errors.InstantiationException: Error in call to target 'training.trainer.Trainer':", CRASH, None,
     "facebookresearch/sam2#415's title line without the launcher's rank tag"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    '        raise RuntimeError(f"applying transform {transform}") from e',  # MONAI's source line in the frames
    "input data information of the runtime error transform:",  # MONAI's log_stats header
    "I get the applying transform error with monai when I use RandSpatialCrop",  # prose
    "from hydra.errors import InstantiationException",  # an import
    "    raise InstantiationException(msg) from e",  # Hydra's source line
    "why does hydra say InstantiationException when the target exists?",  # prose
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_round_reads_only_its_words() -> None:
    """A memory class under MONAI's words is memory (other readers state it), not this form; other programs'
    words are other readers'."""
    for line in ("MemoryError: applying transform <monai.transforms.spatial.dictionary.Spacingd object at 0x7f>.",
                 "torch.cuda.OutOfMemoryError: applying transform <monai.transforms.compose.Compose object at 0x7f>",
                 "RuntimeError: applying transform <mypkg.transforms.Crop object at 0x7f>",
                 "Error locating target 'training.trainer.Trainer', set env var HYDRA_FULL_ERROR=1 to see chained exception.",
                 NCCL_INTERNAL):
        assert round40a_form(line) is None, line


def _verdict(tmp_path: Path, text: str) -> Label:
    log = tmp_path / "run.log"
    log.write_text(text)
    return diagnose_paths([str(log)], now=0.0).verdict.label


def test_monai_wrapper_alone_is_configuration(tmp_path: Path) -> None:
    """MONAI's wrapper ending a traceback whose original the paste cut off: the data do not fit the chain (stop)."""
    assert _verdict(tmp_path, (
        '  File "/Users/name/anaconda3/lib/python3.9/site-packages/monai/transforms/transform.py", line 106, in apply_transform\n'
        '    raise RuntimeError(f"applying transform {transform}") from e\n\n' + MONAI_COMPOSE + "\n")) is Label.CONFIG_ERROR


def test_monai_wrapper_over_a_root_that_states_memory_is_memory(tmp_path: Path) -> None:
    """The chain's root decides when it states a cause: host memory under the wrapper is out of memory."""
    assert _verdict(tmp_path, (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.7/site-packages/monai/apps/deepedit/transforms.py", line 99, in __call__\n'
        "    label = np.zeros(d[key].shape)\n"
        "numpy.core._exceptions.MemoryError: Unable to allocate 502. MiB for an array with shape (512, 512, 251) and data type float64\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.7/site-packages/monai/transforms/transform.py", line 91, in apply_transform\n'
        '    raise RuntimeError(f"applying transform {transform}") from e\n'
        "RuntimeError: applying transform <monai.apps.deepedit.transforms.AddGuidanceSignalDeepEditd object at 0x7f0f84fb8a90>\n")) is Label.OOM


def test_hydra_call_over_a_target_that_did_not_import_is_configuration(tmp_path: Path) -> None:
    """The outer instantiate's head and the repr of the inner failure under it (sam2#415's three lines)."""
    assert _verdict(tmp_path, HYDRA_CALL + "\n" + HYDRA_LOCATE_REPR + "\n[rank0]: full_key: trainer\n") is Label.CONFIG_ERROR


def test_hydra_call_over_memory_is_memory(tmp_path: Path) -> None:
    """The same head over a target that ran out of memory: the repr's cause, not configuration."""
    assert _verdict(tmp_path, (
        "hydra.errors.InstantiationException: Error in call to target 'training.trainer.Trainer':\n"
        "OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity; 21.00 GiB already allocated; 1.00 GiB free; 22.00 GiB reserved in total by PyTorch)')\n"
        "full_key: trainer\n")) is Label.OOM


def test_nccl_internal_error_in_its_older_words_is_communication(tmp_path: Path) -> None:
    """c10d's NCCL error with NCCL's pre-2.19 "internal error" (nccl#948's Detectron2 on two nodes): the signature of
    NCCL's internal error, a communication failure to restart, as its newer words are."""
    assert _verdict(tmp_path, NCCL_INTERNAL + "\n") is Label.COMM_ERROR
    assert _verdict(tmp_path, (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "internal error - please report this issue to the NCCL developers, NCCL version 2.18.1\n")) is Label.COMM_ERROR


def test_nccl_words_of_no_internal_error_are_not_it(tmp_path: Path) -> None:
    """A log that names an internal error in prose, or an NCCL version line, is not NCCL's internal error."""
    assert _verdict(tmp_path, (
        "2024-01-01 10:00:00 INFO step 1 loss 0.5\n"
        "NCCL version 2.14.3+cuda11.7\n"
        "2024-01-01 10:00:05 INFO step 2 loss 0.4\n"
        "2024-01-01 10:00:10 INFO step 3 loss 0.3\n")) is Label.HEALTHY
