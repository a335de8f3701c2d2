# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-33 (classic vision and diffusion training stacks), each
as a rule of its family, with real lines and the near misses the rule must leave alone: torch elastic's event record of
a failed worker, the shell's report of a SIGKILLed job in its locale's words, IPython's header of an exception raised in
a notebook cell, and a YOLO trainer's progress row with a NaN loss. Each line is from the corpus (named by its excerpt)
or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import NEEDLES, FormKind, read_line
from neuron_watch.diagnosis.heldout.round33c import KILLED_WORDS
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

CRASH = FormKind.CRASH
METRIC = FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # torch elastic's event record of a worker that failed
    ('{"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, "metadata": {"run_id": "none", "global_rank": 0, "group_rank": 0, "worker_id": "63726", "role": "default", "hostname": "dgx-r107-3.ling", "state": "FAILED", "total_run_time": 14844, "rdzv_backend": "st',
     CRASH, None, "corpus (mmagic-531-torchelastic-failed-after-5000-iters), cut by the paste's wrap"),
    ('{"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, "metadata": {"run_id": "none", "global_rank": 0, "group_rank": 0, "worker_id": "2814", "role": "default", "hostname": "3bf6c7a0a073", "state": "FAILED", "total_run_time": 40, "rdzv_backend": "static", "raw_error": "{\\"message\\": \\"<NONE>\\"}", "metadata": "{\\"group_world_size\\": 1, \\"entry_point\\": \\"python\\", \\"local_rank\\": [0], \\"role_rank\\": [0], \\"role_world_size\\": [1]}", "agent_restarts": 3}}',
     CRASH, None, "mmdetection#6934 (dist_train.sh in a container)"),
    # the shell's report of a SIGKILLed job in its locale's words
    ("[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>         ] 3217/3849, 4.0 task/s, elapsed: 799s, ETA:   157s已杀死",
     CRASH, None, "corpus (mmseg-308-killed-during-validation): glued to mmcv's progress bar"),
    ("[1]+  已杀死               nohup java -jar dlfc-framework-bigdata-statistical-1.0-SNAPSHOT.jar",
     CRASH, None, "a public repository's notes: bash's job table after kill -9"),
    # IPython's header of an exception raised in a notebook cell
    ("ProcessRaisedException                    Traceback (most re",
     CRASH, None, "corpus (detectron2-2861-launch-called-trainer-train), cut in the header"),
    ("RuntimeError                              Traceback (most recent call last)",
     CRASH, None, "roboflow/notebooks#208 (YOLOv8 training in Colab); corpus jax-18780's, round 24a's near miss before"),
    ("Exception                                 Traceback (most recent call last)",
     CRASH, None, "detectron2#3360 (launch from a notebook with two GPUs)"),
    # a YOLO trainer's progress row with a NaN loss
    ("   0/272     18/7328       nan       nan       nan       nan       nan       116     0.273",
     METRIC, Label.NUMERICAL_ERROR, "corpus (yolov3-215-nan-loss-columns)"),
    (" 1/50    2.1G       nan       nan       nan         42    640: 0% ━    50/82325 0.0it/s",
     METRIC, Label.NUMERICAL_ERROR, "a public repository's ultralytics training guide ('Bad Training')"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # torch elastic's event of a worker or an agent that did not fail
    '{"name": "torchelastic.worker.status.SUCCEEDED", "source": "AGENT", "timestamp": 0, "metadata": {"run_id": "none", "global_rank": null, "group_rank": 0, "worker_id": null, "role": "default", "hostname": "3bf6c7a0a073", "state": "SUCCEEDED", "total_run_time": 40, "rdzv_backend": "static", "raw_error": null, "metadata": "{\\"group_world_size\\": 1, \\"entry_point\\": \\"python\\"}", "agent_restarts": 3}}',  # mmdetection#6934
    # the words in a script's echo or in a program's text, not the shell's report
    '            success "已杀死服务器进程: $PIDS"',  # a deployment script
    '            echo -e "\\n${p} 进程已杀死"',  # a process-killing script
    '    echo "已杀死所有 afl-fuzz 进程。"',  # a fuzzing script
    '\t\t\t\tAddText(sceneId,"已杀死叶二娘1/1");',  # a game's quest script
    # IPython's header of the user's own stop
    "KeyboardInterrupt                         Traceback (most recent call last)",  # a public notebook's output
    # a healthy YOLO row, and rows of other tables with NaN
    " 1/50    2.1G     0.987     0.845     0.912         42    640: 12% ━━━━  1000/82325 ~18it/s",  # the same guide's 'Good Training'
    "     80/400      29.9G     0.6966     0.3341      1.085         31        640: 100%|██████████| 351/351 [04:18<00:00,  1.36it/s]",  # corpus (ultralytics-673-epoch-stalls-then-traceback)
    "b       NaN       NaN       NaN  NaN    NaN",  # pandas' documentation of missing values
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize("word", KILLED_WORDS)
def test_every_locales_report_is_a_kill(word: str) -> None:
    """Each locale's strsignal(SIGKILL) (glibc's libc.mo catalogues, msgid "Killed") in bash's job table and glued to
    mmcv's bar reads as a job that was killed, and the line holds a needle of the classifier's batch search."""
    for line in (f"[2]+  {word}                 python train.py",
                 f"[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>         ] 3217/3849, 4.0 task/s, elapsed: 799s, ETA:   157s{word}"):
        form = read_line(line)
        assert form is not None and form.kind is CRASH, line
        template = "\n" + line.translate(str.maketrans("", "", "0123456789"))
        assert any(n in template for n in NEEDLES), line


def test_a_failed_worker_event_is_a_crash_not_healthy(tmp_path: Path) -> None:
    """A log whose last words are torch elastic's records of failed workers is a crash of unknown cause; one of
    SUCCEEDED records stays healthy."""
    failed = tmp_path / "failed.log"
    failed.write_text("INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (FAILED). Waiting 300 seconds for other agents to finish\n"
                      + FORMS[1][0] + "\n")
    assert diagnose_paths([str(failed)], now=0.0).verdict.label is Label.OTHER_CRASH
    succeeded = tmp_path / "succeeded.log"
    succeeded.write_text(NEAR_MISSES[0] + "\n")
    assert diagnose_paths([str(succeeded)], now=0.0).verdict.label is Label.HEALTHY
