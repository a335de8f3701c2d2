# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-40 (communication backends other than the plain NCCL
defaults), each as a rule of its family, with real lines and the near misses the rule must leave alone: NCCL's result
under Horovod's "<call> failed:" wrapper, Gloo's TCP device finding no address for the interface or hostname it was
given, Open MPI's runtime unpacking a peer's message of another layout, and TensorFlow 1.x's error summary indented by
a paste. Each line is from the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round40f import round40f_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

HOROVOD_WRONG_NCCL = "    UnknownError (see above for traceback): ncclAllReduce failed: invalid data type"
GLOO_EXCLUSION_LIST = "  ifa != nullptr. Unable to find address for: ^lo"
ORTE_UNPACK = "    [future5.stanford.edu:12508] [[25215,0],1] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file grpcomm_direct.c at line 355"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # NCCL's result under Horovod's wrapper (nccl_operations.cc NCCLContext::ErrorCheck) and its copies
    (HOROVOD_WRONG_NCCL, ERROR, Label.CONFIG_ERROR,
     "corpus (horovod-troubleshooting-ncclallreduce-invalid-data-type-wrong-nccl)"),
    ("horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled cuda error", ERROR,
     Label.OTHER_CRASH, "a Ray + Horovod exercise's setup script, its note of the hvd build's error (public repository)"),
    ("[2026-04-09 14:23:15] ncclAllReduce failed: unhandled system error", ERROR, Label.COMM_ERROR,
     "a DGX troubleshooting lab's 'Error 3' (public repository)"),
    # Gloo's TCP device (gloo/transport/tcp/device.cc GLOO_ENFORCE(ifa != nullptr / rp != nullptr, ...))
    (GLOO_EXCLUSION_LIST, ERROR, Label.CONFIG_ERROR,
     "corpus (aws-do-eks-51-gloo-socket-ifname-nccl-exclusion-list)"),
    ("RuntimeError: Unable to find address for: enp67s0f5", ERROR, Label.CONFIG_ERROR,
     "a hard-coded GLOO_SOCKET_IFNAME on a customer's host (a public repository's fix log)"),
    ("RuntimeError: ifa != nullptr. Unable to find address for: 192.168.99.", ERROR, Label.CONFIG_ERROR,
     "an IP prefix given as GLOO_SOCKET_IFNAME (a DGX orchestrator's release notes, public repository)"),
    # Open MPI's data-serialisation service (opal_err2str: OPAL_ERR_UNPACK_READ_PAST_END_OF_BUFFER, OPAL_ERR_PACK_MISMATCH)
    (ORTE_UNPACK, ERROR, Label.CONFIG_ERROR,
     "corpus (horovod-troubleshooting-orte-force-terminate-data-unpack-hwloc)"),
    ("    [[25215,0],1] FORCE-TERMINATE AT Data unpack would read past end of buffer:-26 - error grpcomm_direct.c(359)",
     ERROR, Label.CONFIG_ERROR, "corpus (horovod-troubleshooting-orte-force-terminate-data-unpack-hwloc)"),
    ("[rc002.local:17727] [[56831,1],1] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file util/nidmap.c at line 371",
     ERROR, Label.CONFIG_ERROR, "OMPI users list, 'mpirun error in OpenMPI 1.5' (2010): 1.4 and 1.5 builds mixed"),
    ("  --> Returned value Data unpack would read past end of buffer (-26) instead of ORTE_SUCCESS", ERROR,
     Label.CONFIG_ERROR, "the same thread's orte_init help message"),
    ("[Fialho-2.local:02834] [[57446,1],0] ORTE_ERROR_LOG: Pack data mismatch in file ../../../../orte/mca/grpcomm/base/grpcomm_base_modex.c at line 330",
     ERROR, Label.CONFIG_ERROR, "OMPI users list (a stored thread: 'OPAL dss:unpack: got type 32 when expecting type 9')"),
    # TensorFlow 1.x's summary of an op's error, indented by a paste (errors_impl.OpError.__str__)
    ("    InvalidArgumentError (see above for traceback): Input to reshape is a tensor with 168480 values, but the requested shape requires a multiple of 256",
     ERROR, None, "a public repository's docstring 'ERROR LOG' (its message states no cause these forms read)"),
    ("    InvalidArgumentError (see above for traceback): Assign requires shapes of both tensors to match. lhs shape= [1001] rhs shape= [193]",
     ERROR, None, "a public repository's README 'failed log' (a checkpoint of another class count)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "I got ncclAllReduce failed: unhandled system error after a few steps",  # prose: the wrapper mid-sentence
    "    throw std::logic_error(std::string(op_name) + \" failed: \" + ncclGetErrorString(nccl_result));",  # source
    "ncclAllReduce failed: some unknown string",  # not NCCL's result string
    "  GLOO_ENFORCE(ifa != nullptr, \"Unable to find address for: \", iface);",  # gloo's source line
    "                System.out.println(\"Unable to find address for: \" + args[i]);",  # another program's own message
    "the error is Unable to find address for: eth0 so set GLOO_SOCKET_IFNAME",  # prose
    "If you see Data unpack would read past end of buffer, purge hwloc",  # the guide's advice
    "        retval = \"Data unpack would read past end of buffer\";",  # opal_err2str's source
    "  the summary reads like `Error (see above for traceback): ...`",  # prose quoting the form
    "            #     InvalidArgumentError (see above for traceback): Number of",  # a source comment quoting it
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 67


def test_round_reads_only_its_words() -> None:
    """Other wrappers of NCCL's result and other runtimes' errors are other readers' (or none)."""
    for line in ("RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
                 "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
                 "[host:01234] [[1,0],0] ORTE_ERROR_LOG: Not found in file ess_hnp_module.c at line 170",
                 "UnknownError (see above for traceback): Failed to get convolution algorithm."):
        assert round40f_form(line) is None, line


def test_wrong_nccl_under_horovod_is_configuration(tmp_path: Path) -> None:
    """Horovod's op error naming NCCL's 'invalid data type', indented as the guide prints it, with TensorFlow's node
    lines after it: a mistake to fix (stop), not a healthy run."""
    log = tmp_path / "horovod.log"
    log.write_text(HOROVOD_WRONG_NCCL + "\n"
                   "             [[Node: DistributedMomentumOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_2_0 = "
                   "HorovodAllreduce[T=DT_FLOAT, _device=\"/job:localhost/replica:0/task:0/device:GPU:0\"](gradients/AddN_2)]]\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_gloo_refusing_an_interface_is_configuration(tmp_path: Path) -> None:
    """The enforce record split over two lines, then the engine's exit: the interface setting, not a crash to
    restart."""
    log = tmp_path / "gloo.log"
    log.write_text("RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:84]\n" + GLOO_EXCLUSION_LIST
                   + "\nEngineCore failed to start.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_orte_unpack_ends_the_run_as_configuration(tmp_path: Path) -> None:
    """ORTE's help banner and its unpack error: mismatched builds on the nodes (stop)."""
    log = tmp_path / "orte.log"
    log.write_text("--------------------------------------------------------------------------\n"
                   "An internal error has occurred in ORTE:\n\n"
                   "[[25215,0],1] FORCE-TERMINATE AT Data unpack would read past end of buffer:-26 - error grpcomm_direct.c(359)\n\n"
                   "This is something that should be reported to the developers.\n"
                   "--------------------------------------------------------------------------\n"
                   + ORTE_UNPACK.strip() + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
