"""Task heads (issue 10): a classification head has no vocabulary logits; counts and memory follow.

Expected counts: validation/head_counts.json, written by validation/count_heads.py from transformers 5.23
on the meta device (AutoModelForSequenceClassification and AutoModel built from tests/configs/).
"""

import json
from pathlib import Path

import pytest

from pycore import estimate
from pycore.model.architecture import count_parameters, with_overrides
from pycore.model.hf_config import architecture_from_dict

ROOT = Path(__file__).resolve().parent.parent
RECORDED = json.loads((ROOT / "validation" / "head_counts.json").read_text())["counts"]


@pytest.mark.parametrize("label", sorted(RECORDED))
def test_head_counts_equal_transformers(label):
    name, head, *labels = label.split()
    arch = architecture_from_dict(json.loads((ROOT / "tests" / "configs" / name).read_text()))
    arch = with_overrides(arch, {"head": head, "num_labels": int(labels[0]) if labels else 2})
    assert count_parameters(arch).total == RECORDED[label]


def test_classification_drops_the_vocabulary_logits():
    mlm = estimate({"model": "bert-base-uncased", "batch": "32", "seq": "512"}).as_dict()
    cls = estimate({"model": "bert-base-uncased", "batch": "32", "seq": "512", "head": "classification"}).as_dict()
    # BERT's MLM head keeps 32·512·30522 logits and their loss buffers; a 2-label head keeps 32·512·2.
    # BERT's checkpoint is fp32, so the logits alone are 32·512·30522·4 B = 2,000,289,792 bytes, and every
    # buffer of the head is as wide as its output: the two differ by exactly 30522 / 2.
    mlm_head, cls_head = mlm["components"]["logits_and_loss"], cls["components"]["logits_and_loss"]
    assert mlm_head >= 32 * 512 * 30522 * 4 and cls_head >= 32 * 512 * 2 * 4
    assert mlm_head * 2 == cls_head * 30522
    assert cls["params"]["total"] == 109_483_778      # validation/head_counts.json
