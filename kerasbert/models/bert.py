"""``build_bert``: a :class:`BertConfig` and a family name make one functional Keras model.

The graph of each family is its class in :mod:`kerasbert.models.families` (BERT's in
``families/bert.py``); this module builds one, checks first that it fits in memory and in
its position table, and counts a config's parameters without building it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kerasbert.models.audit import expected_rows
from kerasbert.models.config import BertConfig, check_maxlen
from kerasbert.models.families import variant_of

if TYPE_CHECKING:  # annotations only
    import keras

    from kerasbert.models.families.base import Transformer

# The keys that set the number of parameters, quoted when a model is too large.
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
             "max_position_embeddings", "type_vocab_size")
BYTES_PER_WEIGHT = 4  # float32 variables, also under mixed precision


def build_bert(config: BertConfig, with_pool: bool | str = False, with_nsp: bool = False,
               with_mlm: bool | str = False, sequence_length: int | None = None,
               name: str | None = None, dtype: str | keras.DTypePolicy | None = None,
               family: str | type[Transformer] = "bert", with_discriminator: bool | str = False,
               application: str | Any = "encoder", **family_options: Any) -> keras.Model:
    """Builds the functional graph of a BERT-family model for a :class:`BertConfig`.

    Args:
        config: the architecture.
        with_pool: add ``Pooler``/``Pooler-Dense``; True means tanh, a string names
            another activation. Implied by ``with_nsp``.
        with_nsp: add ``NSP-Proba`` on the pooled vector.
        with_mlm: add the masked-LM head; True means softmax, a string names another
            activation (``"linear"`` gives logits).
        sequence_length: fixed input length, or None for any length.
        name: the model's name.
        dtype: the dtype policy of every layer (``"mixed_bfloat16"``: bfloat16
            compute, float32 weights); None: Keras's global policy (float32 unless
            the caller changed it).
        family: a key of :data:`kerasbert.models.families.FAMILIES` (``"albert"``,
            ``"nezha"``, ``"roformer"``...), or a family class.
        with_discriminator: ELECTRA's replaced-token head (``Discriminator-Dense``,
            ``Discriminator-Prediction``); True means sigmoid.
        application: the attention mask (``"encoder"``, ``"lm"``, ``"unilm"`` or a mask
            of :mod:`kerasbert.models.attention_masks`); a language model gets the MLM head.
        **family_options: what a family's class takes besides (GPT's ``final_activation``).

    Returns:
        A ``keras.Model`` with int32 inputs ``Input-Token`` (and ``Input-Segment``
        when ``type_vocab_size > 0``). Outputs follow bert4keras: no head → the
        sequence output; one head → that head; several → a list (pooler/NSP, MLM).

    Raises:
        ValueError: an unknown family, a head the family does not have, the weights
            would not fit in this machine's memory, or ``sequence_length`` exceeds
            ``max_position_embeddings`` (hierarchical positions: its square); checked
            before any layer is made.
    """
    return make_transformer(config, with_pool, with_nsp, with_mlm, sequence_length, name,
                            dtype, family, with_discriminator, application,
                            **family_options).model


def make_transformer(config: BertConfig, with_pool: bool | str = False, with_nsp: bool = False,
                     with_mlm: bool | str = False, sequence_length: int | None = None,
                     name: str | None = None, dtype: str | keras.DTypePolicy | None = None,
                     family: str | type[Transformer] = "bert",
                     with_discriminator: bool | str = False, application: str | Any = "encoder",
                     keep_tokens: Sequence[int] | None = None,
                     compound_tokens: Sequence[Any] | None = None,
                     build_options: dict[str, Any] | None = None,
                     residual_attention_scores: bool = False,
                     recompute: bool | None = None,
                     **family_options: Any) -> Transformer:
    """:func:`build_bert`'s checks, then the family's object, built (see
    :class:`kerasbert.models.families.base.Transformer`; ``build_options``: the keywords of
    its ``build``, such as ``layer_norm_cond`` and ``attention_caches``)."""
    cls = variant_of(family, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                     with_discriminator=with_discriminator)
    check_fits_in_memory(config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                         family=family, with_discriminator=with_discriminator)
    check_maxlen(dataclasses.replace(config, family=family if isinstance(family, str)
                                     else config.family), sequence_length,
                 flag="sequence_length",
                 hierarchical=bool(family_options.get("hierarchical_position")))
    transformer = cls(config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                      with_discriminator=with_discriminator, application=application,
                      sequence_length=sequence_length, keep_tokens=keep_tokens,
                      compound_tokens=compound_tokens, name=name, dtype=dtype,
                      family=family if isinstance(family, str) else None,
                      residual_attention_scores=residual_attention_scores,
                      recompute=recompute, **family_options)
    transformer.build(**(build_options or {}))
    return transformer


def parameter_count(config: BertConfig, with_pool: bool | str = False, with_nsp: bool = False,
                    with_mlm: bool | str = False, family: str | type[Transformer] | None = None,
                    with_discriminator: bool | str = False) -> int:
    """The number of weights :func:`build_bert` makes for ``config`` (and ``family``, None:
    the config's), without building it.

    Example:
        >>> from kerasbert.models.config import BertConfig
        >>> config = BertConfig.from_json_file(
        ...     "checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> parameter_count(config), parameter_count(config, with_pool=True)
        (101677056, 102267648)
    """
    # Audit's formulas for one and for two encoder layers give the cost of a layer; a
    # config of a billion layers is then counted without listing a billion rows.
    one, two = (sum(row.expected for row in expected_rows(
        dataclasses.replace(config, num_hidden_layers=layers), with_pool, with_nsp, with_mlm,
        family=family, with_discriminator=with_discriminator))
        for layers in (1, 2))
    return one + (config.num_hidden_layers - 1) * (two - one)


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_in_memory(config: BertConfig, with_pool: bool | str = False,
                         with_nsp: bool = False, with_mlm: bool | str = False,
                         family: str | type[Transformer] | None = None,
                         with_discriminator: bool | str = False) -> None:
    """Raises before building when the weights alone would exceed this machine's memory.

    A config with a huge ``vocab_size`` or ``hidden_size`` (a typo, an extra digit)
    would otherwise be killed by the system, or fail deep in TensorFlow, mid-build.

    Raises:
        ValueError: ``model size in <config>: vocab_size=..., hidden_size=..., ... need
            about 1.1 TiB for the weights alone, more than this machine's 24 GiB of memory``.
    """
    needed = BYTES_PER_WEIGHT * parameter_count(config, with_pool, with_nsp, with_mlm, family,
                                                with_discriminator)
    memory = physical_memory()
    if memory and needed > memory:
        sizes = ", ".join(f"{key}={getattr(config, key)}" for key in SIZE_KEYS)
        raise ValueError(
            f"model size in {config.source}: {sizes} need about {_format_bytes(needed)} for "
            f"the weights alone, more than this machine's {_format_bytes(memory)} of memory")


def _format_bytes(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024:
            return f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:.3g} PiB"
