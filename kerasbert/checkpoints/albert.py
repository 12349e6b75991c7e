"""ALBERT's mapping table (Google's and brightmart's checkpoints): one shared layer.

ALBERT stores one set of encoder weights (``group_0/inner_group_0``) that every layer
uses, and factorises the embeddings: ``Embedding-Mapping`` takes them from
``embedding_size`` to ``hidden_size``. Embeddings and heads keep BERT's names.
"""

from kerasbert.checkpoints import mapping as bert
from kerasbert.models import names

SHARED_SCOPE = "bert/encoder/transformer/group_0/inner_group_0"


def _block(attention, feed_forward):
    return {
        attention: {
            **{f"{projection}_{kind}": f"{SHARED_SCOPE}/attention_1/self/{projection}/{kind}"
               for projection in ("query", "key", "value") for kind in ("kernel", "bias")},
            "output_kernel": f"{SHARED_SCOPE}/attention_1/output/dense/kernel",
            "output_bias": f"{SHARED_SCOPE}/attention_1/output/dense/bias",
        },
        names.norm_name(attention): bert.norm(f"{SHARED_SCOPE}/LayerNorm"),
        feed_forward: {
            "intermediate_kernel": f"{SHARED_SCOPE}/ffn_1/intermediate/dense/kernel",
            "intermediate_bias": f"{SHARED_SCOPE}/ffn_1/intermediate/dense/bias",
            "output_kernel": f"{SHARED_SCOPE}/ffn_1/intermediate/output/dense/kernel",
            "output_bias": f"{SHARED_SCOPE}/ffn_1/intermediate/output/dense/bias",
        },
        names.norm_name(feed_forward): bert.norm(f"{SHARED_SCOPE}/LayerNorm_1"),
    }


def variable_mapping(num_hidden_layers):
    """ALBERT's table: BERT's embeddings and heads, ``Embedding-Mapping`` and the one
    shared ``Transformer-MultiHeadSelfAttention`` / ``Transformer-FeedForward``.

    Example:
        >>> variable_mapping(12)["Transformer-FeedForward-Norm"]["gamma"]
        'bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma'
    """
    mapping = bert.variable_mapping(0)  # embeddings (Embedding-Mapping included) and heads
    mapping.update(_block(names.SHARED_ATTENTION, names.SHARED_FEED_FORWARD))
    return mapping


def unshared_variable_mapping(num_hidden_layers):
    """``albert_unshared``: BERT's per-layer names, each layer loading the one shared set
    (so the layers can be fine-tuned apart).

    Example:
        >>> unshared_variable_mapping(2)["Transformer-1-MultiHeadSelfAttention"]["query_bias"]
        'bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/bias'
    """
    mapping = bert.variable_mapping(0)
    for index in range(num_hidden_layers):
        mapping.update(_block(names.attention_name(index), names.feed_forward_name(index)))
    return mapping

