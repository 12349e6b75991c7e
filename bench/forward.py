"""Forward-pass speed: kerasbert against its peers, batch 8 x 128 and latency at 1 x 32.

Chinese BERT-base, random weights, sequence output, full-length inputs. Each
implementation runs in its own process and is timed as the median of ``repeats``
calls after ``warmup`` untimed ones; the figures are compared with the peers measured
in the same run and with the machine's GEMM limit (:mod:`bench.gemm`).
"""

import numpy as np

from bench import peers
from bench.runner import run_worker, selected, timed, timing_row, why_missing

SHAPES = [[8, 128], [1, 32]]

# name -> (how it is built, runs under tf_keras); kerasbert variants first.
IMPLEMENTATIONS = {
    "kerasbert": ("kerasbert Predictor, fp32", False),
    "kerasbert-predict": ("kerasbert model.predict, fp32", False),
    "kerasbert-bf16": ("kerasbert Predictor, bfloat16", False),
    "kerasbert-int8": ("kerasbert Predictor, Keras int8 (kerasbert.quantize)", False),
    "kerasbert-onnx": ("kerasbert export --format onnx, onnxruntime, fp32", False),
    "kerasbert-onnx-int8": ("kerasbert export --format onnx --int8, onnxruntime", False),
    "bert4keras": ("bert4keras", True),
    "keras-hub": ("keras-hub", False),
    "hf-torch": ("Hugging Face torch", False),
    "hf-torch-bf16": ("Hugging Face torch, bf16 weights", False),
    "onnxruntime": ("onnxruntime", False),
    "onnxruntime-int8": ("onnxruntime, dynamic int8", False),
}
PEERS = ("bert4keras", "keras-hub", "hf-torch", "hf-torch-bf16", "onnxruntime",
         "onnxruntime-int8")


def encoder_flops(config, batch, length):
    """FLOPs of one encoder forward pass: every matrix product, 2 per multiply-add.

    Per layer: q, k, v, output projections (4 H^2 per token), feed-forward
    (2 H I per token), and the two attention products (2 L^2 H per example).
    """
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    tokens = batch * length
    dense = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inner)
    attention = 2 * 2 * batch * length * length * hidden
    return config["num_hidden_layers"] * (dense + attention)


def example_inputs(batch, length, vocab_size, seed=0):
    """Token ids without padding (every position real), all segment 0."""
    rng = np.random.default_rng(seed)
    return (rng.integers(1, vocab_size, (batch, length)).astype("int32"),
            np.zeros((batch, length), "int32"))


def kerasbert(mode="predictor", dtype_policy=None, jit_compile=False,
              config_path=peers.CHINESE_BASE, quantize=None):
    """kerasbert's forward pass: ``Predictor``, ``model.predict[_on_batch]``, or ``model(x)``
    in a ``tf.function``; ``quantize``: its products quantized first (``"int8"``)."""
    import keras

    import kerasbert as package
    from kerasbert import build_transformer_model
    from kerasbert.inference.predictor import Predictor

    model = build_transformer_model(config_path)
    label = f"kerasbert {package.__version__}, keras {keras.__version__}"
    if quantize is not None:
        package.quantize(model, quantize)
        label += f", Keras {quantize}"
    if mode == "predictor":
        return Predictor(model, jit_compile=jit_compile, dtype_policy=dtype_policy), label
    if mode == "predict":
        return (lambda t, s: model.predict([t, s], batch_size=len(t), verbose=0)), label
    if mode == "predict_on_batch":
        return (lambda t, s: model.predict_on_batch([t, s])), label
    if mode == "onnx":
        return _onnx(model), label + ", ONNX export, onnxruntime"
    if mode == "onnx-int8":
        return _onnx(model, int8=True), label + ", ONNX export with int8 weights, onnxruntime"
    import tensorflow as tf

    function = tf.function(lambda t, s: model([t, s], training=False), jit_compile=jit_compile)
    return (lambda t, s: function(t, s).numpy()), label


def _onnx(model, int8=False):
    """The encoder exported as ``kerasbert export --format onnx [--int8]`` exports a
    classifier: :func:`kerasbert.serving.portable.write_onnx`, then (``int8``)
    :func:`kerasbert.serving.portable.quantize_onnx`, under ONNX Runtime."""
    import os
    import tempfile

    onnxruntime = peers._require("onnxruntime")
    from kerasbert.serving import portable

    path = os.path.join(tempfile.mkdtemp(prefix="bench-onnx-"), "model.onnx")
    portable.write_onnx(model, path)
    if int8:
        portable.quantize_onnx(path, path)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda t, s: session.run(None, dict(zip(names, (t, s))))[0]


KERASBERT_MODES = {
    "kerasbert": {},
    "kerasbert-predict": {"mode": "predict"},
    "kerasbert-bf16": {"dtype_policy": "bfloat16"},
    "kerasbert-int8": {"quantize": "int8"},
    "kerasbert-onnx": {"mode": "onnx"},
    "kerasbert-onnx-int8": {"mode": "onnx-int8"},
    "kerasbert-function": {"mode": "function"},
    "kerasbert-xla": {"jit_compile": True},
}


def measure(name, shapes=SHAPES, warmup=3, repeats=10, small_repeats=30, **overrides):
    """Worker: builds implementation ``name`` and times it at each ``(batch, length)``."""
    if name in KERASBERT_MODES:
        call, label = kerasbert(**{**KERASBERT_MODES[name], **overrides})
    else:
        call, label = peers.BUILDERS[name](**overrides)
    vocab = peers.read_config()["vocab_size"]
    timings = {}
    for batch, length in shapes:
        tokens, segments = example_inputs(batch, length, vocab)
        # Short calls vary more from call to call: time more of them.
        count = small_repeats if batch * length <= 256 else repeats
        timings[f"{batch}x{length}"] = timed(lambda t=tokens, s=segments: call(t, s), warmup, count)
    return {"label": label, "timings": timings}


WORKERS = {name: (lambda name=name, **options: measure(name, **options))
           for name in list(IMPLEMENTATIONS) + list(KERASBERT_MODES)}


def run(options, log):
    """Times every implementation, each in its own process; returns the section.

    Args:
        options: ``warmup``, ``repeats`` (see :func:`measure`); ``rounds`` (default 1): how
            many times each implementation runs, taking turns; ``only``: implementations to
            run, of :data:`IMPLEMENTATIONS` (the default) and :data:`KERASBERT_MODES`. The
            GEMM limit columns come from the gemm suite when it ran before (``earlier``).
    """
    names = selected(options, IMPLEMENTATIONS, allowed=WORKERS)
    rounds = options.rounds or 1
    results = {}
    # With several rounds the implementations take turns, so a burst of load from other
    # jobs falls on all of them; each keeps its best round (lowest median) per shape.
    for round_ in range(rounds):
        for name in names:
            log(f"forward: {name}" + (f" (round {round_ + 1} of {rounds})" if rounds > 1 else ""))
            tf_keras = IMPLEMENTATIONS.get(name, ("", False))[1]
            results[name] = _best(results.get(name), run_worker(
                "forward", name, options.timing(), options, log, tf_keras=tf_keras))
    gemm = options.earlier.get("gemm", {}).get("results", {})
    config = peers.read_config()
    tables = [_table(results, shape, config, gemm) for shape in ("8x128", "1x32")]
    return {"results": results, "tables": tables}


def _best(kept, new):
    """Per shape, the round with the lower median (a round without figures never wins)."""
    if kept is None or why_missing(kept):
        return new
    if why_missing(new):
        return kept
    for shape, timing in new["timings"].items():
        if timing["median_ms"] < kept["timings"][shape]["median_ms"]:
            kept["timings"][shape] = timing
    return kept


def gemm_limit(gemm, shape, dtype):
    """The best GEMM rate (GFLOP/s) the gemm suite measured at ``shape``'s products in
    ``dtype`` (TensorFlow's or torch's, whichever is faster), or None."""
    rates = [result["gflops"][shape] for name, result in gemm.items()
             if name.endswith(dtype) and not why_missing(result) and shape in result["gflops"]]
    return max(rates, default=None)


def _table(results, shape, config, gemm):
    batch, length = map(int, shape.split("x"))
    flops = encoder_flops(config, batch, length)
    base = results.get("kerasbert", {}).get("timings", {}).get(shape)
    limits = {dtype: gemm_limit(gemm, shape, dtype) for dtype in ("float32", "bfloat16")}
    limit_ms = {dtype: flops / rate / 1e6 for dtype, rate in limits.items() if rate}
    rows = []
    for name, result in results.items():
        row, t = timing_row(name, result, shape)
        rows.append(row)
        if t is None:
            continue
        # int8 has no GEMM limit measured: its rows get no percentage.
        limit = None if "int8" in name else limit_ms.get("bfloat16" if "bf16" in name
                                                          else "float32")
        row.update({
            "tokens_per_s": round(batch * length / t["median_ms"] * 1e3),
            "gflops": round(flops / t["median_ms"] / 1e6, 1),
            "kerasbert_speedup": round(t["median_ms"] / base["median_ms"], 2) if base else None,
            "of_gemm_limit": f"{limit / t['median_ms']:.0%}" if limit else None,
        })
    title = (f"Forward pass, batch {batch} x {length} tokens, {flops / 1e9:.1f} GFLOP"
             + "".join(f"; {dtype} GEMM limit {ms:.0f} ms" for dtype, ms in limit_ms.items()))
    columns = [("name", "implementation"), ("median_ms", "median ms"), ("min_ms", "min"),
               ("max_ms", "max"), ("tokens_per_s", "tokens/s"), ("gflops", "GFLOP/s"),
               ("kerasbert_speedup", "kerasbert ×"),
               ("of_gemm_limit", "% of GEMM limit (its dtype)"), ("label", "version / mode")]
    return {"title": title, "columns": columns, "rows": rows, "shape": shape,
            "flops": flops, "limit_ms": limit_ms}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("forward")
