"""How the model's products, GELU and dropout run fast on TensorFlow's CPU kernels.

The numbers at real tokens are BERT's; only the operations that compute them change, and
only where TensorFlow is the backend (other backends get Keras's own expressions):

* :func:`affine`: a dense product as ``MatMul`` + ``BiasAdd``, the pair oneDNN fuses;
  within :func:`separate_products` (incremental decoding, compiled by XLA) the product is
  kept out of XLA's fusions, so that it runs on all cores, and within
  :func:`transposed_kernels` it reads each kernel from a copy laid out row by output;
  :func:`tied_logits` multiplies by a token embedding's table as it lies.
* :func:`training_activation`: the exact GELU in training, with its derivative written
  out and computed in float32. Left to autodiff, the derivative of ``erfc`` becomes a
  chain of element-wise passes, and in bfloat16 each of them converts every element
  (TensorFlow's ``Erfc`` runs ~4x slower in bfloat16 than in float32).
* :func:`token_rows`: in training, the products of a layer on the rows of real tokens
  only. Padding is never attended to and never reaches a loss, so what the layers compute
  for it changes nothing the model learns; a batch padded to 128 tokens whose texts hold
  62 on average spends half its products on padding.
* :class:`Dropout`: the mask from 16 random bits per element, two per 32-bit draw, where
  Keras draws a float per element: half the random numbers, and the draw is most of
  dropout's cost. Inference reaches none of the last three.

``python -m bench train`` measures what they gain (docs/benchmarks.md, "Training"). With the fast
paths off (``KERASBERT_FAST=0``, :func:`kerasbert.internals.fast_paths`) every backend
gets Keras's own expressions.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

import keras
import numpy as np
from keras import ops

from kerasbert import hardware, internals
from kerasbert.models import names

#: Dropout keeps an element when its 16 random bits are at least round(rate * 2**16).
DROPOUT_BITS = 16
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_separate = threading.local()


def _tensorflow() -> ModuleType | None:
    """TensorFlow where the fast forms apply (its backend, the fast paths on), else None."""
    if keras.backend.backend() != "tensorflow" or not internals.fast_paths_enabled("kernels"):
        return None
    import tensorflow as tf

    return tf


def affine(rows: Any, kernel: Any, bias: Any) -> Any:
    """``rows @ kernel + bias`` for 2-D ``rows`` (``bias`` may be None).

    On TensorFlow it is written as ``MatMul`` + ``BiasAdd``: the pair that TensorFlow's
    graph optimizer hands to oneDNN as one fused product, with a GELU or ReLU that follows
    folded in too. Keras's ``matmul + add`` (an ``AddV2``) is not fused, and its
    separate bias and GELU passes cost as much as the product itself in bfloat16
    (``bench/``). Other backends get the plain expression.
    """
    if bias is None:  # RoFormer-v2's bias-free layers
        return ops.matmul(rows, kernel)
    tf = _tensorflow()
    if tf is not None:
        copy = getattr(_separate, "transposed", {}).get(id(kernel))
        if copy is not None and copy.dtype == rows.dtype:
            product = tf.matmul(rows, copy, transpose_b=True)
        else:
            product = tf.matmul(rows, ops.convert_to_tensor(kernel))
        return tf.nn.bias_add(_kept_apart(product), ops.convert_to_tensor(bias))
    return ops.matmul(rows, kernel) + bias


def _kept_apart(product: Any) -> Any:
    """``product`` behind an XLA optimization barrier within :func:`separate_products`;
    outside it, ``product`` itself."""
    if not getattr(_separate, "on", False):
        return product
    from tensorflow.compiler.tf2xla.python import xla

    (product,) = xla.optimization_barrier(product)
    return product


@contextlib.contextmanager
def separate_products() -> Iterator[None]:
    """Within it, :func:`affine` traced for XLA (TensorFlow backend) keeps each product
    apart from the bias that follows, behind an optimization barrier.

    XLA's CPU compiler fuses ``dot + bias`` into one loop that runs on one core; alone, the
    product goes to Eigen's matrix product, which uses them all. For the few rows of
    incremental decoding this measured 1.15x the tokens per second of greedy GPT-2 small
    decoding at batch 1 on 2 cores (the same loop traced with and without it, run one after
    the other: 30.5 and 35.2 tokens/s); for the many rows of a batch it changed nothing
    measurable. Only XLA programs may be traced within it (the
    barrier is an XLA operation); this thread only.
    """
    before = getattr(_separate, "on", False)
    _separate.on = True
    try:
        yield
    finally:
        _separate.on = before


@contextlib.contextmanager
def transposed_kernels(layers: Iterable[keras.layers.Layer]) -> Iterator[None]:
    """Within it, :func:`affine` multiplies by a transposed copy of each 2-D kernel of
    ``layers`` (``rows @ copy^T``), made once when it is entered. Enter it inside an XLA
    trace (TensorFlow backend), around a decoding loop: the copies are made once per call
    and read at every step.

    XLA's CPU compiler multiplies the one row or few rows of a decoding step by a
    ``(in, out)`` kernel slower than by its ``(out, in)`` transpose, which it reads one
    output's weights after another: greedy GPT-2 small decoding (128 new tokens) on 2
    cores of a Xeon with AVX-512 measured 34.2 and 36.1 tokens/s at batch 1 in two runs
    against 31.5 without the copies (run between them), 143.3 and 148.7 against 142.0 at
    batch 8. The copies are as large as the kernels and live while the program runs; an
    optimization barrier keeps XLA from folding the transpose back into the products. Each
    copy is cast to its layer's compute dtype. This thread only.

    Args:
        layers: the Keras layers whose kernels (2-D weights named ``*kernel``) are copied.
    """
    tf = _tensorflow()
    copies: dict[int, Any] = {}
    if tf is not None:
        from tensorflow.compiler.tf2xla.python import xla

        for layer in layers:
            for weight in layer.weights:
                if len(weight.shape) == 2 and weight.path.endswith("kernel"):
                    copy = tf.transpose(tf.cast(ops.convert_to_tensor(weight),
                                                layer.compute_dtype))
                    (copies[id(weight)],) = xla.optimization_barrier(copy)
    before = getattr(_separate, "transposed", {})
    _separate.transposed = copies
    try:
        yield
    finally:
        _separate.transposed = before


def tied_logits(rows: Any, embedding: keras.layers.ReversibleEmbedding) -> Any:
    """``rows @ table^T``: the logits of a token embedding's transposed table (its
    ``reverse=True`` call, with tied weights), for 2-D ``rows``.

    On TensorFlow the product reads the table as it lies, each token's row after the
    other, where Keras's ``matmul(rows, transpose(table))`` traced for XLA makes its CPU
    compiler write the transposed table out first at every call, in one loop fused with
    the product, on one core: at GPT-2 small's 50,257 x 768 table, three passes over 154 MB
    a decoding step (greedy GPT-2 small at batch 1, 2 cores with AVX-512: 37.0 and 39.6
    tokens/s in two runs, against 32.5 and 34.2 with Keras's call; at batch 8 no change
    beyond the runs' spread). Within :func:`separate_products` the product also stands
    apart from what follows. Elsewhere (another backend, an untied or recast output
    matrix) the layer's own call.
    """
    tf = _tensorflow()
    if tf is None or not embedding.tie_weights or embedding.reverse_dtype is not None \
            or embedding.logit_soft_cap is not None:
        return embedding(rows, reverse=True)
    table = tf.cast(ops.convert_to_tensor(embedding.embeddings), rows.dtype)
    return _kept_apart(tf.matmul(rows, table, transpose_b=True))


def keras_attention(query: Any, key: Any, value: Any, bias: Any) -> Any:
    """``softmax(query @ key^T + bias) @ value`` of heads, each ``(batch, heads, length,
    size)`` (``query`` already scaled), by Keras's own ``keras.ops.dot_product_attention`` on
    JAX and PyTorch (their fused kernels, flash attention on a GPU where it applies), or None
    on TensorFlow, where :func:`~kerasbert.models.layers.attend`'s two batched products run
    on oneDNN's GEMMs, and where the heads' sizes differ (GAU-α's values)."""
    if keras.backend.backend() not in ("jax", "torch") or value.shape[-1] != query.shape[-1]:
        return None
    moved = [ops.transpose(x, (0, 2, 1, 3)) for x in (query, key, value)]  # (B, T, N, D)
    context = ops.dot_product_attention(*moved, bias=bias, scale=1.0)
    return ops.transpose(context, (0, 2, 1, 3))


def checked_below(values: Any, limit: int, message: str) -> Any:
    """``values`` (integers, any shape) once each is checked to lie in ``[0, limit)``.

    Concrete values (NumPy, eager TensorFlow) are checked at once: ``ValueError(message)``
    with the first value outside. In a TensorFlow graph the result depends on an assertion,
    so nothing reads it before the check passed: ``InvalidArgumentError`` with ``message``
    (an index past a table raises on a CPU but reads zeros on a GPU). XLA drops assertions;
    callers also mark what lies outside (:func:`outside_as_nan`).

    Example:
        >>> checked_below(np.array([0, 3]), 4, "ids past the table").tolist()
        [0, 3]
        >>> checked_below(np.array([5]), 4, "ids past the table")
        Traceback (most recent call last):
        ValueError: ids past the table (found 5)
    """
    if isinstance(values, (int, np.integer, np.ndarray)) or _is_eager(values):
        found = np.asarray(values if isinstance(values, (int, np.integer, np.ndarray))
                           else ops.convert_to_numpy(values))
        outside = found[(found < 0) | (found >= limit)]
        if outside.size:
            raise ValueError(f"{message} (found {int(outside.flat[0])})")
        return values
    if keras.backend.backend() != "tensorflow":
        return values
    import tensorflow as tf

    checks = [tf.debugging.assert_non_negative(values, message=message),
              tf.debugging.assert_less(values, tf.cast(limit, values.dtype), message=message)]
    with tf.control_dependencies(checks):
        return tf.identity(values)


def outside_as_nan(rows: Any, values: Any, limit: int) -> Any:
    """``rows`` (``values.shape + (width,)``, the rows a lookup read for ``values``) with NaN
    where a value lies outside ``[0, limit)``: under XLA, which drops
    :func:`checked_below`'s assertion and clamps the lookup, the output turns NaN (a training
    run stops on its loss) instead of reading the table's last row in silence."""
    inside = ops.logical_and(ops.greater_equal(values, 0), ops.less(values, limit))
    return ops.where(ops.expand_dims(inside, -1), rows, ops.cast(math.nan, rows.dtype))


def _is_eager(values: Any) -> bool:
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return isinstance(values, tf.Tensor) and tf.executing_eagerly() and hasattr(values, "numpy")


def is_variable(cache: Any) -> bool:
    """Whether ``cache`` is a TensorFlow variable (a decoding cache written in place)."""
    tf = _tensorflow()
    return tf is not None and isinstance(cache, tf.Variable)


def written_in_place(cache: Any, update: Any, axis: int, start: Any) -> Any:
    """``cache`` (a 4-D TensorFlow variable) with ``update`` written into it along ``axis``
    from index ``start``, where it lies, and read back.

    Outside XLA a tensor cannot change: a cache carried through a loop as a tensor is
    copied whole at every step to write one token's keys (GPT-2 small at batch 8 and 160
    slots: 47 MB a step). A variable's slice assignment writes only the new slots.
    """
    import tensorflow as tf

    end = start + tf.shape(update)[axis]
    begin = [0, 0, 0, 0]
    stop = list(cache.shape)
    begin[axis], stop[axis] = start, end
    cache[tuple(slice(b, e) for b, e in zip(begin, stop))].assign(
        tf.cast(update, cache.dtype))
    return cache.read_value()


@functools.cache
def _exact_gelu_with_derivative() -> Callable[[Any], Any]:
    import tensorflow as tf

    @tf.custom_gradient
    def gelu(x: Any) -> tuple[Any, Callable[[Any], Any]]:
        wide = tf.cast(x, tf.float32)
        value = tf.nn.gelu(wide, approximate=False)

        def derivative(upstream: Any) -> Any:
            # d/dx x * Phi(x) = Phi(x) + x * phi(x), Phi the normal CDF, phi its density.
            slope = (0.5 * tf.math.erfc(-wide * _SQRT_HALF)
                     + wide * tf.exp(-0.5 * tf.square(wide)) * _INV_SQRT_2PI)
            return tf.cast(tf.cast(upstream, tf.float32) * slope, x.dtype)

        return tf.cast(value, x.dtype), derivative

    return gelu


def training_activation(activation: Callable[..., Any]) -> Callable[..., Any]:
    """The form of an activation function to train with: the same function, but for the
    exact GELU (``keras.activations.gelu``) on TensorFlow, whose derivative is written out
    in float32."""
    if activation is not keras.activations.gelu or _tensorflow() is None:
        return activation
    return _exact_gelu_with_derivative()


def token_rows(
        mask: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]] | None:
    """How to take the rows of real tokens out of a layer's rows, and put products back.

    Args:
        mask: ``(batch, length)``, True at tokens, False at padding (or None).

    Returns:
        ``(gather, spread)``: ``gather(rows)`` keeps the rows of ``(batch * length, width)``
        where ``mask`` is True, in order; ``spread(product)`` puts a product of them back as
        ``(batch * length, product width)``, zeros at padding. None without a mask, off
        TensorFlow, with the fast paths off, and under XLA (whose shapes are fixed at
        compile time). Gathering and spreading cost a pass over the rows each, against
        the products of padding saved.
    """
    tf = _tensorflow()
    if tf is None or mask is None or internals.in_xla_context():
        return None
    flat = tf.reshape(tf.cast(mask, tf.bool), [-1])
    index = tf.where(flat)  # (tokens, 1) int64
    count = tf.size(flat, out_type=tf.int64)

    def gather(rows: Any) -> Any:
        return tf.gather_nd(rows, index)

    def spread(product: Any) -> Any:
        return tf.scatter_nd(index, product,
                             tf.stack([count, tf.shape(product, out_type=tf.int64)[1]]))

    return gather, spread


def _dropout(tf: ModuleType, inputs: Any, rate: float, seed: Any) -> Any:
    """``inputs`` with each element zeroed with probability ``rate`` (to 2**-16 on a CPU),
    the rest scaled by ``1 / (1 - rate)``; the mask drawn from ``seed`` (a [2] int32).

    Where TensorFlow sees a GPU, the mask is one float draw per element: a GPU draws
    them as fast, and has few kernels for 16-bit unsigned integers (an op without one
    would run on the CPU, the mask copied over at every layer)."""
    shape = tf.shape(inputs)
    if hardware.visible_gpus():
        keep = tf.random.stateless_uniform(shape, seed) >= rate
    else:
        size = tf.size(inputs)
        words = tf.random.stateless_uniform(  # 32 random bits give two 16-bit draws
            [(size + 1) // 2], seed, minval=None, maxval=None, dtype=tf.uint32)
        draws = tf.slice(tf.reshape(tf.bitcast(words, tf.uint16), [-1]), [0], [size])
        keep = tf.reshape(draws, shape) >= round(rate * 2 ** DROPOUT_BITS)
    scaled = inputs * tf.cast(1.0 / (1.0 - rate), inputs.dtype)
    return tf.where(keep, scaled, tf.zeros((), inputs.dtype))


@keras.saving.register_keras_serializable(package=names.SERIALIZATION_PACKAGE)
class Dropout(keras.layers.Dropout):
    """``keras.layers.Dropout`` whose training mask costs half the random numbers on
    TensorFlow's CPU (16 bits per element; a GPU draws a float per element); elsewhere, or
    with a ``noise_shape``, Keras's own.

    The mask comes from the layer's ``seed_generator``, as Keras's does, so a seeded
    model draws the same masks run after run. The drop probability is ``rate`` rounded to
    a multiple of 2**-16 (0.1 becomes 0.100006).

    Example:
        >>> x = keras.ops.ones((4, 1000))
        >>> y = Dropout(0.1, seed=1)(x, training=True)
        >>> 0.08 < float(keras.ops.mean(keras.ops.equal(y, 0.0))) < 0.12
        True
    """

    def call(self, inputs: Any, training: bool | None = False) -> Any:
        tf = _tensorflow()
        if tf is None or not training or self.noise_shape is not None or not 0 < self.rate < 1:
            return super().call(inputs, training=training)
        return _dropout(tf, inputs, self.rate, self.next_seed())

    def next_seed(self) -> Any:
        """The seed of the next training mask, from the ``seed_generator`` (TensorFlow's
        ``[2]`` int32)."""
        tf = _tensorflow()
        seed = self.seed_generator.next()
        if tf is not None and seed.dtype != tf.int32:  # as Keras casts its seeds on TensorFlow
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return seed

    def seeded(self, seed: Any) -> Callable[..., Any]:
        """This dropout with the mask of ``seed`` (from :meth:`next_seed`), called as the
        layer is (``(inputs, training=...)``): a computation run again in the backward
        pass draws the same mask as it did forward.

        Raises:
            NotImplementedError: off TensorFlow.
        """
        tf = _tensorflow()
        if tf is None:
            raise NotImplementedError("a dropout of a given seed runs on TensorFlow only")

        def dropout(inputs: Any, training: bool | None = False) -> Any:
            if not training or self.noise_shape is not None or not 0 < self.rate < 1:
                return super(Dropout, self).call(inputs, training=training)
            return _dropout(tf, inputs, self.rate, seed)

        return dropout
