"""The machine's GEMM limit: how fast TensorFlow multiplies the encoder's own matrices.

A BERT forward pass is almost all matrix products, so the time those products take
alone, at the library's best GEMM speed, bounds the whole pass from below. The
worker times ``tf.matmul`` (oneDNN on x86) at exactly the shapes of the encoder's
dense layers for each benchmarked batch; the throughput it reaches over them is the
"GEMM limit" the forward table compares against. A large square product is timed
too, as the machine's headline figure. torch's GEMM (``torch.matmul``, oneDNN or MKL) is
measured at the same shapes: where it is faster, it is the machine's best measured rate.

Each timed call runs :data:`PER_CALL` products on as many different left operands (one
graph for TensorFlow), and the time of one is the call's over :data:`PER_CALL`: at the
1 x 32 shapes a product takes tens of microseconds, as long as calling a ``tf.function``,
and one product per call would time the call.
"""

from bench.peers import read_config
from bench.runner import run_worker, why_missing

SQUARE = 2048
REPEATS = 20  # timed calls per shape; the fastest counts
PER_CALL = 8  # products per timed call


def dense_shapes(config, tokens):
    """``(m, k, n)`` of the per-layer dense products: q, k, v, output, FFN in and out."""
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    return [(tokens, hidden, hidden)] * 4 + [(tokens, hidden, inner), (tokens, inner, hidden)]


def _rates(seconds, label, shapes):
    """GFLOP/s over the encoder's dense shapes per batch shape, and at the square product.

    ``seconds(m, k, n)``: the fastest time of one ``(m, k) @ (k, n)`` product. The fastest,
    not the median: a limit is what the GEMM can do at best.
    """
    config = read_config()
    result = {"label": label, "gflops": {}}
    for batch, length in shapes:
        products = dense_shapes(config, batch * length)
        flops = sum(2 * m * k * n for m, k, n in products)
        result["gflops"][f"{batch}x{length}"] = round(
            flops / sum(seconds(*product) for product in products) / 1e9, 1)
    result["square_gflops"] = round(2 * SQUARE**3 / seconds(SQUARE, SQUARE, SQUARE) / 1e9, 1)
    return result


def measure(shapes=((8, 128), (1, 32)), dtype="float32", repeats=REPEATS):
    """Worker: GFLOP/s of ``tf.matmul`` over the encoder's dense shapes per batch shape."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    from bench.runner import timed

    @tf.function
    def products(lefts, b):  # one after the other, as a model's products run
        outputs = []
        for a in lefts:
            with tf.control_dependencies(outputs[-1:]):
                outputs.append(tf.matmul(a, b))
        return outputs

    def seconds(m, k, n):
        lefts = [tf.cast(tf.random.normal((m, k), dtype="float32"), dtype)
                 for _ in range(PER_CALL)]
        b = tf.cast(tf.random.normal((k, n), dtype="float32"), dtype)
        call = timed(lambda: products(lefts, b), warmup=3, repeats=repeats)
        return call["min_ms"] / 1e3 / PER_CALL

    return _rates(seconds, f"tensorflow {tf.__version__} tf.matmul, {dtype}", shapes)


def measure_torch(shapes=((8, 128), (1, 32)), dtype="float32", repeats=REPEATS):
    """Worker: GFLOP/s of ``torch.matmul`` over the same shapes (CPU torch, all cores)."""
    import os

    from bench.runner import Skipped, timed

    try:
        import torch
    except ImportError as error:
        raise Skipped(f"torch is not installed ({error})") from None
    torch.set_num_threads(os.cpu_count())

    def seconds(m, k, n):
        lefts = [torch.randn(m, k).to(getattr(torch, dtype)) for _ in range(PER_CALL)]
        b = torch.randn(k, n).to(getattr(torch, dtype))
        with torch.inference_mode():
            call = timed(lambda: [torch.matmul(a, b) for a in lefts], warmup=3, repeats=repeats)
        return call["min_ms"] / 1e3 / PER_CALL

    return _rates(seconds, f"torch {torch.__version__} torch.matmul, {dtype}", shapes)


WORKERS = {"float32": lambda **o: measure(dtype="float32", **o),
           "bfloat16": lambda **o: measure(dtype="bfloat16", **o),
           "torch-float32": lambda **o: measure_torch(dtype="float32", **o),
           "torch-bfloat16": lambda **o: measure_torch(dtype="bfloat16", **o)}


def run(options, log):
    """Measures fp32 and bf16 GEMM throughput of TensorFlow and torch, each in its own
    process (``options``: max_wait)."""
    results = {}
    for dtype in WORKERS:
        log(f"gemm: {dtype}")
        results[dtype] = run_worker("gemm", dtype, {}, options, log)
    rows = []
    for dtype, result in results.items():
        if why_missing(result):
            rows.append({"dtype": dtype, "label": why_missing(result)})
            continue
        rows.append({"dtype": dtype, **{f"gflops_{k}": v for k, v in result["gflops"].items()},
                     "square": result["square_gflops"], "label": result["label"]})
    columns = [("dtype", "dtype"), ("gflops_8x128", "GFLOP/s at 8x128's shapes"),
               ("gflops_1x32", "GFLOP/s at 1x32's shapes"),
               ("square", f"GFLOP/s {SQUARE}³"), ("label", "library")]
    table = {"title": "GEMM throughput (the limit)", "columns": columns, "rows": rows}
    return {"results": results, "tables": [table]}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("gemm")
