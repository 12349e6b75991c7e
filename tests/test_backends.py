"""kerasbert on every Keras 3 backend: the same checkpoint gives each family's outputs on
JAX and PyTorch within 1e-5 (relative) of TensorFlow's, and a classifier fine-tunes,
saves, loads, audits, draws, quantizes and takes LoRA on each. Each backend runs in a fresh
process with ``KERAS_BACKEND`` set, as a user's script meets it (tests/backend_check.py).

``make test`` asks four families on each backend; ``make test-backends`` every family and
every feature."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.backend_check import CASES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "tests", "backend_check.py")
BACKENDS = ("jax", "torch")
#: The families ``make test`` asks: learned, rotary and relative positions, and a decoder.
CHEAP = ("bert", "roformer", "gpt2", "t5.1.1")
#: Relative difference allowed between a backend's outputs and TensorFlow's.
TOLERANCE = 1e-5


def check(backend, action, root, *cases, **variables):
    """tests/backend_check.py ``action`` under ``backend``, in a fresh process (with more
    environment ``variables``)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT, **variables}
    done = subprocess.run([sys.executable, CHECK, action, str(root), *cases], env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def outputs(backend, root, cases):
    """``(arrays, report)`` of ``cases`` read on ``backend`` from the checkpoints in ``root``."""
    check(backend, "read", root, *cases)
    with open(os.path.join(root, f"{backend}.json")) as file:
        report = json.load(file)
    with np.load(os.path.join(root, f"{backend}.npz")) as arrays:
        return dict(arrays), report


def assert_matches(reference, found, report):
    failed = {case: result["traceback"] for case, result in report.items() if not result["ok"]}
    assert not failed, "\n".join(f"{case}:\n{tb}" for case, tb in failed.items())
    assert sorted(found) == sorted(reference)
    for name, expected in reference.items():
        scale = max(float(np.max(np.abs(expected))), 1e-30)
        difference = float(np.max(np.abs(found[name] - expected))) / scale
        assert found[name].shape == expected.shape, name
        assert difference <= TOLERANCE, f"{name}: relative difference {difference:.2e}"


@pytest.fixture(scope="module")
def cheap(tmp_path_factory):
    root = tmp_path_factory.mktemp("backends")
    check("tensorflow", "write", root, *CHEAP)
    return root, outputs("tensorflow", root, CHEAP)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_families_match_tensorflow(cheap, backend):
    """Why slow: each backend loads and runs four families in a process of its own (half a
    minute, most of it importing TensorFlow and the backend)."""
    root, (reference, report) = cheap
    assert all(result["ok"] for result in report.values()), report
    found, found_report = outputs(backend, root, CHEAP)
    assert_matches(reference, found, found_report)
    assert {case: r["value"] for case, r in found_report.items()} == \
        {case: r["value"] for case, r in report.items()}  # parameter counts


@pytest.fixture(scope="module")
def every_family(tmp_path_factory):
    root = tmp_path_factory.mktemp("every-family")
    check("tensorflow", "write", root)
    return root, outputs("tensorflow", root, list(CASES))


@pytest.mark.backends
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_family_matches_tensorflow(every_family, backend):
    """Why slow: sixteen models built, loaded and run on each backend in a process of its
    own."""
    root, (reference, report) = every_family
    assert all(result["ok"] for result in report.values()), report
    found, found_report = outputs(backend, root, list(CASES))
    assert_matches(reference, found, found_report)


@pytest.fixture(scope="module")
def tensorflow_features(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    return root, features("tensorflow", root)


def features(backend, root):
    check(backend, "features", root)
    return answers(backend, root, "features")


def answers(backend, root, action):
    """The values of ``ROOT/<backend>-<action>.json`` (a nest of answers), none failed."""
    with open(os.path.join(root, f"{backend}-{action}.json")) as file:
        found = json.load(file)

    def values(nest, where):
        if "ok" in nest:
            assert nest["ok"], f"{where}:\n{nest['traceback']}"
            return nest["value"]
        return {key: values(value, f"{where}/{key}") for key, value in nest.items()}

    return values(found, backend)


@pytest.mark.backends
@pytest.mark.parametrize("backend", BACKENDS)
def test_features(tensorflow_features, backend):
    """Why slow: a two-layer BERT-base classifier fine-tuned, saved, loaded, quantized and
    adapted on each backend, and again on TensorFlow (about a minute each)."""
    root, reference = tensorflow_features
    found = features(backend, root)
    assert found["summary"] == reference["summary"]  # the totals, to the parameter
    assert found["fit"]["loss_after"] < found["fit"]["loss_before"]
    assert found["save_load"] == 0.0
    assert found["checkpoint"] < 1e-5
    assert found["plot_model"] is True
    assert found["quantize"]["int8"] == reference["quantize"]["int8"] > 0  # int8 kernels
    assert found["quantize"]["difference"] < 0.05
    assert found["lora"] == reference["lora"]
    assert found["lora"]["frozen_unchanged"] is True
    # A model saved on this backend loads on TensorFlow with the same outputs.
    check("tensorflow", "reload", root, backend)
    here = np.load(os.path.join(root, f"{backend}-here.npy"))
    there = np.load(os.path.join(root, f"{backend}-on-tensorflow.npy"))
    np.testing.assert_allclose(there, here, rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def tensorflow_generations(tmp_path_factory):
    root = tmp_path_factory.mktemp("generate")
    check("tensorflow", "generate", root)
    return root, answers("tensorflow", root, "generate")


@pytest.mark.backends
@pytest.mark.parametrize("backend", BACKENDS)
def test_generation_matches_tensorflow(tensorflow_generations, backend):
    """GPT-2, UniLM and T5 decode the ids TensorFlow's compiled loop decodes, greedy through
    the cache and without it, by beam search and with end ids; sampled, the cache and the
    whole sequence draw the same ids from one seed, and both other backends the same ids
    (other draws than TensorFlow's, whose random numbers are its own).

    Why slow: each backend decodes in a process of its own, beam search and the loops
    without the cache running the whole model at every step."""
    root, reference = tensorflow_generations
    check(backend, "generate", root)
    found = answers(backend, root, "generate")
    for decoder, ways in found.items():
        for way in ("greedy", "without_cache", "beams", "ends"):
            assert ways[way] == reference[decoder][way], (decoder, way)
        assert ways["sampled"] == ways["sampled_without_cache"], decoder
        assert ways["sampled"] != ways["greedy"], decoder
    other = {"jax": "torch", "torch": "jax"}[backend]
    if os.path.exists(os.path.join(root, f"{other}-generate.json")):
        assert found == answers(other, root, "generate")


@pytest.mark.backends
def test_data_parallel_on_two_jax_devices_trains_as_one(tmp_path):
    """Why slow: a JAX process with two host devices trains a tiny classifier twice.

    ``keras.distribution.DataParallel`` over the two devices replicates every weight and
    splits every batch in two; after four steps the weights are one device's (dropout off),
    up to the order of the sums."""
    check("jax", "data-parallel", tmp_path,
          XLA_FLAGS="--xla_force_host_platform_device_count=2")
    with open(tmp_path / "jax-data-parallel.json") as file:
        found = json.load(file)
    assert found["ok"], found.get("traceback")
    report = found["value"]
    assert report["devices"] == ["cpu:0", "cpu:1"]
    assert report["weight_devices"] == report["batch_devices"] == 2
    assert report["difference"] <= TOLERANCE * report["scale"], report
