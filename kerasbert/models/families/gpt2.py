"""GPT-2 as bert4keras builds it (``model="gpt2"``): GPT's tied language-model head over
pre-norm layers, token ids alone as input, and a final ``Output-Norm``.

The graph::

    Input-Token ─ Embedding-Token ─ Embedding-Position (add)
      ─ L × [ -MultiHeadSelfAttention-Norm ─ Transformer-i-MultiHeadSelfAttention ─ -Dropout
              ─ -Add (the block's input + its output)
              -FeedForward-Norm ─ Transformer-i-FeedForward ─ -Dropout ─ -Add ]
      ─ Output-Norm ─ Output-Dropout ─ Embedding-Token (transposed) ─ LM-Activation

Every layer norm has epsilon 1e-5 (GPT-2's, fixed in bert4keras whatever the config says);
every token sees itself and the tokens before it. Its checkpoints keep GPT's names with the
norms read before each block (``gpt/transformer/layer_0/attention/input/LayerNorm/gamma``,
``gpt/transformer/layer_0/input/LayerNorm/gamma``) and ``gpt/output/LayerNorm``, as
bert4keras 0.11.5's ``GPT2`` reads them.

Hugging Face's GPT-2 (``GPT2Model``, ``GPT2LMHeadModel``) converts to these names
(``kerasbert convert --from-hf``): its ``c_attn`` holds the query, key and value kernels
side by side and its ``Conv1D`` weights are already ``[in, out]``.

Audit: GPT's rows without ``Embedding-Segment`` (no segment input), plus ``Output-Norm``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

from kerasbert.models import names
from kerasbert.models.checkpoint_names import norm
from kerasbert.models.families.base import AuditRow, HuggingFaceRecipe, Step
from kerasbert.models.families.gpt import GPT, HF_IGNORED, conv1d_config, conv1d_variables
from kerasbert.models.layers import Add

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

#: GPT-2's layer-norm epsilon (bert4keras fixes it; the config's ``layer_norm_eps`` is not read).
EPSILON = 1e-5

# ------------------------------------------------------- Hugging Face's GPT-2
#: Hugging Face config keys whose other values describe a model this family does not build.
HF_DEFAULTS = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
               "reorder_and_upcast_attn": False, "add_cross_attention": False}


def hf_config(values: dict[str, Any], path: str) -> dict[str, Any]:
    """The Google config of a Hugging Face GPT-2 ``config.json``'s values.

    Example:
        >>> hf_config({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768,
        ...            "n_layer": 12, "n_head": 12, "n_positions": 1024}, "x")["intermediate_size"]
        3072
    """
    return {**conv1d_config(values, path, "gpt2", HF_DEFAULTS),
            "intermediate_size": values.get("n_inner") or 4 * values["n_embd"],
            "hidden_act": values.get("activation_function", "gelu_new"),
            "layer_norm_eps": values.get("layer_norm_epsilon", EPSILON)}


#: Each Hugging Face GPT-2 parameter's Google variables (see :func:`conv1d_variables`).
hf_variables = conv1d_variables(
    {"wte": "gpt/embeddings/word_embeddings", "wpe": "gpt/embeddings/position_embeddings"},
    {"ln_f": "gpt/output/LayerNorm"},
    {"attn.c_proj": "attention/output/dense", "mlp.c_fc": "intermediate/dense",
     "mlp.c_proj": "output/dense", "ln_1": "attention/input/LayerNorm",
     "ln_2": "input/LayerNorm"})


class GPT2(GPT):
    """GPT-2 (``model="gpt2"``): a pre-norm causal language model."""

    model_type = "gpt2"
    default_name = "gpt2"
    marker_layer = names.OUTPUT_NORM
    # GPT's names and its own final norm: a checkpoint with it is GPT-2's, not GPT's.
    checkpoint_pattern = r"gpt/output/"
    checkpoint_description = "a GPT-2"
    segment_inputs = False
    conditional_norms = False  # its pre-norm blocks take no condition
    position_inputs = False
    applications = ("encoder", "lm")
    hf_layout = HuggingFaceRecipe("transformer.", "gpt", hf_config, hf_variables, HF_IGNORED,
                                  model_type="gpt2")

    def norm(self, name: str) -> keras.layers.Layer:
        return self.apply(layer=keras.layers.LayerNormalization, epsilon=EPSILON, name=name)

    def apply_embeddings(self, inputs: list[keras.KerasTensor],
                         step: Step | None = None) -> keras.KerasTensor:
        """Token and position embeddings added (no norm, no dropout: bert4keras's GPT2)."""
        return self.mapped(self.token_and_position(inputs, step))

    def pre_norm_residual(self, x: Any, block: str, arguments: dict[str, Any] | None = None,
                          step: Step | None = None) -> Any:
        """``x + Dropout(block(Norm(x), **arguments))``, GPT-2's pre-norm residual."""
        y = self.apply(inputs=x, name=names.norm_name(block))
        y = self.apply(inputs=y, name=block, arguments=arguments, step=step)
        y = self.dropout(y, names.dropout_name(block))
        return self.apply(inputs=[x, y], layer=Add, name=names.add_name(block))

    def apply_main_layers(self, inputs: keras.KerasTensor, index: int,
                          step: Step | None = None) -> keras.KerasTensor:
        """Layer ``index``: norm, attention, residual; norm, feed-forward, residual."""
        attention, feed_forward = self.layer_names(index)
        arguments = self.attention_arguments(inputs, step)
        self.norm(names.norm_name(attention))
        self.attention_layer(attention)
        self.norm(names.norm_name(feed_forward))
        self.feed_forward_layer(feed_forward)
        x = self.pre_norm_residual(inputs, attention, arguments, step)
        return self.pre_norm_residual(x, feed_forward)

    def apply_final_layers(self, inputs: keras.KerasTensor, step: Step | None = None
                           ) -> keras.KerasTensor | list[keras.KerasTensor]:
        """``Output-Norm``, ``Output-Dropout``, then GPT's tied head."""
        x = self.norm(names.OUTPUT_NORM)(inputs)
        x = self.dropout(x, names.OUTPUT_DROPOUT)
        return super().apply_final_layers(x, step)

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """GPT's table with each block's norm read before it, and ``gpt/output/LayerNorm``.

        Example:
            >>> GPT2.checkpoint_table(1)["Transformer-0-FeedForward-Norm"]["gamma"]
            'gpt/transformer/layer_0/input/LayerNorm/gamma'
        """
        table = {layer: {attribute: name.replace("output/LayerNorm", "input/LayerNorm")
                         for attribute, name in weights.items()}
                 for layer, weights in GPT.checkpoint_table(num_hidden_layers).items()
                 if layer != names.EMBEDDING_SEGMENT}
        table[names.OUTPUT_NORM] = norm("gpt/output/LayerNorm")
        return table

    @classmethod
    def head_rows(cls, config: BertConfig, with_pool: bool | str, with_nsp: bool,
                  with_mlm: bool | str, with_discriminator: bool | str) -> list[AuditRow]:
        return cls.norm_rows("output", names.OUTPUT_NORM, config.hidden_size, "H")
