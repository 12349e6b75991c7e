"""GPT2-ML as bert4keras builds it (``model="gpt2_ml"``): the Chinese 1.5-billion-parameter
language model of the gpt2-ml project, whose layers are closer to GPT than to GPT-2.

The graph::

    Input-Token ─ Embedding-Token ─ Embedding-Position (add) ─ Embedding-Norm
      ─ L × [ Transformer-i-MultiHeadSelfAttention ─ -Dropout ─ -Add
              -FeedForward-Norm-0 ─ Transformer-i-FeedForward ─ -Dropout
              ─ -Add (the attention's sum + the block's output) ─ -FeedForward-Norm-1 ]
      ─ Embedding-Token (transposed) ─ LM-Activation

Every layer norm has epsilon 1e-5 (fixed in bert4keras whatever the config says); every
token sees itself and the tokens before it. Its checkpoints use the project's own names
(``newslm/embeddings/word_embed``, ``newslm/layer00/query_layer/kernel``,
``newslm/layer00/LayerNorm_mlp_ln0/gamma``), as bert4keras 0.11.5's ``GPT2_ML`` reads them.

Audit: token and position embeddings, ``Embedding-Norm``, and per layer the attention, the
feed-forward and its two norms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import keras

from kerasbert.models import names
from kerasbert.models.checkpoint_names import dense, norm
from kerasbert.models.families.base import AuditRow, Step
from kerasbert.models.families.gpt import GPT
from kerasbert.models.layers import Add

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

#: GPT2-ML's layer-norm epsilon (bert4keras fixes it).
EPSILON = 1e-5
#: Where its variables live.
SCOPE = "newslm"


def feed_forward_norm_name(index: int, which: int) -> str:
    """``"Transformer-0-FeedForward-Norm-0"`` (before) / ``-Norm-1`` (after the sum)."""
    return f"{names.norm_name(names.feed_forward_name(index))}-{which}"


class GPT2ML(GPT):
    """GPT2-ML (``model="gpt2_ml"``)."""

    model_type = "gpt2_ml"
    default_name = "gpt2_ml"
    marker_layer = feed_forward_norm_name(0, 1)
    checkpoint_pattern = rf"{SCOPE}/"
    checkpoint_description = "a GPT2-ML"
    segment_inputs = False
    conditional_norms = False  # its pre-norm blocks take no condition
    position_inputs = False
    applications = ("encoder", "lm")

    def norm(self, name: str) -> keras.layers.Layer:
        return self.apply(layer=keras.layers.LayerNormalization, epsilon=EPSILON, name=name)

    def apply_embeddings(self, inputs: list[keras.KerasTensor],
                         step: Step | None = None) -> keras.KerasTensor:
        """Token and position embeddings added, then ``Embedding-Norm`` (no dropout)."""
        return self.mapped(self.norm(names.EMBEDDING_NORM)(
            self.token_and_position(inputs, step)))

    def apply_main_layers(self, inputs: keras.KerasTensor, index: int,
                          step: Step | None = None) -> keras.KerasTensor:
        """Attention with a residual sum; norm, feed-forward, residual sum, norm."""
        attention, feed_forward = self.layer_names(index)
        arguments = self.attention_arguments(inputs, step)
        self.attention_layer(attention)
        self.norm(feed_forward_norm_name(index, 0))
        self.feed_forward_layer(feed_forward)
        self.norm(feed_forward_norm_name(index, 1))
        y = self.apply(inputs=inputs, name=attention, arguments=arguments, step=step)
        y = self.dropout(y, names.dropout_name(attention))
        x = self.apply(inputs=[inputs, y], layer=Add, name=names.add_name(attention))
        y = self.apply(inputs=x, name=feed_forward_norm_name(index, 0))
        y = self.apply(inputs=y, name=feed_forward)
        y = self.dropout(y, names.dropout_name(feed_forward))
        x = self.apply(inputs=[x, y], layer=Add, name=names.add_name(feed_forward))
        return self.apply(inputs=x, name=feed_forward_norm_name(index, 1))

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """The gpt2-ml project's names.

        Example:
            >>> GPT2ML.checkpoint_table(1)["Transformer-0-FeedForward-Norm-1"]["gamma"]
            'newslm/layer00/LayerNorm_mlp_ln1/gamma'
        """
        table = {
            names.EMBEDDING_TOKEN: {"embeddings": f"{SCOPE}/embeddings/word_embed"},
            names.EMBEDDING_POSITION: {"embeddings": f"{SCOPE}/embeddings/pos_embed"},
            names.EMBEDDING_NORM: norm(f"{SCOPE}/embeddings/LayerNorm_embed_norm"),
        }
        for i in range(num_hidden_layers):
            scope = f"{SCOPE}/layer{i:02d}"
            projections = {f"{p}_{kind}": f"{scope}/{p}_layer/{kind}"
                           for p in ("query", "key", "value") for kind in ("kernel", "bias")}
            output = dense(f"{scope}/context_projection_layer")
            table[names.attention_name(i)] = {**projections, "output_kernel": output["kernel"],
                                              "output_bias": output["bias"]}
            table[feed_forward_norm_name(i, 0)] = norm(f"{scope}/LayerNorm_mlp_ln0")
            table[names.feed_forward_name(i)] = {
                "intermediate_kernel": f"{scope}/intermediate/kernel",
                "intermediate_bias": f"{scope}/intermediate/bias",
                "output_kernel": f"{scope}/output/kernel",
                "output_bias": f"{scope}/output/bias",
            }
            table[feed_forward_norm_name(i, 1)] = norm(f"{scope}/LayerNorm_mlp_ln1")
        return table

    @classmethod
    def audit_rows(cls, config: BertConfig, with_pool: bool | str = False,
                   with_nsp: bool = False, with_mlm: bool | str = False,
                   with_discriminator: bool | str = False) -> list[AuditRow]:
        """Embeddings, ``Embedding-Norm`` and each layer's attention, feed-forward and norms."""
        V, H, P, I = (config.vocab_size, config.hidden_size,  # noqa: E741
                      config.max_position_embeddings, config.intermediate_size)
        rows = [("embeddings", names.EMBEDDING_TOKEN, "V·H", V * H),
                ("embeddings", names.EMBEDDING_POSITION, "P·H", P * H),
                ("embeddings", names.EMBEDDING_NORM, "2·H", 2 * H)]
        for i in range(config.num_hidden_layers):
            rows += [("encoder", names.attention_name(i), "4·(H·H+H)", 4 * (H * H + H)),
                     ("encoder", feed_forward_norm_name(i, 0), "2·H", 2 * H),
                     ("encoder", names.feed_forward_name(i), "2·H·I+I+H", 2 * H * I + I + H),
                     ("encoder", feed_forward_norm_name(i, 1), "2·H", 2 * H)]
        return rows
