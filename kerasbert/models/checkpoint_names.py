"""BERT's variable names in a Google checkpoint, and the helpers every family's table uses.

The tables themselves are the families' (``checkpoint_table`` in
:mod:`kerasbert.models.families`); these are the names the loader treats apart: rows of the
vocabulary (``keep_tokens``), kernels stored transposed.
"""

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
POSITION_EMBEDDINGS = "bert/embeddings/position_embeddings"
MLM_OUTPUT_BIAS = "cls/predictions/output_bias"
NSP_OUTPUT_WEIGHTS = "cls/seq_relationship/output_weights"
# Google's run_squad.py: the span head's start and end logits.
SQUAD_OUTPUT_WEIGHTS = "cls/squad/output_weights"
SQUAD_OUTPUT_BIAS = "cls/squad/output_bias"
# One row per vocabulary entry: keep_tokens / compound_tokens apply to these.
# T5's shared embedding and its t5.1.1 output matrix (stored [hidden, vocab], kept [vocab,
# hidden]).
T5_EMBEDDING = "shared/embedding"
T5_LOGITS = "decoder/logits/kernel"
VOCABULARY_VARIABLES = (WORD_EMBEDDINGS, MLM_OUTPUT_BIAS, T5_EMBEDDING, T5_LOGITS)
# Stored [2, hidden] in Google checkpoints; the Keras Dense kernel is [hidden, 2].
TRANSPOSED_VARIABLES = (NSP_OUTPUT_WEIGHTS, SQUAD_OUTPUT_WEIGHTS, T5_LOGITS)


def dense(scope: str) -> dict[str, str]:
    """A dense layer's names in a Google checkpoint."""
    return {"kernel": f"{scope}/kernel", "bias": f"{scope}/bias"}


def norm(scope: str) -> dict[str, str]:
    """A layer norm's names in a Google checkpoint."""
    return {"gamma": f"{scope}/gamma", "beta": f"{scope}/beta"}


def attention_variables(scope: str) -> dict[str, str]:
    """``MultiHeadSelfAttention``'s weights under BERT's names in ``scope`` (``.../attention``)."""
    return {
        **{f"{projection}_{kind}": f"{scope}/self/{projection}/{kind}"
           for projection in ("query", "key", "value") for kind in ("kernel", "bias")},
        "output_kernel": f"{scope}/output/dense/kernel",
        "output_bias": f"{scope}/output/dense/bias",
    }


def is_vocabulary_variable(name: str) -> bool:
    """Whether ``name`` has one row per vocabulary entry in any family's checkpoint
    (``bert/``, ``electra/``, ``gpt/`` ``embeddings/word_embeddings``, GPT2-ML's
    ``newslm/embeddings/word_embed``, the MLM bias).

    Example:
        >>> is_vocabulary_variable("electra/embeddings/word_embeddings")
        True
    """
    return name in VOCABULARY_VARIABLES or name.endswith(
        ("/embeddings/word_embeddings", "/embeddings/word_embed"))
