# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for third C of the misses of round issue23-heldout-27, each as a rule of its family, with real lines and
the near misses the rule must leave alone: a child ended by a fatal signal in Go's words, an AMD GPU whose reset
failed, the Ascend runtime unable to count its devices, an operator CANN has no kernel binary for, Paddle's
data-loader bus error, llama.cpp's model loader, a program's report of a non-finite loss; and the causes some error
lines state: a connection refused by the host itself, an archive that is corrupt, TensorRT's failed engine build,
oneCCL's transport that did not start. Each line is from the corpus (named by its excerpt), from a public thread or
page (named), or is the format the program's source prints (the source is named)."""

from __future__ import annotations

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import FormKind, cause_of
from neuron_watch.events import Action, Label
from tests.fixtures.real_logs import CORPUS
from tests.unit.form_table import cause_tests, table_tests

ERROR, CRASH, METRIC = FormKind.ERROR, FormKind.CRASH, FormKind.METRIC

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # Go's ProcessState of a child a fatal signal ended (SIGILL's cause is the judge's start-up reading)
    ("Dec 19 10:46:26 wt-chatbot-v1 ollama[639]: 2023/12/19 10:46:26 llama.go:451: signal: illegal instruction",
     CRASH, None, "corpus (ollama-1603-vm-cpu-runner-illegal-instruction)"),
    ("llama runner process has terminated: signal: illegal instruction (core dumped)", CRASH, None,
     "ollama/ollama#6044 (a runner built with AVX-512 on a CPU without it)"),
    ("llama runner stopped with error: signal: illegal instruction (core dumped)", CRASH, None,
     "ollama/ollama#788 (an old ThinkPad's CPU)"),
    ("error: signal: segmentation fault (core dumped)", CRASH, None,
     "Go os/exec_posix.go ProcessState.String ('signal: ' + the syscall table's name, ' (core dumped)'), filled in"),
    # the amdgpu driver's GPU reset that failed
    ("[22344.295194] amdgpu 0000:03:00.0: amdgpu: GPU mode1 reset failed", ERROR, Label.HARDWARE_ERROR,
     "corpus (legacy-rocm-build-2494-multigpu-training-mode1-reset-failed-psp)"),
    ("[22344.456139] amdgpu 0000:83:00.0: amdgpu: ASIC reset failed with error, -121 for drm dev, 0000:83:00.0",
     ERROR, Label.HARDWARE_ERROR, "corpus (legacy-rocm-build-2494-multigpu-training-mode1-reset-failed-psp)"),
    ("amdgpu 0000:03:00.0: GPU mode1 reset failed", ERROR, Label.HARDWARE_ERROR,
     "a write-up of an eGPU whose S3 suspend failed (psp reg wait timed out, then the reset)"),
    ("[ 5120.481233] amdgpu 0000:0b:00.0: amdgpu: GPU reset(2) failed", ERROR, Label.HARDWARE_ERROR,
     "drivers/gpu/drm/amd/amdgpu/amdgpu_device.c amdgpu_device_gpu_recover 'GPU reset(%d) failed', filled in"),
    # the Ascend runtime unable to count its devices
    ("[ERROR] RUNTIME(278,python3):2025-08-26-03:01:17.587.916 [driver.cc:65]278 GetDeviceCount:Call drvGetDevNum, drvRetCode=87.",
     ERROR, Label.CONFIG_ERROR, "corpus (vllm-ascend-2542-310p-second-service-same-card-drvgetdevnum)"),
    ("[ERROR] RUNTIME(618,python3):2025-03-06-01:09:07.262.277 [api_c_device.cc:23]618 rtGetDeviceCount:ErrCode=507899, desc=[driver error:internal error], InnerCode=0x7020010",
     ERROR, Label.CONFIG_ERROR, "a public issue's log of torch_npu that counts no NPU ('get device count of NPU failed')"),
    ("[ERROR] ASCENDCL(618,python3):2025-03-06-01:09:07.262.594 [device.cpp:342]618 aclrtGetDeviceCount: get device count failed, runtime result = 507899.",
     ERROR, Label.CONFIG_ERROR, "the same issue's ACL record"),
    # CANN's aclnn runtime finding no kernel binary for an operator
    ("ERROR 02-11 11:32:58 engine.py:389]         Cannot find binary for op PromptFlashAttention.", ERROR,
     Label.CONFIG_ERROR, "corpus (vllm-ascend-37-atlas-310p-prompt-flash-attention-no-binary)"),
    ("       Cannot find binary for op Range.", ERROR, Label.CONFIG_ERROR,
     "Huawei's CANN troubleshooting page for ERR01100 (torch.arange in transformers' generate)"),
    ("EZ9999: [PID: 775] 2025-02-16-12:18:25.258.321 Cannot find bin of op Range, integral key 0/1/|int64/ND/int64/ND/int64/ND/int64/ND/.",
     ERROR, Label.CONFIG_ERROR, "the same page"),
    # Paddle's data-loader bus error
    ("ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by insufficient shared memory (shm), please check whether use_shared_memory is set and storage space in /dev/shm is enough",
     CRASH, Label.OOM, "corpus (paddleocr-9391-drrg-dataloader-bus-error-dev-shm); paddle/fluid/imperative/data_loader.cc's SIGBUS handler"),
    # llama.cpp's model loader, and a model newer than the engine
    ("error loading model: error loading model architecture: unknown model architecture: 'gemma3n'", ERROR,
     Label.CONFIG_ERROR, "corpus (lmstudio-820-gemma3n-unknown-model-architecture-runtime)"),
    ("llama_model_load: error loading model: error loading model architecture: unknown model architecture: 'deepseek3_2'",
     ERROR, Label.CONFIG_ERROR, "a lab's postmortem notes (an MXFP4 GGUF of DeepSeek-V3.2-Exp on an older llama.cpp)"),
    # a program's report of a loss that is not finite
    ("(RayTrainWorker pid=4128523) [NaN/Inf detected] Loss 'seg_dice' is invalid. Setting to zero.", METRIC, None,
     "corpus (quickannotator-137-raytrainworker-nan-inf-losses-set-to-zero)"),
    ("NaN/Inf detected in loss at step 1200. Skipping batch.", METRIC, None,
     "a public training loop's print(f'NaN/Inf detected in loss at step {step}. Skipping batch.'), filled in"),
]

#: lines that look like the forms and must read as nothing
NEAR_MISSES = [
    # signals others send to stop a process, and Go's stop signal
    "caught signal: terminated, shutting down",
    "runner exited: stop signal: killed",
    # the driver's recovery that worked
    "[ 5120.481233] amdgpu 0000:0b:00.0: amdgpu: GPU reset(2) succeeded!",
    "[ 5119.120014] amdgpu 0000:0b:00.0: amdgpu: GPU reset begin!",
    # TensorBoard's histogram warning on healthy runs (corpus: healthy excerpts under mpirun and a logger)
    "Warning: NaN or Inf found in input tensor.",
    " WARNING NaN or Inf found in input tensor",
    # a loss scaler skipping a step of fp16 training that goes on (test_signatures' near miss)
    "LossScaler: inf/nan found in gradients, skipping the step",
    # llama.cpp loading a model that works
    "llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from model.gguf (version GGUF V3 (latest))",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    # a connection refused by the host itself
    ('ERROR dynamo_runtime::worker: Application shutdown with error: Failed to connect to etcd server with config ClientOptions { etcd_url: ["http://localhost:2379"], etcd_connect_options: None, attach_lease: true }',
     Label.CONFIG_ERROR),  # corpus (dynamo-1188-dynamo-run-etcd-connection-refused-rust-chain)
    ("rllib3.connection.HTTPConnection object at 0x7f574e887fd0>: Failed to establish a new connection: [Errno 111] Connection refused',)) host='localhost'",
     Label.CONFIG_ERROR),  # urllib3's NewConnectionError to a visdom server on localhost (contactdb-prediction-2's words)
    ("localhost: ssh: connect to host localhost port 22: Connection refused", Label.CONFIG_ERROR),  # corpus (deepspeedexamples-894)
    ("  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/pair.cc:724] connect [127.0.1.1]:3210: Connection refused",
     Label.CONFIG_ERROR),  # corpus (pytorch-15592: a hostname resolving to 127.0.1.1)
    # an archive that is corrupt or truncated
    ("2022-01-23 02:08:36.029 tarfile.ReadError: (\"unexpected end of data @ <_io.BufferedReader name='train-224-30/00000022.tar'>\", ",
     Label.CONFIG_ERROR),  # corpus (webdataset-142-corrupted-tar-shard-readerror)
    ("tarfile.ReadError: unexpected end of data", Label.CONFIG_ERROR),  # an Anaconda installer whose download's md5 did not match
    ("zipfile.BadZipFile: File is not a zip file", Label.CONFIG_ERROR),  # CPython Lib/zipfile.py's message
    # TensorRT's engine build that failed
    ("[04/19/2024-14:11:41] [TRT-LLM] [E] Engine building failed, please check the error log.", Label.COMPILE_ERROR),  # corpus (tensorrt-llm-1478)
    ("RuntimeError: TRT Engine build failed... Please check the logs and open up an issue.", Label.COMPILE_ERROR),  # corpus (optimum-nvidia-58)
    # oneCCL's transport that did not start
    ("  oneCCL: atl_ofi_comm.cpp:232 init_transport: EXCEPTION: failed to initialize ATL", Label.CONFIG_ERROR),  # corpus (llm-d-2270)
    ("  CCL_ERROR| atl_ofi_helper.cpp:1118 fi_getinfo error: ret -61, providers 0", Label.CONFIG_ERROR),  # corpus (llm-d-2270)
]

#: error lines whose form states no cause
NO_CAUSE = [
    # TensorRT skipping one tactic: the build goes on to others (corpus: tensorrt-llm-54, whose cause the thread gives)
    "[10/21/2023-07:49:30] [TRT] [E] 9: Skipping tactic0x0000000000000000 due to exception PLUGIN_V2 operation not supported within this graph.",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


@pytest.mark.parametrize(("line", "label"), [
    # a peer's address refusing: the transport, as before
    # corpus pytorch-15592's gloo line with a peer's address in place of 127.0.1.1
    ("  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/pair.cc:724] connect [10.1.2.3]:3210: Connection refused",
     Label.COMM_ERROR),
    ("[1744963752.379059] [oneasia-gpu-node1:14252:0]            sock.c:334  UCX  ERROR   connect(fd=120, dest_addr=10.244.13.0:34313) failed: Connection refused",
     Label.COMM_ERROR),
])
def test_a_peer_refusing_stays_the_transports(line: str, label: Label) -> None:
    """Only the host's own address makes a refusal a service that is not running here."""
    stated = cause_of(line)
    assert stated is not None and stated[0] is label, stated


def test_a_loopback_refusal_said_to_be_retried_is_not_configuration() -> None:
    """c10d's client retries while the store's server starts (socket.cpp: 'The server socket on %s is not yet
    listening (%s), will retry.'): a wait, not a service that is missing."""
    line = "[W socket.cpp:701] The server socket on [localhost]:29500 is not yet listening (errno: 111 - Connection refused), will retry"
    stated = cause_of(line)
    assert stated is None or stated[0] is not Label.CONFIG_ERROR, stated
    reading = read_error(line)
    assert reading is None or reading.label is not Label.CONFIG_ERROR


@pytest.mark.parametrize(("excerpt", "label", "action"), [
    ("config_error/ollama-1603-vm-cpu-runner-illegal-instruction.log", Label.CONFIG_ERROR, Action.STOP),
    ("hardware_error/legacy-rocm-build-2494-multigpu-training-mode1-reset-failed-psp.log", Label.HARDWARE_ERROR,
     Action.DRAIN_AND_RESTART),
    ("config_error/dynamo-1188-dynamo-run-etcd-connection-refused-rust-chain.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/dynamo-851-serve-bare-metal-etcd-unreachable-interleaved.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/mlflow-12154-notebook-tracking-server-connection-refused.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/vllm-ascend-2542-310p-second-service-same-card-drvgetdevnum.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/vllm-ascend-37-atlas-310p-prompt-flash-attention-no-binary.log", Label.CONFIG_ERROR, Action.STOP),
    ("config_error/webdataset-142-corrupted-tar-shard-readerror.log", Label.CONFIG_ERROR, Action.STOP),
    ("oom/paddleocr-9391-drrg-dataloader-bus-error-dev-shm.log", Label.OOM, Action.RESTART),
    ("config_error/lmstudio-820-gemma3n-unknown-model-architecture-runtime.log", Label.CONFIG_ERROR, Action.STOP),
    ("compile_error/optimum-nvidia-58-trt-engine-build-failed-runtimeerror.log", Label.COMPILE_ERROR, Action.STOP),
    ("compile_error/tensorrt-llm-1478-no-implementation-for-node.log", Label.COMPILE_ERROR, Action.STOP),
    ("config_error/llm-d-2270-xpu-oneccl-atl-ofi-no-providers.log", Label.CONFIG_ERROR, Action.STOP),
    ("numerical_error/quickannotator-137-raytrainworker-nan-inf-losses-set-to-zero.log", Label.NUMERICAL_ERROR,
     Action.STOP),
    # an engine build that ran out of memory stays the memory's (its OutOfMemory records come first)
    ("oom/trtllm-346-llama2-13b-build-virtualmemorybuffer-outofmemory.log", Label.OOM, Action.RESTART),
])
def test_the_corpus_excerpts(excerpt: str, label: Label, action: Action) -> None:
    verdict = diagnose_paths([str(CORPUS / excerpt)]).verdict
    assert (verdict.label, verdict.action) == (label, action), verdict.reason
