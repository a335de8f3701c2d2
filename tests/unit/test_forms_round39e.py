# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-39 (OCR, document AI and vision-language model
training and fine-tuning), each as a rule of its family, with real lines and the near misses the rule must leave
alone: ms-swift's warning that a model's declared requirements are not installed, the cause of the model load that
fails after it and a warning while the run goes on. Each line is from the corpus (named by its excerpt) or from a
public repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, cause_of
from neuron_watch.diagnosis.heldout.round39e import round39e_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

SWIFT_TRANSFORMERS = '[WARNING:swift] Please install the package: `pip install "transformers>=4.49" -U`.'
SWIFT_QWEN2_VL = '[WARNING:swift] Please install the package: `pip install "qwen_vl_utils>=0.0.6" "decord" -U`.'

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    (SWIFT_TRANSFORMERS, ERROR, Label.CONFIG_ERROR, "corpus (ms-swift-3109-qwen25-vl-needs-transformers-4-49)"),
    (SWIFT_QWEN2_VL, ERROR, Label.CONFIG_ERROR,
     "ms-swift's Qwen2-VL ModelMeta (requires=['transformers>=4.45', 'qwen_vl_utils>=0.0.6', 'decord']) as "
     "check_requires prints the two it found missing"),
    ('[rank1]: [WARNING:swift] Please install the package: `pip install "transformers>=4.57" "qwen_vl_utils>=0.0.14" -U`.',
     ERROR, Label.CONFIG_ERROR, "the same record under torchrun's rank tag (a Qwen3-VL ModelMeta's requirements)"),
]

#: lines of the same words that are not this form
NEAR_MISSES = [
    "            logger.warning(f'Please install the package: `pip install {requires} -U`.')",  # the source line
    "Please install the package: `pip install flash_attn` and try again.",  # another program's advice, no requirement list
    'To fix it run `pip install "transformers>=4.49" -U`.',  # the command without ms-swift's words
    "# Please install the package: `pip install` the requirements listed in README.md",  # prose
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_the_warning_states_its_cause() -> None:
    assert cause_of(SWIFT_TRANSFORMERS) == (Label.CONFIG_ERROR,
                                            "a model's declared requirements the environment does not meet (ms-swift)")
    assert round39e_form("[INFO:swift] Loading the model using model_dir: /models/Qwen2.5-VL-3B-Instruct") is None


def test_a_load_that_fails_after_the_warning_is_configuration(tmp_path: Path) -> None:
    """The warning, then the traceback of the model's load cut before its exception (the corpus's
    ms-swift-3109): configuration (stop), not a crash to restart."""
    log = tmp_path / "swift.log"
    log.write_text("[INFO:swift] Loading the model using model_dir: /models/Qwen2.5-VL-3B-Instruct\n"
                   + SWIFT_TRANSFORMERS + "\n"
                   "[rank0]: Traceback (most recent call last):\n"
                   '[rank0]:   File "/code/ms-swift-3.1.0/swift/cli/sft.py", line 5, in <module>\n'
                   "[rank0]:     sft_main()\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_a_run_that_goes_on_after_the_warning_is_healthy(tmp_path: Path) -> None:
    """A package only some inputs need (decord, for videos): the warning, then the run's progress: healthy."""
    log = tmp_path / "swift.log"
    log.write_text("[INFO:swift] Loading the model using model_dir: /models/Qwen2-VL-7B-Instruct\n"
                   + SWIFT_QWEN2_VL + "\n"
                   "Train:   1%|          | 5/500 [00:31<51:02,  6.19s/it]\n"
                   "{'loss': 1.9312, 'acc': 0.58, 'grad_norm': 3.1, 'learning_rate': 9.9e-05, 'epoch': 0.01, 'global_step/max_steps': '5/500'}\n"
                   "Train:   2%|▏         | 10/500 [01:02<50:31,  6.18s/it]\n"
                   "{'loss': 1.7114, 'acc': 0.61, 'grad_norm': 2.7, 'learning_rate': 9.8e-05, 'epoch': 0.02, 'global_step/max_steps': '10/500'}\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
