"""The dtype is an argument of the builder and the heads: no global policy is read or changed."""

import keras
import numpy as np
import pytest

from kerasbert import add_cls_classifier, build_transformer_model
from kerasbert.models import names
from kerasbert.tasks.classification.task import with_probabilities
from tests.conftest import TINY

IDS = np.array([[2, 7, 9, 11, 3, 0, 0, 0], [2, 5, 3, 0, 0, 0, 0, 0]], "int32")
SEGMENTS = np.zeros_like(IDS)


def _layers_with_weights(model):
    return [layer for layer in model.layers if layer.weights]


def test_a_mixed_precision_encoder_leaves_the_global_policy_alone():
    before = keras.mixed_precision.dtype_policy().name
    bert = build_transformer_model(dict(TINY), with_pool=True, with_mlm=True,
                                   dtype="mixed_bfloat16")
    assert keras.mixed_precision.dtype_policy().name == before == "float32"
    policies = {layer.name: layer.dtype_policy.name for layer in _layers_with_weights(bert)}
    assert set(policies.values()) == {"mixed_bfloat16"}, policies
    # Weights stay float32; the attention's own dropout follows its layer's policy.
    assert {w.dtype for w in bert.weights} == {"float32"}
    attention = bert.get_layer(names.attention_name(0))
    assert attention.probability_dropout.dtype_policy.name == "mixed_bfloat16"
    # A model built afterwards without a dtype is float32 again.
    plain = build_transformer_model(dict(TINY))
    assert {layer.dtype_policy.name for layer in _layers_with_weights(plain)} == {"float32"}


def test_the_same_weights_in_bfloat16_give_nearly_the_same_output():
    keras.utils.set_random_seed(1)
    plain = build_transformer_model(dict(TINY), dropout_rate=0)
    mixed = build_transformer_model(dict(TINY), dropout_rate=0, dtype="mixed_bfloat16")
    mixed.set_weights(plain.get_weights())
    a = np.asarray(plain([IDS, SEGMENTS]))
    b = np.asarray(keras.ops.cast(mixed([IDS, SEGMENTS]), "float32"))
    assert b.dtype == np.float32 and not np.array_equal(a, b)  # really computed in bfloat16
    np.testing.assert_allclose(a[IDS > 0], b[IDS > 0], atol=0.1)


def test_the_classifier_head_stays_float32_under_a_mixed_encoder():
    bert = build_transformer_model(dict(TINY), dtype="mixed_bfloat16")
    model = add_cls_classifier(bert, 3, activation="linear")
    dense = model.get_layer(names.CLS_DENSE)
    assert dense.dtype_policy.name == "float32"
    assert model.outputs[0].dtype == "float32"


def test_a_run_saves_probabilities_computed_from_the_trained_logits():
    keras.utils.set_random_seed(2)
    logits_model = add_cls_classifier(build_transformer_model(dict(TINY)), 3,
                                      activation="linear")
    saved = with_probabilities(logits_model)
    assert saved.layers[-1].name == names.CLS_PROBABILITIES
    logits = np.asarray(logits_model([IDS, SEGMENTS]))
    probabilities = np.asarray(saved([IDS, SEGMENTS]))
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-6, atol=1e-7)
    # The same layers: training the logits model trains what is saved.
    assert saved.get_layer(names.CLS_DENSE) is logits_model.get_layer(names.CLS_DENSE)


@pytest.mark.parametrize("heads", [{"with_nsp": True}, {"with_mlm": True}])
def test_a_prediction_head_is_refused_by_name(heads):
    bert = build_transformer_model(dict(TINY), **heads)
    with pytest.raises(ValueError, match="NSP-Proba|MLM-Activation"):
        add_cls_classifier(bert, 2)


# ------------------------------------------------------- CPUs without hardware bfloat16
def test_cpu_flags_are_read_from_the_kernels_list(tmp_path):
    from kerasbert import hardware

    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\n"
                   "processor\t: 1\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert hardware.cpu_flags(str(x86)) == {"fpu", "avx2", "avx512f", "avx512_bf16"}
    assert hardware.has_fast_bfloat16(hardware.cpu_flags(str(x86)))
    assert not hardware.has_fast_bfloat16(hardware.cpu_flags(str(arm)))
    assert hardware.cpu_flags(str(tmp_path / "none")) is None
    assert hardware.has_fast_bfloat16(None) == hardware.has_fast_bfloat16(hardware.cpu_flags())


@pytest.mark.parametrize("flags, expected", [(frozenset({"avx2", "fma"}), "float32"),
                                             (frozenset({"avx2", "amx_bf16"}), "bfloat16")])
def test_a_bfloat16_predictor_falls_back_to_float32_without_hardware_bfloat16(
        flags, expected, monkeypatch, caplog):
    from kerasbert import hardware
    from kerasbert.inference.predictor import Predictor

    monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
    bert = build_transformer_model(dict(TINY))
    with caplog.at_level("WARNING", logger="kerasbert"):
        predict = Predictor(bert, dtype_policy="bfloat16")
    layer = predict.model.get_layer(names.feed_forward_name(0))
    assert layer.compute_dtype == expected
    warned = [r.getMessage() for r in caplog.records if "no hardware bfloat16" in r.getMessage()]
    assert len(warned) == (expected == "float32")
    assert predict(IDS, SEGMENTS).shape == (2, 8, TINY["hidden_size"])


def test_mixed_precision_training_falls_back_to_float32_without_hardware_bfloat16(
        monkeypatch, caplog, tiny_config_path):
    from kerasbert import hardware
    from kerasbert.tasks.classification.options import ClassificationOptions
    from kerasbert.tasks.classification.task import build_classifier

    options = ClassificationOptions(output="unused", config=str(tiny_config_path),
                                    mixed_precision="bfloat16").resolved()
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    with caplog.at_level("WARNING", logger="kerasbert"):
        model = build_classifier(options, 2)
    assert model.get_layer(names.attention_name(0)).dtype_policy.name == "float32"
    assert any("--mixed-precision" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    model = build_classifier(options, 2)
    assert model.get_layer(names.attention_name(0)).dtype_policy.name == "mixed_bfloat16"
