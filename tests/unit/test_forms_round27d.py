# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part D of the misses of round issue23-heldout-27, each as a rule of its family, with real lines and
the near misses the rule must leave alone: the kernel's hardware-error records as a device black box copies them
(no colon after the prefix), the Ascend runtime's wait task that timed out on the device, HCCL's link establishment
that timed out; and MindSpore's report sections pasted into a Markdown forum, whose leading dashes keep the editor's
backslash. Each line is from the corpus (named by its excerpt), from a public thread or page (named), or is the
format the program's source prints (the source is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_line
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # the kernel's CPER records as a device black box copies them, without the prefix's colon
    ("/hisi_logs/device-2/20240420162417-271713000/bbox/kbox.txt:2015[2454.830693] {6}[Hardware Error]event severity: recoverable",
     ERROR, Label.HARDWARE_ERROR, "corpus (hiascend-troubleshooting-8-hbm-multi-bit-ecc-kbox)"),
    ("/hisi_logs/device-2/20240420162417-271713000/bbox/kbox.txt:2020[2454.830701] {6}[Hardware Error]  error_type: 3, multi-bit ECC",
     ERROR, Label.HARDWARE_ERROR, "corpus (hiascend-troubleshooting-8-hbm-multi-bit-ecc-kbox)"),
    ("/hisi_logs/device-2/******/bbox/kbox.txt:2014[2454.830692] {6}[Hardware Error] Hardware error from APEI Generic Hardware Error Source: 0",
     ERROR, Label.HARDWARE_ERROR, "Ascend's English troubleshooting page for the same fault, device path masked"),
    # ... and the kernel's own records with the colon, which the severity forms already read the same way
    ("{1}[Hardware Error]: event severity: fatal", ERROR, Label.HARDWARE_ERROR,
     "a linux-pci thread's dmesg of a PCIe fatal error at shutdown (drivers/firmware/efi/cper.c)"),
    (" {3}[Hardware Error]:   error_type: 3, multi-bit ECC", ERROR, Label.HARDWARE_ERROR,
     "a linux-mm thread's arm64 GHES report of a multi-bit ECC in a slab page"),
    # the Ascend runtime's wait task that timed out on the device
    ("EE9999 The error from device(chipId:3, dieId:0), serial number is 1, event wait timeout occurred during task execution, stream_id:122, sq_id:122, task_id:790, event_id=73, timeout=1980.[FUNC:ProcessStarsWaitTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1314]",
     ERROR, Label.COLLECTIVE_HANG, "corpus (mindspore-forum-1156-ee9999-event-wait-timeout-sync-stream)"),
    ("EE9999: [PID: 12066] 2025-07-31-01:25:19.967.079 The error from device(chipId:6, dieId:0), serial number is 1, event wait timeout occurred during task execution, stream_id:19, sq_id:19, task_id:16, event_id=73, timeout=1866s.[FUNC:ProcessStarsWaitTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1400]",
     ERROR, Label.COLLECTIVE_HANG, "a public torch_npu training log (PTA call acl api failed, Model execution failed)"),
    ("worker-1:         The error from device(chipId:0, dieId:0), serial number is 2, event wait timeout occurred during task execution, stream_id:2, sq_id:2, task_id:5, event_id=3, timeout=1868.[FUNC:ProcessStarsWaitTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1344]",
     ERROR, Label.COLLECTIVE_HANG, "a public multi-node Ascend log under a worker prefix, after HCCL's stuck notify waits"),
    # HCCL's link establishment that timed out (EI0006)
    ("[ERROR] HCCL(3977573,all_reduce_test):2025-11-22-17:37:04.447.996 [hccl_socket_manager.cc:816] [3977663][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]",
     ERROR, Label.COMM_ERROR, "corpus (hiascend-hcclug-50-ei0006-wait-socket-establish-timeout), one record of the pasted run"),
    ("[ERROR] HCCL(21273,all_reduce_test):2025-03-14-15:43:53.370 [hccl_socket_manager.cc:813] [137400][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[1] timeout[120 s]",
     ERROR, Label.COMM_ERROR, "a public HCCL timeout collector's example record, its tail filled in from the same format"),
    ("[ERROR] HCCL(4102,python):2025-09-02-10:11:12.345.678 [channel.cc:412] [4190][InitChannel][Timeout] wait socket establish timeout, channel connect timeout after 120 sec, elapsed[120004]ms, retryCount[0]",
     ERROR, Label.COMM_ERROR, "HCCL's channel connect (HCCL_ERROR '[%s][%s] wait socket establish timeout, channel connect timeout after %lld sec, elapsed[%lld]ms, retryCount[%u]'), filled in"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # HCCL's link establishment that worked, and its configured timeout
    "[INFO] HCCL(3977573,all_reduce_test):2025-11-22-17:35:04.447.996 [hccl_socket_manager.cc:790] [3977663][Wait][LinkEstablish]socket establish success, role[0] rank[0]",
    "[INFO] HCCL(686,python):2025-10-23-07:52:59.191.363 [adapter.cc:120] [8970]HCCL_CONNECT_TIMEOUT is set to [120]s",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("[ERROR] HCCL(3977573,all_reduce_test):2025-11-22-17:37:04.448.974 [hccl_socket_manager.cc:855] [3977663][Create][Sockets]Wait links establish completed failed, local role is client. ret[9] [ERROR] HCCL(3977573,all_reduce_test):2025-11-22-17:37:04.447.996 [hccl_socket_manager.cc:816] [3977663][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]",
     Label.COMM_ERROR),  # two records on one line, as the corpus's page joined them
]

#: a CPER record of a corrected error, in the black box's layout and the kernel's words: the word "Error" makes
#: it a record of severity ERROR (as with the colon), but it states no hardware fault
NO_CAUSE = [
    "{1}[Hardware Error] event severity: corrected",
    "{1}[Hardware Error] It has been corrected by h/w and requires no further action",
    "{2}[Hardware Error] Error 0, type: corrected",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_a_markdown_escaped_mindspore_report_reads_as_the_unescaped_one(tmp_path: Path) -> None:
    """A MindSpore report pasted outside a code block keeps the backslash Discourse put before a line's leading
    dash; its sections are the report's all the same: the Ascend error message under the record decides."""
    escaped = (CORPUS / "collective_hang/mindspore-forum-1156-ee9999-event-wait-timeout-sync-stream.log").read_text()
    plain = escaped.replace("\\-", "-")
    assert plain != escaped
    path = tmp_path / "plain.log"
    path.write_text(plain)
    for log in (str(CORPUS / "collective_hang/mindspore-forum-1156-ee9999-event-wait-timeout-sync-stream.log"),
                str(path)):
        verdict = diagnose_paths([log]).verdict
        assert verdict.label is Label.COLLECTIVE_HANG, verdict.reason


def test_a_dash_line_of_a_healthy_log_is_no_report() -> None:
    """The escaped rule is read only as a MindSpore report's section under an error: alone it is nothing."""
    assert read_line("\\----------------------------------------------------") is None


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("hardware_error/hiascend-troubleshooting-8-hbm-multi-bit-ecc-kbox.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("collective_hang/mindspore-forum-1156-ee9999-event-wait-timeout-sync-stream.log", Label.COLLECTIVE_HANG,
     Action.RESTART),
    ("comm_error/hiascend-hcclug-50-ei0006-wait-socket-establish-timeout.log", Label.COMM_ERROR, Action.RESTART),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_form_rules_counts_this_round() -> None:
    """What a line reads as changed: the knowledge base's fingerprint must change with it."""
    assert FORM_RULES >= 42
