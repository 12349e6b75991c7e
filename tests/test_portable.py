"""ONNX and LiteRT exports of a fine-tuned run, run under ONNX Runtime and the LiteRT
interpreter."""

import dataclasses
import filecmp
import json
import os
import shutil
import sys

import keras
import numpy as np
import pytest

from conftest import train_options
from kerasbert import Predictor, add_cls_classifier, build_transformer_model, shipped
from kerasbert.serving.portable import ExportError, litert_runner
from kerasbert.tasks.classification.task import ClassificationOptions, Run, train
from kerasbert.training.data import read_examples
from kerasbert.training.rundir import RunError

TOLERANCE = 1e-4  # max abs difference of probabilities, the figure


@pytest.fixture(scope="module")
def tiny_run(tiny_run_inputs, tmp_path_factory):
    output = tmp_path_factory.mktemp("portable") / "run"
    train(train_options(tiny_run_inputs, output, epochs=1))
    return Run(str(output))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The shipped kerasbert-zh-small with a two-label head, as a finished run directory."""
    model_dir = shipped.model_dir()
    keras.utils.set_random_seed(0)
    bert = build_transformer_model(os.path.join(model_dir, "bert_config.json"),
                                   os.path.join(model_dir, "bert_model.ckpt"))
    model = add_cls_classifier(bert, 2)
    # The head's default initialisation keeps every probability near 0.65, where an error
    # in the encoder hardly shows; these weights spread them from 0.01 to 0.5.
    head = model.get_layer("dense_output")
    head.kernel.assign(np.random.default_rng(0).normal(0, 0.1, head.kernel.shape).astype("float32"))
    run_dir = tmp_path_factory.mktemp("small") / "run"
    run_dir.mkdir()
    model.save(run_dir / "model.keras")
    (run_dir / "labels.json").write_text(json.dumps(["negative", "positive"]))
    shutil.copyfile(os.path.join(model_dir, "vocab.txt"), run_dir / "vocab.txt")
    saved = dataclasses.asdict(ClassificationOptions(output=str(run_dir), maxlen=128))
    (run_dir / "train_config.json").write_text(json.dumps(saved))
    (run_dir / "metrics.json").write_text("{}")
    return Run(str(run_dir))


def review_batches(run, batch_size=64):
    """The review test split, encoded at the run's maxlen in batches of similar length."""
    texts = read_examples(shipped.data_file("reviews", "test")).texts
    assert len(texts) == 1736
    token_ids, _ = run.tokenizer.encode_batch(texts, maxlen=run.options.maxlen)
    order = np.argsort((token_ids != 0).sum(axis=1), kind="stable")
    return [run.tokenizer.encode_batch([texts[i] for i in order[start:start + batch_size]],
                                       maxlen=run.options.maxlen)
            for start in range(0, len(texts), batch_size)]


def keras_probabilities(run, batches):
    predict = Predictor(run.model)  # one trace for every batch shape
    return [predict(token_ids, segment_ids) for token_ids, segment_ids in batches]


@pytest.fixture(scope="module")
def reviews(small_run):
    """The review test split in batches, and the Keras model's probabilities on them:
    computed once for the exports that are compared with them."""
    batches = review_batches(small_run)
    return batches, keras_probabilities(small_run, batches)


def worst_difference(predict, batches, expected):
    """The largest |exported - Keras| probability over all batches."""
    return max(float(np.abs(predict(token_ids, segment_ids) - probabilities).max())
               for (token_ids, segment_ids), probabilities in zip(batches, expected))


def onnxruntime_session(path):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda t, s: session.run(["probabilities"], {"token_ids": t, "segment_ids": s})[0]


@pytest.mark.slow
@pytest.mark.peer
def test_onnx_export_equals_keras_under_onnxruntime(tiny_run, tiny_run_inputs, tmp_path,
                                                    capfd):
    capfd.readouterr()
    paths = tiny_run.export(tmp_path / "onnx", format="onnx")
    assert capfd.readouterr() == ("", "")  # tf2onnx's logs stay quiet
    assert paths == [str(tmp_path / "onnx" / name) for name in ("model.onnx", "labels.json",
                                                                 "vocab.txt")]
    assert sorted(os.listdir(tmp_path / "onnx")) == ["labels.json", "model.onnx", "vocab.txt"]
    assert json.loads((tmp_path / "onnx" / "labels.json").read_text()) == ["negative", "positive"]
    assert filecmp.cmp(tmp_path / "onnx" / "vocab.txt",
                       os.path.join(tiny_run.run_dir, "vocab.txt"), shallow=False)

    import onnx

    model = onnx.load(str(tmp_path / "onnx" / "model.onnx"))
    assert {p.key: p.value for p in model.metadata_props} == {
        "labels": '["negative", "positive"]', "maxlen": "32"}
    axes = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in list(model.graph.input) + list(model.graph.output)]
    assert axes == [["batch", "length"], ["batch", "length"], ["batch", 2]]

    predict = onnxruntime_session(tmp_path / "onnx" / "model.onnx")
    texts = read_examples(tiny_run_inputs["test"]).texts
    # All texts at once, then a single text: batch and length are both dynamic.
    batches = [tiny_run.tokenizer.encode_batch(texts, maxlen=32),
               tiny_run.tokenizer.encode_batch(texts[:1], maxlen=32)]
    assert batches[0][0].shape[1] != batches[1][0].shape[1]
    expected = keras_probabilities(tiny_run, batches)
    assert worst_difference(predict, batches, expected) <= TOLERANCE


@pytest.mark.slow
@pytest.mark.peer
def test_litert_export_equals_keras_under_the_litert_interpreter(tiny_run, tiny_run_inputs,
                                                                 tmp_path, capfd):
    capfd.readouterr()
    paths = tiny_run.export(tmp_path / "litert", format="litert")
    assert capfd.readouterr() == ("", "")  # the converter's and interpreter's notes stay quiet
    assert [os.path.basename(p) for p in paths] == ["model.tflite", "labels.json", "vocab.txt"]
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(tmp_path / "litert" / "model.tflite"))
    runner = interpreter.get_signature_runner()
    assert set(runner.get_input_details()) == {"token_ids", "segment_ids"}
    assert list(runner.get_output_details()) == ["probabilities"]
    length = runner.get_input_details()["token_ids"]["shape_signature"].tolist()
    assert length in ([-1, -1], [-1, 32])  # dynamic, or fixed at the run's maxlen

    texts = read_examples(tiny_run_inputs["test"]).texts
    batches = [tiny_run.tokenizer.encode_batch(texts, maxlen=32),
               tiny_run.tokenizer.encode_batch(texts[:1], maxlen=32)]
    predict = litert_runner(tmp_path / "litert" / "model.tflite")
    expected = keras_probabilities(tiny_run, batches)
    assert worst_difference(predict, batches, expected) <= TOLERANCE


@pytest.mark.peer
@pytest.mark.slow
def test_shipped_model_on_the_review_test_split(small_run, reviews, tmp_path):
    """The issue's check: ONNX equal to Keras within 1e-4 on all 1,736 reviews at maxlen 128.

    LiteRT runs every fourth batch (448 reviews, short to long): while its length is
    fixed at maxlen, every batch costs a full 128 tokens per review.

    Why slow: the claim is about the whole test split, so Keras, ONNX Runtime and LiteRT
    each read it.
    """
    batches, expected = reviews
    small_run.export(tmp_path / "onnx", format="onnx")
    predict = onnxruntime_session(tmp_path / "onnx" / "model.onnx")
    assert worst_difference(predict, batches, expected) <= TOLERANCE
    small_run.export(tmp_path / "litert", format="litert")
    predict = litert_runner(tmp_path / "litert" / "model.tflite")
    assert worst_difference(predict, batches[::4], expected[::4]) <= TOLERANCE


@pytest.mark.peer
@pytest.mark.slow
def test_int8_onnx_export_from_the_command_line(small_run, reviews, tmp_path):
    """``kerasbert export --format onnx --int8`` in a real process: int8 products, their
    weights a quarter of the size, and the labels of the Keras model on the review test
    split."""
    import onnx

    from kerasbert.serving.portable import INT8_TOLERANCE, onnx_runner
    from test_cli_errors import run_kerasbert

    for name, flags in (("fp32", []), ("int8", ["--int8"])):
        done = run_kerasbert(["export", "--model", small_run.run_dir, "--to", str(tmp_path / name),
                              "--format", "onnx", *flags], tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == f"wrote {tmp_path / name / 'model.onnx'}"
    path = tmp_path / "int8" / "model.onnx"
    model = onnx.load(str(path))
    assert {p.key: p.value for p in model.metadata_props}["quantization"] == "dynamic int8"
    # Every product with a weight matrix runs in int8; the attention's two products of
    # activations stay in float.
    weights = {tensor.name for tensor in model.graph.initializer}
    kinds = [node.op_type for node in model.graph.node]
    assert kinds.count("MatMulInteger") == 6 * 4 + 1  # 4 layers, and the classifier
    assert not [node.name for node in model.graph.node
                if node.op_type == "MatMul" and weights & set(node.input)]
    # The 4 x 786,432 matrix weights shrink from 4 bytes to 1; the embeddings stay float32.
    saved = os.path.getsize(tmp_path / "fp32" / "model.onnx") - os.path.getsize(path)
    assert saved > 0.99 * 3 * 4 * 786_432

    batches, expected = reviews
    predict = onnx_runner(path)
    got = [predict(token_ids, segment_ids) for token_ids, segment_ids in batches]
    assert max(float(np.abs(g - e).max()) for g, e in zip(got, expected)) <= INT8_TOLERANCE
    same = np.mean(np.concatenate([g.argmax(-1) == e.argmax(-1) for g, e in zip(got, expected)]))
    assert same >= 0.99


@pytest.mark.slow
def test_exports_never_replace_what_they_did_not_write(tiny_run, tmp_path):
    run_files = sorted(os.listdir(tiny_run.run_dir))
    with pytest.raises(RunError, match=r"^--to in .*: is the run directory or holds it"):
        tiny_run.export(tiny_run.run_dir, overwrite=True, format="onnx")
    with pytest.raises(RunError, match="is the run directory or holds it"):
        tiny_run.export(os.path.dirname(tiny_run.run_dir), overwrite=True, format="litert")
    assert sorted(os.listdir(tiny_run.run_dir)) == run_files

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(RunError, match=r"^--to in .*mine: exists and is not empty; pass "
                                       "--overwrite"):
        tiny_run.export(mine, format="onnx")
    with pytest.raises(RunError, match=r"^--to in .*mine: is not an ONNX export \(no "
                                       r"model.onnx\)"):
        tiny_run.export(mine, overwrite=True, format="onnx")
    assert os.listdir(mine) == ["notes.txt"]

    target = tmp_path / "onnx"
    tiny_run.export(target, format="onnx")
    (target / "labels.json").write_text("stale")
    with pytest.raises(RunError, match="not empty"):
        tiny_run.export(target, format="onnx")
    with pytest.raises(RunError, match=r"is not a LiteRT export \(no model.tflite\)"):
        tiny_run.export(target, overwrite=True, format="litert")
    tiny_run.export(target, overwrite=True, format="onnx")
    assert json.loads((target / "labels.json").read_text()) == ["negative", "positive"]
    assert sorted(name for name in os.listdir(tmp_path)) == ["mine", "onnx"]  # no temporaries


@pytest.mark.slow
def test_missing_converter_is_named_with_the_install_command(tiny_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # what `import tf2onnx` meets uninstalled
    with pytest.raises(ExportError, match=r"^ONNX export in --format onnx: needs tf2onnx, which "
                                          r"is not installed; pip install 'kerasbert\[onnx\]'$"):
        tiny_run.export(tmp_path / "onnx", format="onnx")
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    with pytest.raises(ExportError, match=r"needs ai-edge-litert, .*'kerasbert\[litert\]'$"):
        tiny_run.export(tmp_path / "litert", format="litert")
    assert os.listdir(tmp_path) == []
