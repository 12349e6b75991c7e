"""Every Keras backend: kerasbert beside keras-hub on TensorFlow, JAX and PyTorch, with
Hugging Face torch as the reference outside Keras.

Three figures, each implementation in a process of its own with ``KERAS_BACKEND`` set, all
in one run (compare them only within it):

* **forward**: Chinese BERT-base (random weights), batch 8 x 128, tokens/s; kerasbert's
  :class:`~kerasbert.inference.predictor.Predictor` and keras-hub's ``BertBackbone``, each
  compiled as its backend runs fastest (a ``tf.function``, ``jax.jit``, eager torch under
  ``no_grad``: :func:`bench.peers.compiled_call`); the forward suite's workers;
* **fine-tuning**: ``kerasbert-zh-small`` (L4 H256), batch 16 x 128 of real reviews, steps/s;
  kerasbert's classifier under ``fit`` as ``kerasbert train`` compiles it, keras-hub's
  ``BertTextClassifier`` with its default ``jit_compile``; the train suite's workers;
* **decoding**: GPT-2 small (random weights), 32-token prompts, 128 greedy tokens, batch 1,
  tokens/s; :func:`kerasbert.generate` and keras-hub's ``GPT2CausalLM.generate``; the
  generate suite's workers.

``kerasbert ×`` is kerasbert's speed over keras-hub's on the same backend (above 1:
kerasbert is faster), ``vs HF torch`` over Hugging Face's on torch. ``python -m bench
backends`` runs this suite alone (about 20 minutes on 2 cores).
"""

import os
import shutil
import tempfile

from bench import generate, train
from bench.runner import Skipped, require, run_worker, why_missing

BACKENDS = ("tensorflow", "jax", "torch")
#: figure -> (its suite, what one figure is, its unit)
FIGURES = {
    "forward": ("forward", "Chinese BERT-base forward, batch 8 x 128", "tokens/s"),
    "fine-tuning": ("train", "kerasbert-zh-small fine-tuning, batch 16 x 128", "steps/s"),
    "decoding": ("generate", "GPT-2 small greedy decoding, batch 1, 128 tokens", "tokens/s"),
}
#: Timed passes of the fine-tuning figure (the train suite's own default is 8).
TRAIN_EPOCHS = 4


def speed(figure, result):
    """The figure's speed in its unit, or None for a worker without figures."""
    if result is None or why_missing(result):
        return None
    if figure == "forward":
        return 8 * 128 / (result["timings"]["8x128"]["median_ms"] / 1000)
    if figure == "fine-tuning":
        return result["samples_per_s"] / train.BATCH
    return generate.tokens_per_second(result, 1)


def run(options, log):
    """Runs kerasbert and keras-hub on each backend and Hugging Face torch once, per figure.

    ``options``: ``warmup`` and ``repeats`` (the forward figure), ``only`` (of ``kerasbert``,
    ``keras-hub``, ``hf-torch``), ``max_wait``.
    """
    names = [name for name in ("kerasbert", "keras-hub", "hf-torch")
             if not options.only or name in options.only]
    if not names:
        raise Skipped(f"none of kerasbert, keras-hub, hf-torch in --only {options.only}")
    results = {figure: {} for figure in FIGURES}
    folder = tempfile.mkdtemp(prefix="kerasbert-bench-backends-")
    try:
        log("backends: preparing the reviews and GPT-2 small")
        prepared = require(run_worker("train", "prepare", {
            "path": os.path.join(folder, "batches.npz"), "samples": train.DEFAULTS["samples"],
            "warmup_batches": train.DEFAULTS["warmup_batches"]}, options, log), "the reviews")
        require(run_worker("generate", "prepare", {"folder": folder}, options, log), "GPT-2")
        kwargs = {"forward": {**options.timing(), "shapes": [[8, 128]]},
                  "fine-tuning": {"path": prepared["path"], "epochs": TRAIN_EPOCHS},
                  "decoding": {"folder": folder, "repeats": max(1, min(options.repeats, 3)),
                               "batches": [1]}}
        for figure, (suite, _, _) in FIGURES.items():
            for name in names:
                for backend in (BACKENDS if name != "hf-torch" else ("torch",)):
                    log(f"backends: {figure}: {name} on {backend}")
                    results[figure][name, backend] = run_worker(
                        suite, name, kwargs[figure], options, log, timeout=1800,
                        backend=backend if name != "hf-torch" else None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"results": {figure: {f"{name} on {backend}": _without_outputs(result)
                                 for (name, backend), result in found.items()}
                        for figure, found in results.items()},
            "tables": [_table(figure, found) for figure, found in results.items()]}


def _without_outputs(result):
    return {key: value for key, value in result.items() if key != "outputs"}


def _table(figure, found):
    _, title, unit = FIGURES[figure]
    reference = speed(figure, found.get(("hf-torch", "torch")))
    rows = []
    for backend in BACKENDS:
        ours = speed(figure, found.get(("kerasbert", backend)))
        hub = speed(figure, found.get(("keras-hub", backend)))
        missing = [f"{name}: {why_missing(result)}" for (name, on), result in found.items()
                   if on == backend and why_missing(result)]
        rows.append({
            "backend": backend,
            "kerasbert": round(ours, 1) if ours else None,
            "keras_hub": round(hub, 1) if hub else None,
            "ratio": round(ours / hub, 2) if ours and hub else None,
            "hf": round(ours / reference, 2) if ours and reference else None,
            "note": "; ".join(missing) or None,
        })
    columns = [("backend", "Keras backend"), ("kerasbert", f"kerasbert {unit}"),
               ("keras_hub", f"keras-hub {unit}"), ("ratio", "kerasbert ×"),
               ("hf", "vs HF torch"), ("note", "note")]
    hf = f"; Hugging Face torch {reference:.1f} {unit}" if reference else ""
    return {"title": f"{title}, on each Keras backend{hf}", "columns": columns, "rows": rows}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("backends")
