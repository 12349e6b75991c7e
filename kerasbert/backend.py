"""bert4keras's ``backend``: ``keras``, ``K`` and its tensor functions, on Keras 3.

``from kerasbert.backend import keras, K`` gives Keras 3 and a ``K`` that answers the
``keras.backend`` calls of bert4keras scripts (``K.sum``, ``K.batch_dot``, ``K.eval``,
``K.set_value`` ...) with Keras 2's arguments, defaults and results, through ``keras.ops``.
A call with no Keras 3 counterpart is refused by name (``K.placeholder``, sessions, the
global learning phase). ``K.gradients`` is TensorFlow's symbolic gradient: it works where
bert4keras's examples call it, in a loss that ``fit`` traces into its step's graph, and is
refused by name where the step runs eagerly and on JAX's and PyTorch's backends. Everything
else runs on every Keras backend.

The functions bert4keras adds (``sequence_masking``, ``multilabel_categorical_crossentropy``,
``apply_rotary_position_embeddings`` ...) are written in ``keras.ops`` with bert4keras's
signatures. What differs, and why:

- ``is_tf_keras`` is False: Keras 3 is neither of bert4keras's two Kerases.
- ``set_gelu("tanh")`` makes the models built afterwards spell ``hidden_act: "gelu"`` as
  ``gelu_approximate`` in their layers (bert4keras rewrote a global custom object instead),
  so a saved model keeps its GELU whatever is chosen when it is loaded.
- ``search_layer`` of a model also searches the models inside it (bert4keras looked only at
  its own layers there, then back from its inputs). Given the ``y_pred`` of a loss inside
  ``fit``'s step (a plain tensor, which Keras 3 no longer ties to its layer), it walks back
  from the matching output of the model whose loss is being computed.
- ``RECOMPUTE=1`` makes ``recompute_grad`` recompute the layer call it decorates in the
  backward pass (``keras.remat``), as bert4keras does, and the models built afterwards
  recompute their attention and feed-forward layers (``build_transformer_model``'s
  ``recompute``, which reads the variable when a model is built, not at import).
- Importing the module registers nothing with Keras (bert4keras filled the custom objects
  at import); ``custom_objects`` is there to pass to ``load_model``.

Example:
    >>> import numpy as np
    >>> K.eval(K.batch_dot(np.ones((2, 3, 4)), np.ones((2, 4, 5)), axes=(2, 1))).shape
    (2, 3, 5)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import keras
import numpy as np
import tensorflow as tf  # bert4keras's scripts import tf from here
from keras import ops

from kerasbert import internals
from kerasbert.models.layers import (  # noqa: F401 (bert4keras's names)
    NORMALIZATIONS,
    gelu_version,
    normalized,
    recompute_requested,
    rematerialized,
    set_gelu,
)
from kerasbert.models.positions import rotated, sinusoid

__all__ = ["K", "keras", "tf"]

# Tensors are typed Any: Keras 3 has no one tensor type (symbolic KerasTensors while a model
# is built, the backend's tensors, NumPy arrays and numbers all go in).
_F = TypeVar("_F", bound=Callable[..., Any])

is_tf_keras = False
do_recompute = recompute_requested()


class NoKeras3Counterpart(NotImplementedError, AttributeError):
    """A ``keras.backend`` name Keras 3 has nothing for (an AttributeError too, so that
    ``getattr(K, name, None)`` and ``hasattr`` answer as for a missing name)."""


_REFUSED = {
    "placeholder": "Keras 3 has no placeholders; use keras.Input",
    "get_session": "Keras 3 has no session", "set_session": "Keras 3 has no session",
    "set_learning_phase": "Keras 3 has no global learning phase; pass training= to the "
                          "model's call (fit passes True, predict and evaluate False)",
    "rnn": "use keras.layers.RNN", "ctc_batch_cost": "use keras.losses.CTC",
}


def _keras2_reduction(reduce: Callable[..., Any]) -> Callable[..., Any]:
    def reduction(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        if _is_static_shape(x) and hasattr(np, reduce.__name__):
            # JAX and PyTorch give K.shape as Python ints: K.prod(K.shape(x)[:2]) stays a
            # number, which a reshape inside a compiled step needs (TensorFlow's is a tensor).
            return getattr(np, reduce.__name__)(np.asarray(x), axis=axis, keepdims=keepdims)
        if keras.backend.standardize_dtype(getattr(x, "dtype", "float32")) == "bool":
            x = ops.cast(x, keras.config.floatx())
        return reduce(x, axis=axis, keepdims=keepdims)
    reduction.__doc__ = f"``{reduce.__name__}(x, axis=None, keepdims=False)``; bools count as 1."
    return reduction


def _is_static_shape(x: Any) -> bool:
    """Whether ``x`` is a shape of Python ints (what ``K.shape`` gives off TensorFlow)."""
    return isinstance(x, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in x)


def _is_flag(training: Any) -> bool:
    """Whether a training flag is a Python value (None, a bool, 0 or 1), not a tensor."""
    return training is None or isinstance(training, (bool, int, np.bool_, np.integer))


def _letters(n: int, skip: str = "") -> list[str]:
    return [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in skip][:n]


class _Backend:
    """``keras.backend`` as Keras 2 had it: ``K.sum(x, axis=None, keepdims=False)``,
    ``K.switch(condition, then, else)``, ``K.cumsum(x, axis=0)`` ... on ``keras.ops``."""

    # set below, from the module's functions of the same names
    reshape: Callable[..., Any]
    flatten: Callable[..., Any]
    where: Callable[..., Any]

    # values, variables and settings
    eval = get_value = staticmethod(ops.convert_to_numpy)
    floatx, epsilon = staticmethod(keras.config.floatx), staticmethod(keras.config.epsilon)
    set_floatx = staticmethod(keras.config.set_floatx)
    set_epsilon = staticmethod(keras.config.set_epsilon)
    image_data_format = staticmethod(keras.config.image_data_format)
    backend = staticmethod(keras.config.backend)
    clear_session = staticmethod(keras.backend.clear_session)
    is_keras_tensor = staticmethod(keras.backend.is_keras_tensor)
    name_scope = staticmethod(keras.name_scope)
    cast, shape = staticmethod(ops.cast), staticmethod(ops.shape)
    stop_gradient = staticmethod(ops.stop_gradient)

    @staticmethod
    def symbolic(f: _F) -> _F:
        """Identity (bert4keras's decorator for old Keras)."""
        return f

    @staticmethod
    def set_value(x: Any, value: Any) -> None:
        x.assign(value)

    @staticmethod
    def gradients(loss: Any, variables: Any) -> list[Any]:
        """``tf.gradients``: the gradients of ``loss`` with respect to ``variables`` (Keras
        variables, TensorFlow variables or tensors; one or a list), in a graph, such as a
        loss that ``fit`` traces into its step. An embedding matrix's gradient is an
        ``IndexedSlices`` (``.values``: one row per token looked up), as TensorFlow gives it;
        None for a variable ``loss`` does not depend on, but while Keras runs the loss on
        placeholders to make ``fit``'s state, where a Keras variable's gradient has no rows.

        Raises:
            NoKeras3Counterpart: TensorFlow runs eagerly (``run_eagerly=True``, or outside
                ``fit``), where no symbolic gradient exists; or Keras runs on another
                backend (JAX, PyTorch), which has no gradient of a tensor in a graph.
        """
        if keras.backend.backend() != "tensorflow":
            raise NoKeras3Counterpart(
                "K.gradients is TensorFlow's symbolic gradient, and Keras runs on "
                f"{keras.backend.backend()!r}; set KERAS_BACKEND=tensorflow for it, or take "
                "the gradient in the backend's own way (jax.grad, torch.autograd.grad)")
        if tf.executing_eagerly():
            raise NoKeras3Counterpart(
                "K.gradients takes a symbolic gradient, which exists only in a graph, and "
                "TensorFlow runs eagerly here; call it in a loss that fit traces (compile "
                "without run_eagerly=True), or use tf.GradientTape")
        variables = variables if isinstance(variables, (list, tuple)) else [variables]
        # A Keras variable wraps the TensorFlow variable its layers read: differentiate by that.
        gradients = tf.gradients(loss, [v.value if isinstance(v, keras.Variable) else v
                                        for v in variables])
        if internals.in_symbolic_scope():
            # Keras runs the loss on placeholders, apart from the model's variables, to make
            # fit's state ahead of the step: a gradient with no rows keeps the loss's shape.
            gradients = [_no_rows(v) if g is None and isinstance(v, keras.Variable) else g
                         for v, g in zip(variables, gradients)]
        return gradients

    @staticmethod
    def batch_get_value(tensors: Iterable[Any]) -> list[np.ndarray]:
        return [ops.convert_to_numpy(t) for t in tensors]

    @staticmethod
    def batch_set_value(tuples: Iterable[tuple[Any, Any]]) -> None:
        for x, value in tuples:
            x.assign(value)

    @staticmethod
    def update(x: Any, new_x: Any) -> Any:
        return x.assign(new_x)

    @staticmethod
    def update_add(x: Any, increment: Any) -> Any:
        return x.assign_add(increment)

    @staticmethod
    def update_sub(x: Any, decrement: Any) -> Any:
        return x.assign_sub(decrement)

    @staticmethod
    def variable(value: Any, dtype: str | None = None, name: str | None = None,
                 constraint: Any = None) -> keras.Variable:
        if constraint is not None:
            raise NotImplementedError("K.variable(constraint=...): Keras 3 variables take no "
                                      "constraint; constrain the layer's weight instead")
        return keras.Variable(value, dtype=dtype or keras.config.floatx(), name=name)

    @staticmethod
    def constant(value: Any, dtype: str | None = None, shape: Sequence[int] | None = None,
                 name: str | None = None) -> Any:
        value = np.full(shape, value) if shape is not None else value
        return ops.convert_to_tensor(value, dtype=dtype or keras.config.floatx())

    @staticmethod
    def count_params(x: Any) -> int:
        return int(np.prod(x.shape))

    @staticmethod
    def dtype(x: Any) -> str:
        return keras.backend.standardize_dtype(x.dtype)

    @staticmethod
    def int_shape(x: Any) -> tuple[int | None, ...]:
        """The static shape, None where unknown."""
        return tuple(x.shape)

    @staticmethod
    def ndim(x: Any) -> int:
        return len(x.shape)

    # reductions and element-wise math
    sum, mean = staticmethod(_keras2_reduction(ops.sum)), staticmethod(_keras2_reduction(ops.mean))
    max, min = staticmethod(_keras2_reduction(ops.max)), staticmethod(_keras2_reduction(ops.min))
    prod, std = staticmethod(_keras2_reduction(ops.prod)), staticmethod(_keras2_reduction(ops.std))
    var = staticmethod(_keras2_reduction(ops.var))
    logsumexp = staticmethod(_keras2_reduction(ops.logsumexp))
    any, all = staticmethod(ops.any), staticmethod(ops.all)
    exp, log, square = staticmethod(ops.exp), staticmethod(ops.log), staticmethod(ops.square)
    abs, sign, round = staticmethod(ops.abs), staticmethod(ops.sign), staticmethod(ops.round)
    sin, cos = staticmethod(ops.sin), staticmethod(ops.cos)
    pow, maximum, minimum = staticmethod(ops.power), staticmethod(ops.maximum), staticmethod(
        ops.minimum)
    equal, not_equal = staticmethod(ops.equal), staticmethod(ops.not_equal)
    greater, greater_equal = staticmethod(ops.greater), staticmethod(ops.greater_equal)
    less, less_equal = staticmethod(ops.less), staticmethod(ops.less_equal)

    @staticmethod
    def sqrt(x: Any) -> Any:
        """Square root, negative values taken as 0 (Keras 2's)."""
        return ops.sqrt(ops.maximum(x, 0))

    @staticmethod
    def cumsum(x: Any, axis: int = 0) -> Any:
        return ops.cumsum(x, axis=axis)

    @staticmethod
    def cumprod(x: Any, axis: int = 0) -> Any:
        return ops.cumprod(x, axis=axis)

    @staticmethod
    def clip(x: Any, min_value: float | None, max_value: float | None) -> Any:
        if isinstance(min_value, (int, float)) and isinstance(max_value, (int, float)):
            max_value = max(max_value, min_value)
        return ops.clip(x, -np.inf if min_value is None else min_value,
                        np.inf if max_value is None else max_value)

    # shapes and indices
    concatenate = staticmethod(lambda tensors, axis=-1: ops.concatenate(tensors, axis=axis))
    stack = staticmethod(lambda x, axis=0: ops.stack(x, axis=axis))
    expand_dims = staticmethod(lambda x, axis=-1: ops.expand_dims(x, axis))
    squeeze = staticmethod(ops.squeeze)
    permute_dimensions = staticmethod(lambda x, pattern: ops.transpose(x, pattern))
    transpose = staticmethod(ops.transpose)
    repeat_elements = staticmethod(lambda x, rep, axis: ops.repeat(x, rep, axis=axis))
    tile = staticmethod(ops.tile)
    reverse = staticmethod(lambda x, axes: ops.flip(x, axis=axes))
    gather = staticmethod(lambda reference, indices: ops.take(reference, indices, axis=0))
    one_hot = staticmethod(lambda indices, num_classes: ops.one_hot(indices, num_classes))
    argmax = staticmethod(lambda x, axis=-1: ops.argmax(x, axis=axis))
    argmin = staticmethod(lambda x, axis=-1: ops.argmin(x, axis=axis))
    ones_like = staticmethod(lambda x, dtype=None, name=None: ops.ones_like(x, dtype=dtype))
    zeros_like = staticmethod(lambda x, dtype=None, name=None: ops.zeros_like(x, dtype=dtype))
    map_fn = staticmethod(lambda fn, elems, name=None, dtype=None: ops.map(fn, elems))

    @staticmethod
    def ones(shape: Sequence[int], dtype: str | None = None, name: str | None = None) -> Any:
        return ops.ones(shape, dtype=dtype or keras.config.floatx())

    @staticmethod
    def zeros(shape: Sequence[int], dtype: str | None = None, name: str | None = None) -> Any:
        return ops.zeros(shape, dtype=dtype or keras.config.floatx())

    @staticmethod
    def eye(size: int, dtype: str | None = None, name: str | None = None) -> Any:
        return ops.eye(size, dtype=dtype or keras.config.floatx())

    @staticmethod
    def arange(start: int, stop: int | None = None, step: int = 1, dtype: str = "int32") -> Any:
        if stop is None and start < 0:
            start = 0
        result = ops.arange(start, stop, step)
        return result if dtype == "int32" else ops.cast(result, dtype)

    @staticmethod
    def batch_flatten(x: Any) -> Any:
        return ops.reshape(x, (-1, int(np.prod(x.shape[1:]))))

    @staticmethod
    def repeat(x: Any, n: int) -> Any:
        """``(batch, dim)`` -> ``(batch, n, dim)``."""
        return ops.repeat(ops.expand_dims(x, 1), n, axis=1)

    @staticmethod
    def dot(x: Any, y: Any) -> Any:
        """numpy's ``dot``: ``x``'s last axis with ``y``'s second to last."""
        xs, ys = _letters(len(x.shape)), _letters(len(y.shape), "abcdefghijklm")
        ys[-2 if len(ys) > 1 else 0] = xs[-1]
        out = xs[:-1] + [c for c in ys if c != xs[-1]]
        return ops.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)

    @staticmethod
    def batch_dot(x: Any, y: Any, axes: int | Sequence[int] | None = None) -> Any:
        """Per batch row, ``x``'s axis ``axes[0]`` with ``y``'s ``axes[1]`` (Keras 2's
        shapes: two rank-2 inputs give ``(batch, 1)``)."""
        nx, ny = len(x.shape), len(y.shape)
        if axes is None:
            axes = (nx - 1, ny - 2)
        ax, ay = (axes, axes) if isinstance(axes, int) else axes
        ax, ay = ax % nx, ay % ny
        if 0 in (ax, ay):
            raise ValueError(f"K.batch_dot cannot sum over the batch axis 0; got axes={axes}")
        xs = ["a"] + _letters(nx - 1, "az")
        ys = ["a"] + _letters(ny - 1, "a" + "".join(xs))
        ys[ay] = xs[ax]
        out = xs[:ax] + xs[ax + 1:] + [c for c in ys[1:] if c != xs[ax]]
        result = ops.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)
        return ops.expand_dims(result, 1) if nx == ny == 2 else result

    @staticmethod
    def switch(condition: Any, then_expression: Any, else_expression: Any) -> Any:
        """``then`` where ``condition``, else ``else``; callables are called; a condition of
        lower rank applies to whole rows."""
        then = then_expression() if callable(then_expression) else then_expression
        other = else_expression() if callable(else_expression) else else_expression
        condition = ops.cast(condition, "bool")
        while len(condition.shape) and len(condition.shape) < len(then.shape):
            condition = ops.expand_dims(condition, -1)
        return ops.where(condition, then, other)

    @staticmethod
    def learning_phase() -> Any:
        """1 inside a layer call made with ``training=True`` (``fit``'s), else 0: Keras 3's
        training flag of the call in progress, which it hands to every inner layer (also
        one whose ``call`` takes no ``training``); a tensor where the call was given one."""
        training = internals.training_of_current_call()
        return int(bool(training)) if _is_flag(training) else ops.cast(training, "int32")

    @staticmethod
    def in_train_phase(x: Any, alt: Any, training: Any = None) -> Any:
        """``x`` in training, ``alt`` otherwise (callables are called). Without ``training``
        the phase is that of the layer call in progress (:meth:`learning_phase`), as
        bert4keras's layers read it: ``fit`` trains, ``predict`` and a bare call do not."""
        if training is None:
            training = internals.training_of_current_call()
        x, alt = (x() if callable(x) else x), (alt() if callable(alt) else alt)
        return (x if training else alt) if _is_flag(training) else _Backend.switch(training, x, alt)

    @staticmethod
    def in_test_phase(x: Any, alt: Any, training: bool | None = None) -> Any:
        return _Backend.in_train_phase(alt, x, training)

    @staticmethod
    def function(inputs: Any, outputs: Any, updates: Any = None, name: str | None = None,
                 **kwargs: Any) -> Callable[[Any], Any]:
        """A callable from input values to output values (numpy), for symbolic inputs and
        outputs of one functional graph."""
        if updates or not all(map(keras.backend.is_keras_tensor, list(inputs) + list(outputs))):
            raise NoKeras3Counterpart("K.function works on Keras inputs and outputs of one "
                                      "graph only, without updates; build keras.Model(inputs, "
                                      "outputs) or use tf.GradientTape")
        model = keras.Model(list(inputs), list(outputs))

        def call(values: Any) -> list[Any]:
            results = model(list(values))
            results = results if isinstance(results, (list, tuple)) else [results]
            return [ops.convert_to_numpy(r) for r in results]
        return call

    # activations and losses
    softmax = staticmethod(keras.activations.softmax)
    sigmoid, tanh = staticmethod(ops.sigmoid), staticmethod(ops.tanh)
    softplus, softsign = staticmethod(ops.softplus), staticmethod(ops.softsign)
    elu = staticmethod(lambda x, alpha=1.0: keras.activations.elu(x, alpha=alpha))

    @staticmethod
    def relu(x: Any, alpha: float = 0.0, max_value: float | None = None,
             threshold: float = 0.0) -> Any:
        return keras.activations.relu(x, negative_slope=alpha, max_value=max_value,
                                      threshold=threshold)

    @staticmethod
    def hard_sigmoid(x: Any) -> Any:
        """Keras 2's ``clip(0.2 x + 0.5, 0, 1)`` (Keras 3's slope is 1/6)."""
        return ops.clip(x * 0.2 + 0.5, 0.0, 1.0)

    @staticmethod
    def l2_normalize(x: Any, axis: int | None = None) -> Any:
        return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=axis, keepdims=True),
                                         1e-12))

    @staticmethod
    def categorical_crossentropy(target: Any, output: Any, from_logits: bool = False,
                                 axis: int = -1) -> Any:
        return ops.categorical_crossentropy(target, output, from_logits=from_logits, axis=axis)

    @staticmethod
    def sparse_categorical_crossentropy(target: Any, output: Any, from_logits: bool = False,
                                        axis: int = -1) -> Any:
        return ops.sparse_categorical_crossentropy(target, output, from_logits=from_logits,
                                                   axis=axis)

    @staticmethod
    def binary_crossentropy(target: Any, output: Any, from_logits: bool = False) -> Any:
        if from_logits:
            return ops.binary_crossentropy(target, output, from_logits=True)
        eps = keras.config.epsilon()  # Keras 2 clips, then adds epsilon inside the logs
        output = ops.clip(output, eps, 1.0 - eps)
        return -(target * ops.log(output + eps) + (1 - target) * ops.log(1 - output + eps))

    @staticmethod
    def bias_add(x: Any, bias: Any, data_format: str | None = None) -> Any:
        return x + bias

    # random values
    @staticmethod
    def random_normal(shape: Sequence[int], mean: float = 0.0, stddev: float = 1.0,
                      dtype: str | None = None, seed: int | None = None) -> Any:
        return keras.random.normal(shape, mean, stddev, dtype or keras.config.floatx(), seed)

    @staticmethod
    def random_uniform(shape: Sequence[int], minval: float = 0.0, maxval: float = 1.0,
                       dtype: str | None = None, seed: int | None = None) -> Any:
        return keras.random.uniform(shape, minval, maxval, dtype or keras.config.floatx(), seed)

    @staticmethod
    def truncated_normal(shape: Sequence[int], mean: float = 0.0, stddev: float = 1.0,
                         dtype: str | None = None, seed: int | None = None) -> Any:
        return keras.random.truncated_normal(shape, mean, stddev,
                                             dtype or keras.config.floatx(), seed)

    @staticmethod
    def random_binomial(shape: Sequence[int], p: float = 0.0, dtype: str | None = None,
                        seed: int | None = None) -> Any:
        draw = keras.random.uniform(shape, seed=seed)
        return ops.cast(draw < p, dtype or keras.config.floatx())

    @staticmethod
    def dropout(x: Any, level: float, noise_shape: Sequence[int] | None = None,
                seed: int | None = None) -> Any:
        return keras.random.dropout(x, level, noise_shape=noise_shape, seed=seed)

    def __getattr__(self, name: str) -> Any:
        reason = _REFUSED.get(name, "use keras.ops")
        raise NoKeras3Counterpart(f"K.{name} has no Keras 3 counterpart in "
                                  f"kerasbert.backend.K: {reason}")


def _no_rows(variable: keras.Variable) -> Any:
    """A gradient of ``variable`` with no rows: ``.values`` is empty, and as a tensor it is
    zeros of the variable's shape."""
    shape = tuple(variable.shape)
    return tf.IndexedSlices(tf.zeros((0, *shape[1:]), variable.dtype),
                            tf.zeros((0,), tf.int64), tf.constant(shape, tf.int64))


K = _Backend()
"""Keras 2's ``keras.backend`` functions that bert4keras scripts call (``K.sum``,
``K.batch_dot``, ``K.int_shape``...), each on ``keras.ops``; a name Keras 3 has nothing for
raises :class:`NoKeras3Counterpart`, saying what to use."""


# ------------------------------------------------------- bert4keras's own backend functions
def gelu_erf(x: Any) -> Any:
    """GELU by the error function: ``0.5 x (1 + erf(x / sqrt 2))``."""
    return keras.activations.gelu(x, approximate=False)


def gelu_tanh(x: Any) -> Any:
    """GELU's tanh approximation."""
    return keras.activations.gelu(x, approximate=True)




def swish(x: Any) -> Any:
    """Swish (SiLU): ``x * sigmoid(x)``."""
    return keras.activations.silu(x)


def leaky_relu(x: Any, alpha: float = 0.2) -> Any:
    """Leaky ReLU with slope ``alpha`` below zero (bert4keras's default 0.2)."""
    return keras.activations.leaky_relu(x, negative_slope=alpha)


def get_available_gpus() -> list[str]:
    """The names of the visible GPUs (TensorFlow's ``/device:GPU:0``... on its backend,
    JAX's ``gpu:0``... on JAX, PyTorch's ``cuda:0``... on PyTorch)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return [f"gpu:{device.id}" for device in jax.devices() if device.platform == "gpu"]
    if backend == "torch":
        import torch

        return [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    return [device.name for device in tf.config.list_logical_devices("GPU")]


def piecewise_linear(t: Any, schedule: Mapping[int, float], from_zero: bool = True) -> Any:
    """The piecewise linear function through ``schedule`` (``{step: value}``), flat after
    its last step; from ``(0, 0)`` when ``from_zero`` and the schedule does not start at 0.

    Example:
        >>> float(piecewise_linear(500, {1000: 1.0, 2000: 0.1}))
        0.5
    """
    points = sorted(schedule.items())
    if from_zero and points[0][0] != 0:
        points = [(0, 0.0)] + points
    t = ops.cast(t, keras.config.floatx())
    value = ops.ones_like(t) * points[0][1]
    for (t0, x0), (t1, x1) in zip(points, points[1:]):
        value = ops.where(t >= t0, x0 + (x1 - x0) / (t1 - t0) * (t - t0), value)
    return ops.where(t >= points[-1][0], ops.ones_like(t) * points[-1][1], value)


def search_layer(inputs: Any, name: str,
                 exclude_from: set[int] | None = None) -> keras.layers.Layer | None:
    """The layer called ``name`` found back from ``inputs``, or None: ``inputs`` is a symbolic
    tensor (``model.output``: the layer that made it, then the layers it was called on, and
    theirs, as bert4keras walks back), a layer, or a model (its layers, those of the models
    inside it, then back from the model as a layer). In a loss given to ``compile``, the
    tensors Keras 3 passes (``y_pred`` in ``fit``'s step) are searched from the model whose
    loss is being computed: back from its output that ``y_pred`` is, or, for another tensor
    or a model with no symbolic outputs, through all its layers. ``exclude_from``: the ``id``
    of the layers already searched.

    Raises:
        TypeError: ``inputs`` is a value no layer made, outside a model's loss.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
        >>> search_layer(bert.output, "Embedding-Token") is bert.get_layer("Embedding-Token")
        True
    """
    if not isinstance(inputs, keras.Operation):  # a layer, or an op on Keras tensors
        start = internals.layer_of(inputs)
        start = _in_loss(inputs) if start is None else start
        if start is None:
            raise TypeError(f"search_layer takes a symbolic tensor, a layer or a model, got "
                            f"{type(inputs).__name__}, which no layer made, outside a model's "
                            f"loss; pass the model (search_layer(model, {name!r})) or its "
                            f"output")
        if not isinstance(start, keras.Operation):
            return search_layer(start, name, exclude_from)  # the model's symbolic output
        inputs = start
    exclude_from = set() if exclude_from is None else exclude_from
    if inputs.name == name:
        return inputs
    if id(inputs) in exclude_from:
        return None
    exclude_from.add(id(inputs))
    for layer in [*getattr(inputs, "layers", ()), *internals.inbound_layers(inputs)]:
        found = search_layer(layer, name, exclude_from)
        if found is not None:
            return found
    return None


def _in_loss(tensor: Any) -> Any:
    """Where a search from ``tensor``, a tensor in a model's loss, starts: the symbolic
    output of the model that ``tensor`` is, else the model; None outside a loss (or for a
    value that is no tensor)."""
    computing = internals.model_computing_loss()
    if computing is None or not ops.is_tensor(tensor):
        return None
    model, y_pred = computing
    outputs = getattr(model, "outputs", None) or []
    predictions = keras.tree.flatten(y_pred) if y_pred is not None else []
    if len(predictions) == len(outputs):
        for prediction, output in zip(predictions, outputs):
            if prediction is tensor:
                return output
    return model


def align(tensor: Any, axes: Sequence[int], ndim: int | None = None) -> Any:
    """``tensor`` with size-1 axes added so that its axis i becomes axis ``axes[i]`` of a
    rank-``ndim`` tensor (a batch ``expand_dims``).

    Raises:
        ValueError: ``axes`` does not name every axis, or ``ndim`` is missing with a
            negative axis.
    """
    if len(axes) != len(tensor.shape):
        raise ValueError(f"align needs one axis per axis of the tensor: axes={axes}, "
                         f"tensor rank {len(tensor.shape)}")
    if ndim is None and min(axes) < 0:
        raise ValueError(f"align needs ndim with negative axes={axes}")
    ndim = ndim or max(axes) + 1
    kept = {axis % ndim for axis in axes}
    for position in range(ndim):
        if position not in kept:
            tensor = ops.expand_dims(tensor, position)
    return tensor


def reshape(tensor: Any, *args: Any) -> Any:
    """``reshape(x, shape)``, or ``reshape(x, shape1, axis1, shape2, axis2, ...)``: each
    ``axis`` split into ``shape`` (one -1 allowed)."""
    if len(args) == 1:
        return ops.reshape(tensor, args[0])
    dims = [[d if d is not None else ops.shape(tensor)[i]] for i, d in enumerate(tensor.shape)]
    for shape, axis in zip(args[::2], args[1::2]):
        shape = list(shape)
        if -1 in shape:
            shape[shape.index(-1)] = -dims[axis][0] // int(np.prod(shape))
        dims[axis] = shape
    return ops.reshape(tensor, [d for group in dims for d in group])


def flatten(tensor: Any, start: int | None = None, end: int | None = None) -> Any:
    """``tensor`` with axes ``start`` to ``end`` (exclusive) merged into one."""
    start, end = start or 0, end or len(tensor.shape)
    dims = [d if d is not None else ops.shape(tensor)[i] for i, d in enumerate(tensor.shape)]
    return ops.reshape(tensor, dims[:start] + [-1] + dims[end:])


def dtype(x: Any) -> str | None:
    """``x``'s dtype as a string, or None for what has none (a Python number)."""
    return keras.backend.standardize_dtype(x.dtype) if hasattr(x, "dtype") else None


def where(cond: Any, x: Any, y: Any) -> Any:
    """``ops.where`` with ``cond`` made bool (broadcasting, numbers as tensors)."""
    return ops.where(ops.cast(cond, "bool"), x, y)


def sequence_masking(x: Any, mask: Any = None, value: float | str = 0,
                     axis: int | list[int] | None = None, bias: Any = None,
                     return_mask: bool = False) -> Any:
    """``x`` with ``value`` where ``mask`` (``(batch, length)``) is False, along ``axis``
    (1 by default; a list masks each); ``bias`` is added, or a bool bias joins the mask.

    Example:
        >>> out = sequence_masking(np.ones((1, 3, 2)), np.array([[1, 1, 0]]), -1.0)
        >>> K.eval(out)[0].tolist()
        [[1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]]
    """
    value = float(value) if isinstance(value, str) else value
    if mask is None and bias is None:
        pass
    elif mask is None:
        if dtype(bias) == "bool":
            mask, x = bias, ops.where(bias, x, value)
        else:
            x = x + bias
    else:
        ndim = len(x.shape)
        axes = [1] if axis is None else axis if isinstance(axis, list) else [axis]
        mask = ops.cast(mask, "bool")
        full = None
        for a in axes:
            aligned = align(mask, [0, a % ndim], ndim)
            full = aligned if full is None else ops.logical_and(full, aligned)
        mask = full
        if bias is None:
            x = ops.where(mask, x, value)
        elif dtype(bias) == "bool":
            mask = ops.logical_and(mask, bias)
            x = ops.where(mask, x, value)
        else:
            x = ops.where(mask, x + bias, value)
    return (x, mask) if return_mask else x


def batch_gather(params: Any, indices: Any) -> Any:
    """``params[b, indices[b, ...]]`` for each batch row (``tf.gather`` with batch dims)."""
    if not dtype(indices).startswith("int"):  # type: ignore[union-attr]  # a tensor
        indices = ops.cast(indices, "int32")
    rank = len(indices.shape)
    trailing = tuple(ops.shape(params)[rank:])
    spread = ops.reshape(indices, tuple(ops.shape(indices)) + (1,) * len(trailing))
    spread = ops.broadcast_to(spread, tuple(ops.shape(indices)) + trailing)
    return ops.take_along_axis(params, spread, axis=rank - 1)


def pool1d(x: Any, pool_size: int, strides: int = 1, padding: str = "valid",
           data_format: str | None = None, pool_mode: str = "max") -> Any:
    """Pooling over the length of ``(batch, length, dim)``: ``"max"`` or ``"avg"``."""
    pool = ops.max_pool if pool_mode == "max" else ops.average_pool
    return pool(x, pool_size, strides, padding, data_format or "channels_last")


def divisible_temporal_padding(x: Any, n: int) -> Any:
    """``(batch, length, dim)`` padded after its end to a length divisible by ``n``."""
    missing = (n - ops.shape(x)[1] % n) % n
    return ops.pad(x, [[0, 0], [0, missing], [0, 0]])


def root_mean_square(x: Any, axis: int | Sequence[int] | None = None,
                     keepdims: bool = False) -> Any:
    """``sqrt(mean(x ** 2))`` over ``axis``."""
    return ops.sqrt(ops.mean(ops.square(x), axis=axis, keepdims=keepdims))


def attention_normalize(a: Any, mask: Any = None, axis: int = -1, method: str = "softmax",
                        bias: Any = None) -> Any:
    """Attention scores to weights: ``"softmax"``, ``"squared_relu"``, ``"softmax_plus"``
    (the model code's :func:`kerasbert.models.layers.normalized`); ``a`` as it is for
    another ``method``, as in bert4keras."""
    a, mask = sequence_masking(a, mask, -np.inf, axis, bias, True)
    if method not in NORMALIZATIONS:
        return a
    length = None if mask is None else ops.sum(ops.cast(mask, "float32"), axis=axis,
                                               keepdims=True)
    return normalized(a, method, length, axis)


def sinusoidal_embeddings(pos: Any, dim: int, base: float = 10000) -> Any:
    """Interleaved ``[sin(p w0), cos(p w0), sin(p w1), ...]``, ``w_i = base^(-2i/dim)``.

    Raises:
        ValueError: ``dim`` is odd.
    """
    if dim % 2:
        raise ValueError(f"sinusoidal_embeddings needs an even dim, got dim={dim}")
    return sinusoid(pos, dim, base)


class Sinusoidal(keras.initializers.Initializer):
    """Initializer of a ``(positions, dim)`` weight to the sinusoid table."""

    def __call__(self, shape: tuple[int, int], dtype: str | None = None) -> Any:
        size, dim = shape
        return ops.cast(sinusoidal_embeddings(ops.arange(size), dim),
                        dtype or keras.config.floatx())


def apply_rotary_position_embeddings(sinusoidal: Any, *tensors: Any) -> Any:
    """RoPE: each tensor ``(batch, length, ..., dim)`` rotated by the sinusoid table
    ``(batch, length, dim)``, pair by pair.

    Raises:
        ValueError: no tensor, or tensors of different shapes.
    """
    if not tensors or any(tuple(t.shape) != tuple(tensors[0].shape) for t in tensors):
        raise ValueError("apply_rotary_position_embeddings needs one or more tensors of one "
                         f"shape, got shapes {[tuple(t.shape) for t in tensors]}")
    table = align(sinusoidal, [0, 1, -1], len(tensors[0].shape))
    turned = [rotated(x, table) for x in tensors]
    return turned[0] if len(turned) == 1 else turned


def multilabel_categorical_crossentropy(y_true: Any, y_pred: Any) -> Any:
    """Multi-label loss from https://kexue.fm/archives/7359: ``y_true`` 0/1 (or soft),
    ``y_pred`` raw scores (no sigmoid); predict the classes scoring above 0."""
    kept = ops.not_equal(y_pred, -np.inf)
    negative = ops.where(kept, y_pred, -np.inf) + ops.log(1 - y_true)
    positive = ops.where(kept, -y_pred, -np.inf) + ops.log(y_true)
    zeros = ops.zeros_like(y_pred[..., :1])
    return (ops.logsumexp(ops.concatenate([negative, zeros], axis=-1), axis=-1)
            + ops.logsumexp(ops.concatenate([positive, zeros], axis=-1), axis=-1))


def sparse_multilabel_categorical_crossentropy(y_true: Any, y_pred: Any,
                                               mask_zero: bool = False) -> Any:
    """The loss above with ``y_true`` as the indices of the positive classes
    (``(..., num_positive)``); ``mask_zero`` takes index 0 as padding."""
    zeros = ops.zeros_like(y_pred[..., :1])
    y_pred = ops.concatenate([y_pred, zeros], axis=-1)
    if mask_zero:
        y_pred = ops.concatenate([zeros + np.inf, y_pred[..., 1:]], axis=-1)
    y_pos_2 = batch_gather(y_pred, y_true)
    y_pos_1 = ops.concatenate([y_pos_2, zeros], axis=-1)
    if mask_zero:
        y_pred = ops.concatenate([zeros - np.inf, y_pred[..., 1:]], axis=-1)
        y_pos_2 = batch_gather(y_pred, y_true)
    positive = ops.logsumexp(-y_pos_1, axis=-1)
    every = ops.logsumexp(y_pred, axis=-1)
    rest = ops.clip(1 - ops.exp(ops.logsumexp(y_pos_2, axis=-1) - every),
                    keras.config.epsilon(), 1)
    return positive + every + ops.log(rest)


def symbolic(f: _F) -> _F:
    """Identity decorator (bert4keras's shim for old Keras)."""
    return f


def graph_mode_decorator(f: Callable[..., Any], *args: Any, **kwargs: Any) -> NoReturn:
    """Refused: bert4keras's bridge to TensorFlow 1's graph-mode custom gradients.

    Raises:
        NotImplementedError: always; write the gradient with ``tf.custom_gradient``.
    """
    raise NotImplementedError("graph_mode_decorator (TensorFlow 1 graph mode) is not provided "
                              "on Keras 3; use tf.custom_gradient")


def recompute_grad(call: _F) -> _F:
    """Decorates a layer's ``call(self, inputs, **kwargs)``: with ``RECOMPUTE=1`` in the
    environment when this module was imported, its activations are computed again in the
    backward pass rather than kept (``keras.remat`` over the floating-point inputs; masks
    and keywords as given); otherwise ``call`` itself.

    A call that draws random numbers (a dropout inside it) draws them again when
    recomputed: give such a layer its randomness from outside the call.
    """
    if not do_recompute:
        return call

    @functools.wraps(call)
    def recomputed(self: Any, inputs: Any, **kwargs: Any) -> Any:
        return rematerialized(lambda given: call(self, given, **kwargs), inputs)

    return recomputed  # type: ignore[return-value]


# bert4keras's K has its own reshape, flatten and where (defined above).
_Backend.reshape, _Backend.flatten = staticmethod(reshape), staticmethod(flatten)
_Backend.where = staticmethod(where)

#: The objects bert4keras registered with Keras at import, to pass to ``load_model``.
custom_objects = {
    "gelu_erf": gelu_erf, "gelu_tanh": gelu_tanh, "gelu": gelu_erf,
    "root_mean_square": root_mean_square, "swish": swish, "leaky_relu": leaky_relu,
    "Sinusoidal": Sinusoidal,
    "multilabel_categorical_crossentropy": multilabel_categorical_crossentropy,
}
