# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part B of the misses of round issue23-heldout-40 (experiment trackers and MLOps sidecars around
training runs), each as a rule of its family, with real lines and the near misses the rule must leave alone: a
histogram writer refusing values that are all NaN or infinite (torch's and tensorboardX's make_histogram, TensorFlow's
HistogramSummary, numpy's np.histogram), the W&B server's refusal (401/403/404) of a run's entity, project or key, and
pynvml's exception for a lost GPU. Each line is from the corpus (named by its excerpt) or from a public thread or
repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40b import round40b_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

HISTOGRAM_EMPTY = "ValueError: The histogram is empty, please file a bug report."
WANDB_404 = "wandb: ERROR Error while calling W&B API: entity your_entity not found during upsertBucket (<Response [404]>)"
PYNVML_LOST = "wandb.vendor.pynvml.pynvml.NVMLError_GpuIsLost: GPU is lost"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a histogram writer given values that are all NaN or infinite
    (HISTOGRAM_EMPTY, ERROR, Label.NUMERICAL_ERROR, "corpus (tacotron2-549-validation-histogram-empty-nan-grad-norm)"),
    ("**ValueError: The histogram is empty, please file a bug report.**", ERROR, Label.NUMERICAL_ERROR,
     "corpus (vt-adl-12-loss-nan-then-tensorboard-histogram-empty)"),
    ("tensorflow.python.framework.errors_impl.InvalidArgumentError: Nan in summary histogram for: CNN1/output/dcscn_L6_F22to22_Sc4_NIN_A22_B32_PS_R1F32",
     ERROR, Label.NUMERICAL_ERROR, "jiny2001/dcscn-super-resolution#60 (TensorFlow's HistogramSummary kernel)"),
    ("InvalidArgumentError: Nan in summary histogram for: hidden/kernel_0 [Op:WriteHistogramSummary]", ERROR,
     Label.NUMERICAL_ERROR, "stefan-jansen/machine-learning-for-trading#252 (Keras' TensorBoard callback after loss: nan)"),
    ("W tensorflow/core/framework/op_kernel.cc:968] Invalid argument: Nan in summary histogram for: layer1/biases/summaries/HistogramSummary",
     ERROR, Label.NUMERICAL_ERROR, "tensorflow/tensorflow#4592 (mnist_with_summaries after 8,550 iterations)"),
    ("ValueError: autodetected range of [nan, nan] is not finite", ERROR, Label.NUMERICAL_ERROR,
     "wandb/wandb#984 (a comment: W&B 0.15.5's histogram of a model trained for several iterations)"),
    # the W&B server's refusal of the run's entity, project or key
    (WANDB_404, ERROR, Label.CONFIG_ERROR, "corpus (functional-diffusion-processes-4-wandb-entity-placeholder-404)"),
    ("wandb: ERROR Error while calling W&B API: permission denied (<Response [403]>)", ERROR, Label.CONFIG_ERROR,
     "corpus (wandb-673-permission-denied-403-wrong-entity-launch-error)"),
    ("wandb: ERROR Error while calling W&B API: project not found (<Response [404]>)", ERROR, Label.CONFIG_ERROR,
     "MarkFzp/act-plus-plus#14 (an entity hard-coded in the training script)"),
    # pynvml's lost GPU
    (PYNVML_LOST, ERROR, Label.HARDWARE_ERROR, "corpus (wandb-1280-stats-thread-nvml-gpu-is-lost-offline-run)"),
    ("pynvml.NVMLError_GpuIsLost: GPU is lost", ERROR, Label.HARDWARE_ERROR,
     "nvidia-ml-py pynvml.py (_extractNVMLErrorsAsClasses: the class of NVML_ERROR_GPU_IS_LOST)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "        raise ValueError(\"The histogram is empty, please file a bug report.\")",  # the source line
    "# if it returns 'The histogram is empty, please file a bug report.' the gradients are bad",  # a comment quoting it
    "    except pynvml.NVMLError_GpuIsLost:",  # a source line that catches the class
    "NVMLError_GpuIsLost = _extractNVMLErrorsAsClasses()",  # not an exception line
    "my project returns (<Response [404]>) in the W&B dashboard, why?",  # prose without the client's record
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_round_reads_only_its_words() -> None:
    """The W&B server's errors it retries (5xx) and the 4xx it is refused for other reasons (a duplicate run id, a bad
    query) are other rules' (benign.wandb_api_server_error, a plain ERROR record); other writers' and NVML callers'
    words are other readers'."""
    for line in ("wandb: ERROR Error while calling W&B API: internal database error (<Response [500]>)",
                 "wandb: ERROR Error while calling W&B API: Error 1062: Duplicate entry '908467-Run 1' for key 'PRIMARY' (<Response [409]>)",
                 "wandb: ERROR Error while calling W&B API: Bad Request (<Response [400]>)",
                 "ValueError: The input has no element.",
                 "error creating nvml.Device 5: nvml: GPU is lost, which is unexpected",
                 "pynvml.NVMLError_NotSupported: Not Supported"):
        assert round40b_form(line) is None, line


def test_histogram_of_nan_ends_a_run_as_numerical(tmp_path: Path) -> None:
    """A validation logger's traceback that ends on the histogram writer's refusal: the run diverged (numerical),
    not a configuration mistake of its ValueError."""
    log = tmp_path / "tb.log"
    log.write_text("Traceback (most recent call last):\n"
                   "  File \"train.py\", line 146, in validate\n"
                   "    logger.log_validation(val_loss, model, y, y_pred, iteration)\n"
                   "  File \"summary.py\", line 338, in make_histogram\n"
                   "    raise ValueError('The histogram is empty, please file a bug report.')\n"
                   + HISTOGRAM_EMPTY + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.NUMERICAL_ERROR


def test_wandb_refusal_at_init_is_configuration(tmp_path: Path) -> None:
    """W&B's refusal of the entity at wandb.init ends the run: configuration (stop), not a crash to restart."""
    log = tmp_path / "wandb.log"
    log.write_text("wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin\n"
                   + WANDB_404 + "\n"
                   "Error executing job with overrides: ['+experiments_maml=exp_mnist']\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_server_errors_the_run_outlives_stay_healthy(tmp_path: Path) -> None:
    """The W&B server's 5xx between progress records is the benign signature's: the run goes on."""
    log = tmp_path / "goes_on.log"
    log.write_text("Epoch 0:   1%|          | 44/4943 [00:10<19:00,  4.29it/s, loss=2.31]\n"
                   "wandb: ERROR Error while calling W&B API: internal database error (<Response [500]>)\n"
                   "Epoch 0:   1%|          | 60/4943 [00:14<19:00,  4.29it/s, loss=2.12]\n"
                   "Epoch 0:   2%|▏         | 83/4943 [00:19<19:00,  4.29it/s, loss=1.98]\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
