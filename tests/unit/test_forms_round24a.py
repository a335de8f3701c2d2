# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half A of the misses of round issue23-heldout-24, each as a rule of its family, with real lines and
the near misses the rule must leave alone: aws-ofi-nccl's test logger, oneCCL's records of a libfabric provider it
could not get, Open MPI's process that stopped before MPI was initialised, Keras's TerminateOnNaN, Paddle's AmpScaler
lowering its loss scale to nothing, and an IPython traceback of a FloatingPointError. Each line is from the corpus
(named by its excerpt), from a public thread (named), or is the format the program's source prints (the source is
named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR, CRASH, METRIC = FormKind.ERROR, FormKind.CRASH, FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # aws-ofi-nccl's functional-test logger: a WARN is an error line; its words state the cause (errorclass)
    ("10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider", ERROR,
     None, "corpus (aws-ofi-nccl-67-p4d-couldnt-find-optimal-provider-pdsh-prefix, under pdsh's host prefix)"),
    ("10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2", ERROR, None,
     "corpus (aws-ofi-nccl-67: OFINCCLCHECK's report, tests/functional/test-common.h)"),
    ("WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
     ERROR, None, "corpus (aws-ofi-nccl-22-open-av-old-format)"),
    # Open MPI: a process that stopped before MPI was initialised
    ("[server13:13279] Local abort before MPI_INIT completed completed successfully, but am not able to aggregate error messages, and not able to guarantee that all other processes were killed!",
     CRASH, Label.CONFIG_ERROR, "corpus (ompi-6533-opal-not-initialized-pmix3x-client-mpi-init-thread)"),
    ("Local abort before MPI_INIT completed completed successfully, but am not able to aggregate error messages, and not able to guarantee that all other processes were killed!",
     CRASH, Label.CONFIG_ERROR, "corpus (mpi4py-141-srun-ompi-without-slurm-pmi)"),
    ("[MacBook-Pro-de-Bruno.local:1856] Local abort before MPI_INIT completed completed successfully,", CRASH,
     Label.CONFIG_ERROR, "corpus (fds-6346-orte-system-required-executable-not-found-help-file-missing, cut)"),
    ("*** An error occurred in MPI_Init_thread", CRASH, Label.CONFIG_ERROR,
     "corpus (fds-6346; mpi4py-141, shapepipe-744: ompi/errhandler/errhandler_predefined.c)"),
    ("[eda6721d8979:32018] [[INVALID],INVALID] ORTE_ERROR_LOG: Not found in file ess_hnp_module.c at line 170", ERROR,
     Label.CONFIG_ERROR, "corpus (caffe-yjxiong-218-mpirun-docker-orte-plm-base-select-failed)"),
    ("[zcluster4:22139] [[INVALID],INVALID] ORTE_ERROR_LOG: Unable to start a daemon on the local node in file ess_singleton_module.c at line 582",
     ERROR, Label.CONFIG_ERROR, "corpus (deepmimic-85-mpi-plm-rsh-agent-not-found)"),
    # Keras's TerminateOnNaN
    ("Batch 6: Invalid loss, terminating training", METRIC, None,
     "corpus (keras-6747-fit-generator-terminateonnan-invalid-loss)"),
    ("   1/1500 [..............................] - ETA: 0s - loss: 2.2759 - accuracy: 0.2188Batch 1: Invalid loss, terminating training",
     METRIC, None, "corpus (keras-tuner-442-terminateonnan-loss-nan-bar: the bar's loss is still finite)"),
    # Paddle's AmpScaler, the scale it decreases to below fp16's smallest subnormal
    ("Found inf or nan, current scale is: 2.842170943040401e-14, decrease to: 2.842170943040401e-14*0.5", METRIC,
     None, "corpus (paddleocr-6848-amp-loss-scale-collapse-1e-14)"),
    ("Found inf or nan, current scale is: 5.960464477539063e-08, decrease to: 5.960464477539063e-08*0.5", METRIC,
     None, "PaddlePaddle/PaddleClas#2457 (solved by turning AMP off)"),
    ("Found inf or nan,current scale is: 0.0,decrease to: 0.0*0.5", METRIC, None,
     "PaddlePaddle/PaddleSeg#1412 (as the user pasted it, without the spaces)"),
    # the head of an IPython traceback of a FloatingPointError
    ("FloatingPointError                        Traceback (most recent call last)", METRIC, None,
     "corpus (mujoco-1484-mjx-debug-nans-check-special-floatingpointerror; jax-9092-debug-nans-xla-call-ipython)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # the same logger's INFO records
    "INFO: Function: ofi_init Line: 686: NET/OFI Selected Provider is efa",  # corpus (aws-ofi-nccl-22)
    "10.3.35.83: INFO: Function: ofi_init Line: 1102: NET/OFI Setting RDMAV_FORK_SAFE environment variable to 1.",  # corpus (aws-ofi-nccl-67)
    # dynamic loss scaling at work: a scale fp16 can use
    "Found inf or nan, current scale is: 32768.0, decrease to: 32768.0*0.5",  # PaddlePaddle/Paddle#37021
    "Found inf or nan, current scale is: 0.001953125, decrease to: 0.001953125*0.5",  # corpus (paddleocr-6848, earlier)
    # oneCCL's notice of the transport it chose
    "2023:11:28-16:35:45:(35980) |CCL_WARN| did not find MPI-launcher specific variables, switch to ATL/OFI, to force enable ATL/MPI set CCL_ATL_TRANSPORT=mpi",  # intel/torch-ccl#54
    # (the head of an IPython traceback of another class is a crash of unknown cause since round 33 part C, whose
    # exception line, when the paste holds it, states the cause: tests/unit/test_forms_round33c.py)
    "    print(\"Batch %d: Invalid loss\" % batch)",  # a print in source, no loss check
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: (line, the cause its form states): error lines
CAUSES = [
    ("2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi_helper.cpp:867 atl_ofi_get_prov_list: fi_getinfo error: ret -61, providers 0",
     Label.CONFIG_ERROR),  # corpus (ipex-llm-11877-oneccl-atl-ofi-shm-provider-no-shm-size)
    ("(RayWorkerVllm pid=11607) 2024:08:21-10:41:21:(11607) |CCL_ERROR| atl_ofi_helper.cpp:907 atl_ofi_get_prov_list: can't create providers for name shm",
     Label.CONFIG_ERROR),  # corpus (ipex-llm-11881-oneccl-atl-init-failed-ray-worker-carets)
    ("2025:05:23-19:04:20:(168955) |CCL_ERROR| atl_ofi.cpp:237 init: can't find suitable provider",
     Label.CONFIG_ERROR),  # intel/intel-extension-for-pytorch#810 (psm3 on PVC)
    ("2025:05:23-19:04:20:(168955) |CCL_ERROR| atl_ofi_helper.cpp:1635 atl_ofi_open_nw_provs: can not open network providers",
     Label.CONFIG_ERROR),  # intel/intel-extension-for-pytorch#810
    ("[server13:13286] Local abort before MPI_INIT completed completed successfully, but am not able to aggregate error messages, and not able to guarantee that all other processes were killed!",
     Label.CONFIG_ERROR),  # the format of ompi/runtime/ompi_mpi_abort.c, filled in
]
NO_CAUSE = [
    # oneCCL's worker thread refused (EINVAL from pthread_create): no provider is in question
    "2023:11:28-16:35:45:(35980) |CCL_ERROR| base_thread.cpp:36 start: error while creating worker thread #0 pthread_create returns 22",  # intel/torch-ccl#54
    # a runtime error record of a process that has a name: not start-up (round 40 part F reads the error string "Data
    # unpack would read past end of buffer" as mismatched Open MPI builds, so this near miss names another string)
    "[node01:04242] [[51234,0],0] ORTE_ERROR_LOG: Not found in file ess_hnp_module.c at line 170",
    # the fatal handler in a call after initialisation
    "*** An error occurred in MPI_Allreduce",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize("line", [
    "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider",  # corpus (aws-ofi-nccl-67)
    "ip-10-0-0-1:1929:1937 [0] find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find any optimal provider",  # the plugin under NCCL's logger
])
def test_the_plugins_words_for_no_provider_are_configuration_in_either_logger(line: str) -> None:
    reading = read_error(line)
    assert reading is not None and reading.label is Label.CONFIG_ERROR


def test_a_warn_of_the_test_logger_states_no_cause_of_its_own() -> None:
    """OFINCCLCHECK names the failed call's ncclResult, not why: the cause is in the plugin's lines before it."""
    assert cause_of("10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2") is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/aws-ofi-nccl-67-p4d-couldnt-find-optimal-provider-pdsh-prefix.log", Label.CONFIG_ERROR, Action.STOP),
    ("comm_error/aws-ofi-nccl-22-open-av-old-format.log", Label.COMM_ERROR, Action.RESTART),
    ("config_error/ipex-llm-11877-oneccl-atl-ofi-shm-provider-no-shm-size.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/caffe-yjxiong-218-mpirun-docker-orte-plm-base-select-failed.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/fds-6346-orte-system-required-executable-not-found-help-file-missing.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/ompi-6533-opal-not-initialized-pmix3x-client-mpi-init-thread.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/deepmimic-85-mpi-plm-rsh-agent-not-found.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/mpi4py-141-srun-ompi-without-slurm-pmi.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/shapepipe-744-opal-unreachable-ext3x-srun-without-pmi.log", Label.CONFIG_ERROR, Action.STOP),
    ("numerical_error/keras-6747-fit-generator-terminateonnan-invalid-loss.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/hey-jetson-7-keras-terminateonnan-invalid-loss-batch-1882.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/paddleocr-6848-amp-loss-scale-collapse-1e-14.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/mujoco-1484-mjx-debug-nans-check-special-floatingpointerror.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("numerical_error/jax-9092-debug-nans-xla-call-ipython.log", Label.NUMERICAL_ERROR, Action.STOP),
    ("config_error/jax-18780-colab-cloud-tpu-init-no-device-found.log", Label.CONFIG_ERROR, Action.STOP),
    ("healthy/mindyolo-402-overflow-loss-scale-warnings-loss-rising.log", Label.HEALTHY, Action.WAIT),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_dynamic_loss_scaling_then_steps_is_healthy(tmp_path: Path) -> None:
    """Paddle lowering a usable scale while the steps go on is loss scaling at work (Paddle#37021's record)."""
    log = tmp_path / "rank.log"
    log.write_text("".join(f"[2022/11/08 14:5{n % 10}:54] ppcls INFO: [Train][Epoch 2/800][Iter: {n}/366] loss: 0.9{n:02d}\n"
                           + ("Found inf or nan, current scale is: 32768.0, decrease to: 32768.0*0.5\n" if n % 7 == 0 else "")
                           for n in range(1, 40)))
    assert diagnose_paths([str(log)]).verdict.label is Label.HEALTHY
