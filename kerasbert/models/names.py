"""Layer names, kept identical to bert4keras 0.11.5.

Downstream code (checkpoint mapping, fine-tuning scripts, ``model.get_layer``)
looks layers up by these names, so each is spelled here and nowhere else.
"""

INPUT_TOKEN = "Input-Token"
INPUT_SEGMENT = "Input-Segment"
# Pretraining only: the positions whose tokens the MLM head predicts.
INPUT_MLM_POSITIONS = "Input-MLM-Positions"

EMBEDDING_TOKEN = "Embedding-Token"
EMBEDDING_SEGMENT = "Embedding-Segment"
EMBEDDING_TOKEN_SEGMENT = "Embedding-Token-Segment"
EMBEDDING_POSITION = "Embedding-Position"
EMBEDDING_NORM = "Embedding-Norm"
EMBEDDING_DROPOUT = "Embedding-Dropout"

POOLER = "Pooler"
POOLER_DENSE = "Pooler-Dense"
NSP_PROBA = "NSP-Proba"
MLM_DENSE = "MLM-Dense"
MLM_NORM = "MLM-Norm"
MLM_BIAS = "MLM-Bias"
MLM_ACTIVATION = "MLM-Activation"

CLS_TOKEN = "CLS-token"
CLS_DROPOUT = "CLS-Dropout"
CLS_DENSE = "dense_output"
# The softmax a fine-tuning run saves after dense_output (the run trains on its logits).
CLS_PROBABILITIES = "CLS-Probabilities"


def attention_name(index):
    """``attention_name(0) -> "Transformer-0-MultiHeadSelfAttention"``."""
    return f"Transformer-{index}-MultiHeadSelfAttention"


def feed_forward_name(index):
    """``feed_forward_name(0) -> "Transformer-0-FeedForward"``."""
    return f"Transformer-{index}-FeedForward"


def dropout_name(block):
    """The dropout after a block: ``"Transformer-0-FeedForward-Dropout"``."""
    return f"{block}-Dropout"


def add_name(block):
    """The residual sum after a block: ``"Transformer-0-FeedForward-Add"``."""
    return f"{block}-Add"


def norm_name(block):
    """The layer norm after a block: ``"Transformer-0-FeedForward-Norm"``."""
    return f"{block}-Norm"
