"""The peers' forward passes, each built the way its own documentation runs it fastest.

Every function here runs inside a worker process of its own (see :mod:`bench.worker`)
and returns a ``call(token_ids, segment_ids) -> numpy sequence output`` plus a label
with the library's version. Weights are random: speed does not depend on their values.
Each peer computes the same encoder (Chinese BERT-base shape, sequence output, padding
mask from token id 0).
"""

import json
import os
import tempfile

from bench.runner import Skipped
from bench.worker import ROOT

CHINESE_BASE = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "bert_config.json")


def read_config(path=CHINESE_BASE):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _require(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as error:
        raise Skipped(f"{module} is not installed ({error})") from None


def bert4keras(config_path=CHINESE_BASE):
    """bert4keras 0.11.5 on tf-keras, called in a ``tf.function`` (needs TF_KERAS=1)."""
    if os.environ.get("TF_KERAS") != "1":
        raise Skipped("bert4keras must run with TF_KERAS=1 TF_USE_LEGACY_KERAS=1")
    tf = _require("tensorflow")
    models = _require("bert4keras.models")
    model = models.build_transformer_model(config_path)
    function = tf.function(lambda t, s: model([t, s], training=False))
    label = f"bert4keras {_require('bert4keras').__version__} (tf_keras, tf.function)"
    return (lambda t, s: function(t, s).numpy()), label


def keras_hub(config_path=CHINESE_BASE):
    """keras-hub's ``BertBackbone`` (Keras 3) called in a ``tf.function``; on JAX in
    ``jax.jit``, on PyTorch under ``torch.no_grad`` (:func:`compiled_call`)."""
    hub = _require("keras_hub")
    config = read_config(config_path)
    backbone = hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config["max_position_embeddings"],
        num_segments=config["type_vocab_size"])

    def inputs(t, s):
        return {"token_ids": t, "segment_ids": s, "padding_mask": t != 0}

    call = compiled_call(backbone, lambda output: output["sequence_output"])
    return (lambda t, s: call(inputs(t, s))), f"keras-hub {hub.__version__} BertBackbone"


def compiled_call(model, pick):
    """``model``'s inference call, compiled the fastest way of the Keras backend it runs
    on: a ``tf.function`` on TensorFlow, ``jax.jit`` over its weights on JAX, eager under
    ``torch.no_grad`` on PyTorch; ``pick(outputs)`` is the output returned, as numpy."""
    import keras
    import numpy as np

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        function = tf.function(lambda x: pick(model(x, training=False)))
        return lambda x: function(x).numpy()
    if backend == "jax":
        import jax

        def run(trainable, non_trainable, x):
            outputs, _ = model.stateless_call(trainable, non_trainable, x, training=False)
            return pick(outputs)

        compiled = jax.jit(run)
        return lambda x: np.asarray(compiled([v.value for v in model.trainable_variables],
                                             [v.value for v in model.non_trainable_variables],
                                             x))
    import torch

    def call(x):
        with torch.no_grad():
            return keras.ops.convert_to_numpy(pick(model(x, training=False)))

    return call


def _hf_model(config_path):
    torch = _require("torch")
    transformers = _require("transformers")
    torch.set_num_threads(os.cpu_count())
    config = transformers.BertConfig(**read_config(config_path))
    return torch, transformers, transformers.BertModel(config, add_pooling_layer=False).eval()


def hf_torch(config_path=CHINESE_BASE, dtype="float32"):
    """Hugging Face ``BertModel`` on CPU torch, under ``torch.inference_mode``.

    ``dtype="bfloat16"``: the weights cast to bf16 (``model.to(torch.bfloat16)``), the way
    torch users run BERT fast on a CPU with bf16 matrix instructions; outputs come back
    as float32.
    """
    torch, transformers, model = _hf_model(config_path)
    model = model.to(getattr(torch, dtype))

    def call(t, s):
        t, s = torch.from_numpy(t).long(), torch.from_numpy(s).long()
        with torch.inference_mode():
            return model(input_ids=t, token_type_ids=s,
                         attention_mask=(t != 0).long()).last_hidden_state.float().numpy()

    return call, f"transformers {transformers.__version__}, torch {torch.__version__}, {dtype}"


def onnxruntime(config_path=CHINESE_BASE, int8=False):
    """The Hugging Face model exported to ONNX, with onnxruntime's BERT fusions.

    ``int8``: then quantized with onnxruntime's dynamic int8 quantization
    (``quantize_dynamic``: int8 weights, activations quantized per call; VNNI / AMX-INT8
    kernels where the CPU has them).
    """
    ort = _require("onnxruntime")
    torch, transformers, model = _hf_model(config_path)
    folder = tempfile.mkdtemp(prefix="bench-onnx-")
    path = os.path.join(folder, "bert.onnx")
    example = torch.ones((2, 16), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "length"} for name in names + ["last_hidden_state"]}

    class SequenceOutput(torch.nn.Module):
        # Keyword arguments in a fixed order: BertModel.forward's positions change between versions.
        def __init__(self):
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    try:
        with torch.no_grad():
            torch.onnx.export(SequenceOutput(), (example, example, example.mul(0)), path,
                              input_names=names, output_names=["last_hidden_state"],
                              dynamic_axes=axes, opset_version=17, dynamo=False)
    except Exception as error:  # an exporter that is missing or refuses is a skip, not a crash
        raise Skipped(f"torch.onnx.export failed: {type(error).__name__}: {error}") from None
    label = f"onnxruntime {ort.__version__}"
    if int8:
        # Quantized before the fusions: the quantizer cannot type the fused graph's tensors.
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = os.path.join(folder, "bert-int8.onnx")
        quantize_dynamic(path, quantized, weight_type=QuantType.QInt8)
        path, label = quantized, label + " dynamic int8"
    try:
        # The BERT-specific fusions (attention, layer norm, GELU) that onnxruntime ships.
        from onnxruntime.transformers import optimizer

        config = read_config(config_path)
        fused = optimizer.optimize_model(path, model_type="bert",
                                         num_heads=config["num_attention_heads"],
                                         hidden_size=config["hidden_size"])
        path = os.path.join(folder, "bert-fused.onnx")
        fused.save_model_to_file(path)
        label += " (BERT fusions)"
    except Exception:  # the plain export still measures onnxruntime, say so in the label
        label += " (no BERT fusions)"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = os.cpu_count()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def call(t, s):
        feed = {"input_ids": t.astype("int64"), "attention_mask": (t != 0).astype("int64"),
                "token_type_ids": s.astype("int64")}
        return session.run(None, feed)[0]

    return call, label


BUILDERS = {
    "bert4keras": bert4keras,
    "keras-hub": keras_hub,
    "hf-torch": hf_torch,
    "hf-torch-bf16": lambda **o: hf_torch(**o, dtype="bfloat16"),
    "onnxruntime": onnxruntime,
    "onnxruntime-int8": lambda **o: onnxruntime(**o, int8=True),
}
