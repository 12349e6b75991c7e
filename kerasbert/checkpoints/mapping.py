"""BERT's mapping table: each Keras layer and weight attribute, and the Google variable
name it is stored under in ``bert_model.ckpt``.

The table is data keyed by layer name *and* weight attribute, so nothing is matched by
position. A further model family adds a module like this one beside it.
"""

from kerasbert.models import names

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
POSITION_EMBEDDINGS = "bert/embeddings/position_embeddings"
MLM_OUTPUT_BIAS = "cls/predictions/output_bias"
NSP_OUTPUT_WEIGHTS = "cls/seq_relationship/output_weights"
# Google's run_squad.py: the span head's start and end logits.
SQUAD_OUTPUT_WEIGHTS = "cls/squad/output_weights"
SQUAD_OUTPUT_BIAS = "cls/squad/output_bias"

# One row per vocabulary entry: keep_tokens / compound_tokens apply to these.
VOCABULARY_VARIABLES = (WORD_EMBEDDINGS, MLM_OUTPUT_BIAS)
# Stored [2, hidden] in Google checkpoints; the Keras Dense kernel is [hidden, 2].
TRANSPOSED_VARIABLES = (NSP_OUTPUT_WEIGHTS, SQUAD_OUTPUT_WEIGHTS)


def dense(scope):
    return {"kernel": f"{scope}/kernel", "bias": f"{scope}/bias"}


def norm(scope):
    return {"gamma": f"{scope}/gamma", "beta": f"{scope}/beta"}


def variable_mapping(num_hidden_layers):
    """The table ``{layer name: {weight attribute: Google variable name}}``.

    Example:
        >>> variable_mapping(12)["Embedding-Norm"]
        {'gamma': 'bert/embeddings/LayerNorm/gamma', 'beta': 'bert/embeddings/LayerNorm/beta'}
    """
    mapping = {
        names.EMBEDDING_TOKEN: {"embeddings": WORD_EMBEDDINGS},
        names.EMBEDDING_SEGMENT: {"embeddings": "bert/embeddings/token_type_embeddings"},
        names.EMBEDDING_POSITION: {"embeddings": POSITION_EMBEDDINGS},
        names.EMBEDDING_NORM: norm("bert/embeddings/LayerNorm"),
        # Where embedding_size differs from hidden_size (ALBERT, RoFormer-v2, a factorised BERT).
        names.EMBEDDING_MAPPING: dense("bert/encoder/embedding_hidden_mapping_in"),
    }
    for i in range(num_hidden_layers):
        scope = f"bert/encoder/layer_{i}"
        attention, feed_forward = names.attention_name(i), names.feed_forward_name(i)
        mapping[attention] = {
            f"{projection}_{kind}": f"{scope}/attention/self/{projection}/{kind}"
            for projection in ("query", "key", "value")
            for kind in ("kernel", "bias")
        }
        mapping[attention].update(
            output_kernel=f"{scope}/attention/output/dense/kernel",
            output_bias=f"{scope}/attention/output/dense/bias",
        )
        mapping[names.norm_name(attention)] = norm(f"{scope}/attention/output/LayerNorm")
        mapping[feed_forward] = {
            "intermediate_kernel": f"{scope}/intermediate/dense/kernel",
            "intermediate_bias": f"{scope}/intermediate/dense/bias",
            "output_kernel": f"{scope}/output/dense/kernel",
            "output_bias": f"{scope}/output/dense/bias",
        }
        mapping[names.norm_name(feed_forward)] = norm(f"{scope}/output/LayerNorm")
    mapping.update({
        names.POOLER_DENSE: dense("bert/pooler/dense"),
        names.NSP_PROBA: {"kernel": NSP_OUTPUT_WEIGHTS, "bias": "cls/seq_relationship/output_bias"},
        names.MLM_DENSE: dense("cls/predictions/transform/dense"),
        names.MLM_NORM: norm("cls/predictions/transform/LayerNorm"),
        names.MLM_BIAS: {"bias": MLM_OUTPUT_BIAS},
        names.SPAN_DENSE: {"kernel": SQUAD_OUTPUT_WEIGHTS, "bias": SQUAD_OUTPUT_BIAS},
    })
    return mapping
