"""Failure forms read for the misses of round issue23-heldout-16 (half B): pydantic's report of the arguments a
validated constructor refused, a version requirement stated as what to install, ptxas's diagnostic at its
location (and a kernel that needs a newer GPU than this one), and a C++ compiler's error on a source torch.compile
generated.

Pure: no I/O. :func:`round16b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 15, and :func:`round16b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error (a ``ValidationError: ...`` exception line, g++'s ``error:`` diagnostic:
the table's last rule takes those as errors no rule explains).

Each form is read where its program prints it:

* pydantic v2's validation error (pydantic-core src/errors/validation_exception.rs: the title ``{n} validation
  error(s) for {title}``, then per error its location and ``  {message} [type={error_type},
  input_value={input}, input_type={type}]``, then ``For further information visit https://errors.pydantic.dev/
  ...``; a validator that raises ValueError is reported as ``Value error, {message}``). The input is
  ``ArgsKwargs`` when what was validated is the arguments of a call: a pydantic dataclass's or model's
  constructor, a ``@validate_call`` function. That is a program being configured (vLLM builds its ModelConfig,
  ParallelConfig, CacheConfig... from the engine's arguments this way: ``Value error, User-specified max_model_len
  (131072) is greater than the derived max_model_len ...``), and the same arguments are refused on a restart.
  A request a server validates has a JSON body as its input (``input_type=dict``) and is not read here: the
  server answers 4xx and goes on. The title is read when it names a configuration (``... for ModelConfig``,
  ``... for TrainingArguments``, ``... for Settings``).
* A version requirement stated as what to install: Lightning's precision plugins
  (src/lightning/fabric/plugins/precision/amp.py and its pytorch_lightning predecessors native_amp.py,
  bf16.py: ``To use bfloat16 with native amp you must install torch greater or equal to 1.10.``, raised as
  MisconfigurationException or ImportError), and transformers' ``require_version`` (src/transformers/utils/
  versions.py _compare_versions: ``{requirement} is required for a normal functioning of this module, but found
  {pkg}=={got_ver}.``, an ImportError). The installed version is refused; a restart loads it again. Printed at a
  quiet level (a WARNING that the program goes on without the feature) it is not a failure.
* ptxas's diagnostic at its location (``ptxas <file>, line <n>; error   : <message>``, the CUDA assembler's own
  format, with its severity padded to the toolchain's column: the located form of forms_errors' _TOOL_SEVERITY,
  which reads it without a location): the compile of a kernel failed (Triton raises it as ``RuntimeError:
  Internal Triton PTX codegen error:`` with ptxas's output under it; XLA as ``ptxas exited with non-zero error
  code``). One message says the cause is the GPU: ``Feature '<feature>' requires .target sm_<nn> or higher``.
  A JIT compiler (Triton, Inductor, XLA) assembles for the GPU it runs on, so the kernel uses a feature (bf16
  conversions below sm_80, the sm_90 instructions) this device does not have: the program's settings (bf16 on a
  T4 or V100) ask the device for what it lacks, and every restart compiles the same kernel for the same GPU.
* A C/C++ compiler's error (GCC's and Clang's diagnostic ``<file>:<line>:<col>: error: <message>``) on a source
  Inductor wrote: torch.compile's C++ backend generates its kernels and wrapper under its cache directory
  (torch/_inductor/runtime/cache_dir_utils.py default_cache_dir: ``<tmp>/torchinductor_<user>``, files
  ``<dd>/<hash>.cpp`` or ``.main.cpp``) and builds them with the host's compiler (torch/_inductor/cpp_builder.py);
  an error there is the graph compiler's code that did not compile, which the same model compiles again. A
  header the compiler cannot find is a set-up (forms_errors reads ``fatal error: <header>: No such file``), and a
  C++ extension a project builds at start-up (not Inductor's) is not read here.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: The literals (digit-free, each holding a marker character of the classifier's batch search: a capital, a
#: bracket, a "y"/"u"/"h") that the lines these forms read hold and no older needle covers; the failure forms'
#: needles include them. ptxas's located diagnostic holds "error   : " (a needle already), g++'s "error:".
NEEDLES: tuple[str, ...] = (
    # pydantic's error line, and its title
    "[type=", " validation error",
    # a version requirement stated as what to install
    "must install ", "is required for a normal functioning",
)

#: pydantic's error line for the arguments of a validated call (validation_exception.rs): the message, then
#: "[type=<error type>, input_value=<the input, abridged>, input_type=ArgsKwargs]"
_PYDANTIC_ARGS = re.compile(r"\[type=\w+, input_value=.*, input_type=ArgsKwargs\]\s*$")
#: pydantic's title when the model it validated is a configuration: "<n> validation error(s) for <Title>", the
#: title a class named as configurations are (vLLM's ModelConfig, transformers' TrainingArguments, a Settings)
_PYDANTIC_CONFIG_TITLE = re.compile(
    r"\b\d+ validation errors? for \w*(?:Config|Configuration|Args|Arguments|Settings|Options|Params|Parameters)\b")

#: a version requirement stated as what to install: Lightning's "you must install <pkg> greater or equal to
#: <version>", transformers' "<requirement> is required for a normal functioning of this module, but found
#: <pkg>==<version>"
_MUST_INSTALL = re.compile(
    r"\bmust install [\w.-]+ (?:greater|newer|higher)(?: than)? or equal to \d|"
    r"\S+ is required for a normal functioning of this module, but found \S+==\S")
#: a Python warning's category before the words (warnings.formatwarning: "<file>:<line>: <Category>: <message>"):
#: the program warns and goes on
_WARNING_CATEGORY = re.compile(r"\b[A-Z]\w*Warning: ")

#: ptxas's diagnostic at its location: "ptxas <file>, line <n>; <severity>   : <message>" (the suffixed
#: builds' names too, "ptxas-blackwell"), or without one after a prefix (a rank's, a serving stack's: "(EngineCore_0
#: pid=9492) ptxas fatal   : ...") or unpadded ("ptxas error: Feature ..."), which _TOOL_SEVERITY does not read
_PTXAS_LOCATED = re.compile(r"(?:^|[\s:>|)])ptxas(?:-\w+)?(?: \S+, line \d+;)? (fatal|error)\s*: (\S.*)")
#: ... whose message says the kernel needs a newer GPU than the target it was assembled for
_NEEDS_NEWER_TARGET = re.compile(r"^Feature '[^']+' requires \.target sm_\d+\w* or higher\b")

#: GCC's and Clang's error diagnostic on a source under Inductor's cache directory
_INDUCTOR_CXX_ERROR = re.compile(r"\btorchinductor_[^/\s]*/(?:\S+/)?\w+(?:\.main)?\.(?:cpp|h|hpp):\d+:\d+: error: ")


def round16b_form(text: str) -> Form | None:
    """The failure form of these rounds' programs ``text`` holds: pydantic's refusal of a call's arguments, a
    version requirement, ptxas's located diagnostic."""
    if "[type=" in text and _PYDANTIC_ARGS.search(text):
        return Form(FormKind.ERROR, "pydantic's validation error of a constructor's arguments", Label.CONFIG_ERROR)
    required = _MUST_INSTALL.search(text) if "must install " in text or "normal functioning" in text else None
    if (required is not None and head_level(text) not in QUIET_LEVELS
            and not _WARNING_CATEGORY.search(text, 0, required.start())):
        return Form(FormKind.ERROR, "a version requirement the installed package does not meet", Label.CONFIG_ERROR)
    ptxas = _PTXAS_LOCATED.search(text) if "ptxas" in text else None
    if ptxas is not None:
        if _NEEDS_NEWER_TARGET.match(ptxas.group(2)):
            return Form(FormKind.ERROR, "ptxas: a kernel that needs a newer GPU than this one", Label.CONFIG_ERROR)
        return Form(FormKind.ERROR, f"a {ptxas.group(1)} diagnostic of ptxas", Label.COMPILE_ERROR)
    return None


def round16b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round16b_form(text))) is not None:
        return stated
    if " validation error" in text and _PYDANTIC_CONFIG_TITLE.search(text):
        return Label.CONFIG_ERROR, "pydantic's validation error of a configuration"
    if "torchinductor_" in text and _INDUCTOR_CXX_ERROR.search(text):
        return Label.COMPILE_ERROR, "a C++ compiler error on a source torch.compile generated"
    return None
