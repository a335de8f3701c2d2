# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part F of the misses of round issue23-heldout-34 (multi-node and disaggregated inference serving),
each as a rule of its family, with real lines and the near misses the rule must leave alone: a KV cache the prefill
and decode servers could not hand over, ProcessGroupNCCL's dump signal of a timed-out collective, vLLM's wait for a Ray
placement group, the kubelet's liveness probe and its kill, DeepGEMM's JIT compile, TensorRT-LLM's check of its world
against the engine's parallel layout, and an exception saying what the job asks is not supported. Each line is from the
corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.unit.form_table import table_tests
from tests.unit.test_forms_round11 import PROGRESS, _verdict

ERROR = FormKind.ERROR
CRASH = FormKind.CRASH
COMPILING = FormKind.COMPILE_RUNNING

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # a KV-cache hand-over between disaggregated servers that failed
    ("[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce84ffb82764f45b028dd8e6c4beed1' decode_req.req.bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room=1655955501905217457): Failed due to an unknown reason from another rank",
     ERROR, Label.COMM_ERROR, "corpus (sglang-10560-pd-mooncake-decode-transfer-failed-health-ok)"),
    ("[2025-06-12 14:05:26] Prefill transfer failed for request rank=0 req.rid='e34851ad4e1b416884601047c6ce8004' req.bootstrap_room=8804230600348159981 with exception",
     ERROR, Label.COMM_ERROR, "sglang#7118 (the prefill side, cut by the paste)"),
    ("(Worker pid=782969) (Worker_DP0_TP1_EP1 pid=782969) ERROR 03-31 02:49:30 [mooncake_connector.py:547] Mooncake transfer failed for request chatcmpl-ba310df4-f600-441c-a0b5-0cb772aaf8ed-8b8ee10a",
     ERROR, Label.COMM_ERROR, "corpus (vllm-ascend-7846-mooncake-sync-transfer-timeout)"),
    ("E0328 09:06:16.412825 114360 client_service.cpp:1126] Transfer failed for key 0318-GLM-5-w4a8@pcp0@dcp0@head_or_tp_rank:0@pp_rank:0@4c67fd4f7e2de4f575e8cc9209391b6f90a04ac0c2938f5921a25668a26eaf57: TRANSFER_FAIL (Transfer 0 failed)",
     ERROR, Label.COMM_ERROR, "corpus (vllm-ascend-7792-mooncake-transfer-slice-failed): Mooncake's ErrorCode"),
    ("E0328 09:06:16.412760 112112 ascend_direct_transport.cpp:836] Transfer slice failed with status: 503900",
     ERROR, Label.COMM_ERROR, "corpus (vllm-ascend-7792-mooncake-transfer-slice-failed)"),
    ("E1215 11:46:28.725225   497 ascend_direct_transport.cpp:611] Transfer slice failed with status: 103901",
     ERROR, Label.COMM_ERROR, "a public repository's notes of a vLLM-Ascend PD run (Mooncake's ADXL transport)"),
    # ProcessGroupNCCL's dump signal of a collective that timed out, the dump it makes, a peer's signal seen
    ("[rank6]:[E909 08:45:31.970959174 ProcessGroupNCCL.cpp:1870] [PG ID 0 PG GUID 0 Rank 6] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: -1.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ",
     ERROR, Label.COLLECTIVE_HANG, "corpus (sglang-10216-two-node-deepseek-dump-signal-collective-timeout)"),
    ("[rank6]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info. Last enqueued NCCL work: 56116, last completed NCCL work: 56116.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reason",
     ERROR, Label.COLLECTIVE_HANG, "a public repository's benchmark notes (an OpenAI-compatible server's log tail)"),
    ("[rank2]:[E909 08:45:31.916910323 ProcessGroupNCCL.cpp:1589] [PG ID 0 PG GUID 0 Rank 2] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
     ERROR, Label.COLLECTIVE_HANG, "corpus (sglang-10216-two-node-deepseek-dump-signal-collective-timeout)"),
    ("[rank2]:[E919 06:52:14.737942593 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1, only active collectives: 0",
     ERROR, Label.COLLECTIVE_HANG, "a public repository's hang report (before 'Terminating the process after attempting to dump debug info')"),
    ("(MegatronPolicyWorker[rank=0] pid=1892406, ip=10.65.5.217) [rank0]:[E129 16:38:47.634597716 ProcessGroupNCCL.cpp:1794] [PG ID 0 PG GUID 0(default_pg) Rank 0] Observed flight recorder dump signal from another rank via TCPStore.",
     ERROR, Label.COLLECTIVE_HANG, "a public repository's RL training log (a Ray worker's prefix)"),
    # a read from the c10d store that timed out
    ("[rank3]:[W208 00:55:32.444220068 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=103, addr=[::ffff:11.130.1.53]:52362, remote=[::ffff:11.130.1.53]:5000) timed out after 1800000ms",
     ERROR, Label.COMM_ERROR, "corpus (sglang-3398-two-node-c10d-wait-for-input-timed-out)"),
    ("[rank7]:[W410 21:36:52.177160212 socket.cpp:485] [c10d] waitForInput: socket timed out after 300000ms",
     ERROR, Label.COMM_ERROR, "a public repository's GPU stress-test notes (8 V100s, NCCL bootstrapping over a RoCE port)"),
    # vLLM's wait for a Ray placement group the cluster cannot give
    ("INFO 03-18 11:21:42 ray_utils.py:214] Waiting for creating a placement group of specs for 10 seconds. specs=[{'node:192.168.1.216': 0.001, 'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each",
     ERROR, Label.CONFIG_ERROR, "corpus (vllm-14997-ray-placement-group-waits-more-gpus-than-visible)"),
    ("INFO 02-02 19:54:30 ray_utils.py:212] Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0, 'node:172.31.42.4': 0.001}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'G",
     ERROR, Label.CONFIG_ERROR, "a public repository's digest of a vLLM issue (DeepSeek-V3, TP 8 x PP 2 on a local Ray)"),
    ("#   Waiting for creating a placement group of specs for 30 seconds.",
     ERROR, Label.CONFIG_ERROR, "a public repository's Polaris launch script (node IP and VLLM_HOST_IP that differ)"),
    # the kubelet's liveness probe of a path not served, and its kill
    ("  Warning  Unhealthy               25m (x3 over 25m)     kubelet                  Liveness probe failed: HTTP probe failed with statuscode: 404",
     ERROR, Label.CONFIG_ERROR, "corpus (llm-d-inference-sim-45-liveness-probe-404-restarts)"),
    ("  Warning  Unhealthy  24s (x6 over 104s)   kubelet            Liveness probe failed: HTTP probe failed with statuscode: 404",
     ERROR, Label.CONFIG_ERROR, "a public repository's Kubernetes tutorial (nginx probed at a path it does not serve)"),
    ("  Normal   Killing                 25m                   kubelet                  Container vllm-standalone-3b-vllm-llama-3-3b-instruct failed liveness probe, will be restarted",
     CRASH, None, "corpus (llm-d-inference-sim-45-liveness-probe-404-restarts)"),
    ("  Normal   Killing    60s                  kubelet            Container app-container failed liveness probe, will be restarted",
     CRASH, None, "a public repository's Kubernetes tutorial (a probe answered 500)"),
    # SGLang's DeepGEMM JIT compile at warm-up
    ("[2025-12-26 08:58:37 DP0 TP0 EP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`. It is recommended to run `sglang.compile_deep_gemm` with same args as `sglang.launch_server` for pre-compilation to reduce the overhead if you have not run it before. For example: `python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code`",
     COMPILING, None, "corpus (sglang-pr15891-deepgemm-jit-precompile-session)"),
    ("[2025-09-14 20:08:18 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=6144, K=2560, num_groups=1 with all Ms. It only takes a little time (typically 1 sec) if you have run `python3 -m sglang.compile_deep_gemm`.",
     COMPILING, None, "sglang#10424 (B200, bench_one_batch)"),
    # TensorRT-LLM's checks of its world against the engine's parallel layout
    ("`[TensorRT-LLM][ERROR] Assertion failed: With communicationMode kLEADER, MPI worldSize is expected to be equal to tp*pp when participantIds are not specified`",
     ERROR, Label.CONFIG_ERROR, "corpus (trtllm-2021-kleader-mpi-worldsize-not-tp-pp)"),
    ("[TensorRT-LLM][ERROR] Assertion failed: Number of GPUs per node 1 must be at least as large as TP (4) * PP (1)",
     ERROR, Label.CONFIG_ERROR, "tensorrtllm_backend#283's model table, the cell's message unwrapped (worldConfig.cpp TLLM_CHECK_WITH_INFO)"),
    # an exception saying what the job asks is not supported
    ("RuntimeError: PD Disaggregation does NOT support PD",
     ERROR, Label.CONFIG_ERROR, "corpus (llm-d-2433-sglang-pd-different-tp-unsupported)"),
    ("ValueError: Your setup doesn't support bf16/gpu. You need Ampere+ GPU with cuda>=11.0",
     ERROR, Label.CONFIG_ERROR, "corpus (unsloth-2783-t4-notebooks-bf16-unsupported)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # "transfer failed" after another noun: a kernel driver's record on a healthy host
    "[1084457.868999] ucsi_ccg 1-0008: i2c_transfer failed -110",  # corpus (nvidia-docker-1553-xid79-fallen-off-bus-container-unkillable)
    # the disaggregated server's health checks going on
    '[2025-09-17 16:23:16] INFO:     10.10.11.1:41712 - "GET /health HTTP/1.1" 200 OK',  # corpus (sglang-10560)
    # a readiness probe that fails while the server loads its model, and a liveness probe's failure before the kill
    "  Warning  Unhealthy  6s (x7 over 66s)  kubelet            Readiness probe failed: HTTP probe failed with statuscode: 404",  # a public repository's Kubernetes homework
    "  Warning  Unhealthy  28s (x3 over 48s)  kubelet            spec.containers{wordpress}: Liveness probe failed: HTTP probe failed with statuscode: 500",  # a public repository's tutorial (the kill after it is the form)
    # c10d's poll that returned nothing, before the timeout it reports
    "[rank7]:[W410 21:36:52.176066491 socket.cpp:460] [c10d] waitForInput: poll for socket",  # the same notes, wrapped
    # vLLM's Ray executor going on
    "INFO 02-22 21:02:44 ray_distributed_executor.py:149] use_ray_spmd_worker: False",  # vllm#13521
    # DeepGEMM's warm-up bar
    "DeepGEMM warmup: 100%|████████████████| 16384/16384 [00:00<00:00, 24214.84it/s]",  # corpus (sglang-pr15891)
    # a warning that falls back from what a library does not support, the run going on
    "(VllmWorker rank=3 pid=324) WARNING 07-24 18:08:58 [topk_topp_sampler.py:100] FlashInfer 0.2.3+ does not support per-request generators. Falling back to PyTorch-native implementation.",  # corpus (healthy)
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def _line(words: str, lines: list[str] | None = None) -> str:
    """The first line of the table (or of ``lines``) holding ``words``."""
    return next(line for line in (lines if lines is not None else [row[0] for row in FORMS]) if words in line)


HAND_OVER_FAILED = _line("Decode transfer failed")
HEALTH_OK = _line("GET /health HTTP/1.1", NEAR_MISSES)
DEEPGEMM_BAR = _line("DeepGEMM warmup", NEAR_MISSES)
PLACEMENT_GROUP_WAIT = _line("ray_utils.py:214] Waiting for creating a placement group")
PROBE_NOT_FOUND = _line("kubelet                  Liveness probe failed")
LIVENESS_KILL = _line("Container vllm-standalone-3b")


def test_a_compiler_refusal_stays_a_compile_failure() -> None:
    """A compiler that says its target does not support an operation failed to compile: the exception's refusal
    wording is not read as the job's configuration."""
    stated = cause_of("XlaRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: Target does not support this comparison")
    assert stated is None or stated[0] is not Label.CONFIG_ERROR


def test_a_failed_hand_over_while_health_checks_answer_is_a_failure() -> None:
    """A decode server whose KV transfers fail is not healthy because its health endpoint still answers 200."""
    assert _verdict([HAND_OVER_FAILED, HEALTH_OK, HEALTH_OK]) == (Label.COMM_ERROR, Action.RESTART)


def test_a_log_ending_in_the_deepgemm_session_is_compiling() -> None:
    """A warm-up that ends after DeepGEMM's JIT session began is a compile at work, not a healthy silence."""
    assert _verdict([DEEPGEMM_BAR, _line("Entering DeepGEMM JIT"), _line("Try DeepGEMM JIT")]) == (Label.COMPILING, Action.WAIT)


def test_a_placement_group_that_came_is_no_failure() -> None:
    """vLLM's wait for its placement group is the cause as the log's last word; a run that goes on got its group."""
    assert _verdict([*PROGRESS, PLACEMENT_GROUP_WAIT]) == (Label.CONFIG_ERROR, Action.STOP)
    assert _verdict([PLACEMENT_GROUP_WAIT, *PROGRESS])[0] is Label.HEALTHY


def test_a_liveness_kill_after_a_probe_of_a_path_not_served_is_configuration() -> None:
    """The kubelet's kill after a liveness probe answered 404 is the probe's configuration: restarting repeats it."""
    assert _verdict([PROBE_NOT_FOUND, LIVENESS_KILL]) == (Label.CONFIG_ERROR, Action.STOP)
