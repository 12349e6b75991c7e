"""The model code, and bert4keras's ``models`` names: ``from kerasbert.models import
build_transformer_model`` works as ``from bert4keras.models import ...`` does.

Provided: :func:`build_transformer_model`, :class:`Transformer`, the family classes
(``BERT``, ``ALBERT``, ``ALBERT_Unshared``, ``NEZHA``, ``RoFormer``, ``RoFormerV2``,
``ELECTRA``, ``GPT``, ``GPT2``, ``GPT2_ML``, ``T5``), T5's classes by ``version=``
(``T5_Base``, and its halves ``T5_Encoder`` and ``T5_Decoder``), the mask mixins
``LM_Mask`` / ``UniLM_Mask`` and the class decorators :func:`extend_with_language_model` /
:func:`extend_with_unified_language_model`. ``data_parallel`` is refused by name
(:data:`NOT_PROVIDED`).

Example:
    >>> from kerasbert.models import RoFormer, build_transformer_model, extend_with_language_model
    >>> lm = build_transformer_model(dict(
    ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    ...     intermediate_size=32), model=extend_with_language_model(RoFormer))
    >>> lm.output.shape
    (None, None, 100)
"""

import importlib
from typing import TYPE_CHECKING, Any

#: bert4keras's ``models`` names -> ``(module, name)`` they are imported from on first use, so
#: that ``kerasbert.models.families`` (the command line's list of families) loads no
#: TensorFlow.
PROVIDED = {
    "LM_Mask": ("kerasbert.models.build", "LM_Mask"),
    "Transformer": ("kerasbert.models.build", "Transformer"),
    "UniLM_Mask": ("kerasbert.models.build", "UniLM_Mask"),
    "build_transformer_model": ("kerasbert.models.build", "build_transformer_model"),
    "extend_with_language_model": ("kerasbert.models.build", "extend_with_language_model"),
    "extend_with_unified_language_model": ("kerasbert.models.build",
                                           "extend_with_unified_language_model"),
    "ALBERT": ("kerasbert.models.families.albert", "ALBERT"),
    "ALBERT_Unshared": ("kerasbert.models.families.albert", "ALBERTUnshared"),
    "BERT": ("kerasbert.models.families.bert", "BERT"),
    "ELECTRA": ("kerasbert.models.families.electra", "ELECTRA"),
    "GPT": ("kerasbert.models.families.gpt", "GPT"),
    "GPT2": ("kerasbert.models.families.gpt2", "GPT2"),
    "GPT2_ML": ("kerasbert.models.families.gpt2_ml", "GPT2ML"),
    "NEZHA": ("kerasbert.models.families.nezha", "NEZHA"),
    "RoFormer": ("kerasbert.models.families.roformer", "RoFormer"),
    "RoFormerV2": ("kerasbert.models.families.roformer", "RoFormerV2"),
    "T5": ("kerasbert.models.families.t5", "T5"),
    "T5_Base": ("kerasbert.models.families.t5", "T5_Base"),
    "T5_Decoder": ("kerasbert.models.families.t5", "T5_Decoder"),
    "T5_Encoder": ("kerasbert.models.families.t5", "T5_Encoder"),
}
# Written out for the API reference, which reads it without running the module; the keys of
# PROVIDED (tests/test_library_use.py keeps the two equal).
__all__ = ["ALBERT", "ALBERT_Unshared", "BERT", "ELECTRA", "GPT", "GPT2", "GPT2_ML", "LM_Mask",
           "NEZHA", "RoFormer", "RoFormerV2", "T5", "T5_Base", "T5_Decoder", "T5_Encoder",
           "Transformer", "UniLM_Mask",
           "build_transformer_model", "extend_with_language_model",
           "extend_with_unified_language_model"]

if TYPE_CHECKING:  # the names as a type checker and the API reference read them
    from kerasbert.models.build import (
        LM_Mask,
        Transformer,
        UniLM_Mask,
        build_transformer_model,
        extend_with_language_model,
        extend_with_unified_language_model,
    )
    from kerasbert.models.families.albert import ALBERT
    from kerasbert.models.families.albert import ALBERTUnshared as ALBERT_Unshared
    from kerasbert.models.families.bert import BERT
    from kerasbert.models.families.electra import ELECTRA
    from kerasbert.models.families.gpt import GPT
    from kerasbert.models.families.gpt2 import GPT2
    from kerasbert.models.families.gpt2_ml import GPT2ML as GPT2_ML
    from kerasbert.models.families.nezha import NEZHA
    from kerasbert.models.families.roformer import RoFormer, RoFormerV2
    from kerasbert.models.families.t5 import T5, T5_Base, T5_Decoder, T5_Encoder

#: bert4keras ``models`` names kerasbert does not provide -> why, and what to use instead.
NOT_PROVIDED = {
    "data_parallel": "Keras 3 has no multi-GPU model copy; train under "
                     "tf.distribute.MirroredStrategy (kerasbert train --strategy mirrored)",
}


class NotProvided(ImportError):
    """A bert4keras name kerasbert does not provide. An ImportError, so that
    ``from kerasbert.models import data_parallel`` says why (an AttributeError would be replaced by
    Python's "cannot import name")."""


def __getattr__(name: str) -> Any:
    if name in PROVIDED:
        module, attribute = PROVIDED[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value  # found directly from now on
        return value
    if name in NOT_PROVIDED:
        raise NotProvided(f"kerasbert.models.{name} (bert4keras.models.{name}) is not "
                          f"provided: {NOT_PROVIDED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *PROVIDED})
