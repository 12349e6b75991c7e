"""The model code, and bert4keras's ``models`` names: ``from kerasbert.models import
build_transformer_model`` works as ``from bert4keras.models import ...`` does.

Provided: :func:`build_transformer_model`, :class:`Transformer`, the family classes
(``BERT``, ``ALBERT``, ``ALBERT_Unshared``, ``NEZHA``, ``RoFormer``, ``RoFormerV2``,
``ELECTRA``, ``GPT``, ``GPT2``, ``GPT2_ML``, ``T5``), the mask mixins ``LM_Mask`` /
``UniLM_Mask`` and the class decorators :func:`extend_with_language_model` /
:func:`extend_with_unified_language_model`. T5's halves as classes of their own
(``T5_Encoder``, ``T5_Decoder``, ``T5_Base``) and ``data_parallel`` are refused by name
(:data:`NOT_PROVIDED`).

Example:
    >>> from kerasbert.models import RoFormer, build_transformer_model, extend_with_language_model
    >>> lm = build_transformer_model(dict(
    ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    ...     intermediate_size=32), model=extend_with_language_model(RoFormer))
    >>> lm.output.shape
    (None, None, 100)
"""

from typing import NoReturn

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
from kerasbert.models.families.t5 import T5

__all__ = ["ALBERT", "ALBERT_Unshared", "BERT", "ELECTRA", "GPT", "GPT2", "GPT2_ML", "LM_Mask",
           "NEZHA",
           "RoFormer", "RoFormerV2", "T5", "Transformer", "UniLM_Mask", "build_transformer_model",
           "extend_with_language_model", "extend_with_unified_language_model"]

_T5 = ("T5's halves are not classes of their own; build model='t5' (or 't5.1.1', "
       "'mt5.1.1') with return_keras_model=False and use its .encoder and .decoder")
#: bert4keras ``models`` names kerasbert does not provide -> why, and what to use instead.
NOT_PROVIDED = {
    "T5_Base": _T5, "T5_Encoder": _T5, "T5_Decoder": _T5,
    "data_parallel": "Keras 3 has no multi-GPU model copy; train under "
                     "tf.distribute.MirroredStrategy (kerasbert train --strategy mirrored)",
}


class NotProvided(ImportError):
    """A bert4keras name kerasbert does not provide. An ImportError, so that
    ``from kerasbert.models import T5`` says why (an AttributeError would be replaced by
    Python's "cannot import name")."""


def __getattr__(name: str) -> NoReturn:
    if name in NOT_PROVIDED:
        raise NotProvided(f"kerasbert.models.{name} (bert4keras.models.{name}) is not "
                          f"provided: {NOT_PROVIDED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
