"""Failure forms read for the misses of round issue23-heldout-28 (half B: training-infrastructure libraries): a
loss scaler that gave up and stopped the run, and a build whose CMake configuration failed.

Pure: no I/O. :func:`round28b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 27, and :func:`round28b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* A loss scaler that gives up stops the run with an exception that says why: gpt-neox's OverflowMonitor
  (megatron/utils.py, copied into its forks) ``raise Exception(f"Skipped {self.n} iterations in a row due to
  Overflow - Exiting training.")`` (gpt-neox#482, round issue23-heldout-28 half B, read as configuration as an
  exception before progress), fairseq's DynamicLossScaler ``FloatingPointError("Minimum loss scale reached ({}).
  Your loss is probably exploding. ...")``. Every step overflowed: a numerical failure, whatever the exception's
  class. A scaler's record of one lowered scale (apex amp's ``"Gradient overflow.  Skipping step, loss scaler 0
  reducing loss scale to 0.5"``, apex#834 in the same round, read as healthy) is left to the metric form, which
  reads a scale below fp16's smallest subnormal: a scale under one alone does not say the run is broken
  (yolact#359's healthy run printed 2**-16 between its iterations); only the unbroken run of halvings with no
  step between them does, which one line cannot show.
* CMake reports a configuration that failed with ``CMake Error at <file>:<line> (<command>):`` (or ``CMake
  Error:`` for one without a place) and ends it with ``-- Configuring incomplete, errors occurred!``
  (cmake.cxx). A package it could not find (FindPackageHandleStandardArgs' ``Could NOT find CUDNN (missing:
  ...)`` under a REQUIRED find_package, FindCUDNN's ``Could not find cudnn_LIBRARY``), a CMake or compiler too
  old, a generator not installed: the build environment, which a restart configures the same way
  (TransformerEngine#954, a conda build without cuDNN, round issue23-heldout-28 half B, restarted as a crash; the
  same lines end ROS, monero and opticks builds). CMake's status lines (``-- Could NOT find OpenMP_C``, printed for
  an optional package) are not errors and are not read.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round28b_form` reads hold, besides the needles failureforms already
#: searches: the gave-up exceptions, CMake's errors
NEEDLES: tuple[str, ...] = ("due to Overflow", "Minimum loss scale reached", "CMake Error", "Configuring incomplete")

#: a loss scaler that gave up and stops the run (gpt-neox's OverflowMonitor, fairseq's DynamicLossScaler)
_SCALER_GAVE_UP = re.compile(r"\bSkipped \d+ iterations in a row due to Overflow\b|"
                             r"\bMinimum loss scale reached \(")

#: CMake's error record and the end of a configuration that failed
_CMAKE_ERROR = re.compile(r"^[\s>|]*(?:\w+ ERR! )?(?:CMake Error at \S+:\d+ \(\w+\):?|CMake Error: \S)|"
                          r"^[\s>|]*(?:\w+ ERR! )?(?:-- )?Configuring incomplete, errors occurred!")


def round28b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("due to Overflow" in text or "Minimum loss scale reached" in text) and _SCALER_GAVE_UP.search(text):
        return Form(FormKind.ERROR, "a loss scaler that gave up: every step overflowed", Label.NUMERICAL_ERROR)
    if ("CMake Error" in text or "Configuring incomplete" in text) and _CMAKE_ERROR.search(text):
        return Form(FormKind.ERROR, "a build whose CMake configuration failed (a dependency or tool it lacks)",
                    Label.CONFIG_ERROR)
    return None


def round28b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round28b_form(text))
