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

Audit: GPT's rows without ``Embedding-Segment`` (no segment input), plus ``Output-Norm``.
"""

import keras

from kerasbert.models import names
from kerasbert.models.checkpoint_names import norm
from kerasbert.models.families.gpt import GPT
from kerasbert.models.layers import Add, PositionEmbedding

#: GPT-2's layer-norm epsilon (bert4keras fixes it; the config's ``layer_norm_eps`` is not read).
EPSILON = 1e-5


class GPT2(GPT):
    """GPT-2 (``model="gpt2"``): a pre-norm causal language model."""

    model_type = "gpt2"
    default_name = "gpt2"
    marker_layer = names.OUTPUT_NORM
    checkpoint_description = "a GPT-2"
    segment_inputs = False
    applications = ("encoder", "lm")

    def norm(self, name):
        return self.apply(layer=keras.layers.LayerNormalization, epsilon=EPSILON, name=name)

    def apply_embeddings(self, inputs):
        """Token and position embeddings added (no norm, no dropout: bert4keras's GPT2)."""
        x = self.token_and_segment(inputs)
        x = self.apply(inputs=x, layer=PositionEmbedding, max_position=self.max_position,
                       initializer_range=self.config.initializer_range,
                       name=names.EMBEDDING_POSITION)
        if self.embedding_size != self.hidden_size:
            x = self.dense(x, self.hidden_size, names.EMBEDDING_MAPPING)
        return x

    def pre_norm_residual(self, x, block, extra=()):
        """``x + Dropout(block(Norm(x)))``, GPT-2's pre-norm residual."""
        y = self.apply(inputs=x, name=names.norm_name(block))
        y = self.apply(inputs=[y, *extra] if extra else y, name=block)
        y = self.dropout(y, names.dropout_name(block))
        return self.apply(inputs=[x, y], layer=Add, name=names.add_name(block))

    def apply_main_layers(self, inputs, index):
        """Layer ``index``: norm, attention, residual; norm, feed-forward, residual."""
        attention, feed_forward = self.layer_names(index)
        mask = self.compute_attention_bias()
        self.norm(names.norm_name(attention))
        self.attention_layer(attention)
        self.norm(names.norm_name(feed_forward))
        self.feed_forward_layer(feed_forward)
        x = self.pre_norm_residual(inputs, attention, [mask] if mask is not None else ())
        return self.pre_norm_residual(x, feed_forward)

    def apply_final_layers(self, inputs):
        """``Output-Norm``, ``Output-Dropout``, then GPT's tied head."""
        x = self.norm(names.OUTPUT_NORM)(inputs)
        x = self.dropout(x, names.OUTPUT_DROPOUT)
        return super().apply_final_layers(x)

    @classmethod
    def cached_blocks(cls, layers, x, caches, start, allowed):
        """Pre-norm layers through the key/value caches (see :meth:`BERT.cached_blocks`)."""
        written = []
        for index, (keys, values) in enumerate(caches):
            attention, feed_forward = names.attention_name(index), names.feed_forward_name(index)
            y, keys, values = layers[attention].cached_call(
                layers[names.norm_name(attention)](x), keys, values, start, allowed)
            x = x + y
            x = x + layers[feed_forward](layers[names.norm_name(feed_forward)](x))
            written.append((keys, values))
        return x, written

    @classmethod
    def cached_head(cls, layers, x):
        """Next-token logits: ``Output-Norm``, then the transposed ``Embedding-Token``."""
        return super().cached_head(layers, layers[names.OUTPUT_NORM](x))

    @classmethod
    def checkpoint_table(cls, num_hidden_layers):
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
    def head_rows(cls, config, with_pool, with_nsp, with_mlm, with_discriminator):
        return cls.norm_rows("output", names.OUTPUT_NORM, config.hidden_size, "H")
