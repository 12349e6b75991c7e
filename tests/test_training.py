"""The optimizer and its learning-rate schedule, observed through Keras's public interface."""

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model
from kerasbert.training.optimizer import WarmupLinearDecay, make_optimizer


def test_schedule_shape_and_serialization():
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    values = [float(schedule(step)) for step in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [0, 5e-5, 1e-4, 5e-5, 0, 0], atol=1e-12)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert again.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupLinearDecay(1e-4, warmup_steps=20, total_steps=10)


def changed_after(optimizer, variables, zero_gradients):
    """The paths of ``variables`` that one ``optimizer.apply`` of ``zero_gradients`` changes."""
    before = [v.numpy().copy() for v in variables]
    optimizer.apply(zero_gradients, variables)
    return {v.path for v, old in zip(variables, before) if not np.array_equal(v.numpy(), old)}


def test_weight_decay_reaches_the_matrices_only_and_waits_for_the_accumulated_update(
        tiny_config):
    """With a zero gradient Adam moves nothing, so whatever changes was decayed: every
    matrix (embeddings, kernels) and no LayerNorm gamma or beta and no bias. With two
    batches per update, the first batch changes nothing at all."""
    model = build_transformer_model(tiny_config, with_pool=True, with_mlm=True)
    variables = model.trainable_variables
    for variable in variables:  # zero biases and betas would not show a decay
        variable.assign(np.ones(variable.shape, "float32"))
    # No warm-up, so the very first update has a non-zero learning rate.
    optimizer = make_optimizer(model, 1e-2, total_steps=100, warmup=0, weight_decay=0.1,
                               gradient_accumulation=2)
    optimizer.build(variables)
    zeros = [np.zeros(v.shape, "float32") for v in variables]

    assert changed_after(optimizer, variables, zeros) == set()
    decayed = changed_after(optimizer, variables, zeros)
    matrices = {v.path for v in variables if len(v.shape) == 2}
    assert decayed == matrices
    assert {"Embedding-Token/embeddings", "Pooler-Dense/kernel"} <= decayed
    assert not any(name in path for path in decayed for name in ("gamma", "beta", "bias"))


def test_accumulated_run_follows_the_schedule_in_updates():
    """Keras evaluates a schedule at the batch count; with 2 batches per update the rate at
    update k must still be the schedule's value at step k (warm-up 2 updates, end at 10)."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = make_optimizer(model, 1e-3, total_steps=10, warmup=0.2, gradient_accumulation=2)
    variables = model.trainable_variables
    optimizer.build(variables)
    zeros = [np.zeros(v.shape, "float32") for v in variables]
    expected = WarmupLinearDecay(1e-3, warmup_steps=2, total_steps=10)
    rates = {int(optimizer.iterations): float(optimizer.learning_rate)}
    for _ in range(2 * 12):  # past the end of the schedule
        optimizer.apply(zeros, variables)
        # The rate when update k begins: the first batch count at which iterations is k.
        rates.setdefault(int(optimizer.iterations), float(optimizer.learning_rate))
    assert sorted(rates) == list(range(13))
    np.testing.assert_allclose([rates[k] for k in range(13)],
                               [float(expected(k)) for k in range(13)], atol=1e-9)


def test_a_seeded_pipeline_is_endless_so_fit_keeps_one_iterator():
    """``kerasbert train`` gives ``fit`` an endless pipeline and ``steps_per_epoch``: Keras
    then keeps one data iterator for the run instead of making one per epoch (which
    stalls every epoch boundary, see docs/benchmarks.md, Training)."""
    from kerasbert.training.batches import make_dataset

    tokens = np.arange(1, 1 + 10 * 4, dtype="int32").reshape(10, 4)
    labels = np.arange(10, dtype="int32") % 2
    endless = make_dataset(tokens, np.zeros_like(tokens), labels, batch_size=4, seed=0)
    one_epoch = -(-10 // 4)
    seen = [batch[1].numpy() for batch in endless.take(5 * one_epoch)]
    assert len(seen) == 5 * one_epoch  # five epochs and it has not ended
    assert sorted(np.concatenate(seen[:one_epoch]).tolist()) == sorted(labels.tolist())
    assert len(list(make_dataset(tokens, np.zeros_like(tokens), labels, batch_size=4))) == \
        one_epoch  # without a seed: one pass, for evaluation
