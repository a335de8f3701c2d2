# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part G of the misses of round issue23-heldout-38 (consumer-GPU, Windows/WSL2 and Apple-silicon
trainers), each as a rule of its family, with real lines and the near misses the rule must leave alone: Windows' error
for an exhausted commit limit (1455), bitsandbytes' failed CUDA set-up, Sockeye's refusals to resume. Each line is from
the corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round38g import round38g_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

WECLIP_1455 = 'OSError: [WinError 1455] 页面文件太小，无法完成操作。 Error loading "D:\\Anaconda3\\envs\\wssam\\lib\\site-packages\\torch\\lib\\cudnn_cnn_infer64_8.dll" or one of its dependencies.'
BNB_MESSAGE = "        CUDA Setup failed despite GPU being available. Inspect the CUDA SETUP outputs above to fix your environment!"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Windows' commit limit (error 1455) in CPython's, Rust's and .NET's words
    (WECLIP_1455, ERROR, Label.OOM, "corpus (WeCLIP-5-winerror-1455-paging-file-too-small-loading-cudnn)"),
    ('OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "D:\\anaconda3\\envs\\yolov5\\lib\\site-packages\\torch\\lib\\caffe2_detectron_ops_gpu.dll" or one of its dependencies.',
     ERROR, Label.OOM, "ultralytics/yolov5#11418 (a training's spawned workers on Windows)"),
    ("Server execution error: The paging file is too small for this operation to complete. (os error 1455)", ERROR,
     Label.OOM, "Acly/krita-ai-diffusion#1898 (Rust's std::io::Error under the server's message)"),
    ("System.ComponentModel.Win32Exception: The paging file is too small for this operation to complete.", ERROR,
     Label.OOM, "millerscout/Kenshi-Mod-Manager#893 (.NET's Win32Exception)"),
    # bitsandbytes' failed CUDA set-up
    (BNB_MESSAGE, ERROR, Label.CONFIG_ERROR, "corpus (bitsandbytes-271-windows-cuda-setup-failed-despite-gpu)"),
    ("RuntimeError: CUDA Setup failed despite GPU being available. Please run the following command to get more information:",
     ERROR, Label.CONFIG_ERROR, "bitsandbytes-foundation/bitsandbytes#1307's title (the message glued to its class)"),
    ("Exception: CUDA SETUP: Setup Failed!", ERROR, Label.CONFIG_ERROR,
     "bitsandbytes 0.35-0.37 cextension.py's raise Exception('CUDA SETUP: Setup Failed!'), as bmaltais/kohya_ss#465 ends"),
    # Sockeye's refusals to resume
    ("Mismatch in arguments for training continuation.", ERROR, Label.CONFIG_ERROR,
     "corpus (sockeye-990-windows-mismatch-arguments-training-continuation)"),
    ("[ERROR:__main__] Refusing to overwrite existing output folder wmt_model.", ERROR, Label.CONFIG_ERROR,
     "sockeye/train.py check_resume's logger.error(\"Refusing to overwrite existing output folder %s.\", ...) under a logger's head"),
    ("Refusing to overwrite model folder model as it seems to contain a trained model.", ERROR, Label.CONFIG_ERROR,
     "sockeye/train.py check_resume (2.x, 3.x), printed before its logger is set up"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "Increase the size of the Windows page file, or upgrade your system RAM.",  # ComfyUI#8065's advice: prose
    "Had manual page file of 16GB, used all of it, set to 32GB, still wasn't enough.",  # kohya_ss#48: prose
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [kubernetes.docker.internal]:29500 (system error: 10049 - The requested address is not valid in its context.).",  # another Windows error: round 26 part B's
    "Windows error codes: 1455 is ERROR_COMMITMENT_LIMIT, see the page file settings",  # a code named in prose
    "CUDA SETUP: CUDA runtime path found: C:\\Users\\luoxiaojie\\.conda\\envs\\pytorch212-lxj\\bin\\cudart64_12.dll",  # bitsandbytes' progress (LlamaFactory#4296)
    "    raise Exception('CUDA SETUP: Setup Failed!')",  # the traceback's source line, not its exception
    "│   21 │   │   CUDA Setup failed despite GPU being available. Please run the following command     │",  # rich's traceback box showing the source (kohya_ss#1523)
    "The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.",  # a warning: the CPU build loads
    '                logger.error("Mismatch in arguments for training continuation.")',  # Sockeye's source
    "Differing arguments: use_cpu.",  # the list after the refusal, alone
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 63


def test_the_dll_a_1455_error_names_does_not_make_it_a_missing_library() -> None:
    """CPython's line names the DLL it was loading when Windows refused to commit memory: the code is the cause."""
    form = round38g_form(WECLIP_1455)
    assert form is not None and form.label is Label.OOM


def test_a_training_whose_workers_fail_with_1455_is_out_of_memory(tmp_path: Path) -> None:
    """A spawned worker's traceback ending on error 1455: host memory (oom), not a missing library."""
    log = tmp_path / "weclip.log"
    log.write_text("Traceback (most recent call last):\n"
                   '  File "D:\\Anaconda3\\envs\\wssam\\lib\\site-packages\\torch\\__init__.py", line 124, in <module>\n'
                   "    raise err\n" + WECLIP_1455 + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM


def test_bitsandbytes_message_under_a_bare_class_line_is_a_config_error(tmp_path: Path) -> None:
    """CPython prints "RuntimeError:" alone and the message on the next line: the message states the cause."""
    log = tmp_path / "bnb.log"
    log.write_text('  File "B:\\python\\lib\\site-packages\\bitsandbytes\\cextension.py", line 22, in <module>\n'
                   "    raise RuntimeError('''\nRuntimeError:\n" + BNB_MESSAGE + "\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR


def test_a_healthy_run_with_page_file_advice_stays_healthy(tmp_path: Path) -> None:
    """Advice about the page file in a run that goes on is no failure."""
    log = tmp_path / "healthy.log"
    log.write_text("tip: if training fails, increase the size of the Windows page file\n"
                   "steps:  10%|█         | 100/1000 [01:00<09:00,  1.67it/s, avr_loss=0.105]\n"
                   "steps:  20%|██        | 200/1000 [02:00<08:00,  1.67it/s, avr_loss=0.098]\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.HEALTHY
