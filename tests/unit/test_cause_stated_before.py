"""diagnosis/offline.py cause_stated_before: a crash whose own line states no cause, after another process
stated one, takes that cause; child_exception_before: a launcher's report of a failed child, after the child's
own program-mistake or set-up refusal before any progress, is configuration.

Lines are real: ray-project/ray_lightning#32 (Ray Tune's trial runner under ``(pid=1521965)`` reports a
trainer's MisconfigurationException that the trainer under ``(pid=1521999)`` printed first), and the near
misses' lines from the corpus (a peer's connection reset, an error whose class states its cause).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.offline import cause_stated_before
from neuron_watch.events import Action, Evidence, Label, RankKey, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real-logs"

WRAPPER = "2021-04-06 13:13:53,489\tERROR function_runner.py:254 -- Runner Thread raised error."
MACHINE_HAS = " But your machine only has: [0]"
RESET = "ConnectionResetError: [Errno 104] Connection reset by peer"
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
            "of 79.15 GiB of which 6.75 MiB is free.")
SEGV = "RuntimeError: DataLoader worker (pid 541564) is killed by signal: Segmentation fault."

OWN, PEER = RankKey("pid 1521965", -1), RankKey("pid 1521999", -1)


def _verdict(own: str, *others: tuple[str, float], label: Label = Label.OTHER_CRASH) -> Verdict:
    evidence = (Evidence(OWN, own, "host.unrecognised_error", mono=10.0),
                *(Evidence(PEER, text, "form.error", mono=t) for text, t in others))
    return Verdict(label, Action.RESTART, ranks=(OWN,), culprit=OWN, evidence=evidence)


@pytest.mark.parametrize(("verdict", "label"), [
    # another process stated the cause first: configuration, memory
    (_verdict(WRAPPER, (MACHINE_HAS, 9.5)), Label.CONFIG_ERROR),
    (_verdict(WRAPPER, (CUDA_OOM, 9.0), (MACHINE_HAS, 9.5)), Label.OOM),
    # near misses: a connection that broke is what peers see when one process dies; a cause stated after
    # the crash; the crash's own line states a cause; a verdict that is no crash
    (_verdict(WRAPPER, (RESET, 9.5)), None),
    (_verdict(WRAPPER, (MACHINE_HAS, 10.5)), None),
    (_verdict(CUDA_OOM, (MACHINE_HAS, 9.5)), None),
    (_verdict(SEGV, (RESET, 9.5)), None),
    (_verdict(WRAPPER, (MACHINE_HAS, 9.5), label=Label.COLLECTIVE_HANG), None),
], ids=["config-before", "earliest-decides", "peer-reset", "stated-after", "own-cause", "segv-reset", "not-a-crash"])
def test_the_cause_stated_before(verdict: Verdict, label: Label | None) -> None:
    found = cause_stated_before(verdict)
    assert (found.label if found is not None else None) is label
    if found is not None:
        assert found.culprit == PEER and found.evidence[0].key == PEER
        assert WRAPPER.strip()[:40] in found.reason


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "driver.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("first", "label"), [
    (f"(pid=1521999) {MACHINE_HAS}", Label.CONFIG_ERROR),
    (f"(pid=1521999) {RESET}", Label.OTHER_CRASH),
], ids=["trainer-states-config", "trainer-connection-reset"])
def test_two_processes_of_one_driver_log(tmp_path: Path, first: str, label: Label) -> None:
    lines = [first, "(pid=1522026) Loading train dataset...", f"(pid=1521965) {WRAPPER}",
             "(pid=1521965) Traceback (most recent call last):",
             '(pid=1521965)   File "/home/griffin/cl/lib/python3.8/site-packages/ray/tune/function_runner.py", '
             "line 248, in run", "(pid=1521965)     self._entrypoint()"]
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.label is label


def test_the_corpus_excerpt() -> None:
    path = CORPUS / "config_error" / "ray-lightning-32-misconfiguration-requested-gpus-not-available.log"
    verdict = diagnose_paths([str(path)]).verdict
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP


#: yuvalkirstain/PickScore#2: accelerate's ValueError, then torchrun's elastic agent reporting the child's exit
CHILD = ["ValueError: When using `deepspeed_config_file`, the following accelerate config variables will be ignored: "
         "['gradient_accumulation_steps', 'gradient_clipping',",
         "'zero_stage', 'offload_optimizer_device', 'offload_param_device', 'zero3_save_16bit_model', "
         "'mixed_precision'].",
         "Please specify them appropriately in the DeepSpeed config file."]
REPORT = "[01:26:13] ERROR    failed (exitcode: 1) local_rank: 0 (pid: 1527604) of binary: /usr/bin/python3"


@pytest.mark.parametrize(("lines", "label"), [
    ([*CHILD, REPORT], Label.CONFIG_ERROR),
    (["RuntimeError: Collective ops must be configured at program startup", REPORT], Label.CONFIG_ERROR),
    # near misses: progress before it; a child's crash of its own; no exception above the report
    (["{'loss': 2.3412, 'learning_rate': 5e-05, 'epoch': 0.01}", *CHILD, REPORT], Label.OTHER_CRASH),
    (["RuntimeError: CUDA error: an illegal memory access was encountered", REPORT], Label.OTHER_CRASH),
    (["Loading checkpoint shards: 100%", REPORT], Label.OTHER_CRASH),
], ids=["program-mistake", "refusal", "after-progress", "child-crash", "no-exception"])
def test_a_launcher_report_after_the_childs_exception(tmp_path: Path, lines: list[str], label: Label) -> None:
    verdict = diagnose_paths([_write(tmp_path, lines)]).verdict
    assert verdict.label is label
    if label is Label.CONFIG_ERROR:
        assert verdict.evidence[0].text == lines[0] and REPORT.strip()[:40] in verdict.reason


def test_the_launcher_report_in_the_corpus() -> None:
    path = CORPUS / "config_error" / "pickscore-2-accelerate-deepspeed-config-valueerror.log"
    verdict = diagnose_paths([str(path)]).verdict
    assert verdict.label is Label.CONFIG_ERROR and verdict.action is Action.STOP
