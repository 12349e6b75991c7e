"""LoRA adapters through Keras's own ``enable_lora``: the base frozen, the head trained,
saved models merged (kerasbert.models.lora)."""

import keras
import numpy as np
import pytest

import kerasbert
from conftest import TINY
from kerasbert.models import names
from kerasbert.models.layers import Projection
from kerasbert.models.lora import adapter_variables, base_variables, enable_lora

INPUTS = [np.array([[2, 17, 33, 48, 3, 0], [2, 9, 61, 3, 0, 0]], "int32"),
          np.zeros((2, 6), "int32")]


def classifier(family="bert", **overrides):
    keras.utils.set_random_seed(3)
    bert = kerasbert.build_transformer_model({**TINY, **overrides}, model=family)
    return kerasbert.add_cls_classifier(bert, num_labels=2)


def _fit(model, steps=3):
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss="sparse_categorical_crossentropy")
    x = [np.tile(INPUTS[0], (4, 1)), np.tile(INPUTS[1], (4, 1))]
    y = np.array([0, 1] * 4)
    model.fit(x, y, batch_size=8, epochs=steps, verbose=0)


def test_adapters_start_at_zero_freeze_the_base_and_train_with_the_head():
    model = classifier()
    before = model.predict(INPUTS, verbose=0)
    projections = enable_lora(model, rank=4)
    assert [p.path for p in projections] == [
        f"{names.attention_name(i)}/{kind}" for i in range(2) for kind in ("query", "value")]
    np.testing.assert_array_equal(model.predict(INPUTS, verbose=0), before)
    trainable = {w.path for w in model.trainable_weights}
    adapters = {w.path for w in adapter_variables(model)}
    assert len(adapters) == 8
    assert trainable == adapters | {f"{names.CLS_DENSE}/kernel", f"{names.CLS_DENSE}/bias"}
    base = {w.path: w.numpy() for w in base_variables(model)}
    assert len(base) == len(model.weights) - 8 - 2
    _fit(model)
    for weight in base_variables(model):  # bit for bit
        np.testing.assert_array_equal(weight.numpy(), base[weight.path])
    assert all(np.abs(p.lora_kernel_b.numpy()).max() > 0 for p in projections)
    assert not np.array_equal(model.predict(INPUTS, verbose=0), before)


def test_a_saved_lora_model_is_merged_and_predicts_the_same(tmp_path):
    model = classifier()
    enable_lora(model, rank=2, targets="all")
    _fit(model)
    expected = model.predict(INPUTS, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = kerasbert.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), expected, rtol=0, atol=1e-6)
    # A Google checkpoint holds the merged kernel: W + A B (scale alpha / rank = 1).
    kerasbert.save_weights_as_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    import tensorflow as tf

    attention = model.get_layer(names.attention_name(1))
    query = attention.query_dense
    merged = (attention.query_kernel.numpy()
              + query.lora_kernel_a.numpy() @ query.lora_kernel_b.numpy())
    stored = tf.train.load_variable(str(tmp_path / "bert_model.ckpt"),
                                    "bert/encoder/layer_1/attention/self/query/kernel")
    np.testing.assert_allclose(stored, merged, rtol=0, atol=1e-6)
    assert not np.allclose(stored, attention.query_kernel.numpy(), atol=1e-6)


def test_targets_are_named_once_per_layer_and_checked():
    model = classifier()
    assert len(enable_lora(model, rank=1, targets="all")) == 12  # 2 layers x 6 projections
    # ALBERT's one shared layer has one set of adapters.
    albert = classifier("albert", embedding_size=8)
    assert len(enable_lora(albert, rank=2, targets=["query", "value", "intermediate"])) == 3
    # GAU-α's input product is its queries', keys' and values' at once: one set each unit;
    # t5.1.1's gated feed-forward has two intermediate products.
    gau = kerasbert.build_transformer_model(dict(TINY), model="gau_alpha")
    assert [dense.path for dense in enable_lora(gau, rank=2)] == [
        "Transformer-0-GatedAttentionUnit/input", "Transformer-1-GatedAttentionUnit/input"]
    assert len(enable_lora(kerasbert.build_transformer_model(
        dict(TINY), model="t5.1.1", hidden_act=["gelu", "linear"]), rank=2,
        targets=["intermediate"])) == 2 * 2 * 2
    with pytest.raises(ValueError, match="LoRA target 'querry': not one of query, key"):
        enable_lora(classifier(), rank=2, targets=["querry"])
    with pytest.raises(ValueError, match=r"LoRA rank \(0\): must be a whole number"):
        enable_lora(classifier(), rank=0)
    with pytest.raises(ValueError, match="LoRA adapters are there already"):
        enable_lora(model, rank=2)


def test_the_projections_are_keras_dense_layers_that_keras_enable_lora_reaches():
    keras.utils.set_random_seed(3)
    model = kerasbert.build_transformer_model(dict(TINY))
    attention = model.get_layer(names.attention_name(0))
    value = attention.value_dense
    assert isinstance(value, keras.layers.Dense) and isinstance(value, Projection)
    before = model(INPUTS).numpy()
    value.enable_lora(2)  # Keras's own method, on kerasbert's layer
    assert value.lora_enabled and not attention.value_kernel.trainable
    np.testing.assert_array_equal(model(INPUTS).numpy(), before)
    value.lora_kernel_b.assign(np.full(value.lora_kernel_b.shape, 0.5, "float32"))
    assert np.abs(model(INPUTS).numpy() - before).max() > 1e-3


def test_a_head_put_on_after_the_checkpoint_trains_and_lora_rank_builds_the_adapters(tmp_path):
    """The base LoRA freezes is what the checkpoint was loaded into: a span head added after
    the load (Google names it cls/squad) trains; build_transformer_model(lora_rank=) adapts
    once the checkpoint is in."""
    from kerasbert.tasks.qa.span_qa import add_span_head

    keras.utils.set_random_seed(0)
    prefix = str(tmp_path / "bert_model.ckpt")
    kerasbert.save_weights_as_checkpoint(kerasbert.build_transformer_model(TINY), prefix)
    qa = add_span_head(kerasbert.build_transformer_model(TINY, prefix))
    enable_lora(qa, 2)
    trainable = sorted(w.path.split("/")[0] for w in qa.trainable_weights
                       if "lora_kernel" not in w.path)
    assert trainable and all(not name.startswith("Transformer") for name in trainable)
    assert {w.path for w in qa.trainable_weights} >= {w.path for w in adapter_variables(qa)}

    adapted = kerasbert.build_transformer_model(TINY, prefix, lora_rank=4,
                                                lora_targets=["query", "intermediate"])
    assert len(adapter_variables(adapted)) == 2 * 2 * TINY["num_hidden_layers"]
    assert [w for w in adapted.trainable_weights if "lora_kernel" not in w.path] == []
    with pytest.raises(ValueError, match="lora_targets=.*only with lora_rank"):
        kerasbert.build_transformer_model(TINY, lora_targets=["query"])
