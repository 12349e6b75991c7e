"""Fast inference: a model traced once into a compiled function, and a bfloat16 copy.

``model(x)`` called eagerly runs layer by layer from Python, and ``model.predict``
builds a data pipeline on every call; for a single batch both cost more than the
arithmetic at small sizes. :class:`Predictor` traces the model once, with a
signature whose batch and length are both unknown, so every later batch, whatever
its shape, runs the same graph: no retracing, and no per-call Python beyond
converting the inputs.

XLA (``jit_compile=True``) compiles one program per input shape, as ``jax.jit`` does on
JAX's backend, where the Predictor always compiles. Under either the Predictor pads
lengths up to a multiple of ``bucket`` and batches up to a power of two, so a stream of
varied batches compiles only a few programs. Padding is token id 0, which the model masks
out, so outputs at real tokens do not change; the padding is cut off the outputs again.

On this backend's CPU kernels, XLA is off by default: oneDNN's GEMMs, which TensorFlow
uses without XLA, are the faster ones (see ``bench/``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
from numpy.typing import ArrayLike

from kerasbert.hardware import compute_policy
from kerasbert.inference.compiled import compiled

DEFAULT_BUCKET = 32


def with_dtype_policy(model: keras.Model,
                      dtype_policy: str | keras.DTypePolicy) -> keras.Model:
    """A copy of ``model`` computing under ``dtype_policy``, the original left as it is.

    ``"bfloat16"`` stores the copy's weights in bfloat16 (rounded once) and computes in
    it: half the memory traffic, and the fastest on CPUs with AVX-512 BF16 or AMX.
    ``"mixed_bfloat16"`` keeps float32 weights and casts them on every call, which
    costs more than it saves for inference; it is the policy for training. Under
    both, layer norm and the attention softmax are computed in float32.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> model = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> fast = with_dtype_policy(model, "bfloat16")
        >>> fast.get_layer("Transformer-0-FeedForward").compute_dtype
        'bfloat16'
        >>> model.get_layer("Transformer-0-FeedForward").compute_dtype   # the original
        'float32'

    Raises:
        ValueError: ``dtype_policy`` is not a Keras dtype policy name.
    """
    policy = keras.dtype_policies.get(dtype_policy)

    def clone(layer: keras.layers.Layer) -> keras.layers.Layer:
        config = layer.get_config()
        if isinstance(layer, keras.layers.Layer):
            # Plain operations in the graph (the padding mask's not_equal) have no dtype.
            config["dtype"] = policy
        return layer.__class__.from_config(config)

    copy = keras.models.clone_model(model, clone_function=clone)
    copy.set_weights(model.get_weights())
    return copy


class Predictor:
    """Runs a kerasbert model for inference in one compiled function.

    Args:
        model: a model from :func:`kerasbert.build_transformer_model` (inputs
            ``Input-Token`` and, optionally, ``Input-Segment``), with or without heads.
        jit_compile: compile with XLA (TensorFlow backend).
        bucket: under XLA, lengths are padded up to a multiple of this.
        dtype_policy: run a copy of the model under this policy, e.g. ``"bfloat16"``
            on CPUs with AVX-512 BF16 or AMX (see :func:`with_dtype_policy`); on a CPU
            without hardware bfloat16 a bfloat16 policy runs in float32, with a warning
            (:func:`kerasbert.hardware.compute_policy`).

    Example:
        >>> from kerasbert import build_transformer_model
        >>> predict = Predictor(build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)))
        >>> token_ids = np.ones((8, 20), "int32")
        >>> predict(token_ids, np.zeros_like(token_ids)).shape   # (batch, length, hidden)
        (8, 20, 16)
        >>> predict(token_ids[:3, :7]).shape                      # segment ids: zeros
        (3, 7, 16)
        >>> predict.traces                                        # any later shape: still 1
        1
    """

    def __init__(self, model: keras.Model, jit_compile: bool = False, bucket: int = DEFAULT_BUCKET,
                 dtype_policy: str | None = None) -> None:
        if not isinstance(bucket, int) or bucket < 1:
            raise ValueError(f"bucket must be a positive integer, received bucket={bucket!r}")
        dtype_policy = compute_policy(dtype_policy, "Predictor(dtype_policy=...)")
        if dtype_policy is not None:
            model = with_dtype_policy(model, dtype_policy)
        self.model = model
        self.jit_compile = jit_compile
        self.bucket = bucket
        self.traces = 0
        self._num_inputs = len(model.inputs)
        # Outputs with a length axis (sequence, MLM) are cut back to the real length.
        self._has_length = [len(output.shape) >= 3 for output in model.outputs]
        self._max_length = _max_length(model)
        self._function = self._compile()

    def _forward(self, *inputs: Any) -> list[Any]:
        # Runs once per trace, not per call: the counter tells how often tracing happened.
        self.traces += 1
        outputs = self.model(list(inputs) if len(inputs) > 1 else inputs[0], training=False)
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        return [keras.ops.cast(output, "float32") for output in outputs]

    def _compile(self) -> Callable[..., list[Any]]:
        return compiled(self._forward, self.model.weights, ["int32"] * self._num_inputs,
                        jit_compile=self.jit_compile)

    def __call__(self, token_ids: ArrayLike,
                 segment_ids: ArrayLike | None = None) -> np.ndarray | list[np.ndarray]:
        """Runs the model on one batch.

        Args:
            token_ids: ``(batch, length)`` ints, 0 for padding.
            segment_ids: ``(batch, length)`` ints; zeros when left out.

        Returns:
            the model's output(s) as float32 numpy arrays, at the input's length.

        Raises:
            ValueError: inputs that are not 2-D or whose shapes differ.
        """
        token_ids = np.asarray(token_ids, dtype="int32")
        if token_ids.ndim != 2:
            raise ValueError(f"token_ids must be (batch, length), received shape "
                             f"{token_ids.shape}")
        inputs = [token_ids]
        if self._num_inputs > 1:
            segment_ids = (np.zeros_like(token_ids) if segment_ids is None
                           else np.asarray(segment_ids, dtype="int32"))
            if segment_ids.shape != token_ids.shape:
                raise ValueError(f"segment_ids shape {segment_ids.shape} differs from "
                                 f"token_ids shape {token_ids.shape}")
            inputs.append(segment_ids)
        batch, length = token_ids.shape
        if self.jit_compile or keras.backend.backend() == "jax":
            inputs = [self._pad(x) for x in inputs]
        outputs = [keras.ops.convert_to_numpy(output)[:batch]
                   for output in self._function(*inputs)]
        outputs = [output[:, :length] if has_length else output
                   for output, has_length in zip(outputs, self._has_length)]
        return outputs[0] if len(outputs) == 1 else outputs

    def _pad(self, x: np.ndarray) -> np.ndarray:
        """Pads the batch to a power of two and the length to a multiple of ``bucket``."""
        batch, length = x.shape
        padded_length = math.ceil(length / self.bucket) * self.bucket
        if self._max_length:
            padded_length = max(length, min(padded_length, self._max_length))
        padded_batch = 1 << max(batch - 1, 0).bit_length()
        return np.pad(x, ((0, padded_batch - batch), (0, padded_length - length)))


def predict_in_batches(function: Callable[[np.ndarray, np.ndarray], Any],
                       token_ids: np.ndarray, segment_ids: np.ndarray, batch_size: int = 64,
                       per_token: bool = False, progress: bool = False) -> list[np.ndarray]:
    """``function``'s output for each row of padded ids, run ``batch_size`` rows at a time:
    the one batched prediction of the tasks (classification, similarity, NER, span QA).

    Rows go through in batches of similar length, each cut to its longest row (rounded up
    as :func:`kerasbert.training.batches.batch_width` rounds, so few shapes are traced);
    the outputs come back in the rows' order.

    Args:
        function: ``(token_ids, segment_ids) -> [batch, ...]``: a :class:`Predictor`, or a
            task's compiled decoding.
        token_ids, segment_ids: int ``[rows, length]``, token id 0 at padding.
        per_token: the output's second axis is the batch's width: each row's comes back
            cut to the row's tokens.
        progress: a bar over the batches on stderr (when it is a terminal).

    Returns:
        One array per row.
    """
    from kerasbert.training.batches import batch_width
    from kerasbert.training.callbacks import ProgressBar

    lengths = np.count_nonzero(token_ids, axis=1)
    order = np.argsort(-lengths, kind="stable")
    found: list[np.ndarray] = [np.zeros(0)] * len(order)
    bar = ProgressBar(-(-len(order) // batch_size)) if progress else None
    if bar:
        bar.on_predict_begin()
    for begin in range(0, len(order), batch_size):
        rows = order[begin:begin + batch_size]
        width = batch_width(lengths[rows], token_ids.shape[1])
        output = np.asarray(function(token_ids[rows, :width], segment_ids[rows, :width]))
        for k, row in enumerate(rows):
            found[row] = output[k, :lengths[row]] if per_token else output[k]
        if bar:
            bar.on_predict_batch_end(begin)
    if bar:
        bar.on_predict_end()
    return found


def _max_length(model: keras.Model) -> int | None:
    """The longest input the model's position embedding accepts, if it has one (a table
    read hierarchically: its square, the layer's ``max_length``)."""
    for layer in model.layers:
        if hasattr(layer, "max_position"):
            return int(getattr(layer, "max_length", layer.max_position))
    return None
