"""Failure forms read for the misses of round issue23-heldout-15 (half B): a command-line library's own usage
error, and a weights or checkpoint file its loader refuses to read.

Pure: no I/O. :func:`round15b_form` is asked by :func:`neuron_watch.diagnosis.failureforms.read_line` after the
forms of round 14, and :func:`round15b_cause` by :func:`neuron_watch.diagnosis.failureforms.cause_of` for the
cause of a line that is already an error. (The other forms of this round extend the readers they belong to:
CUDA's words for a binary without code for the device, forms_errors._DRIVER_REFUSED; Triton's record of a model
it failed to load whatever the status, failureforms.cause_of.)

Each form is read where its program prints it:

* Click's usage error (src/click/exceptions.py ``UsageError.show``; Typer, built on Click, prints the same): the
  command's usage ("Usage: tune [OPTIONS] COMMAND [ARGS]..."), then the hint ``_("Try '{command} {option}' for
  help.")`` (Click before 7.0: ``Try "{command} {option}" for help.``), then ``_("Error: {message}")``, and the
  process exits 2. Click prints that hint only there, so the hint alone says the command line was refused, and the
  message says how, in Click's words (src/click/core.py and exceptions.py): ``No such command {name!r}.``,
  ``No such option: {name}``, ``Missing argument {param_hint}.`` / ``Missing option ...`` / ``Missing parameter
  ...``, ``Invalid value for {param_hint}: {message}``, ``Got unexpected extra argument(s) ({args})``, ``Option
  {name!r} requires an argument.``, ``Missing command.``. A wrong command line, or a ``tune`` entry point that
  another package's later install replaced: a restart runs it again.
* A weights or checkpoint file its loader cannot read: safetensors' Python binding (bindings/python/src/lib.rs)
  raises ``SafetensorError(format!("Error while deserializing header: {e:?}"))`` when the file's first bytes are not
  a safetensors header (``HeaderTooLarge``, ``HeaderTooSmall``, ``InvalidHeader``, ``InvalidHeaderStart``,
  ``InvalidHeaderDeserialization``, ``InvalidHeaderLength``, ``MetadataIncompleteBuffer``: a Git LFS pointer in
  place of the weights, a truncated download, a shard cut short by a full disk); torch.load's zip reader
  (caffe2/serialize/inline_container.cc) says ``PytorchStreamReader failed reading zip archive: failed finding
  central directory`` of a truncated file, and its legacy pickle path ``invalid load key, '<byte>'.`` of a file that
  is not a pickle (an LFS pointer starts "version https://git-lfs..."). The same file is read again on a restart.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free, each with a marker character of the classifier's batch search before its last: a
#: capital or a quote after one) that the lines these forms read hold, besides the failure forms' needles they
#: hold already; the failure forms' needles include them. The causes read of a line already an error need none.
NEEDLES: tuple[str, ...] = ("Try '", 'Try "')

#: Click's hint under the usage it printed: the command, then its help option (Click 7+ quotes with ', before
#: with "); the line is the hint alone (a prefix of a rank or a launcher before it)
_CLICK_HINT = re.compile(r"(?:^|[\s:\]|>])Try (['\"])[\w./-]+(?: [\w./:-]+)* (?:--help|-h)\1 for help\.\s*$")

#: Click's message after "Error: " (core.py, exceptions.py), the words of its usage errors
_CLICK_USAGE_ERROR = re.compile(
    r"(?:^|[\s:\]|>])Error: (?:No such command '[^']+'\.|No such option: -|Missing (?:argument|option|parameter) "
    r"['\"]?[\w-]|Missing command\.|Invalid value for ['\"]?[\w-]+['\"]?: |Got unexpected extra arguments? \(|"
    r"Option ['\"][\w-]+['\"] requires an argument\.)")

#: a weights or checkpoint file its loader cannot parse (safetensors' header, torch.load's zip and pickle readers)
_UNREADABLE_WEIGHTS = re.compile(
    r"\bError while deserializing header: (?:HeaderTooLarge|HeaderTooSmall|InvalidHeader\w*|MetadataIncompleteBuffer)"
    r"\b|\bPytorchStreamReader failed reading zip archive: failed finding central directory\b|"
    r"\bUnpicklingError: invalid load key, ")


def round15b_form(text: str) -> Form | None:
    """The failure form Click's usage hint is in ``text``."""
    if "Try " in text and _CLICK_HINT.search(text):
        return Form(FormKind.ERROR, "Click's usage error (its hint to try the help option)", Label.CONFIG_ERROR)
    return None


def round15b_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in these forms (whatever its level: the line is an error already)."""
    if (stated := stated_cause(round15b_form(text))) is not None:
        return stated
    if _CLICK_USAGE_ERROR.search(text):
        return Label.CONFIG_ERROR, "Click's usage error (the command line refused)"
    if _UNREADABLE_WEIGHTS.search(text):
        return Label.CONFIG_ERROR, "a weights or checkpoint file its loader cannot read"
    return None
