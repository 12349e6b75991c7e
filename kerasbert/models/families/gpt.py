"""GPT as bert4keras builds it (``model="gpt"``): BERT's layers under a causal mask, no
embedding norm, and a language-model head that is the tied token embedding.

Its checkpoints store BERT's variables under ``gpt/`` with ``encoder`` read as
``transformer`` (``gpt/transformer/layer_0/attention/self/query/kernel``), as bert4keras
0.11.5's ``GPT`` reads them. Every token sees
itself and the tokens before it (:class:`kerasbert.models.attention_masks.Causal`, the
``Attention-LM-Mask`` layer); the output is ``LM-Activation``, the next-token softmax of
each position (``final_activation="linear"`` gives logits).

Hugging Face's OpenAI GPT (``OpenAIGPTModel``, ``OpenAIGPTLMHeadModel``: the same post-norm
layers, no segments) converts to these names (``kerasbert convert --from-hf``); its
``Conv1D`` weights are ``[in, out]`` and ``c_attn`` holds query, key and value side by side,
as GPT-2's.

Audit: BERT's rows without ``Embedding-Norm`` and without heads (the output matrix is
``Embedding-Token``, counted once).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from kerasbert.models import names
from kerasbert.models.attention_masks import Causal
from kerasbert.models.families.base import (
    AuditRow,
    GoogleVariables,
    HfVariables,
    HuggingFaceRecipe,
    Step,
)
from kerasbert.models.families.bert import BERT

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

# ------------------------------------ Hugging Face's Conv1D families (OpenAI GPT, GPT-2)
HF_NORM = {"weight": "gamma", "bias": "beta"}
HF_LAYER = re.compile(r"h\.(\d+)\.(.+)\.(weight|bias)")
#: What these families' Hugging Face files hold besides the weights: the causal mask's
#: buffers (older files) and the LM head, tied to the token embedding.
HF_IGNORED = (r"lm_head\.weight", r"h\.\d+\.attn\.(bias|masked_bias)", r"position_ids")


def conv1d_config(values: dict[str, Any], path: str, model_type: str,
                  defaults: dict[str, Any]) -> dict[str, Any]:
    """The sizes of a Hugging Face OpenAI GPT / GPT-2 config as Google keys.

    Raises:
        ValueError: a size missing, or a key of ``defaults`` with another value (a model
            this family does not build).
    """
    for key, default in defaults.items():
        if values.get(key, default) != default:
            raise ValueError(f"{key} ({values[key]!r}) in {path}: kerasbert's {model_type} is "
                             f"built with {key}={default!r}")
    missing = [key for key in ("vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
               if key not in values]
    if missing:
        raise ValueError(f"{missing[0]} in {path}: missing; a {model_type} config.json has "
                         "vocab_size, n_embd, n_layer, n_head and n_positions")
    return {"model_type": model_type, "vocab_size": values["vocab_size"],
            "hidden_size": values["n_embd"], "num_hidden_layers": values["n_layer"],
            "num_attention_heads": values["n_head"],
            "max_position_embeddings": values["n_positions"], "type_vocab_size": 0,
            "hidden_dropout_prob": values.get("resid_pdrop", 0.1),
            "attention_probs_dropout_prob": values.get("attn_pdrop", 0.1),
            "initializer_range": values.get("initializer_range", 0.02)}


def conv1d_variables(embeddings: dict[str, str], final_norms: dict[str, str],
                     layer_modules: dict[str, str]) -> HfVariables:
    """``(name, value) -> [(Google name, value)]`` for a Hugging Face family of ``Conv1D``
    layers (None for a parameter it does not know).

    Args:
        embeddings: module -> Google variable of its ``weight`` (``{"wte": ...}``).
        final_norms: module -> Google scope of a norm outside the layers (``{"ln_f": ...}``).
        layer_modules: a layer's module -> its Google scope inside ``.../layer_{i}``;
            ``attn.c_attn`` is split three ways into ``attention/self/{query,key,value}``.

    Example:
        >>> split = conv1d_variables({}, {}, {})("h.0.attn.c_attn.bias", np.zeros(48))
        >>> for name, value in split:
        ...     print(name, value.shape)
        gpt/transformer/layer_0/attention/self/query/bias (16,)
        gpt/transformer/layer_0/attention/self/key/bias (16,)
        gpt/transformer/layer_0/attention/self/value/bias (16,)
    """
    def variables(name: str, value: np.ndarray) -> GoogleVariables | None:
        module, _, parameter = name.rpartition(".")
        if module in embeddings:
            return [(embeddings[module], value)] if parameter == "weight" else None
        if module in final_norms:
            return [(f"{final_norms[module]}/{HF_NORM[parameter]}", value)] \
                if parameter in HF_NORM else None
        found = HF_LAYER.fullmatch(name)
        if found is None:
            return None
        index, module, parameter = found.groups()
        scope = f"gpt/transformer/layer_{index}"
        kind = "kernel" if parameter == "weight" else "bias"
        if module == "attn.c_attn":
            parts = np.split(value, 3, axis=-1)
            return [(f"{scope}/attention/self/{projection}/{kind}", part)
                    for projection, part in zip(("query", "key", "value"), parts)]
        if module not in layer_modules:
            return None
        if "LayerNorm" in layer_modules[module]:
            return [(f"{scope}/{layer_modules[module]}/{HF_NORM[parameter]}", value)]
        return [(f"{scope}/{layer_modules[module]}/{kind}", value)]  # Conv1D: [in, out]
    return variables


def hf_config(values: dict[str, Any], path: str) -> dict[str, Any]:
    """The Google config of a Hugging Face OpenAI GPT ``config.json``'s values (its
    ``afn: "gelu"`` is the tanh approximation in transformers' code).

    Example:
        >>> hf_config({"vocab_size": 40478, "n_embd": 768, "n_layer": 12, "n_head": 12,
        ...            "n_positions": 512}, "x")["hidden_act"]
        'gelu_new'
    """
    afn = values.get("afn", "gelu")
    return {**conv1d_config(values, path, "gpt", {}),
            "intermediate_size": 4 * values["n_embd"],
            "hidden_act": {"gelu": "gelu_new", "swish": "silu"}.get(afn, afn),
            "layer_norm_eps": values.get("layer_norm_epsilon", 1e-5)}


#: Each Hugging Face OpenAI GPT parameter's Google variables (see :func:`conv1d_variables`).
hf_variables = conv1d_variables(
    {"tokens_embed": "gpt/embeddings/word_embeddings",
     "positions_embed": "gpt/embeddings/position_embeddings"}, {},
    {"attn.c_proj": "attention/output/dense", "ln_1": "attention/output/LayerNorm",
     "mlp.c_fc": "intermediate/dense", "mlp.c_proj": "output/dense",
     "ln_2": "output/LayerNorm"})


class GPT(BERT):
    """GPT (``model="gpt"``): always a language model, as bert4keras's ``GPT``."""

    model_type = "gpt"
    default_name = "gpt"
    factorised = True
    head_flags = ()
    hf_layout = HuggingFaceRecipe("transformer.", "gpt", hf_config, hf_variables,
                                  HF_IGNORED, model_type="openai-gpt",
                                  description="an OpenAI GPT")
    marker_layer = names.LM_ACTIVATION
    checkpoint_pattern = r"gpt/"
    checkpoint_description = "a GPT"
    masked_lm = False
    unilm_seq2seq = False  # a language model: its head is no MLM head
    applications: tuple[str, ...] = ("encoder", "lm", "unilm")

    def __init__(self, config: BertConfig, final_activation: str = "softmax",
                 application: str | Any = "encoder", **kwargs: Any) -> None:
        # bert4keras's GPT is a language model whatever application= says, but UniLM's.
        if application == "encoder":
            application = Causal()
        super().__init__(config, application=application, **kwargs)
        self.with_mlm = False  # the LM head is the tied embedding below, not BERT's MLM
        self.final_activation = final_activation

    def token_and_position(self, inputs: list[keras.KerasTensor],
                           step: Step | None = None) -> Any:
        """``Embedding-Token`` (+ ``Embedding-Segment``) + ``Embedding-Position``, added."""
        return self.position_embedding(self.token_and_segment(inputs), step)

    def mapped(self, x: Any) -> Any:
        """``x`` mapped to the hidden size where the embeddings are narrower."""
        if self.embedding_size != self.hidden_size:
            return self.dense(x, self.hidden_size, names.EMBEDDING_MAPPING)
        return x

    def embedding_norm(self, x: Any) -> Any:
        """GPT adds the embeddings and drops out; it has no ``Embedding-Norm``."""
        return self.dropout(x, names.EMBEDDING_DROPOUT)

    def heads(self, x: Any, step: Step | None = None) -> list[Any]:
        """``LM-Activation`` over the transposed ``Embedding-Token``."""
        x = self.tied_output(x, step)
        if step is not None:  # the logits
            return [x]
        return [self.output_activation(x, self.final_activation, names.LM_ACTIVATION)]

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
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
    def norm_rows(cls, group: str, layer: str, width: int, letter: str) -> list[AuditRow]:
        return [] if layer == names.EMBEDDING_NORM else super().norm_rows(
            group, layer, width, letter)

    @classmethod
    def head_rows(cls, config: BertConfig, with_pool: bool | str, with_nsp: bool,
                  with_mlm: bool | str, with_discriminator: bool | str) -> list[AuditRow]:
        return []
