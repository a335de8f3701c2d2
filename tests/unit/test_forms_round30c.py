# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-30 (hangs and stalls), each as a rule of its family,
with real lines and the near misses the rule must leave alone: Open MPI's out-of-band TCP connection that failed,
NCCL's collective the ranks do not call alike, a native backtrace through an abort routine, a metric named error (the
signature table), a user's interrupt
of a process that waited on others under a launcher's traceback or a lock, and a log that ends on its user's ``^C``
after a silence (interrupted.py). Each line is from the
corpus (named by its excerpt) or from a public thread or mailing list (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind
from neuron_watch.diagnosis.interrupted import interrupted_while_waiting
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.diagnosis.startup import RaisedAt
from neuron_watch.events import Action, Label, Verdict
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Open MPI's (and PRRTE's) out-of-band TCP report of a peer it could not connect to
    ("A process or daemon was unable to complete a TCP connection", ERROR, Label.CONFIG_ERROR,
     "corpus (horovod-2043-openmpi-tcp-connection-firewall-under-ssh-debug)"),
    (">> A process or daemon was unable to complete a TCP connection", ERROR, Label.CONFIG_ERROR,
     "the Open MPI users list (mpirun between two Docker hosts, pcp-j-20 to 172.18.0.120, quoted twice)"),
    # NCCL's IB transport refusing a send whose size the peer did not post, and the older init's order check
    ("10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536",
     ERROR, Label.CONFIG_ERROR, "corpus (nccl-969-net-ib-collective-mismatch-proxy-returns-5)"),
    ("n136-081-017:201805:201927 [0] transport/net_ib.cc:667 NCCL WARN NET/IB : collective mismatch error local size 32768 remote 1048576 addr 0 rkey 3beac3 seq adf/adf",
     ERROR, Label.CONFIG_ERROR, "NVIDIA/nccl#531 (reduce_scatter and allgather on two nodes)"),
    ("train-run-env3-list2-parallel-0:15483:15645 [0] transport/net_ib.cc:665 NCCL WARN NET/IB : collective mismatch error local size 546816 remote 524288 addr 7ff7d1530000 rkey 2553d seq 14/1c",
     ERROR, Label.CONFIG_ERROR, "NVIDIA/nccl#615 (all_reduce on two nodes; NCCL_IB_DISABLE=1 avoided it)"),
    ("node-8x-v100-nvlink-1:39719:39719 [3] init.cu:1197 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 11. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs",
     ERROR, Label.CONFIG_ERROR, "NVIDIA/nccl#214 (NCCL 2.3's init on two DGX-1)"),
    # glibc's backtrace_symbols frames through an abort routine
    ("libggml-base.so(ggml_abort+0x152)[0x72edb99cda02]", FormKind.CRASH, None,
     "corpus (llama-cpp-17060-server-ggml-abort-backtrace-gpt-oss)"),
    ("        /usr/bin/ollama(ggml_abort+0x11c)[0xca5ed5d6315c]", FormKind.CRASH, None,
     "ollama on colima (GGML_ASSERT(i01 >= 0 && i01 < ne01) failed), indented as pasted"),
    ("/home/user/llamacomp/llama.cpp/build/bin/libggml-base.so(ggml_abort+0x130) [0x7fdfb47be5d0]", FormKind.CRASH,
     None, "a llama.cpp build's backtrace (a space before the address)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # the lines of Open MPI's box after its first (read as part of the report, not as a second one)
    "This is usually caused by a firewall on the remote host. Please",
    "check that any firewall (e.g., iptables) has been disabled and",
    # NCCL's records of the same transport and init that work
    "hpc-25-14:18622:18622 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB em1:172.18.28.81<0>",
    "machine-1:16194:18586 [6] NCCL INFO comm 0x7f4b28006640 rank 14 nranks 16 cudaDev 6 busId b1000 - Init COMPLETE",
    # backtrace_symbols frames of routines that are not an abort (the printer itself, the program's start)
    "libggml-base.so(ggml_print_backtrace+0x21f)[0x72edb99cd82f]",
    "/usr/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0x80)[0x72edb9480e40]",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES, cause_of_kinds=frozenset({ERROR}))

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("A process or daemon was unable to complete a TCP connection", Label.CONFIG_ERROR),
    ("n136-081-017:201805:201927 [0] transport/net_ib.cc:667 NCCL WARN NET/IB : collective mismatch error local size 32768 remote 1048576 addr 0 rkey 3beac3 seq adf/adf",
     Label.CONFIG_ERROR),
]
#: error lines of NCCL's IB transport whose form states no cause beyond the transport (read by the table's rules)
NO_CAUSE = [
    "gpu7:4105:4372 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : Address family not supported by protocol",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize("line", [
    "Minibatch error: 85.9%",  # corpus (gpu-manager-170-tf-mnist-slow-init-then-step-0)
    "Validation error: 84.5%",  # the same excerpt (TF's MNIST example)
    "Mean squared error: 2548.07",  # scikit-learn's plot_ols example output
])
def test_a_metric_named_error_is_a_number_not_an_error(line: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id == "benign.metric_named_error"


@pytest.mark.parametrize("line", [
    # a status, a code, an exception's message, words after the number: still errors
    "F20250821 13:22:09.976752 3186121 rdma_io.cc:811] Check failed: wc->status == IBV_WC_SUCCESS RC send CQ state error: 12, 0",
    "Segmentation error: 3",
    "RuntimeError: CUDA error: 0.5",
    "Validation error: 84.5% of the batches could not be read",
])
def test_an_error_with_a_number_in_it_stays_an_error(line: str) -> None:
    match = default_knowledge_base().classify(line)
    assert match is not None and match.signature.id != "benign.metric_named_error"


def _crash() -> Verdict:
    return Verdict(Label.OTHER_CRASH, Action.RESTART, reason="a crash of unknown cause")


#: torch elastic's agent, whose traceback is cut as it goes down (ultralytics#1662)
_AGENT_CUT = (("C:\\Users\\Administrator\\anaconda3\\envs\\pytorch_wf\\lib\\runpy.py", "_run_module_as_main"),)
#: DDP's broadcast of rank 0's buffers before the forward (ultralytics#1662)
_DDP_BUFFERS = (("trainer.py", "_do_train"), ("torch\\nn\\parallel\\distributed.py", "forward"),
                ("torch\\nn\\parallel\\distributed.py", "_sync_buffers"))
#: a DataLoader's worker queue lock (Detectron.pytorch#140, in the unraisable hook's report)
_QUEUE_LOCK = (("torch/utils/data/dataloader.py", "_shutdown_workers"), ("multiprocessing/queues.py", "put"),
               ("/home/bcheng/anaconda3/lib/python3.6/multiprocessing/synchronize.py", "__enter__"))
#: a context manager that is not a lock
_OTHER_CONTEXT = (("train.py", "main"), ("contextlib.py", "__enter__"))


@pytest.mark.parametrize(("tracebacks", "interrupt"), [
    ([(RaisedAt(_AGENT_CUT), None), (RaisedAt(_DDP_BUFFERS, "KeyboardInterrupt"), None)], "KeyboardInterrupt"),
    ([(RaisedAt(_QUEUE_LOCK, "KeyboardInterrupt:"), None)], "KeyboardInterrupt:"),
])
def test_an_interrupt_under_a_launcher_or_in_a_lock_is_the_hang(tracebacks: list[tuple[RaisedAt, None]],
                                                                interrupt: str) -> None:
    verdict = interrupted_while_waiting(_crash(), tracebacks, [interrupt])
    assert verdict is not None and (verdict.label, verdict.action) == (Label.COLLECTIVE_HANG, Action.RESTART)


def test_an_interrupt_in_another_context_manager_is_not() -> None:
    assert interrupted_while_waiting(_crash(), [(RaisedAt(_OTHER_CONTEXT, "KeyboardInterrupt"), None)], []) is None


def test_a_newer_exception_is_the_failure() -> None:
    """An older interrupted wait does not outrank a newer traceback that ended in an exception of its own."""
    tracebacks = [(RaisedAt((("train.py", "main"),), "ValueError: bad shape"), None),
                  (RaisedAt(_DDP_BUFFERS, "KeyboardInterrupt"), None)]
    assert interrupted_while_waiting(_crash(), tracebacks, []) is None


#: a run's steps, then what it printed before its user's Ctrl-C (the terminal's echo, ``^C``, alone on the last line)
_STEPS = "Epoch 1 step 10 loss 2.31\nEpoch 1 step 20 loss 2.11\n"


@pytest.mark.parametrize(("text", "hang"), [
    # torch-ngp#113's form: a large host allocation, then silence until the user stopped it
    (_STEPS + "tcmalloc: large alloc 44079767552 bytes == 0x5612a4000000 @  0x7f3a\n^C\n", True),
    (_STEPS + "tcmalloc: large alloc 44079767552 bytes == 0x5612a4000000 @  0x7f3a\n> ^C\n", True),
    # stopped while it worked: a step just before the echo
    (_STEPS + "Epoch 1 step 30 loss 2.01\n^C\n", False),
    # the echo of an interrupt the run went on after
    ("Epoch 1 step 10 loss 2.31\n^C\n" + _STEPS, False),
    # the characters inside a line
    (_STEPS + "tcmalloc: large alloc 44079767552 bytes\npressed ^C to stop\n", False),
])
def test_a_log_ending_on_its_users_interrupt(tmp_path: Path, text: str, hang: bool) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text(text)
    verdict = diagnose_paths([str(log)]).verdict
    expected = (Label.COLLECTIVE_HANG, Action.RESTART) if hang else (Label.HEALTHY, Action.WAIT)
    assert (verdict.label, verdict.action) == expected, verdict.reason


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/horovod-2043-openmpi-tcp-connection-firewall-under-ssh-debug.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/nccl-969-net-ib-collective-mismatch-proxy-returns-5.log", Label.CONFIG_ERROR, Action.STOP),
    ("healthy/gpu-manager-170-tf-mnist-slow-init-then-step-0.log", Label.HEALTHY, Action.WAIT),
    ("other_crash/llama-cpp-17060-server-ggml-abort-backtrace-gpt-oss.log", Label.OTHER_CRASH, Action.RESTART),
    ("collective_hang/ultralytics-1662-windows-ddp-keyboardinterrupt-in-sync-buffers.log", Label.COLLECTIVE_HANG,
     Action.RESTART),
    ("collective_hang/detectron-pytorch-140-dataloader-deadlock-keyboardinterrupt-shutdown-workers.log",
     Label.COLLECTIVE_HANG, Action.RESTART),
    # a user's ^C after tens of GB of host allocations (the label the form states; the threads found the host's
    # memory short, which the log does not say)
    ("oom/torch-ngp-113-tcmalloc-large-alloc-then-ctrl-c.log", Label.COLLECTIVE_HANG, Action.RESTART),
    ("oom/mixtext-15-colab-tcmalloc-44gb-then-ctrl-c.log", Label.COLLECTIVE_HANG, Action.RESTART),
    # round 28's interrupted launcher is read as before
    ("collective_hang/mmdetection-5060.log", Label.COLLECTIVE_HANG, Action.RESTART),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
