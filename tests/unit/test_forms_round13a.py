# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-13 (Intel MPI/MPICH, Open MPI under Slurm, DeepSpeed's op
builder, c10d's store, libfabric/EFA, NCCL's shared memory and its CUDA failures, TF1/XLA on TPU, the Neuron compiler, TensorFlow's
duplicate plugins), each as a rule of its family (a process manager's spawn and banner, a build's version or
support, a server's port, a fabric call's error return, a compiler pass's check, and a resource in a warning's words), with real
lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's
source prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

KB = default_knowledge_base()
E, CRASH = FormKind.ERROR, FormKind.CRASH

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a process manager that could not run a program
    ("[8] [proxy:1:1@node2] HYD_spawn (../../../../../src/pm/i_hydra/libhydra/spawn/intel/hydra_spawn.c:117): execvp error on file FOUNDED_MLSL_ROOT/intel64/bin/ep_server (No such file or directory)", E, Label.CONFIG_ERROR, "corpus (intel-caffe-274)"),
    ("[proxy:0:0@n01] HYD_spawn (lib/utils/spawn.c:100): execvp error on file ./train.py (Permission denied)", E, Label.CONFIG_ERROR, "MPICH hydra_spawn.c's format"),
    # ... and its banner of a rank that ended badly
    ("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", CRASH, None, "corpus (intel-caffe-274)"),
    # a version installed that is not the one the program was built against
    ("Exception: Installed CUDA version 11.0 does not match the version torch was compiled with 10.1, unable to compile cuda/cpp extensions without a matching cuda version.", E, Label.CONFIG_ERROR, "corpus (deepspeed-1077)"),
    ("RuntimeError: the extension was compiled with CUDA 11.8 but the installed driver supports only 11.4", E, Label.CONFIG_ERROR, "a build check's words"),
    # a build without a support the launch needs
    ('The application appears to have been direct launched using "srun", but OMPI was not built with SLURM\'s PMI support and therefore cannot execute. There are several options for building PMI support under SLURM, depending upon the SLURM version you are using:', E, Label.CONFIG_ERROR, "corpus (mpi4py-141)"),
    ("RuntimeError: torch.distributed was not built with NCCL support, which the nccl backend requires", E, Label.CONFIG_ERROR, "a build check's words"),
    # a libfabric call's error return (its cause: fi_getinfo's ENODATA is no provider for this process)
    ("fi_getinfo: -61 (No data available)", E, None, "corpus (libfabric-12708)"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "[proxy:0:0@n01] HYD_spawn: execvp error handling is described in the Hydra user guide",  # the words in prose
    "The report lists BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES as a possible banner",  # the banner quoted in prose
    "INFO: the version torch was compiled with does not match the one reported by nvidia-smi; this is expected",  # an INFO record
    "UserWarning: torch was not compiled with flash attention support, falling back to the math kernel",  # a warning: it goes on
    "Open MPI was not built with CUDA support; using host buffers instead",  # no refusal: it goes on
    "fi_getinfo returned the efa provider for this process",  # the call named in prose
    "\t [[{{node XRTCompile}}]]",  # the node a status names: the status says the cause (an XRTCompile out of memory, transformers-3702)
]

#: (line, the cause its form states): causes read from an error line another form or rule reads
CAUSES = [
    ("RuntimeError: The server socket has failed to listen on any local network", Label.CONFIG_ERROR),  # corpus (deepspeed-3916)
    ("RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", Label.CONFIG_ERROR),  # c10d socket.cpp
    ("tensorflow.python.framework.errors_impl.InternalError: RET_CHECK failure (learning/brain/google/xla/distributed_tpu_rewrite_pass.cc:800) arg_shape.handle_type != DT_INVALID", Label.COMPILE_ERROR),  # corpus (simclr-53)
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RET_CHECK failure (external/xla/xla/service/gpu/ir_emitter.cc:1234) slice.size() == 2", Label.COMPILE_ERROR),  # an emitter's check
    ("gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device", Label.CONFIG_ERROR),  # corpus (nccl-290)
    ("OPAL ERROR: Unreachable in file pmix3x_client.c at line 112", Label.CONFIG_ERROR),  # corpus (mpi4py-141)
    ("[node1:01234] OPAL ERROR: Unreachable in file ext3x_client.c at line 112", Label.CONFIG_ERROR),  # Open MPI 4's ext3x component
]

#: error lines whose form says nothing of a cause
NO_CAUSE = [
    "RuntimeError: the server socket was closed by the peer",  # a socket, not a bind
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RET_CHECK failure (external/xla/xla/pjrt/pjrt_stream_executor_client.cc:100) buffer != nullptr",  # a runtime's check, not a pass's
    "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to mmap failed : Invalid argument",  # another errno
    "OPAL ERROR: Timeout in file base/grpcomm_base_stubs.c at line 355",  # another code, another file
]


test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({E}), classified_by=KB)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_fabric_call_without_provider_is_setup() -> None:
    """fi_getinfo's ENODATA, as its caller prints it, is no provider for this process (errorclass)."""
    reading = read_error("fi_getinfo: -61 (No data available)")
    assert reading is not None and reading.label is Label.CONFIG_ERROR


# -- signatures ------------------------------------------------------------------------------------

def test_duplicate_plugin_registration_is_benign() -> None:
    line = ("2024-11-01 19:16:54.296179: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:477] Unable to "
            "register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered")
    m = KB.classify(line)
    assert m is not None and m.signature.id == "benign.plugin_already_registered"


def test_neuron_code_after_iso_time_is_compile_error() -> None:
    line = ("2024-10-07T21:55:32Z [XTP003] Number of instructions (10046893) is over the threshold (5000000). "
            "Operators are too large. - Make operators smaller i.e. smaller batch size or sequence length")
    m = KB.classify(line)
    assert m is not None and m.signature.id == "neuron.compile.error_code"
    # an ISO time before a logger's bracketed level is not a code
    assert KB.classify("2024-10-07T21:55:32Z [INFO] compiling module 3 of 8") is None


def test_nccl_cuda_failure_naming_the_setup_is_config() -> None:
    """NCCL's "Cuda failure '<cudaGetErrorString>'" whose string is the node's CUDA set-up is not the generic
    CUDA call that failed; one that names no set-up still is."""
    stub = "[1] c940b4ae7a81:36:37 [1] init.cc:255 NCCL WARN Cuda failure 'CUDA driver is a stub library'"  # corpus (horovod-3625)
    m = KB.classify(stub)
    assert m is not None and m.signature.id == "gpu.cuda_unavailable"
    no_device = "node1:12:12 [0] init.cc:255 NCCL WARN Cuda failure 'no CUDA-capable device is detected'"
    m = KB.classify(no_device)
    assert m is not None and m.signature.id != "gpu.nccl.unhandled_cuda_error"
    reading = read_error(no_device)
    assert reading is not None and reading.label is Label.CONFIG_ERROR
    generic = "tomte401:1850301:1881341 [0] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'"
    m = KB.classify(generic)
    assert m is not None and m.signature.id == "gpu.nccl.unhandled_cuda_error"


# -- whole logs, as the judge reads them ------------------------------------------------------------

HYDRA = [
    "[8] [proxy:1:1@node2] HYD_spawn (../../../../../src/pm/i_hydra/libhydra/spawn/intel/hydra_spawn.c:117): execvp error on file FOUNDED_MLSL_ROOT/intel64/bin/ep_server (No such file or directory)",
    "",
    "===================================================================================",
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    "=   RANK 2 PID 30362 RUNNING AT node2",
    "=   KILLED BY SIGNAL: 9 (Killed)",
    "===================================================================================",
]

ENDINGS = [
    # the program the process manager could not run, then its banner: a set-up a relaunch repeats
    (HYDRA, Label.CONFIG_ERROR, Action.STOP),
    # the banner alone: a rank ended badly, cause unknown
    (HYDRA[2:], Label.OTHER_CRASH, Action.RESTART),
    (["Exception: Installed CUDA version 11.0 does not match the version torch was compiled with 10.1, unable to compile cuda/cpp extensions without a matching cuda version."], Label.CONFIG_ERROR, Action.STOP),
    (["libfabric:...:core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output empty list",
      "fi_getinfo: -61 (No data available)"], Label.CONFIG_ERROR, Action.STOP),
    ([*PROGRESS, "RuntimeError: The server socket has failed to listen on any local network"], Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_duplicate_plugins_then_progress_is_healthy() -> None:
    """A quiet start that logs the duplicate registrations at ERROR, then progress, stays healthy."""
    lines = ["E0000 00:00:1730485014.331975   26232 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
             "E0000 00:00:1730485014.342833   26232 cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered",
             *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY
    assert _verdict(lines[:2])[0] is Label.HEALTHY
