"""``build_transformer_model``: a config, a model family and a checkpoint make one model.

The bert4keras one-liner. Each family is a class in :mod:`kerasbert.models.families`
(registered in :data:`~kerasbert.models.families.FAMILIES`), which knows its graph and its
checkpoint table; ``return_keras_model=False`` returns that object (bert4keras's
``Transformer``). Every keyword of bert4keras 0.11.5's ``build_transformer_model`` either
works with its meaning or is refused by name (:data:`REFUSED`), never dropped.

bert4keras's class decorators are here too: :func:`extend_with_language_model` and
:func:`extend_with_unified_language_model` give a family class whose default
``application=`` is ``"lm"`` / ``"unilm"`` (the masks of
:mod:`kerasbert.models.attention_masks`), through the mixins :class:`LM_Mask` and
:class:`UniLM_Mask`.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kerasbert.models import names
from kerasbert.models.attention_masks import Causal, Mask, UniLM, mask_of
from kerasbert.models.bert import make_transformer
from kerasbert.models.config import BertConfig, check_config_keys, known_keys, nearest
from kerasbert.models.deferred import deferred_weights, forget, settle
from kerasbert.models.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    family_class,
    registered_name,
    variant_of,
)
from kerasbert.models.families.base import Transformer

if TYPE_CHECKING:  # annotations only
    import keras
    import numpy as np

__all__ = ["REFUSED", "LM_Mask", "Transformer", "UniLM_Mask", "build_transformer_model",
           "extend_with_language_model", "extend_with_unified_language_model", "resolve_config"]

#: bert4keras keywords kerasbert does not build -> what to do instead. Each is refused by
#: name (a ValueError), since dropping it would build another model than the one asked for.
#: Every keyword of bert4keras 0.11.5 is built now; a family refuses what means nothing to
#: it by name (``Transformer.refuse_option``, a family's own checks).
REFUSED: dict[str, str] = {}
#: bert4keras keywords of ``Transformer.build`` that ``build_transformer_model`` hands on.
BUILD_KEYWORDS = ("layer_norm_cond", "layer_norm_cond_hidden_size",
                  "layer_norm_cond_hidden_act", "additional_input_layers")
#: bert4keras keywords whose only supported value is the one BERT's config implies.
FIXED = {
    "attention_head_size": lambda config: config.head_size,
    "attention_key_size": lambda config: config.head_size,
}
#: bert4keras's keywords of the model object itself (:class:`Transformer`), passed on to it.
MODEL_OPTIONS = ("prefix", "layers", "autoresize_weights")
#: bert4keras's ``ignore_invalid_weights=True`` loads what fits: kerasbert's ``strict=False``.
LOAD_ALIASES = {"ignore_invalid_weights": "strict"}


def build_transformer_model(
        config_path: str | os.PathLike[str] | BertConfig | dict[str, Any] | None = None,
        checkpoint_path: str | os.PathLike[str] | dict[str, np.ndarray] | None = None,
        model: str | type[Transformer] | None = None, with_pool: bool | str = False,
        with_nsp: bool = False, with_mlm: bool | str = False,
        keep_tokens: Sequence[int] | None = None, return_keras_model: bool = True,
        compound_tokens: Sequence[Any] | None = None, sequence_length: int | None = None,
        name: str | None = None, strict: bool | None = None,
        dtype: str | keras.DTypePolicy | None = None, with_discriminator: bool | str = False,
        application: str | Any = "encoder", residual_attention_scores: bool = False,
        attention_caches: dict[str, Sequence[Any]] | None = None,
        recompute: bool | None = None, lora_rank: int | None = None,
        lora_targets: str | Sequence[str] | None = None,
        **overrides: Any) -> keras.Model | Transformer:
    """Builds a BERT-family model from its config, bert4keras style.

    Args:
        config_path: a ``bert_config.json`` / Hugging Face ``config.json`` path, a
            :class:`BertConfig`, a dict of Google keys, or a preset's name
            (``"chinese-roberta-wwm-ext"``, :mod:`kerasbert.presets`): its cached config
            and checkpoint, downloaded on first use.
        checkpoint_path: a Google checkpoint to load: a prefix
            (``.../bert_model.ckpt``), a directory holding one, or a dict of arrays.
        model: the family, as bert4keras names it: ``"bert"``, ``"roberta"`` (BERT's
            graph), ``"albert"``, ``"albert_unshared"``, ``"nezha"``, ``"roformer"``,
            ``"roformer_v2"``, ``"electra"``, ``"gpt"``, ``"gpt2"`` or ``"gpt2_ml"``; a
            subclass of one (bert4keras's way of making a variant); None: the one the
            config names (``model_type``, ALBERT's group keys), else BERT.
        with_pool, with_nsp, with_mlm: heads, see :func:`kerasbert.build_bert`.
        with_discriminator: ELECTRA's head (True: sigmoid).
        application: the attention mask, as in bert4keras: ``"encoder"`` (bidirectional),
            ``"lm"`` (causal: a language model) or ``"unilm"`` (seq2seq: segment 0 the
            source, segment 1 the target); ``"lm"`` and ``"unilm"`` add the MLM head, as in
            bert4keras. A mask object of :mod:`kerasbert.models.attention_masks` (e.g.
            ``PrefixLM(16)``) works too.
        keep_tokens: token ids to keep from the checkpoint vocabulary (the vocabulary
            becomes ``len(keep_tokens)``).
        return_keras_model: return the ``keras.Model`` (default) or the family's
            :class:`~kerasbert.models.families.base.Transformer` (``.model``, ``.layers``,
            ``.initializer``, ``.apply``, ``.variable_mapping()``, ``.load_report``...).
        compound_tokens: extra tokens, each a list of existing ids whose embeddings are
            averaged; they are appended to the vocabulary.
        sequence_length: fixed input length, or None.
        name: the model's name.
        strict: with a checkpoint: None (default) raises on a missing encoder variable or
            any shape mismatch, and a head asked for (``with_pool``, ``with_nsp``,
            ``with_mlm``, ``with_discriminator``) whose variables the checkpoint lacks is
            initialised, with one warning naming them (the checkpoint is only an encoder's);
            True raises on any missing variable; False loads what fits (see
            ``Transformer.load_report``). bert4keras's ``ignore_invalid_weights=True``
            means False.
        dtype: the dtype policy of the layers (``"mixed_bfloat16"``, ``"bfloat16"``);
            None: Keras's global policy. Nothing global is changed.
        residual_attention_scores: RealFormer's residual attention, as bert4keras builds
            it: each attention layer adds the previous one's scores (scaled, before masks)
            to its own (under an attention mask, through ``<layer>-Attention-Bias``). Not
            for ``"t5"`` and ``"gau_alpha"``.
        attention_caches: ``{attention layer name: (key cache, value cache)}``: symbolic
            ``(batch, cached, hidden)`` tensors (``keras.Input`` s, or made from them) put
            in front of the hidden states that layer's keys and values are projected from
            (``<layer>-Cached-Key`` / ``-Value``); a cache without a padding mask is
            attended throughout. Their ``keras.Input`` s become inputs of the model after
            its own. Encoders with absolute positions only (``application="encoder"``).
        recompute: in training, the activations of every ``MultiHeadSelfAttention`` and
            ``FeedForward`` layer are computed again in the backward pass rather than kept
            (less memory, more time; the same gradients, dropout masks included). None: as
            ``RECOMPUTE`` in the environment says (``RECOMPUTE=1``: bert4keras's switch),
            read when the model is built. Saved with the model.
        lora_rank: LoRA adapters of this rank beside the ``lora_targets`` projections
            (None: ``("query", "value")``), the rest frozen, once the checkpoint is loaded
            (:func:`kerasbert.enable_lora`); a head put on the model afterwards trains.
        **overrides: config keys to replace (``num_hidden_layers=2``, ``dropout_rate=0``...),
            keywords a family's class takes (GPT's ``final_activation``; the position and
            segment options of BERT and the families built on it:
            ``custom_position_ids=True`` adds ``Input-Position``,
            ``hierarchical_position=True`` (or alpha) reads a position table past its end,
            ``shared_segment_embeddings=True`` reads segment ids through
            ``Embedding-Token``), and those of bert4keras's ``Transformer.build``:
            ``layer_norm_cond`` (a ``(batch, features)`` tensor every layer norm is
            conditioned on), ``layer_norm_cond_hidden_size``, ``layer_norm_cond_hidden_act``
            and ``additional_input_layers`` (inputs appended to the model's, those the
            condition is computed from); and bert4keras's keywords of the model object
            (see :class:`Transformer`): ``prefix="Predecessor-"`` names every layer with it
            (the checkpoint's names unchanged), ``layers=other.layers`` reuses another
            model's layers of the same names, ``autoresize_weights=True`` resizes
            checkpoint weights of another shape to the model's.

    Returns:
        a ``keras.Model`` (or the family's :class:`Transformer` holding it).

    Raises:
        ValueError: unknown ``model`` or ``application``, a bert4keras keyword kerasbert
            does not build (named, with what to use instead) or one the family gives no
            meaning to, an unknown keyword or an unknown key of a config dict (named, with
            the nearest known name), an invalid config, a config of another model family,
            or one too large for this machine's memory.
        FileNotFoundError: no checkpoint at ``checkpoint_path``.
        kerasbert.CheckpointError (a ValueError): the checkpoint is corrupt or does
            not fit the config (the message names the variable, both shapes and a hint).

    Example:
        >>> bert = build_transformer_model("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> bert.count_params()
        101677056
        >>> lm = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32), application="unilm")
        >>> lm.get_layer("Attention-UniLM-Mask").name, lm.output.shape
        ('Attention-UniLM-Mask', (None, None, 100))
    """
    if not isinstance(return_keras_model, bool):  # 'no' would read as True
        raise ValueError(f"return_keras_model={return_keras_model!r}: must be True (the "
                         "keras.Model) or False (the family's Transformer object)")
    config_path, checkpoint_path = _preset_paths(config_path, checkpoint_path)
    for keyword in REFUSED:
        if overrides.get(keyword) not in (None, False):
            raise ValueError(f"{keyword}={overrides[keyword]!r}: not supported; "
                             f"{REFUSED[keyword]}")
    overrides = {key: value for key, value in overrides.items() if key not in REFUSED}
    build_options = {key: overrides.pop(key) for key in BUILD_KEYWORDS if key in overrides}
    if "ignore_invalid_weights" in overrides:
        strict = not overrides.pop("ignore_invalid_weights")
    fixed = {key: overrides.pop(key) for key in list(overrides) if key in FIXED}
    model_options = {key: overrides.pop(key) for key in list(overrides) if key in MODEL_OPTIONS}
    cls = variant_of(model if model is not None else DEFAULT_FAMILY)  # unknown: refused first
    # Without model=, the config's model_type picks the family: any family's keywords are
    # taken here and checked against that family's once the config is read.
    takes = _options_of(cls) if model is not None else _every_family_option()
    family_options = {key: overrides.pop(key) for key in list(overrides) if key in takes}
    # Another family's keyword would go on into the config and build a model without it.
    foreign = sorted(set(overrides) & _every_family_option())
    if foreign:
        raise ValueError(f"{', '.join(foreign)}: not a keyword of model="
                         f"{model if isinstance(model, str) else cls.__name__!r}")
    _refuse_unknown(overrides, takes)
    if isinstance(config_path, dict):
        check_config_keys(config_path, "the config dict")
    # The family the config is read for: None lets the config's model_type pick it.
    family = (model.lower() if isinstance(model, str)
              else None if model is None else _registered_family(cls))
    config = resolve_config(config_path, family=family, **overrides)
    for key, value in fixed.items():
        if value is not None and value != FIXED[key](config):
            raise ValueError(f"{key} ({value!r}): not supported; heads are hidden_size / "
                             f"num_attention_heads = {FIXED[key](config)} wide")
    if model is None:
        cls = family_class(config.family)
        wrong = sorted(set(family_options) - _options_of(cls))
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: not a keyword of model={config.family!r} "
                             "(the config's model_type)")
    _config_positions(config, cls, family_options)
    vocab_size = config.vocab_size
    if keep_tokens is not None:
        vocab_size = len(keep_tokens)
    if compound_tokens is not None:
        vocab_size += len(compound_tokens)
    if vocab_size != config.vocab_size:
        config = config.replace(vocab_size=vocab_size)

    def build() -> Transformer:
        return make_transformer(
            config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
            sequence_length=sequence_length, name=name, dtype=dtype,
            family=config.family if model is None or isinstance(model, str) else cls,
            with_discriminator=with_discriminator, application=application,
            keep_tokens=keep_tokens, compound_tokens=compound_tokens,
            build_options={**build_options, "attention_caches": attention_caches},
            residual_attention_scores=residual_attention_scores,
            recompute=recompute, **model_options, **family_options)

    if lora_targets is not None and lora_rank is None:
        raise ValueError(f"lora_targets={lora_targets!r}: only with lora_rank (the adapters' "
                         "rank)")
    if checkpoint_path is None:
        built = _adapted(build(), lora_rank, lora_targets)
        return built.model if return_keras_model else built
    # The weights are made without values and created from what the checkpoint holds:
    # no random draw to overwrite, one copy of each weight (see models/deferred.py).
    with deferred_weights() as deferred:
        built = build()
    try:
        # The model is new and is dropped if the load fails: it may be loaded a group of
        # variables at a time, never holding the whole checkpoint beside its weights.
        mapping, absent = (_heads_left_out(built, checkpoint_path) if strict is None
                           else (None, []))
        built.load_weights_from_checkpoint(checkpoint_path, strict=strict is not False,
                                           streaming=True, mapping=mapping)
    except BaseException:
        forget(deferred)
        raise
    settle(deferred)  # what the checkpoint did not fill: dropout seeds, a non-strict load's gaps
    if absent:
        warnings.warn(f"the checkpoint has no {', '.join(absent)}: those head weights are "
                      "initialised, not loaded (strict=True refuses such a checkpoint)",
                      stacklevel=2)
    built = _adapted(built, lora_rank, lora_targets)
    return built.model if return_keras_model else built


def _adapted(built: Transformer, rank: int | None,
             targets: str | Sequence[str] | None) -> Transformer:
    """``built`` with LoRA adapters of ``rank`` on ``targets`` (none without a rank)."""
    if rank is not None:
        from kerasbert.models.lora import DEFAULT_TARGETS, enable_lora

        enable_lora(built.model, rank, DEFAULT_TARGETS if targets is None else targets)
    return built


def _config_positions(config: BertConfig, cls: type[Transformer],
                      family_options: dict[str, Any]) -> None:
    """Adds the config's ``hierarchical_position`` (a long-text run's) to ``family_options``
    unless the keyword is given: the key is where a saved model's fact lives.

    Raises:
        ValueError: the key in the config of a family that builds no such positions.
    """
    value = config.hierarchical_position
    if value is None or "hierarchical_position" in family_options:
        return
    if cls.position != "absolute" or "hierarchical_position" not in _options_of(cls):
        raise ValueError(f"hierarchical_position ({value!r}) in {config.source}: "
                         f"model={config.family!r} builds no hierarchical positions (a learned "
                         "position table read past its end); remove the key")
    family_options["hierarchical_position"] = value


def takes_hierarchical_position(family: str) -> bool:
    """Whether the family (a registered name) builds ``hierarchical_position``: learned
    absolute positions, a table to read past its end (BERT, ALBERT, ELECTRA...)."""
    cls = family_class(family if family in FAMILIES else DEFAULT_FAMILY)
    return cls.position == "absolute" and "hierarchical_position" in _options_of(cls)


def _refuse_unknown(overrides: dict[str, Any], family_keywords: set[str]) -> None:
    """Raises for a keyword that is no name kerasbert knows (``with_poll``, ``hiden_size``):
    bert4keras drops it and builds another model than the one asked for.

    Raises:
        ValueError: naming the keyword and the known name nearest to it.
    """
    known = (known_keys() | family_keywords | set(REFUSED) | set(FIXED) | set(LOAD_ALIASES)
             | set(MODEL_OPTIONS) | set(BUILD_KEYWORDS)
             | set(inspect.signature(build_transformer_model).parameters) - {"overrides"})
    for key in overrides:
        if key not in known:
            raise ValueError(f"{key}: unknown keyword; did you mean {nearest(key, known)}?")


#: The layers of the heads ``with_pool`` / ``with_nsp`` / ``with_mlm`` /
#: ``with_discriminator`` add: what a checkpoint of an encoder alone may lack.
HEAD_LAYERS = frozenset({names.POOLER_DENSE, names.NSP_PROBA, names.MLM_DENSE,
                         names.MLM_NORM, names.MLM_BIAS, names.DISCRIMINATOR_DENSE,
                         names.DISCRIMINATOR_PREDICTION})


def _heads_left_out(built: Transformer,
                    checkpoint: str | os.PathLike[str] | dict[str, np.ndarray],
                    ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """``built``'s table without the head variables ``checkpoint`` lacks (which keep their
    initial values), and those variables. The encoder's stay in the table: a missing one
    still fails the load."""
    from kerasbert.checkpoints.io import open_source

    mapping = built.variable_mapping()
    available = open_source(checkpoint).shapes()
    absent = [variable for layer, weights in mapping.items()
              if layer in HEAD_LAYERS and layer in built.layers
              for variable in weights.values() if variable not in available]
    return {layer: {attribute: variable for attribute, variable in weights.items()
                    if variable not in absent} for layer, weights in mapping.items()}, absent


def _preset_paths(
        config_path: str | os.PathLike[str] | BertConfig | dict[str, Any] | None,
        checkpoint_path: str | os.PathLike[str] | dict[str, np.ndarray] | None,
) -> tuple[str | os.PathLike[str] | BertConfig | dict[str, Any] | None,
           str | os.PathLike[str] | dict[str, np.ndarray] | None]:
    """A preset's name (not a path) -> its cached config and checkpoint (downloaded on
    first use); anything else as it is."""
    if not isinstance(config_path, str) or os.path.exists(config_path):
        return config_path, checkpoint_path
    from kerasbert.presets import table

    if not table.is_preset(config_path):
        return config_path, checkpoint_path
    from kerasbert.models.convert import download_preset

    folder = download_preset(config_path)
    return (os.path.join(folder, "bert_config.json"),
            checkpoint_path or os.path.join(folder, "bert_model.ckpt"))


def _registered_family(cls: type[Transformer]) -> str | None:
    """The ``model=`` name of ``cls``'s closest registered ancestor (``"roformer"`` for
    ``extend_with_language_model(RoFormer)``): the family its config is read for."""
    registered = {family_class(name) for name in FAMILIES}
    for klass in cls.__mro__:
        if klass in registered:
            return registered_name(klass)
    return None


def _every_family_option() -> set[str]:
    """The keywords some family's class takes (GPT's ``final_activation``, BERT's
    ``custom_position_ids``...)."""
    return set().union(*(_options_of(family_class(name)) for name in FAMILIES))


def _options_of(cls: type) -> set[str]:
    """The keywords a family's class takes beyond the base class's (GPT's
    ``final_activation``), a mixin's ``__init__`` in its way or not."""
    own: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass) and klass is not object:
            own.update(name for name, parameter in
                       inspect.signature(vars(klass)["__init__"]).parameters.items()
                       if parameter.kind not in (parameter.VAR_POSITIONAL,
                                                 parameter.VAR_KEYWORD))
    return own - set(inspect.signature(Transformer.__init__).parameters) - {"self"}


def resolve_config(config: str | os.PathLike[str] | BertConfig | dict[str, Any] | None,
                   family: str | None = None, **overrides: Any) -> BertConfig:
    """A :class:`BertConfig` from a path, a dict or a config, with overrides applied,
    read for ``family`` (None: the one the config names)."""
    if config is None:
        if not overrides:
            raise ValueError("Give config_path (a bert_config.json) or the config keys as keywords")
        return BertConfig.from_dict({}, source="<keywords>", family=family, **overrides)
    if isinstance(config, BertConfig):
        if (family is None or family == config.family) and not overrides:
            return config
        return BertConfig.from_dict(config.to_dict(), source=config.source,
                                    family=family or config.family, **overrides)
    if isinstance(config, dict):
        return BertConfig.from_dict(config, family=family, **overrides)
    return BertConfig.from_json_file(config, family=family, **overrides)


class _DefaultMask:
    """What :class:`LM_Mask` and :class:`UniLM_Mask` share: ``application=`` left at
    ``"encoder"`` becomes the mixin's mask. An application given otherwise wins, whether by
    ``build_transformer_model(application=...)`` or by an outer decorator (whose
    ``__init__`` runs first), as the outermost mask mixin does in bert4keras."""

    mask: type[Mask]  # each mixin's own

    def __init__(self, *args: Any, application: str | Any = "encoder", **kwargs: Any) -> None:
        if mask_of(application).application == "encoder":
            application = self.mask()
        # A mixin: super() is the family class after it in the MRO (mypy sees object's
        # __init__, which takes no application).
        super().__init__(*args, application=application, **kwargs)  # type: ignore[call-arg]


class LM_Mask(_DefaultMask):
    """bert4keras's mixin of a causal language model: ``class MyLM(LM_Mask, BERT)`` builds
    with ``application="lm"`` (``Attention-LM-Mask``; the MLM head is the output)."""

    mask = Causal


class UniLM_Mask(_DefaultMask):
    """bert4keras's mixin of UniLM's seq2seq mask: ``class MySeq2Seq(UniLM_Mask, BERT)``
    builds with ``application="unilm"`` (``Attention-UniLM-Mask`` from the segment ids)."""

    mask = UniLM


def extend_with_language_model(BaseModel: type[Transformer]) -> type[Transformer]:
    """bert4keras's class decorator: ``BaseModel`` (a family class, or a subclass of one)
    as a causal language model, for ``build_transformer_model(..., model=...)``.

    Raises:
        ValueError (when the model is built): a family that is no language model (ELECTRA).

    Example:
        >>> from kerasbert.models.families.roformer import RoFormer
        >>> lm = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32), model=extend_with_language_model(RoFormer))
        >>> lm.get_layer("Attention-LM-Mask").name, lm.output.shape
        ('Attention-LM-Mask', (None, None, 100))
    """
    return type("LanguageModel", (LM_Mask, BaseModel), {"__doc__": (
        f"{BaseModel.__name__} with a causal mask (extend_with_language_model).")})


def extend_with_unified_language_model(BaseModel: type[Transformer]) -> type[Transformer]:
    """bert4keras's class decorator: ``BaseModel`` with UniLM's seq2seq mask (segment 0 the
    source, segment 1 the target), for ``build_transformer_model(..., model=...)``.

    Raises:
        ValueError (when the model is built): a family that is no language model
            (ELECTRA), or a config without segments (``type_vocab_size`` 0).

    Example:
        >>> from kerasbert.models.families.bert import BERT
        >>> seq2seq = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32), model=extend_with_unified_language_model(BERT))
        >>> seq2seq.get_layer("Attention-UniLM-Mask").name
        'Attention-UniLM-Mask'
    """
    return type("UnifiedLanguageModel", (UniLM_Mask, BaseModel), {"__doc__": (
        f"{BaseModel.__name__} with UniLM's mask (extend_with_unified_language_model).")})
