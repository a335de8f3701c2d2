"""Failure forms read for the misses of round issue23-heldout-38 (part B: graph neural network training, PyG and its
native extensions torch_scatter/torch_sparse/torch_cluster, DGL and its distributed training, graph-learn): the build
of a native extension whose compiler setuptools ran and saw fail, and the status a graph sampler's server returns when
a traversal has no more data, which its client logs at ERROR on every healthy epoch.

Pure: no I/O. :func:`round38b_form` is asked after the forms of round 37, :func:`round38b_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error, and
:func:`round38b_quiet` by :func:`neuron_watch.diagnosis.failureforms.read_quiet`.

Each form is read where its program prints it:

* setuptools (its vendored distutils) builds a package's C/C++/CUDA extension by spawning the compiler for each
  source: ``distutils/spawn.py`` raises ``DistutilsExecError("command %r failed with exit status %d")`` (older
  releases ``"command '%s' failed with exit status %d"``, setuptools 60 and later ``"command {!r} failed with exit
  code {}"``, and ``"command {!r} failed: {}"`` when the executable cannot be run, "No such file or directory"),
  ``unixccompiler``/``msvccompiler`` turn it into ``CompileError``, and the command line's handler prints it as
  ``error: <message>``. A package built from source as pip installs it (torch-scatter, torch-sparse, torch-cluster,
  apex, the ops of DeepSpeed or flash-attention built by setup.py) ends on ``error: command '/usr/local/cuda/bin/
  nvcc' failed with exit status 1`` after the compiler's own errors (nvcc's ``48 errors detected in the compilation
  of "...segment_coo_cuda.cpp1.ii".``, a GCC error inside torch's installed headers). The corpus labels these builds
  configuration (apex-1173; round issue23-heldout-38: pytorch_geometric-3471, torch-scatter on PyTorch 1.5.0 that
  needs torch-scatter 2.0.5, and pytorch_scatter-175, torch's headers against an older PyTorch and GCC, both
  restarted as crashes): the toolchain, the CUDA release or the PyTorch version does not fit the extension, and a
  restart builds with the same ones. Only a compiler's command is read (nvcc, gcc/g++ and their versioned or
  cross-prefixed names, cc/c++, clang, hipcc, icc/icpx, MSVC's cl.exe): ``error: command 'git' failed`` is
  another matter, and pip's ``Failed building wheel for X`` states no cause (round 28 part B's table).
* The compiler's own error, when it is located in PyTorch's installed headers (GCC's and clang's ``<file>:<line>:
  <col>: error:``, nvcc's ``<file>(<line>): error:``, under ``site-packages/torch/include/`` or, before PyTorch 1.5,
  ``torch/lib/include/``; ``dist-packages`` on Debian's Python), comes first in the same builds: torch's headers
  are not the extension's code and build with the compilers PyTorch supports, so an error inside them is the
  extension (or its toolchain) against another PyTorch (pytorch_scatter-175: ``.../site-packages/torch/include/
  torch/csrc/api/include/torch/nn/cloneable.h:68:61: error: invalid static_cast ...``, fixed by upgrading PyTorch;
  pyg-team/pytorch_geometric#25's errors in ``.../torch/lib/include/ATen/``), as round 35 part C reads an error in
  the C++ standard library's headers. An error in the project's own sources is not read here.
* graph-learn (alibaba/graph-learn) serves a graph from its servers to its clients over RPC; a traversal that has
  given every node or edge of an epoch is answered with the status ``OutOfRange`` ("No more nodes exist."), which the
  Python sampler raises as ``gl.OutOfRangeError`` for the training loop to end its epoch on, and which the client's
  RPC notification logs at glog's E level first (``E0717 17:30:22.467953 589 notification.cc:194]
  RpcNotification:Failed req_type:GetNodes status:Out of range:No more nodes exist.`` and ``distribute_runner.h:125]
  Rpc failed:Out of range:No more nodes exist.name:GetNodes``). Its maintainer: "this is the normal log at the end of
  data traversal" (round issue23-heldout-38: graph-learn-67, a healthy distributed GraphSage read as a crash). A
  status "Out of range" whose message is the data's end ("No more ... exist", TensorFlow's "End of sequence", which
  round 35 part E leaves unread where TensorFlow prints it) is a record of an iterator's end at whatever level it is
  printed: quiet. An ``OutOfRangeError`` raised out of a step (round 35 part E's input that ran out) and any other
  "out of range" (an index, a value) are not this record.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38b_form` reads hold, besides the needles failureforms already
#: searches: setuptools' report of a compiler command that failed, a compiler's error in PyTorch's installed headers
NEEDLES: tuple[str, ...] = ("error: command '", "packages/torch/")

#: setuptools' (distutils') report of the compiler it spawned for an extension's source failing: the command's path
#: ending in a compiler's name (a version or a cross target around it, ".exe" on Windows), then "failed with exit
#: status/code N" or "failed: <why it could not run>"
_COMPILER_COMMAND_FAILED = re.compile(
    r"\berror: command '(?:[^']*[/\\])?"
    r"(?:[\w.+-]*-)?(?:nvcc|gcc|g\+\+|cc|c\+\+|clang|clang\+\+|hipcc|icc|icpx|cl)(?:-\d+(?:\.\d+)*)?(?:\.exe)?'"
    r" failed(?: with exit (?:status|code) -?\d+|: \S)")

#: a compiler's error located in PyTorch's installed headers (GCC/clang "file:line:col: error:", nvcc "file(line):
#: error:"), torch/include since PyTorch 1.5, torch/lib/include before
_TORCH_HEADER_ERROR = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]torch[/\\](?:lib[/\\])?include[/\\]\S+?(?::\d+(?::\d+)?|\(\d+\)): error: ")

#: a status "Out of range" (TensorFlow's and graph-learn's Status text of the code OUT_OF_RANGE, "status:" or a glog
#: head before it) whose message is the data's end: "No more <items> exist(s)", "End of sequence"
_DATA_END_STATUS = re.compile(r"\bOut of range: ?(?:No more \w+(?: \w+)? exists?\b|End of sequence\b)")


def round38b_quiet(text: str) -> bool:
    """A record of an iterator's end its program logs at whatever level as an epoch ends: no form."""
    return "Out of range:" in text and _DATA_END_STATUS.search(text) is not None


def round38b_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "error: command '" in text and _COMPILER_COMMAND_FAILED.search(text):
        return Form(FormKind.ERROR, "setuptools' report of the compiler that failed building an extension",
                    Label.CONFIG_ERROR)
    if "packages/torch/" in text and _TORCH_HEADER_ERROR.search(text):
        return Form(FormKind.ERROR, "a compiler error inside PyTorch's installed headers (an extension built against "
                    "another PyTorch or toolchain)", Label.CONFIG_ERROR)
    return None


def round38b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round38b_form(text))
