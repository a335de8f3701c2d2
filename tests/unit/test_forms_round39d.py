# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-39 (healthy runs that look frightening, part 6), each
as a rule of its family, with real lines and the near misses the rule must leave alone: Triton's autotuner
benchmarking a kernel's configurations (a compile running) and its report of a key it has tuned (the compile done).
Each line is from the corpus (named by its excerpt) or printed in the words of the program's source (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round39d import round39d_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

RUNNING = FormKind.COMPILE_RUNNING
DONE = FormKind.COMPILE_DONE

AUTOTUNING = "Autotuning kernel l2norm_bwd_kernel with config BT: 64, num_warps: 16, num_ctas: 1, num_stages: 3, maxnreg: None"
TUNED = "Triton autotuning for function l2norm_bwd_kernel,"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the autotuner benchmarking one configuration
    (AUTOTUNING, RUNNING, None, "corpus (ms-swift-10008-grpo-triton-autotuning-l2norm-bwd-every-step)"),
    ("Autotuning kernel _fwd_kernel with config BLOCK_M: 128, BLOCK_N: 64, num_warps: 8, num_ctas: 1, num_stages: 2, maxnreg: None",
     RUNNING, None, "triton/runtime/autotuner.py _bench: print(f\"Autotuning kernel {self.base_fn.__name__} with config {config}\")"),
    ("[rank3]: Autotuning kernel chunk_gated_delta_rule_fwd_kernel_h with config BV: 32, num_warps: 4, num_ctas: 1, num_stages: 2, maxnreg: None",
     RUNNING, None, "the same print under torchrun's rank tag"),
    ("Autotuning kernel matmul_kernel with config num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None",
     RUNNING, None, "a Config with no kwargs prints its compile options first (Config.__str__)"),
    # the autotuner's report of a key it has tuned
    (TUNED, DONE, None, "corpus (ms-swift-10008-grpo-triton-autotuning-l2norm-bwd-every-step)"),
    ("Triton autotuning for function _attn_fwd,", DONE, None,
     "triton/runtime/autotuner.py run: print(f\"Triton autotuning for function {self.base_fn.__name__},\\nwith key as ...\")"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "Autotuning kernel configs takes forever on the first step, is that expected?",  # prose: no `with config name: value`
    "finished after 11.16s,",  # the report's third line: generic words
    "best config selected: BT: 8, num_warps: 2, num_ctas: 1, num_stages: 3, maxnreg: None;",  # the report's last line
    "[autotune] correctness: 3/8 configs passed (success rate 37.5%)",  # another notice of the autotuner
    "Triton autotuning for function l2norm_bwd_kernel is slow on every step",  # prose naming the report
    "    Autotuning kernel with config: see TRITON_PRINT_AUTOTUNING=1 in the docs",  # a kernel's name is missing
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_the_rounds_forms_state_no_cause() -> None:
    for line, _, _, _ in FORMS:
        form = round39d_form(line)
        assert form is not None and form.label is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def _verdict(tmp_path: Path, text: str) -> Label:
    log = tmp_path / "autotune.log"
    log.write_text(text)
    return diagnose_paths([str(log)], now=0.0).verdict.label


def test_a_log_ending_while_the_autotuner_benchmarks_is_compiling(tmp_path: Path) -> None:
    """The autotuner's report of one key, then the benchmark of the next key's configurations to the end of the log:
    a compile still running (round 39's ms-swift-10008, read as healthy before)."""
    assert _verdict(tmp_path, f"{TUNED}\nwith key as (128, 4, 'torch.bfloat16'),\nfinished after 11.16s,\n"
                              "best config selected: BT: 8, num_warps: 2, num_ctas: 1, num_stages: 3, maxnreg: None;\n"
                              f"{AUTOTUNING}\n{AUTOTUNING.replace('BT: 64', 'BT: 16')}\n") is Label.COMPILING


def test_a_log_ending_on_the_autotuners_report_is_healthy(tmp_path: Path) -> None:
    """Benchmarks, then the report of the key they tuned: the tuning is over, nothing is running."""
    assert _verdict(tmp_path, f"{AUTOTUNING}\n{TUNED}\nwith key as (128, 4, 'torch.bfloat16'),\nfinished after 11.16s,\n"
                              "best config selected: BT: 8, num_warps: 2, num_ctas: 1, num_stages: 3, maxnreg: None;\n"
                              ) is Label.HEALTHY


def test_progress_after_the_benchmarks_is_healthy(tmp_path: Path) -> None:
    """The run's steps after the benchmarks: the compile ended, the run trains."""
    assert _verdict(tmp_path, f"{AUTOTUNING}\n{{'loss': 0.4312, 'grad_norm': 1.25, 'learning_rate': 1e-06, 'epoch': 0.01}}\n"
                              "{'loss': 0.4107, 'grad_norm': 1.19, 'learning_rate': 2e-06, 'epoch': 0.02}\n") is Label.HEALTHY
