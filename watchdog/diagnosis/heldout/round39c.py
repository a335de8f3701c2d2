"""Failure forms read for the misses of round issue23-heldout-39 (part C: image-classification and self-supervised
vision backbone training): a model or module name that the installed library's registry does not know.

Pure: no I/O. :func:`round39c_form` is asked after the forms of round 38, :func:`round39c_cause` by
:func:`neuron_watch.diagnosis.failureforms.cause_of` for the cause of a line that is already an error.

Vision trainers build their backbone, head, dataset and hooks by name, from a command-line argument or a config
file, through a registry of the library they import; a name the registry does not hold stops the run before its
first step, and a restart asks the same registry for the same name: the installed version has no such model (Swin
came to timm in 0.4), the name is misspelt, or the module that registers it was never imported. Each library says so
in its own words, read where it prints them:

* timm's factory (timm/models/factory.py ``create_model``, and timm/models/_factory.py ``parse_model_name`` since
  0.9; the same line in the many repositories that copied it, geffnet and EfficientNet ports) ``raise
  RuntimeError('Unknown model (%s)' % model_name)``: CPython prints ``RuntimeError: Unknown model (<name>)`` (round
  issue23-heldout-39: Person_reID_baseline_pytorch#291, ``swin_base_patch4_window7_224`` asked of timm 0.3.2, read as
  a crash of no cause and restarted). torchvision's ``get_model_builder`` (torchvision/models/_api.py) raises
  ``ValueError(f"Unknown model {name}")`` for a name not in its table, in the same two words.
* MMEngine's registry (mmengine/registry/build_functions.py ``build_from_cfg``) ``raise KeyError(f'{obj_type} is not
  in the {registry.scope}::{registry.name} registry. Please check whether the value of `{obj_type}` is correct or it
  was registered as expected. ...')``; MMCV 1.x (mmcv/utils/registry.py) ``KeyError(f'{obj_type} is not in the
  {registry.name} registry')``, and wraps it in the builder's class when a nested build fails (``KeyError:
  "FasterRCNN: 'X is not in the models registry'"``): MMPretrain/MMClassification, MMSelfSup, MMDetection and every
  OpenMMLab trainer print it for a config naming a model, dataset, hook or visualizer that was not imported.
* OpenCLIP's factory (open_clip/factory.py ``create_model``) logs ``Model config for <name> not found; available
  models [...]`` at ERROR and raises ``RuntimeError(f'Model config for {model_name} not found.')``.

Each is read as configuration only as the exception line CPython prints (the class at the head of the line, behind
markdown quoting or a rank tag) or, for OpenCLIP, as its logged error with the list of names it offers: the ``raise``
source line of a traceback (a format string: ``%s``, ``{obj_type}``), prose that mentions an unknown model, and a
registry's own warnings (MMEngine's "Failed to search registry with scope ...", a fallback it goes on from) are not.
"""

from __future__ import annotations

import re

from neuron_watch.diagnosis.formkinds import Form, FormKind, stated_cause
from neuron_watch.events import Label

#: The literals (digit-free) the lines :func:`round39c_form` reads hold, besides the needles failureforms already
#: searches: timm's and torchvision's unknown model, a registry's missing name, OpenCLIP's missing config
NEEDLES: tuple[str, ...] = (
    "Unknown model ",
    " registry",
    "Model config for ",
)

#: the head of an exception line as CPython prints it: markdown quoting, a rank tag ("[rank0]: "), then a class
_HEAD = r"^[\s>|`*]*(?:\[[^\]\n]{1,40}\]:?\s*)*(?:[A-Za-z_]\w*\.)*"

#: timm's "RuntimeError: Unknown model (<name>)", torchvision's "ValueError: Unknown model <name>": a name, no
#: format string ("%s", "{name}") and nothing after it but a closing quote or a stop
_UNKNOWN_MODEL = re.compile(_HEAD + r"(?:RuntimeError|ValueError|KeyError): ['\"]?Unknown model "
                            r"(?:\(\s*[\w./:@+-]+\s*\)|[\w./:@+-]+)['\"]?\.?\s*$")

#: MMEngine's "X is not in the mmpretrain::model registry. Please check ...", MMCV's "X is not in the models
#: registry" (bare or wrapped in the builder's class: KeyError: "FasterRCNN: 'X is not in the models registry'")
_NOT_IN_REGISTRY = re.compile(_HEAD + r"KeyError: [\"']?(?:\w+: [\"']?)?[\w.-]+ is not in the (?:[\w.-]+::)?\w+ "
                              r"registry\b")

#: OpenCLIP's raise and its logged error beside it (the list of names it offers)
_CLIP_CONFIG = re.compile(_HEAD + r"(?:RuntimeError|ValueError): Model config for \S+ not found\.?\s*$"
                          r"|\bModel config for \S+ not found; available models \[")


def round39c_form(text: str) -> Form | None:
    """The failure form ``text`` holds among this round's, or None."""
    if "Unknown model " in text and _UNKNOWN_MODEL.search(text):
        return Form(FormKind.ERROR, "a model name the installed library does not know", Label.CONFIG_ERROR)
    if " registry" in text and "is not in the " in text and _NOT_IN_REGISTRY.search(text):
        return Form(FormKind.ERROR, "a name the library's registry does not hold", Label.CONFIG_ERROR)
    if "Model config for " in text and _CLIP_CONFIG.search(text):
        return Form(FormKind.ERROR, "a model config the library does not have", Label.CONFIG_ERROR)
    return None


def round39c_cause(text: str) -> tuple[Label, str] | None:
    """The cause an error line states in this round's forms (whatever its level: the line is an error already)."""
    return stated_cause(round39c_form(text))
