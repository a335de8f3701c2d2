# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-35 (never kill a healthy job, part 3), each as a rule
of its family, with real lines and the near misses the rule must leave alone: tf.keras's stop for want of data, a
trainer's count of zero steps (or its data loader's zero length), and torch_xla's records of a graph compile. Each line
is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
ERROR = FormKind.ERROR
COMPILE = FormKind.COMPILE_RUNNING
COMPILED = FormKind.COMPILE_DONE

XLA_COMPILING = "2021-01-27 17:01:35.381497: I   23985 torch_xla/csrc/tensor.cpp:1528] Compiling IR graph hash 9e33222e0aba8a7ff802d198d3d82ba5 on device TPU:2 ..."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # tf.keras 2.x stopping fit for want of data (with the count of batches it asked for)
    ("WARNING:tensorflow:Your input ran out of data; interrupting training. Make sure that your dataset or generator can generate at least `steps_per_epoch * epochs` batches (in this case, 2500 batches). You may need to use the repeat() function when building your dataset.",
     CRASH, Label.CONFIG_ERROR, "corpus (retinanet-tutorial-17-ran-out-of-data-training-stops)"),
    ("  7/562 [..............................] - ETA: 4s - loss: 0.8328 - accuracy: 0.6700 - f1: 0.6491WARNING:tensorflow:Your input ran out of data; interrupting training. Make sure that your dataset or generator can generate at least `steps_per_epoch * epochs` batches (in this case, 28100 batches). You may need to use the repeat() function when building your dataset.",
     CRASH, Label.CONFIG_ERROR, "corpus (tf-dl-course-70-keras-input-ran-out-of-data): glued to the progress bar's redraw"),
    ("WARNING:tensorflow:Your input ran out of data; interrupting training. Make sure that your dataset or generator can generate at least `steps_per_epoch * epochs` batches (in this case, 9810.0 batches). You may need to use the repeat() function when building your dataset.",
     CRASH, Label.CONFIG_ERROR, "vanvalenlab/deepcell-tf#519 (a float count)"),
    # a trainer's count of the steps it will train for, or its loader's length, at zero
    ("00:34:11-982811 INFO     Total steps: 0", ERROR, Label.CONFIG_ERROR, "corpus (kohya-ss-2353-total-steps-zero-lora)"),
    ("00:34:11-994870 INFO     max_train_steps (0 / 2 / 1 * 40 * 1) = 0", ERROR, Label.CONFIG_ERROR,
     "corpus (kohya-ss-2353-total-steps-zero-lora)"),
    ("len(training_loader)=0", ERROR, Label.CONFIG_ERROR, "corpus (fastspeech-78-training-loader-length-zero)"),
    ("  Total optimization steps = 0", ERROR, Label.CONFIG_ERROR,
     "transformers trainer.py _inner_training_loop's start banner ('  Total optimization steps = {max_steps:,}'), rendered for an empty dataset"),
    # torch_xla's compile records (verbose tensor log): the start, the end
    (XLA_COMPILING, COMPILE, None, "corpus (torch-xla-2757-beam-search-recompiling-eight-tpu-cores)"),
    ("2022-03-18 00:00:17.025105: I torch_xla/csrc/tensor.cpp:1556] Compiling IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 ...",
     COMPILE, None, "pytorch/xla#3424"),
    ("2022-03-18 00:01:19.649882: I torch_xla/csrc/tensor.cpp:1561] Compiling IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 done!",
     COMPILED, None, "pytorch/xla#3424"),
    ("2019-11-23 19:24:12.104844: I torch_xla/csrc/tensor.cpp:1298] Compiling IR graph hash 8978071329308415931 on device TPU:0 done!",
     COMPILED, None, "pytorch/xla#1400 (a decimal hash, the older tensor.cpp)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # Keras 3's warning of the same words: printed after the first epoch of a dataset of unknown length while
    # training goes on (no count of batches)
    "/usr/lib/python3.10/contextlib.py:153: UserWarning: Your input ran out of data; interrupting training. Make sure that your dataset or generator can generate at least `steps_per_epoch * epochs` batches. You may need to use the `.repeat()` function when building your dataset.",  # a public repository's Keras 3 run that trained on
    # counts that are not zero, and zero counts of other things
    "10:24:20-653961 INFO     Total steps: 1150",  # bmaltais/kohya_ss#2862
    "10:24:20-656962 INFO     max_train_steps (1150 / 1 / 1 * 10 * 1) = 11500",  # bmaltais/kohya_ss#2862
    "07:35:43-556136 INFO     lr_warmup_steps = 0",  # bmaltais/kohya_ss#2396
    "00:34:11-997880 INFO     stop_text_encoder_training = 0",  # corpus (kohya-ss-2353-total-steps-zero-lora)
    "  Total optimization steps = 30000",  # bghira/SimpleTuner#855
    "Total steps: 0.5",  # a fraction is another number
    # torch_xla's other records of the same graph
    "2022-03-18 00:01:19.709203: I torch_xla/csrc/tensor.cpp:1298] Executing IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 ...",  # pytorch/xla#3424
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_xla_log_ending_inside_a_compile_is_compiling(tmp_path: Path) -> None:
    """A torch_xla log whose last compile record has no "done!" after it ends inside the compile: compiling (wait),
    not healthy; the same log with the compile's end and the graph's execution after it is not compiling."""
    open_compile = tmp_path / "open.log"
    open_compile.write_text(
        "2022-03-18 00:00:15.964104: I torch_xla/csrc/tensor.cpp:1168] Tensors graph hash f62b84310e5fc848830d4f528e45f96f on device TPU:0\n"
        "2022-03-18 00:00:17.025105: I torch_xla/csrc/tensor.cpp:1556] Compiling IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 ...\n")
    assert diagnose_paths([str(open_compile)], now=0.0).verdict.label is Label.COMPILING
    closed = tmp_path / "closed.log"
    closed.write_text(
        "2022-03-18 00:00:17.025105: I torch_xla/csrc/tensor.cpp:1556] Compiling IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 ...\n"
        "2022-03-18 00:01:19.649882: I torch_xla/csrc/tensor.cpp:1561] Compiling IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 done!\n"
        "2022-03-18 00:01:20.578819: I torch_xla/csrc/tensor.cpp:1303] Executing IR graph hash 7542ba6d660a0894aa66b5408a3a2eef on device TPU:0 done!\n")
    assert diagnose_paths([str(closed)], now=0.0).verdict.label is not Label.COMPILING


def test_zero_step_count_is_configuration_a_real_count_is_healthy(tmp_path: Path) -> None:
    """kohya_ss's start with no image counted is a configuration error to stop for; the same lines with the counts
    of a dataset it found are a healthy start."""
    empty = tmp_path / "empty.log"
    empty.write_text("00:34:11-982811 INFO     Total steps: 0\n00:34:11-985926 INFO     Train batch size: 2\n"
                     "00:34:11-994870 INFO     max_train_steps (0 / 2 / 1 * 40 * 1) = 0\n"
                     "00:34:12-000886 INFO     lr_warmup_steps = 0\n")
    assert diagnose_paths([str(empty)], now=0.0).verdict.label is Label.CONFIG_ERROR
    found = tmp_path / "found.log"
    found.write_text("10:24:20-653961 INFO     Total steps: 1150\n10:24:20-654963 INFO     Train batch size: 1\n"
                     "10:24:20-656962 INFO     max_train_steps (1150 / 1 / 1 * 10 * 1) = 11500\n"
                     "10:24:20-658961 INFO     lr_warmup_steps = 0\n")
    assert diagnose_paths([str(found)], now=0.0).verdict.label is Label.HEALTHY
