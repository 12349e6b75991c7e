"""kerasbert's own variants side by side: what each speed choice is worth.

``python -m bench ablation`` times, each in its own process, the choices behind
kerasbert's fast path: the attention formulation (the einsum-and-where form kerasbert
had before, against the 2-D-GEMM form it has now, and a fused q/k/v product), the
calling route (``Predictor``, ``model(x)`` in a ``tf.function``, ``model.predict``),
XLA, and the two bf16 policies.
"""

import math

from bench import forward
from bench.runner import run_worker, selected, timing_row

VARIANTS = {
    "predictor": ("Predictor (default)", {}),
    "function": ("model(x) in tf.function", {"mode": "function"}),
    "predict": ("model.predict", {"mode": "predict"}),
    "predict_on_batch": ("model.predict_on_batch", {"mode": "predict_on_batch"}),
    "xla": ("Predictor, jit_compile=True", {"jit_compile": True}),
    "einsum-attention": ("previous einsum + where attention, Predictor", {"attention": "einsum"}),
    "fused-qkv": ("q/k/v in one GEMM (kernels concatenated per call)", {"attention": "fused"}),
    "mixed_bfloat16": ("Predictor, mixed_bfloat16", {"dtype_policy": "mixed_bfloat16"}),
    "bfloat16": ("Predictor, bfloat16 variables", {"dtype_policy": "bfloat16"}),
}


def _einsum_call(self, inputs, mask=None, training=None):
    """kerasbert's attention before the fast path (kept here as the baseline)."""
    from keras import ops

    def heads(projection):
        x = ops.matmul(inputs, getattr(self, f"{projection}_kernel"))
        x = x + getattr(self, f"{projection}_bias")
        return ops.reshape(x, (ops.shape(inputs)[0], ops.shape(inputs)[1], self.num_heads,
                               self.head_size))

    query, key, value = (heads(p) for p in self.PROJECTIONS)
    scores = ops.einsum("bqhd,bkhd->bhqk", query, key) / math.sqrt(self.head_size)
    if mask is not None:
        scores = ops.where(mask[:, None, None, :], scores, ops.cast(-1e9, scores.dtype))
    context = ops.einsum("bhqk,bkhd->bqhd", ops.softmax(scores, axis=-1), value)
    context = ops.reshape(context, (ops.shape(inputs)[0], ops.shape(inputs)[1], -1))
    return ops.matmul(context, self.output_kernel) + self.output_bias


def _fused_heads(self, rows, projection, batch, length):
    """q, k and v from one GEMM; the split is remembered for the other two projections."""
    from keras import ops

    if projection == "query":
        kernel = ops.concatenate([self.query_kernel, self.key_kernel, self.value_kernel], 1)
        bias = ops.concatenate([self.query_bias, self.key_bias, self.value_bias], 0)
        x = ops.reshape(ops.matmul(rows, kernel) + bias,
                        (batch, length, 3, self.num_heads, self.head_size))
        self._qkv = ops.transpose(x, (2, 0, 3, 1, 4))
    return self._qkv[self.PROJECTIONS.index(projection)]


def measure(variant, **options):
    """Worker: patches the attention if the variant asks, then times the kerasbert path."""
    settings = dict(VARIANTS[variant][1])
    attention = settings.pop("attention", None)
    if attention:
        from kerasbert.models.layers import MultiHeadSelfAttention

        if attention == "einsum":
            MultiHeadSelfAttention.call = _einsum_call
        else:
            MultiHeadSelfAttention._heads = _fused_heads
    forward.KERASBERT_MODES["kerasbert-variant"] = settings
    result = forward.measure("kerasbert-variant", **options)
    result["label"] = VARIANTS[variant][0]
    return result


WORKERS = {name: (lambda name=name, **options: measure(name, **options)) for name in VARIANTS}


def run(options, log):
    """Times every variant in its own process; returns the section.

    ``options``: ``warmup``, ``repeats``, ``only`` (variants, of :data:`VARIANTS`).
    """
    results = {}
    for name in selected(options, VARIANTS):
        log(f"ablation: {name}")
        results[name] = run_worker("ablation", name, options.timing(), options, log)
    base = results.get("predictor", {}).get("timings", {})
    tables = []
    for shape in ("8x128", "1x32"):
        rows = []
        for name, result in results.items():
            row, t = timing_row(name, result, shape)
            relative = base.get(shape, {}).get("median_ms")
            if t and relative:
                row["vs_default"] = round(relative / t["median_ms"], 2)
            rows.append(row)
        columns = [("name", "variant"), ("median_ms", "median ms"), ("min_ms", "min"),
                   ("max_ms", "max"), ("vs_default", "speed vs default"), ("label", "what")]
        tables.append({"title": f"kerasbert variants, batch {shape}", "columns": columns,
                       "rows": rows})
    return {"results": results, "tables": tables}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("ablation")
