"""GPT as bert4keras builds it (``model="gpt"``): BERT's layers under a causal mask, no
embedding norm, and a language-model head that is the tied token embedding.

Its checkpoints store BERT's variables under ``gpt/`` with ``encoder`` read as
``transformer`` (``gpt/transformer/layer_0/attention/self/query/kernel``), as bert4keras
0.11.5's ``GPT`` reads them. Every token sees
itself and the tokens before it (:class:`kerasbert.models.attention_masks.Causal`, the
``Attention-LM-Mask`` layer); the output is ``LM-Activation``, the next-token softmax of
each position (``final_activation="linear"`` gives logits).

Audit: BERT's rows without ``Embedding-Norm`` and without heads (the output matrix is
``Embedding-Token``, counted once).
"""

import keras

from kerasbert.models import names
from kerasbert.models.attention_masks import Causal
from kerasbert.models.families.bert import BERT
from kerasbert.models.layers import PositionEmbedding


class GPT(BERT):
    """GPT (``model="gpt"``): always a language model, as bert4keras's ``GPT``."""

    model_type = "gpt"
    default_name = "gpt"
    factorised = True
    head_flags = ()
    hf_layout = None  # Hugging Face's OpenAI GPT is another layout (Conv1D weights)
    marker_layer = names.LM_ACTIVATION
    checkpoint_pattern = r"gpt/"
    checkpoint_description = "a GPT"
    masked_lm = False
    applications = ("encoder", "lm", "unilm")

    def __init__(self, config, final_activation="softmax", application="encoder", **kwargs):
        # bert4keras's GPT is a language model whatever application= says, but UniLM's.
        if application == "encoder":
            application = Causal()
        super().__init__(config, application=application, **kwargs)
        self.with_mlm = False  # the LM head is the tied embedding below, not BERT's MLM
        self.final_activation = final_activation

    def token_and_position(self, inputs):
        """``Embedding-Token`` (+ ``Embedding-Segment``) + ``Embedding-Position``, added."""
        x = self.token_and_segment(inputs)
        return self.apply(inputs=x, layer=PositionEmbedding, max_position=self.max_position,
                          initializer_range=self.config.initializer_range,
                          name=names.EMBEDDING_POSITION)

    def mapped(self, x):
        """``x`` mapped to the hidden size where the embeddings are narrower."""
        if self.embedding_size != self.hidden_size:
            return self.dense(x, self.hidden_size, names.EMBEDDING_MAPPING)
        return x

    def embedding_norm(self, x):
        """GPT adds the embeddings and drops out; it has no ``Embedding-Norm``."""
        return self.dropout(x, names.EMBEDDING_DROPOUT)

    def heads(self, x):
        """``LM-Activation`` over the transposed ``Embedding-Token``."""
        x = self.layers[names.EMBEDDING_TOKEN](x, reverse=True)
        return [self.apply(inputs=x, layer=keras.layers.Activation,
                           activation=self.final_activation, name=names.LM_ACTIVATION)]

    @classmethod
    def cached_head(cls, layers, x):
        """Next-token logits: the transposed ``Embedding-Token`` (``LM-Activation`` left out)."""
        return layers[names.EMBEDDING_TOKEN](x, reverse=True)

    @classmethod
    def checkpoint_table(cls, num_hidden_layers):
        """BERT's table under ``gpt/``, ``encoder`` read as ``transformer``.

        Example:
            >>> GPT.checkpoint_table(1)["Transformer-0-FeedForward"]["output_bias"]
            'gpt/transformer/layer_0/output/dense/bias'
        """
        return {layer: {attribute: name.replace("bert/", "gpt/", 1).replace(
                    "/encoder/", "/transformer/", 1) for attribute, name in weights.items()}
                for layer, weights in BERT.checkpoint_table(num_hidden_layers).items()
                if layer != names.EMBEDDING_NORM and not layer.startswith(("MLM-", "NSP-"))
                and layer not in (names.POOLER_DENSE, names.SPAN_DENSE)}

    @classmethod
    def norm_rows(cls, group, layer, width, letter):
        return [] if layer == names.EMBEDDING_NORM else super().norm_rows(
            group, layer, width, letter)

    @classmethod
    def head_rows(cls, config, with_pool, with_nsp, with_mlm, with_discriminator):
        return []
