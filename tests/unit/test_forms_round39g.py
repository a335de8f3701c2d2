# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part G of the misses of round issue23-heldout-39 (scientific machine learning), each as a rule of
its family, with real lines and the near misses the rule must leave alone: TensorFlow's BFC allocator's failed
allocation and its memory dump, Boltz's count of examples skipped for memory, ColabFold's guess of a memory shortage
in front of the error it caught (read by that error), Hydra's bare report of a config it cannot find, and a loss gone
NaN in DeepXDE's table or TensorFlow's L-BFGS summary. Each line is from the corpus (named by its excerpt) or from a
public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, cause_of
from neuron_watch.diagnosis.heldout.round39g import round39g_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR
METRIC = FormKind.METRIC

BFC_FAILED = "2021-09-14 16:15:13.547135: W tensorflow/core/common_runtime/bfc_allocator.cc:456] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.62GiB (rounded to 2816000000)requested by op load/filter_type_all/concat_5"
BFC_POOL = "2024-07-09 16:43:34.166124: I external/local_tsl/tsl/framework/bfc_allocator.cc:1114] Total bytes in pool: 5773524992 memory_limit_: 5773524992 available bytes: 0 curr_region_allocation_bytes_: 17179869184"
COLABFOLD_DNN = "2024-05-11 16:05:21,977 Could not predict test. Not Enough GPU memory? FAILED_PRECONDITION: DNN library initialization failed. Look at the errors above for more details."
HYDRA_PRIMARY = "Cannot find primary config 'train'. Check that it's in your config search path."

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the BFC allocator's failed allocation and its dump
    (BFC_FAILED, ERROR, Label.OOM, "corpus (deepmd-kit-1149-dp-test-gpu-bfc-ran-out-of-memory)"),
    ("2021-10-15 15:02:17.299178: W external/org_tensorflow/tensorflow/core/common_runtime/bfc_allocator.cc:457] Allocator (xla_gpu_host_bfc) ran out of memory trying to allocate 48.00MiB (rounded to 50331648)requested by op ",
     ERROR, Label.OOM, "corpus (alphafold-197-xla-host-bfc-pinned-host-oom): XLA's host allocator"),
    ("W tensorflow/core/common_runtime/bfc_allocator.cc:275] *_Ran out of memory trying to allocate 39.81MiB.**  See logs for memory state.",
     ERROR, Label.OOM, "corpus (tensorflow-4735-inception-bfc-allocator-oom-mid-training): TF 1.x's words"),
    ("2024-07-09 16:43:34.166120: I external/local_tsl/tsl/framework/bfc_allocator.cc:1112] Sum Total of in-use chunks: 287.95MiB",
     ERROR, Label.OOM, "corpus (deepmd-kit-3960-neighbor-stat-bfc-pool-exhausted): DumpMemoryLog"),
    (BFC_POOL, ERROR, Label.OOM, "corpus (deepmd-kit-3960-neighbor-stat-bfc-pool-exhausted)"),
    # Boltz's writer's count
    ("Number of failed examples: 1", ERROR, Label.OOM,
     "boltz src/boltz/data/write/writer.py on_predict_epoch_end: print(f\"Number of failed examples: {self.failed}\")"),
    ("Predicting DataLoader 0: 100%|##########| 3/3 [02:11<00:00, 43.7s/it]|Number of failed examples: 2", ERROR, Label.OOM,
     "the same print behind a closed bar, as a terminal capture glues it"),
    # ColabFold's guess, read by the error after it
    (COLABFOLD_DNN, ERROR, Label.CONFIG_ERROR, "corpus (localcolabfold-236-dnn-library-initialization-failed-jax-cuda)"),
    ("2022-05-14 07:07:49,181 Could not predict 1_32. Not Enough GPU memory? INTERNAL: CustomCall failed: jaxlib/cuda_prng_kernels.cc:30: operation cudaGetLastError() failed: the provided PTX was compiled with an unsupported toolchain.",
     ERROR, Label.CONFIG_ERROR, "sokrypton/ColabFold#229 (a driver older than the jaxlib's CUDA)"),
    ("2023-04-04 08:00:55,676 Could not predict R1. Not Enough GPU memory? FAILED_PRECONDITION: Couldn't get ptxas version string: INTERNAL: Running ptxas --version returned 32512",
     ERROR, Label.CONFIG_ERROR, "YoshitakaMo/localcolabfold#147 (no ptxas on the node)"),
    ("2022-03-01 10:11:12,345 Could not predict T1083. Not Enough GPU memory? RESOURCE_EXHAUSTED: Out of memory while trying to allocate 3145728 bytes.",
     ERROR, Label.OOM, "YoshitakaMo/localcolabfold#105's RESOURCE_EXHAUSTED on a 2 GB GPU, in ColabFold's record"),
    ("2024-07-10 15:30:21,664 Could not predict DRAMP00766. Not Enough GPU memory? INVALID_ARGUMENT: stream is uninitialized or in an error state",
     ERROR, None, "sokrypton/ColabFold#629 (an error that states no cause)"),
    # Hydra's missing config
    (HYDRA_PRIMARY, ERROR, Label.CONFIG_ERROR, "corpus (schnetpack-gschnet-16-hydra-cannot-find-primary-config)"),
    ("hydra.errors.MissingConfigException: In 'config': Could not find 'wandb/default'", ERROR, Label.CONFIG_ERROR,
     "ArcInstitute/state#140 (a defaults list entry whose option file is not installed)"),
    ("Primary config directory not found.", ERROR, Label.CONFIG_ERROR,
     "hydra/_internal/config_loader_impl.py ensure_main_config_source_available"),
    # a loss gone non-finite
    ("2000      [nan]         [nan]         [nan]", METRIC, Label.NUMERICAL_ERROR, "corpus (deepxde-491-train-loss-nan-single-precision)"),
    ("15002     [8.30e+06, 1.48e+06, nan, nan, 1.94e+07]    [8.21e+06, 1.47e+06, 0.00e+00]    []", METRIC, Label.NUMERICAL_ERROR,
     "corpus (deepxde-338-lbfgs-objective-nan-unnormalized-pdae), its row shortened"),
    ("  Objective function value: nan", METRIC, Label.NUMERICAL_ERROR, "corpus (deepxde-338-lbfgs-objective-nan-unnormalized-pdae)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the allocator's warning of a caller that retries (corpus: af-unmasked-6-multimer-4539-residues-gpu-out-of-memory)
    "2024-03-15 22:54:07.499744: W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 9.84GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.",
    "Total bytes in pool: see the allocator's documentation",  # prose, not the dump's record
    "Number of failed examples: 0",  # a prediction that lost nothing
    "| WARNING: ran out of memory, skipping batch",  # fairseq's and DiffDock's training skips and goes on
    "Not Enough GPU memory? Try a smaller --max-msa or a bigger GPU.",  # advice, no caught error after ColabFold's words
    "  # Cannot find primary config files? see the docs",  # prose about Hydra
    "1000      [5.47e+03]    [6.44e+03]    [1.00e+00]",  # a finite row of DeepXDE's table
    "0         [1.23e-01, 4.56e-02]    [1.20e-01, 4.50e-02]    [nan]",  # a metric of nan (no reference data), the losses finite
    "  Objective function value: 0.000123",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_colabfolds_question_is_not_a_statement_of_memory() -> None:
    """ColabFold asks "Not Enough GPU memory?" in front of every error it caught: the question states no cause
    (round 14 part B's reader of a refusal for want of memory reads the sentence, not the question)."""
    line = "Could not predict X. Not Enough GPU memory? INVALID_ARGUMENT: stream is uninitialized or in an error state"
    assert cause_of(line) is None
    assert cause_of("RuntimeError: Not enough GPU memory to load the model") is not None
    assert round39g_form("Not Enough GPU memory?") is None


def test_a_colabfold_run_whose_queries_all_fail_on_the_cuda_stack_is_configuration(tmp_path: Path) -> None:
    """Each query fails on the same error and the run prints "Done": configuration (stop), not a healthy run."""
    log = tmp_path / "colabfold.log"
    log.write_text("2024-05-11 16:05:12,001 Running on GPU\n2024-05-11 16:05:13,583 Query 1/1: test (length 273)\n"
                   + COLABFOLD_DNN + "\n2024-05-11 16:05:21,977 Done\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_an_excerpt_cut_inside_the_bfc_dump_is_out_of_memory(tmp_path: Path) -> None:
    log = tmp_path / "deepmd.log"
    log.write_text(BFC_POOL + "\n2024-07-09 16:43:34.166131: I external/local_tsl/tsl/framework/bfc_allocator.cc:1119] Stats:\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_hydras_missing_config_is_configuration(tmp_path: Path) -> None:
    log = tmp_path / "gschnet.log"
    log.write_text(HYDRA_PRIMARY + "\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
