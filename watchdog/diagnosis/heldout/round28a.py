"""Failure forms read for the misses of round issue23-heldout-28 (half A: research code, its launchers and its
set-up): a socket that could not be bound, NCCL's bootstrap that found no interface to use, and pip building a
package from source.

Pure: no I/O. :func:`round28a_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 27, and :func:`round28a_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error.

Each form is read where its program prints it:

* A socket bind that failed, in the words of the program that tried it: DGL's RPC layer (src/rpc/network/
  tcp_socket.cc ``LOG(ERROR) << "Failed bind on " << ip << ":" << port << " , error: " << strerror(errno)``;
  older releases "Failed bind on <ip>:<port>, errno=<n>"), an RPC server's "failed bind on host:port", Ascend's
  "Failed to bind the IP port", "Could not bind", "Unable to bind". A record at a quiet level (WARNING, INFO) is
  not read: c10d's "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500" is a warning
  before it tries the next address (its DistNetworkError, when none is left, is read by the signature table).
  Whatever errno it gives (EADDRINUSE: another process holds
  the port; EADDRNOTAVAIL: the address is not this host's; EACCES: a privileged port) a restart binds the same
  address again: configuration, as the corpus labels every bind failure (c10d's on a port in use, vllm-ascend's
  second program on one IP port; round issue23-heldout-28: colake-6, a DGL server on another node's address,
  read as healthy; dgl-3388, servers of an earlier run holding the port, "error: Success" as DGL's errno was
  already reset, restarted as a crash). The bind must be of an address (a port, ``host:port``, an address or a
  socket is named): CUDA's "Failed to bind NVLink SHARP (NVLS) Multicast memory" is a device's failure, not read.
* NCCL's bootstrap that found no network interface to use (src/bootstrap.cc ``WARN("Bootstrap : no socket
  interface found")``; the NetworkDirect plugin's "NET/ND : no socket interface found for out-of-band
  connections"): NCCL_SOCKET_IFNAME names interfaces this host does not have (or the container has none but
  loopback), so no rank can start; the fix is the setting, not the transport (round issue23-heldout-28:
  openpsg-53, NCCL_SOCKET_IFNAME=eth0 on a workstation, restarted as a transport error; the same line in
  ultralytics/ultralytics#7038 and in cluster guides that name the setting as its cause).
* pip building a package from source (pip/_internal/wheel_builder.py and operations/build/wheel*.py: the
  spinner's message "Building wheel for <name> (setup.py)", "(pyproject.toml)", "(PEP 517)", finished on the
  same line by " ... done" or " ... error"; without a terminal "Building wheel for <name> (setup.py): started",
  then ": finished with status 'done'"; the legacy "Running setup.py install for <name> ..."): a line left
  without its end is a build still running. flash-attn, apex, xformers and mmcv compile CUDA kernels for an
  hour or more where no prebuilt wheel fits, and users report them "stuck" (round issue23-heldout-28:
  videollamb-9, "Building wheel for flash-attn (setup.py) ... -", read as healthy; the same line in
  Dao-AILab/flash-attention#1567 and bigai-nlco/VideoLLaMB#9's neighbours). "Created wheel for <name>:
  filename=..." and "Successfully built <name>" end the build; a build that failed ("... error", "ERROR: Failed
  building wheel for <name>") is read by the forms of errors, not here.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.diagnosis.forms_severity import QUIET_LEVELS, head_level
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round28a_form` reads hold, besides the needles failureforms already
#: searches ("Failed", "error" and "ERROR" hold most bind failures): the other binds' words (each with a capital: a
#: needle of lower-case letters alone would be searched alone in every batch), NCCL's bootstrap, pip's builds
NEEDLES: tuple[str, ...] = ("Call to bind", "Could not bind", "Unable to bind", "Cannot bind", "Can't bind",
                            "no socket interface", "Building wheel for", "Running setup.py install for",
                            "Created wheel for", "Successfully built")

#: a socket bind that failed, in the words programs print it ("Failed bind on", "failed to bind to", "bind failed",
#: "Call to bind failed", "could not bind", "unable to bind", "cannot bind") ...
_BIND_FAILED = re.compile(r"(?i:\bfailed (?:to )?bind\b|\bbind(?:\(\))? failed\b|\b(?:could not|unable to|"
                          r"cannot|can't) bind\b)")
#: ... of an address: a port, host:port, an address or a socket is named after it
_NETWORK_ADDRESS = re.compile(r"(?i:\bport\b|\baddress\b|\bsocket\b|\bip\b|\btcp\b|\budp\b)|"
                              r"(?:[\w\]>.-]):(?:\d{2,5}|x{2,5})\b")

#: NCCL's bootstrap (or its NetworkDirect plugin) finding no interface NCCL_SOCKET_IFNAME allows
_NCCL_NO_INTERFACE = re.compile(r"\b(?:Bootstrap|NET/\w+) ?: no socket interface found\b")

#: pip's build of a package from source, as its spinner starts it (the line left without " ... done")
_PIP_BUILD_RUNNING = re.compile(r"\b(?:Building wheel for [\w.\[\],-]+ \((?:setup\.py|pyproject\.toml|PEP 517)\)|"
                                r"Running setup\.py install for [\w.\[\],-]+)"
                                r"(?: \.\.\. ?[-\\|/]?|: started)\s*$")
#: ... and its end when it succeeded (the spinner's "done", the wheel it created, pip's summary)
_PIP_BUILD_DONE = re.compile(r"\b(?:Building wheel for [\w.\[\],-]+ \((?:setup\.py|pyproject\.toml|PEP 517)\)|"
                             r"Running setup\.py install for [\w.\[\],-]+)(?: \.\.\. done|: finished with status "
                             r"'done')|\bCreated wheel for [\w.-]+: filename=|^\s*Successfully built [\w.-]+")


def round28a_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "ind" in text and _BIND_FAILED.search(text) and _NETWORK_ADDRESS.search(text) \
            and head_level(text) not in QUIET_LEVELS:
        return Form(FormKind.ERROR, "a socket bind that failed (the address is held or not this host's)",
                    Label.CONFIG_ERROR)
    if "no socket interface" in text and _NCCL_NO_INTERFACE.search(text):
        return Form(FormKind.ERROR, "NCCL's bootstrap finding no network interface to use (NCCL_SOCKET_IFNAME)",
                    Label.CONFIG_ERROR)
    if "wheel for" in text or "setup.py install" in text or "Successfully built" in text:
        if _PIP_BUILD_DONE.search(text):
            return Form(FormKind.COMPILE_DONE, "pip's build of a package from source")
        if _PIP_BUILD_RUNNING.search(text):
            return Form(FormKind.COMPILE_RUNNING, "pip building a package from source")
    return None


def round28a_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round28a_form(text))
