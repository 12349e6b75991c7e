"""bert4keras's ``optimizers``: Adam, Lion, AdaFactor and the ``extend_with_*`` family, on Keras 3.

A bert4keras script keeps its lines: ``Adam(2e-5)``, ``extend_with_piecewise_linear_lr(
extend_with_weight_decay(Adam), name="AdamWLR")(learning_rate=1e-4, lr_schedule={1000: 1},
weight_decay_rate=0.01, exclude_from_weight_decay=["Norm", "bias"])``,
``optimizer.apply_ema_weights()``. Each ``extend_with_*`` takes an optimizer class of this
module and returns a subclass with bert4keras's keywords and defaults; they stack in any
order, and as in bert4keras the one applied first (innermost) changes a variable's update
first. The updates are bert4keras's formulas (``tests/test_dropin_optimizers.py`` runs
bert4keras 0.11.5 beside them). What differs on Keras 3, and why:

- Exclusion and inclusion lists are regular expressions searched in the variable's
  ``path`` (``"Transformer-0-FeedForward/kernel"``): tf.keras's names add ``:0``, which no
  list of ``"Norm"``, ``"bias"`` or ``"Embedding-Token"`` needs.
- ``extend_with_gradient_accumulation`` is Keras's own ``gradient_accumulation_steps``: an
  update uses the mean gradient of the last ``grad_accum_steps`` batches, the current one
  included, and Adam's bias correction counts updates (the update a batch that many times
  larger gives). bert4keras applies each sum one batch later, starts with an update of zero
  gradient, and counts batches in the bias correction.
- ``extend_with_lookahead``'s slow weights start at the model's weights; bert4keras starts
  them at zero, which scales every weight by ``slow_step_size`` at the first update.
- ``extend_with_piecewise_linear_lr`` turns ``learning_rate`` into a schedule
  (:class:`PiecewiseLinearRate`), which Keras evaluates at the count of batches seen, as
  bert4keras does; such a learning rate cannot be assigned afterwards.
- Keras 2's ``lr=`` and ``decay=`` are refused by name (bert4keras's Adam ignored ``lr``;
  Keras 3 drops ``decay``); Keras 3's own ``weight_decay``, ``use_ema``, ``clipnorm`` and
  ``gradient_accumulation_steps`` work on every optimizer here.
- The ``extend_with_*`` functions extend only this module's optimizers: a Keras optimizer
  computes its update in one piece they cannot reach into (a TypeError says so).
- ``Adam`` on TensorFlow updates each variable with TensorFlow's fused ``ApplyAdam``
  (epsilon rescaled to bert4keras's placement) unless an extension other than weight decay
  changes the new value; ``KERASBERT_FAST=0`` turns that off (:mod:`kerasbert.internals`).

Example:
    >>> AdamW = extend_with_weight_decay(Adam, "AdamW")
    >>> optimizer = AdamW(learning_rate=1e-3, exclude_from_weight_decay=["Norm", "bias"])
    >>> optimizer.weight_decay_rate
    0.01
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from kerasbert import internals
from kerasbert.backend import piecewise_linear, root_mean_square

PACKAGE = "kerasbert.optimizers"
REFUSED_KEYWORDS = {
    "lr": "pass learning_rate= (bert4keras's Adam ignored lr= and trained at 0.001)",
    "decay": "Keras 3 drops it; pass learning_rate=keras.optimizers.schedules."
             "InverseTimeDecay(learning_rate, 1, decay) for Keras 2's decay",
}


def _matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether any regular expression of ``patterns`` is found in ``path`` (bert4keras's
    ``string_matching``)."""
    return any(re.search(pattern, path) for pattern in patterns)


def _serialize_rate(rate: Any) -> Any:
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return keras.optimizers.schedules.serialize(rate)
    return rate if rate is None else float(rate)


def _deserialize_rate(rate: Any) -> Any:
    if isinstance(rate, dict):
        return keras.optimizers.schedules.deserialize(rate)
    return rate


@keras.saving.register_keras_serializable(package=PACKAGE)
class PiecewiseLinearRate(keras.optimizers.schedules.LearningRateSchedule):
    """``learning_rate`` times the piecewise-linear multiplier of ``schedule`` at the step.

    ``schedule`` is bert4keras's ``{step: multiplier}``: ``{1000: 1, 2000: 0.1}`` rises from
    0 to 1 over the first 1000 steps, falls to 0.1 at step 2000 and stays there.

    Args:
        learning_rate: a number or a ``LearningRateSchedule``.
        schedule: ``{step: multiplier}``; keys may be strings (as a saved config has them).

    Example:
        >>> rate = PiecewiseLinearRate(0.1, {10: 1.0, 20: 0.5})
        >>> [round(float(rate(s)), 4) for s in (0, 5, 10, 15, 30)]
        [0.0, 0.05, 0.1, 0.075, 0.05]
    """

    def __init__(self, learning_rate: float | keras.optimizers.schedules.LearningRateSchedule,
                 schedule: Mapping[int | str, float]) -> None:
        if not schedule:
            raise ValueError(f"lr_schedule must name at least one step; Received: {schedule!r}")
        self.learning_rate = _deserialize_rate(learning_rate)
        self.schedule = {int(step): float(value) for step, value in schedule.items()}

    def __call__(self, step: Any) -> Any:
        rate = self.learning_rate
        if callable(rate):
            rate = rate(step)
        return rate * piecewise_linear(step, self.schedule)

    def get_config(self) -> dict[str, Any]:
        return {"learning_rate": _serialize_rate(self.learning_rate),
                "schedule": {str(step): value for step, value in self.schedule.items()}}


@keras.saving.register_keras_serializable(package=PACKAGE)
class RelativeStepRate(keras.optimizers.schedules.LearningRateSchedule):
    """AdaFactor's learning rate when none is given: ``scale * min(1/sqrt(step + 1), 0.01)``.

    Example:
        >>> [round(float(RelativeStepRate()(step)), 6) for step in (0, 39999)]
        [0.01, 0.005]
    """

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = float(scale)

    def __call__(self, step: Any) -> Any:
        step = ops.cast(step, keras.config.floatx()) + 1.0
        return self.scale * ops.minimum(1.0 / ops.sqrt(step), 0.01)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale}


class _Slots:
    """The model's variables an optimizer was built on, and what it keeps for each.

    A plain object on purpose: Keras tracks lists and dicts set on an optimizer, and would
    count the model variables held here as the optimizer's own.
    """

    def __init__(self, variables: Iterable[Any]) -> None:
        self.variables = list(variables)
        self.paths = [getattr(v, "path", v.name) for v in self.variables]
        # slot name -> one optimizer variable (or None) per model variable
        self.slots: dict[str, list[Any]] = {}
        self.flags: dict[str, list[Any]] = {}  # per-variable decisions taken once, from the paths
        self.old_weights: list[np.ndarray] | None = None
        self._index: dict[int, int] = {}
        # update_step sees a Keras variable, or on TensorFlow the tf.Variable inside it, or
        # under a distribution strategy one replica's copy of that.
        strategy = None
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            strategy = tf.distribute.get_strategy()
        for i, variable in enumerate(self.variables):
            seen = [variable]
            inner = getattr(variable, "value", None)
            if inner is not None and not callable(inner):
                seen.append(inner)
                if strategy is not None:
                    seen.extend(strategy.experimental_local_results(inner))
            for thing in seen:
                self._index[id(thing)] = i

    def index(self, variable: Any) -> int:
        try:
            return self._index[id(variable)]
        except KeyError:
            raise ValueError(f"variable {getattr(variable, 'name', variable)!r} is not one the "
                             f"optimizer was built on") from None


class _Optimizer(keras.optimizers.Optimizer):
    """What the optimizers of this module share: bert4keras's extension keywords, the slots
    kept per variable, and one update whose new value the extensions may change."""

    #: keyword -> bert4keras's default; each extension class declares its own.
    _EXTENSION_OPTIONS: dict[str, Any] = {}

    def __init__(self, learning_rate: float | keras.optimizers.schedules.LearningRateSchedule,
                 **kwargs: Any) -> None:
        for name, why in REFUSED_KEYWORDS.items():
            if kwargs.pop(name, None):
                raise ValueError(f"{type(self).__name__} does not take {name}=: {why}")
        options = {name: kwargs.pop(name) if name in kwargs else copy.deepcopy(default)
                   for name, default in type(self)._extension_options().items()}
        given = dict(kwargs, learning_rate=learning_rate)
        arguments = type(self)._keras_arguments(dict(given), options)
        super().__init__(**arguments)
        for name, value in options.items():
            setattr(self, name, value)
        # What get_config reports where an extension changed Keras's arguments.
        self._kerasbert_given = {
            name: _serialize_rate(given.get(name)) if name == "learning_rate" else given.get(name)
            for name in ("learning_rate", "gradient_accumulation_steps")
            if arguments.get(name) is not given.get(name)}
        self._kerasbert_slots: Any = None  # a _Slots once built

    @classmethod
    def _extension_options(cls) -> dict[str, Any]:
        """``{keyword: default}`` of every extension of this class."""
        options: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            options.update(vars(klass).get("_EXTENSION_OPTIONS", {}))
        return options

    @classmethod
    def _keras_arguments(cls, arguments: dict[str, Any],
                         options: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``keras.optimizers.Optimizer``; extensions change them."""
        return arguments

    def build(self, variables: Sequence[keras.Variable]) -> None:
        if self.built:
            return
        super().build(variables)
        self._kerasbert_slots = _Slots(variables)
        self._build_slots(self._kerasbert_slots)

    def _build_slots(self, slots: _Slots) -> None:
        """Adds the optimizer variables and flags of ``slots``; extensions add theirs."""

    def _add_slots(self, slots: _Slots, name: str, shapes: Sequence[Any] | None = None,
                   initial: Callable[[Any], Any] | None = None) -> list[Any]:
        """One optimizer variable ``name`` per model variable (of its shape, or of
        ``shapes[i]``; None there for none), zeros or ``initial(variable)``."""
        made: list[Any] = []
        for i, (variable, path) in enumerate(zip(slots.variables, slots.paths)):
            shape = variable.shape if shapes is None else shapes[i]
            if shape is None:
                made.append(None)
                continue
            initializer: str | Callable[..., Any] = "zeros"
            if initial is not None:
                value = initial(variable)
                initializer = lambda shape, dtype, value=value: ops.cast(value, dtype)  # noqa: E731
            made.append(self.add_variable(shape, initializer=initializer, dtype=variable.dtype,
                                          name=f"{path.replace('/', '_')}_{name}"))
        slots.slots[name] = made
        return made

    def _slot(self, name: str, index: int) -> Any:
        return self._kerasbert_slots.slots[name][index]

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        index = self._kerasbert_slots.index(variable)
        gradient = ops.cast(ops.convert_to_tensor(gradient), variable.dtype)
        learning_rate = ops.cast(learning_rate, variable.dtype)
        if self._fused_update(gradient, variable, learning_rate, index):
            return
        new_value = self._new_value(gradient, variable, learning_rate, index)
        self.assign(variable, self._adjusted(variable, new_value, gradient, learning_rate, index))

    def _fused_update(self, gradient: Any, variable: Any, learning_rate: Any,
                      index: int) -> bool:
        """Updates ``variable`` in one kernel and returns True, where an optimizer can."""
        return False

    def _new_value(self, gradient: Any, variable: Any, learning_rate: Any, index: int) -> Any:
        """Updates the optimizer's slots of ``variable``; returns its new value."""
        raise NotImplementedError

    def _adjusted(self, variable: Any, new_value: Any, gradient: Any, learning_rate: Any,
                  index: int) -> Any:
        """``new_value`` as the extensions change it (weight decay, layer adaptation ...),
        the innermost first; ``variable`` still holds its old value."""
        return new_value

    def _step(self, dtype: Any) -> Any:
        return ops.cast(self.iterations + 1, dtype)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self._extension_options()})
        config.update(self._kerasbert_given)
        return config


@keras.saving.register_keras_serializable(package=PACKAGE)
class Adam(_Optimizer):
    """bert4keras's Adam: epsilon 1e-6 added to the square root of the corrected second
    moment, and bias correction that can be turned off (``bias_correction=False``, as
    bert4keras's pretraining does with LAMB).

    Args:
        learning_rate: a number or a ``keras.optimizers.schedules.LearningRateSchedule``.
        beta_1, beta_2: the moments' decay rates.
        epsilon: added to ``sqrt(v_hat)``.
        bias_correction: divide the moments by ``1 - beta ** step``.
        **kwargs: Keras's optimizer arguments (``clipnorm``, ``weight_decay``, ``name`` ...).

    Example:
        >>> Adam(2e-5).epsilon
        1e-06
    """

    def __init__(self,
                 learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.001,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 bias_correction: bool = True, **kwargs: Any) -> None:
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon or keras.config.epsilon()
        self.bias_correction = bias_correction

    def _build_slots(self, slots: _Slots) -> None:
        super()._build_slots(slots)
        self._add_slots(slots, "m")
        self._add_slots(slots, "v")

    def _beta_powers(self, dtype: Any) -> tuple[Any, Any]:
        if not self.bias_correction:
            return ops.zeros((), dtype), ops.zeros((), dtype)
        step = self._step(dtype)
        return (ops.power(ops.cast(self.beta_1, dtype), step),
                ops.power(ops.cast(self.beta_2, dtype), step))

    def _new_value(self, gradient: Any, variable: Any, learning_rate: Any, index: int) -> Any:
        m, v = self._slot("m", index), self._slot("v", index)
        # In the variable's dtype, as bert4keras (1 - beta_2 rounds to 0.00099998713 in float32).
        beta_1, beta_2 = (ops.cast(beta, variable.dtype) for beta in (self.beta_1, self.beta_2))
        m_t = beta_1 * m + (1.0 - beta_1) * gradient
        v_t = beta_2 * v + (1.0 - beta_2) * ops.square(gradient)
        self.assign(m, m_t)
        self.assign(v, v_t)
        power_1, power_2 = self._beta_powers(variable.dtype)
        m_hat, v_hat = m_t / (1.0 - power_1), v_t / (1.0 - power_2)
        return variable - learning_rate * m_hat / (ops.sqrt(v_hat) + self.epsilon)

    def _fused_update(self, gradient: Any, variable: Any, learning_rate: Any,
                      index: int) -> bool:
        # TensorFlow's ApplyAdam adds epsilon to sqrt(v) before the correction of v; the
        # same update with bert4keras's placement takes epsilon * sqrt(1 - beta_2 ** step).
        adjusters = [klass for klass in type(self).__mro__
                     if "_adjusted" in vars(klass) and klass is not _Optimizer]
        # Weight decay alone subtracts a multiple of the old value: before the step or after
        # it is the same update. Any other change needs the step's value, so Keras's ops.
        decays_alone = len(adjusters) == 1 and hasattr(adjusters[0], "_decay")
        if ((adjusters and not decays_alone) or keras.backend.backend() != "tensorflow"
                or not internals.fast_paths_enabled("adam")):
            return False
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return False
        if decays_alone:
            decay = self._decay(variable, learning_rate, index)
            if decay is not None:
                self.assign_sub(variable, decay)
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        power_1, power_2 = self._beta_powers(dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=target.handle,
            m=self._slot("m", index).value.handle,
            v=self._slot("v", index).value.handle,
            beta1_power=power_1,
            beta2_power=power_2,
            lr=learning_rate,
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype) * tf.sqrt(1.0 - power_2),
            grad=gradient,
        )
        return True

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "bias_correction": self.bias_correction}


@keras.saving.register_keras_serializable(package=PACKAGE)
class Lion(_Optimizer):
    """bert4keras's Lion (https://arxiv.org/abs/2302.06675): the sign of a momentum step.

    Args:
        learning_rate: a number or a ``LearningRateSchedule``.
        beta_1: the momentum's weight in the step's direction.
        beta_2: the momentum's decay rate.
        **kwargs: Keras's optimizer arguments.

    Example:
        >>> Lion().beta_1
        0.95
    """

    def __init__(self,
                 learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 3e-4,
                 beta_1: float = 0.95, beta_2: float = 0.98, **kwargs: Any) -> None:
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2

    def _build_slots(self, slots: _Slots) -> None:
        super()._build_slots(slots)
        self._add_slots(slots, "m")

    def _new_value(self, gradient: Any, variable: Any, learning_rate: Any, index: int) -> Any:
        m = self._slot("m", index)
        beta_1, beta_2 = (ops.cast(beta, variable.dtype) for beta in (self.beta_1, self.beta_2))
        direction = ops.sign(beta_1 * m + (1.0 - beta_1) * gradient)
        self.assign(m, beta_2 * m + (1.0 - beta_2) * gradient)
        return variable - learning_rate * direction

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2}


@keras.saving.register_keras_serializable(package=PACKAGE)
class AdaFactor(_Optimizer):
    """bert4keras's AdaFactor (https://arxiv.org/abs/1804.04235): second moments kept as a
    row and a column where a variable's two largest dimensions reach
    ``min_dim_size_to_factor``, updates clipped by their root mean square and scaled by the
    variable's.

    Args:
        learning_rate: a number, a schedule, or None for ``min(1/sqrt(step), 0.01)``
            (times 0.05 without ``multiply_by_parameter_scale``).
        beta1: the update's momentum (0 for none: no slot kept).
        beta2: the second moments' decay, or None for ``1 - step ** -0.8``.
        epsilon1: added to the squared gradient; epsilon2: the least parameter scale.
        multiply_by_parameter_scale: scale updates by the variable's root mean square.
        clipping_threshold: the update's largest root mean square (None for no clipping).
        min_dim_size_to_factor: the least size of the two largest dimensions to factor.
        exclude_from_parameter_scale: regular expressions of variable paths not scaled.
        **kwargs: Keras's optimizer arguments.

    Example:
        >>> AdaFactor(learning_rate=None).min_dim_size_to_factor
        128
    """

    def __init__(
            self,
            learning_rate: float | keras.optimizers.schedules.LearningRateSchedule | None = 1e-3,
            beta1: float = 0.0, beta2: float | None = None, epsilon1: float = 1e-30,
            epsilon2: float = 1e-3, multiply_by_parameter_scale: bool = True,
            clipping_threshold: float | None = 1.0, min_dim_size_to_factor: int = 128,
            exclude_from_parameter_scale: Sequence[str] | None = None, **kwargs: Any) -> None:
        rate = learning_rate
        if rate is None:
            rate = RelativeStepRate(1.0 if multiply_by_parameter_scale else 0.05)
        super().__init__(rate, **kwargs)
        if learning_rate is None:
            self._kerasbert_given["learning_rate"] = None
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon1 = epsilon1
        self.epsilon2 = epsilon2
        self.multiply_by_parameter_scale = multiply_by_parameter_scale
        self.clipping_threshold = clipping_threshold
        self.min_dim_size_to_factor = min_dim_size_to_factor
        self.exclude_from_parameter_scale = list(exclude_from_parameter_scale or [])

    def factored_shape(
            self, shape: Sequence[int]) -> tuple[tuple[int, ...], int, tuple[int, ...], int] | None:
        """``(row shape, its reduced axis, column shape, its reduced axis)`` of a variable
        of ``shape`` whose second moments are factored, else None."""
        if len(shape) < 2:
            return None
        dims = np.array(shape)
        order = dims.argpartition(-2)
        if dims[order[-2]] < self.min_dim_size_to_factor:
            return None
        rows, columns = dims.copy(), dims.copy()
        rows[order[-1]] = 1
        columns[order[-2]] = 1
        return tuple(rows), int(order[-1]), tuple(columns), int(order[-2])

    def _build_slots(self, slots: _Slots) -> None:
        super()._build_slots(slots)
        factored = [self.factored_shape(tuple(v.shape)) for v in slots.variables]
        if self.beta1 > 0.0:
            self._add_slots(slots, "m")
        self._add_slots(slots, "v", [tuple(v.shape) if f is None else None
                                     for v, f in zip(slots.variables, factored)])
        self._add_slots(slots, "vr", [None if f is None else f[0] for f in factored])
        self._add_slots(slots, "vc", [None if f is None else f[2] for f in factored])
        slots.flags["factored"] = factored
        slots.flags["parameter_scale"] = [
            self.multiply_by_parameter_scale
            and not _matches(path, self.exclude_from_parameter_scale) for path in slots.paths]

    def _new_value(self, gradient: Any, variable: Any, learning_rate: Any, index: int) -> Any:
        flags = self._kerasbert_slots.flags
        dtype = variable.dtype
        beta2 = self.beta2
        if beta2 is None:
            beta2 = 1.0 - ops.power(self._step(dtype), -0.8)
        squared = ops.square(gradient) + self.epsilon1
        factored = flags["factored"][index]
        if factored is None:
            v = self._slot("v", index)
            v_t = beta2 * v + (1.0 - beta2) * squared
            self.assign(v, v_t)
        else:
            _, row_axis, _, column_axis = factored
            vr, vc = self._slot("vr", index), self._slot("vc", index)
            vr_t = beta2 * vr + (1.0 - beta2) * ops.mean(squared, axis=row_axis, keepdims=True)
            vc_t = beta2 * vc + (1.0 - beta2) * ops.mean(squared, axis=column_axis, keepdims=True)
            self.assign(vr, vr_t)
            self.assign(vc, vc_t)
            v_t = vr_t * vc_t / ops.mean(vr_t, axis=column_axis, keepdims=True)
        update = gradient / ops.sqrt(v_t + self.epsilon1)
        if self.clipping_threshold is not None:
            update = update / ops.maximum(
                1.0, root_mean_square(update) / self.clipping_threshold)
        if self.beta1 > 0.0:
            m = self._slot("m", index)
            update = self.beta1 * m + (1.0 - self.beta1) * update
            self.assign(m, update)
        if flags["parameter_scale"][index]:
            update = update * ops.maximum(root_mean_square(variable), self.epsilon2)
        return variable - learning_rate * update

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta1": self.beta1, "beta2": self.beta2,
                "epsilon1": self.epsilon1, "epsilon2": self.epsilon2,
                "multiply_by_parameter_scale": self.multiply_by_parameter_scale,
                "clipping_threshold": self.clipping_threshold,
                "min_dim_size_to_factor": self.min_dim_size_to_factor,
                "exclude_from_parameter_scale": list(self.exclude_from_parameter_scale)}


def export_to_custom_objects(base_extend_with: Callable[[type[_Optimizer]], type[_Optimizer]],
                             ) -> Callable[..., type[_Optimizer]]:
    """Makes ``base_extend_with(BaseOptimizer) -> class`` bert4keras's
    ``extend_with_*(BaseOptimizer, name=None)``: the new class is named ``name`` (or after
    the base and the extension) and registered for ``keras.saving.load_model``.

    Example:
        >>> extend_with_weight_decay(Adam).__name__
        'AdamWithWeightDecay'
    """
    what = "".join(word.title() for word in
                   base_extend_with.__name__.replace("extend_with_", "").split("_"))

    def extend_with(BaseOptimizer: type[_Optimizer], name: str | None = None) -> type[_Optimizer]:
        if not (isinstance(BaseOptimizer, type) and issubclass(BaseOptimizer, _Optimizer)):
            raise TypeError(
                f"{base_extend_with.__name__} extends an optimizer class of kerasbert.optimizers "
                f"(Adam, Lion, AdaFactor or a class an extend_with_ function made); Received: "
                f"{BaseOptimizer!r}. A Keras optimizer computes its update in one piece these "
                f"extensions cannot reach into; give it Keras's own weight_decay=, use_ema= or "
                f"gradient_accumulation_steps= instead")
        NewOptimizer = base_extend_with(BaseOptimizer)
        NewOptimizer.__name__ = NewOptimizer.__qualname__ = name or (
            f"{BaseOptimizer.__name__}With{what}")
        NewOptimizer.__module__ = __name__
        return keras.saving.register_keras_serializable(package=PACKAGE)(NewOptimizer)

    extend_with.__name__ = extend_with.__qualname__ = base_extend_with.__name__
    extend_with.__doc__ = base_extend_with.__doc__
    return extend_with


# Each extend_with_* below is replaced by export_to_custom_objects's extend_with, whose
# signature is typed (a class of its own is no type a checker can follow; so its
# BaseOptimizer is Any here: a class statement takes no base typed type[...]).
@export_to_custom_objects
def extend_with_weight_decay(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` whose update also subtracts ``learning_rate * weight_decay_rate *
    variable``, except on variables whose path matches ``exclude_from_weight_decay``.

    Keywords: ``weight_decay_rate=0.01``, ``exclude_from_weight_decay=[]``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"weight_decay_rate": 0.01,
                                              "exclude_from_weight_decay": []}

        @classmethod
        def _keras_arguments(cls, arguments: dict[str, Any],
                             options: dict[str, Any]) -> dict[str, Any]:
            arguments = super()._keras_arguments(arguments, options)
            if arguments.get("weight_decay") is not None:
                raise ValueError(
                    f"weight_decay={arguments['weight_decay']} (Keras's) and "
                    f"weight_decay_rate={options['weight_decay_rate']} (extend_with_weight_decay's)"
                    f" would decay twice; give one")
            return arguments

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            slots.flags["weight_decay"] = [not _matches(p, self.exclude_from_weight_decay)
                                           for p in slots.paths]

        def _decay(self, variable: Any, learning_rate: Any, index: int) -> Any:
            if not self._kerasbert_slots.flags["weight_decay"][index]:
                return None
            return learning_rate * self.weight_decay_rate * variable

        def _adjusted(self, variable: Any, new_value: Any, gradient: Any, learning_rate: Any,
                      index: int) -> Any:
            new_value = super()._adjusted(variable, new_value, gradient, learning_rate, index)
            decay = self._decay(variable, learning_rate, index)
            return new_value if decay is None else new_value - decay

    return NewOptimizer


@export_to_custom_objects
def extend_with_layer_adaptation(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` whose step on each variable is rescaled to ``learning_rate *
    |variable|`` (LAMB's trust ratio, https://arxiv.org/abs/1904.00962), except on
    variables whose path matches ``exclude_from_layer_adaptation``.

    Keywords: ``exclude_from_layer_adaptation=[]``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"exclude_from_layer_adaptation": []}

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            slots.flags["layer_adaptation"] = [
                not _matches(p, self.exclude_from_layer_adaptation) for p in slots.paths]

        def _adjusted(self, variable: Any, new_value: Any, gradient: Any, learning_rate: Any,
                      index: int) -> Any:
            new_value = super()._adjusted(variable, new_value, gradient, learning_rate, index)
            if not self._kerasbert_slots.flags["layer_adaptation"][index]:
                return new_value
            step = new_value - variable
            rate = ops.maximum(learning_rate, keras.config.epsilon())
            variable_norm = ops.sqrt(ops.sum(ops.square(variable)))
            step_norm = ops.sqrt(ops.sum(ops.square(step / rate)))
            ratio = ops.where(variable_norm > 0.0,
                              ops.where(step_norm > 0.0, variable_norm / step_norm, 1.0), 1.0)
            return variable + step * ratio

    return NewOptimizer


@export_to_custom_objects
def extend_with_piecewise_linear_lr(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` whose learning rate is multiplied by the piecewise-linear
    ``lr_schedule`` (``{step: multiplier}``) of the count of batches seen
    (:class:`PiecewiseLinearRate`).

    Keywords: ``lr_schedule={0: 1}``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"lr_schedule": {0: 1}}

        @classmethod
        def _keras_arguments(cls, arguments: dict[str, Any],
                             options: dict[str, Any]) -> dict[str, Any]:
            arguments = super()._keras_arguments(arguments, options)
            options["lr_schedule"] = {int(k): v for k, v in options["lr_schedule"].items()}
            arguments["learning_rate"] = PiecewiseLinearRate(arguments["learning_rate"],
                                                             options["lr_schedule"])
            return arguments

    return NewOptimizer


@export_to_custom_objects
def extend_with_gradient_accumulation(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` that updates once per ``grad_accum_steps`` batches with their mean
    gradient: Keras's ``gradient_accumulation_steps`` (see the module's notes).

    Keywords: ``grad_accum_steps=2``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"grad_accum_steps": 2}

        @classmethod
        def _keras_arguments(cls, arguments: dict[str, Any],
                             options: dict[str, Any]) -> dict[str, Any]:
            arguments = super()._keras_arguments(arguments, options)
            steps = options["grad_accum_steps"]
            if not isinstance(steps, (int, np.integer)) or steps < 1:
                raise ValueError(f"grad_accum_steps must be an integer of at least 1; "
                                 f"Received: grad_accum_steps={steps!r}")
            if arguments.get("gradient_accumulation_steps"):
                raise ValueError(
                    f"gradient_accumulation_steps={arguments['gradient_accumulation_steps']} "
                    f"(Keras's) and grad_accum_steps={steps} (extend_with_gradient_accumulation's)"
                    f" both given; give one")
            arguments["gradient_accumulation_steps"] = int(steps) if steps > 1 else None
            return arguments

    return NewOptimizer


@export_to_custom_objects
def extend_with_lookahead(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` with Lookahead (https://arxiv.org/abs/1907.08610): slow weights
    that move ``slow_step_size`` of the way to the fast ones, which then start from them,
    at every update whose step count (before it) is a multiple of ``steps_per_slow_update``.

    Keywords: ``steps_per_slow_update=5``, ``slow_step_size=0.5``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"steps_per_slow_update": 5, "slow_step_size": 0.5}

        @classmethod
        def _keras_arguments(cls, arguments: dict[str, Any],
                             options: dict[str, Any]) -> dict[str, Any]:
            steps, size = options["steps_per_slow_update"], options["slow_step_size"]
            if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
                raise ValueError(f"steps_per_slow_update must be an integer of at least 1; "
                                 f"Received: steps_per_slow_update={steps!r}")
            if isinstance(size, bool) or not isinstance(size, (int, float, np.number)) or \
                    not 0 < size <= 1:
                raise ValueError(f"slow_step_size must be a number in (0, 1]; "
                                 f"Received: slow_step_size={size!r}")
            return super()._keras_arguments(arguments, options)

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            self._add_slots(slots, "slow", initial=ops.convert_to_tensor)

        def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
            super().update_step(gradient, variable, learning_rate)
            slow = self._slot("slow", self._kerasbert_slots.index(variable))
            now = ops.equal(self.iterations % self.steps_per_slow_update, 0)
            moved = ops.where(now, slow + self.slow_step_size * (variable - slow), slow)
            self.assign(slow, moved)
            self.assign(variable, ops.where(now, moved, variable))

    return NewOptimizer


@export_to_custom_objects
def extend_with_lazy_optimization(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` that leaves unchanged the rows (last axis) whose gradient is all
    zero, on variables whose path matches ``include_in_lazy_optimization`` (embeddings).

    Keywords: ``include_in_lazy_optimization=[]``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"include_in_lazy_optimization": []}

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            slots.flags["lazy"] = [_matches(p, self.include_in_lazy_optimization)
                                   for p in slots.paths]

        def _adjusted(self, variable: Any, new_value: Any, gradient: Any, learning_rate: Any,
                      index: int) -> Any:
            new_value = super()._adjusted(variable, new_value, gradient, learning_rate, index)
            if not self._kerasbert_slots.flags["lazy"][index]:
                return new_value
            touched = ops.any(ops.not_equal(gradient, 0.0), axis=-1, keepdims=True)
            return variable + (new_value - variable) * ops.cast(touched, new_value.dtype)

    return NewOptimizer


@export_to_custom_objects
def extend_with_exponential_moving_average(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` keeping a moving average of the weights (from zero, updated after
    every update), which ``apply_ema_weights()`` puts into the model and
    ``reset_old_weights()`` takes out again.

    Keywords: ``ema_momentum=0.999``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"ema_momentum": 0.999}

        @classmethod
        def _keras_arguments(cls, arguments: dict[str, Any],
                             options: dict[str, Any]) -> dict[str, Any]:
            arguments = super()._keras_arguments(arguments, options)
            if arguments.get("use_ema"):
                raise ValueError("use_ema=True (Keras's moving average, written into the model "
                                 "at the end of fit) and extend_with_exponential_moving_average "
                                 "both given; give one")
            return arguments

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            self._add_slots(slots, "ema")

        def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
            super().update_step(gradient, variable, learning_rate)
            ema = self._slot("ema", self._kerasbert_slots.index(variable))
            self.assign(ema, self.ema_momentum * ema + (1.0 - self.ema_momentum) * variable)

        def apply_ema_weights(self, bias_correction: bool = True) -> None:
            """Keeps the model's weights, then gives it the moving averages (divided by
            ``1 - ema_momentum ** updates`` with ``bias_correction``)."""
            slots = self._ema_slots("apply_ema_weights")
            updates = int(ops.convert_to_numpy(self.iterations))
            if updates == 0:
                raise ValueError("apply_ema_weights: the optimizer has made no update yet, "
                                 "so there is no average to apply")
            slots.old_weights = [ops.convert_to_numpy(v) for v in slots.variables]
            scale = 1.0 - self.ema_momentum ** updates if bias_correction else 1.0
            for variable, ema in zip(slots.variables, slots.slots["ema"]):
                variable.assign(ops.convert_to_numpy(ema) / scale)

        def reset_old_weights(self) -> None:
            """Gives the model back the weights that ``apply_ema_weights`` kept."""
            slots = self._ema_slots("reset_old_weights")
            if slots.old_weights is None:
                raise ValueError("reset_old_weights: apply_ema_weights has not been called, "
                                 "so there are no kept weights to restore")
            for variable, value in zip(slots.variables, slots.old_weights):
                variable.assign(value)

        def _ema_slots(self, caller: str) -> _Slots:
            if self._kerasbert_slots is None:
                raise ValueError(f"{caller}: the optimizer is not built yet (train a step first)")
            return self._kerasbert_slots

    return NewOptimizer


@export_to_custom_objects
def extend_with_parameter_wise_lr(BaseOptimizer: Any) -> type[_Optimizer]:
    """``BaseOptimizer`` whose step on a variable is multiplied by every value of
    ``paramwise_lr_schedule`` (``{substring: multiplier}``) whose key is in its path.

    Keywords: ``paramwise_lr_schedule={}``.
    """
    class NewOptimizer(BaseOptimizer):
        _EXTENSION_OPTIONS: dict[str, Any] = {"paramwise_lr_schedule": {}}

        def _build_slots(self, slots: _Slots) -> None:
            super()._build_slots(slots)
            multipliers = []
            for path in slots.paths:
                multiplier = 1.0
                for key, value in self.paramwise_lr_schedule.items():
                    if key in path:
                        multiplier *= value
                multipliers.append(multiplier)
            slots.flags["lr_multiplier"] = multipliers

        def _adjusted(self, variable: Any, new_value: Any, gradient: Any, learning_rate: Any,
                      index: int) -> Any:
            new_value = super()._adjusted(variable, new_value, gradient, learning_rate, index)
            multiplier = self._kerasbert_slots.flags["lr_multiplier"][index]
            if multiplier == 1.0:
                return new_value
            return variable + (new_value - variable) * multiplier

    return NewOptimizer


# bert4keras's names for the same things: its Keras 2 (v1) and tf.keras (v2) versions.
extend_with_weight_decay_v2 = extend_with_weight_decay
extend_with_layer_adaptation_v2 = extend_with_layer_adaptation
extend_with_piecewise_linear_lr_v2 = extend_with_piecewise_linear_lr
extend_with_gradient_accumulation_v2 = extend_with_gradient_accumulation
extend_with_lookahead_v2 = extend_with_lookahead
extend_with_lazy_optimization_v2 = extend_with_lazy_optimization
extend_with_exponential_moving_average_v2 = extend_with_exponential_moving_average
extend_with_parameter_wise_lr_v2 = extend_with_parameter_wise_lr
LionV2 = Lion
AdaFactorBase = AdaFactorV1 = AdaFactorV2 = AdaFactor

#: For ``keras.saving.load_model(..., custom_objects=custom_objects)``, as in bert4keras.
custom_objects = {"Adam": Adam, "AdaFactor": AdaFactor}

__all__ = [
    "AdaFactor", "AdaFactorBase", "AdaFactorV1", "AdaFactorV2", "Adam", "Lion", "LionV2",
    "PiecewiseLinearRate", "RelativeStepRate", "custom_objects", "export_to_custom_objects",
    "extend_with_exponential_moving_average", "extend_with_exponential_moving_average_v2",
    "extend_with_gradient_accumulation", "extend_with_gradient_accumulation_v2",
    "extend_with_layer_adaptation", "extend_with_layer_adaptation_v2",
    "extend_with_lazy_optimization", "extend_with_lazy_optimization_v2",
    "extend_with_lookahead", "extend_with_lookahead_v2",
    "extend_with_parameter_wise_lr", "extend_with_parameter_wise_lr_v2",
    "extend_with_piecewise_linear_lr", "extend_with_piecewise_linear_lr_v2",
    "extend_with_weight_decay", "extend_with_weight_decay_v2",
]
