# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part E of the misses of round issue23-heldout-37 (scientific foundation model training), each as a
rule of its family, with real lines and the near misses the rule must leave alone: a trainer's words for a NaN it found
in its loss, and the exceptions torch's graph tracer raises on shapes that depend on the data. Each line is from the
corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round37e import round37e_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

FAIRCHEM_NAN = "WARNING:root:Found nans while computing loss"
GUARD = "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode: Could not extract specialized integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: u0)"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a trainer's "found NaN ... loss"
    (FAIRCHEM_NAN, METRIC, Label.NUMERICAL_ERROR, "corpus (fairchem-1568-found-nans-computing-loss)"),
    ("Found nans while computing loss", METRIC, Label.NUMERICAL_ERROR,
     "fairchem/OCP's losses (core/modules/loss.py: logging.warning or warnings.warn before torch.nan_to_num), as its forks print it"),
    ("Found nan in loss! epoch 3, step 1200, dataset water, skip!", METRIC, Label.NUMERICAL_ERROR,
     "a public materials trainer's logger.warning(f\"Found nan in loss! epoch {self.epoch}, step {step}, dataset {ids}, skip!\")"),
    ("Found NAN in loss, stop training.", METRIC, Label.NUMERICAL_ERROR, "a public repository's trainer (print before return)"),
    ("[rank0]: RuntimeError: found nan in loss", METRIC, Label.NUMERICAL_ERROR,
     "a public repository's raise RuntimeError('found nan in loss') from e, under torchrun's rank tag"),
    # torch's tracer on shapes that depend on the data
    (GUARD, ERROR, Label.COMPILE_ERROR, "corpus (nequip-les-8-compiled-training-guard-data-dependent)"),
    ("GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)",
     ERROR, Label.COMPILE_ERROR, "a public repository's notes of torch.export's error on `if x.sum() > 0:`"),
    ("torch._subclasses.fake_tensor.DataDependentOutputException: aten._local_scalar_dense.default", ERROR,
     Label.COMPILE_ERROR, "a public repository's traceback of a compiled model calling .item()"),
    ("[rank1]: torch.fx.experimental.symbolic_shapes.ConstraintViolationError: Constraints violated (batch)! For more information, run with TORCH_LOGS=\"+dynamic\".",
     ERROR, Label.COMPILE_ERROR, "torch/fx/experimental/symbolic_shapes.py ConstraintViolationError's message, under torchrun's rank tag"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "Warning: NaN or Inf found in input tensor.",  # corpus (wenet-1472-warning-nan-or-inf-in-input-tensor): a healthy run
    "INFO: no NaN found in loss after 100 steps",  # a check that found none
    "Found 12 nan values in column 'energy', dropping rows",  # a data cleaner: no loss
    "    raise DataDependentOutputException(func)",  # the traceback's source line, not its exception
    "W0101 12:00:00.000000 123 torch/_dynamo/symbolic_convert.py:400] Graph break: GuardOnDataDependentSymNode in forward",  # a graph break: Dynamo runs that part eagerly
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_a_caught_tracer_exception_is_not_this_form() -> None:
    """A program that caught the tracer's exception and says so at the head of its own message (a public repository's
    precompilation script, which then runs the model uncompiled) is not a traceback's end: the reader of exception
    lines behind a prefix reads it (an error of no stated cause), not this form."""
    assert round37e_form("✗ Failed to compile ImageEncoder_SigLIP: DataDependentOutputException: aten._local_scalar_dense.default") is None


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 61


def test_a_log_ending_on_found_nan_warnings_is_a_numerical_failure(tmp_path: Path) -> None:
    """fairchem's warnings at the first step end the log: numerical (stop), not a healthy run; the same warning
    followed by the run's progress (a NaN the trainer zeroed and went on from) is cleared by it."""
    log = tmp_path / "fairchem.log"
    log.write_text("Train Epoch 0:   0%|▏          | 1/528 [00:15<2:15:46, 15.46s/it]\n" + FAIRCHEM_NAN + "\n" + FAIRCHEM_NAN + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.NUMERICAL_ERROR


def test_a_traceback_cut_on_the_tracers_exception_is_a_compile_error(tmp_path: Path) -> None:
    """The exception ends a traceback pasted without its header: a compile error (stop), not a healthy run."""
    log = tmp_path / "compile.log"
    log.write_text("    raise self._make_data_dependent_error(\n" + GUARD + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.COMPILE_ERROR


def test_the_tracers_exception_under_a_host_name_pdsh_leaves() -> None:
    """pdsh's "host: " is removed when the host name has a dash or a dot (logtext.split_process); a name like
    "node005" stays in front of the line, and the exception is still the line's head after it."""
    form = round37e_form("node005: " + GUARD)
    assert form is not None and form.label is Label.COMPILE_ERROR
