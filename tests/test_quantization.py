"""Keras's quantization reaches every product of a kerasbert model
(kerasbert.models.quantization)."""

import warnings

import keras
import numpy as np
import pytest

import kerasbert
from conftest import TINY
from kerasbert.internals import dense_kernel
from kerasbert.models import names
from kerasbert.models.layers import Projection, dense_layers
from kerasbert.models.lora import adapter_variables, enable_lora

INPUTS = [np.array([[2, 17, 33, 48, 3, 0], [2, 9, 61, 3, 0, 0]], "int32"),
          np.zeros((2, 6), "int32")]


def pooled(seed=5, **arguments):
    keras.utils.set_random_seed(seed)
    return kerasbert.build_transformer_model(dict(TINY), with_pool=True, **arguments)


def _dense(model):
    return dense_layers(model)


def test_keras_quantize_reaches_every_projection_and_head():
    model = pooled()
    expected = model.predict(INPUTS, verbose=0)
    model.quantize("int8")  # Keras's own method
    projections = [layer for layer in _dense(model) if isinstance(layer, Projection)]
    assert len(projections) == 12
    assert {layer.quantization_mode for layer in _dense(model)} == {"int8"}
    assert model.get_layer(names.attention_name(0)).query_kernel.dtype == "int8"
    got = model.predict(INPUTS, verbose=0)
    assert np.abs(got - expected).max() < 0.02 * np.abs(expected).max()


@pytest.mark.parametrize("mode", ["int8", "int4", "float8"])
def test_kerasbert_quantize_warns_of_nothing_and_keeps_the_outputs(mode, tmp_path):
    model = pooled()
    expected = model.predict(INPUTS, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # Keras's "has no quantize method"
        quantized = kerasbert.quantize(model, mode)
    assert len(quantized) == 13  # 12 projections and Pooler-Dense
    got = model.predict(INPUTS, verbose=0)
    assert np.abs(got - expected).max() < {"int8": 0.02, "int4": 0.2, "float8": 0.1}[mode] * (
        np.abs(expected).max())
    model.save(tmp_path / "model.keras")
    loaded = kerasbert.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), got, rtol=0, atol=1e-6)


def test_quantize_refuses_an_unknown_mode_a_second_time_and_a_float_checkpoint(tmp_path):
    model = pooled()
    with pytest.raises(ValueError, match="quantization mode 'int3': not one of int8, int4"):
        kerasbert.quantize(model, "int3")
    kerasbert.quantize(model, "int8")
    with pytest.raises(ValueError, match="quantized already"):
        kerasbert.quantize(model, "int8")
    with pytest.raises(ValueError, match="quantized to int8; a float checkpoint is written"):
        kerasbert.save_weights_as_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    assert not list(tmp_path.iterdir())


def test_an_int8_base_trains_lora_adapters():
    keras.utils.set_random_seed(3)
    bert = kerasbert.build_transformer_model(
        {**TINY, "hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0})
    kerasbert.quantize(bert, "int8")  # the base; the head added after it stays in float
    model = kerasbert.add_cls_classifier(bert, num_labels=2)
    enable_lora(model, rank=4)
    head = {f"{names.CLS_DENSE}/kernel", f"{names.CLS_DENSE}/bias"}
    assert {w.path for w in model.trainable_weights} == {
        w.path for w in adapter_variables(model)} | head
    kernels = {layer.path: dense_kernel(layer).numpy() for layer in _dense(bert)}
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    history = model.fit([np.tile(INPUTS[0], (4, 1)), np.tile(INPUTS[1], (4, 1))],
                        np.array([0, 1] * 4), epochs=10, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    for layer in _dense(bert):
        np.testing.assert_array_equal(dense_kernel(layer).numpy(), kernels[layer.path])
    assert all(np.abs(w.numpy()).max() > 0 for w in adapter_variables(model))


@pytest.mark.parametrize("family", ["t5.1.1", "gpt2", "roformer_v2", "albert", "gau_alpha"])
def test_every_family_quantizes_every_product(family):
    """Why slow: t5.1.1's case is the first of five, each a model built, traced for
    predict, quantized and traced again; the first pays for TensorFlow's first traces and
    its encoder-decoder's 22 products (11 s alone, 48 to 71 s beside the other worker)."""
    import importlib.util
    import os

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(
        "make_own_kernels", os.path.join(ROOT, "tests", "fixtures", "saved-own-kernels", "make.py"))
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    keras.utils.set_random_seed(5)
    extra = {"albert": {"embedding_size": 8},
             "t5.1.1": {"hidden_act": ["gelu", "linear"]}}.get(family, {})
    model = kerasbert.build_transformer_model({**TINY, **extra}, model=family)
    expected = model.predict(maker.inputs(family), verbose=0)
    quantized = kerasbert.quantize(model, "int8")
    projections = [layer for layer in quantized if isinstance(layer, Projection)]
    # 2 layers of attention (4 products; T5's decoder: and cross-attention) and feed-forward
    # (2; t5.1.1's gated: 3); ALBERT's one shared layer; GAU-α's 2 units (2 products each).
    assert len(projections) == {"t5.1.1": 2 * 2 * (4 + 3) + 2 * 4, "albert": 6,
                                "gau_alpha": 4}.get(family, 12)
    assert {layer.quantization_mode for layer in quantized} == {"int8"}
    got = model.predict(maker.inputs(family), verbose=0)
    assert np.abs(got - expected).max() < 0.05 * np.abs(expected).max()
