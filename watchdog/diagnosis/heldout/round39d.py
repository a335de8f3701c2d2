"""Forms read for the misses of round issue23-heldout-39 (part D: healthy runs that look frightening, part 6): Triton's
autotuner benchmarking the configurations of a kernel, a compile at work that prints nothing of a compiler.

Pure: no I/O. :func:`round39d_form` is asked after the forms of round 38. The round states no cause (its forms are
a compile's phases, running and done), so, like round 38 part D's, it gives failureforms' ``cause_of`` nothing to ask
and has no ``_cause`` function.

Each form is read where its program prints it:

* Triton's autotuner (python/triton/runtime/autotuner.py, ``Autotuner``) benchmarks every configuration of an
  ``@triton.autotune`` kernel the first time it meets a new key (the key's argument values and dtypes), compiling
  each one; with ``TRITON_PRINT_AUTOTUNING=1`` (``knobs.autotuning.print``) ``_bench`` prints, before each
  configuration, ``print(f"Autotuning kernel {self.base_fn.__name__} with config {config}")`` (a ``Config`` prints
  as ``BT: 8, num_warps: 2, num_ctas: 1, num_stages: 3, maxnreg: None``), and ``run`` prints, once the key is
  tuned, ``print(f"Triton autotuning for function {name},\\nwith key as {key},\\nfinished after {t:.2f}s,\\nbest
  config selected: {config};")``. A benchmark can take minutes per key (tens of minutes under memory pressure) with
  the GPU busy and no step logged: a log that ends on "Autotuning kernel ..." after the last "Triton autotuning for
  function ..." is a compile still running, one that ends after that header has finished its tuning (round
  issue23-heldout-39: ms-swift#10008, a GRPO run whose fla l2norm kernels were tuned again for each new sequence
  shape, read as healthy with the autotuner at work). The lines are printed by the autotuner whatever the kernel;
  prose that names the autotuner ("autotuning kernels is slow") has no ``with config <name>: <value>`` after the
  kernel's name and is not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind

#: The literals (digit-free) the lines :func:`round39d_form` reads hold, each with one of the batch search's marker
#: characters (keyfinder._MARKERS: the "A", the "T"): the autotuner's line before each configuration it benchmarks and
#: the header of its report of a key it has tuned
NEEDLES: tuple[str, ...] = ("Autotuning kernel", "Triton autotuning for function")

#: Triton's autotuner about to benchmark one configuration of a kernel (autotuner.py ``_bench``): the kernel's name,
#: then the configuration as ``Config.__str__`` prints it, a ``name: value`` list
_AUTOTUNING_CONFIG = re.compile(r"(?:^|\s)Autotuning kernel [A-Za-z_]\w* with config \w+: \S")
#: the first line of the autotuner's report of a key it has tuned (autotuner.py ``run``), which ends in a comma
#: before the key, the time and the configuration it chose on the lines after it
_AUTOTUNING_DONE = re.compile(r"(?:^|\s)Triton autotuning for function [A-Za-z_]\w*,\s*$")


def round39d_form(text: str) -> Form | None:
    """The form ``text`` holds among this round's, or None."""
    if "Autotuning kernel" in text and _AUTOTUNING_CONFIG.search(text):
        return Form(FormKind.COMPILE_RUNNING, "Triton's autotuner benchmarking a kernel's configurations")
    if "Triton autotuning" in text and _AUTOTUNING_DONE.search(text):
        return Form(FormKind.COMPILE_DONE, "Triton's autotuner finished tuning a kernel")
    return None
