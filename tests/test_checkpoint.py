"""Google checkpoints: the mapping table, strict loading, keep/compound tokens, saving."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import (
    CheckpointError,
    build_transformer_model,
    load_checkpoint,
    save_weights_as_checkpoint,
    write_checkpoint,
)
from kerasbert.checkpoints import io as checkpoint_io
from kerasbert.models import names
from kerasbert.models.families.bert import BERT
from kerasbert.models.loading import model_targets

ALL_HEADS = {"with_pool": True, "with_nsp": True, "with_mlm": True}


def randomize(model, seed=0):
    """Distinct random values in every weight, so a swap or a skipped weight shows."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return model


def weights_of(model):
    return {w.path: np.array(w.numpy()) for w in model.weights}


def assert_same_weights(first, second):
    assert first.keys() == second.keys()
    for path in first:
        np.testing.assert_array_equal(first[path], second[path], err_msg=path)


@pytest.fixture
def saved(tiny_config, tmp_path):
    """A tiny model with all heads, random weights, saved as tmp/ckpt/bert_model.ckpt."""
    model = randomize(build_transformer_model(tiny_config, **ALL_HEADS))
    prefix = str(tmp_path / "ckpt" / "bert_model.ckpt")
    save_weights_as_checkpoint(model, prefix)
    return model, prefix


def checkpoint_dict(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


# ----------------------------------------------------------------------------- mapping
def test_mapping_names_every_weight_once_by_attribute(tiny_config):
    model = build_transformer_model(tiny_config, **ALL_HEADS)
    targets = model_targets(model)
    assert len(targets) == len(model.weights) == 46
    assert {id(t.variable) for t in targets} == {id(w) for w in model.weights}
    assert len({t.name for t in targets}) == len(targets)
    for target in targets:
        # Matched by attribute, never by position: gamma is never beta. A projection's
        # weights are its Dense sublayer's (query_kernel: query/kernel).
        projection = target.attribute.rsplit("_", 1)
        assert target.variable.path in (f"{target.layer}/{target.attribute}",
                                        f"{target.layer}/{'/'.join(projection)}")
        if target.attribute in ("gamma", "beta", "bias"):
            assert target.name.endswith(target.attribute)
    table = BERT.checkpoint_table(2)
    assert table["Embedding-Norm"] == {"gamma": "bert/embeddings/LayerNorm/gamma",
                                       "beta": "bert/embeddings/LayerNorm/beta"}
    assert table[names.norm_name(names.feed_forward_name(1))]["beta"] == (
        "bert/encoder/layer_1/output/LayerNorm/beta")
    assert table[names.attention_name(0)]["output_kernel"] == (
        "bert/encoder/layer_0/attention/output/dense/kernel")

    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="other")
    with pytest.raises(CheckpointError, match="Model other has no layer with a Google variable"):
        load_checkpoint(other, {"bert/pooler/dense/bias": np.zeros(2)})


# ---------------------------------------------------------------------------- round trip
def test_save_writes_google_names_and_round_trips_bit_exact(saved, tiny_config, tmp_path):
    model, prefix = saved
    stored = dict(tf.train.list_variables(prefix))
    assert len(stored) == 46
    assert stored["bert/embeddings/word_embeddings"] == [100, 16]
    assert stored["cls/seq_relationship/output_weights"] == [2, 16]  # Google's layout
    np.testing.assert_array_equal(
        tf.train.load_variable(prefix, "bert/embeddings/LayerNorm/gamma"),
        model.get_layer("Embedding-Norm").gamma.numpy())
    assert not any(".ATTRIBUTES" in name for name in stored)

    for where in (prefix, prefix + ".index", os.path.dirname(prefix), checkpoint_dict(prefix)):
        loaded = build_transformer_model(tiny_config, where, **ALL_HEADS)
        assert_same_weights(weights_of(loaded), weights_of(model))


def test_classifier_model_saves_and_loads_its_encoder(saved, tiny_config, tmp_path):
    from kerasbert import add_cls_classifier

    model, prefix = saved
    classifier = add_cls_classifier(build_transformer_model(tiny_config), 2)
    report = load_checkpoint(classifier, prefix)
    assert len(report.loaded) == 37 and not report.missing
    assert report.unused == sorted(n for n in dict(tf.train.list_variables(prefix))
                                   if n.startswith(("cls/", "bert/pooler/")))
    written = save_weights_as_checkpoint(classifier,
                                         str(tmp_path / "fine_tuned" / "bert_model.ckpt"))
    assert len(written) == 37 and "dense_output" not in " ".join(written)


# ------------------------------------------------------------------------ strict errors
def test_missing_variable_raises_naming_it_and_leaves_the_model_untouched(saved, tiny_config):
    _, prefix = saved
    variables = checkpoint_dict(prefix)
    del variables["bert/encoder/layer_1/attention/output/LayerNorm/gamma"]
    target = randomize(build_transformer_model(tiny_config, **ALL_HEADS), seed=7)
    before = weights_of(target)
    with pytest.raises(CheckpointError, match="layer_1/attention/output/LayerNorm/gamma"):
        load_checkpoint(target, variables)
    assert_same_weights(weights_of(target), before)


def test_shape_mismatch_names_variable_both_shapes_and_the_config_key(saved, tiny_config):
    _, prefix = saved
    model = build_transformer_model(tiny_config.replace(vocab_size=120))
    before = weights_of(model)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(model, prefix)
    message = str(error.value)
    assert "bert/embeddings/word_embeddings" in message and prefix in message
    assert "(120, 16)" in message and "(100, 16)" in message
    assert "vocab_size in the config (120) vs the checkpoint (100)" in message
    assert_same_weights(weights_of(model), before)

    wider = build_transformer_model(tiny_config, max_position_embeddings=64)
    with pytest.raises(CheckpointError, match=r"max_position_embeddings in the config \(64\)"):
        load_checkpoint(wider, prefix)


def test_strict_false_loads_what_fits_and_reports_the_rest(saved, tiny_config):
    model, prefix = saved
    variables = checkpoint_dict(prefix)
    del variables["bert/pooler/dense/bias"]
    variables["bert/embeddings/position_embeddings"] = np.zeros((8, 16), "float32")
    variables["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] = np.zeros((16, 16))
    target = build_transformer_model(tiny_config, with_pool=True)
    report = load_checkpoint(target, variables, strict=False)
    assert report.missing == ["bert/pooler/dense/bias"]
    assert [row[:3] for row in report.mismatched] == [
        ("bert/embeddings/position_embeddings", (32, 16), (8, 16))]
    assert "bert/encoder/layer_0/attention/self/query/kernel/adam_m" in report.unused
    assert len(report.loaded) == 37 and not report.ok
    np.testing.assert_array_equal(target.get_layer("Pooler-Dense").kernel.numpy(),
                                  model.get_layer("Pooler-Dense").kernel.numpy())


def test_fewer_layers_load_and_the_rest_is_reported_unused(saved, tiny_config):
    model, prefix = saved
    one = build_transformer_model(tiny_config, prefix, num_hidden_layers=1, with_mlm=True,
                                  return_keras_model=False)
    report = one.load_report
    assert report.ok and len(report.loaded) == 5 + 16 + 5
    layer_1 = [n for n in report.unused if "/layer_1/" in n]
    assert len(layer_1) == 16 and set(report.unused) - set(layer_1) == {
        "bert/pooler/dense/kernel", "bert/pooler/dense/bias",
        "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"}
    np.testing.assert_array_equal(one.model.get_layer(names.feed_forward_name(0)).output_kernel,
                                  model.get_layer(names.feed_forward_name(0)).output_kernel)

    with pytest.raises(CheckpointError, match="the checkpoint has 2 encoder layers"):
        build_transformer_model(tiny_config, prefix, num_hidden_layers=3)


def test_heads_the_checkpoint_lacks_raise_with_a_hint_when_strict(tiny_config, tmp_path):
    prefix = str(tmp_path / "encoder_only.ckpt")
    save_weights_as_checkpoint(build_transformer_model(tiny_config), prefix)
    with pytest.raises(CheckpointError, match="no such head.*build without with_pool"):
        build_transformer_model(tiny_config, prefix, with_mlm=True, strict=True)


def test_heads_the_checkpoint_lacks_are_initialised_with_one_warning(tiny_config, tmp_path):
    """``build_transformer_model(config, checkpoint, with_pool=True)`` on an encoder's
    checkpoint (the shipped small one has no pooler): the encoder loads, the pooler keeps
    its initial weights, and one warning names each variable not loaded."""
    prefix = str(tmp_path / "encoder_only.ckpt")
    encoder = build_transformer_model(tiny_config)
    save_weights_as_checkpoint(encoder, prefix)
    keras.utils.set_random_seed(3)
    with pytest.warns(UserWarning) as caught:
        model = build_transformer_model(tiny_config, prefix, with_pool=True, with_mlm=True)
    assert len(caught) == 1
    message = str(caught[0].message)
    for variable in ("bert/pooler/dense/kernel", "bert/pooler/dense/bias",
                     "cls/predictions/transform/dense/kernel", "cls/predictions/output_bias"):
        assert variable in message
    assert "word_embeddings" not in message
    np.testing.assert_array_equal(model.get_layer(names.EMBEDDING_TOKEN).embeddings,
                                  encoder.get_layer(names.EMBEDDING_TOKEN).embeddings)
    pooler = model.get_layer(names.POOLER_DENSE).kernel.numpy()
    assert 0.005 < pooler.std() < 0.05  # BERT's truncated normal of 0.02, not zeros
    # An encoder variable missing still fails, heads or not.
    with pytest.raises(CheckpointError, match="the checkpoint has 2 encoder layers"):
        build_transformer_model(tiny_config, prefix, with_pool=True, num_hidden_layers=3)


def test_keras_weights_and_object_based_checkpoints_are_recognised(tiny_config, tmp_path):
    """bert4keras's most reported error: 'Key bert/embeddings/word_embeddings not found'."""
    prefix = tf.train.Checkpoint(embeddings=tf.Variable(np.zeros((100, 16), "float32"))).write(
        str(tmp_path / "object"))
    with pytest.raises(CheckpointError, match="object-based checkpoint"):
        build_transformer_model(tiny_config, prefix)
    model = build_transformer_model(tiny_config)
    model.save_weights(tmp_path / "model.weights.h5")
    with pytest.raises(CheckpointError, match=r"model.weights.h5: is a Keras weights file"):
        load_checkpoint(model, tmp_path / "model.weights.h5")


# ------------------------------------------------------------------------------- files
def test_missing_truncated_and_corrupt_files_are_named(saved, tiny_config, tmp_path):
    model, prefix = saved
    with pytest.raises(FileNotFoundError, match="nowhere/bert_model.ckpt.index"):
        load_checkpoint(model, str(tmp_path / "nowhere" / "bert_model.ckpt"))
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        load_checkpoint(model, str(tmp_path))

    data = prefix + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) * 3 // 5)
    target = build_transformer_model(tiny_config, **ALL_HEADS)
    before = weights_of(target)
    with pytest.raises(CheckpointError, match=r"bert_model\.ckpt\.data-00000-of-00001"):
        load_checkpoint(target, prefix)
    # Some variables were read before the truncated one; none was assigned.
    assert_same_weights(weights_of(target), before)

    save_weights_as_checkpoint(build_transformer_model(tiny_config, **ALL_HEADS), prefix)
    with open(data, "r+b") as f:
        f.seek(100)
        f.write(b"flip")
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001.*Checksum does not match"):
        load_checkpoint(target, prefix)
    assert_same_weights(weights_of(target), before)

    os.remove(data)
    with pytest.raises(FileNotFoundError, match="data-00000-of-00001"):
        load_checkpoint(target, prefix)

    index = prefix + ".index"
    with open(index, "r+b") as f:
        f.seek(os.path.getsize(index) // 2)
        f.write(b"\xff" * 64)
    open(data, "wb").close()
    with pytest.raises(CheckpointError, match=r"bert_model\.ckpt\.index"):
        load_checkpoint(target, prefix)


def test_half_precision_checkpoint_is_cast(tiny_config, saved, tmp_path):
    model, _ = saved
    prefix = str(tmp_path / "half" / "bert_model.ckpt")
    save_weights_as_checkpoint(model, prefix, dtype="float16")
    assert tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()[
        "bert/pooler/dense/kernel"] == tf.float16
    loaded = build_transformer_model(tiny_config, prefix, **ALL_HEADS)
    for weight in loaded.weights:
        assert weight.dtype == "float32"
    original = model.get_layer(names.feed_forward_name(1)).intermediate_kernel.numpy()
    np.testing.assert_array_equal(
        loaded.get_layer(names.feed_forward_name(1)).intermediate_kernel.numpy(),
        original.astype("float16").astype("float32"))

    import ml_dtypes

    # From the float16 checkpoint, so rounded twice.
    bfloat16 = {name: value.astype(ml_dtypes.bfloat16) for name, value in
                checkpoint_dict(prefix).items()}
    report = load_checkpoint(loaded, write_checkpoint(bfloat16, str(tmp_path / "bf16.ckpt")))
    assert report.ok and len(report.loaded) == 46
    np.testing.assert_array_equal(
        loaded.get_layer(names.feed_forward_name(1)).intermediate_kernel.numpy(),
        original.astype("float16").astype(ml_dtypes.bfloat16).astype("float32"))


# ---------------------------------------------------------------------------- vocabulary
def test_keep_and_compound_tokens_gather_and_average_rows(saved, tiny_config):
    _, prefix = saved
    table = tf.train.load_variable(prefix, "bert/embeddings/word_embeddings")
    bias = tf.train.load_variable(prefix, "cls/predictions/output_bias")
    keep = [0, 1, 7, 3, 99]
    # Compound ids count in the kept vocabulary (bert4keras): 2 is old 7, 4 is old 99.
    compound = [[2, 3], ([1, 2, 4], [1, 1, 2])]
    model = build_transformer_model(tiny_config, prefix, with_mlm=True, keep_tokens=keep,
                                    compound_tokens=compound)
    embeddings = model.get_layer("Embedding-Token").embeddings.numpy()
    assert embeddings.shape == (7, 16)
    np.testing.assert_array_equal(embeddings[:5], table[keep])
    np.testing.assert_allclose(embeddings[5], (table[7] + table[3]) / 2, atol=1e-6)
    np.testing.assert_allclose(embeddings[6], (table[1] + table[7] + 2 * table[99]) / 4,
                               atol=1e-6)
    mlm_bias = model.get_layer("MLM-Bias").bias.numpy()
    np.testing.assert_array_equal(mlm_bias[:5], bias[keep])
    np.testing.assert_allclose(mlm_bias[6], (bias[1] + bias[7] + 2 * bias[99]) / 4, atol=1e-6)

    with pytest.raises(CheckpointError, match=r"Token id 100 in keep_tokens .* \(0 to 99\)"):
        build_transformer_model(tiny_config, prefix, keep_tokens=[1, 100])
    with pytest.raises(CheckpointError, match=r"Token id 5 in compound_tokens .* \(0 to 4, after"):
        build_transformer_model(tiny_config, prefix, keep_tokens=keep, compound_tokens=[[5]])
    with pytest.raises(ValueError, match=r"\(\[1, 2\], \[1\]\) needs .* one weight per id"):
        build_transformer_model(tiny_config, prefix, compound_tokens=[([1, 2], [1])])


# -------------------------------------------------------------------------------- atomic
def test_a_failed_write_leaves_no_checkpoint_and_no_temporary_files(saved, monkeypatch, tmp_path):
    model, prefix = saved
    before = checkpoint_dict(prefix)

    def failing_save(**kwargs):
        raise OSError("disk full")

    # A failure while writing: the old checkpoint is still whole.
    monkeypatch.setattr(tf.raw_ops, "SaveV2", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_weights_as_checkpoint(randomize(model, 3), prefix)
    monkeypatch.undo()
    assert_same_weights(checkpoint_dict(prefix), before)
    assert sorted(os.listdir(os.path.dirname(prefix))) == [
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]

    # A crash while moving into place: the prefix names no loadable checkpoint.
    real_replace = os.replace

    def crash_on_index(source, destination):
        if destination.endswith(".index"):
            raise KeyboardInterrupt
        real_replace(source, destination)

    monkeypatch.setattr(checkpoint_io.os, "replace", crash_on_index)
    with pytest.raises(KeyboardInterrupt):
        save_weights_as_checkpoint(model, prefix)
    monkeypatch.undo()
    assert not os.path.exists(prefix + ".index")
    assert [f for f in os.listdir(os.path.dirname(prefix)) if f.startswith(".")] == []
    with pytest.raises(FileNotFoundError):
        load_checkpoint(model, prefix)

    written = write_checkpoint({"step": np.int64(3)}, prefix)
    assert tf.train.load_variable(written, "step") == 3
    with pytest.raises(ValueError, match="is a directory; give a prefix such as"):
        write_checkpoint({"step": np.int64(3)}, tmp_path)


# ------------------------------------------------------------------------------ bert4keras
@pytest.mark.slow
@pytest.mark.peer
def test_bert4keras_reads_our_checkpoint_and_we_read_theirs(saved, tiny_config_path, tmp_path):
    from peers import run_bert4keras

    model, prefix = saved
    keep, compound = [0, 1, 7, 3, 99, 42], [[2, 3], ([1, 2, 4], [1, 1, 2])]
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 6, size=(3, 9)).astype("int32")
    segments = np.zeros_like(tokens)
    for row, length in enumerate((9, 6, 4)):
        tokens[row, length:] = 0
        segments[row, length // 2:length] = 1
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "segments.npy", segments)
    theirs = str(tmp_path / "theirs" / "bert_model.ckpt")
    result = run_bert4keras(f"""
        import json, os, numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, found under tf.compat.v1
        # in TF 2, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.models import build_transformer_model
        bert = build_transformer_model({str(tiny_config_path)!r}, {prefix!r}, with_pool=True,
                                       with_nsp=True, with_mlm=True, keep_tokens={keep!r},
                                       compound_tokens={compound!r}, return_keras_model=False)
        x = [np.load({str(tmp_path / 'tokens.npy')!r}), np.load({str(tmp_path / 'segments.npy')!r})]
        nsp, mlm = bert.model.predict(x, verbose=0)
        np.save({str(tmp_path / 'nsp.npy')!r}, nsp)
        np.save({str(tmp_path / 'mlm.npy')!r}, mlm)
        os.makedirs(os.path.dirname({theirs!r}))
        bert.save_weights_as_checkpoint({theirs!r})
        print(json.dumps(sorted(n for names in bert.variable_mapping().values() for n in names)))
    """)
    ours = build_transformer_model(str(tiny_config_path), prefix, with_pool=True, with_nsp=True,
                                   with_mlm=True, keep_tokens=keep, compound_tokens=compound)
    # Their table also lists the ALBERT-style Embedding-Mapping, which BERT-base lacks.
    assert {t.name for t in model_targets(ours)} == {
        name for name in result if "embedding_hidden_mapping_in" not in name}
    nsp, mlm = ours([tokens, segments])
    np.testing.assert_allclose(nsp, np.load(tmp_path / "nsp.npy"), atol=1e-6)
    np.testing.assert_allclose(mlm, np.load(tmp_path / "mlm.npy"), atol=1e-6)

    again = build_transformer_model(str(tiny_config_path), theirs, with_pool=True, with_nsp=True,
                                    with_mlm=True, vocab_size=len(keep) + len(compound))
    assert_same_weights(weights_of(again), weights_of(ours))


# ----------------------------------------------------------------------------- streaming
def test_a_streaming_load_reads_in_groups_and_loads_the_same_bits(saved, tiny_config,
                                                                  monkeypatch):
    from kerasbert.models import loading

    model, prefix = saved
    whole = build_transformer_model(tiny_config, **ALL_HEADS)
    load_checkpoint(whole, prefix)
    reads = []
    read_all = checkpoint_io.FileSource.read_all
    monkeypatch.setattr(checkpoint_io.FileSource, "read_all",
                        lambda self, names: reads.append(len(names)) or read_all(self, names))
    monkeypatch.setattr(loading, "STREAM_BYTES", 4096)  # a few tiny tensors a group
    streamed = build_transformer_model(tiny_config, prefix, **ALL_HEADS)
    assert len(reads) > 5 and sum(reads) == len(model.weights)
    assert_same_weights(weights_of(streamed), weights_of(whole))
    assert_same_weights(weights_of(streamed), weights_of(model))


def test_a_streaming_load_names_every_damaged_tensor_even_in_later_groups(saved, tiny_config,
                                                                         tmp_path, monkeypatch):
    from kerasbert.models import loading

    _, prefix = saved
    variables = checkpoint_dict(prefix)
    first, last = "bert/embeddings/word_embeddings", "cls/predictions/output_bias"
    variables[first][0, 0] = np.nan
    variables[last][1] = np.inf
    damaged = write_checkpoint(variables, str(tmp_path / "damaged" / "bert_model.ckpt"))
    monkeypatch.setattr(loading, "STREAM_BYTES", 4096)
    with pytest.raises(CheckpointError) as refused:
        build_transformer_model(tiny_config, damaged, **ALL_HEADS)
    message = str(refused.value)
    assert message.startswith(f"non-finite values in {damaged}: ")
    assert f"{first} (1 NaN)" in message and f"{last} (1 inf)" in message


def test_weights_a_checkpoint_sets_are_made_from_it_not_drawn_at_random_first(
        saved, tiny_config, monkeypatch):
    """Built with a checkpoint, each weight is created from the value read (deferred
    variables): no random draw, no assignment over one; what the checkpoint lacks
    (a non-strict load's extra layer) still gets its random draw."""
    from keras.src.backend.common import global_state

    _, prefix = saved
    expected = checkpoint_weights_loaded(tiny_config, prefix)
    draws, assigned = [], []  # draws of values (not symbolic ones while tracing the graph)
    truncated_normal = keras.initializers.TruncatedNormal.__call__
    monkeypatch.setattr(keras.initializers.TruncatedNormal, "__call__",
                        lambda self, shape, dtype=None: (tf.executing_eagerly() and draws.append(
                            tuple(shape))) or truncated_normal(self, shape, dtype))
    assign = keras.Variable.assign
    monkeypatch.setattr(keras.Variable, "assign",
                        lambda self, value: assigned.append(self.path) or assign(self, value))
    bert = build_transformer_model(tiny_config, prefix, **ALL_HEADS)
    assert draws == [] and assigned == []
    assert_same_weights(weights_of(bert), expected)
    assert not global_state.get_global_attribute("uninitialized_variables")

    deeper = build_transformer_model(tiny_config, prefix, num_hidden_layers=3, strict=False)
    assert sorted(draws) == [(16, 16)] * 4 + [(16, 32), (32, 16)]  # layer 2's kernels only
    kernel = deeper.get_layer(names.attention_name(2)).query_kernel.numpy()
    assert np.std(kernel) > 0.01  # the layer the checkpoint does not have: random, not zeros
    assert "initializer" not in deeper.get_layer(names.attention_name(2)).get_config()
    assert not global_state.get_global_attribute("uninitialized_variables")


def test_a_failed_checkpoint_build_leaves_no_half_made_weights_behind(saved, tiny_config,
                                                                      tmp_path):
    from keras.src.backend.common import global_state

    _, prefix = saved
    variables = checkpoint_dict(prefix)
    del variables["bert/encoder/layer_1/output/dense/kernel"]
    with pytest.raises(CheckpointError, match="layer_1/output/dense/kernel"):
        build_transformer_model(tiny_config, variables, **ALL_HEADS)
    assert not global_state.get_global_attribute("uninitialized_variables")
    with keras.StatelessScope():  # Keras initializes what is pending on leaving it
        pass
    fresh = build_transformer_model(tiny_config, **ALL_HEADS)
    assert all(np.isfinite(weight).all() for weight in weights_of(fresh).values())


def checkpoint_weights_loaded(config, prefix):
    model = build_transformer_model(config, **ALL_HEADS)
    load_checkpoint(model, prefix)
    return weights_of(model)
