# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for half B of the misses of round issue23-heldout-26 (a shell's own record of a command it could not
run; the linker's library it could not find; a traceback through Inductor's code generation; an address the host
cannot use; flashinfer's JIT build as a phase; a glog-layout record glued to a progress bar), as rules of their
families, with real lines and the near misses each rule must leave alone. Each line is from the corpus (named by its
excerpt), from a public thread or page (named), or is the format the program's source prints, filled in (the source
is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.diagnosis.logtext import logical_lines
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import table_tests

E = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a shell's or env's own record of a command it could not run (bash's execute_cmd.c, coreutils env.c)
    ("(sky-service-7080, pid=2846) bash: /usr/bin/python: No such file or directory", E, Label.CONFIG_ERROR,
     "corpus (skypilot-5462-serve-run-usr-bin-python-missing-succeeded), under SkyPilot's task prefix"),
    ("-bash: /usr/bin/python: No such file or directory", E, Label.CONFIG_ERROR,
     "an OpenHarmony build FAQ, 'Failed to Find Python' (code corpus)"),
    ("-bash: /usr/bin/yum: /usr/bin/python: bad interpreter: No such file or directory", E, Label.CONFIG_ERROR,
     "a CentOS note, yum's #! naming a python that was removed (code corpus)"),
    ("/usr/bin/env: \u2018python\u2019: No such file or directory", E, Label.CONFIG_ERROR,
     "coreutils env's error (env.c: error (..., quote (argv[optind]))), as Ubuntu without python-is-python3 prints it"),
    ("bash: ./train.sh: Permission denied", E, Label.CONFIG_ERROR,
     "bash's execute_cmd.c for a script without the execute bit (the format, filled in)"),
    # the linker's library it could not find (GNU ld ldfile.c "cannot find %s", lld)
    ("/usr/bin/ld: cannot find -lcuda: No such file or directory", E, Label.CONFIG_ERROR,
     "corpus (pytorch-103417-inductor-ld-cannot-find-lcuda)"),
    ("/usr/bin/ld: cannot find -lcudart", E, Label.CONFIG_ERROR,
     "a JIT-build troubleshooting note: pip's CUDA wheels ship no unversioned libcudart.so (code corpus)"),
    ("          /usr/bin/ld: cannot find -lcublas", E, Label.CONFIG_ERROR,
     "a Rust CUDA crate's README, the linker's note under cargo (code corpus)"),
    ("error: cannot find -lcudart", E, Label.CONFIG_ERROR,
     "a project's troubleshooting section, mmcv's build (code corpus)"),
    ("ld.lld: error: unable to find library -lcuda", E, Label.CONFIG_ERROR,
     "lld's Driver.cpp 'unable to find library -l' (the format, filled in)"),
    # a traceback through Inductor's code generation, either separator
    ('  File "D:\\ComfyUI_windows_portable\\python_embeded\\Lib\\site-packages\\torch\\_inductor\\codegen\\simd.py", line 1155, in codegen_node', E, Label.COMPILE_ERROR,
     "corpus (triton-windows-49-cuda-version-parse-12-8)"),
    ('  File "/usr/local/lib/python3.10/dist-packages/torch/_inductor/codegen/triton.py", line 2661, in codegen_kernel', E, Label.COMPILE_ERROR,
     "torch/_inductor/codegen/triton.py's codegen_kernel, a Linux install's path (the frame's format, filled in)"),
    # flashinfer's JIT build (flashinfer/jit/core.py: logger.info(f"Loading JIT ops: {name}"), "Finished loading ...")
    ("flashinfer.jit:Loading JIT ops:batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False",
     FormKind.COMPILE_RUNNING, None, "corpus (flashinfer-972-sglang-stuck-loading-jit-ops-batch-prefill)"),
    ("2025-06-08 21:06:35,733 - INFO - flashinfer.jit: Loading JIT ops: cascade", FormKind.COMPILE_RUNNING, None,
     "an SGLang deployment note, the first request's JIT build (code corpus)"),
    ("# 2025-02-27 12:24:22,992 - INFO - flashinfer.jit: Loading JIT ops: batch_mla_attention_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_ckv_512_head_dim_kpe_64",
     FormKind.COMPILE_RUNNING, None, "a vLLM launch script's comment on the slow first inference (code corpus)"),
    ("2025-06-08 21:06:35,741 - INFO - flashinfer.jit: Finished loading JIT ops: cascade", FormKind.COMPILE_DONE, None,
     "the same SGLang note, the build ending 8 ms later (code corpus)"),
    ("2025-10-11 10:24:21,540 - INFO - flashinfer.jit: Finished loading JIT ops: norm", FormKind.COMPILE_DONE, None,
     "corpus (tensorrt-llm-8286-deepseek-r1-b200-startup-jit-and-kv-cache)"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # the strerror words from a program that is not a shell, about its own argument
    "ls: cannot access '/data/ckpt': No such file or directory",
    # a shell's warning that is not a command it could not run
    "bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)",
    # the linker's words in prose, and a library it found
    "Some Ubuntu users have encountered linker errors when using CUDA_LIBRARY_PATH. If you see an error",
    "/usr/bin/ld: warning: libcudart.so.12, needed by libtorch_cuda.so, may conflict with libcudart.so.11",
    # Inductor's modules outside code generation, and a frame of a program's own codegen package
    '  File "/usr/lib/python3/site-packages/torch/_inductor/utils.py", line 1731, in is_big_gpu',
    '  File "/app/myproject/codegen/emit.py", line 12, in emit',
    # a JIT in another library's words
    "Loading extension for JIT kernels is disabled",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


@pytest.mark.parametrize(("line", "label"), [
    # EADDRNOTAVAIL in Windows' words and number, and in the C library's
    ("mlflow.exceptions.MlflowException: API request to http://0.0.0.0:6001/api/2.0/mlflow/runs/update failed with exception HTTPConnectionPool(host='0.0.0.0', port=6001): Max retries exceeded with url: /api/2.0/mlflow/runs/update (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x000002C67D44AB00>: Failed to establish a new connection: [WinError 10049] The requested address is not valid in its context'))",
     Label.CONFIG_ERROR),  # corpus: mlflow-11274
    ("[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-VJ24R86]:29500 (system error: 10049", Label.CONFIG_ERROR),  # corpus: yolo-world-201
    ("RuntimeError: The server socket has failed to bind to 10.0.0.5:29500 (errno: 99 - Cannot assign requested address).", Label.CONFIG_ERROR),  # c10d's bind record, the format filled in
])
def test_an_address_the_host_cannot_use_is_configuration(line: str, label: Label) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is label, stated


@pytest.mark.parametrize("line", [
    "[E ProcessGroupNCCL.cpp:341] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.",  # corpus: yolov7-714
    "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",  # huggingface/trl#1051
])
def test_nccls_abort_notice_is_a_collective_that_did_not_complete(line: str) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is Label.COLLECTIVE_HANG, stated


@pytest.mark.parametrize("line", [
    "[rank7]: FileExistsError: [Errno 17] File exists: '/000010_locals'",  # corpus: streaming-781 (shm_open)
    "  FileExistsError: [Errno 17] File exists: '/root/.cache/huggingface/lerobot/pepijn223/il_gym0'",  # a LeRobot troubleshooting guide (code corpus)
    "#     FileExistsError: [Errno 17] File exists: '/tmp/hicache'",  # an SGLang deployment note, two ranks creating one path (code corpus)
])
def test_a_path_already_there_is_configuration(line: str) -> None:
    stated = cause_of(line)
    assert stated is not None and stated[0] is Label.CONFIG_ERROR, stated


def test_a_missing_file_is_not_a_path_already_there() -> None:
    """ENOENT is a file not there, stated by its own forms; EEXIST's words are not in it."""
    stated = cause_of("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/test_do/a/b/c'")
    assert stated is None or "EEXIST" not in stated[1], stated


def test_an_nccl_warning_is_not_the_abort_notice() -> None:
    """NCCL's own WARN of a connect it retries says nothing of work that failed."""
    stated = cause_of("node1:2338:2379 [2] NCCL INFO Channel 19/0 : 2[2] -> 1[1] via P2P/CUMEM")
    assert stated is None or stated[0] is not Label.COLLECTIVE_HANG, stated


def test_a_refused_connection_is_not_an_address_the_host_cannot_use() -> None:
    """ECONNREFUSED names a peer that is not listening, not a wrong address of this host."""
    stated = cause_of("ConnectionRefusedError: [Errno 111] Connection refused")
    assert stated is None or stated[0] is not Label.CONFIG_ERROR, stated


@pytest.mark.parametrize(("line", "records"), [
    # torch's own logging (glog's layout) where axolotl's tqdm bar ended (corpus: axolotl-2215)
    (" 10%|▉         | 51/525 [2:12:20<20:11:06, 153.30s/it]W1221 17:13:59.240000 46660 torch/distributed/elastic/agent/server/api.py:704] Received 1 death signal, shutting down workers",
     [" 10%|▉         | 51/525 [2:12:20<20:11:06, 153.30s/it]",
      "W1221 17:13:59.240000 46660 torch/distributed/elastic/agent/server/api.py:704] Received 1 death signal, shutting down workers"]),
    # torch elastic's failure record where a shard-loading bar ended (a fine-tuning notebook's output, code corpus)
    ("Loading checkpoint shards:  50% 1/2 [00:49<00:49, 49.97s/it]E0825 17:31:27.240000 139795859210880 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: -9) local_rank: 0 (pid: 8158) of binary: /usr/bin/python3",
     ["Loading checkpoint shards:  50% 1/2 [00:49<00:49, 49.97s/it]",
      "E0825 17:31:27.240000 139795859210880 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: -9) local_rank: 0 (pid: 8158) of binary: /usr/bin/python3"]),
    # Inductor's warning after an epoch bar at 0: split too, and a warning it stays (a training report, code corpus)
    ("  0% 0/695 [00:00<?, ?it/s]W0429 14:43:58.576000 2088 torch/_inductor/utils.py:1731] [0/0_1] Not enough SMs to use max_autotune_gemm mode",
     ["  0% 0/695 [00:00<?, ?it/s]",
      "W0429 14:43:58.576000 2088 torch/_inductor/utils.py:1731] [0/0_1] Not enough SMs to use max_autotune_gemm mode"]),
    # a word that only starts like a level letter stays on the bar's line
    ("  3%|▎         | 3/100 [00:01<00:40,  2.40it/s]W1 batch skipped", ["  3%|▎         | 3/100 [00:01<00:40,  2.40it/s]W1 batch skipped"]),
])
def test_a_glog_record_glued_to_a_progress_bar_is_its_own_line(line: str, records: list[str]) -> None:
    assert logical_lines(line) == records


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/skypilot-5462-serve-run-usr-bin-python-missing-succeeded.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/mlflow-11274-windows-tracking-uri-0000-winerror-10049.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/yolo-world-201-dist-train-one-gpu-windows-socket-10049.log", Label.CONFIG_ERROR, Action.STOP),
    ("compiling/flashinfer-972-sglang-stuck-loading-jit-ops-batch-prefill.log", Label.COMPILING, Action.WAIT),
    # the agent told to die where the bar ended: not a healthy run (the thread's cause, a library version, is not
    # in the log)
    ("config_error/axolotl-2215-accelerate-121-death-signal-sighup-mid-epoch.log", Label.OTHER_CRASH, Action.RESTART),
    # frames of Inductor's code generation and no exception line: a compile that failed, not a healthy log
    ("config_error/triton-windows-49-cuda-version-parse-12-8.log", Label.COMPILE_ERROR, Action.STOP),
    # NCCL's abort notice over the launcher's exit 1: the collective that did not complete
    ("collective_hang/yolov7-714-nccl-timeout-during-long-validation.log", Label.COLLECTIVE_HANG, Action.RESTART),
    # stale shared memory a killed run left (round 25)
    ("config_error/streaming-781-stale-shm-locals-file-exists-after-ctrl-c.log", Label.CONFIG_ERROR, Action.STOP),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason


def test_a_jit_build_that_ended_is_not_a_compile_at_work(tmp_path: pytest.TempPathFactory) -> None:
    """The build's end after its start (the SGLang note's pair), then the server's batches: not compiling."""
    log = tmp_path / "sglang.log"  # type: ignore[operator]
    log.write_text(
        "[2025-06-08 21:06:35] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 1, token usage: 0.00, #running-req: 0, #queue-req: 0\n"
        "2025-06-08 21:06:35,733 - INFO - flashinfer.jit: Loading JIT ops: cascade\n"
        "2025-06-08 21:06:35,741 - INFO - flashinfer.jit: Finished loading JIT ops: cascade\n"
        "[2025-06-08 21:06:36] Decode batch. #running-req: 1, #token: 41, token usage: 0.00, cuda graph: True, gen throughput (token/s): 3.21, #queue-req: 0\n")
    verdict = diagnose_paths([str(log)]).verdict
    assert verdict.label is Label.HEALTHY, verdict.reason
