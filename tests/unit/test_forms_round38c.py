# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-38 (robotics, embodied AI and reinforcement-learning
training), each as a rule of its family, with real lines and the near misses the rule must leave alone: JAX's CUDA
plugin's missing library, TensorFlow Datasets' dataset not found, Ray's gRPC UNAVAILABLE, dm_control's non-finite
controls, XLA's rematerialization of a negative budget, and Mesa's EGL warnings. Each line is from the corpus (named by
its excerpt) or from a public thread or repository (named)."""

from __future__ import annotations

from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind, read_quiet
from neuron_watch.diagnosis.heldout.round38c import round38c_form, round38c_quiet
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # JAX's CUDA plugin cannot load a library it needs
    ("RuntimeError: Unable to load cuSPARSE. Is it installed?", ERROR, Label.CONFIG_ERROR,
     "corpus (mujoco-playground-137-jax-cuda-plugin-cusparse-falls-back-to-cpu)"),
    ("RuntimeError: Unable to load cuDNN. Is it installed?", ERROR, Label.CONFIG_ERROR,
     "jax_plugins/xla_cuda12/__init__.py _version_check's message for cuDNN"),
    ("RuntimeError: Unable to load CUDA runtime. Is it installed?",
     ERROR, Label.CONFIG_ERROR, "jax_plugins/xla_cuda12/__init__.py _version_check's message for the CUDA runtime"),
    # TensorFlow Datasets' context of a dataset not found
    ("No builder could be found in the directory: ./droid for the builder: droid.", ERROR, Label.CONFIG_ERROR,
     "corpus (droid-policy-learning-1-tfds-builder-droid-no-versions)"),
    ("The builder directory droid/droid doesn't contain any versions.", ERROR, Label.CONFIG_ERROR,
     "corpus (droid-policy-learning-1-tfds-builder-droid-no-versions)"),
    ("No builder could be found in the directory: ./data/CIFAR10 for the builder: speckle_noise_1.", ERROR,
     Label.CONFIG_ERROR, "a public repository's README quoting the error of timm's TFDS parser"),
    # Ray's status 14 (gRPC UNAVAILABLE) with a transport's words
    ("E1220 19:29:07.198726 26155 26694 task_manager.cc:323] Task failed: IOError: 14: Socket closed: Type=ACTOR_TASK, Language=PYTHON, Resources: {}, function_descriptor={type=PythonFunctionDescriptor, module_name=ray.rllib.agents.trainer_template, class_name=PPO, function_name=train, function_hash=}",
     ERROR, Label.COMM_ERROR, "corpus (smarts-337-rllib-raylet-socket-closed-after-network-loss)"),
    ("(pid=1926) E0410 22:47:48.455427  1941 task_manager.cc:194] Task failed: IOError: 14: Socket closed: Type=ACTOR_TASK, Language=PYTHON",
     ERROR, Label.COMM_ERROR, "corpus (nupic-research-233-ray-actor-socket-closed-retrying)"),
    ("Lost connection with local raylet. Error: IOError: 14: failed to connect to all addresses", ERROR,
     Label.COMM_ERROR, "ray-project/ray#6662's title (RLlib on Ray 0.8.0)"),
    # dm_control's physics error for non-finite controls
    ("dm_control.rl.control.PhysicsError: Physics state is invalid. Warning(s) raised: mjWARN_BADCTRL", ERROR,
     Label.NUMERICAL_ERROR, "corpus (dm-control-99-physicserror-mjwarn-badctrl-from-actions)"),
    ("PhysicsError: Physics state is invalid. Warning(s) raised: mjWARN_BADQACC, mjWARN_BADCTRL", ERROR,
     Label.NUMERICAL_ERROR, "dm_control/mujoco/engine.py _INVALID_PHYSICS_STATE with two of MuJoCo's warnings"),
    # XLA's rematerialization of a program whose parameters exceed the memory
    ("2025-02-08 13:49:59.295718: W external/xla/xla/hlo/transforms/simplifiers/hlo_rematerialization.cc:3021] Can't reduce memory use below -21.13",
     ERROR, Label.OOM, "corpus (openpi-280-pi0-fast-libero-rematerialization-on-3090)"),
    ("2024-02-19 15:14:56.882326: W external/xla/xla/service/hlo_rematerialization.cc:2941] Can't reduce memory use below -30.29GiB (-32529110990 bytes) by rematerialization; only reduced to 49.62GiB (53280000080 bytes), down from 49.62GiB (53280000080 bytes) originally",
     ERROR, Label.OOM, "google-deepmind/mujoco#1431 (Brax SAC on MJX with a 30M-entry replay buffer)"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    # JAX's fallback warning: healthy runs of the corpus print it (dire-jax#14, kohya-colab#133)
    "WARNING:2025-06-06 20:45:54,562:jax._src.xla_bridge:791: An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.",
    # the raising frame, not the exception
    "    raise RuntimeError(err_msg) from e",
    # prose asking about a library
    "Unable to load the page. Is it installed on the server?",
    # TFDS found the dataset
    "Load dataset info from /data/droid/1.0.0",
    # MuJoCo's own warning: the simulation resets and goes on (W records for hours in humanoid-bench runs)
    "W0914 04:08:05.226161 140558028089152 core.py:64] Nan, Inf or huge value in QACC at DOF 80. The simulation is unstable. Time = 1.0900.",
    # XLA's rematerialization of a positive budget: the warning alone does not say the run failed
    "W0000 00:00:1756998431.440298    5182 hlo_rematerialization.cc:3183] Can't reduce memory use below 10.64GiB (11428802214 bytes) by rematerialization; only reduced to 71.27GiB (76523901244 bytes), down from 73.51GiB (78931543988 bytes) originally",
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_the_rules_count_this_round() -> None:
    assert FORM_RULES >= 63


def test_contact_buffer_full_is_left_to_the_exception_reader() -> None:
    """dm_control's PhysicsError for a full contact buffer (dm_control#155, a rare crash its maintainer says to
    discard and go on from) is not a NaN of the learner: this round's form leaves it."""
    line = "dm_control.rl.control.PhysicsError: Physics state is invalid. Warning(s) raised: mjWARN_CONTACTFULL"
    assert round38c_form(line) is None


def test_mesa_egl_warnings_are_quiet() -> None:
    """Mesa's EGL records below an error are warnings whatever they say (dm_control#214: the program terminates
    normally); its fatal record is not quieted."""
    for line in (">libEGL warning: failed to open /dev/dri/renderD129: Permission denied",
                 "libEGL warning: failed to open /dev/dri/renderD128: Permission denied",
                 "libEGL warning: DRI2: failed to create dri screen",
                 "libEGL debug: MESA-LOADER: failed to open swrast: /usr/lib/dri/swrast_dri.so"):
        assert round38c_quiet(line), line
        assert read_quiet(line), line
    assert not round38c_quiet("libEGL fatal: DRI driver not from this Mesa build")
    assert not round38c_quiet("ImportError: Cannot initialize a EGL device display. libEGL warning: x")



def test_a_status_fourteen_in_other_words_is_not_this_form() -> None:
    """Ray's status 14 with words other than a transport's (a deadline) is left to the glog reader: this round's form
    does not call it a communication error."""
    assert round38c_form("E0101 00:00:00.000000 1 task_manager.cc:1] Task failed: IOError: 14: Deadline Exceeded") is None
    assert round38c_form("OSError: [Errno 14] Bad address") is None
