"""Serving latency: raw texts in, probabilities out, for each way of serving a run.

The shipped ``kerasbert-zh-small`` (L4 H256 A4 I1024) with a two-label head, saved as a
run directory and exported once (``prepare``). Inputs are real reviews from the shipped
test split, cut to length: 1 text of 32 characters and 32 texts of 64 characters,
tokenized at maxlen 128. Each way runs in its own process and is timed as the median
of ``repeats`` calls (``small_repeats`` for the single text) after ``warmup`` untimed
ones, tokenization included:

* ``predictor``: :class:`kerasbert.Tokenizer` + :class:`kerasbert.Predictor` in process;
* ``saved_model``: the SavedModel of ``Run.export``, its ``classify`` signature (raw
  strings in, tokenized in the graph) where it has one, else ``serving_default`` with
  tokenization in Python;
* ``onnxruntime``: the export of :func:`kerasbert.serving.portable.export_onnx` under ONNX Runtime,
  tokenized in Python;
* ``litert``: the export of :func:`kerasbert.serving.portable.export_litert` under the LiteRT
  interpreter (all cores), tokenized in Python.

Every way's probabilities are compared with the Keras model's (``max |Δ|``).

``python -m bench serving`` (or ``python -m bench.serving``) runs this suite alone.
"""

import dataclasses
import json
import os
import shutil
import tempfile

import numpy as np

from bench.runner import Skipped, require, run_worker, selected, timed, why_missing
from bench.worker import ROOT

MODEL = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small")
TEST_FILE = os.path.join(ROOT, "kerasbert", "resources", "reviews", "test.tsv")
MAXLEN = 128
SHAPES = [(1, 32), (32, 64)]  # (texts, characters each)
LABELS = ["negative", "positive"]

# name -> what is timed
IMPLEMENTATIONS = {
    "predictor": "Tokenizer + Predictor, in process",
    "saved_model": "SavedModel via tf.saved_model.load",
    "onnxruntime": "Tokenizer + ONNX Runtime",
    "litert": "Tokenizer + LiteRT interpreter",
}


def bench_texts(count, characters):
    """The first ``count`` test reviews with at least ``characters`` characters, cut to that."""
    from kerasbert.training.data import read_examples

    texts = [text[:characters] for text in read_examples(TEST_FILE).texts
             if len(text) >= characters]
    return texts[:count]


def prepare(folder):
    """Worker: the run directory, its three exports, and the Keras probabilities of the inputs."""
    import keras

    from kerasbert import add_cls_classifier, build_transformer_model
    from kerasbert.tasks.classification.task import ClassificationOptions, Run

    keras.utils.set_random_seed(0)
    bert = build_transformer_model(os.path.join(MODEL, "bert_config.json"),
                                   os.path.join(MODEL, "bert_model.ckpt"))
    model = add_cls_classifier(bert, len(LABELS))
    run_dir = os.path.join(folder, "run")
    os.makedirs(run_dir)
    model.save(os.path.join(run_dir, "model.keras"))
    shutil.copyfile(os.path.join(MODEL, "vocab.txt"), os.path.join(run_dir, "vocab.txt"))
    _write_json(os.path.join(run_dir, "labels.json"), LABELS)
    _write_json(os.path.join(run_dir, "train_config.json"),
                dataclasses.asdict(ClassificationOptions(output=run_dir, maxlen=MAXLEN)))
    _write_json(os.path.join(run_dir, "metrics.json"), {})
    run = Run(run_dir)
    exports = {"saved_model": run.export, "onnx": lambda path: run.export(path, format="onnx"),
               "litert": lambda path: run.export(path, format="litert")}
    failed = {}
    for name, export in exports.items():
        try:
            export(os.path.join(folder, name))
        except Exception as error:  # one export that fails must not cost the others' figures
            failed[name] = f"export failed: {type(error).__name__}: {error}"[:300]
    _write_json(os.path.join(folder, "failed.json"), failed)
    expected = {}
    for count, characters in SHAPES:
        token_ids, segment_ids = run.tokenizer.encode_batch(bench_texts(count, characters),
                                                            maxlen=MAXLEN)
        expected[f"{count}x{characters}"] = run.model.predict_on_batch(
            [token_ids, segment_ids]).tolist()
    _write_json(os.path.join(folder, "expected.json"), expected)
    return {"folder": folder}


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def predictor(folder):
    from kerasbert import Predictor
    from kerasbert.tasks.classification.task import Run

    run = Run(os.path.join(folder, "run"))
    predict = Predictor(run.model)
    return (lambda texts: predict(*run.tokenizer.encode_batch(texts, maxlen=MAXLEN)),
            "kerasbert Predictor, fp32")


def saved_model(folder):
    import tensorflow as tf

    try:
        import tensorflow_text  # noqa: F401 (registers the in-graph WordPiece ops)
    except ImportError:
        pass
    path = _saved_model_path(os.path.join(folder, "saved_model"))
    loaded = tf.saved_model.load(path)
    if "classify" in loaded.signatures:
        signature = loaded.signatures["classify"]
        (name,) = signature.structured_input_signature[1]

        def call(texts):
            outputs = signature(**{name: tf.constant(texts)})
            return _probabilities(outputs)

        return call, "classify signature: raw strings, tokenized in the graph"
    from kerasbert import Tokenizer

    signature = loaded.signatures["serving_default"]
    tokenizer = Tokenizer(os.path.join(folder, "run", "vocab.txt"))

    def call(texts):
        token_ids, segment_ids = tokenizer.encode_batch(texts, maxlen=MAXLEN)
        return _probabilities(signature(token_ids=tf.constant(token_ids),
                                        segment_ids=tf.constant(segment_ids)))

    return call, "serving_default (no classify signature): tokenized in Python"


def _saved_model_path(directory):
    """The SavedModel in ``directory``, or in its highest numbered version folder."""
    if os.path.exists(os.path.join(directory, "saved_model.pb")):
        return directory
    versions = [name for name in os.listdir(directory) if name.isdigit()
                and os.path.exists(os.path.join(directory, name, "saved_model.pb"))]
    if not versions:
        raise Skipped(f"no SavedModel in {directory}")
    return os.path.join(directory, max(versions, key=int))


def _probabilities(outputs):
    """The ``(batch, labels)`` float output of a signature call."""
    if "probabilities" in outputs:
        return outputs["probabilities"].numpy()
    floats = [v for v in outputs.values() if v.dtype.is_floating and len(v.shape) == 2]
    return floats[0].numpy()


def onnxruntime(folder):
    import onnxruntime as ort

    from kerasbert import Tokenizer
    from kerasbert.serving.portable import onnx_runner

    predict = onnx_runner(os.path.join(folder, "onnx", "model.onnx"))
    tokenizer = Tokenizer(os.path.join(folder, "onnx", "vocab.txt"))
    return (lambda texts: predict(*tokenizer.encode_batch(texts, maxlen=MAXLEN)),
            f"onnxruntime {ort.__version__}")


def litert(folder):
    import ai_edge_litert

    from kerasbert import Tokenizer
    from kerasbert.serving.portable import litert_runner

    path = os.path.join(folder, "litert", "model.tflite")
    predict = litert_runner(path, threads=os.cpu_count())
    tokenizer = Tokenizer(os.path.join(folder, "litert", "vocab.txt"))
    version = getattr(ai_edge_litert, "__version__", "")
    return (lambda texts: predict(*tokenizer.encode_batch(texts, maxlen=MAXLEN)),
            f"ai-edge-litert {version}".strip() + _litert_shape(path))


def _litert_shape(path):
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_path=path).get_signature_runner().get_input_details()
    length = int(details["token_ids"]["shape_signature"][1])
    return f", fixed length {length}" if length > 0 else ", dynamic length"


BUILDERS = {"predictor": predictor, "saved_model": saved_model, "onnxruntime": onnxruntime,
            "litert": litert}


# The export each way reads (the predictor reads the run itself).
EXPORTS = {"saved_model": "saved_model", "onnxruntime": "onnx", "litert": "litert"}


def measure(name, folder, warmup=3, repeats=10, small_repeats=30):
    """Worker: loads way ``name`` and times texts -> probabilities at each shape."""
    with open(os.path.join(folder, "failed.json"), encoding="utf-8") as f:
        failed = json.load(f)
    if EXPORTS.get(name) in failed:
        raise Skipped(failed[EXPORTS[name]])
    call, label = BUILDERS[name](folder)
    with open(os.path.join(folder, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    timings, differences = {}, {}
    for count, characters in SHAPES:
        shape = f"{count}x{characters}"
        texts = bench_texts(count, characters)
        difference = np.abs(np.asarray(call(texts)) - np.asarray(expected[shape]))
        differences[shape] = float(difference.max())
        timings[shape] = timed(lambda texts=texts: call(texts), warmup,
                               small_repeats if count == 1 else repeats)
    return {"label": label, "timings": timings, "max_difference": differences}


WORKERS = {"prepare": prepare,
           **{name: (lambda name=name, **options: measure(name, **options)) for name in BUILDERS}}


def run(options, log):
    """Prepares the exports, then times every way, each in its own process; returns the section.

    ``options``: ``warmup``, ``repeats``, ``only`` (ways, of :data:`IMPLEMENTATIONS`), ``max_wait``.
    """
    names = selected(options, IMPLEMENTATIONS)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as folder:
        log("serving: building the run and its exports")
        require(run_worker("serving", "prepare", {"folder": folder}, options, log),
                "building the run and its exports")
        for name in names:
            log(f"serving: {name}")
            results[name] = run_worker("serving", name, {"folder": folder, **options.timing()},
                                       options, log)
    tables = [_table(results, count, characters) for count, characters in SHAPES]
    return {"results": results, "tables": tables}


def _table(results, count, characters):
    shape = f"{count}x{characters}"
    base = results.get("predictor", {}).get("timings", {}).get(shape)
    rows = []
    for name, result in results.items():
        if why_missing(result):
            rows.append({"name": name, "label": why_missing(result)})
            continue
        timing = result["timings"][shape]
        rows.append({"name": name, "label": result["label"], "median_ms": timing["median_ms"],
                     "min_ms": timing["min_ms"], "max_ms": timing["max_ms"],
                     "texts_per_s": round(count / timing["median_ms"] * 1e3, 1),
                     "vs_predictor": (round(timing["median_ms"] / base["median_ms"], 2)
                                      if base else None),
                     "max_difference": f"{result['max_difference'][shape]:.1e}"})
    title = (f"Serving latency, {count} text{'s' if count > 1 else ''} x {characters} characters "
             f"(real reviews, maxlen {MAXLEN}), texts -> probabilities, kerasbert-zh-small")
    columns = [("name", "way"), ("median_ms", "median ms"), ("min_ms", "min"), ("max_ms", "max"),
               ("texts_per_s", "texts/s"), ("vs_predictor", "× Predictor"),
               ("max_difference", "max |Δ| vs Keras"), ("label", "what runs")]
    return {"title": title, "columns": columns, "rows": rows, "shape": shape}



if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("serving")
