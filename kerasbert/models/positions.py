"""Position information that is not a learned table: RoFormer's rotary positions and
NEZHA's relative positions.

Both start from the sinusoid of "Attention is all you need", laid out as bert4keras and
Hugging Face lay it out: ``[sin(p w0), cos(p w0), sin(p w1), cos(p w1), ...]`` with
``w_i = 10000^(-2i/d)``. The layers carry bert4keras's names
(``Embedding-Rotary-Position``, ``Embedding-Relative-Position``) and feed every attention
layer; neither is limited to a maximum length.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from kerasbert.models.names import SERIALIZATION_PACKAGE as PACKAGE


def sinusoid(positions: Any, dim: int, base: float = 10000.0) -> Any:
    """``(..., dim)`` interleaved sin/cos of float ``positions`` (``dim`` even), ``w_i =
    base^(-2i/dim)``: the one sinusoid of kerasbert (bert4keras's
    ``K.sinusoidal_embeddings`` too)."""
    frequencies = ops.power(float(base), -2.0 * ops.arange(dim // 2, dtype="float32") / dim)
    angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * frequencies
    return ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1),
                       (*ops.shape(angles)[:-1], dim))


def rotate(x: Any, table: Any) -> Any:
    """RoFormer's rotation of queries or keys ``x`` (``(batch, heads, length, dim)``) by
    the position ``table`` (``(1, length, dim)``, from :class:`RotaryPositions`)."""
    return rotated(x, ops.cast(ops.expand_dims(table, 1), x.dtype))  # (1, 1, length, dim)


def rotated(x: Any, table: Any) -> Any:
    """``x`` rotated pair by pair by a sinusoid ``table`` of its rank that broadcasts
    against it: the one rotation of kerasbert (bert4keras's
    ``apply_rotary_position_embeddings`` too)."""
    cos = ops.repeat(table[..., 1::2], 2, axis=-1)
    sin = ops.repeat(table[..., ::2], 2, axis=-1)
    # Each pair (x0, x1) -> (-x1, x0): a quarter turn, mixed in with the sine.
    turned = ops.reshape(ops.stack([-x[..., 1::2], x[..., ::2]], axis=-1), ops.shape(x))
    return x * cos + turned * sin


@keras.saving.register_keras_serializable(package=PACKAGE)
class RotaryPositions(keras.layers.Layer):
    """``Embedding-Rotary-Position``: the sinusoid of positions ``0 .. length-1``,
    ``(1, length, head_size)`` (of given position ids: ``(batch, length, head_size)``),
    which every RoFormer attention layer rotates its queries and keys by. No weights.

    Example:
        >>> tuple(RotaryPositions(8)(keras.ops.zeros((2, 5, 16))).shape)
        (1, 5, 8)
    """

    def __init__(self, head_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.head_size = head_size

    def call(self, inputs: Any, positions: Any = None) -> Any:
        """``positions``: each token's ``(batch, length)`` position ids (the model's
        ``Input-Position``); the table is then ``(batch, length, head_size)``."""
        if positions is not None:
            return sinusoid(positions, self.head_size)
        return ops.expand_dims(sinusoid(ops.arange(ops.shape(inputs)[1]), self.head_size), 0)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_shape(self, inputs_shape: Any, positions_shape: Any = None) -> Any:
        if positions_shape is not None:
            return (*positions_shape, self.head_size)
        return (1, inputs_shape[1], self.head_size)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "head_size": self.head_size}


@keras.saving.register_keras_serializable(package=PACKAGE)
class RelativePositions(keras.layers.Layer):
    """``Embedding-Relative-Position``: NEZHA's table of relative positions.

    For a length-``T`` input it returns ``(T, T, head_size)``: row ``(j, k)`` is the
    sinusoid of ``clip(k - j, -m, m) + m`` with ``m = max_relative_position`` (64 in
    NEZHA). The ``2m + 1`` sinusoids are a weight, fixed (not trained), as in bert4keras,
    so ``summary()`` counts them like it does.

    Example:
        >>> tuple(RelativePositions(8, max_relative_position=4)(keras.ops.zeros((2, 5, 16))).shape)
        (5, 5, 8)
    """

    def __init__(self, head_size: int, max_relative_position: int = 64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.head_size = head_size
        self.max_relative_position = max_relative_position

    def build(self, input_shape: Any) -> None:
        size = 2 * self.max_relative_position + 1
        self.embeddings = self.add_weight(
            name="embeddings", shape=(size, self.head_size), trainable=False,
            initializer=lambda shape, dtype=None: sinusoid(ops.arange(shape[0]), shape[1]))

    def call(self, inputs: Any) -> Any:
        positions = ops.arange(ops.shape(inputs)[1])
        relative = ops.expand_dims(positions, 0) - ops.expand_dims(positions, 1)  # k - j
        m = self.max_relative_position
        return ops.take(self.embeddings, ops.clip(relative, -m, m) + m, axis=0)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_shape(self, input_shape: Any) -> Any:
        return (input_shape[1], input_shape[1], self.head_size)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "head_size": self.head_size,
                "max_relative_position": self.max_relative_position}
