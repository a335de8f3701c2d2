# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for the misses of round issue23-heldout-18, half A (the dynamic loader's refusal of a symbol version,
Slurm's refusal of a job at submission with the controller's reason, Intel MPI's Hydra record of a bootstrap proxy it
could not run, an Xid record whose message is the driver's NVLink fatal error), each as a rule of its family (a
loader's error format, a scheduler's submission error and the error table behind it, a launcher's record layout, a
driver's message), with real lines and the near misses the rule must leave alone.

Each line is from the corpus (tests/data/real-logs, named by its excerpt) or is the format a project's source
prints, filled in (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.diagnosis.classify import KnowledgeBase
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.events import Action, Label
from tests.unit.form_table import cause_tests, table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # glibc's loader (elf/dl-version.c: "version `%s' not found (required by %s)")
    (" [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found (required by /fsx/ubuntu/awsome-distributed-training/3.test_cases/10.FSDP/pt_fsdp/lib/python3.10/site-packages/torch/lib/../../../../libnccl-net.so) No plugin found (libnccl-net.so), using internal implementation",
     E, Label.CONFIG_ERROR, "corpus (awsome-distributed-ai-292): NCCL's plugin loader quoting dlerror() in an INFO record"),
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.29' not found (required by /opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_python.so)",
     E, Label.CONFIG_ERROR, "dl-version.c's format under Python's ImportError, filled in"),
    ("./train: /lib64/libc.so.6: version `GLIBC_2.34' not found (required by ./train)", E, Label.CONFIG_ERROR,
     "dl-version.c's format as the loader prints it for a program it cannot start, filled in"),
]

#: lines that look like one of the forms above and must read as nothing
NEAR_MISSES = [
    "/usr/bin/python3: /lib64/libtinfo.so.5: no version information available (required by /usr/bin/python3)",  # the loader's warning: it goes on
    " [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",  # no plugin installed: NCCL's ordinary start on a host without one
    "the build's version is not found (required by nothing)",  # prose: no quoted version
]

#: (line, the cause its form states): causes read from an error line another rule reads as unexplained
CAUSES = [
    # Slurm's submission commands (src/sbatch/sbatch.c, src/salloc/salloc.c, src/srun/libsrun/allocate.c) with
    # slurm_errno.c's reasons
    ("sbatch: error: Batch job submission failed: Requested topology configuration is not available", Label.CONFIG_ERROR),  # corpus (sample-physical-ai-scaffolding-kit-14)
    ("salloc: error: Job submit/allocate failed: Requested node configuration is not available", Label.CONFIG_ERROR),  # salloc.c's format with slurm_errno.c's ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
    ("srun: error: Unable to allocate resources: Invalid account or account/partition combination specified", Label.CONFIG_ERROR),  # allocate.c's format with ESLURM_INVALID_ACCOUNT
    ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)", Label.CONFIG_ERROR),  # ESLURM_ACCOUNTING_POLICY
    ("salloc: error: Job submit/allocate failed: Socket timed out on send/recv operation", Label.COMM_ERROR),  # corpus (hpcfund-77): the controller not answering
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", Label.COMM_ERROR),  # SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
    # Intel MPI's Hydra record with its level in place of the location (heldout.round14a._HYDRA_ERROR)
    ("[mpiexec@runner-d8zbrqlyc-project-80-concurrent-0] Error: Unable to run bstrap_proxy on localhost:2 (pid 13546, exit code 65280)", Label.CONFIG_ERROR),  # corpus (warpx-6980)
    ("[mpiexec@hb120v3-3] check_exit_codes (../../../../../src/pm/i_hydra/libhydra/demux/hydra_demux_poll.c:117): unable to run bstrap_proxy on hb120v3-3.internal.cloudapp.net (pid 12608, exit code 256)", Label.CONFIG_ERROR),  # Azure/az-hop#906: the located record, read before
]

#: error lines whose form states no cause
NO_CAUSE = [
    "srun: error: Node failure on g4dn-nxlarge-dy-g4dnxlarge-1",  # corpus (aws-parallelcluster-2407): a node that failed, no refusal of the request
    "sbatch: error: Batch job submission failed:",  # the reason cut off
    "[mpiexec@host] Error: downstream from host node1 exited with status 1",  # a Hydra record of a program that ran and failed
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_form_rules_were_bumped() -> None:
    """What a line reads as changed: the reader's version, part of the classifier's cache key, moved on."""
    assert FORM_RULES >= 22


# -- the knowledge base's Xid rule ------------------------------------------------------------------

#: the driver's NVLink fatal error is a hardware Xid whatever number the record carries; an application Xid that
#: mentions NVLink in passing is not
XIDS = [
    ("2024-08-21T11:35:35.532-07:00 {\"level\":\"info\",\"ts\":\"2024-08-21T18:35:35Z\",\"msg\":\"NPD caught event: %v\",\"details: \":{\"severity\":\"warn\",\"timestamp\":\"2024-08-22T20:59:29Z\",\"reason\":\"XidHardwareFailure\",\"message\":\"Node condition NvidiaErrorReboot is now: True, reason: XidHardwareFailure, message: \\\"NVRM: Xid (PCI:0000:b9:00): 71, pid=<unknown>, name=<unknown>, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)\\\"\"},\"HealthMonitoringAgentDetectionEvent\":\"HealthEvent\"}",
     "gpu.xid_hardware"),  # corpus (hyperpod-hma-npd-xid-71): SageMaker HyperPod's health agent record
    ("[Wed Aug  5 03:12:01 2026] NVRM: Xid (PCI:0000:65:00): 74, pid=<n/a>, name=<unknown>, NVLink: fatal error detected on link 2", "gpu.xid_hardware"),  # the driver's Xid 74 message
    ("NVRM: Xid (PCI:0000:3b:00): 13, pid=28127, Graphics SM Warp Exception; NVLink: link 6 is up", "gpu.xid_other"),  # an application Xid that names NVLink but no fault
]


@pytest.mark.parametrize(("line", "signature"), XIDS, ids=[s for _, s in XIDS])
def test_the_nvlink_fatal_message_is_a_hardware_xid(line: str, signature: str) -> None:
    from neuron_watch.diagnosis.kb import default_knowledge_base

    kb: KnowledgeBase = default_knowledge_base(None)
    match = kb.classify(line)
    assert match is not None and match.signature.id == signature


# -- whole logs, as the judge reads them ------------------------------------------------------------

ENDINGS = [
    # Slurm's controller refusing the job (corpus, sample-physical-ai-scaffolding-kit-14)
    (["sbatch: error: Batch job submission failed: Requested topology configuration is not available"],
     Label.CONFIG_ERROR, Action.STOP),
    # NCCL's plugin loader quoting the loader's refusal, the log's last word (corpus, awsome-distributed-ai-292)
    ([" [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found (required by /fsx/ubuntu/awsome-distributed-training/3.test_cases/10.FSDP/pt_fsdp/lib/python3.10/site-packages/torch/lib/../../../../libnccl-net.so) No plugin found (libnccl-net.so), using internal implementation"],
     Label.CONFIG_ERROR, Action.STOP),
    # Intel MPI's mpiexec unable to start its proxy in a container without sshd (corpus, warpx-6980)
    (["1/1 Test #10: test_3d_laser_acceleration_btd.run ...***Failed    2.12 sec",
      "[mpiexec@runner-d8zbrqlyc-project-80-concurrent-0] Error: Unable to run bstrap_proxy on localhost:2 (pid 13546, exit code 65280)",
      "[mpiexec@runner-d8zbrqlyc-project-80-concurrent-0] poll_for_event (../../../../../src"],
     Label.CONFIG_ERROR, Action.STOP),
]


@pytest.mark.parametrize(("lines", "label", "action"), ENDINGS, ids=[f"ending:{i}" for i in range(len(ENDINGS))])
def test_log_ending_in_the_form(lines: list[str], label: Label, action: Action) -> None:
    assert _verdict(lines) == (label, action)


def test_nccl_without_a_plugin_then_steps_is_healthy() -> None:
    """NCCL's ordinary start on a host with no network plugin names no loader refusal: the steps after it are a run."""
    lines = [" [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY


def test_the_loaders_refusal_while_the_steps_go_on_is_no_failure() -> None:
    """The refusal is an error's form: a warning while the rank makes progress (NCCL runs over its own transport), the
    job's failure only as its last word."""
    lines = [" [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found (required by /opt/nccl/lib/libnccl-net.so) No plugin found (libnccl-net.so), using internal implementation",
             *PROGRESS]
    assert _verdict(lines)[0] is Label.HEALTHY
