"""ALBERT (Google's and brightmart's checkpoints): one shared layer, factorised embeddings.

ALBERT stores one set of encoder weights (``group_0/inner_group_0``) that every layer
uses, and factorises the embeddings: ``Embedding-Mapping`` takes them from
``embedding_size`` to ``hidden_size``. Embeddings and heads keep BERT's names.
``albert_unshared`` gives each layer BERT's per-layer names, each loading the one shared
set, so the layers can be fine-tuned apart.

Audit: V·E, T·E, P·E, 2·E, ``Embedding-Mapping`` E·H+H, the shared attention and
feed-forward block counted once.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from kerasbert.models import names
from kerasbert.models.checkpoint_names import attention_variables, norm
from kerasbert.models.families.base import HuggingFaceLayout, layer_names
from kerasbert.models.families.bert import BERT, hf_embedding_modules

SHARED_SCOPE = "bert/encoder/transformer/group_0/inner_group_0"
#: How ALBERT's checkpoint variables begin (its layers' groups).
CHECKPOINT_PATTERN = r"bert/encoder/transformer/group_\d+/"
#: The original Google ALBERT configs have no model_type but ALBERT's group keys; brightmart's
#: (albert_zh: albert_config_tiny.json ... xlarge) have neither, but their layer norm's place.
ALBERT_KEYS = ("num_hidden_groups", "inner_group_num", "ln_type")


def _block(attention: str, feed_forward: str) -> dict[str, dict[str, str]]:
    return {
        attention: attention_variables(f"{SHARED_SCOPE}/attention_1"),
        names.norm_name(attention): norm(f"{SHARED_SCOPE}/LayerNorm"),
        feed_forward: {
            "intermediate_kernel": f"{SHARED_SCOPE}/ffn_1/intermediate/dense/kernel",
            "intermediate_bias": f"{SHARED_SCOPE}/ffn_1/intermediate/dense/bias",
            "output_kernel": f"{SHARED_SCOPE}/ffn_1/intermediate/output/dense/kernel",
            "output_bias": f"{SHARED_SCOPE}/ffn_1/intermediate/output/dense/bias",
        },
        names.norm_name(feed_forward): norm(f"{SHARED_SCOPE}/LayerNorm_1"),
    }


class ALBERT(BERT):
    """ALBERT: ``Transformer-MultiHeadSelfAttention`` / ``Transformer-FeedForward`` used by
    every layer (``model="albert"``)."""

    model_type = "albert"
    default_name = "albert"
    factorised = True
    shared_layers = True
    marker_layer: str | None = names.SHARED_ATTENTION
    checkpoint_pattern = CHECKPOINT_PATTERN
    checkpoint_description = "an ALBERT"
    names_bert_checkpoints = True
    unilm_seq2seq = False  # its shared layers are not decoded step by step
    config_rules: tuple[tuple[Any, ...], ...] = (
        ("num_hidden_groups", lambda value, values, family: value == 1,
         "ALBERT with several groups of shared layers is not supported (one group, as in "
         "every published ALBERT checkpoint)"),
        ("ln_type", lambda value, values, family: value == "postln",
         "brightmart's ALBERT with its layer norms before each block (ln_type 'preln') is "
         "not supported; kerasbert's ALBERT normalises after each block ('postln', as "
         "every published albert_zh checkpoint)"),
        ("inner_group_num", lambda value, values, family: value == 1,
         "ALBERT with several layers per group is not supported (one, as in every published "
         "ALBERT checkpoint)"),
    )
    hf_layout = HuggingFaceLayout(
        "albert.", "bert",
        {**hf_embedding_modules("bert"),
         "encoder.embedding_hidden_mapping_in": "bert/encoder/embedding_hidden_mapping_in",
         "pooler": "bert/pooler/dense",
         "predictions.dense": "cls/predictions/transform/dense",
         "predictions.LayerNorm": "cls/predictions/transform/LayerNorm"},
        # One group of one layer, shared by every layer (the config's checks refuse more).
        r"encoder\.albert_layer_groups\.0\.albert_layers\.0\.(?P<module>.+)",
        SHARED_SCOPE,
        {"attention.query": "attention_1/self/query", "attention.key": "attention_1/self/key",
         "attention.value": "attention_1/self/value",
         "attention.dense": "attention_1/output/dense", "attention.LayerNorm": "LayerNorm",
         "ffn": "ffn_1/intermediate/dense", "ffn_output": "ffn_1/intermediate/output/dense",
         "full_layer_layer_norm": "LayerNorm_1"},
        {"predictions.bias": "cls/predictions/output_bias",
         "sop_classifier.classifier.weight": "cls/seq_relationship/output_weights",
         "sop_classifier.classifier.bias": "cls/seq_relationship/output_bias"},
        ("embeddings.position_ids", "predictions.decoder.weight", "predictions.decoder.bias"),
        config_keys=("num_hidden_groups", "inner_group_num"))

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """BERT's embeddings and heads, ``Embedding-Mapping`` and the one shared block.

        Example:
            >>> ALBERT.checkpoint_table(12)["Transformer-FeedForward-Norm"]["gamma"]
            'bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma'
        """
        mapping = BERT.checkpoint_table(0)  # embeddings (Embedding-Mapping included), heads
        for index in range(max(num_hidden_layers, 1)):
            mapping.update(_block(*layer_names(index, shared=cls.shared_layers)))
        return mapping

    @classmethod
    def claims_config(cls, values: dict[str, Any]) -> bool:
        """ALBERT's group keys or brightmart's ``ln_type``, or factorised embeddings (an
        ``embedding_size`` other than ``hidden_size``: brightmart's albert_zh configs have no
        other mark; ELECTRA's configs name their ``model_type``)."""
        return any(values.get(key) is not None for key in ALBERT_KEYS) or \
            values.get("embedding_size") not in (None, values.get("hidden_size"))


class ALBERTUnshared(ALBERT):
    """``model="albert_unshared"``: BERT's per-layer names, each loading ALBERT's shared set.

    Example:
        >>> ALBERTUnshared.checkpoint_table(2)["Transformer-1-MultiHeadSelfAttention"]["query_bias"]
        'bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/bias'
    """

    shared_layers = False
    marker_layer = None  # BERT's layer names; the checkpoint's names tell it apart

    @classmethod
    def claims_checkpoint(cls, layers: Collection[str], available: Collection[str]) -> bool:
        """A model of BERT's layer names with ``Embedding-Mapping`` (factorised embeddings)
        reads an ALBERT checkpoint as an unshared ALBERT."""
        return names.EMBEDDING_MAPPING in layers and any(
            re.match(CHECKPOINT_PATTERN, name) for name in available)
