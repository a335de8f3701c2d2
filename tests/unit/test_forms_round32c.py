# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-32 (the JAX ecosystem), each as a rule of its family,
with real lines and the near misses the rule must leave alone: XLA's status of a failed NCCL call, JAX's raised error
for a platform it could not start, JAX's check of its jaxlib, XLA's NCCL stub without a library, the TPU client's
alarm of an execution that has not returned, an exception for a target already there, and XLA's failed internal
checks in its compiler. Each line is from the
corpus (named by its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FormKind, read_line
from neuron_watch.events import Label
from tests.unit.form_table import cause_tests, table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # XLA's status of a failed NCCL call: NCCL's result string after the call's own text
    ("RuntimeError: Internal: external/org_tensorflow/tensorflow/compiler/xla/service/gpu/nccl_all_reduce_thunk.cc:162: NCCL operation ncclAllReduce(send_buffer, recv_buffer, buffer.element_count, datatype, reduce_op, comm, *cu_stream) failed: invalid usage: while running replica 0 and partition 0 of a replicated computation (other replicas may have failed as well).",
     ERROR, Label.CONFIG_ERROR, "corpus (vdvae-jax-2-nccl-allreduce-invalid-usage-mid-training)"),
    ("E0912 23:44:51.552719 2536982 pjrt_stream_executor_client.cc:3008] Execution of replica 0 failed: INTERNAL: NCCL operation ncclAllReduce( send_buffer.opaque(), recv_buffer.opaque(), ToNcclCount(dtype, count), nccl_dtype, ToNcclReduction(reduction_kind), comm_, se::gpu::AsGpuStreamValue(stream)) failed: invalid argument (run with NCCL_DEBUG=WARN for details). Last NCCL warning(error) log entry (may be unrelated) ''.",
     ERROR, Label.CONFIG_ERROR, "corpus (flax-4942-nnx-jit-ncclallreduce-invalid-argument-first-step)"),
    ("2024-01-11 05:43:11.726330: E external/xla/xla/service/gpu/nccl_utils.cc:219] INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:216: NCCL operation async_err failed: remote process exited or there was a network error",
     ERROR, Label.COMM_ERROR, "corpus (jax-19307-async-nccl-remote-process-exited)"),
    ("INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:275: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error",
     ERROR, Label.OTHER_CRASH, "jax#17399 (pmap on one node after a multi-node run)"),
    # JAX's error for a platform it was asked for and could not start, as raised
    ("RuntimeError: Unable to initialize backend 'cuda': INTERNAL: no supported devices found for platform CUDA (you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)",
     ERROR, Label.CONFIG_ERROR, "corpus (jax-28194-slurm-gpus-per-task-no-supported-cuda-devices)"),
    ("RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid 2718466. Not attempting to load libtpu.so in this process. (set JAX_PLATFORMS='' to automatically choose an available backend)",
     ERROR, Label.CONFIG_ERROR, "sglang-jax#857 (a second process on the same TPU)"),
    ("RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices. (you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)",
     ERROR, Label.CONFIG_ERROR, "signatures.toml jax.backend_probe's near miss (a GPU plugin with no visible device)"),
    # JAX's check of the jaxlib it imports
    ("RuntimeError: jaxlib is version 0.3.25, but this version of jax requires version >= 0.4.19.",
     ERROR, Label.CONFIG_ERROR, "corpus (weathernext-48-colab-tpu-jaxlib-older-than-jax-requires)"),
    ("ValueError: jaxlib is version 0.1.69, but this version of jax requires version 0.1.74.",
     ERROR, Label.CONFIG_ERROR, "ParallelFold#13 (an older jax's wording, raised as a ValueError)"),
    ("RuntimeError: jaxlib version 0.4.14 is newer than and incompatible with jax version 0.4.6. Please update your jax and/or jaxlib packages.",
     ERROR, Label.CONFIG_ERROR, "jax#17638"),
    # XLA's NCCL stub without a library
    ("external/xla/xla/service/gpu/nccl_utils.cc:133: NCCL operation ncclGetUniqueId(&id) failed: Unable to load NCCL library. Multi-GPU collectives will not work.;      ",
     ERROR, Label.CONFIG_ERROR, "corpus (jax-18391-xla-unable-to-load-nccl-library)"),
    ("  `Unable to load NCCL library. Multi-GPU collectives will not work.` W&B had no summary/history.",
     ERROR, Label.CONFIG_ERROR, "mixed-agents' run notes (a run that failed because NCCL was missing)"),
    # the TPU client's alarm of an execution that has not returned
    ("`2020-08-26 17:46:37.421334: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/client/tpu_client.cc:601] TPU Execute is taking a long time. This might be due to a deadlock between multiple TPU cores or a very slow program.`",
     ERROR, Label.COLLECTIVE_HANG, "corpus (jax-4153-trax-reformer-tpu-driver-execute-taking-long)"),
    ("Aug 20, 2023, 5:54:14 PM | WARNING | 2023-08-20 22:54:14.269232: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/client/tpu_client.cc:617] TPU Execute is taking a long time. This might be due to a deadlock between multiple TPU cores or a very slow program.",
     ERROR, Label.COLLECTIVE_HANG, "corpus (colabtools-3952-colab-tpu-execute-long-every-10s-runtime-log)"),
    ("2022-10-15 18:07:41.780474: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/client/tpu_client.cc:617] TPU Execute is taking a long time. This might be due to a deadlock between multiple TPU cores or a very slow program.",
     ERROR, Label.COLLECTIVE_HANG, "diffusers#856 (the alarm before the compile ran out of HBM)"),
    # an exception for a target the run creates that is already there
    ("orbax.checkpoint.checkpoint_manager.StepAlreadyExistsError: Checkpoint for step 2000 already exists.",
     ERROR, Label.CONFIG_ERROR, "corpus (orbax-2657-checkpoint-step-already-exists-final-save)"),
    ("tensorflow.python.framework.errors_impl.AlreadyExistsError: Another metric with the same name already exists.",
     ERROR, Label.CONFIG_ERROR, "TensorFlow with a second Keras install registering its metrics again"),
    # XLA's failed internal checks in its compiler's sources
    ("E0122 15:40:43.877828 1241887 status_macros.cc:57] INTERNAL: RET_CHECK failure (external/xla/xla/hlo/ir/hlo_computation.cc:1397) ShapeUtil::Compatible(old_instruction->shape(), new_instruction->shape()) \"abs.0\" (f64[2]{0}) vs \"iota\" (c128[2]{0})",
     ERROR, Label.COMPILE_ERROR, "corpus (jax-26051-odeint-ret-check-replace-instruction-shape)"),
    ("RuntimeError: Internal: RET_CHECK failure (external/org_tensorflow/tensorflow/compiler/xla/service/spmd/spmd_partitioner.cc:3779) hlo->has_sharding() Side-effect HLO must have sharding: %rng-get-and-update-state.2 = u64[2]{0} rng-get-and-update-state(), delta=1",
     ERROR, Label.COMPILE_ERROR, "corpus (mesh-transformer-jax-86-spmd-partitioner-ret-check-rng-sharding)"),
    ("2024-07-17 11:40:54.103908: E external/xla/xla/status_macros.cc:56] INTERNAL: RET_CHECK failure (external/xla/xla/service/cpu/ir_emitter.cc:1144) LayoutUtil::IsMonotonicWithDim0Major(operand->shape().layout())",
     ERROR, Label.COMPILE_ERROR, "corpus (jax-22484-xla-cpu-ret-check-ir-emitter-fft)"),
    ("tensorflow.python.framework.errors_impl.InternalError: RET_CHECK failure (learning/brain/google/xla/distributed_tpu_rewrite_pass.cc:800) arg_shape.handle_type != DT_INVALID",
     ERROR, Label.COMPILE_ERROR, "corpus (simclr-53-tf1-tpu-rewrite-ret-check-handle-type)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # JAX's probe of the platforms it was built for, logged by its logger: not a failure
    "I0820 16:10:25.293788 140208504612672 xla_bridge.py:353] Unable to initialize backend 'tpu_driver': NOT_FOUND: Unable to find driver in registry given worker: ",  # alphafold_non_docker#68
    "INFO:2024-06-25 00:34:55,109:jax._src.xla_bridge:889: Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'",  # jax#22070 (Python logging's head)
    # the frame that raises it, not the exception's line
    "    raise StepAlreadyExistsError(",  # corpus (orbax-2657-checkpoint-step-already-exists-final-save)
    # versions printed, not compared
    "jaxlib version: 0.4.7+cuda11.cudnn86",  # jax#15742's environment
    "jax:    0.4.23",  # jax#21217's environment
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)

#: error lines and the cause their form states
CAUSES: list[tuple[str, Label]] = [
    ("RuntimeError: jaxlib is version 0.1.57, but this version of jax requires version >= 0.3.7.", Label.CONFIG_ERROR),  # plenoctree#22
    ("RuntimeError: Unable to initialize backend 'cuda': INTERNAL: no supported devices found for platform CUDA (you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)",
     Label.CONFIG_ERROR),
]
#: error lines whose form states no cause of these kinds: a failed internal check outside the compiler
NO_CAUSE = [
    "RuntimeError: cannot join current thread",
]

test_cause_of_error, test_error_without_cause = cause_tests(CAUSES, NO_CAUSE)


def test_a_failed_check_outside_the_compiler_is_not_a_compile_error() -> None:
    """XLA's RET_CHECK in its runtime (an executable, a client, a thunk) says nothing of a compile."""
    form = read_line("INTERNAL: RET_CHECK failure (external/xla/xla/service/gpu/gpu_executable.cc:421) stream != nullptr")
    assert form is None or form.label is not Label.COMPILE_ERROR


def test_the_tpu_alarm_yields_to_the_error_that_follows(tmp_path: Path) -> None:
    """The alarm is the cause only while nothing after it states another: a compile that then ran out of HBM is an
    OOM (diffusers#856's alarm, then the error its issue is named after)."""
    log = tmp_path / "stall-then-oom.log"
    log.write_text(
        "2022-10-15 18:07:41.780474: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/client/tpu_client.cc:617] TPU Execute is taking a long time. This might be due to a deadlock between multiple TPU cores or a very slow program.\n"
        "Traceback (most recent call last):\n"
        '  File "bulk_infer_jax.py", line 102, in main\n'
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.91G of 15.48G hbm. Exceeded hbm capacity by 2.43G.\n")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.OOM
