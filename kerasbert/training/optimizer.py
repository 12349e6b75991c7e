"""Optimizer and learning-rate schedule for BERT fine-tuning and pretraining.

BERT's recipe (Devlin et al.; Google's ``optimization.py``): AdamW with weight decay on
the matrices only (not on LayerNorm parameters or biases), a learning rate that rises
linearly over the first steps and then falls linearly to zero, and global-norm clipping.
Here it is Keras's own ``AdamW``; written out are the schedule, as a serializable
``LearningRateSchedule`` so a saved model reloads with its optimizer, and, on TensorFlow,
each variable's Adam update as TensorFlow's one fused ``ApplyAdam`` kernel (:class:`AdamW`).
A model computing in float16 gets it inside Keras's ``LossScaleOptimizer``: the loss is
scaled up before the backward pass so that small gradients survive in float16, the
gradients are divided back before clipping, accumulation and the update, and a step with a
non-finite gradient is skipped (and the scale halved).

Example:
    >>> schedule = WarmupLinearDecay(2e-5, warmup_steps=10, total_steps=100)
    >>> [round(float(schedule(s)), 8) for s in (0, 5, 10, 55, 100)]
    [0.0, 1e-05, 2e-05, 1e-05, 0.0]
"""

from collections.abc import Iterator
from typing import Any

import keras
from keras import ops

from kerasbert import internals


@keras.saving.register_keras_serializable(package="kerasbert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``peak_learning_rate``, then linear decay to 0.

    Args:
        peak_learning_rate: the rate reached at the end of warm-up.
        warmup_steps: optimizer steps of warm-up (0 for none).
        total_steps: optimizer steps of the whole run.
    """

    def __init__(self, peak_learning_rate: float, warmup_steps: int, total_steps: int) -> None:
        if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"warmup_steps ({warmup_steps}) must be in [0, total_steps] and total_steps "
                f"({total_steps}) at least 1"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)

    def __call__(self, step: Any) -> Any:
        step = ops.cast(step, "float32")
        warmup = ops.cast(max(self.warmup_steps, 1), "float32")
        rising = self.peak_learning_rate * step / warmup
        remaining = max(self.total_steps - self.warmup_steps, 1)
        falling = self.peak_learning_rate * ops.maximum(
            0.0, (self.total_steps - step) / float(remaining))
        return ops.where(step < self.warmup_steps, rising, falling)

    def get_config(self) -> dict[str, Any]:
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }


@keras.saving.register_keras_serializable(package="kerasbert")
class AdamW(keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` whose Adam update of a variable is one kernel on TensorFlow.

    Keras writes the update of the two moments and the variable as a dozen element-wise
    operations, each a pass over the variable's memory; TensorFlow's ``ResourceApplyAdam``
    computes the same formula (with Keras's epsilon outside the square root) in one pass.
    The decoupled weight decay and the gradient clipping stay Keras's. Elsewhere (another
    backend, AMSGrad, a ``tf.distribute`` strategy's variables, the fast paths off: see
    :mod:`kerasbert.internals`) the update is Keras's own.
    """

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if (keras.backend.backend() != "tensorflow" or self.amsgrad
                or not internals.fast_paths_enabled("adam")):
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return super().update_step(gradient, variable, learning_rate)
        momentum, velocity = internals.adam_slots(self, variable)
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=target.handle,
            m=momentum.value.handle,
            v=velocity.value.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype),
        )


def make_optimizer(model: keras.Model, learning_rate: float, total_steps: int,
                   warmup: float = 0.1, weight_decay: float = 0.01,
                   clipnorm: float | None = 1.0, gradient_accumulation: int = 1,
                   loss_scale: bool | None = None) -> Any:
    """Keras ``AdamW`` set up the BERT way for ``model``.

    Args:
        model: the model to train (its 1-D variables, LayerNorm and biases, get no decay).
        learning_rate: peak learning rate.
        total_steps: optimizer updates in the whole run.
        warmup: fraction of ``total_steps`` spent warming up.
        weight_decay: decoupled weight decay on the matrices.
        clipnorm: global gradient-norm clip (None for none).
        gradient_accumulation: batches whose gradients are summed per update.
        loss_scale: wrap the optimizer in ``keras.optimizers.LossScaleOptimizer`` (dynamic
            loss scaling); None: where ``model`` computes in float16.

    Returns:
        an :class:`AdamW` (Keras's, with the fused update on TensorFlow), inside a
        ``LossScaleOptimizer`` with ``loss_scale``.
    """
    if gradient_accumulation < 1:
        raise ValueError(f"gradient_accumulation ({gradient_accumulation}) must be at least 1")
    # Keras evaluates a schedule at the count of batches seen, not of updates made: with
    # accumulation the schedule runs in batches, so its warm-up and end fall on the same updates.
    schedule = WarmupLinearDecay(learning_rate, round(warmup * total_steps) * gradient_accumulation,
                                 total_steps * gradient_accumulation)
    optimizer = AdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        epsilon=1e-6,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=gradient_accumulation if gradient_accumulation > 1 else None,
    )
    # LayerNorm gamma/beta and every bias are the model's 1-D variables.
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in model.trainable_variables if len(v.shape) == 1])
    if loss_scale is None:
        loss_scale = computes_in_float16(model)
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scale else optimizer


def computes_in_float16(model: keras.Model) -> bool:
    """Whether a layer of ``model`` (or of a model inside it) computes in float16."""
    return any(getattr(layer, "compute_dtype", None) == "float16" for layer in _layers(model))


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer that updates the weights: ``optimizer``'s inner one where it is a
    ``LossScaleOptimizer``, else ``optimizer`` itself."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def _layers(model: keras.Model) -> Iterator[Any]:
    for layer in model.layers:
        yield layer
        if hasattr(layer, "layers"):
            yield from _layers(layer)
