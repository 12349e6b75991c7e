"""NEZHA (Huawei): BERT with relative positions inside attention, no position table.

``Embedding-Relative-Position`` gives every attention layer the sinusoid of the clipped
distance ``clip(k - j, -m, m)`` (``m = max_relative_position``, 64), added to the scores
and the context. The checkpoint keeps BERT's names (no ``position_embeddings``).

Audit: no ``Embedding-Position``; the fixed relative table (2m+1)·d (d = H/A), which
bert4keras counts as a weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kerasbert.models import names
from kerasbert.models.families import family_class
from kerasbert.models.families.base import AuditRow
from kerasbert.models.families.bert import BERT
from kerasbert.models.positions import RelativePositions

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig


class NEZHA(BERT):
    """NEZHA (``model="nezha"``)."""

    model_type = "nezha"
    default_name = "nezha"
    position = "relative"
    checkpoint_description = "a NEZHA"
    attention_options: tuple[str, ...] = ("residual_attention_scores",)  # table: queries only
    hf_layout = None  # Hugging Face has no NEZHA
    config_rules: tuple[tuple[Any, ...], ...] = (
        # NEZHA's own configs have no model_type, but this key.
        ("use_relative_position", lambda value, values, family: not value
         or family_class(family).position == "relative",
         "relative positions are NEZHA's; build with model='nezha'"),
    )

    def compute_position_bias(self, inputs: Any = None) -> Any:
        """``Embedding-Relative-Position`` of the embeddings' length (made once)."""
        if self.position_bias is None:
            self.position_bias = self.apply(
                inputs=inputs, layer=RelativePositions, head_size=self.attention_head_size,
                max_relative_position=self.config.max_relative_position,
                name=names.EMBEDDING_RELATIVE_POSITION)
        return self.position_bias

    @classmethod
    def position_rows(cls, config: BertConfig) -> list[AuditRow]:
        return [("embeddings", names.EMBEDDING_RELATIVE_POSITION, "(2m+1)·d",
                 (2 * config.max_relative_position + 1) * config.head_size)]
