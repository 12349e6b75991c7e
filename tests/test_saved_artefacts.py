"""Files saved by earlier kerasbert code still load and give the same numbers.

tests/fixtures/saved-0.1.0 holds a fine-tuning run directory and an MLM model saved
before the package moved into subpackages (see its README): the registered names of
the layers are what such files refer to, so they must not change with the layout.
tests/fixtures/saved-own-kernels holds a model of each attention and feed-forward form
saved while those layers kept their kernels as their own weights, before they became Keras
``Dense`` sublayers.
"""

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest

from conftest import TINY
from peers import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "tests", "fixtures", "saved-0.1.0")
OWN_KERNELS = os.path.join(ROOT, "tests", "fixtures", "saved-own-kernels")


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(SAVED, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def test_an_old_run_directory_predicts_as_it_did(expected, tmp_path):
    from kerasbert.tasks.classification.task import Run

    run_dir = tmp_path / "run"
    shutil.copytree(os.path.join(SAVED, "run"), run_dir)
    rows = Run(run_dir).predict(expected["texts"])
    assert [row["label"] for row in rows] == [row["label"] for row in expected["predictions"]]
    np.testing.assert_allclose([row["probability"] for row in rows],
                               [row["probability"] for row in expected["predictions"]],
                               rtol=0, atol=1e-6)


SCRIPT = """
import json, sys
import keras
import numpy as np
import kerasbert

saved, texts = sys.argv[1], json.loads(sys.stdin.read())
model = kerasbert.load_model(saved + "/run/model.keras")
tokenizer = kerasbert.Tokenizer(saved + "/run/vocab.txt")
token_ids, segment_ids = tokenizer.encode_batch(texts["texts"], maxlen=64)
probabilities = model.predict([token_ids, segment_ids], verbose=0)
mlm = kerasbert.load_model(saved + "/mlm.keras")
m = texts["mlm"]
pooled, vocab = mlm.predict([np.array(m["token_ids"]), np.array(m["segment_ids"])], verbose=0)
print(json.dumps({"probabilities": probabilities.tolist(), "pooled": pooled.tolist(),
                  "mlm_argmax": vocab.argmax(-1).tolist(), "mlm_top": vocab.max(-1).tolist(),
                  "layers": [layer.name for layer in mlm.layers]}))
"""


@pytest.mark.slow
def test_old_keras_files_load_in_a_script_that_only_imports_kerasbert(expected, tmp_path):
    got = run_python(SCRIPT, args=[SAVED], stdin=json.dumps(expected), cwd=tmp_path,
                     PYTHONPATH=ROOT, timeout=300)
    labels = json.load(open(os.path.join(SAVED, "run", "labels.json"), encoding="utf-8"))
    probabilities = np.array(got["probabilities"])
    assert [labels[i] for i in probabilities.argmax(-1)] == [
        row["label"] for row in expected["predictions"]]
    np.testing.assert_allclose(probabilities.max(-1),
                               [row["probability"] for row in expected["predictions"]],
                               rtol=0, atol=1e-6)
    mlm = expected["mlm"]
    np.testing.assert_allclose(got["pooled"], mlm["pooled"], rtol=0, atol=1e-6)
    assert got["mlm_argmax"] == mlm["mlm_argmax"]
    np.testing.assert_allclose(got["mlm_top"], mlm["mlm_top"], rtol=0, atol=1e-6)
    assert "Transformer-1-FeedForward-Norm" in got["layers"] and "MLM-Bias" in got["layers"]


def _maker():
    """The fixture's make.py, whose fixed inputs the saved outputs are of."""
    spec = importlib.util.spec_from_file_location("make_own_kernels",
                                                  os.path.join(OWN_KERNELS, "make.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _own_kernels():
    with open(os.path.join(OWN_KERNELS, "expected.json"), encoding="utf-8") as f:
        return json.load(f)["models"]


@pytest.mark.parametrize("name", sorted(_own_kernels()))
def test_models_saved_with_their_own_kernels_load_and_predict_the_same(name):
    import kerasbert

    expected = _own_kernels()[name]
    model = kerasbert.load_model(os.path.join(OWN_KERNELS, f"{name}.keras"))
    rebuilt = kerasbert.build_transformer_model(
        dict(TINY), model=expected["family"], **expected["arguments"])
    rebuilt.load_weights(os.path.join(OWN_KERNELS, f"{name}.weights.h5"))
    for loaded in (model, rebuilt):
        got = loaded.predict(_maker().inputs(expected["family"]), verbose=0)
        got = got if isinstance(got, list) else [got]
        assert len(got) == len(expected["outputs"])
        for output, want in zip(got, expected["outputs"]):
            np.testing.assert_allclose(output, want, rtol=0, atol=1e-5)
