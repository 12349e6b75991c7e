"""bert4keras's model object: a family builds its graph in named steps, layers made by name.

:class:`Transformer` is the object ``build_transformer_model(..., return_keras_model=False)``
returns. A family (``bert.py``, ``albert.py``...) subclasses it, as bert4keras's families
do, and a user makes a variant the same way::

    class MyBert(BERT):
        def apply_final_layers(self, inputs):
            return self.apply(inputs=inputs, layer=keras.layers.Dense, units=3, name="My-Head")

    model = build_transformer_model(config, model=MyBert)

:meth:`Transformer.apply` makes a layer once per name and reuses it (ALBERT's shared
layers are one name called twelve times). The class attributes say what a family is
without building it: the config's ``model_type``, its position kind, the heads it has;
the family's module adds its Google variable table (:meth:`Transformer.checkpoint_table`),
its Hugging Face layout (:class:`HuggingFaceLayout`) and its audit formulas.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Container, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import keras
import numpy as np
from numpy.typing import DTypeLike

from kerasbert.internals import inbound_layers, layer_of
from kerasbert.models import names
from kerasbert.models.attention_masks import mask_of
from kerasbert.models.kernels import Dropout, tied_logits
from kerasbert.models.layers import (
    AttentionBias,
    Concatenate1D,
    FeedForward,
    MultiHeadSelfAttention,
    built_activation,
    recompute_requested,
    truncated_normal,
)
from kerasbert.models.model import functional_model

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig
    from kerasbert.models.loading import LoadReport

#: A layer of a family's audit (its ``audit_rows``): ``(group, layer, formula, count)``.
AuditRow: TypeAlias = tuple[str, str, str, int]
#: The Google variables of one Hugging Face parameter: ``[(Google name, value)]``.
GoogleVariables: TypeAlias = list[tuple[str, np.ndarray]]
#: A recipe's ``(name, value) -> GoogleVariables`` (None: no Google counterpart).
HfVariables: TypeAlias = Callable[[str, np.ndarray], GoogleVariables | None]


#: What each of bert4keras's attention options needs of a family's attention, for the message
#: of a family that does not build it.
OPTION_NEEDS = {
    "residual_attention_scores": "the scores are passed from one MultiHeadSelfAttention "
                                 "over one sequence to the next, which its layers are not",
    "attention_caches": "a cache lies in front of the keys, where its attention's position "
                        "table (rotary, relative) does not reach",
}


@dataclasses.dataclass(frozen=True)
class HuggingFaceLayout:
    """Where one Hugging Face family keeps each weight, in Google's names
    (:func:`kerasbert.models.convert.google_name` reads it).

    Attributes:
        prefix: the base model's attribute (``"bert."``), optional in the file.
        scope: the Google scope of embeddings and encoder (``"bert"``, ``"electra"``).
        modules: Hugging Face module (after the prefix) -> Google scope.
        layer: the encoder layers' modules, ``index`` and ``module`` groups.
        layer_scope: the Google scope of layer ``{index}``.
        layer_modules: a layer's module -> its Google scope inside ``layer_scope``.
        plain: parameters stored as they are.
        ignored: buffers and copies of tied weights.
        optional: layers a model may come without (beyond the pooler), or ().
        config_keys: keys of its Hugging Face config that its Google config keeps besides
            ``embedding_size`` (ALBERT's groups), or ().
    """

    prefix: str
    scope: str
    modules: dict[str, str]
    layer: str
    layer_scope: str
    layer_modules: dict[str, str]
    plain: dict[str, str]
    ignored: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    config_keys: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class HuggingFaceRecipe:
    """A Hugging Face family whose weights do not map one to one on Google's names (GPT-2's
    fused query/key/value): how its config and each parameter become Google's.

    Attributes:
        prefix: the base model's attribute (``"transformer."``), optional in the file.
        scope: the Google scope of its variables (``"gpt"``).
        config: ``(values, path) -> dict``: a Google config of the Hugging Face one
            (raising ValueError on what the family does not build).
        variables: ``(name, value) -> [(Google name, value)]`` of a parameter (its name
            without the prefix), or None for one with no Google counterpart.
        ignored: regular expressions of parameters (without the prefix) left out on
            purpose: buffers, tied copies.
        model_type: the ``model_type`` of Hugging Face's config (``"openai-gpt"``).
        description: what to call such a model in a message (``"an OpenAI GPT"``);
            "": the family's :attr:`Transformer.checkpoint_description`.
        finish: ``(variables, values) -> None``, or None: completes the Google variables
            read (a dict) from what the Hugging Face config's ``values`` say (T5's output
            matrix, tied or scaled).
    """

    prefix: str
    scope: str
    config: Callable[[dict[str, Any], str], dict[str, Any]]
    variables: HfVariables
    ignored: tuple[str, ...] = ()
    model_type: str = ""
    finish: Callable[[dict[str, np.ndarray], dict[str, Any]], None] | None = None
    description: str = ""


@dataclasses.dataclass(frozen=True)
class NormCondition:
    """What a model's layer norms are conditioned on (bert4keras's ``layer_norm_cond*``
    keywords of ``build``).

    Attributes:
        tensor: the ``(batch, features)`` condition.
        hidden_size: the width of the dense layer each norm passes it through first, or None.
        hidden_act: that layer's activation.
    """

    tensor: Any
    hidden_size: int | None = None
    hidden_act: str | Callable[..., Any] = "linear"

    @classmethod
    def of(cls, transformer: Transformer, tensor: Any, hidden_size: int | None,
           hidden_act: str | Callable[..., Any] | None) -> NormCondition | None:
        """The condition ``build``'s keywords describe for ``transformer``, or None.

        Raises:
            ValueError: a hidden size or activation without a condition, or a condition for
                a family whose norms take none.
        """
        if tensor is None:
            given = [key for key, value in (("layer_norm_cond_hidden_size", hidden_size),
                                            ("layer_norm_cond_hidden_act", hidden_act))
                     if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)} given without layer_norm_cond (the "
                                 "tensor the layer norms are conditioned on)")
            return None
        if not transformer.conditional_norms:
            raise ValueError(f"layer_norm_cond: model={transformer.family!r} builds no "
                             "conditional layer norms (BERT, ALBERT, NEZHA, RoFormer, ELECTRA "
                             "and GPT do)")
        return cls(tensor, hidden_size, hidden_act or "linear")


def check_head(flag: str, value: Any) -> None:
    """Refuses a head keyword's value (``with_mlm``, ``with_pool``...) that is neither a
    switch (True / False, 1 / 0, None) nor an activation Keras knows, as bert4keras reads
    a string there: the head's activation (``with_mlm="linear"`` gives logits).

    Raises:
        ValueError: naming the keyword and its value (``with_mlm='Ture'``).
    """
    if value is None or isinstance(value, (bool, np.bool_)) or (
            isinstance(value, (int, np.integer)) and value in (0, 1)) or callable(value):
        return
    if isinstance(value, str):
        try:
            keras.activations.get(value)
            return
        except (ValueError, TypeError):
            pass
    raise ValueError(f"{flag}={value!r}: must be True or False, or the name of the head's "
                     "activation (an activation Keras knows, such as 'softmax' or 'linear')")


@dataclasses.dataclass
class Step:
    """One decoding step of a :meth:`Transformer.bound` model on new tokens, the argument
    its steps (``apply_embeddings``, ``apply_main_layers``, ``apply_final_layers``, T5's
    ``decode``) take: the family object keeps none of it. The heads give logits, their
    final activation left out.

    Attributes:
        caches: each attention layer's key/value cache by name (see
            :class:`~kerasbert.models.layers.MultiHeadSelfAttention`'s ``cache``); each
            layer's call puts its written cache in place of the one it was given.
        position_ids: the new tokens' positions.
        allowed: the attention mask over the cache's slots.
    """

    caches: dict[str, dict[str, Any]]
    position_ids: Any
    allowed: Any


class Transformer:
    """The model object of bert4keras: config, layers by name, the Keras model.

    Attributes (after :meth:`build`): ``model`` (the ``keras.Model``), ``layers``
    (``{name: layer}``), ``inputs`` / ``outputs`` (lists), ``input`` / ``output``
    (one tensor, or the list), ``config`` (the :class:`BertConfig`), and bert4keras's
    names for the config's values (``hidden_size``, ``dropout_rate``, ``max_position``,
    ``segment_vocab_size``...).

    Args:
        config: the :class:`kerasbert.models.config.BertConfig`.
        with_pool, with_nsp, with_mlm, with_discriminator: the heads (see
            :func:`kerasbert.build_transformer_model`).
        application: the attention mask: ``"encoder"``, ``"lm"``, ``"unilm"``, or a mask
            object of :mod:`kerasbert.models.attention_masks`.
        sequence_length: fixed input length, or None.
        keep_tokens, compound_tokens: as in bert4keras (see ``load_weights_from_checkpoint``).
        name: the Keras model's name (default: the family's).
        dtype: the layers' dtype policy; None: Keras's global one.
        family: the ``model=`` value it was built as (whose checkpoint names it reads).
        prefix: put before every layer's name, inputs included (``"Predecessor-"``): two
            models of the same family side by side; checkpoint names are unchanged.
        layers: ``{name: layer}`` shared with another model (its :attr:`layers`): a layer
            whose (prefixed) name is there is reused, not made; the dict gains this
            model's new layers.
        autoresize_weights: a checkpoint weight of another shape is resized to the model's
            (see :func:`kerasbert.models.loading.resize_weight`) instead of refused.
        residual_attention_scores: RealFormer's residual attention: each attention layer's
            scores are added to the next layer's (see :meth:`apply_attention`).
        recompute: in training, the attention and feed-forward layers' activations are
            computed again in the backward pass rather than kept; None: as ``RECOMPUTE`` in
            the environment says (bert4keras's switch), read when the model is built.

    Raises:
        ValueError: an ``application`` or ``residual_attention_scores`` the family does not
            build.
    """

    # What the family is, read without building (each family module sets its own).
    #: The ``model_type`` its configs carry.
    model_type = "bert"
    #: The Keras model's name when none is given.
    default_name = "bert"
    #: ``"absolute"`` (a learned table), ``"relative"`` (NEZHA) or ``"rotary"`` (RoFormer).
    position = "absolute"
    #: Embeddings may be narrower than the hidden size (``Embedding-Mapping``).
    factorised = False
    #: Whether its models take segment ids (``Input-Segment``) when the config has types.
    segment_inputs = True
    #: The heads the family has.
    head_flags: tuple[str, ...] = ("with_pool", "with_nsp", "with_mlm")
    #: Its Hugging Face layout (or :class:`HuggingFaceRecipe`), for ``kerasbert convert``;
    #: None: not convertible.
    hf_layout: HuggingFaceLayout | HuggingFaceRecipe | None = None
    #: Rules on the config keys this family's configs bring, checked on every config
    #: whatever family it is read for: ``(key, builds(value, values, family), why)``, where
    #: ``builds`` says whether ``family`` builds a model with that ``value`` (``values``: the
    #: whole config) and ``why`` ends the message of a refusal; see
    #: :func:`kerasbert.models.config.check_family`.
    config_rules: tuple[tuple[Any, ...], ...] = ()
    #: The ``application=`` values this family builds (bert4keras: ELECTRA is no LM).
    applications: tuple[str, ...] = ("encoder", "lm", "unilm", "prefix")
    #: A layer only this family's models have: a built model with it reads this family's
    #: checkpoint names (None: nothing tells it apart; a subclass that builds its parent's
    #: layers sets None, else it would take its parent's models).
    marker_layer: str | None = None
    #: How this family's checkpoint variables begin (a regular expression), where they differ
    #: from BERT's and from those of the family it subclasses (one that keeps its parent's
    #: pattern is named by its parent's).
    checkpoint_pattern: str | None = None
    #: What to call one of its checkpoints or models in a message (``"an ALBERT"``).
    checkpoint_description = "a BERT"
    #: Whether a checkpoint of BERT's encoder layers (``bert/encoder/layer_0/...``) that does
    #: not load is named a BERT checkpoint (ALBERT, ELECTRA: BERT's other names, or names
    #: like them, under their own layers).
    names_bert_checkpoints = False
    #: Whether its MLM head trains UniLM sequence-to-sequence and decodes it step by step
    #: (``--task seq2seq``), where its positions are absolute.
    unilm_seq2seq = False
    #: An encoder-decoder (T5): sequence-to-sequence without UniLM's mask.
    encoder_decoder = False
    #: Whether its layer norms can be conditioned on a tensor (``build(layer_norm_cond=...)``).
    conditional_norms = False
    #: The bert4keras attention options its graph takes (see :meth:`apply_attention`):
    #: ``"residual_attention_scores"`` where every attention layer is a
    #: :class:`MultiHeadSelfAttention` over one sequence, ``"attention_caches"`` where
    #: positions are absolute (a rotary or relative table spans the queries alone).
    attention_options: tuple[str, ...] = ("residual_attention_scores", "attention_caches")

    def __init__(self, config: BertConfig, with_pool: bool | str = False,
                 with_nsp: bool = False, with_mlm: bool | str = False,
                 with_discriminator: bool | str = False, application: str | Any = "encoder",
                 sequence_length: int | None = None, keep_tokens: Sequence[int] | None = None,
                 compound_tokens: Sequence[Any] | None = None, name: str | None = None,
                 dtype: str | keras.DTypePolicy | None = None,
                 family: str | None = None, prefix: str | None = None,
                 layers: dict[str, Any] | None = None, autoresize_weights: bool = False,
                 residual_attention_scores: bool = False,
                 recompute: bool | None = None) -> None:
        self.config = config
        self.attention_mask = mask_of(application)
        if self.attention_mask.application not in self.applications:
            raise ValueError(f"model={family or self.default_name!r} cannot be built with "
                             f"application={self.attention_mask.application!r} "
                             f"(supported: {', '.join(self.applications)})")
        for flag, value in (("with_pool", with_pool), ("with_nsp", with_nsp),
                            ("with_mlm", with_mlm), ("with_discriminator", with_discriminator)):
            check_head(flag, value)
        for key, given in (layers or {}).items():
            # bert4keras's dict is keyed by each layer's name: a key that is not its layer's
            # name (misspelt) would be passed over, and the layer made anew.
            if isinstance(given, keras.layers.Layer) and key != given.name:
                raise ValueError(f"layers: the key {key!r} holds the layer {given.name!r}; "
                                 "each key must be its layer's name (layers=other.layers)")
        if prefix is not None and (not isinstance(prefix, str) or "/" in prefix):
            raise ValueError(f"prefix={prefix!r}: must be a string that every layer's name "
                             "starts with (\"Predecessor-\"), without '/', which Keras "
                             "refuses in a layer's name")
        # bert4keras: a language model has the MLM head whether or not it was asked for.
        if self.attention_mask.application in ("lm", "unilm") and not with_mlm:
            with_mlm = True
        self.with_pool = with_pool or with_nsp
        self.with_nsp = with_nsp
        self.with_mlm = with_mlm
        self.with_discriminator = with_discriminator
        self.sequence_length = sequence_length
        self.keep_tokens = keep_tokens
        self.compound_tokens = compound_tokens
        self.name = name
        self.dtype = dtype
        self.family = family or self.default_name
        self.refuse_option("residual_attention_scores", residual_attention_scores)
        self.residual_attention_scores = bool(residual_attention_scores)
        self.recompute = recompute_requested() if recompute is None else bool(recompute)
        #: The last attention layer's scores, while the graph is made with residual scores.
        self.attention_scores: Any = None
        #: bert4keras's ``attention_caches`` (see :meth:`build`).
        self.attention_caches: dict[str, Sequence[Any]] = {}
        # The caller's dict itself: what this model makes is seen by the model it shares with.
        self.layers: dict[str, Any] = {} if layers is None else layers
        self.prefix = prefix or ""
        self.autoresize_weights = autoresize_weights
        self.attention_bias: Any = None
        self.position_bias: Any = None
        self.built = False
        self.model: keras.Model | None = None
        #: What the layer norms are conditioned on (see :meth:`build`), or None.
        self.norm_condition: NormCondition | None = None

    # ------------------------------------------------------- bert4keras's names
    vocab_size = property(lambda self: self.config.vocab_size)
    hidden_size = property(lambda self: self.config.hidden_size)
    num_hidden_layers = property(lambda self: self.config.num_hidden_layers)
    num_attention_heads = property(lambda self: self.config.num_attention_heads)
    intermediate_size = property(lambda self: self.config.intermediate_size)
    hidden_act = property(lambda self: built_activation(self.config.hidden_act))
    dropout_rate = property(lambda self: self.config.hidden_dropout_prob)
    attention_dropout_rate = property(lambda self: self.config.attention_probs_dropout_prob)
    embedding_size = property(lambda self: self.config.embedding_size)
    attention_head_size = property(lambda self: self.config.head_size)
    attention_key_size = property(lambda self: self.config.head_size)
    max_position = property(lambda self: self.config.max_position_embeddings)
    segment_vocab_size = property(
        lambda self: self.config.type_vocab_size if self.segment_inputs else 0)

    @property
    def initializer(self) -> keras.initializers.Initializer:
        """The initializer of every weight matrix: BERT's truncated normal with the
        config's ``initializer_range`` (bert4keras: 0.02)."""
        return truncated_normal(self.config.initializer_range)

    # ------------------------------------------------------------- building
    def prefixed(self, name: str) -> str:
        """``name`` as this model's layer is called: with :attr:`prefix` before it."""
        return self.prefix + name

    def layer(self, name: str) -> Any:
        """The layer made as ``name`` (bert4keras's name, without the prefix)."""
        return self.layers[self.prefixed(name)]

    def output_activation(self, x: Any, activation: Any, name: str) -> Any:
        """A head's last layer, the ``keras.layers.Activation`` ``name`` (a softmax over the
        vocabulary), computed in float32 under a float16 policy: in float16 a softmax over
        thousands of tokens rounds the small probabilities (below 6e-8) to 0, whose log the
        loss takes. bfloat16 has float32's range, and stays as it is (half the memory of
        the probabilities, the largest activation of a large vocabulary).

        Args:
            x: the logits.
            activation: the activation (``"softmax"``, a name or a function).
            name: the layer's name, as bert4keras's.

        Returns:
            the activation's output.
        """
        float16 = (self.dtype is not None
                   and keras.dtype_policies.get(self.dtype).compute_dtype == "float16")
        if float16:
            return self.apply(inputs=x, layer=keras.layers.Activation, activation=activation,
                              name=name, dtype="float32")
        return self.apply(inputs=x, layer=keras.layers.Activation, activation=activation,
                          name=name)

    def apply(self, inputs: Any = None, layer: Any = None,
              arguments: dict[str, Any] | None = None, step: Step | None = None,
              **kwargs: Any) -> Any:
        """Calls the layer named ``kwargs["name"]`` on ``inputs``, making it first (from
        ``layer`` and ``kwargs``) if no layer has that name yet: the same name reuses the
        same layer. A dropout of rate 0 is left out (``inputs`` come back), as in bert4keras.

        Args:
            inputs: a tensor or a list; None returns the layer itself, uncalled.
            layer: the layer class (``keras.layers.Dense``...), or ``keras.Input``.
            arguments: keyword arguments of the call (``{"reverse": True}``).
            step: decoding (see :class:`Step`): an attention layer named in its caches reads
                and writes its cache.
            **kwargs: the layer's constructor arguments; ``name`` is required.
        """
        if kwargs.get("name") is None:
            raise ValueError(f"Transformer.apply needs name= (making a {layer!r})")
        name = kwargs["name"] = self.prefixed(kwargs["name"])
        if isinstance(layer, type) and issubclass(layer, keras.layers.Dropout) and \
                not kwargs.get("rate"):
            return inputs
        if name not in self.layers:
            if layer is keras.Input:
                kwargs.setdefault("dtype", "int32")
            elif self.dtype is not None:
                kwargs.setdefault("dtype", self.dtype)
            if isinstance(layer, type) and issubclass(layer, MultiHeadSelfAttention) and \
                    self.residual_attention_scores:
                kwargs["return_scores"] = True
            if isinstance(layer, type) and issubclass(layer, (MultiHeadSelfAttention,
                                                              FeedForward)) and self.recompute:
                kwargs["recompute"] = True
            self.layers[name] = layer(**kwargs)
        if inputs is None:
            return self.layers[name]
        if step is not None and name in step.caches:
            output, step.caches[name] = self.layers[name](inputs, cache=step.caches[name],
                                                          **(arguments or {}))
            return output
        if isinstance(self.layers[name], MultiHeadSelfAttention) and step is None:
            return self.apply_attention(inputs, name, arguments)
        return self.layers[name](inputs, **(arguments or {}))

    def apply_attention(self, inputs: Any, name: str,
                        arguments: dict[str, Any] | None = None) -> Any:
        """Calls the attention layer ``name`` with bert4keras's attention options.

        With ``attention_caches`` naming it, its key and value caches are put in front of
        the hidden states its keys and values are projected from (``<name>-Cached-Key`` /
        ``-Value``; a cache without a padding mask is attended throughout). With residual
        attention scores, it is given the previous attention layer's scores as its score
        bias (under an attention mask, added to the mask's bias by ``<name>-Attention-Bias``)
        and its own are kept for the next. As in bert4keras, the scores passed on are the
        layer's own (scaled, before any bias and mask): they do not accumulate.

        Returns:
            the layer's output.
        """
        layer = self.layers[name]
        arguments = dict(arguments or {})
        if name in self.attention_caches:
            key_cache, value_cache = self.attention_caches[name]
            arguments["keys"], arguments["values"] = (
                self.apply(inputs=[cache, inputs], layer=Concatenate1D,
                           name=f"{name}-Cached-{part}")
                for cache, part in ((key_cache, "Key"), (value_cache, "Value")))
        if layer.return_scores and self.attention_scores is not None:
            allowed = arguments.pop("attention_mask", None)
            arguments["score_bias"] = self.attention_scores if allowed is None else self.apply(
                inputs=[allowed, self.attention_scores], layer=AttentionBias,
                name=f"{name}-Attention-Bias")  # the mask's bias and the scores: one bias
        output = layer(inputs, **arguments)
        if layer.return_scores:
            output, self.attention_scores = output
        return output

    def attention_arguments(self, inputs: Any = None,
                            step: Step | None = None) -> dict[str, Any]:
        """The attention layer's keyword arguments besides the hidden states ``inputs``:
        the family's ``position`` input (:meth:`compute_position_bias`) and the attention
        mask (:meth:`compute_attention_bias`; decoding: the step's), where there are any."""
        given = {"position": self.compute_position_bias(inputs),
                 "attention_mask": (self.compute_attention_bias() if step is None
                                    else step.allowed)}
        return {name: tensor for name, tensor in given.items() if tensor is not None}

    def refuse_option(self, option: str, value: Any) -> None:
        """Raises where ``option`` (one of bert4keras's attention options) is set and the
        family does not build it (see :attr:`attention_options`).

        Raises:
            ValueError: naming the option, the family and why.
        """
        if value in (None, False, {}):
            return
        if option not in self.attention_options:
            raise ValueError(f"{option}: not supported by model={self.family!r}: "
                             f"{OPTION_NEEDS[option]}")
        if option == "attention_caches" and self.attention_mask.application != "encoder":
            raise ValueError(
                f"attention_caches: not supported with application="
                f"{self.attention_mask.application!r} (its attention mask spans the tokens, "
                "not the caches in front of them); use application='encoder'")

    @classmethod
    def bound(cls, model: keras.Model, **options: Any) -> Transformer:
        """The family object over a built (or loaded) Keras model's layers, by name: its
        steps (:meth:`apply_embeddings`, :meth:`apply_main_layers`, the heads) run again on
        tensors and make no layer. Decoding runs the model this way, one forward path with
        the graph's, each step given a :class:`Step` (its caches, positions and mask).

        Args:
            model: the Keras model, built by this family.
            **options: the constructor's keywords (the heads to run).
        """
        layers = {layer.name: layer for layer in model.layers}
        transformer = cls(cls.config_of_layers(layers), **options)
        transformer.layers.update(layers)
        transformer.model, transformer.built = model, True
        return transformer

    @classmethod
    def config_of_layers(cls, layers: dict[str, keras.layers.Layer]) -> BertConfig:
        """What a model's layers say of its config, enough to run its steps again: the
        layer count and the widths that choose a step (segments, the embedding mapping)."""
        from kerasbert.models.config import BertConfig

        token = layers[names.EMBEDDING_TOKEN]
        segment = layers.get(names.EMBEDDING_SEGMENT)
        mapping = layers.get(names.EMBEDDING_MAPPING)
        return BertConfig(
            vocab_size=token.input_dim, num_hidden_layers=cls.count_layers(layers),
            num_attention_heads=1,
            hidden_size=mapping.units if mapping is not None else token.output_dim,
            intermediate_size=1, type_vocab_size=(
                segment.input_dim if segment else token.input_dim
                if names.shares_segment_table(layers) else 0),
            extra={"embedding_size": token.output_dim}, family=cls.default_name)

    def tied_output(self, x: Any, step: Step | None = None) -> Any:
        """``x`` through the transposed ``Embedding-Token`` (the language model's output
        matrix); decoding's rows read the table as it lies (:func:`kernels.tied_logits`)."""
        embedding = self.layer(names.EMBEDDING_TOKEN)
        if step is not None and len(x.shape) == 2:
            return tied_logits(x, embedding)
        return embedding(x, reverse=True)

    def dropout(self, inputs: Any, name: str, rate: float | None = None) -> Any:
        """``inputs`` through a dropout named ``name`` (the config's rate by default)."""
        rate = self.config.hidden_dropout_prob if rate is None else rate
        return self.apply(inputs=inputs, layer=Dropout, rate=rate, name=name)

    def build(self, attention_caches: dict[str, Sequence[Any]] | None = None,
              layer_norm_cond: Any = None, layer_norm_cond_hidden_size: int | None = None,
              layer_norm_cond_hidden_act: str | Callable[..., Any] | None = None,
              additional_input_layers: Any = None, **kwargs: Any) -> None:
        """Makes the graph: inputs, :meth:`call`, outputs, ``self.model``. The keywords are
        bert4keras's, in its order.

        Args:
            attention_caches: bert4keras's ``{attention layer name: (key cache, value
                cache)}``: symbolic ``(batch, cached, hidden)`` tensors put in front of the
                states that layer's keys and values are projected from (see
                :meth:`apply_attention`). The ``keras.Input`` s they come from become inputs
                of the model, after its own (and ``additional_input_layers``), in their order
                of first use.
            layer_norm_cond: a ``(batch, features)`` tensor (a label's embedding, an image's
                features) that every layer norm is conditioned on (see
                :class:`kerasbert.models.layers.ConditionalLayerNorm`); None: plain norms.
            layer_norm_cond_hidden_size: the width of a dense layer (``hidden_dense``) each
                norm passes the condition through first; None: none.
            layer_norm_cond_hidden_act: that dense layer's activation (default linear).
            additional_input_layers: an ``Input`` or a list of them appended to the model's
                inputs (those ``layer_norm_cond`` is computed from).

        Raises:
            ValueError: a keyword this object does not take, caches the family does not
                build or that name no attention layer, a condition's hidden layer without a
                condition, or a condition given to a family whose norms take none.
        """
        if kwargs:
            raise ValueError(f"Transformer.build: {', '.join(sorted(kwargs))} not supported")
        if self.built:
            return
        self.refuse_option("attention_caches", attention_caches)
        self.attention_caches = dict(attention_caches or {})
        self.norm_condition = NormCondition.of(self, layer_norm_cond,
                                               layer_norm_cond_hidden_size,
                                               layer_norm_cond_hidden_act)
        own = self.get_inputs()
        own = list(own) if isinstance(own, (list, tuple)) else [own]
        self.set_inputs(own, additional_input_layers)
        # The steps take the family's own inputs; additional ones feed the condition.
        self.set_outputs(self.call(own))
        self.attention_scores = None
        self.set_inputs(self.inputs + self.cache_inputs())
        self.model = functional_model(self.input if len(self.inputs) > 1 else self.inputs[0],
                                      self.output, name=self.name or self.default_name)
        for layer in self.model.layers:  # heads made by functions, not by apply
            self.layers.setdefault(layer.name, layer)
        self.built = True

    def cache_inputs(self) -> list[keras.KerasTensor]:
        """The ``keras.Input`` s the attention caches come from, each once, in their order
        of first use, that are not inputs of the model yet.

        Raises:
            ValueError: a cache named after no attention layer of the model, or one that is
                no symbolic tensor.
        """
        found: list[keras.KerasTensor] = []
        for name, caches in self.attention_caches.items():
            layer = self.layers.get(name)
            if not isinstance(layer, MultiHeadSelfAttention):
                raise ValueError(f"attention_caches names {name!r}, which is no attention "
                                 "layer of this model (bert4keras's names: "
                                 f"{names.attention_name(0)!r}...)")
            for cache in caches:
                for tensor in source_inputs(cache, name):
                    if not any(tensor is x for x in [*self.inputs, *found]):
                        found.append(tensor)
        return found

    def call(self, inputs: list[keras.KerasTensor]) -> keras.KerasTensor | list[keras.KerasTensor]:
        """Embeddings, then each encoder layer, then the heads."""
        outputs = self.apply_embeddings(inputs)
        for index in range(self.num_hidden_layers):
            outputs = self.apply_main_layers(outputs, index)
        return self.apply_final_layers(outputs)

    def get_inputs(self) -> keras.KerasTensor | list[keras.KerasTensor]:
        raise NotImplementedError

    def apply_embeddings(self, inputs: list[keras.KerasTensor],
                         step: Step | None = None) -> keras.KerasTensor:
        raise NotImplementedError

    def apply_main_layers(self, inputs: keras.KerasTensor, index: int,
                          step: Step | None = None) -> keras.KerasTensor:
        raise NotImplementedError

    def apply_final_layers(self, inputs: keras.KerasTensor, step: Step | None = None
                           ) -> keras.KerasTensor | list[keras.KerasTensor]:
        raise NotImplementedError

    def norm_inputs(self, x: Any) -> Any:
        """What a layer norm is called on: ``x``, or ``[x, condition]`` in a model built with
        ``layer_norm_cond``."""
        return x if self.norm_condition is None else [x, self.norm_condition.tensor]

    def compute_attention_bias(self, inputs: Any = None) -> keras.KerasTensor | None:
        """The attention mask every layer takes besides padding (None: padding alone),
        made once from :attr:`attention_mask`."""
        if self.attention_bias is None:
            self.attention_bias = self.attention_mask.apply(self)
        return self.attention_bias

    def compute_position_bias(self, inputs: Any = None) -> Any:
        """The position table every attention layer takes (NEZHA, RoFormer), or None."""
        return self.position_bias

    def set_inputs(self, inputs: keras.KerasTensor | Sequence[keras.KerasTensor],
                   additional_input_layers: Any = None) -> None:
        """The model's inputs: the family's, then ``additional_input_layers`` (one or a
        list)."""
        self.inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if additional_input_layers is not None:
            self.inputs += (list(additional_input_layers)
                            if isinstance(additional_input_layers, (list, tuple))
                            else [additional_input_layers])
        self.input = self.inputs if len(self.inputs) > 1 else self.inputs[0]

    def set_outputs(self, outputs: keras.KerasTensor | Sequence[keras.KerasTensor]) -> None:
        self.outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        self.output = self.outputs if len(self.outputs) > 1 else self.outputs[0]

    # ------------------------------------------------------------ checkpoints
    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """``{layer name: {weight attribute: Google variable name}}`` of the family."""
        raise NotImplementedError

    @classmethod
    def claims_layers(cls, layers: Container[str]) -> bool:
        """Whether a built model's layer names (``layers``) are this family's: its
        :attr:`marker_layer` is among them (see
        :func:`kerasbert.models.loading.table_family`)."""
        return cls.marker_layer is not None and cls.marker_layer in layers

    @classmethod
    def claims_checkpoint(cls, layers: Collection[str], available: Collection[str]) -> bool:
        """Whether a model whose layers no family claims (BERT's names) reads its weights
        under this family's names, by what the checkpoint holds (``available``, its
        variable names); no family's claim: BERT's names."""
        return False

    @classmethod
    def check_hf_config(cls, config: BertConfig, path: str) -> None:
        """Raises ValueError where a Hugging Face config read for this family (``config``,
        from ``path``) describes a model it does not build, beyond what the config's own
        checks refuse (see :func:`kerasbert.models.convert.convert_hf_to_google`)."""

    @classmethod
    def claims_config(cls, values: dict[str, Any]) -> bool:
        """Whether a config without ``model_type`` (``values``) is this family's, by its
        own keys (see :func:`kerasbert.models.config.family_of_config`)."""
        return False

    @classmethod
    def count_layers(cls, layers: Container[str]) -> int:
        """How many encoder layers a built model has, from its layer names (``layers``):
        the size its :meth:`checkpoint_table` is made for. An encoder-decoder (T5) names its
        encoder's layers ``Encoder-Transformer-i-...``."""
        count = 0
        while names.attention_name(count) in layers or names.side_name(
                names.ENCODER, names.attention_name(count)) in layers:
            count += 1
        return count

    def variable_mapping(self) -> dict[str, dict[str, str]]:
        """This model's table: ``{layer name: {weight attribute: Google variable name}}``.

        bert4keras lists each layer's names in the order of its weights; here each name is
        keyed by the weight's attribute (Keras 3 makes a norm's ``gamma`` before ``beta``).
        """
        return self.checkpoint_table(self.num_hidden_layers)

    def load_weights_from_checkpoint(
            self, checkpoint: str | os.PathLike[str] | dict[str, np.ndarray],
            mapping: dict[str, dict[str, str]] | None = None, strict: bool = True,
            streaming: bool = False) -> LoadReport:
        """Loads a Google checkpoint by this model's table (or ``mapping``, by bert4keras's
        layer names: the :attr:`prefix` is put before them), with its keep / compound tokens
        and :attr:`autoresize_weights`; see :func:`kerasbert.models.loading.load_checkpoint`.

        Returns:
            the :class:`LoadReport` (also kept as ``self.load_report``).
        """
        from kerasbert.models.loading import load_checkpoint

        self.load_report = load_checkpoint(
            self.model, checkpoint, strict=strict, keep_tokens=self.keep_tokens,
            compound_tokens=self.compound_tokens, streaming=streaming, family=self.family,
            mapping=mapping or self.variable_mapping(), prefix=self.prefix,
            autoresize=self.autoresize_weights)
        return self.load_report

    def save_weights_as_checkpoint(self, filename: str | os.PathLike[str],
                                   mapping: dict[str, dict[str, str]] | None = None,
                                   dtype: DTypeLike | None = None) -> list[str]:
        """Writes the weights under Google's names, by this model's table (or
        ``mapping``, by bert4keras's layer names: the :attr:`prefix` is put before them);
        see :func:`kerasbert.models.loading.save_weights_as_checkpoint`.

        Returns:
            the sorted names written.
        """
        from kerasbert.models.loading import save_weights_as_checkpoint

        return save_weights_as_checkpoint(self.model, filename, dtype=dtype, family=self.family,
                                          mapping=mapping or self.variable_mapping(),
                                          prefix=self.prefix)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.family} L={self.num_hidden_layers} "
                f"H={self.hidden_size} application={self.attention_mask.application!r}>")


def source_inputs(tensor: Any, name: str) -> list[keras.KerasTensor]:
    """The ``keras.Input`` s a symbolic ``tensor`` is made from (itself, if one), in the
    order the graph reaches them; ``name``: the attention layer it is a cache of.

    Raises:
        ValueError: ``tensor`` is no symbolic Keras tensor.
    """
    found: list[keras.KerasTensor] = []
    todo = [layer_of(tensor)]
    if todo[0] is None:
        raise ValueError(f"attention_caches[{name!r}]: a cache is a symbolic tensor "
                         f"(a keras.Input, or made from one), not {type(tensor).__name__}")
    while todo:
        layer = todo.pop(0)
        if isinstance(layer, keras.layers.InputLayer):
            if not any(layer.output is x for x in found):
                found.append(layer.output)
        else:
            todo.extend(inbound_layers(layer))
    return found


def layer_names(index: int, shared: bool = False) -> tuple[str, str]:
    """The attention and feed-forward names of encoder layer ``index`` (ALBERT: shared)."""
    if shared:
        return names.SHARED_ATTENTION, names.SHARED_FEED_FORWARD
    return names.attention_name(index), names.feed_forward_name(index)
