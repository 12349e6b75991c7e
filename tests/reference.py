"""Published parameter counts that the summary must reproduce exactly (one place for them)."""

CHINESE_BASE = "checkpoints/chinese_L-12_H-768_A-12/bert_config.json"
CHINESE_LARGE = "checkpoints/chinese_roberta_wwm_ext_L-24_H-1024_A-16/bert_config.json"
ENGLISH_UNCASED = "checkpoints/uncased_L-12_H-768_A-12/bert_config.json"

# Chinese BERT-base (V=21128, H=768, L=12, I=3072), per layer.
CHINESE_BASE_LAYERS = {
    "Embedding-Token": 16_226_304,
    "Embedding-Segment": 1_536,
    "Embedding-Position": 393_216,
    "Embedding-Norm": 1_536,
    "Transformer-0-MultiHeadSelfAttention": 2_362_368,
    "Transformer-0-MultiHeadSelfAttention-Norm": 1_536,
    "Transformer-0-FeedForward": 4_722_432,
    "Transformer-11-FeedForward-Norm": 1_536,
}
CHINESE_BASE_ENCODER = 101_677_056
CHINESE_BASE_CLS2 = 101_678_594
CHINESE_BASE_POOLER = 102_267_648
CHINESE_BASE_ALL_HEADS = 102_882_442
CHINESE_LARGE_ENCODER = 324_472_832
ENGLISH_UNCASED_POOLER = 109_482_240
ENGLISH_UNCASED_EMBEDDINGS = 23_837_184
ENGLISH_UNCASED_ENCODER = 85_054_464
