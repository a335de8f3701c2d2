# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""The failure-form reader (watchdog/diagnosis/failureforms.py): each form with real lines, the near misses that
must read as nothing, the gate (every form line holds a needle), and the reader wired into the
knowledge base, errorclass and the judge (offline and live).

Each line is real: from the corpus (tests/data/real-logs, named by its excerpt) or from a public thread
(named by its repository and number), or it is the format a project's source prints, filled in (the
source file is named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.classify import Effect
from neuron_watch.diagnosis.errorclass import read_error
from neuron_watch.diagnosis.failureforms import NEEDLES, SIGNATURE_IDS, FormKind, cause_of, read_line
from neuron_watch.diagnosis.judge import Judge, JudgeSettings
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import Action, Label, LogLine, RankKey

E, C, M, RUN, DONE = FormKind.ERROR, FormKind.CRASH, FormKind.METRIC, FormKind.COMPILE_RUNNING, FormKind.COMPILE_DONE
WAIT = FormKind.COMM_WAIT

#: (line, the kind it reads as, where it is from)
FORMS: list[tuple[str, FormKind, str]] = [
    # glog / absl severities (glog src/logging.cc LogMessage::Init; absl/log/internal/log_format.cc)
    ("E0208 21:12:26.795000 1460 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 2) local_rank: 0 (pid: 1464) of binary: /root/miniconda3/bin/python", E, "corpus (torchrun's glog-format record)"),
    ("F1006 09:50:58.620735 13380 common.cc:34] Check failed: initialized_ Must initialize data before reading it", C, "apache/singa#805"),
    ("*** Check failure stack trace: ***", C, "apache/singa#805"),
    ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] some new words", E, "torch's c10 logger under torchrun's rank prefix (c10/util/Logging.cpp)"),
    # TensorFlow's logger (tensorflow/core/platform/default/logging.cc: "%s.%06d: %c %s:%d] %s")
    ("2023-11-09 21:39:52.908327: E tensorflow/compiler/xla/xla_client/xla_util.cc:90] \t [[{{node XRTExecute}}]]", E, "corpus (torch-xla XRT)"),
    ("2017-11-28 16:36:15.720252: F tensorflow/core/lib/io/zlib_outputbuffer.cc:77] Check failed: bytes_to_write <= AvailableInputSpace() (12 vs. -1814274)", C, "CharlesShang/FastMaskRCNN#177"),
    ("2025-04-23 20:35:34.618070: F external/xla/xla/service/gpu/autotuning/gemm_fusion_autotuner.cc:1099] Non-OK-status: executable.status()", C, "corpus (mujoco-playground-113: an absl FATAL in TensorFlow's format, no check failure)"),
    # Ray's C++ logger (src/ray/util/logging.cc "[%Y-%m-%d %H:%M:%S,%e %L %P %t] ")
    ("(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: Failed to send the worker its lease", E, "corpus (wmpo-3's raylet record, the message replaced)"),
    ("[2022-07-25 08:35:40,492 C 273 339] (raylet) gcs_rpc_client.h:537:  Failed to reach the GCS", C, "ray-project/ray#26966 (the record's head, a FATAL)"),
    # an op that ran out of memory, at WARNING (tensorflow/core/framework/op_kernel.cc CtxFailureWithWarning)
    ("W tensorflow/core/framework/op_kernel.cc:968] Resource exhausted: OOM when allocating tensor with shape[256,832,7,7]", E, "corpus (tensorflow-4735: TF 1.x, the record without its time)"),
    ("2019-10-24 21:55:25.500952: W tensorflow/core/framework/op_kernel.cc:1318] OP_REQUIRES failed at cwise_ops_common.cc:70 : Resource exhausted: OOM when allocating tensor with shape[8,509,3072] and type float", E, "corpus (an OP_REQUIRES failure)"),
    # the Neuron runtime's ERROR with its module ("<date> <pid>:<tid> <LEVEL>  <MODULE>:<function> <msg>")
    ("2021-Dec-03 08:02:36.0093  5110:5110  ERROR  TDRV:dma_ring_allocate                       No more pages for ring type: 1", E, "corpus (Neuron TDRV)"),
    # libfabric's record (src/log.c fi_log "%s:%d:%ld:%s:%s:%s():%d<%s> ")
    ("libfabric:18564:1733296782::efa:cq:efa_rdm_cq_poll_ibv_cq():570<warn> err: 5, message: Unreachable remote (15)", E, "libfabric src/log.c format, prov/efa EFA_WARN"),
    ("libfabric:2243:1714557600::efa:ep_ctrl:efa_rdm_ep_close():998<warn> Unable to close ep", E, "libfabric src/log.c format, prov/efa"),
    # structured levels (logrus/zap/slog logfmt; JSON loggers)
    ('time="2024-05-01T10:00:00Z" level=error msg="failed to allocate device" error="no devices found"', E, "logrus TextFormatter"),
    ('{"level":"error","ts":1714557600.1,"msg":"worker exited","error":"exit status 1"}', E, "zap JSON encoder"),
    ('time=2024-05-01T10:00:00.000Z level=FATAL msg="plugin crashed"', C, "Go log/slog TextHandler"),
    # Python logging's record head
    ("2024-04-12 07:13:06,123 - CRITICAL - trainer - the data server went away", E, "Python logging '%(asctime)s - %(levelname)s - %(name)s - %(message)s'"),
    # kernel levels and fault reports
    ("[  +0.000127] mce: [Hardware Error]: Machine check events logged", E, "corpus (home-assistant MCE)"),
    ("python[4242]: segfault at 0 ip 00007f2c1a2b3c4d sp 00007ffd1234abcd error 4 in libtorch_cpu.so[7f2c10000000+2000000]", C, "arch/x86/mm/fault.c show_signal_msg"),
    # Go, Rust, Java, C++
    ("panic: runtime error: invalid memory address or nil pointer dereference", C, "Go runtime/panic.go printpanics"),
    ("goroutine 1 [running]:", C, "Go runtime/traceback.go"),
    ("fatal error: all goroutines are asleep - deadlock!", C, "Go runtime.throw"),
    ("thread '<unnamed>' panicked at 'called `Option::unwrap()` on a `None` value', /home/conda/feedstock_root/build_artifacts/tokenizers_1583876217402/work/tokenizers/src/models/bpe/trainer.rs:373:34", C, "huggingface/tokenizers#214"),
    ('Exception in thread "main" java.lang.OutOfMemoryError: Java heap space', C, "java.lang.ThreadGroup.uncaughtException"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", C, "libstdc++ verbose terminate handler"),
    ("terminate called after throwing an instance of 'c10::Error'", C, "libstdc++ verbose terminate handler over c10"),
    ("F1123 15:00:49.123456 12345 some_op.cc:42] FATAL: check failed: n > 0", C, "glog LogMessageFatal"),
    # fatal signals
    ("[92c90024c028:157  :4:419] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))", C, "corpus (UCX signal handler)"),
    ("*** SIGSEGV received at time=1714557600 on cpu 3 ***", C, "absl/debugging/failure_signal_handler.cc"),
    # exceptions a wrapper prints, and dotted classes that do not end in Error
    ("ray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute.get_next() (pid=12769, ip=10.1.161.26)", E, "corpus (Ray Train)"),
    ("requests.exceptions.ConnectTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded", E, "requests' exception as a traceback's last line"),
    ("2022-04-02 18:19:58,646 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - RuntimeError: nrt_init failed", E, "TorchServe's worker log prefix (corpus: MODEL_LOG lines)"),
    ("Caused by: java.io.IOException: Connection reset by peer", E, "java.lang.Throwable.printStackTrace"),
    # resources that are not there
    ("RuntimeError: No CUDA GPUs are available", E, "torch/cuda/__init__.py _lazy_init"),
    ("OSError: [Errno 28] No space left on device: '/dev/shm/torch_1234'", E, "glibc strerror(ENOSPC)"),
    ("srun: error: Unable to allocate resources: Requested node configuration is not available", E, "Slurm srun"),
    ("[rank0]: RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", E, "corpus (ms-swift-5118: cudaErrorDevicesUnavailable, a GPU in exclusive-process mode)"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", E, "cudaGetErrorString(cudaErrorDevicesUnavailable), newer CUDA"),
    ("E1011 08:02:59.085540 1 logging.cc:40] [runtime.cpp::isCudaInstalledCorrectly::38] Error Code 6: Internal Error (CUDA initialization failure with error 35. Please check your CUDA installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html)", E, "corpus (triton-server-6413: TensorRT's runtime)"),
    # metrics
    ("Epoch 3:  45%|████▌     | 450/1000 [01:30<01:50, 5.00it/s, loss=nan, v_num=0]", M, "Lightning's tqdm postfix"),
    ("{'train_loss': 'NaN', 'epoch': 2.0}", M, "a metrics dict"),
    ('{"step": 120, "loss": NaN, "grad_norm": NaN}', M, "a JSON metrics record (Python's json writes NaN)"),
    ("   120     nan     0.0003   1.2e-04", M, "an aligned table of metrics"),
    ("RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped.", M, "torch/nn/utils/clip_grad.py"),
    ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1.793662034335766e-43", M, "apex/amp/scaler.py"),
    # compile phases
    ("Building extension module fused_adam...", RUN, "torch/utils/cpp_extension.py _jit_compile"),
    ("Emitting ninja build file /root/.cache/torch_extensions/py310_cu121/fused_adam/build.ninja...", RUN, "torch/utils/cpp_extension.py _write_ninja_file_and_build_library"),
    ("AUTOTUNE mm(4096x4096, 4096x4096)", RUN, "torch/_inductor/select_algorithm.py"),
    ("Loading extension module utils...", DONE, "corpus (DeepSpeed op builder)"),
    (">     Time to load utils op: 14.221003532409668 seconds", DONE, "corpus (DeepSpeed op builder, quoted)"),
    (">     Loading extension module utils...", DONE, "corpus (quoted)"),
    ("SingleProcess AUTOTUNE benchmarking takes 2.3341 seconds and 0.0012 seconds precompiling for 20 choices", DONE, "torch/_inductor/select_algorithm.py"),
    # a TensorRT engine build
    ("Building engine, please wait for a while...", RUN, "corpus (tensorrtx-690: tensorrtx yolov5.cpp)"),
    ("2026-06-17T05:49:51.038478Z Building TRT engine: models/layout/layout.onnx -> /home/ocr/.cache/turbo-ocr/layout.trt", RUN, "corpus (turboocr-17)"),
    ("2026-06-17T05:05:50.433526Z Built: /home/ocr/.cache/turbo-ocr/det_9506347950415945255.trt (4.59903 MB)", DONE, "corpus (turboocr-17)"),
    ("[TRT] Engine generation completed in 15.4544 seconds.", DONE, "corpus (tensorrt-llm-2324: TensorRT's builder at INFO)"),
    ("Build engine successfully!", DONE, "tensorrtx yolov5.cpp"),
    # XLA's slow-compile alarm (xla/service/slow_operation_alarm.cc): an ERROR record that is the compiler still at work
    ("2021-10-29 07:59:58.028158: E external/org_tensorflow/tensorflow/compiler/xla/service/slow_operation_alarm.cc:55] ", RUN, "google/brax#87"),
    ("[Compiling module jit_apply_fn] Very slow compile? If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.", RUN, "google-deepmind/tapnet#53"),
    ("Very slow compile?  If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.", RUN, "xla/service/slow_operation_alarm.cc"),
    ("E external/xla/xla/service/slow_operation_alarm.cc:133] The operation took 9m29.906265931s", DONE, "google-deepmind/tapnet#53"),
    ("2022-10-12 16:01:47.590034: E external/org_tensorflow/tensorflow/compiler/xla/service/slow_operation_alarm.cc:65] Constant folding an instruction is taking > 1s:", RUN, "corpus (dm-haiku-539: xla/service/hlo_constant_folding.cc's alarm)"),
    # a rank waiting on its peers
    ("[2021-04-10 21:28:20.658706: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds.", WAIT, "horovod/horovod#2843"),
    ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. Stalled ops: allreduce.0 [ready ranks: 1, 2, 3]", WAIT, "horovod/horovod#215"),
    ("[W socket.cpp:701] The server socket on [jean-zay-iam01-ib0]:55035 is not yet listening (errno: 111 - Connection refused), will retry", WAIT, "pytorch/pytorch#73114"),
    # configuration: a slot, a launch agent, a host unreachable over ssh, a GPU architecture, a Slurm request
    ("There are not enough slots available in the system to satisfy the 8 slots ", E, "orte/mca/rmaps/base/help-orte-rmaps-base.txt (mit-han-lab/spvnas#10)"),
    ('The value of the MCA parameter "plm_rsh_agent" was set to a path', E, "orte/mca/plm/rsh/help-plm-rsh.txt (xbpeng/DeepMimic#85)"),
    ("localhost: ssh: connect to host localhost port 22: Connection refused", E, "OpenSSH sshconnect.c under pdsh (deepspeedai/DeepSpeedExamples#894)"),
    ("subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned non-zero exit status 255.", E, "deepspeedai/DeepSpeed#4907"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_89'", E, "deepspeedai/DeepSpeed#3299"),
    ("slurmstepd: error: execve(): python3: No such file or directory", E, "src/slurmd/slurmstepd/task.c exec_task (a missing program)"),
    ("ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'", E, "ptxas's refusal of an unknown target"),
    ("[rank0]: ssh: connect to host worker-1 port 22: No route to host", E, "OpenSSH sshconnect.c ssh_connect_direct"),
    ("srun: error: Unable to create step for job 16413634: Invalid generic resource (gres) specification", E, "Slurm src/common/slurm_errno.c ESLURM_INVALID_GRES (mehta-lab/waveorder#201)"),
    # what an uncaught C++ exception says, Rust's allocation failure, a Ray actor's death, Open MPI's error log
    ("  what():  [enforce fail at /home/sayantan/gloo_GIT/gloo/gloo/transport/tcp/pair.cc:498] optval == 0. 111 vs 0. SO_ERROR: Connection refused", E, "facebookarchive/caffe2#360"),
    ("[2022-05-27T11:37:57.377] _job_complete: JobId=127441 WTERMSIG 9", C, "src/slurmctld/job_mgr.c (ArjunaCluster/ArjunaUsers#137)"),
    ("memory allocation of 2097152 bytes failed", C, "library/std/src/alloc.rs (deepspeedai/DeepSpeedExamples#321)"),
    ("The actor died because its node has died. Node Id: 699d13151ee3786638d9e6b4032998bf07c30173d64a9654537f5751", C, "python/ray/exceptions.py (discuss.ray.io 15902)"),
    ("[zcluster4:22139] [[INVALID],INVALID] ORTE_ERROR_LOG: Unable to start a daemon on the local node in file ess_singleton_module.c at line 582", E, "xbpeng/DeepMimic#85"),
    ("2023-10-06 13:14:53.424902: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:864] failed to load PTX text as a module: CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid", E, "jax-ml/jax#17976"),
    ("/root/anaconda3/envs/bitten/lib/python3.8/site-packages/deepspeed/ops/csrc/includes/gemm_test.h:6:10: fatal error: cuda_profiler_api.h: No such file or directory", E, "mallorbc/Finetune_LLMs#11 (GCC's missing-include diagnostic)"),
    ("csrc/adam.cpp:3:10: fatal error: 'cuda_runtime.h' file not found", E, "Clang's missing-include diagnostic"),
    # the frameworks' own checks for NaN/Inf
    ("INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.InvalidArgumentError'>, LossTensor is inf or nan. : Tensor had NaN values", M, "tensorflow/models#5516 (check_numerics_op.cc)"),
    ('\t"message": "invalid value (nan) encountered in jit(compiled_train_step). Because jax_config.debug_nans.value and/or config.jax_debug_infs is set",', M, "jax-ml/jax#19595 (jax/_src/dispatch.py)"),
    # round issue23-heldout-7: a retry loop that gave up is an error, not a retry (ibv_wc_status_str)
    ("CQE ERROR wr_id=3 status=12(transport retry counter exceeded) opcode=1 byte_len=0 vendor_err=0xa qp_num=0x2c10", E, "corpus (uccl-799)"),
    # the hint TensorFlow appends to an out-of-memory status, alone where the error line was cut
    ("Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.", E, "corpus (transformers-3702)"),
    # an exception whose class lives in a module of exceptions (triton/runtime/errors.py)
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory,", E, "corpus (helion-470)"),
    # a status in TensorFlow's list of root errors (tsl/platform/status.cc StatusGroup)
    ("2020-10-22 02:48:58 10.128.0.33 [3]   (1) Resource exhausted: Attempting to allocate 180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)", E, "corpus (pytorch-xla-2569)"),
    # the JVM's fatal error report (HotSpot vmError.cpp)
    ("# A fatal error has been detected by the Java Runtime Environment:", C, "corpus (libnd4j-142)"),
    ("#  SIGSEGV (0xb) at pc=0x000000012087b1b9, pid=29501, tid=5891", C, "corpus (libnd4j-142)"),
    # Open MPI's report of a rank a signal ended (orte/tools/orterun/help-orterun.txt)
    ("mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).", C, "corpus (ompi-2661)"),
    # DeepSpeed's loss scaler overflowing at its floor (runtime/fp16/loss_scaler.py)
    ("OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1", M, "corpus (deepspeed-1599)"),
    ("[2021-12-20 10:00:00,000] [INFO] [stage_1_and_2.py:1700:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1", M, "runtime/fp16/loss_scaler.py format under DeepSpeed's logger"),
    # the Neuron compilers' pass and job logs
    ("2024-05-22T17:01:38Z LegalizeType finished after 0.214 seconds", RUN, "corpus (aws-neuron-sdk-892)"),
    ("08/21/2023 07:03:05 PM INFO 25700 [pipeline.compile.0]: Starting job job.WalrusDriver.3 state state 0", RUN, "corpus (aws-neuron-sdk-730)"),
    # no PTX compiler at all (CUDA_ERROR_JIT_COMPILER_NOT_FOUND; XLA's compilation providers)
    ("RuntimeError: UNKNOWN: PTX JIT compiler library not found", E, "corpus (jax-9644)"),
    ("No PTX compilation provider is available. Neither ptxas/nvlink nor nvjtlink is available. As a fallback you can enable JIT compilation in the CUDA driver via the flag `--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found`. Details:", E, "corpus (tensorflow-5090)"),
    # round issue23-heldout-8: the raylet's report of a worker that died (WorkerExitType SYSTEM_ERROR)
    ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffffcf533045f808c280360c752601000000 Worker ID: 05773abecbea3d05f6ad55b32fd287c80fc3f496d8e3e82db06e91d8 Node ID: 719ab2fe19e231f9c57fcc12dadd02e76a2863e0f1508010ce8f0f1b Worker IP address: 10.226.129.21 Worker port: 50045 Worker PID: 110142 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.", C, "corpus (search-r1-45)"),
    # XLA's BufferAssignment out-of-memory report (xla/service/buffer_assignment.cc ToVerboseString)
    ("BufferAssignment OOM Debugging.", E, "xla/service/buffer_assignment.cc"),
    ("                XLA Label: custom-call", E, "corpus (t5x-870)"),
    ("\t\tXLA Label: fusion", E, "xla/service/buffer_assignment.cc (tab-indented, as printed)"),
    # neuron-cc's own logger below ERROR, with and without the pid
    ("09/11/2024 09:18:21 AM DEBUG [WalrusDriver.0]: INFO (ShrinkDN): ANALYZE SynthesisNetwork_2/SynthesisBlock_1/SynthesisLayer_19/aten_mul_1/mul_t458_i288310", RUN, "corpus (aws-neuron-sdk-978)"),
    ("02/17/2023 04:18:15 PM INFO 57168 [sg0000/Tensorizer/StaticProfiler]: Exit time region: delta=0.057s", RUN, "aws-neuron/aws-neuron-sdk#632"),
    # Lightning's device parser: GPUs asked for that the machine does not have, under Ray's prefix
    ("(pid=1521999)  But your machine only has: [0]", E, "corpus (ray-lightning-32)"),
    # the NVIDIA driver's RM status: the GPU needs a reset (nvstatuscodes.h NV_ERR_RESET_REQUIRED)
    ("    [Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874 ", E, "corpus (sichek-51)"),
]

#: lines that look like a form and must read as nothing
NEAR_MISSES = [
    "Downloading nanogpt checkpoint to /data/nanogpt/ckpt.pt",  # "nan" inside a word and a path
    "step 100 | loss 2.345 | tokens/s 12000 | finance-corpus",  # "nan" inside "finance"
    "INFO: running inference on 8 devices",  # "inf" inside "info"/"inference"
    "E = mc^2 is printed by the physics demo",  # "E" as a word
    "Grade: F external reviewers marked the run as failing (see report.md)",  # ": F " without a source file and line
    "2024-04-12 07:13:06,123 - WARNING - trainer - Error rate of the sampler is above 1%",  # a benign WARNING
    "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",  # a warning record (c10 tries the next address)
    "loss_scale: inf skipped step",  # the scaler's state on a skipped step
    "Epoch 0:   3%|▎         | 565/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_num=, reduced_train_loss=3.910, global_step=563.0]",  # NeMo's window beside a finite loss
    "W1123 15:00:49.123456 12345 some_op.cc:42] a warning",  # glog WARNING
    "Building engines for 3 models is described in docs/trt.md",  # no engine build announced
    "Built: 3 of 5 wheels (torch, numpy, pillow)",  # "Built:" without an engine file
    "Loading TRT engine: /models/det.trt",  # an engine loaded, not built
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x80 (0x1468a2869c10 in /home/pkourdis/pytorch/torch/lib/libc10.so)",  # a C++ name, not a level field (corpus: torchcomms-2358)
    "I1011 08:02:59.085540 1 logging.cc:40] CUDA initialization failure with error 35. Please check your CUDA installation (retrying on the next device)",  # an INFO record
    "2020-01-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at iterator_ops.cc:941 : Out of range: End of sequence",  # how a dataset ends
    "W tensorflow/core/common_runtime/bfc_allocator.cc:279] Resource exhausted is what the next op may say; 1.2GiB in use",  # the words from another file
    "(raylet) [2025-12-07 09:57:19,206 W 393463 393463] (raylet) node_manager.cc:12: worker failed to start in time, retrying",  # a Ray WARNING
    "[2023-06-12 10:01:02,345 I 1234 1234] (gcs_server) gcs_server.cc:80: Failed nodes: 0",  # a Ray INFO
    "W0101 10:00:00.000000 7 gpu_init.cc:12] CUDA-capable device(s) is/are busy or unavailable; trying the next device",  # a warning: the program goes on to another GPU
    "Waiting for a CUDA-capable device: 2 of 8 are busy",  # the words, not CUDA's error string
    "2023-Aug-01 16:14:44.0241 332066:332494 WARN  TDRV:dmem_alloc_internal                   Allocating 512 MB on ND 0 NC 1 for weights",
    "ERROR count: 0, retrying connection to the metrics server",  # a retried operation
    "I0402 10:11:12.123000 140 torch/distributed/run.py:12] Using nproc_per_node=8",
    "Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding",  # a start-up error the table reads (not a signal)
    "goroutine 12 [chan receive]:",  # a goroutine of a stack dump, not the one that panicked
    "libfabric:18564:1733296782::efa:ep_ctrl:efa_rdm_ep_set_shared_memory_permitted():1410<warn> FI_OPT_SHARED_MEMORY_PERMITTED set to false",  # a warn that reports no error
    "2023-05-02 10:00:00.000000: W external/xla/xla/service/gpu/gpu_compiler.cc:900] Slow compile warnings are off",  # not the alarm's words
    "Compile of module jit_step took 12.3s; no slow_operation_alarm fired",  # the alarm's file named in prose
    "One or more tensors were found to be identical",  # not the stall inspector's sentence
    "ssh: Could not resolve hostname in docs example (see ssh(1))",  # ssh, but not its connect failure
    "ssh: connect to host worker-1 port 22: see the troubleshooting guide",  # no strerror after it
    "There are not enough GPUs in this node for the tests to be meaningful; skipping",  # "not enough", no slots
    "nvcc warning : The 'compute_35' architecture is deprecated",  # a toolchain warning
    "Tensor had values in range [0, 1]",  # CheckNumerics's words, without NaN/Inf
    "invalid value encountered in divide",  # NumPy's RuntimeWarning, without the (nan)
    "The docs explain what():  returns for each exception class",  # what() in prose, not the handler's line start
    "Ray actors can die when the node dies; see the fault-tolerance guide",  # prose about actors
    "max memory allocation of 2097152 bytes",  # the words without "failed"
    "[2022-05-27T11:37:57.377] _job_complete: JobId=127441 WTERMSIG 15",  # SIGTERM: a cancel or a time limit
    "[2022-05-27T11:37:57.377] _job_complete: JobId=127441 WEXITSTATUS 0",  # a job that exited by itself
    "warning: cuda_profiler_api.h: No such file or directory, profiling disabled",  # a missing header that is only a warning
    # round issue23-heldout-7's near misses
    "2023-Aug-01 16:12:43.0210 332066:332508 [31] bootstrap.cc:102 CCOM WARN Connect to localhost:33666 failed - retrying",  # a retry still going
    "See docs/errors.md for the list of error codes",  # "errors." in a file name, no exception class
    "[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648",  # a scale that was reduced
    "mpirun noticed that process rank 3 with PID 4242 on node host02 exited on signal 15 (Terminated).",  # SIGTERM: a cancel
    "2024-05-22T17:01:38Z Compilation finished after 12.5 seconds with warnings",  # not a pass line (more words after the time)
    "# JRE version: Java(TM) SE Runtime Environment (8.0_66-b17) (build 1.8.0_66-b17)",  # the report's body, not its header
    "Hint: If you want to see a list of available models, run with --list",  # a hint about something else
    # round issue23-heldout-8's near misses
    "2023-06-07 15:26:09,573 WARNING worker.py:1986 -- A worker died or was killed while executing a task by an unexpected system error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",  # the driver's WARNING: the task is retried (corpus: ray-discuss-10958)
    "Worker exit type: INTENDED_USER_EXIT Worker exit detail: Worker exits by an user request.",  # a worker told to exit
    "BufferAssignment stats: parameter allocation: 6.00MiB",  # the stats without the OOM header
    "XLA Label: fusion is the opcode of the instruction (docs/buffer_assignment.md)",  # the words in prose, not indented
    "[Sun Jan 11 09:52:01 2026] NVRM: GPU 0000:01:00.0: request failed: NV_ERR_NOT_SUPPORTED",  # a status that says nothing of the device
    "09/11/2024 09:18:21 AM INFO training started on 8 workers",  # the date and level without a component in brackets
    "But your machine only has 2 GPUs, so the batch is split in two",  # the words without Lightning's list
]


@pytest.mark.parametrize(("line", "kind", "source"), FORMS, ids=[f"{k.value}:{i}" for i, (_, k, _) in enumerate(FORMS)])
def test_form_is_read(line: str, kind: FormKind, source: str) -> None:
    form = read_line(line)
    assert form is not None, f"not read ({source})"
    assert form.kind is kind, f"{form} ({source})"


@pytest.mark.parametrize(("line", "kind", "source"), FORMS, ids=[f"needle:{i}" for i in range(len(FORMS))])
def test_form_line_holds_a_needle(line: str, kind: FormKind, source: str) -> None:
    """The classifier reads a line only when its batch search found a needle in it."""
    text = "\n" + line
    assert any(n in text for n in NEEDLES), source


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_miss_reads_as_nothing(line: str) -> None:
    assert read_line(line) is None


def test_needles_have_no_digits() -> None:
    """The classifier searches line templates without their digits: a needle with a digit would miss."""
    assert not [n for n in NEEDLES if any(c.isdigit() for c in n)]


#: (line, the cause its form states)
CAUSES = [
    ("[Mon Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) returned from status @ kernel_gsp.c:100", Label.HARDWARE_ERROR),
    ("\t\tXLA Label: fusion", Label.OOM),
    ("(pid=1521999)  But your machine only has: [0]", Label.CONFIG_ERROR),
    ("libfabric:451707:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, message: Invalid address My EFA addr: fi_addr_efa://[fe80::13:c2ff:fe6f:f03d]:0:1072483550", Label.COMM_ERROR),  # aws/aws-ofi-nccl#346
    ('Warning  Failed  113s   kubelet  Error: container create failed: time="2022-09-14T11:35:13Z" level=error msg="runc create failed: unable to start container process: container init was OOM-killed (memory limit too low?)"', Label.OOM),  # kubeflow/trainer#1661
    ("2019-10-10 15:57:27.193862: E tensorflow/core/distributed_runtime/master.cc:267] CreateSession failed because worker /job:worker/replica:0/task:1 returned error: Unavailable: OS Error", Label.COMM_ERROR),
    ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect", Label.COMM_ERROR),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[64,1024]", Label.OOM),
    ("terminate called after throwing an instance of 'std::bad_alloc'", Label.OOM),
    ("[  +0.000127] mce: [Hardware Error]: CPU 2: Machine Check: 0 Bank 6: cc59dec000041152", Label.HARDWARE_ERROR),
    ("RuntimeError: No CUDA GPUs are available", Label.CONFIG_ERROR),
    ("OSError: [Errno 98] Address already in use", Label.CONFIG_ERROR),
    ("[rank0]: RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", Label.CONFIG_ERROR),  # modelscope/ms-swift#5118
    ("E1011 08:02:59.085540 1 logging.cc:40] [runtime.cpp::isCudaInstalledCorrectly::38] Error Code 6: Internal Error (CUDA initialization failure with error 35. Please check your CUDA installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html)", Label.CONFIG_ERROR),  # triton-inference-server/server#6413
    ("{'loss': nan, 'epoch': 0.3}", Label.NUMERICAL_ERROR),
    ("There are not enough slots available in the system to satisfy the 8 slots ", Label.CONFIG_ERROR),
    ("localhost: ssh: connect to host localhost port 22: Connection refused", Label.CONFIG_ERROR),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_89'", Label.CONFIG_ERROR),
    # ptxas refusing a target: one reading whatever the build's name (a JIT compiler's compile failing)
    ("ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'", Label.COMPILE_ERROR),
    ("ptxas-blackwell fatal   : Value 'sm_110a' is not defined for option 'gpu-name'", Label.COMPILE_ERROR),
    ("slurmstepd: error: execve(): python3: No such file or directory", Label.CONFIG_ERROR),
    ("srun: error: Unable to create step for job 16413634: Invalid generic resource (gres) specification", Label.CONFIG_ERROR),
    ("Tensor had NaN values", Label.NUMERICAL_ERROR),
    ("2023-10-06 13:14:53.424902: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:864] failed to load PTX text as a module: CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid", Label.CONFIG_ERROR),
    ("[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/python/local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out ", Label.OOM),  # jax-ml/jax#788, the line cut where the user's paste wrapped
    ("memory allocation of 2097152 bytes failed", Label.OOM),
    ("W tensorflow/core/framework/op_kernel.cc:968] Resource exhausted: OOM when allocating tensor with shape[256,832,7,7]", Label.OOM),  # tensorflow/tensorflow#4735
    ("gemm_test.h:6:10: fatal error: cuda_profiler_api.h: No such file or directory", Label.CONFIG_ERROR),
    ("thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 would exceed allowed memory. (out of memory)", Label.OOM),  # huggingface/text-generation-inference#563
    ("  what():  [enforce fail at gloo/transport/tcp/pair.cc:498] optval == 0. 111 vs 0. SO_ERROR: Connection refused", Label.COMM_ERROR),
    ("ValueError: host not found: Name or service not known", Label.COMM_ERROR),  # kubeflow/pytorch-operator#125
    ("[2022-07-25 08:35:40,492 C 273 339] (raylet) gcs_rpc_client.h:537:  Check failed: absl::ToInt64Seconds(absl::Now() - gcs_last_alive_time_) < ::RayConfig::instance().gcs_rpc_server_reconnect_timeout_s() Failed to connect to GCS", Label.COMM_ERROR),  # ray-project/ray#26966
    ("localhost: ssh: connect to host localhost port 22: Connection refused", Label.CONFIG_ERROR),  # ssh's own failure is configuration, not a peer gone
    ("CQE ERROR wr_id=3 status=12(transport retry counter exceeded) opcode=1 byte_len=0 vendor_err=0xa qp_num=0x2c10", Label.COMM_ERROR),  # uccl-project/uccl#799
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory,", Label.COMPILE_ERROR),  # pytorch/helion#470
    ("2020-10-22 02:48:58 10.128.0.33 [3]   (1) Resource exhausted: Attempting to allocate 180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)", Label.OOM),  # pytorch/xla#2569
    ("RuntimeError: UNKNOWN: PTX JIT compiler library not found", Label.CONFIG_ERROR),  # jax-ml/jax#9644
    ("Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.", Label.OOM),  # huggingface/transformers#3702
]

#: forms that say nothing of a cause
NO_CAUSE = [
    "RuntimeError: tensorflow/compiler/xla/xla_client/xrt_computation_client.cc:421 : Check failed: session->session()->Run(session_work->feed_inputs, session_work->outputs_handles, &outputs) == ::tensorflow::Status::OK() (Aborted: Session 018370a5591ff66c is not found. vs. OK)",  # corpus: ABORTED says nothing
    "panic: runtime error: index out of range [5] with length 3",
    "subprocess.CalledProcessError: Command 'ninja -v' returned non-zero exit status 255.",  # 255 from a program other than ssh
    "[E socket.cpp:860] [c10d] The client socket has timed out after 600s while trying to connect to (node-1, 29500).",  # an error, not a wait: no retry said
    "[  +0.000127] mce: [Hardware Error]: event severity: corrected",
    "E0208 21:12:26.795000 1460 api.py:869] failed (exitcode: 2)",
    "Not found the best checkpoint, starting from scratch",  # the spaced status name needs its colon
    "E0101 00:00:00.000000 1 x.cc:1] failed to allocate memory for the cache, out of retries",  # "memory", not "out of memory"
]


@pytest.mark.parametrize(("line", "label"), CAUSES)
def test_cause_of_form(line: str, label: Label) -> None:
    found = cause_of(line)
    assert found is not None and found[0] is label
    reading = read_error(line)
    assert reading is not None and reading.label is label


@pytest.mark.parametrize("line", NO_CAUSE)
def test_form_without_cause(line: str) -> None:
    assert cause_of(line) is None


# -- wired into the knowledge base and the judge -----------------------------------------------------


KB = default_knowledge_base()
FORMS_BY_SOURCE = {source: line for line, _, source in FORMS}


@pytest.mark.parametrize(("line", "kind", "source"), [f for f in FORMS if KB.classify_plain(f[0]) is None
                                                      or KB.classify_plain(f[0]).signature.id.startswith("form.")])
def test_knowledge_base_reports_form_after_the_table(line: str, kind: FormKind, source: str) -> None:
    """A line no rule of the table matches is reported under its form's signature, alike by every path."""
    m = KB.classify(line)
    assert m is not None and m.signature.id == SIGNATURE_IDS[kind], source
    assert KB.classify_plain(line) == m
    assert KB.scan(["a plain line", line]) == [(1, m)]


#: the table's rules that read the held-out round's sources (issue23-heldout-6): (line, the rule it is read
#: by, a near miss the rule must leave alone)
ROUND6_RULES = [
    ("Status: INTERNAL: ptxas exited with non-zero error code 139, output:  - Failure occur", "xla.ptxas_failed",
     "I0101 00:00:00.000000 1 subprocess_compilation.cc:1] ptxas exited normally"),  # mujoco_playground#113
    ("    @     0x7f0e1c0cc4a4  xla::gpu::IrEmitterUnnested::EmitFusion()", "xla.compiler_frames",
     "    @     0x7f0e1c0d7135  xla::gpu::GpuExecutable::ExecuteThunksOrXlir()"),  # levanter#727; a running program's frame
    ("(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at ",
     "ray.workers_killed_memory_pressure",
     "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 0 Workers (tasks / actors) killed due to memory pressure (OOM), 3 Workers crashed due to other reasons at "),  # wmpo#3
    ("Training: 2023-03-14 09:08:47,984-Speed 2183.37 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 40   Fp16 Grad Scale:  0   Required: 194 hours",
     "numerical.loss_not_finite",
     "Training: 2023-03-14 09:08:47,984-Speed 2183.37 samples/sec   Loss 42.7513   LearningRate 0.001000   Epoch: 0   Global Step: 40   Fp16 Grad Scale:  65536   Required: 194 hours"),  # insightface#2262
    ("nrtd[1]: [TDRV:tdrv_init_mla_phase1] BDF 0000:00:1c.0 is not a MLA Device", "neuron.rt.no_device",
     "nrtd[1]: [TDRV:tdrv_init_mla_phase1] BDF 0000:00:1e.0 is a MLA Device, opening it"),  # aws-neuron-sdk#187
    ("EI9999: 2024-10-21-10:42:00.358.410  The error from device(chipId:3, dieId:0), serial number is 9, hccl fftsplus task timeout occurred during task execution, stream_id:5, sq_id:5, task_id:38827, stuck notify num:1, timeout:30min(default).",
     "ascend.hccl_task_timeout",
     "[INFO] HCCL(12345,python):2024-10-21-10:42:00 [hccl] set hccl task timeout to 1800s"),  # Ascend/pytorch#54
]


#: the table's rules extended for issue23-heldout-7's sources: (line, the rule it is read by, a near miss)
ROUND7_RULES = [
    ("NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129", "gpu.nccl.transport_failed",
     "NCCL INFO NET/IB : Got completion from the proxy thread"),  # NVIDIA/nccl#902: NCCL before 2.19 named no peer
    ("(raylet, ip=10.0.3.179) [2022-09-22 17:46:53,692 E 134 134] (raylet) node_manager.cc:2966: System memory low at node with IP 10.0.3.179. Used memory (216.78GB) / total capacity (219.60GB) (0.98715) exceeds threshold 0.95, killing latest task with name dask:('head-partial-10-sort_index-be01da623ff06afe98fde4f50eda005f', 586) and task ID NIL_ID to avoid running out of memory.",
     "ray.workers_killed_memory_pressure",
     "(raylet) System memory low at node with IP 10.0.3.179; the memory monitor is disabled"),  # ray-project/ray#28781
    ("LOG: Uncorrectable Machine Check Exception (Board 0, Processor 1, APIC ID 0x00000003, Bank 0x00000005, Status 0xBA000000'00400405, Address 0x00000000'00000000, Misc 0x00000000'00000280)",
     "host.mce_uncorrected",
     "LOG: Corrected Machine Check Exception (Board 0, Processor 1, APIC ID 0x00000003, Bank 0x00000005)"),  # openstreetmap/operations#89
]


@pytest.mark.parametrize(("line", "rule", "near_miss"), ROUND7_RULES)
def test_round7_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


def test_deepspeed_overflow_at_its_floor_is_numerical_not_benign() -> None:
    """Above the floor the table's benign rule keeps the line; at the floor the reader's metric form does."""
    above = KB.classify("[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648")
    assert above is not None and above.signature.id == "benign.deepspeed_overflow"
    floor = KB.classify("[2021-12-20 10:00:00,000] [INFO] [stage_1_and_2.py:1700:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1")
    assert floor is not None and floor.signature.id == "numerical.deepspeed_scale_at_floor"


#: the table's rules added or narrowed for issue23-heldout-8's sources: (line, the rule it is read by, a near miss)
ROUND8_RULES = [
    ("2024-02-27 16:32:33.075782: F external/xla/xla/service/gpu/nvptx_compiler.cc:614] Check failed: options.is_autotuning_compilation ",
     "xla.compiler_check",
     "2024-02-27 16:32:33.075782: F external/xla/xla/service/gpu/gpu_executable.cc:614] Check failed: stream != nullptr "),  # jax#17730
    ("2024-07-17 11:40:54.103908: E external/xla/xla/status_macros.cc:56] INTERNAL: RET_CHECK failure (external/xla/xla/service/cpu/ir_emitter.cc:1144) LayoutUtil::IsMonotonicWithDim0Major(operand->shape().layout())",
     "xla.compiler_check",
     "E0101 00:00:00.000000 1 pjrt_stream_executor_client.cc:2826] INTERNAL: RET_CHECK failure (external/xla/xla/pjrt/pjrt_stream_executor_client.cc:100) ok"),  # jax#22484
    ("  0%|▋          | 99/24128 [00:40<2:39:27,  2.51it/s][2021-11-27 00:36:55,588] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1",
     "numerical.deepspeed_scale_at_floor",
     "  0%|▋          | 99/24128 [00:40<2:39:27,  2.51it/s][2021-11-27 00:36:55,588] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16, reducing to 8"),  # transformers#14531
    ("2021-11-22 01:32:34,502 - mmocr - INFO - Epoch [1][100/62598]\tlr: 1.000e-03, loss_ce: 1.2757, loss: nan, grad_norm: nan",
     "numerical.loss_not_finite",
     "2021-11-22 01:32:34,502 - mmocr - INFO - Epoch [1][100/62598]\tlr: 1.000e-03, loss_ce: 1.2757, loss: 1.9091, grad_norm: nan"),  # TableMASTER-mmocr#32: a step AMP skipped
]


@pytest.mark.parametrize(("line", "rule", "near_miss"), ROUND8_RULES)
def test_round8_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


def test_log_ending_in_loss_scale_floor_glued_to_a_bar_stops() -> None:
    """The record at the floor, glued to tqdm's bar, is read before the bar's progress (transformers#14531)."""
    lines = [f"  0%|▋          | {s}/24128 [00:40<2:39:27,  2.51it/s][2021-11-27 00:36:55,588] [INFO] [stage2.py:1628:step] "
             "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1" for s in (98, 99, 100)]
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.NUMERICAL_ERROR and v.action is Action.STOP


def test_log_ending_in_a_ray_worker_death_restarts() -> None:
    v = _judge_lines([FORMS_BY_SOURCE["corpus (search-r1-45)"]]).verdict(1010.0, final=True)
    assert v.label is Label.OTHER_CRASH and v.action is Action.RESTART


def test_log_ending_in_nvrm_reset_required_drains() -> None:
    v = _judge_lines([FORMS_BY_SOURCE["corpus (sichek-51)"]]).verdict(1010.0, final=True)
    assert v.label is Label.HARDWARE_ERROR and v.action is Action.DRAIN_AND_RESTART


def test_log_ending_in_xla_oom_report_is_oom() -> None:
    v = _judge_lines(["        Buffer 1:", "                Size: 96.00MiB",
                      "                XLA Label: custom-call", "                Shape: bf16[128,6,256,256]"]).verdict(1010.0, final=True)
    assert v.label is Label.OOM and v.action is Action.RESTART


def test_log_ending_in_retries_that_ran_out_is_a_comm_failure() -> None:
    """An ERROR record that says its retries ran out is the rank's last word, not a transient retry."""
    lines = ["CQE ERROR wr_id=3 status=12(transport retry counter exceeded) opcode=1 byte_len=0 vendor_err=0xa qp_num=0x2c10"] * 3
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.COMM_ERROR and v.action is Action.RESTART


def test_log_ending_inside_neuron_compiler_passes_is_compiling() -> None:
    lines = ["2024-05-22T17:01:38Z Running LegalizeType", "2024-05-22T17:01:38Z LegalizeType finished after 0.214 seconds",
             "2024-05-22T17:01:38Z Running NeuronLICM", "2024-05-22T17:01:38Z NeuronLICM finished after 0.002 seconds"]
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.COMPILING and v.action is Action.WAIT


@pytest.mark.parametrize(("line", "rule", "near_miss"), ROUND6_RULES)
def test_round6_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


def test_table_keeps_precedence() -> None:
    line = "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."
    m = KB.classify(line)
    assert m is not None and not m.signature.id.startswith("form.")


def test_form_signatures_are_known_by_id() -> None:
    """A node classifies for the coordinator by signature id: every form signature must be found."""
    for sid in SIGNATURE_IDS.values():
        assert sid in KB.by_id
    assert KB.by_id["form.crash"].effect is Effect.FATAL


def _judge_lines(lines: list[str], t0: float = 1000.0) -> Judge:
    judge = Judge(KB, JudgeSettings(), t0)
    judge.observe_lines([LogLine(RankKey("n0", 0), text, t0 + i, t0 + i, "rank-0.log", i + 1)
                         for i, text in enumerate(lines)])
    return judge


PROGRESS = [f"step {s} loss 2.{s:03d} step_time 0.5s" for s in range(1, 6)]


def test_log_ending_in_unknown_error_form_is_not_healthy() -> None:
    judge = _judge_lines([*PROGRESS, "2019-10-10 15:57:27.193862: E tensorflow/core/common_runtime/x.cc:1] "
                          "Unavailable: failed to connect to all addresses"])
    v = judge.verdict(1010.0, final=True)
    assert v.label is Label.COMM_ERROR and v.action is Action.RESTART


def test_log_ending_inside_an_extension_build_is_compiling() -> None:
    judge = _judge_lines(["Using /root/.cache/torch_extensions/py310_cu121 as PyTorch extensions root...",
                          "Building extension module fused_adam..."])
    assert judge.verdict(1003.0, final=True).label is Label.COMPILING


def test_extension_build_that_ended_is_not_compiling() -> None:
    judge = _judge_lines(["Building extension module fused_adam...", "Loading extension module fused_adam...",
                          *PROGRESS])
    assert judge.verdict(1010.0, final=True).label is Label.HEALTHY


def test_live_rank_with_a_crash_form_is_not_healthy() -> None:
    """Live (not final): a rank that printed a Rust panic has failed, though nothing says why."""
    judge = _judge_lines([*PROGRESS, "thread 'main' panicked at src/loader.rs:42:9:"])
    v = judge.verdict(1010.0)
    assert v.label is Label.OTHER_CRASH and v.action is Action.RESTART and v.culprit == RankKey("n0", 0)
    assert v.evidence[0].signature == "form.crash"


def test_live_go_panic_is_not_healthy() -> None:
    """The panic's line is an error the table's last rule knows; its goroutine trace is the crash form."""
    judge = _judge_lines([*PROGRESS, "panic: runtime error: invalid memory address or nil pointer dereference",
                          "goroutine 1 [running]:"])
    v = judge.verdict(1010.0)
    assert v.label is Label.OTHER_CRASH and v.culprit == RankKey("n0", 0)


def test_live_rank_with_non_finite_metric_stops() -> None:
    judge = _judge_lines([*PROGRESS, '{"step": 6, "loss": NaN, "grad_norm": NaN}'])
    v = judge.verdict(1010.0)
    assert v.label is Label.NUMERICAL_ERROR and v.action is Action.STOP


def test_crash_form_the_rank_went_on_from_is_withdrawn() -> None:
    """A generic form (the rank's own progress after it shows it survived) is not the verdict."""
    judge = _judge_lines(["*** Check failure stack trace: ***", *PROGRESS])
    assert judge.verdict(1010.0, final=True).label is Label.HEALTHY


def test_open_mpi_streams_are_split_into_ranks(tmp_path: Path) -> None:
    """Open MPI's --tag-output interleaves the ranks in one file: each rank is judged as its own
    process, so rank 1's readable error is the cause, not rank 0's traceback header cut short."""
    log = tmp_path / "mpirun.out"
    log.write_text("\n".join([
        "[1,0]<stdout>:step 1 loss 2.1",
        "[1,1]<stdout>:step 1 loss 2.2",
        "[1,0]<stderr>:Traceback (most recent call last):",
        "[1,1]<stderr>:ModuleNotFoundError: No module named 'horovod.torch.mpi_lib_v2'",
    ]) + "\n", encoding="utf-8")
    v = diagnose_paths([str(log)]).verdict
    assert v.label is Label.CONFIG_ERROR and v.culprit is not None and v.culprit.rank == 1


#: logs that end inside an XLA compile: the slow-compile alarm (at severity ERROR while the compile goes
#: on), and the constant-folding alarm's "The operation took" (one instruction folded; corpus: dm-haiku-539)
ENDING_IN_XLA_COMPILE = [
    [
        "2021-10-29 07:59:58.028158: E external/org_tensorflow/tensorflow/compiler/xla/service/slow_operation_alarm.cc:55] ",
        "********************************",
        "Very slow compile?  If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.",
        "Compiling module primitive_computation_convert_element_type.3",
        "********************************",
    ],
    [
        "2022-10-12 16:01:47.590034: E external/org_tensorflow/tensorflow/compiler/xla/service/slow_operation_alarm.cc:65] Constant folding an instruction is taking > 1s:",
        "",
        "  reduce-window.16 (displaying the full instruction incurs a runtime overhead. Raise your logging level to 4 or above).",
        "2022-10-12 16:02:05.867327: E external/org_tensorflow/tensorflow/compiler/xla/service/slow_operation_alarm.cc:133] The operation took 19.277362298s",
    ],
]


@pytest.mark.parametrize("lines", ENDING_IN_XLA_COMPILE, ids=["slow-compile-alarm", "constant-folding-returned"])
def test_log_ending_inside_an_xla_compile_is_compiling(lines: list[str]) -> None:
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.COMPILING and v.action is Action.WAIT


def test_slow_compile_that_returned_is_not_compiling() -> None:
    """After the slow-compile alarm, "The operation took" is the compile's end: progress after it is healthy."""
    judge = _judge_lines([
        "[Compiling module jit_apply_fn] Very slow compile? If you want to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.",
        "E external/xla/xla/service/slow_operation_alarm.cc:133] The operation took 9m29.906265931s",
        *PROGRESS,
    ])
    assert judge.verdict(1010.0, final=True).label is Label.HEALTHY


def test_stall_report_at_the_end_is_a_wait_not_healthy() -> None:
    judge = _judge_lines([*PROGRESS, "[2021-04-10 21:28:20.658706: W horovod/common/stall_inspector.cc:105] One or more "
                          "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
                          "waiting for remainder of ranks for more than 60 seconds."])
    v = judge.verdict(1010.0, final=True)
    assert v.label is Label.COMM_TIMEOUT_TRANSIENT and v.action is Action.WAIT


def test_wrapper_error_takes_the_cause_of_the_earlier_error_of_its_process() -> None:
    """A build step's non-zero exit states no cause; the toolchain's refusal before it does."""
    judge = _judge_lines(["nvcc fatal   : Unsupported gpu architecture 'compute_89'",
                          "ninja: build stopped: subcommand failed.",
                          "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1."])
    v = judge.verdict(1010.0, final=True)
    assert v.label is Label.CONFIG_ERROR and v.action is Action.STOP



def test_launcher_error_takes_the_cause_of_the_panic_before_it() -> None:
    """A launcher's "crashed" states no cause; the panic it follows says the device ran out of memory."""
    judge = _judge_lines([
        "thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 would exceed allowed memory. (out of memory)'",
        "2023-07-07T17:55:43.805488Z ERROR text_generation_launcher: Webserver Crashed",
        "Error: WebserverFailed",
    ])
    v = judge.verdict(1010.0, final=True)
    assert v.label is Label.OOM


def test_launcher_error_after_a_causeless_panic_stays_a_crash() -> None:
    judge = _judge_lines(["thread 'main' panicked at src/main.rs:12:5:",
                          "2023-07-07T17:55:43.805488Z ERROR text_generation_launcher: Webserver Crashed"])
    v = judge.verdict(1010.0, final=True)
    assert v.label is Label.OTHER_CRASH and v.action is Action.RESTART


def test_wrapper_error_does_not_borrow_another_ranks_cause() -> None:
    """Rank 1's refusal (which it went on from) is not the cause of rank 0's build-step exit."""
    t0 = 1000.0
    judge = Judge(KB, JudgeSettings(), t0)
    judge.observe_lines([
        LogLine(RankKey("n0", 1), "nvcc fatal   : Unsupported gpu architecture 'compute_89'", t0, t0, "rank-1.log", 1),
        LogLine(RankKey("n0", 1), "step 1 loss 2.0 step_time 0.5s", t0 + 1, t0 + 1, "rank-1.log", 2),
        # a build step's exit that states no cause (ninja's own exit under torch's cpp_extension now states one:
        # heldout.round26a reads an extension's failed JIT build as configuration)
        LogLine(RankKey("n0", 0), "subprocess.CalledProcessError: Command '['cmake', '--build', '.']' returned non-zero exit status 1.",
                t0 + 2, t0 + 2, "rank-0.log", 1),
    ])
    v = judge.verdict(1010.0, final=True)
    assert v.culprit == RankKey("n0", 0)
    assert v.label is Label.OTHER_CRASH and v.action is Action.RESTART


def test_log_ending_inside_neuron_cc_records_is_compiling() -> None:
    lines = [f"09/11/2024 09:18:{s:02d} AM DEBUG [WalrusDriver.0]: INFO (ShrinkDN): ANALYZE mul_t458_i2883{s:02d}" for s in range(5)]
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.COMPILING and v.action is Action.WAIT


# -- issue23-heldout-9's forms ------------------------------------------------------------------------

#: (line, the kind it reads as, the cause its form states (None: none), where it is from, a near miss that
#: must read as nothing or as no failure)
ROUND9_FORMS: list[tuple[str, FormKind, Label | None, str, str]] = [
    # fairseq's pipes: key and value separated by a space (progress_bar.py _str_pipes)
    ("| epoch 028 | loss 3.976 | nll_loss 2.204 | ppl 4.61 | wps 279460 | ups 3 | wpb 110529.673 | bsz 3780.211 | num_updates 9165 | lr 0.000330319 | gnorm 0.635 | clip 0.000 | oom 0.000 | loss_scale 0.000 | wall 4043 | train_wall 3606",
     M, Label.NUMERICAL_ERROR, "corpus (fairseq-1529)",
     "| epoch 001 | loss 9.976 | nll_loss 9.204 | num_updates 365 | lr 0.000330319 | gnorm 0.635 | loss_scale 128 | wall 404"),
    # Python's zero-padded NaN ("{:07.5f}")
    ("Step      80 (23.64%): loss = 0000nan EER=0.00000", M, Label.NUMERICAL_ERROR, "corpus (tensorflow-42834)",
     "Step      60 (19.23%): loss = 0000.5 EER=0.17402"),
    # TensorRT's bracketed severity letter (samples/common/logging.h severityPrefix), the CamelCase OOM
    ("[11/07/2023-08:45:41] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory (no further information)",
     E, Label.OOM, "corpus (tensorrt-llm-102)",
     "[11/07/2023-08:45:41] [TRT] [W] Requested amount of GPU memory (33555480576 bytes) could not be allocated."),
    ("[03/01/2024-10:00:00] [TRT] [F] [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime (out of memory)",
     C, Label.OOM, "TensorRT samples/common/logging.h ([F] kINTERNAL_ERROR), filled in",
     "see the [F] key in the table below"),
    # nccl-tests' NCCLCHECK; the NCCL result it quotes states the cause gpu.nccl.system_error gives PyTorch's
    # wording (heldout.round29c)
    ("fastmoe: Test NCCL failure common.cu:777 'unhandled system error'", C, Label.COMM_ERROR, "corpus (nccl-473)",
     "# Out of bounds values : 0 OK"),
    # an exception carrying an absl status, under IPython's wrapper
    ("UnfilteredStackTrace: RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 31.06M. That was not possible. There are 58.64M free. Due to fragmentation, the largest contiguous region of free memory is 30.56M.; (0x0x0_HBM0)",
     E, Label.OOM, "corpus (trax-431)",
     "Note: RESOURCE_EXHAUSTED is the status an allocation returns when memory runs out"),
    # Triton's model table: the state word is Triton's, the cause the load error's
    ("| densenet_onnx      | 1       | UNAVAILABLE: Internal: unable to create stream: the provided PTX was compiled with an unsupported toolchain. |",
     E, Label.CONFIG_ERROR, "corpus (triton-server-5197)",
     "| densenet_onnx      | 1       | READY  |"),
    ("| inception_graphdef | 1       | UNAVAILABLE: Not found: model configuration is not provided for model 'inception_graphdef'                   |",
     E, Label.CONFIG_ERROR, "corpus (triton-server-5197)",
     "| Model              | Version | Status                                        |"),
    # slurmd's refusal of an expired credential
    ("srun: error: Task launch for 36.0 failed on node cn131: Job credential expired", E, Label.CONFIG_ERROR,
     "corpus (trixie-58)", "srun: Job credential lifetime is 120 seconds"),
    # NCCL's shm segment in a container's small /dev/shm
    ("  Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)", E, Label.CONFIG_ERROR,
     "corpus (torchtitan-853)", "NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"),
]


@pytest.mark.parametrize(("line", "kind", "label", "source", "near_miss"), ROUND9_FORMS,
                         ids=[f"round9:{i}" for i in range(len(ROUND9_FORMS))])
def test_round9_form_its_cause_and_its_near_miss(line: str, kind: FormKind, label: Label | None, source: str,
                                                  near_miss: str) -> None:
    form = read_line(line)
    assert form is not None and form.kind is kind, f"{form} ({source})"
    assert any(n in "\n" + line for n in NEEDLES), source
    found = cause_of(line)
    assert (found[0] if found else None) is label, f"{found} ({source})"
    miss = read_line(near_miss)
    assert miss is None or miss.kind not in (E, C, M), f"{miss} ({near_miss})"


def test_triton_state_word_is_not_a_grpc_status() -> None:
    """UNAVAILABLE in Triton's model table is the model's state: a load error that states no cause is a model the
    server cannot load (round issue23-heldout-22: configuration, as the load record with such an error reads), not
    a peer gone, while a gRPC status UNAVAILABLE elsewhere is."""
    found = cause_of("| resnet | 1 | UNAVAILABLE: Internal: unexpected error when loading the model |")
    assert found is not None and found[0] is Label.CONFIG_ERROR
    found = cause_of("jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: failed to connect to all addresses")
    assert found is not None and found[0] is Label.COMM_ERROR


#: the table's rules added for issue23-heldout-9's sources: (line, the rule it is read by, a near miss)
ROUND9_RULES = [
    ("2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, ppl=347.28, wps=30690.8, ups=0.07, wpb=427295, bsz=14390.4, num_updates=700, lr=0.000175, gnorm=156.036, loss_scale=0, train_wall=1281, wall=9877",
     "numerical.loss_scale_zero",
     "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, ppl=347.28, wps=30690.8, ups=0.07, wpb=427295, bsz=14390.4, num_updates=700, lr=0.000175, gnorm=1.036, loss_scale=0.0001, train_wall=1281, wall=9877"),  # fairseq#1895
    ("Step      80 (23.64%): loss = 0000nan EER=0.00000", "numerical.loss_not_finite",
     "Step      60 (19.23%): loss = 3.09014 EER=0.17402"),  # tensorflow#42834
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape cast",
     "xla.mosaic_compile_failed",
     "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Core halted unexpectedly"),  # jax#24404
]


@pytest.mark.parametrize(("line", "rule", "near_miss"), ROUND9_RULES)
def test_round9_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


def test_progress_record_with_a_zero_loss_scale_stops() -> None:
    """fairseq's record whose loss scale prints as 0 is numerical, although the progress rule matches it too."""
    lines = [f"2020-03-23 11:3{s}:44 | INFO | train_inner | epoch 003:      {s} / 356 loss=9.44, nll_loss=8.44, "
             f"num_updates={700 + s}, lr=0.000175, gnorm=156.036, loss_scale=0, train_wall=1281, wall=9877" for s in range(1, 4)]
    v = _judge_lines(lines).verdict(1010.0, final=True)
    assert v.label is Label.NUMERICAL_ERROR and v.action is Action.STOP


def test_nccl_system_error_takes_the_cause_of_its_last_error_line() -> None:
    """ncclSystemError is vague: NCCL's line for the failed call, under it, says /dev/shm is too small
    (torchtitan-853); without such a line the error stays a communication failure."""
    head = ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
            "Last error:"]
    v = _judge_lines([*head, "Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)"]).verdict(
        1010.0, final=True)
    assert v.label is Label.CONFIG_ERROR and v.action is Action.STOP
    v = _judge_lines([*head, "Exception raised from create at /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268 "
                             "(most recent call first):"]).verdict(1010.0, final=True)
    assert v.label is Label.COMM_ERROR and v.action is Action.RESTART


def test_nccl_system_error_under_a_traceback_header_explains_the_rank() -> None:
    """A traceback header names no cause; the NCCL system error under it does (nccl-875)."""
    v = _judge_lines(["Traceback (most recent call last):", '  File "train.py", line 10, in <module>',
                      "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled "
                      "system error, NCCL version 2.14.3"]).verdict(1010.0, final=True)
    assert v.label is Label.COMM_ERROR and v.action is Action.RESTART


#: causes read from round 9's forms: (line, the cause, a near miss that states none)
ROUND9_CAUSES = [
    ("SystemError: (Fatal) Operator conv2d raises an paddle::memory::allocation::BadAlloc exception.", Label.OOM,
     "SystemError: (Fatal) Operator conv2d raises an paddle::platform::EnforceNotMet exception."),  # PaddleSeg#1734
    ("ERROR:tensorflow:/job:worker/task:2 encountered the following error when processing closure: UnavailableError():Graph execution error:",
     Label.COMM_ERROR,
     "ERROR:tensorflow:/job:worker/task:2 encountered the following error when processing closure: InternalError():Graph execution error:"),  # tensorflow#57760
    ("java.lang.OutOfMemoryError: Java heap space", Label.OOM, "java.lang.IllegalStateException: Java heap space dump written"),  # BigDL#1570
]


@pytest.mark.parametrize(("line", "label", "near_miss"), ROUND9_CAUSES)
def test_round9_cause_and_its_near_miss(line: str, label: Label, near_miss: str) -> None:
    found = cause_of(line)
    assert found is not None and found[0] is label
    assert cause_of(near_miss) is None


def test_logged_exception_takes_the_cause_of_the_throwable_on_the_next_line(tmp_path: Path) -> None:
    """log4j prints logger.error(message, throwable) as the message, then the throwable on the next line
    (BigDL#1570); a throwable further down is not that record's."""
    head = "2019-08-19 02:42:12 ERROR Executor:91 - Exception in task 0.0 in stage 149.0 (TID 59)"
    log = tmp_path / "spark.log"
    log.write_text(f"{head}\njava.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf(Arrays.java:3236)\n")
    v = diagnose_paths([str(log)]).verdict
    assert v.label is Label.OOM and v.action is Action.RESTART
    apart = tmp_path / "apart.log"
    apart.write_text(f"{head}\n2019-08-19 02:42:13 INFO Executor:50 - Running task 1.0\n"
                     "java.lang.OutOfMemoryError: Java heap space\n")
    v = diagnose_paths([str(apart)]).verdict
    assert v.label is Label.OTHER_CRASH


#: the table's rules added for issue23-heldout-10's sources: (line, the rule it is read by, a near miss)
ROUND10_RULES = [
    ("2025-Jan-07 07:24:59.0615    58:58    ERROR   NRT:nrt_allocate_tensor_set                 Incompatible runtime state: NRT_STATE_CHILD",
     "neuron.nrt.state_child",
     "2025-Jan-03 21:00:33.247541 13423:13423 ERROR   NRT:nrt_close                               Unexpected runtime state: NRT_STATE_START"),  # aws-neuron-sdk#1083, #1078
    ("NCCL WARN NET/IB : Got async event : port error", "gpu.nccl.ib_port_error",
     "gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration"),  # nccl#905
    ("ms-pd-llm-d-modelservice-prefill-2:311:405 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_32:1 Got async error event: port error",
     "gpu.nccl.ib_port_error",
     "node1:1234:1301 [0] transport/net_ib.cc:120 NCCL WARN NET/IB : mlx5_0:1 Got async event : port active"),  # llm-d#191
]


@pytest.mark.parametrize(("line", "rule", "near_miss"), ROUND10_RULES)
def test_round10_rule_and_its_near_miss(line: str, rule: str, near_miss: str) -> None:
    m = KB.classify(line)
    assert m is not None and m.signature.id == rule
    miss = KB.classify(near_miss)
    assert miss is None or miss.signature.id != rule


def test_ib_port_error_is_a_warning_while_the_rank_goes_on() -> None:
    """A port that went down and came back (NCCL calls the event non-fatal) is no failure while the rank's steps
    go on; as the rank's last word it is why the transport failed."""
    port = "node1:1234:1301 [0] transport/net_ib/common.cc:190 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)"
    assert _judge_lines([port, *PROGRESS]).verdict(1010.0, final=True).label is Label.HEALTHY
    v = _judge_lines([*PROGRESS, port]).verdict(1010.0, final=True)
    assert v.label is Label.COMM_ERROR and v.action is Action.RESTART


#: forms read for issue23-heldout-10's sources: (line, the kind, the cause, where it is from, a near miss that
#: must read as nothing or as no failure)
ROUND10_FORMS: list[tuple[str, FormKind, Label | None, str, str]] = [
    # tf_cnn_benchmarks' step table (benchmark_cnn.py "%i\t%s\t%.*f": step, timing text, loss)
    ("20\timages/sec: 6653.0 +/- 183.1 (jitter = 813.2)\tnan", M, Label.NUMERICAL_ERROR, "tensorflow/benchmarks#269",
     "10\timages/sec: 6690.0 +/- 314.3 (jitter = 813.2)\t9.259"),
    ("20      images/sec: 6653.0 +/- 183.1 (jitter = 813.2)   nan", M, Label.NUMERICAL_ERROR,
     "corpus (tf-benchmarks-269: the tabs as spaces)", "3   files skipped: nan"),
    # JAX's GPU backend that failed, at WARNING as it falls back to the CPU (jax/_src/xla_bridge.py backends())
    ("CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation gpuDeviceGetAttribute( &major, GPU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) failed: CUDA_ERROR_NOT_INITIALIZED (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
     E, Label.CONFIG_ERROR, "jax-ml/jax#20711",
     "I1029 07:57:57.674494 140026811004672 xla_bridge.py:236] Unable to initialize backend 'tpu': INVALID_ARGUMENT: TpuPlatform is not available."),
    ("WARNING:jax._src.xla_bridge:CUDA backend failed to initialize: Found cuDNN version 8700, but JAX was built against version 8904, which is newer. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
     E, Label.CONFIG_ERROR, "jax-ml/jax#18027 (under Python logging's WARNING head)",
     "INFO:2024-06-25 00:34:55,109:jax._src.xla_bridge:889: Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'"),
    # mpirun's report of a daemon that never reported back at start-up (Open MPI's help text)
    ("An ORTE daemon has unexpectedly failed after launch and before", E, Label.CONFIG_ERROR, "NVIDIA/deepops#409",
     "communicating back to mpirun. This could be caused by a number"),
    # Triton's load record: Unavailable is the backend's code for a model file the repository lacks
    ("E0609 11:05:39.787741 697 model_repository_manager.cc:1242] failed to load 'cub200_resnet34' version 1: Unavailable: unable to find '/models/cub200_resnet34/1/model.pt' for model instance 'cub200_resnet34'",
     E, Label.CONFIG_ERROR, "clearml/clearml-serving#3",
     "I0609 11:05:39.787824 697 server.cc:500] "),
    # TensorFlow's check of the cuDNN it loaded (stream_executor/cuda/cuda_dnn.cc), the record's head cut
    ("Loaded runtime CuDNN library: 7.1.1 but source was compiled with: 7.2.1.  CuDNN library major and minor version needs to match or have higher minor version in case of CuDNN 7.0 or later version.",
     E, Label.CONFIG_ERROR, "tensorflow/tensorflow#19347",
     "2018-09-12 10:00:00.000000: I tensorflow/stream_executor/dso_loader.cc:151] successfully opened CUDA library libcudnn.so.7 locally"),
]


def test_triton_load_unavailable_takes_the_cause_of_its_message() -> None:
    """In Triton's load record Unavailable names no peer: the message says the cause, or none."""
    head = "E0609 11:05:39.787741 697 model_repository_manager.cc:1242] failed to load 'm' version 1: Unavailable: "
    assert cause_of(head + "unexpected error when loading the model") is None
    found = cause_of(head + "CUDA out of memory. Tried to allocate 20.00 MiB")
    assert found is not None and found[0] is Label.OOM
    found = cause_of("E0609 11:05:39.787741 697 grpc_server.cc:10] Unavailable: failed to connect to all addresses")
    assert found is not None and found[0] is Label.COMM_ERROR


@pytest.mark.parametrize(("line", "kind", "label", "source", "near_miss"), ROUND10_FORMS,
                         ids=[f"round10:{i}" for i in range(len(ROUND10_FORMS))])
def test_round10_form_its_cause_and_its_near_miss(line: str, kind: FormKind, label: Label | None, source: str,
                                                   near_miss: str) -> None:
    form = read_line(line)
    assert form is not None and form.kind is kind, f"{form} ({source})"
    assert any(n in "\n" + line for n in NEEDLES), source
    found = cause_of(line)
    assert (found[0] if found else None) is label, f"{found} ({source})"
    miss = read_line(near_miss)
    assert miss is None or miss.kind not in (E, C, M), f"{miss} ({near_miss})"


def test_uncaught_gloo_timeout_is_a_collective_that_did_not_complete(tmp_path: Path) -> None:
    """gloo's TimeoutException under libstdc++'s terminate report: its what() names no cause, the thrown type does
    (a collective a peer never joined); another gloo exception stays a crash of unknown cause."""
    what = "  what():  [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:587] TIMEOUT self_rank = 0 pair_rank = 1 peer_str = [172.16.32.105]:36265"
    for thrown, label in (("gloo::TimeoutException", Label.COLLECTIVE_HANG), ("gloo::EnforceNotMet", Label.OTHER_CRASH)):
        log = tmp_path / f"{thrown}.log"
        log.write_text("\n".join([*PROGRESS, f"terminate called after throwing an instance of '{thrown}'", what]) + "\n")
        v = diagnose_paths([str(log)]).verdict
        assert v.label is label and v.action is Action.RESTART, thrown
