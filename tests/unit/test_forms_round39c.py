# ruff: noqa: E501  (real log lines are long; they are kept verbatim)
"""Forms read for part C of the misses of round issue23-heldout-39 (image-classification and self-supervised vision
backbone training), each as a rule of its family, with real lines and the near misses the rule must leave alone: a
model name timm's or torchvision's factory does not know, a name an OpenMMLab registry does not hold, OpenCLIP's
missing model config. Each line is from the corpus (named by its excerpt) or from a public thread or repository
(named)."""

from __future__ import annotations

from pathlib import Path

from neuron_watch.commands.diagnose import diagnose_paths
from neuron_watch.diagnosis.failureforms import FORM_RULES, FormKind
from neuron_watch.diagnosis.heldout.round39c import round39c_form
from neuron_watch.events import Label
from tests.unit.form_table import table_tests

ERROR = FormKind.ERROR

TIMM_UNKNOWN = "RuntimeError: Unknown model (swin_base_patch4_window7_224)"

#: (line, the kind it reads as, the cause the form states or None, where it is from)
FORMS: list[tuple[str, FormKind, Label | None, str]] = [
    # timm's and torchvision's factories
    (TIMM_UNKNOWN, ERROR, Label.CONFIG_ERROR, "corpus (Person_reID_baseline_pytorch-291-timm-0.3.2-unknown-model-swin)"),
    ("[rank0]: RuntimeError: Unknown model (vit_so400m_patch14_siglip_384)", ERROR, Label.CONFIG_ERROR,
     "timm/models/_factory.py parse_model_name (raise RuntimeError('Unknown model (%s)' % model_name)), under torchrun's rank tag"),
    ("ValueError: Unknown model vit_b_17", ERROR, Label.CONFIG_ERROR,
     "torchvision/models/_api.py get_model_builder (raise ValueError(f\"Unknown model {name}\"))"),
    # OpenMMLab registries
    ("KeyError: 'ResNet is not in the model registry. Please check whether the value of `ResNet` is correct or it was registered as expected. More details can be found at https://mmengine.readthedocs.io/en/latest/advanced_tutorials/config.html#import-the-custom-module'",
     ERROR, Label.CONFIG_ERROR, "mmpretrain#1498 (mmengine/registry/build_functions.py build_from_cfg)"),
    ("KeyError: 'UniversalVisualizer is not in the mmengine::visualizer registry. Please check whether the value of `UniversalVisualizer` is correct or it was registered as expected.'",
     ERROR, Label.CONFIG_ERROR, "mmengine's scoped wording (registry.scope::registry.name), as mmpretrain#1566 reports it"),
    ("KeyError: \"FasterRCNN: 'RVSA_MTP_branches is not in the models registry'\"", ERROR, Label.CONFIG_ERROR,
     "ViTAE-Transformer/MTP#33 (mmcv 1.x wraps a nested build's KeyError in the builder's class)"),
    ("KeyError: 'ReDet is not in the models registry'", ERROR, Label.CONFIG_ERROR,
     "csuhan/ReDet#37 (mmcv/utils/registry.py build_from_cfg)"),
    # OpenCLIP's factory
    ("RuntimeError: Model config for ViT-B-16-SigLIP2 not found.", ERROR, Label.CONFIG_ERROR,
     "open_clip/factory.py create_model (raise RuntimeError(f'Model config for {model_name} not found.'))"),
    ("2024-03-01,10:12:03 | ERROR | Model config for ViT-H-15 not found; available models ['RN50', 'RN101', 'ViT-B-32']",
     ERROR, Label.CONFIG_ERROR, "open_clip/factory.py create_model's logging.error before the raise"),
]

#: lines of the same words that are not these forms
NEAR_MISSES = [
    "    raise RuntimeError('Unknown model (%s)' % model_name)",  # the traceback's source line: a format string
    "        raise ValueError(f\"Unknown model {name}\")",  # torchvision's source line
    "I get Unknown model (swin_base_patch4_window7_224) when I train, which timm version do you use?",  # prose
    "                        f'{scheduler_type} is not in the {registry.name} '",  # mmengine's source line
    "05/16 17:24:55 - mmengine - WARNING - Failed to search registry with scope \"mmpretrain\" in the \"visualizer\" registry tree. As a workaround, the current \"visualizer\" registry in \"mmengine\" is used to build instance.",  # a fallback it goes on from
    "            raise RuntimeError(f'Model config for {model_name} not found.')",  # OpenCLIP's source line
    "2024-03-01,10:12:03 | INFO | Loaded ViT-B-32 model config.",  # OpenCLIP's success
]

test_form_is_read_with_its_cause, test_form_line_holds_a_needle, test_near_miss_reads_as_nothing = table_tests(
    FORMS, NEAR_MISSES)


def test_near_misses_are_not_this_rounds_forms() -> None:
    for line in NEAR_MISSES:
        assert round39c_form(line) is None, line


def test_form_rules_counts_this_round() -> None:
    assert FORM_RULES >= 64


def test_timm_unknown_model_traceback_is_a_configuration_error(tmp_path: Path) -> None:
    # the corpus excerpt's whole traceback (Person_reID_baseline_pytorch#291): the raise line and the exception line
    log = tmp_path / "timm.log"
    log.write_text("\n".join([
        "Traceback (most recent call last):",
        '  File "train.py", line 386, in <module>',
        "    model = ft_net_swin(len(class_names), opt.droprate, opt.stride, circle =opt.circle)",
        '  File "/mistgpu/miniconda/envs/swin/lib/python3.7/site-packages/timm/models/factory.py", line 59, in create_model',
        "    raise RuntimeError('Unknown model (%s)' % model_name)",
        TIMM_UNKNOWN,
    ]) + "\n", encoding="utf-8")
    assert diagnose_paths([str(log)], now=0.0).verdict.label is Label.CONFIG_ERROR
