"""Failure forms read for the misses of round issue23-heldout-36 (part D: never kill a healthy job, part 4): gRPC's
notice that it skipped its fork handlers.

Pure: no I/O. :func:`round36d_quiet` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` before any
form (and through ``read_quiet`` by the table's last rule, which then calls no error).

The form is read where its program prints it: gRPC's core installs fork handlers; when the process forks while other
threads are inside gRPC, ``grpc_prefork`` does not run them and logs ``"Other threads are currently calling into gRPC,
skipping fork() handlers"`` (src/core/lib/iomgr/fork_posix.cc), at ERROR in the releases of 2022 (gpr's head:
``E0518 11:58:19.406614241  152858 fork_posix.cc:76]``) and at INFO since absl logging (``I0000
00:00:1739520189.216623 3264411 fork_posix.cc:75]``). The fork goes on (a ``subprocess`` or a data loader's worker
that exec's at once, Ray's workers): RLlib runs print it by the dozen while they train (ray-project/ray#24917, read as
a crash to restart), and Ray's raylet, Milvus and Vertex AI clients print the same. Only that notice in fork_posix.cc's
own records is read: gRPC's other records at ERROR stay errors.
"""

from __future__ import annotations

import re

#: gRPC's notice of fork handlers it skipped, in fork_posix.cc's own records (gpr's and absl's heads name the file)
_GRPC_FORK_SKIPPED = re.compile(r"\bfork_posix\.cc:\d+\]\s*Other threads are currently calling into gRPC, "
                                r"skipping fork\(\) handlers")


def round36d_quiet(text: str) -> bool:
    """Whether ``text`` is gRPC's notice that it skipped its fork handlers (at ERROR in older releases): it holds no
    failure."""
    return "fork_posix.cc:" in text and _GRPC_FORK_SKIPPED.search(text) is not None
