"""Layer names, kept identical to bert4keras 0.11.5.

Downstream code (checkpoint mapping, fine-tuning scripts, ``model.get_layer``)
looks layers up by these names, so each is spelled here and nowhere else.
"""

from collections.abc import Container

#: The package custom layers are registered under (``"kerasbert>FeedForward"``).
SERIALIZATION_PACKAGE = "kerasbert"

INPUT_TOKEN = "Input-Token"
INPUT_SEGMENT = "Input-Segment"
INPUT_POSITION = "Input-Position"  # custom_position_ids=True
# Pretraining only: the positions whose tokens the MLM head predicts.
INPUT_MLM_POSITIONS = "Input-MLM-Positions"

EMBEDDING_TOKEN = "Embedding-Token"
EMBEDDING_SEGMENT = "Embedding-Segment"
EMBEDDING_TOKEN_SEGMENT = "Embedding-Token-Segment"
EMBEDDING_POSITION = "Embedding-Position"
EMBEDDING_NORM = "Embedding-Norm"
EMBEDDING_DROPOUT = "Embedding-Dropout"
# ALBERT and ELECTRA: embedding_size -> hidden_size.
EMBEDDING_MAPPING = "Embedding-Mapping"
# RoFormer's rotary and NEZHA's relative positions, fed to every attention layer.
EMBEDDING_ROTARY_POSITION = "Embedding-Rotary-Position"
EMBEDDING_RELATIVE_POSITION = "Embedding-Relative-Position"

# The attention masks besides padding (models/attention_masks.py), shared by every layer.
ATTENTION_LM_MASK = "Attention-LM-Mask"
ATTENTION_UNILM_MASK = "Attention-UniLM-Mask"
ATTENTION_PREFIX_LM_MASK = "Attention-Prefix-LM-Mask"

# ALBERT's one attention and one feed-forward block, used by every layer.
SHARED_ATTENTION = "Transformer-MultiHeadSelfAttention"
SHARED_FEED_FORWARD = "Transformer-FeedForward"

POOLER = "Pooler"
POOLER_DENSE = "Pooler-Dense"
NSP_PROBA = "NSP-Proba"
MLM_DENSE = "MLM-Dense"
MLM_NORM = "MLM-Norm"
MLM_BIAS = "MLM-Bias"
MLM_ACTIVATION = "MLM-Activation"
# RoFormer-v2's MLM head: the tied embedding alone.
OUTPUT_MAPPING = "Output-Mapping"
OUTPUT_MLM_DROPOUT = "Output-MLM-Dropout"
OUTPUT_MLM_ACTIVATION = "Output-MLM-Activation"
# GPT's language-model head: the tied embedding, then this softmax.
LM_ACTIVATION = "LM-Activation"
# GPT-2's norm and dropout after the last layer, before the language-model head.
OUTPUT_NORM = "Output-Norm"
OUTPUT_DROPOUT = "Output-Dropout"
# ELECTRA's replaced-token detection head.
DISCRIMINATOR_DENSE = "Discriminator-Dense"
DISCRIMINATOR_PREDICTION = "Discriminator-Prediction"

# Sequence labelling: the per-token tag scores, and the CRF over them (bert4keras's scripts).
TAGGER_DROPOUT = "Tagger-Dropout"
TAGGER_DENSE = "Tagger-Dense"
CRF = "CRF"

CLS_TOKEN = "CLS-token"
CLS_DROPOUT = "CLS-Dropout"
CLS_DENSE = "dense_output"
# The softmax a fine-tuning run saves after dense_output (the run trains on its logits).
CLS_PROBABILITIES = "CLS-Probabilities"
# Span question answering (SQuAD): a start and an end logit per token, H -> 2.
SPAN_DENSE = "Span-Dense"


# T5: an encoder and a decoder; their layers carry the side's prefix ("Encoder-Transformer-0-
# MultiHeadSelfAttention"), the token embedding is shared by both.
ENCODER, DECODER = "Encoder", "Decoder"
ENCODER_INPUT_TOKEN = "Encoder-Input-Token"
DECODER_INPUT_TOKEN = "Decoder-Input-Token"
# The decoder model's first input: the encoder's output.
INPUT_CONTEXT = "Input-Context"

#: The projections of an attention and a feed-forward layer that LoRA adapters may be put
#: beside (``--lora-targets``), in the order of the layers' weights.
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")


def side_name(side: str, name: str) -> str:
    """A T5 layer's name: ``side_name("Encoder", "Output-Norm") -> "Encoder-Output-Norm"``."""
    return f"{side}-{name}"


def cross_attention_name(index: int) -> str:
    """``cross_attention_name(0) -> "Decoder-Transformer-0-MultiHeadCrossAttention"``."""
    return f"{DECODER}-Transformer-{index}-MultiHeadCrossAttention"


def attention_name(index: int) -> str:
    """``attention_name(0) -> "Transformer-0-MultiHeadSelfAttention"``."""
    return f"Transformer-{index}-MultiHeadSelfAttention"


def feed_forward_name(index: int) -> str:
    """``feed_forward_name(0) -> "Transformer-0-FeedForward"``."""
    return f"Transformer-{index}-FeedForward"


def dropout_name(block: str) -> str:
    """The dropout after a block: ``"Transformer-0-FeedForward-Dropout"``."""
    return f"{block}-Dropout"


def add_name(block: str) -> str:
    """The residual sum after a block: ``"Transformer-0-FeedForward-Add"``."""
    return f"{block}-Add"


def norm_name(block: str) -> str:
    """The layer norm after a block: ``"Transformer-0-FeedForward-Norm"``."""
    return f"{block}-Norm"


def shares_segment_table(layers: Container[str]) -> bool:
    """Whether a model with these layer names reads its segment ids through
    ``Embedding-Token`` (``shared_segment_embeddings``): a segment input, no table of its own.
    """
    return INPUT_SEGMENT in layers and EMBEDDING_SEGMENT not in layers
