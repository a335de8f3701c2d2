"""Failure forms read for the misses of round issue23-heldout-38 (part G: consumer-GPU, Windows/WSL2 and Apple-silicon
trainers): Windows' error for a commit limit (RAM plus page file) exhausted, bitsandbytes' refusal to load without its
CUDA library, and Sockeye's refusal to resume into an output folder trained with other arguments.

Pure: no I/O. :func:`round38g_form` is asked after the forms of round 37, :func:`round38g_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Each form is read where its program prints it:

* Windows' system error 1455, ERROR_COMMITMENT_LIMIT, whose message is "The paging file is too small for this
  operation to complete." (FormatMessage's text, localized: "页面文件太小，无法完成操作。" on a Chinese Windows).
  CPython prints it as an ``OSError: [WinError 1455] <message>`` (torch/__init__.py re-raises it from loading its CUDA
  DLLs, in every spawned DataLoader worker that imports torch again), Rust's std::io::Error as ``<message> (os error
  1455)`` (safetensors' memory map in ComfyUI and krita-ai-diffusion), .NET as a Win32Exception of the same message.
  Windows refuses to commit memory when RAM plus the page file is used up: the host is out of memory (fewer workers, a
  larger page file, more RAM), whatever DLL or mapping met it. CPython's line names the DLL it was loading ("Error
  loading ...cudnn_cnn_infer64_8.dll or one of its dependencies"), which the loader forms read as a missing library:
  the code comes first (round issue23-heldout-38: WeCLIP#5, a training on Windows whose spawned workers failed so,
  read as config_error).
* bitsandbytes' CUDA set-up (bitsandbytes/cextension.py, releases 0.38 to 0.41) raises ``RuntimeError('''\\n CUDA Setup
  failed despite GPU being available. ...''')`` when torch sees a GPU but the library found no CUDA binary of its own
  to load (the Windows builds before 0.43 had none; a CUDA runtime it could not find, a version it was not built
  for); 0.35 to 0.37 raise ``Exception('CUDA SETUP: Setup Failed!')``. CPython prints the exception's class alone on
  its line ("RuntimeError:") and the message on the next, indented: the class line says nothing, the message line is
  the cause. Installing a build for this CUDA (or this OS) is the fix; a restart loads the same library (round
  issue23-heldout-38: bitsandbytes#271, transformers importing bitsandbytes on Windows, read as other_crash and
  restarted). Round 35 part C reads the empty search for libcudart that comes before it on Linux.
* Sockeye's train.py (check_resume, every release from 1.x to 3.x) compares the arguments of a run with those saved
  in an existing output folder and, when they differ, logs ``Mismatch in arguments for training continuation.`` and
  ``Differing arguments: <names>.`` and exits 1; it likewise exits with ``Refusing to overwrite existing output folder
  <dir>.`` and ``Refusing to overwrite model folder <dir> as it seems to contain a trained model.``. The logger is not
  set up yet at that point: the lines come bare, with no level. The folder and the arguments given are the
  configuration; a restart meets the same folder (round issue23-heldout-38: sockeye#990, its tutorial on Windows,
  read as healthy).
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round38g_form` reads hold, besides the needles failureforms already
#: searches: Windows' commit-limit error in CPython's, Rust's and its own words, bitsandbytes' set-up failure in its two
#: wordings, Sockeye's refusals to resume. ASCII only: the key finder reads a line as ASCII with every other character
#: replaced by "?", so a localized message is found through CPython's "[WinError " or Rust's "(os error " beside it
NEEDLES: tuple[str, ...] = (
    "[WinError ", "(os error ", "paging file is too small",
    "CUDA Setup failed despite GPU", "CUDA SETUP: Setup Failed",
    "Mismatch in arguments for training continuation", "Refusing to overwrite existing output folder",
    "Refusing to overwrite model folder",
)

#: Windows' ERROR_COMMITMENT_LIMIT: CPython's "[WinError 1455]", Rust's "(os error 1455)", the message itself (English,
#: Chinese); "paging file" alone is prose
_COMMIT_LIMIT = re.compile(r"\[WinError 1455\]|\(os error 1455\)|\bThe paging file is too small for this operation\b"
                           r"|页面文件太小，?无法完成操作")

#: bitsandbytes' set-up failure as its exception states it (the message line under a bare "RuntimeError:", or glued to
#: the class), not its advice ("run python -m bitsandbytes") nor its progress ("CUDA SETUP: Loading binary ...")
_BNB_SETUP_FAILED = re.compile(r"^[\s>|`*\"']*(?:\w*(?:Error|Exception): )?(?:CUDA Setup failed despite GPU being "
                               r"available\b|CUDA SETUP: Setup Failed!)")

#: Sockeye's check_resume refusals, each a line of its own (a logger's head in front when it has one)
_SOCKEYE_RESUME = re.compile(r"(?:^|\]\s|:\s|ERROR\s+)\s*(?:Mismatch in arguments for training continuation\."
                             r"|Refusing to overwrite existing output folder \S"
                             r"|Refusing to overwrite model folder \S.* as it seems to contain a trained model)")


def round38g_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if ("1455" in text or "paging file" in text or "页面文件" in text) and _COMMIT_LIMIT.search(text):
        return Form(FormKind.ERROR, "Windows' commit limit (RAM plus page file) is exhausted (error 1455)", Label.OOM)
    if ("CUDA Setup failed" in text or "Setup Failed!" in text) and _BNB_SETUP_FAILED.search(text):
        return Form(FormKind.ERROR, "bitsandbytes found no CUDA library of its own to load (its CUDA set-up failed)",
                    Label.CONFIG_ERROR)
    if ("training continuation" in text or "Refusing to overwrite" in text) and _SOCKEYE_RESUME.search(text):
        return Form(FormKind.ERROR, "Sockeye refused to resume into an output folder of other arguments or a trained "
                    "model", Label.CONFIG_ERROR)
    return None


def round38g_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round38g_form(text))
