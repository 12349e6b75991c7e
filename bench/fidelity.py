"""Every family on JAX and PyTorch against TensorFlow: how far each output lies from
TensorFlow's, the same checkpoint loaded on each backend.

The families and their tiny models are tests/backend_check.py's (the one list of them,
which ``tests/test_backends.py`` asserts within 1e-5 relative): TensorFlow draws each
model's weights and saves them as a Google checkpoint, then every backend, each in a fresh
process with ``KERAS_BACKEND`` set, loads it and runs the same inputs. A row is one output
of one family: its largest absolute difference from TensorFlow's on each backend, and that
difference over the largest absolute value of TensorFlow's output (the relative figure the
test bounds). Not timed, not run by default; ``python -m bench fidelity`` (a few minutes on
2 cores).
"""

import os
import shutil
import sys
import tempfile

import numpy as np

from bench.runner import require, run_worker
from bench.worker import ROOT

OTHERS = ("jax", "torch")


def _backend_check():
    sys.path[:0] = [os.path.join(ROOT, "tests"), ROOT]
    import backend_check

    return backend_check


def write_checkpoints(folder):
    """Worker (TensorFlow): every family's tiny model, its weights drawn, as a checkpoint."""
    _backend_check().main(["write", folder])
    return {"folder": folder}


def read_outputs(folder):
    """Worker (any backend): ``{"outputs": {family/i: output i}}`` of every family's model
    loaded from its checkpoint in ``folder`` (a family that fails is left out)."""
    import keras

    _backend_check().main(["read", folder])
    with np.load(os.path.join(folder, f"{keras.backend.backend()}.npz")) as arrays:
        return {"outputs": {name: arrays[name].tolist() for name in arrays.files}}


WORKERS = {"write": write_checkpoints, "read": read_outputs}


def run(options, log):
    """Writes every family's checkpoint on TensorFlow, reads it on each backend, compares."""
    folder = tempfile.mkdtemp(prefix="kerasbert-bench-fidelity-")
    try:
        log("fidelity: drawing every family's weights on tensorflow")
        require(run_worker("fidelity", "write", {"folder": folder}, options, log,
                           backend="tensorflow"), "the checkpoints")
        found = {}
        for backend in ("tensorflow", *OTHERS):
            log(f"fidelity: every family's outputs on {backend}")
            result = require(run_worker("fidelity", "read", {"folder": folder}, options, log,
                                        timeout=1800, backend=backend), f"{backend}'s outputs")
            found[backend] = {name: np.asarray(value, "float64")
                              for name, value in result["outputs"].items()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows, results = [], {}
    for name, expected in sorted(found["tensorflow"].items()):
        family, _, index = name.rpartition("/")
        scale = max(float(np.max(np.abs(expected))), 1e-30)
        row = {"family": family, "output": int(index), "scale": scale}
        for backend in OTHERS:
            if name not in found[backend]:
                row[f"{backend}_abs"] = row[f"{backend}_rel"] = None
                continue
            difference = float(np.max(np.abs(found[backend][name] - expected)))
            row[f"{backend}_abs"], row[f"{backend}_rel"] = difference, difference / scale
        results[name] = row
        rows.append({**row, **{key: f"{row[key]:.1e}" for key in row
                               if key.endswith(("_abs", "_rel")) and row[key] is not None},
                     "scale": f"{scale:.3g}"})
    worst = {backend: max(row[f"{backend}_rel"] or 0.0 for row in results.values())
             for backend in OTHERS}
    columns = [("family", "family"), ("output", "output"), ("scale", "max |TF output|"),
               ("jax_abs", "JAX max |Δ|"), ("jax_rel", "JAX relative"),
               ("torch_abs", "PyTorch max |Δ|"), ("torch_rel", "PyTorch relative")]
    return {"results": {"outputs": results, "worst_relative": worst},
            "tables": [{"title": "Every family's outputs on JAX and PyTorch against "
                                 "TensorFlow's, the same checkpoint", "columns": columns,
                        "rows": rows}],
            "notes": [f"largest relative difference: JAX {worst['jax']:.1e}, PyTorch "
                      f"{worst['torch']:.1e} (tests/test_backends.py allows 1e-5)"]}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("fidelity")
