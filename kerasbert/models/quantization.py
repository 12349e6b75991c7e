"""Keras's quantization of a kerasbert model's dense products.

Every product of a kerasbert model is a Keras ``Dense`` layer: the attention and
feed-forward projections (:class:`~kerasbert.models.layers.Projection`) and the heads
(``Pooler-Dense``, ``MLM-Dense``, ``CLS-token``...). ``model.quantize(mode)`` (Keras's own)
reaches all of them; :func:`quantize` does the same without Keras's warning for each layer
that has no product to quantize (norms, dropout, the position tables). The embeddings stay
in float: a lookup reads one row per token, and the token table is also the MLM output
matrix.
"""

from __future__ import annotations

from typing import Any

import keras

from kerasbert.models.layers import dense_layers

#: What Keras quantizes ``Dense`` layers to without calibration data, on every backend.
MODES = ("int8", "int4", "float8")


def quantize(model: keras.Model, mode: str = "int8",
             config: Any = None) -> list[keras.layers.Dense]:
    """Quantizes every dense product of ``model`` to ``mode`` with Keras's ``quantize``.

    ``"int8"`` and ``"int4"`` store each kernel as integers with a scale per output
    (int4: two to a byte) and quantize each row of inputs as it comes; ``"float8"`` trains
    with scaled float8 products (Keras's, for fine-tuning in float8). Quantize after loading
    a checkpoint: a quantized kernel takes no float weights.

    Args:
        model: a model built by kerasbert (a task's model around one too).
        mode: one of :data:`MODES`.
        config: a ``keras.quantizers.QuantizationConfig`` (Keras's), or None.

    Returns:
        the layers quantized.

    Raises:
        ValueError: another mode, or a model already quantized.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> model = build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))
        >>> len(quantize(model, "int8"))
        12
    """
    if mode not in MODES:
        raise ValueError(f"quantization mode {mode!r}: not one of {', '.join(MODES)}")
    dense = dense_layers(model)
    done = [layer.path for layer in dense if layer.quantization_mode is not None]
    if done:
        raise ValueError(f"model {model.name!r}: quantized already ({done[0]}...); quantize "
                         "a model once, from its float weights")
    ids = {id(layer) for layer in dense}
    model.quantize(mode, config=config, filters=lambda layer: id(layer) in ids)
    return dense
