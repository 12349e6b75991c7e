"""RoFormer (ZhuiyiAI): BERT whose queries and keys are rotated by their positions.

``Embedding-Rotary-Position`` holds the sinusoid of the positions; every attention layer
rotates its queries and keys by it. No position table, no length limit; embeddings may be
narrower than the hidden size (``Embedding-Mapping``). RoFormer-v2 has no biases, norms
without mean or weights (embedding dropout before the norm) and an MLM head of the tied
embedding alone (``Output-Mapping`` where the widths differ). Both keep BERT's names.

Audit: no ``Embedding-Position``; RoFormer-v2: 4·H·H attention, 2·H·I feed-forward, no
norm rows, its head ``Output-Mapping`` H·E (bias-free) or nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kerasbert.models import names
from kerasbert.models.families.base import AuditRow, HuggingFaceLayout, Step
from kerasbert.models.families.bert import (
    BERT,
    HF_HEADS,
    HF_LAYER,
    HF_LAYER_MODULES,
    HF_PLAIN,
    HF_TIED,
    hf_embedding_modules,
)
from kerasbert.models.positions import RotaryPositions

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig


class RoFormer(BERT):
    """RoFormer (``model="roformer"``)."""

    model_type = "roformer"
    default_name = "roformer"
    position = "rotary"
    factorised = True
    checkpoint_description = "a RoFormer"
    attention_options: tuple[str, ...] = ("residual_attention_scores",)  # rotation: queries only
    hf_layout: HuggingFaceLayout | None = HuggingFaceLayout(
        "roformer.", "bert",
        {**hf_embedding_modules("bert"), **HF_HEADS,
         "embeddings_project": "bert/encoder/embedding_hidden_mapping_in"},
        HF_LAYER, "bert/encoder/layer_{index}", HF_LAYER_MODULES, HF_PLAIN,
        # The sinusoid tables are computed, not learned.
        ("embeddings.embed_positions.weight", "encoder.embed_positions.weight") + HF_TIED,
        optional=(names.EMBEDDING_POSITION,))

    @classmethod
    def check_hf_config(cls, config: BertConfig, path: str) -> None:
        """Refuses Hugging Face's ``rotary_value``: the original rotates queries and keys
        only."""
        if config.extra.get("rotary_value"):
            raise ValueError(f"rotary_value (True) in {path}: not supported; kerasbert's "
                             "RoFormer, as the original, rotates queries and keys only")

    def compute_position_bias(self, inputs: Any = None) -> Any:
        """``Embedding-Rotary-Position`` of the embeddings' length, or of the model's
        ``Input-Position`` (made once)."""
        if self.position_bias is None:
            self.position_bias = self.apply(inputs=inputs, layer=RotaryPositions,
                                            arguments=self.positions(),
                                            head_size=self.attention_key_size,
                                            name=names.EMBEDDING_ROTARY_POSITION)
        return self.position_bias


class RoFormerV2(RoFormer):
    """RoFormer-v2 (``model="roformer_v2"``): bias-free, weightless norms, tied MLM head."""

    default_name = "roformer_v2"
    checkpoint_description = "a RoFormer-v2"
    use_bias = False
    scale_free_norm = True
    conditional_norms = False  # weightless norms: nothing for a condition to steer
    head_flags = ("with_mlm",)
    masked_lm = False
    hf_layout = None  # Hugging Face has no RoFormer-v2

    def heads(self, x: Any, step: Step | None = None) -> list[Any]:
        if not self.with_mlm:
            return []
        activation = "softmax" if self.with_mlm is True else self.with_mlm
        if self.embedding_size != self.hidden_size:
            x = self.dense(x, self.embedding_size, names.OUTPUT_MAPPING)
        x = self.dropout(x, names.OUTPUT_MLM_DROPOUT)
        x = self.layer(names.EMBEDDING_TOKEN)(x, reverse=True)
        return [self.output_activation(x, activation, names.OUTPUT_MLM_ACTIVATION)]

    @classmethod
    def head_rows(cls, config: BertConfig, with_pool: bool | str, with_nsp: bool,
                  with_mlm: bool | str, with_discriminator: bool | str) -> list[AuditRow]:
        H, E = config.hidden_size, config.embedding_size
        if with_mlm and E != H:  # the tied embedding alone, after a bias-free mapping
            return [cls.dense_row("mlm", names.OUTPUT_MAPPING, "H", H, "E", E)]
        return []
