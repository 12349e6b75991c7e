"""Which tokens each token may attend to, as values the attention layers take.

Padding (token id 0) is never attended to, whatever the mask: ``Embedding-Token`` emits
the padding mask and every attention layer honours it. On top of it a model may restrict
attention further, as bert4keras's ``application=`` does:

- :class:`Bidirectional` (``application="encoder"``): every token sees every token; no
  extra layer.
- :class:`Causal` (``"lm"``): token ``i`` sees tokens ``0..i`` (``Attention-LM-Mask``).
- :class:`UniLM` (``"unilm"``): segment-wise seq2seq (``Attention-UniLM-Mask``): the
  source (segment 0) sees the whole source, each target token (segment 1) the source and
  the targets up to itself. Read from the segment ids, as UniLM and bert4keras do.
- :class:`PrefixLM`: the first ``length`` tokens see each other, the rest are causal
  (``Attention-Prefix-LM-Mask``).

Each mask makes one :class:`AttentionMask` layer of the graph (from the token or segment
ids), shared by every attention layer; a later token can then change no output before it.

Example:
    >>> import numpy as np
    >>> layer = AttentionMask("unilm")
    >>> np.asarray(layer(np.array([[0, 0, 1, 1]], "int32")))[0].astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 0],
           [1, 1, 1, 1]])
"""

from __future__ import annotations

from typing import Any, Protocol

import keras
from keras import ops

from kerasbert.models import names

# A mask's apply() takes the Transformer being built, typed Any: its module
# (models.families.base) imports this one, and an import back would close a circle.

KINDS = ("lm", "unilm", "prefix")


@keras.saving.register_keras_serializable(package=names.SERIALIZATION_PACKAGE)
class AttentionMask(keras.layers.Layer):
    """``(batch, length)`` ids -> ``(batch or 1, length, length)`` booleans: may query
    ``i`` attend to key ``j``. No weights.

    Args:
        kind: ``"lm"`` (causal, from the token ids' length), ``"unilm"`` (from the
            segment ids) or ``"prefix"`` (the first ``prefix_length`` tokens bidirectional).
        prefix_length: with ``"prefix"``.
    """

    def __init__(self, kind: str, prefix_length: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r} is not one of {KINDS}")
        if kind == "prefix" and (not isinstance(prefix_length, int) or prefix_length < 0):
            raise ValueError(f"prefix_length ({prefix_length!r}): a prefix mask needs a "
                             "non-negative integer")
        self.kind = kind
        self.prefix_length = prefix_length

    def call(self, ids: Any) -> Any:
        if self.kind == "unilm":
            # A target token's rank is the number of target tokens up to it (source: 0).
            rank = ops.cumsum(ops.cast(ids, "int32"), axis=1)
            return ops.expand_dims(rank, 1) <= ops.expand_dims(rank, 2)
        positions = ops.arange(ops.shape(ids)[1])
        allowed = ops.expand_dims(positions, 0) <= ops.expand_dims(positions, 1)  # j <= i
        if self.kind == "prefix":
            allowed = ops.logical_or(allowed, ops.expand_dims(positions < self.prefix_length, 0))
        return ops.expand_dims(allowed, 0)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_spec(self, ids: Any) -> keras.KerasTensor:
        length = ids.shape[1]
        batch = ids.shape[0] if self.kind == "unilm" else 1
        return keras.KerasTensor((batch, length, length), dtype="bool")

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "kind": self.kind}
        if self.prefix_length is not None:
            config["prefix_length"] = self.prefix_length
        return config


class Bidirectional:
    """Every token attends to every (real) token: BERT's encoder."""

    application = "encoder"

    def apply(self, transformer: Any) -> None:
        """No layer: the padding mask alone."""
        return None

    def __repr__(self) -> str:
        return "Bidirectional()"


class Causal:
    """A language model's mask: token ``i`` attends to tokens ``0..i``."""

    application = "lm"
    layer_name = names.ATTENTION_LM_MASK

    def apply(self, transformer: Any) -> keras.KerasTensor:
        """The ``Attention-LM-Mask`` layer on ``transformer``'s token ids."""
        return transformer.apply(inputs=transformer.inputs[0], layer=AttentionMask, kind="lm",
                                 name=self.layer_name)

    def __repr__(self) -> str:
        return "Causal()"


class UniLM:
    """UniLM's seq2seq mask: the source (segment 0) bidirectional, the target (segment 1)
    causal and seeing the whole source."""

    application = "unilm"
    layer_name = names.ATTENTION_UNILM_MASK

    def apply(self, transformer: Any) -> keras.KerasTensor:
        """The ``Attention-UniLM-Mask`` layer on ``transformer``'s segment ids.

        Raises:
            ValueError: the model has no segment input (``type_vocab_size`` 0).
        """
        if transformer.segment_vocab_size == 0:
            raise ValueError("application='unilm' reads source and target from the segment "
                             "ids; this model has no Input-Segment (type_vocab_size is 0)")
        return transformer.apply(inputs=transformer.inputs[1], layer=AttentionMask,
                                 kind="unilm", name=self.layer_name)

    def __repr__(self) -> str:
        return "UniLM()"


class PrefixLM:
    """A prefix LM: the first ``length`` tokens attend to each other, the others causally.

    Example:
        >>> PrefixLM(4)
        PrefixLM(4)
    """

    application = "prefix"
    layer_name = names.ATTENTION_PREFIX_LM_MASK

    def __init__(self, length: int) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"PrefixLM length ({length!r}): must be a non-negative integer")
        self.length = length

    def apply(self, transformer: Any) -> keras.KerasTensor:
        """The ``Attention-Prefix-LM-Mask`` layer on ``transformer``'s token ids."""
        return transformer.apply(inputs=transformer.inputs[0], layer=AttentionMask,
                                 kind="prefix", prefix_length=self.length,
                                 name=self.layer_name)

    def __repr__(self) -> str:
        return f"PrefixLM({self.length})"


class Mask(Protocol):
    """What a model's ``application=`` takes besides a name: any object with the
    ``application`` it builds as and an ``apply`` that adds its layer (as the classes above)."""

    application: str

    def apply(self, transformer: Any) -> keras.KerasTensor | None:
        """The mask's layer on ``transformer``'s inputs (None: the padding mask alone)."""


#: bert4keras's ``application=`` values -> their mask.
APPLICATIONS: dict[str, type[Mask]] = {"encoder": Bidirectional, "lm": Causal, "unilm": UniLM}


def mask_of(application: str | Mask) -> Mask:
    """The mask object of an ``application=`` value, or ``application`` itself when it is
    a mask already.

    Raises:
        ValueError: an unknown application, naming the known ones.

    Example:
        >>> mask_of("unilm"), mask_of(PrefixLM(3))
        (UniLM(), PrefixLM(3))
    """
    if hasattr(application, "apply") and hasattr(application, "application"):
        return application
    if isinstance(application, str) and application.lower() in APPLICATIONS:
        return APPLICATIONS[application.lower()]()
    raise ValueError(f"application={application!r} is not supported; supported: "
                     f"{', '.join(APPLICATIONS)} (or a mask from kerasbert.models."
                     "attention_masks, e.g. PrefixLM(length))")
