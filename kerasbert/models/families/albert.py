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

from kerasbert.models import names
from kerasbert.models.checkpoint_names import attention_variables, norm
from kerasbert.models.families.base import HuggingFaceLayout, layer_names
from kerasbert.models.families.bert import BERT, hf_embedding_modules

SHARED_SCOPE = "bert/encoder/transformer/group_0/inner_group_0"


def _block(attention, feed_forward):
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
    checkpoint_pattern = r"bert/encoder/transformer/group_\d+/"
    checkpoint_description = "an ALBERT"
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
        ("embeddings.position_ids", "predictions.decoder.weight", "predictions.decoder.bias"))

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


class ALBERTUnshared(ALBERT):
    """``model="albert_unshared"``: BERT's per-layer names, each loading ALBERT's shared set.

    Example:
        >>> ALBERTUnshared.checkpoint_table(2)["Transformer-1-MultiHeadSelfAttention"]["query_bias"]
        'bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/bias'
    """

    shared_layers = False
    marker_layer = None  # BERT's layer names; the checkpoint's names tell it apart
