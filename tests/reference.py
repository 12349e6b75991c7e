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

# Published configs of the other families (checkpoints/), as bert4keras 0.11.5 counts them:
# config -> (model=, parameters without heads). Google's ALBERT-base with its pooler is
# 11,683,584 ("12M" in the ALBERT paper); brightmart's albert_tiny_zh is "4M".
FAMILY_CONFIGS = {
    "checkpoints/albert_tiny_zh/albert_config.json": ("albert", 3_982_864),
    "checkpoints/albert_base_zh/albert_config.json": ("albert", 9_957_376),
    "checkpoints/albert_base_v2/albert_config.json": ("albert", 11_092_992),
    "checkpoints/nezha_base_zh/bert_config.json": ("nezha", 101_292_096),
    "checkpoints/chinese_roformer_L-12_H-768_A-12/bert_config.json": ("roformer", 123_457_536),
    "checkpoints/chinese_roformer-v2-char_L-12_H-768_A-12/bert_config.json": ("roformer_v2",
                                                                           94_152_192),
    "checkpoints/chinese_electra_base_L-12_H-768_A-12/base_discriminator_config.json": (
        "electra", 101_677_056),
    "checkpoints/chinese_electra_small_L-12_H-256_A-4/small_discriminator_config.json": (
        "electra", 12_280_576),
    # OpenAI's GPT-2 small (124M), as kerasbert convert writes Hugging Face's gpt2.
    "checkpoints/gpt2_small/bert_config.json": ("gpt2", 124_439_808),
    # Google's mT5-small (300M, its untied output matrix a third of it).
    "checkpoints/mt5_small/bert_config.json": ("mt5.1.1", 300_176_768),
}
ALBERT_BASE_POOLER = 11_683_584
