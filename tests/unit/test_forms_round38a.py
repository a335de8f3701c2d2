# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part A of the misses of round issue23-heldout-38 (forecasting, tabular and recommender training),
each as a rule of its family, with real lines and the near misses the rule must leave alone: Hydra's record of a job
that raised and its instantiate's failures, the Hugging Face Hub's 404 words, LightGBM's command line stopping on an
exception and Boost.Compute's OpenCL errors, CatBoost's refusal of an option for its task type, XGBoost's two
processes on one GPU, GluonTS's NaN in the first epoch. Each line is from the corpus (named by its excerpt) or from a
public source (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH

HYDRA_JOB = "Error executing job with overrides: ['run_name=first_run', 'model=moirai_1.0_R_small', 'data=etth1', 'val_data=etth1']"
HYDRA_CALL = "Error in call to target 'huggingface_hub.hub_mixin.ModelHubMixin.from_pretrained':"
MISSING_ARGS = "TypeError(\"MoiraiModule.__init__() missing 7 required positional arguments: 'distr_output', 'd_model', 'num_layers', 'patch_sizes', 'max_seq_len', 'attn_dropout_p', and 'dropout_p'\")"
ENTRY_NOT_FOUND = "Entry Not Found for url: https://huggingface.co/Salesforce/moirai-1.0-R-small/resolve/main/model.ckpt.')"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Hydra's record of a job that raised, and hydra.utils.instantiate's failures
    (HYDRA_JOB, CRASH, None, "corpus (uni2ts-91-moirai-module-init-missing-args)"),
    (HYDRA_CALL, CRASH, None, "corpus (uni2ts-91-moirai-module-init-missing-args)"),
    ("Error in call to target 'huggingface_hub.file_download.hf_hub_download':", CRASH, None,
     "corpus (uni2ts-206-moirai-checkpoint-entry-not-found)"),
    ("Error locating target 'models.my_model.Net', set env var HYDRA_FULL_ERROR=1 to see chained exception.", ERROR,
     Label.CONFIG_ERROR, "hydra/_internal/instantiate/_instantiate2.py _resolve_target's InstantiationException message"),
    # the exception under it, as its repr
    (MISSING_ARGS, ERROR, Label.CONFIG_ERROR, "corpus (uni2ts-91-moirai-module-init-missing-args)"),
    ("EntryNotFoundError('404 Client Error. (Request ID: Root=1-67ecdc3c-383436ba072cbfb134a04b9d;ad7ba49f-6f32-4595-be25-bd95b597f2ee)",
     ERROR, Label.CONFIG_ERROR, "corpus (uni2ts-206-moirai-checkpoint-entry-not-found)"),
    ("TypeError(\"Trainer.__init__() got an unexpected keyword argument 'gpus'\")", ERROR, Label.CONFIG_ERROR,
     "Hydra's repr of CPython's TypeError for a keyword a Lightning 2.x Trainer no longer takes"),
    ("RuntimeError('CUDA out of memory. Tried to allocate 20.00 MiB')", ERROR, Label.OOM,
     "Hydra's repr of torch's OOM raised inside a configured constructor"),
    # the Hub's 404
    (ENTRY_NOT_FOUND, ERROR, Label.CONFIG_ERROR, "corpus (uni2ts-206-moirai-checkpoint-entry-not-found)"),
    ("huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url: https://huggingface.co/api/models/org/private-model.",
     ERROR, Label.CONFIG_ERROR, "huggingface_hub/utils/_http.py hf_raise_for_status's RepositoryNotFound message, as one line"),
    # LightGBM's command line and Boost.Compute's exceptions
    ("Met Exceptions:", CRASH, None, "corpus (LightGBM-586-no-opencl-device-found, LightGBM-1410-unknown-opencl-error-221)"),
    ("No OpenCL device found", ERROR, Label.CONFIG_ERROR, "corpus (LightGBM-586-no-opencl-device-found)"),
    ("lightgbm.basic.LightGBMError: No OpenCL device found", ERROR, Label.CONFIG_ERROR,
     "a public LightGBM CI log (python package, clang build without an OpenCL device)"),
    ("Unknown OpenCL Error (221)", ERROR, None, "corpus (LightGBM-1410-unknown-opencl-error-221)"),
    ("[LightGBM] [Fatal] Unknown OpenCL Error (-9999)", ERROR, None,
     "boost/compute/exception/opencl_error.hpp to_string's default case (NVIDIA's code of a kernel's fault)"),
    ("Memory Object Allocation Failure", ERROR, Label.OOM, "boost/compute/exception/opencl_error.hpp (CL_MEM_OBJECT_ALLOCATION_FAILURE)"),
    ("Build Program Failure", ERROR, Label.COMPILE_ERROR, "boost/compute/exception/opencl_error.hpp (CL_BUILD_PROGRAM_FAILURE)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "[LightGBM] [Info] Compiling OpenCL Kernel with 64 bins...",  # corpus (LightGBM-5536-gpu-programs-have-been-built): a healthy start
    "[LightGBM] [Info] Using GPU Device: NVIDIA GeForce GTX 1050, Vendor: NVIDIA Corporation",  # the same run
    "    raise TypeError(\"missing 1 required positional argument\")",  # a traceback's source line, not the exception
    "Caught TypeError('bad operand') while probing, falling back to defaults",  # a caught exception quoted mid-line
    "INFO: retrying after Error in call to target service",  # Hydra's words inside another message
    "Met Exceptions: 0 (all shards ok)",  # a header with more after it is not LightGBM's
    "See the docs: the 'Device Not Found' section explains OpenCL setup",  # prose that names a Boost.Compute word
    "WARNING:gluonts.trainer:Batch [2] of Epoch[0] gave NaN loss and it will be ignored",  # a NaN batch GluonTS skipped
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines whose cause these forms state (an error line already: the cause comes from this round's reader)
CAUSES: list[tuple[str, Label]] = [
    # corpus (catboost-276-custom-loss-unimplemented-on-gpu): a check of libs/options
    ("_catboost.CatboostError: catboost/libs/options/json_helper.h:194: Error: change of option metrics is unimplemented for task type GPU and was not default in previous run", Label.CONFIG_ERROR),
    # corpus (catboost-375-cv-except-learn-on-cpu-task-type): a refusal naming the task type
    ("CatboostError: st/catboost/libs/algo/learn_context.h:123: Error: except learn on CPU task type, got GPU", Label.CONFIG_ERROR),
    # corpus (xgboost-6344-dask-workers-share-one-gpu)
    ("Exception in gpu_hist: [12:40:37] /root/repo/xgboost/src/common/device_helpers.cu:64: Check failed: n_uniques == world (1 vs. 10) : Multiple processes within communication group running on same CUDA device is not supported", Label.CONFIG_ERROR),
    # corpus (gluonts-519-deepar-nan-in-first-epoch)
    ("gluonts.core.exception.GluonTSUserError: Got NaN in first epoch. Try reducing initial learning rate.", Label.NUMERICAL_ERROR),
    # huggingface_hub's exception classes of the Hub's 404s
    ("huggingface_hub.errors.EntryNotFoundError: 404 Client Error. (Request ID: Root=1-6789)", Label.CONFIG_ERROR),
]

#: error lines of the same programs whose form states no cause
NO_CAUSE = [
    "_catboost.CatboostError: std::bad_cast",  # catboost#300: no location, no option
    "catboost.CatBoostError: catboost/cuda/cuda_lib/cuda_manager.cpp:201: Condition violated: `State == nullptr'",  # a CUDA manager's state, not an option
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63


def test_hydras_records_give_way_to_the_exception_they_report(tmp_path: Path) -> None:
    """Hydra's job record and its instantiate header are generic failures (the program exits 1 after them); the
    exception's repr under them states the cause: a configured target that does not take its arguments."""
    log = tmp_path / "hydra.log"
    log.write_text("\n".join([HYDRA_JOB, HYDRA_CALL, MISSING_ARGS, "full_key: model.module"]) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_lightgbms_header_gives_way_to_the_message_it_prints(tmp_path: Path) -> None:
    """"Met Exceptions:" then Boost.Compute's message: the device that is not there decides (configuration); an
    OpenCL status of no stated cause leaves a failure of unknown cause, not a healthy run."""
    log = tmp_path / "lightgbm.log"
    head = "[LightGBM] [Info] This is the GPU trainer!!\n[LightGBM] [Info] Total Bins 6143\n"
    log.write_text(head + "Met Exceptions:\nNo OpenCL device found\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
    log.write_text(head + "Met Exceptions:\nUnknown OpenCL Error (221)\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OTHER_CRASH


def test_a_repr_followed_by_progress_is_withdrawn(tmp_path: Path) -> None:
    """An exception's repr a program prints and goes on from (a caught error) does not end a healthy run."""
    log = tmp_path / "caught.log"
    log.write_text("ValueError('bad row 17, skipped')\n" + "\n".join(
        f"Epoch 0: {i}/100 [00:0{i}<00:10, 9.8it/s, loss=0.{50 - i}]" for i in range(1, 6)) + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
