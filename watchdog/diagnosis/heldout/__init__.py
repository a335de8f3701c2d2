"""The forms each held-out round of real logs taught the reader, asked in the order they were added.

Pure: no I/O. Each round's module (``round<N><part>`` of this package) reads the forms its round's misses were
written in (see tests/data/real-logs/README.md); :mod:`~neuron_watch.diagnosis.failureforms` asks
:func:`heldout_form` after its own crash, metric and stated-error forms and before alarms, severities and
exceptions, and :func:`heldout_cause` before its own causes. One place lists them, so that a new round's
module is registered here alone.
"""

from __future__ import annotations

from neuron_watch.diagnosis.formkinds import Form
from neuron_watch.diagnosis.heldout.round13a import round13a_cause, round13a_form
from neuron_watch.diagnosis.heldout.round13b import NEEDLES as ROUND13B_NEEDLES
from neuron_watch.diagnosis.heldout.round13b import round13b_form
from neuron_watch.diagnosis.heldout.round14a import NEEDLES as ROUND14A_NEEDLES
from neuron_watch.diagnosis.heldout.round14a import round14a_cause, round14a_form
from neuron_watch.diagnosis.heldout.round14b import NEEDLES as ROUND14B_NEEDLES
from neuron_watch.diagnosis.heldout.round14b import round14b_cause, round14b_form
from neuron_watch.diagnosis.heldout.round15a import NEEDLES as ROUND15A_NEEDLES
from neuron_watch.diagnosis.heldout.round15a import round15a_cause, round15a_form
from neuron_watch.diagnosis.heldout.round15b import NEEDLES as ROUND15B_NEEDLES
from neuron_watch.diagnosis.heldout.round15b import round15b_cause, round15b_form
from neuron_watch.diagnosis.heldout.round16a import NEEDLES as ROUND16A_NEEDLES
from neuron_watch.diagnosis.heldout.round16a import round16a_cause, round16a_form
from neuron_watch.diagnosis.heldout.round16b import NEEDLES as ROUND16B_NEEDLES
from neuron_watch.diagnosis.heldout.round16b import round16b_cause, round16b_form
from neuron_watch.diagnosis.heldout.round17a import NEEDLES as ROUND17A_NEEDLES
from neuron_watch.diagnosis.heldout.round17a import round17a_cause, round17a_form
from neuron_watch.diagnosis.heldout.round17b import round17b_cause
from neuron_watch.diagnosis.heldout.round18a import NEEDLES as ROUND18A_NEEDLES
from neuron_watch.diagnosis.heldout.round18a import round18a_cause, round18a_form
from neuron_watch.diagnosis.heldout.round18b import round18b_cause
from neuron_watch.diagnosis.heldout.round20a import NEEDLES as ROUND20A_NEEDLES
from neuron_watch.diagnosis.heldout.round20a import round20a_cause, round20a_form
from neuron_watch.diagnosis.heldout.round20b import NEEDLES as ROUND20B_NEEDLES
from neuron_watch.diagnosis.heldout.round20b import round20b_cause, round20b_form
from neuron_watch.diagnosis.heldout.round21a import NEEDLES as ROUND21A_NEEDLES
from neuron_watch.diagnosis.heldout.round21a import round21a_cause, round21a_form
from neuron_watch.diagnosis.heldout.round21b import round21b_cause
from neuron_watch.diagnosis.heldout.round22a import NEEDLES as ROUND22A_NEEDLES
from neuron_watch.diagnosis.heldout.round22a import round22a_cause, round22a_form
from neuron_watch.diagnosis.heldout.round22b import NEEDLES as ROUND22B_NEEDLES
from neuron_watch.diagnosis.heldout.round22b import round22b_cause, round22b_form
from neuron_watch.diagnosis.heldout.round23a import NEEDLES as ROUND23A_NEEDLES
from neuron_watch.diagnosis.heldout.round23a import round23a_cause, round23a_form
from neuron_watch.diagnosis.heldout.round23b import NEEDLES as ROUND23B_NEEDLES
from neuron_watch.diagnosis.heldout.round23b import round23b_cause, round23b_form
from neuron_watch.diagnosis.heldout.round24a import NEEDLES as ROUND24A_NEEDLES
from neuron_watch.diagnosis.heldout.round24a import round24a_cause, round24a_form
from neuron_watch.diagnosis.heldout.round24b import NEEDLES as ROUND24B_NEEDLES
from neuron_watch.diagnosis.heldout.round24b import round24b_cause, round24b_form
from neuron_watch.diagnosis.heldout.round25a import NEEDLES as ROUND25A_NEEDLES
from neuron_watch.diagnosis.heldout.round25a import round25a_cause, round25a_form
from neuron_watch.diagnosis.heldout.round25b import NEEDLES as ROUND25B_NEEDLES
from neuron_watch.diagnosis.heldout.round25b import round25b_cause, round25b_form
from neuron_watch.diagnosis.heldout.round26a import NEEDLES as ROUND26A_NEEDLES
from neuron_watch.diagnosis.heldout.round26a import round26a_cause, round26a_form
from neuron_watch.diagnosis.heldout.round26b import NEEDLES as ROUND26B_NEEDLES
from neuron_watch.diagnosis.heldout.round26b import round26b_cause, round26b_form
from neuron_watch.diagnosis.heldout.round27a import NEEDLES as ROUND27A_NEEDLES
from neuron_watch.diagnosis.heldout.round27a import round27a_cause, round27a_form
from neuron_watch.diagnosis.heldout.round27b import round27b_cause
from neuron_watch.diagnosis.heldout.round27c import NEEDLES as ROUND27C_NEEDLES
from neuron_watch.diagnosis.heldout.round27c import round27c_cause, round27c_form
from neuron_watch.diagnosis.heldout.round27d import NEEDLES as ROUND27D_NEEDLES
from neuron_watch.diagnosis.heldout.round27d import round27d_cause, round27d_form
from neuron_watch.diagnosis.heldout.round28a import NEEDLES as ROUND28A_NEEDLES
from neuron_watch.diagnosis.heldout.round28a import round28a_cause, round28a_form
from neuron_watch.diagnosis.heldout.round28b import NEEDLES as ROUND28B_NEEDLES
from neuron_watch.diagnosis.heldout.round28b import round28b_cause, round28b_form
from neuron_watch.diagnosis.heldout.round29a import NEEDLES as ROUND29A_NEEDLES
from neuron_watch.diagnosis.heldout.round29a import round29a_cause, round29a_form
from neuron_watch.diagnosis.heldout.round29b import NEEDLES as ROUND29B_NEEDLES
from neuron_watch.diagnosis.heldout.round29b import round29b_cause, round29b_form
from neuron_watch.diagnosis.heldout.round29c import NEEDLES as ROUND29C_NEEDLES
from neuron_watch.diagnosis.heldout.round29c import round29c_cause, round29c_form, round29c_quiet
from neuron_watch.diagnosis.heldout.round30a import NEEDLES as ROUND30A_NEEDLES
from neuron_watch.diagnosis.heldout.round30a import round30a_cause, round30a_form
from neuron_watch.diagnosis.heldout.round30b import NEEDLES as ROUND30B_NEEDLES
from neuron_watch.diagnosis.heldout.round30b import round30b_cause, round30b_form
from neuron_watch.diagnosis.heldout.round30c import NEEDLES as ROUND30C_NEEDLES
from neuron_watch.diagnosis.heldout.round30c import round30c_cause, round30c_form
from neuron_watch.diagnosis.heldout.round31b import NEEDLES as ROUND31B_NEEDLES
from neuron_watch.diagnosis.heldout.round31b import round31b_cause, round31b_form
from neuron_watch.diagnosis.heldout.round31d import NEEDLES as ROUND31D_NEEDLES
from neuron_watch.diagnosis.heldout.round31d import IgnoredReports, round31d_cause, round31d_form, round31d_quiet
from neuron_watch.diagnosis.heldout.round32a import NEEDLES as ROUND32A_NEEDLES
from neuron_watch.diagnosis.heldout.round32a import round32a_cause, round32a_form
from neuron_watch.diagnosis.heldout.round32b import NEEDLES as ROUND32B_NEEDLES
from neuron_watch.diagnosis.heldout.round32b import round32b_cause, round32b_form
from neuron_watch.diagnosis.heldout.round32c import NEEDLES as ROUND32C_NEEDLES
from neuron_watch.diagnosis.heldout.round32c import round32c_cause, round32c_form
from neuron_watch.diagnosis.heldout.round33a import NEEDLES as ROUND33A_NEEDLES
from neuron_watch.diagnosis.heldout.round33a import round33a_cause, round33a_form
from neuron_watch.diagnosis.heldout.round33b import NEEDLES as ROUND33B_NEEDLES
from neuron_watch.diagnosis.heldout.round33b import round33b_cause, round33b_form
from neuron_watch.diagnosis.heldout.round33c import NEEDLES as ROUND33C_NEEDLES
from neuron_watch.diagnosis.heldout.round33c import round33c_cause, round33c_form
from neuron_watch.diagnosis.heldout.round34a import NEEDLES as ROUND34A_NEEDLES
from neuron_watch.diagnosis.heldout.round34a import round34a_cause, round34a_form
from neuron_watch.diagnosis.heldout.round34b import NEEDLES as ROUND34B_NEEDLES
from neuron_watch.diagnosis.heldout.round34b import round34b_cause, round34b_form, round34b_quiet
from neuron_watch.diagnosis.heldout.round34c import NEEDLES as ROUND34C_NEEDLES
from neuron_watch.diagnosis.heldout.round34c import round34c_cause, round34c_form
from neuron_watch.diagnosis.heldout.round34d import NEEDLES as ROUND34D_NEEDLES
from neuron_watch.diagnosis.heldout.round34d import round34d_cause, round34d_form
from neuron_watch.diagnosis.heldout.round34e import NEEDLES as ROUND34E_NEEDLES
from neuron_watch.diagnosis.heldout.round34e import round34e_cause, round34e_form
from neuron_watch.diagnosis.heldout.round34f import NEEDLES as ROUND34F_NEEDLES
from neuron_watch.diagnosis.heldout.round34f import round34f_cause, round34f_form
from neuron_watch.diagnosis.heldout.round34g import NEEDLES as ROUND34G_NEEDLES
from neuron_watch.diagnosis.heldout.round34g import round34g_cause, round34g_form, round34g_quiet
from neuron_watch.diagnosis.heldout.round35a import NEEDLES as ROUND35A_NEEDLES
from neuron_watch.diagnosis.heldout.round35a import round35a_cause, round35a_form
from neuron_watch.diagnosis.heldout.round35b import NEEDLES as ROUND35B_NEEDLES
from neuron_watch.diagnosis.heldout.round35b import round35b_cause, round35b_form, round35b_quiet
from neuron_watch.diagnosis.heldout.round35c import NEEDLES as ROUND35C_NEEDLES
from neuron_watch.diagnosis.heldout.round35c import round35c_cause, round35c_form, round35c_quiet
from neuron_watch.diagnosis.heldout.round35d import NEEDLES as ROUND35D_NEEDLES
from neuron_watch.diagnosis.heldout.round35d import round35d_cause, round35d_form
from neuron_watch.diagnosis.heldout.round35e import NEEDLES as ROUND35E_NEEDLES
from neuron_watch.diagnosis.heldout.round35e import round35e_cause, round35e_form
from neuron_watch.diagnosis.heldout.round35f import NEEDLES as ROUND35F_NEEDLES
from neuron_watch.diagnosis.heldout.round35f import round35f_cause, round35f_form
from neuron_watch.diagnosis.heldout.round36a import NEEDLES as ROUND36A_NEEDLES
from neuron_watch.diagnosis.heldout.round36a import round36a_cause, round36a_form
from neuron_watch.diagnosis.heldout.round36b import NEEDLES as ROUND36B_NEEDLES
from neuron_watch.diagnosis.heldout.round36b import round36b_cause, round36b_form
from neuron_watch.diagnosis.heldout.round36c import NEEDLES as ROUND36C_NEEDLES
from neuron_watch.diagnosis.heldout.round36c import RankRegistrations, round36c_cause, round36c_form
from neuron_watch.diagnosis.heldout.round36d import round36d_quiet
from neuron_watch.diagnosis.heldout.round36e import NEEDLES as ROUND36E_NEEDLES
from neuron_watch.diagnosis.heldout.round36e import round36e_cause, round36e_form, round36e_quiet
from neuron_watch.diagnosis.heldout.round36f import NEEDLES as ROUND36F_NEEDLES
from neuron_watch.diagnosis.heldout.round36f import round36f_cause, round36f_form
from neuron_watch.diagnosis.heldout.round36g import NEEDLES as ROUND36G_NEEDLES
from neuron_watch.diagnosis.heldout.round36g import round36g_cause, round36g_form
from neuron_watch.diagnosis.heldout.round37a import NEEDLES as ROUND37A_NEEDLES
from neuron_watch.diagnosis.heldout.round37a import round37a_cause, round37a_form
from neuron_watch.diagnosis.heldout.round37b import NEEDLES as ROUND37B_NEEDLES
from neuron_watch.diagnosis.heldout.round37b import round37b_cause, round37b_form
from neuron_watch.diagnosis.heldout.round37c import NEEDLES as ROUND37C_NEEDLES
from neuron_watch.diagnosis.heldout.round37c import round37c_cause, round37c_form
from neuron_watch.diagnosis.heldout.round37d import NEEDLES as ROUND37D_NEEDLES
from neuron_watch.diagnosis.heldout.round37d import round37d_cause, round37d_form
from neuron_watch.diagnosis.heldout.round37e import NEEDLES as ROUND37E_NEEDLES
from neuron_watch.diagnosis.heldout.round37e import round37e_cause, round37e_form
from neuron_watch.diagnosis.heldout.round37f import NEEDLES as ROUND37F_NEEDLES
from neuron_watch.diagnosis.heldout.round37f import round37f_cause, round37f_form
from neuron_watch.diagnosis.heldout.round38a import NEEDLES as ROUND38A_NEEDLES
from neuron_watch.diagnosis.heldout.round38a import round38a_cause, round38a_form, round38a_repr
from neuron_watch.diagnosis.heldout.round38b import NEEDLES as ROUND38B_NEEDLES
from neuron_watch.diagnosis.heldout.round38b import round38b_cause, round38b_form, round38b_quiet
from neuron_watch.diagnosis.heldout.round38c import NEEDLES as ROUND38C_NEEDLES
from neuron_watch.diagnosis.heldout.round38c import round38c_cause, round38c_form, round38c_quiet
from neuron_watch.diagnosis.heldout.round38d import NEEDLES as ROUND38D_NEEDLES
from neuron_watch.diagnosis.heldout.round38d import (
    round38d_form,
    round38d_quiet,
    round38d_warning_stack,
)
from neuron_watch.diagnosis.heldout.round38e import NEEDLES as ROUND38E_NEEDLES
from neuron_watch.diagnosis.heldout.round38e import round38e_cause, round38e_form
from neuron_watch.diagnosis.heldout.round38g import NEEDLES as ROUND38G_NEEDLES
from neuron_watch.diagnosis.heldout.round38g import round38g_cause, round38g_form
from neuron_watch.diagnosis.heldout.round38h import NEEDLES as ROUND38H_NEEDLES
from neuron_watch.diagnosis.heldout.round38h import round38h_cause, round38h_form
from neuron_watch.diagnosis.heldout.round39a import NEEDLES as ROUND39A_NEEDLES
from neuron_watch.diagnosis.heldout.round39a import round39a_cause, round39a_form
from neuron_watch.diagnosis.heldout.round39b import NEEDLES as ROUND39B_NEEDLES
from neuron_watch.diagnosis.heldout.round39b import round39b_cause, round39b_form
from neuron_watch.diagnosis.heldout.round39c import NEEDLES as ROUND39C_NEEDLES
from neuron_watch.diagnosis.heldout.round39c import round39c_cause, round39c_form
from neuron_watch.diagnosis.heldout.round39d import NEEDLES as ROUND39D_NEEDLES
from neuron_watch.diagnosis.heldout.round39d import round39d_form
from neuron_watch.diagnosis.heldout.round39e import NEEDLES as ROUND39E_NEEDLES
from neuron_watch.diagnosis.heldout.round39e import round39e_cause, round39e_form
from neuron_watch.diagnosis.heldout.round39f import NEEDLES as ROUND39F_NEEDLES
from neuron_watch.diagnosis.heldout.round39f import round39f_cause, round39f_form
from neuron_watch.diagnosis.heldout.round39g import NEEDLES as ROUND39G_NEEDLES
from neuron_watch.diagnosis.heldout.round39g import round39g_cause, round39g_form
from neuron_watch.diagnosis.heldout.round39h import NEEDLES as ROUND39H_NEEDLES
from neuron_watch.diagnosis.heldout.round39h import round39h_cause, round39h_form
from neuron_watch.diagnosis.heldout.round40a import NEEDLES as ROUND40A_NEEDLES
from neuron_watch.diagnosis.heldout.round40a import round40a_cause, round40a_form
from neuron_watch.diagnosis.heldout.round40b import NEEDLES as ROUND40B_NEEDLES
from neuron_watch.diagnosis.heldout.round40b import round40b_cause, round40b_form
from neuron_watch.diagnosis.heldout.round40c import NEEDLES as ROUND40C_NEEDLES
from neuron_watch.diagnosis.heldout.round40c import round40c_cause, round40c_form
from neuron_watch.diagnosis.heldout.round40d import NEEDLES as ROUND40D_NEEDLES
from neuron_watch.diagnosis.heldout.round40d import round40d_cause, round40d_form
from neuron_watch.diagnosis.heldout.round40f import NEEDLES as ROUND40F_NEEDLES
from neuron_watch.diagnosis.heldout.round40f import round40f_cause, round40f_form
from neuron_watch.diagnosis.heldout.round40g import NEEDLES as ROUND40G_NEEDLES
from neuron_watch.diagnosis.heldout.round40g import round40g_cause, round40g_form
from neuron_watch.diagnosis.heldout.round40h import NEEDLES as ROUND40H_NEEDLES
from neuron_watch.diagnosis.heldout.round40h import round40h_cause, round40h_form
from neuron_watch.events import Label

#: every held-out round's needles (failureforms.NEEDLES holds them all)
NEEDLES: tuple[str, ...] = (
    # a traceback's frames in a compiler or a validator, a scheduler's refusal, Ray's memory monitor
    *ROUND13B_NEEDLES,
    # Hydra's error record, an OOM-killed container, Paddle's rethrown operator exception, the Neuron runtime
    # daemon's records, a failed exec
    *ROUND14A_NEEDLES,
    # c10d's and NCCL's reports of a collective that never completed, the compiler's own exceptions, a refusal
    # for want of memory, CUDA's peer-access limits
    *ROUND14B_NEEDLES,
    # Open MPI's help texts for a peer that hung up, a component not opened, a runtime that did not start;
    # the Ray GCS's record of a worker's exit
    *ROUND15A_NEEDLES,
    # Click's usage error
    *ROUND15B_NEEDLES,
    # Mosaic's report of a TPU kernel it could not compile
    *ROUND16A_NEEDLES,
    # pydantic's refusal of a constructor's arguments, a version requirement stated as what to install
    *ROUND16B_NEEDLES,
    # TorchScript's unknown operator, Open MPI's call outside MPI's lifetime, the TPU compile op's failed
    # compilation, libtpu's lock held by another user, horovodrun's build with no support to run with
    *ROUND17A_NEEDLES,
    # the dynamic loader's refusal of a library built against a symbol version it lacks
    *ROUND18A_NEEDLES,
    # Paddle's comparison check with a value that is not finite, CANN's operator without a kernel binary
    *ROUND20A_NEEDLES,
    # torch's warning of CUDA it could not initialise, NCCL's record of a contained CUDA error
    *ROUND20B_NEEDLES,
    # a TPU slice's failure code, the entries of XLA's OOM report, the Ascend runtime's stream timeout
    *ROUND21A_NEEDLES,
    # load_state_dict's refusal of a checkpoint, an assertion that failed in a native program
    *ROUND22B_NEEDLES,
    # c10d's refusal of a collective on a device its group has no backend for
    *ROUND22A_NEEDLES,
    # torch-neuron's records of a graph handed to neuron-cc and of the compiler's exit
    *ROUND23A_NEEDLES,
    # c10d's failed NCCL check, an admission webhook's refusal, Ray's runtime env, a file not there, a bracketed
    # loss, Inductor's autotuner dropping a candidate
    *ROUND23B_NEEDLES,
    # aws-ofi-nccl's test logger, oneCCL's provider records, Open MPI's start-up aborts, Keras's TerminateOnNaN,
    # Paddle's AmpScaler
    *ROUND24A_NEEDLES,
    # huggingface_hub's retried requests, a float overflow (ERANGE), torch elastic's agent told to die
    *ROUND24B_NEEDLES,
    # native crash reports (frames, an uncaught exception's header), a scheduler's limit kill, Flux's fatal
    # exception, a shell's signalled job, ROCclr's guarantee, the Kubernetes API's invalid object
    *ROUND25A_NEEDLES,
    # an allocator's failure (ggml's buffers, tcmalloc's NULL), CUDA samples' check, error 802, a failed systemd unit
    *ROUND25B_NEEDLES,
    # argparse's refused choice, a local daemon not reachable at its socket, an extension's failed JIT build,
    # Slurm's accounting over the memory limit, OneFlow's graph compiler at work
    *ROUND26A_NEEDLES,
    # a shell that could not run the command, the linker's missing library, Inductor's code generation, flashinfer's JIT
    *ROUND26B_NEEDLES,
    # a full file system or spent quota under any status, a failed call's errno in NCCL 2.0-2.2's and Open MPI's
    # BTL records, TensorFlow's cuDNN older than its build
    *ROUND27A_NEEDLES,
    # Go's status of a child a signal ended, amdgpu's failed resets, the Ascend runtime's device count, CANN's
    # missing kernel binary, Paddle's data-loader bus error, llama.cpp's model loader
    *ROUND27C_NEEDLES,
    # the kernel's hardware-error prefix as a device black box copies it, the Ascend runtime's wait timeout,
    # HCCL's link establishment
    *ROUND27D_NEEDLES,
    # loss scalers that lowered their scale below one or gave up, CMake's failed configuration
    *ROUND28B_NEEDLES,
    # a socket bind that failed, NCCL's bootstrap without an interface, pip building a package from source
    *ROUND28A_NEEDLES,
    # dpkg's, DKMS's and Docker's failed set-up, SageMaker's failed job, Go's missing file
    *ROUND29A_NEEDLES,
    # NVML and the NVIDIA container hook refusing, container runtimes that cannot start a container, the
    # scheduler's FailedScheduling, platforms' records of a container or replica that exited
    *ROUND29B_NEEDLES,
    # NCCL's result under another library's wrapper, MXNet's cuDNN autotuning, LightGBM's retried connect
    *ROUND29C_NEEDLES,
    # MindSpore's refused device allocations, log15's error levels, Go net/rpc's closed connection
    *ROUND30A_NEEDLES,
    # spdlog's and emilk/loguru's severity fields, libc++abi's uncaught exception, Metal's out-of-memory status, a
    # mach exception, a compile's progress bar, a device not acquired, a compile that failed, PJRT's version
    # handshake, Tensile's missing kernel library
    *ROUND30B_NEEDLES,
    # Open MPI's out-of-band TCP connection that failed, NCCL's collective the ranks do not call alike
    *ROUND30C_NEEDLES,
    # the container engine refusing a GPU container, a platform's OOMKill reason, ONNX Runtime's GPU provider not
    # created, CPython's unexpected keyword, Marian's checkpoint shape, pytest's failed test
    *ROUND31B_NEEDLES,
    # ESPnet's trainer stopped for want of a valid update, a trainer's count of zero examples
    *ROUND31D_NEEDLES,
    # Ray's unretrieved remote error, Ray's memory monitor's kill report, vLLM's NCCL library not loaded
    *ROUND32A_NEEDLES,
    # Hugging Face Trainer's ranks racing to rename the temporary checkpoint directory
    *ROUND32B_NEEDLES,
    # XLA's status of a failed NCCL call, JAX's raised backend error, its jaxlib check,
    # XLA's NCCL stub without a library, the TPU client's deadlock alarm, XLA's failed internal check in its
    # compiler, an exception for a target already there
    *ROUND32C_NEEDLES,
    # the device plugin's critical Xid, Slurm's reboot reason, TensorFlow's shutdown hook finding lame workers
    *ROUND33A_NEEDLES,
    # an exception quoted in a markdown code span, a gradient scaler's scale, THC's check of a CUDA call, PyTorch's
    # archive writer
    *ROUND33B_NEEDLES,
    # torch elastic's event of a failed worker, the shell's kill report in its locale's words or after mmcv's ETA,
    # IPython's exception header, a NaN in a YOLO trainer's progress row
    *ROUND33C_NEEDLES,
    # Cray MPICH's suspected hang, its assertion and its completion error, Open MPI's refused direct launch and
    # its failed libfabric set-up call
    *ROUND34B_NEEDLES,
    # the SageMaker SDK's status of a failed job, Kubernetes' CrashLoopBackOff, torch-neuron's record of a graph its
    # trace could not compile and of the compile's result
    *ROUND34E_NEEDLES,
    # a KV cache disaggregated servers could not hand over, ProcessGroupNCCL's dump signal of a timed-out collective,
    # vLLM's wait for a Ray placement group, the kubelet's liveness probe, DeepGEMM's JIT, TensorRT-LLM's layout check
    *ROUND34F_NEEDLES,
    # Open MPI's fault handler's frame, Dask's nanny on a worker process that died
    *ROUND34A_NEEDLES,
    # TensorRT's builder skipping a tactic whose check threw, Hugging Face Trainer's epoch without a sample
    *ROUND34G_NEEDLES,
    # PhysX's default error callback, its GPU buffers too small for the scene, its allocator out of memory; NVRTC's
    # refused architecture; torch.distributions' parameters that are not finite
    *ROUND35B_NEEDLES,
    # LLVM's and MLIR's fatal errors, XLA's conv autotuning alarm, bitsandbytes' CUDA set-up finding no runtime
    *ROUND35C_NEEDLES,
    # tf.keras's stop for want of data, a trainer's count of zero steps or an empty loader, torch_xla's graph compile
    *ROUND35F_NEEDLES,
    # DeepEP's kernels' and host's timeout reports, NVSHMEM's error-check records
    *ROUND36B_NEEDLES,
    # the ROCm runtime's GPU memory fault and hardware exception, amdgpu's RAS uncorrectable errors, a shell's
    # "(core dumped)" in any locale
    *ROUND36A_NEEDLES,
    # a printed tensor's row of values that are all NaN or infinite
    *ROUND36F_NEEDLES,
    # the toolkits' names for their loss, a loss tensor's autograd node, XLM's NaN record, the CUDA check macro of
    # NVIDIA's template, GradScaler's assertion of no gradient
    *ROUND36G_NEEDLES,
    # OpenSSH's unresolved host name, GNU tar's fatal stop, glibc's assertion in a set-up function
    *ROUND36C_NEEDLES,
    # c10d's monitored barrier's reports of the ranks that failed it and of a coordinator's failed reply
    *ROUND37F_NEEDLES,
    # cuDNN's and CTranslate2's loaders of a shared library they could not load, an import failure another exception
    # quotes
    *ROUND37B_NEEDLES,
    # gRPC core's messages of a call's stream the transport dropped, getopt's refusal of an option
    *ROUND37C_NEEDLES,
    # the Neuron runtime daemon's return code in its clients' words, TVM's compiler frames, torch-neuron's failed
    # compiler call
    *ROUND37D_NEEDLES,
    # a trainer's "found NaN ... loss", torch's tracer's exceptions on shapes that depend on the data
    *ROUND37E_NEEDLES,
    # torch elastic's agent stopping the workers still running
    *ROUND34D_NEEDLES,
    # a notebook kernel that died, the SageMaker toolkit's set-up errors, dstack's failed run's code, a replica's
    # folded traceback, RMM's out_of_memory, c10d's store socket timeout
    *ROUND34C_NEEDLES,
    # a device runtime initialised in a forked child, CPython's spawn from a module being imported, Ray's autoscaler
    # on a request no node type holds, TensorRT-LLM's MPI world of other ranks than the engine's
    *ROUND35A_NEEDLES,
    # TensorFlow's allocator OOM status, its kernel registry's refusal, its collective groups set up unlike and
    # aborted, an input pipeline run out inside a step
    *ROUND35E_NEEDLES,
    # NVML's lost GPU as its callers print it, TensorFlow's failed status check
    *ROUND35D_NEEDLES,
    # a relay's record of its child's line, SageMaker HyperPod's auto-resume, the Neuron runtime's core allocation
    *ROUND36E_NEEDLES,
    # CPython's failed import of a name printed without its class, activation checkpointing's mismatched recompute
    *ROUND37A_NEEDLES,
    # Windows' commit-limit error (1455), bitsandbytes' failed CUDA set-up, Sockeye's refusals to resume
    *ROUND38G_NEEDLES,
    # an exception's last line two processes printed at once (its class doubled)
    *ROUND38H_NEEDLES,
    # JAX's CUDA plugin's missing library, TFDS's dataset not found, Ray's gRPC UNAVAILABLE, dm_control's non-finite
    # controls, XLA's rematerialization of a negative budget
    *ROUND38C_NEEDLES,
    # a speech trainer's raise of a NaN loss, icefall's fp16 grad scale run down and gradients scaled by zero, the
    # Coqui trainer's refusal of several GPUs, a connection the OS forbade by policy
    *ROUND38E_NEEDLES,
    # setuptools' report of the compiler that failed building an extension, a compiler error in torch's headers
    *ROUND38B_NEEDLES,
    # Hydra's record of a job that raised and its instantiate's failures, the Hugging Face Hub's 404 words, LightGBM's
    # command line stopping on an exception, Boost.Compute's OpenCL errors
    *ROUND38A_NEEDLES,
    # DeepStream's nvinfer starting a TensorRT engine build from the model files
    *ROUND38D_NEEDLES,
    # a model name timm's or torchvision's factory does not know, a name an OpenMMLab registry does not hold,
    # OpenCLIP's missing model config
    *ROUND39C_NEEDLES,
    # Dask's nanny restarting a worker over its memory budget, YARN killing a container over its memory, Ray's full
    # object store, nvJPEG's failed allocation, DALI's operator it cannot construct, Mosaic streaming's missing
    # object, a Go fatal error's throw frame
    *ROUND39A_NEEDLES,
    # llama.cpp's quantizer's failure, a matrix a linear-algebra routine could not factor, a native extension whose
    # import failed, PyTorch's dispatcher without a kernel for the backend, a package without a constant its caller
    # names
    *ROUND39F_NEEDLES,
    # the BFC allocator's failed allocation and its dump, Boltz's count of skipped examples, ColabFold's guess of
    # memory before the error it caught, Hydra's missing config, a NaN in DeepXDE's table or TF's L-BFGS summary
    *ROUND39G_NEEDLES,
    # Paddle's allocator report of a device out of memory, DyNet's pools and allocator out of memory, MXNet's shape
    # inference refusing its inputs, Caffe's file not found, Darknet's file_error
    *ROUND39H_NEEDLES,
    # ms-swift's warning of a model's requirements the environment does not meet
    *ROUND39E_NEEDLES,
    # Py4J's refusal of a call the JVM lacks, SQLite's lock its concurrent writers meet
    *ROUND39B_NEEDLES,
    # Triton's autotuner benchmarking a kernel's configurations and its report of a key it has tuned
    *ROUND39D_NEEDLES,
    # NCCL's result under Horovod's "<call> failed:" wrapper, Gloo's device finding no address for a name, Open MPI's
    # unpack of a peer's message of another layout, TensorFlow 1.x's error summary indented by a paste
    *ROUND40F_NEEDLES,
    # the gpuAssert idiom's report of a failed CUDA call, TensorFlow's refusal of a lookup table's file
    *ROUND40C_NEEDLES,
    # trtexec building an engine and its engine built, icefall's note on a run-down grad scale, a JIT CUDA backend
    # without a toolkit, a batch-size retry loop's out of memory
    *ROUND40D_NEEDLES,
    # MONAI's wrapper of an exception a transform raised on a data item
    *ROUND40A_NEEDLES,
    # a histogram writer refusing values that are not finite, the W&B server's refusal of a run's entity, project or
    # key
    *ROUND40B_NEEDLES,
    # the model converters' refusals of a graph (tf2onnx, Paddle2ONNX, Core ML Tools, OpenVINO, torch.onnx),
    # Torch-TensorRT's compiler core, zsh's status of a command a signal ended
    *ROUND40H_NEEDLES,
    # CANN's failed runtime call and its reason, XTuner's caught command error, Colossal-AI's runtime kernel build
    *ROUND40G_NEEDLES,
)

#: round 31 part D's reader of CPython's reports of an ignored exception, round 36 part C's reader of a process group
#: its ranks never joined and round 38 part D's reader of the stack under Inductor's skipped CUDA graphs are given to
#: the offline reading from here, the one place that lists the rounds' modules
__all__ = ["NEEDLES", "IgnoredReports", "RankRegistrations", "heldout_cause", "heldout_exception_repr", "heldout_form",
           "heldout_quiet", "round38d_warning_stack"]


def heldout_exception_repr(text: str) -> str | None:
    """The ``Class: message`` line an exception printed as its repr stands for (round 38 part A: Hydra prints the
    exception under its instantiate's failure so), for failureforms' cause_of to read; None for any other line."""
    return round38a_repr(text)


def heldout_quiet(text: str) -> bool:
    """A record its program prints as a warning whatever words it holds: no form."""
    return (round29c_quiet(text) or round31d_quiet(text) or round34b_quiet(text) or round34g_quiet(text)
            or round35b_quiet(text) or round35c_quiet(text) or round36e_quiet(text) or round36d_quiet(text)
            or round38c_quiet(text) or round38b_quiet(text) or round38d_quiet(text))


def heldout_form(text: str) -> Form | None:
    """The form a held-out round taught that ``text`` holds, or None."""
    return (round13a_form(text) or round13b_form(text) or round14a_form(text) or round14b_form(text)
            or round15a_form(text) or round15b_form(text) or round16a_form(text) or round16b_form(text)
            or round17a_form(text) or round18a_form(text) or round20a_form(text) or round20b_form(text)
            or round21a_form(text) or round22a_form(text) or round22b_form(text) or round23a_form(text)
            or round23b_form(text) or round24a_form(text) or round24b_form(text) or round25a_form(text)
            or round25b_form(text) or round26a_form(text) or round26b_form(text) or round27a_form(text)
            or round27c_form(text) or round27d_form(text) or round28b_form(text) or round28a_form(text)
            or round29a_form(text) or round29b_form(text) or round29c_form(text) or round30a_form(text)
            or round30b_form(text) or round30c_form(text) or round31b_form(text) or round31d_form(text)
            or round32a_form(text) or round32b_form(text) or round32c_form(text) or round33a_form(text)
            or round33b_form(text) or round33c_form(text) or round34b_form(text) or round34e_form(text)
            or round34f_form(text) or round34a_form(text) or round34g_form(text) or round35b_form(text)
            or round35c_form(text) or round35f_form(text) or round36b_form(text) or round36a_form(text)
            or round34d_form(text) or round34c_form(text) or round35a_form(text) or round35e_form(text)
            or round35d_form(text) or round36e_form(text) or round36f_form(text) or round36g_form(text)
            or round36c_form(text) or round37f_form(text) or round37b_form(text) or round37a_form(text)
            or round37c_form(text) or round37d_form(text) or round37e_form(text) or round38g_form(text)
            or round38h_form(text) or round38c_form(text) or round38e_form(text) or round38b_form(text)
            or round38a_form(text) or round38d_form(text) or round39c_form(text) or round39a_form(text)
            or round39f_form(text) or round39g_form(text) or round39h_form(text) or round39e_form(text)
            or round39b_form(text) or round39d_form(text) or round40f_form(text) or round40c_form(text)
            or round40d_form(text) or round40a_form(text) or round40b_form(text) or round40h_form(text)
            or round40g_form(text))


def heldout_cause(text: str) -> tuple[Label, str] | None:
    """The cause a held-out round's form states in ``text``, or None. A device's fault stated in CUDA's
    words outranks the component that met it (an allocator's record of the failed free, a C++
    terminate, a server's pipeline that caught it): round18b's and round20b's forms first."""
    return (round18b_cause(text) or round20b_cause(text) or round13a_cause(text) or round14a_cause(text)
            or round14b_cause(text) or round15a_cause(text) or round15b_cause(text) or round16a_cause(text)
            or round16b_cause(text) or round17a_cause(text) or round17b_cause(text) or round18a_cause(text)
            or round20a_cause(text) or round21a_cause(text) or round21b_cause(text) or round22a_cause(text)
            or round22b_cause(text) or round23a_cause(text) or round23b_cause(text) or round24a_cause(text)
            or round24b_cause(text) or round25a_cause(text) or round25b_cause(text) or round26a_cause(text)
            or round26b_cause(text) or round27a_cause(text) or round27b_cause(text) or round27c_cause(text)
            or round27d_cause(text) or round28b_cause(text) or round28a_cause(text) or round29a_cause(text)
            or round29b_cause(text) or round29c_cause(text) or round30a_cause(text) or round30b_cause(text)
            or round30c_cause(text) or round31b_cause(text) or round31d_cause(text) or round32a_cause(text)
            or round32b_cause(text) or round32c_cause(text) or round33a_cause(text) or round33b_cause(text)
            or round33c_cause(text) or round34b_cause(text) or round34e_cause(text) or round34f_cause(text)
            or round34a_cause(text) or round34g_cause(text) or round35b_cause(text) or round35c_cause(text)
            or round35f_cause(text) or round36b_cause(text) or round36a_cause(text) or round34d_cause(text)
            or round34c_cause(text) or round35a_cause(text) or round35e_cause(text) or round35d_cause(text)
            or round36e_cause(text) or round36f_cause(text) or round36g_cause(text) or round36c_cause(text)
            or round37f_cause(text) or round37b_cause(text) or round37a_cause(text) or round37c_cause(text)
            or round37d_cause(text) or round37e_cause(text) or round38g_cause(text) or round38h_cause(text)
            or round38c_cause(text) or round38e_cause(text) or round38b_cause(text) or round38a_cause(text)
            or round39c_cause(text) or round39a_cause(text) or round39f_cause(text) or round39g_cause(text)
            or round39h_cause(text) or round39e_cause(text) or round39b_cause(text) or round40f_cause(text)
            or round40c_cause(text) or round40d_cause(text) or round40a_cause(text) or round40b_cause(text)
            or round40h_cause(text) or round40g_cause(text))
