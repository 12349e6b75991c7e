"""Greedy decoding speed: tokens per second of GPT-2 small, kerasbert next to its peers.

One random GPT-2 small (V 50257, H 768, L 12, 12 heads, 1,024 positions) is made by
Hugging Face transformers and saved (``prepare``); kerasbert reads it through
``kerasbert convert --from-hf``, so both decode the same weights and their ids are
compared (``same ids``). keras-hub's ``GPT2CausalLM`` has random weights of its own (it
reads no Google or Hugging Face file here): its figure is speed alone. Prompts are 32
random ids per row, batch 1 and 8; each implementation generates 128 new ids greedily (no
end id), in its own process:

* ``kerasbert``: :func:`kerasbert.generate`, the key/value cache in one XLA loop;
* ``kerasbert-bf16``: the same call with ``dtype="bfloat16"`` (a bfloat16 copy of the
  weights, a loop outside XLA on oneDNN's kernels; below ``BFLOAT16_MIN_ROWS`` prompts
  the float32 loop); its ids are compared with ``kerasbert``'s and its speed with
  ``hf-torch-bf16``'s (``kerasbert-bf16 ×``);
* ``kerasbert-no-cache``: the same call with ``use_cache=False`` (the whole sequence
  through the model at every step, as bert4keras's ``AutoRegressiveDecoder``), timed once;
* ``hf-torch`` / ``hf-torch-bf16``: ``GPT2LMHeadModel.generate`` in float32 / bfloat16;
* ``keras-hub``: ``GPT2CausalLM.generate`` with its greedy sampler (compiled by XLA);
* ``products-*``: a bound, not a decoder: the matrix products of one cached step alone
  (each layer's query, key, value, output and feed-forward products, then the LM head, on
  the step's one row per prompt; random weights of the model's shapes, each read from
  memory as in decoding), chained in one call: in TensorFlow as kerasbert's decoding loop
  runs them (XLA, transposed kernels, :mod:`kerasbert.models.kernels`) and in bfloat16
  through oneDNN (a ``tf.function`` without XLA), and in torch's ``nn.Linear`` in float32
  and bfloat16. Their tokens/s is what a decoder spending nothing but these products
  would reach; a decoder's whole step can only be slower.

A figure is the median of ``repeats`` timed calls (at most 3) after one untimed call
(compilation, tracing, caches); a ``products-*`` figure, the median of 20 calls of one
step after 3 untimed ones, times 128. ``python -m bench generate`` runs this suite alone.
"""

import os
import shutil
import tempfile

import numpy as np

from bench.runner import Skipped, run_worker, selected, timed, why_missing

NEW_TOKENS = 128
PROMPT = 32
BATCHES = (1, 8)
VOCABULARY = 50257
# name -> (what is timed, runs under tf_keras)
IMPLEMENTATIONS = {
    "kerasbert": "kerasbert.generate, key/value cache, XLA",
    "kerasbert-bf16": "kerasbert.generate(dtype='bfloat16'), key/value cache, oneDNN",
    "kerasbert-no-cache": "kerasbert.generate(use_cache=False)",
    "hf-torch": "transformers GPT2LMHeadModel.generate, fp32",
    "hf-torch-bf16": "transformers GPT2LMHeadModel.generate, bf16",
    "keras-hub": "keras-hub GPT2CausalLM.generate, greedy",
    "products-tf": "the step's products alone: TensorFlow XLA, fp32, transposed kernels",
    "products-tf-bf16": "the step's products alone: TensorFlow oneDNN, bf16",
    "products-torch": "the step's products alone: torch nn.Linear, fp32",
    "products-torch-bf16": "the step's products alone: torch nn.Linear, bf16",
}
HIDDEN, INNER, LAYERS = 768, 3072, 12


def prompts(batch):
    """``batch`` rows of 32 random ids (none is 0, kerasbert's padding id)."""
    return np.random.default_rng(batch).integers(1, VOCABULARY, (batch, PROMPT))


def prepare(folder):
    """Worker: a random GPT-2 small saved by transformers in ``folder/hf``."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    model.save_pretrained(os.path.join(folder, "hf"))
    return {"folder": folder, "label": f"transformers {transformers.__version__}"}


def _timings(generate, repeats, batches=BATCHES):
    """``{batch: timing}`` and ``{batch: ids}`` of ``generate(prompts) -> ids``."""
    timings, outputs = {}, {}
    for batch in batches:
        ids = prompts(batch)
        outputs[str(batch)] = np.asarray(generate(ids)).tolist()
        timings[str(batch)] = timed(lambda ids=ids: generate(ids), warmup=0, repeats=repeats)
    return timings, outputs


def kerasbert(folder, repeats, use_cache=True, dtype=None, batches=BATCHES):
    import keras

    import kerasbert as kb
    from kerasbert.models.convert import convert_hf_to_google

    prefix = os.path.join(folder, f"google-{os.getpid()}", "bert_model.ckpt")
    convert_hf_to_google(os.path.join(folder, "hf"), prefix)
    model = kb.build_transformer_model(os.path.join(os.path.dirname(prefix),
                                                    "bert_config.json"), prefix)
    shutil.rmtree(os.path.dirname(prefix))
    timings, outputs = _timings(
        lambda ids: kb.generate(model, ids, max_new_tokens=NEW_TOKENS, use_cache=use_cache,
                                dtype=dtype),
        repeats if use_cache else 1, batches)
    return {"label": f"kerasbert {kb.__version__}, keras {keras.__version__}"
                     + (f", {dtype}" if dtype else ""),
            "timings": timings, "outputs": outputs}


def hf_torch(folder, repeats, dtype="float32", batches=BATCHES):
    import torch
    import transformers

    from kerasbert.hardware import cpu_flags

    if dtype == "bfloat16" and not {"avx512_bf16", "amx_bf16"} & set(cpu_flags()):
        note = ", no bfloat16 instructions on this CPU"
    else:
        note = ""
    model = transformers.GPT2LMHeadModel.from_pretrained(
        os.path.join(folder, "hf"), dtype=getattr(torch, dtype)).eval()

    def generate(ids):
        with torch.inference_mode():
            out = model.generate(torch.tensor(ids), attention_mask=torch.ones(ids.shape, dtype=int),
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 do_sample=False, pad_token_id=0)
        return out[:, PROMPT:].numpy()

    timings, outputs = _timings(generate, repeats if dtype == "float32" else 1, batches)
    return {"label": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                     f"{torch.get_num_threads()} threads, {dtype}{note}",
            "timings": timings, "outputs": outputs}


def keras_hub(folder, repeats, batches=BATCHES):
    try:
        import keras_hub
    except ImportError as error:
        raise Skipped(f"keras-hub is not installed ({error})") from None
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCABULARY, num_layers=12, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=1024)
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    model.compile(sampler="greedy")
    length = PROMPT + NEW_TOKENS

    def generate(ids):
        token_ids = np.zeros((len(ids), length), "int32")
        token_ids[:, :PROMPT] = ids
        mask = np.zeros((len(ids), length), bool)
        mask[:, :PROMPT] = True
        out = model.generate({"token_ids": token_ids, "padding_mask": mask},
                             stop_token_ids=None)
        return np.asarray(out["token_ids"])[:, PROMPT:]

    timings, outputs = _timings(generate, repeats, batches)
    return {"label": f"keras-hub {keras_hub.__version__}, random weights of its own",
            "timings": timings, "outputs": outputs}


def step_products():
    """``(out, in)`` of each product of one cached step, in order: per layer query, key,
    value, output, feed-forward in and out; then the LM head (the tied embeddings)."""
    layer = [(HIDDEN, HIDDEN)] * 4 + [(INNER, HIDDEN), (HIDDEN, INNER)]
    return layer * LAYERS + [(VOCABULARY, HIDDEN)]


def _product_timings(step):
    """``{batch: timing}`` of ``step(rows)`` on ``(batch, HIDDEN)`` rows, scaled to
    :data:`NEW_TOKENS` steps (a generate call's tokens; a step makes one token per row)."""
    timings = {}
    for batch in BATCHES:
        rows = np.random.default_rng(batch).standard_normal((batch, HIDDEN)).astype("float32")
        timing = timed(lambda rows=rows: step(rows), warmup=3, repeats=20)
        timings[str(batch)] = {key: round(value * NEW_TOKENS, 2) if key.endswith("_ms")
                               else value for key, value in timing.items()}
    return timings


def products_tf(folder, repeats, dtype="float32"):
    """Worker: the step's products in TensorFlow (float32: XLA over transposed kernels,
    as kerasbert's decoding loop; bfloat16: oneDNN's kernels, no XLA)."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    rng = np.random.default_rng(0)
    weights = [tf.constant(rng.standard_normal(shape, "float32") * 0.02, dtype)
               for shape in step_products()]

    def step(rows):
        x = tf.cast(rows, dtype)
        for weight in weights[:-1]:
            # Each output row of the next product depends on the last: one chain, as a
            # step's layers are.
            x = tf.matmul(x, weight, transpose_b=True)
            if dtype == "float32":
                (x,) = xla.optimization_barrier(x)
            if x.shape[-1] == INNER:
                x = tf.nn.relu(x)
        return tf.argmax(tf.matmul(x, weights[-1], transpose_b=True), -1)

    compiled = tf.function(step, jit_compile=dtype == "float32")
    return {"timings": _product_timings(lambda rows: compiled(tf.constant(rows)).numpy()),
            "label": f"TensorFlow {tf.__version__}, {dtype}, "
                     f"{'XLA' if dtype == 'float32' else 'oneDNN, no XLA'}"}


def products_torch(folder, repeats, dtype="float32"):
    """Worker: the step's products in torch's ``nn.Linear`` (no bias)."""
    import torch

    torch.manual_seed(0)
    linears = [torch.nn.Linear(inputs, outputs, bias=False).to(getattr(torch, dtype))
               for outputs, inputs in step_products()]

    def step(rows):
        with torch.inference_mode():
            x = torch.from_numpy(rows).to(getattr(torch, dtype))
            for linear in linears[:-1]:
                x = linear(x)
                if x.shape[-1] == INNER:
                    x = torch.relu(x)
            return linears[-1](x).argmax(-1).numpy()

    return {"timings": _product_timings(step),
            "label": f"torch {torch.__version__}, {torch.get_num_threads()} threads, {dtype}"}


WORKERS = {
    "prepare": prepare,
    "kerasbert": kerasbert,
    "kerasbert-bf16": lambda folder, repeats: kerasbert(folder, repeats, dtype="bfloat16"),
    "kerasbert-no-cache": lambda folder, repeats: kerasbert(folder, repeats, use_cache=False),
    "hf-torch": hf_torch,
    "hf-torch-bf16": lambda folder, repeats: hf_torch(folder, repeats, dtype="bfloat16"),
    "keras-hub": keras_hub,
    "products-tf": products_tf,
    "products-tf-bf16": lambda folder, repeats: products_tf(folder, repeats, "bfloat16"),
    "products-torch": products_torch,
    "products-torch-bf16": lambda folder, repeats: products_torch(folder, repeats, "bfloat16"),
}


def tokens_per_second(result, batch):
    return batch * NEW_TOKENS / (result["timings"][str(batch)]["median_ms"] / 1000)


def run(options, log):
    """Each implementation in its own process, on the weights ``prepare`` saved."""
    names = selected(options, IMPLEMENTATIONS)
    folder = tempfile.mkdtemp(prefix="kerasbert-bench-generate-")
    try:
        log("generate: prepare")
        prepared = run_worker("generate", "prepare", {"folder": folder}, options, log)
        if why_missing(prepared):
            raise Skipped(f"transformers could not make the model: {why_missing(prepared)}")
        repeats = max(1, min(options.repeats, 3))
        results = {}
        for name in names:
            log(f"generate: {name}")
            results[name] = run_worker("generate", name, {"folder": folder, "repeats": repeats},
                                       options, log, timeout=1800)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ours = results.get("kerasbert", {})
    ours_bf16 = results.get("kerasbert-bf16", {})
    rows = []
    for name, result in results.items():
        if why_missing(result):
            rows.append({"implementation": name, "label": why_missing(result)})
            continue
        row = {"implementation": name, "label": result["label"]}
        for batch in BATCHES:
            row[f"tps{batch}"] = round(tokens_per_second(result, batch), 1)
            if not why_missing(ours) and name != "kerasbert" and "timings" in ours:
                row[f"ratio{batch}"] = round(tokens_per_second(ours, batch)
                                             / tokens_per_second(result, batch), 2)
            if name.endswith("-bf16") and name != "kerasbert-bf16" \
                    and not why_missing(ours_bf16) and "timings" in ours_bf16:
                row[f"bf16_ratio{batch}"] = round(tokens_per_second(ours_bf16, batch)
                                                  / tokens_per_second(result, batch), 2)
            if (name.startswith("hf-torch") or name == "kerasbert-bf16") \
                    and not why_missing(ours) and "outputs" in ours:
                same = np.mean([a == b for a, b in zip(ours["outputs"][str(batch)],
                                                       result["outputs"][str(batch)])])
                row["same"] = f"{row.get('same', '')}{' / ' if 'same' in row else ''}" \
                              f"{same:.0%}"
        rows.append(row)
    columns = [("implementation", "implementation")]
    for batch in BATCHES:
        columns += [(f"tps{batch}", f"tokens/s batch {batch}"),
                    (f"ratio{batch}", f"kerasbert ×, batch {batch}"),
                    (f"bf16_ratio{batch}", f"kerasbert-bf16 ×, batch {batch}")]
    columns += [("same", "same ids as kerasbert (batch 1 / 8)"), ("label", "version")]
    table = {"title": f"Greedy decoding, GPT-2 small (random weights), prompt {PROMPT}, "
                      f"{NEW_TOKENS} new tokens", "columns": columns, "rows": rows}
    return {"results": {name: {k: v for k, v in result.items() if k != "outputs"}
                        for name, result in results.items()}, "tables": [table]}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("generate")
