"""A fine-tuned run's model for runtimes without TensorFlow: ONNX and LiteRT.

An export is a folder a runtime can use on its own::

    model.onnx | model.tflite   int32 token_ids and segment_ids (batch, length) -> probabilities
    labels.json                 the label of each probability, in order
    vocab.txt                   the WordPiece vocabulary (BERT tokenization, lowercased)

The ONNX model also carries ``labels`` and ``maxlen`` in its metadata. Before the
folder appears, the exported model is run under its own runtime (ONNX Runtime, the
LiteRT interpreter) on a probe batch and must give the Keras model's probabilities
within :data:`TOLERANCE`; otherwise nothing is written.

Example::

    # runs/reviews: a finished two-label run of `kerasbert train` (minutes)
    from kerasbert.tasks import open_run

    run = open_run("runs/reviews")
    export_onnx(run.model, "runs/reviews/vocab.txt", "exported/reviews-onnx",
                labels=run.labels, maxlen=128)
    # ['exported/reviews-onnx/model.onnx', 'exported/reviews-onnx/labels.json',
    #  'exported/reviews-onnx/vocab.txt']
    predict = onnx_runner("exported/reviews-onnx/model.onnx")
    predict(*run.tokenizer.encode_batch(["这本书很好"], maxlen=128)).shape   # (1, 2)
"""

import contextlib
import functools
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert import disk_space, files
from kerasbert.training.rundir import RunError, check_export_target

ONNX_FILE = "model.onnx"
LITERT_FILE = "model.tflite"
SIDECARS = ("labels.json", "vocab.txt")  # beside the model file
INPUTS = ("token_ids", "segment_ids")
OUTPUT = "probabilities"
TOLERANCE = 1e-4  # max abs difference from the Keras model's probabilities
# int8 weights move probabilities by a few hundredths (bench/bf16.py measures the labels
# on the review test split); more than this on a probe means a broken quantization.
INT8_TOLERANCE = 0.1
log = logging.getLogger(__name__)


class ExportError(ValueError):
    """A model that cannot be exported to the format asked; the message says why."""


def export_onnx(model: keras.Model, vocab: str | os.PathLike[str],
                directory: str | os.PathLike[str], *,
                labels: Sequence[str], maxlen: int, overwrite: bool = False, int8: bool = False,
                source: str | None = None) -> list[str]:
    """Writes ``<directory>/model.onnx`` with dynamic batch and length, plus labels and vocab.

    The model is written by :func:`write_onnx` (tf2onnx, exact GELU as ``1 - Erf``).

    Args:
        model: a classifier (token and segment ids -> probabilities).
        vocab: its ``vocab.txt``, copied beside the model.
        directory: a new or empty folder; with ``overwrite``, an earlier ONNX export.
        labels: the label of each probability, in order (``labels.json``).
        maxlen: the tokens per text the model was trained with (in the metadata).
        overwrite: replace an earlier ONNX export in ``directory`` (nothing else).
        int8: quantize the weights of every matrix product to int8 (ONNX Runtime's dynamic
            quantization: activations are quantized per call; the embeddings stay float32).
            Those weights take a quarter of the space, and it is the fastest CPU inference
            measured (``bench/``); probabilities move by a few hundredths, so the check
            against Keras allows :data:`INT8_TOLERANCE`.
        source: the folder the model came from (its run directory), which the export must
            neither be nor hold.

    Returns:
        the paths written.

    Raises:
        RunError: ``directory`` is ``source`` or holds it, is a file, or is
            not empty (without ``overwrite``, or not an ONNX export).
        ExportError: tf2onnx, onnx or onnxruntime is missing, or the exported model
            does not reproduce the Keras model.
    """
    directory = os.fspath(directory)
    _check_target(directory, source, overwrite, ONNX_FILE, "an ONNX export")
    for module in ("tf2onnx", "onnx", "onnxruntime"):
        _require(module, "onnx")
    labels = list(labels)
    model = _exportable(model)
    with _room(directory, model, vocab, "the ONNX export"), \
            files.atomic_directory(directory) as temporary:
        path = os.path.join(temporary, ONNX_FILE)
        write_onnx(model, path)
        metadata = {"labels": json.dumps(labels, ensure_ascii=False), "maxlen": str(maxlen)}
        if int8:
            metadata["quantization"] = "dynamic int8"
        _describe_onnx(path, len(labels), metadata)
        if int8:
            quantize_onnx(path, path)
        _check_outputs(model, onnx_runner(path), f"ONNX model in {directory}",
                       tolerance=INT8_TOLERANCE if int8 else TOLERANCE)
        return _write_sidecars(labels, vocab, temporary, directory, ONNX_FILE)


def write_onnx(model: keras.Model, path: str | os.PathLike[str]) -> None:
    """Writes a kerasbert model (inputs token and segment ids, any outputs) to ``path`` as
    ONNX, through tf2onnx, with dynamic batch and length and the converters kept quiet.

    TensorFlow's exact GELU uses ``Erfc``, which tf2onnx lacks; it is taught ``1 - Erf``.
    """
    with _quiet():
        _register_erfc()
        model.export(os.fspath(path), format="onnx", input_signature=_signature(None),
                     verbose=False)


def quantize_onnx(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Rewrites an ONNX model with int8 weights for every ``MatMul`` (dynamic quantization).

    ONNX Runtime's ``quantize_dynamic``: weights are stored as signed int8 with one scale
    per matrix, activations are quantized on the fly, and the products run on the CPU's
    int8 instructions (AVX-512 VNNI, AMX-INT8) where it has them. ``target`` may be
    ``source``.
    """
    _require("onnxruntime", "onnx")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        quantized = os.path.join(folder, "int8.onnx")
        with _quiet():
            quantize_dynamic(os.fspath(source), quantized, weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"])
        shutil.move(quantized, os.fspath(target))


def export_litert(model: keras.Model, vocab: str | os.PathLike[str],
                  directory: str | os.PathLike[str], *,
                  labels: Sequence[str], maxlen: int, overwrite: bool = False,
                  source: str | None = None) -> list[str]:
    """Writes ``<directory>/model.tflite`` on LiteRT's builtin operations, plus labels and vocab.

    Only builtin operations are used, so the standard LiteRT runtime (without the
    TensorFlow "Flex" delegate) runs the model. Batch and length are dynamic where
    LiteRT's builtin kernels allow it; when an operation of the model has no builtin
    kernel at a dynamic length, the length is fixed at ``maxlen`` (the
    input's ``shape_signature`` says which: ``[-1, -1]`` or ``[-1, maxlen]``) and
    shorter inputs are padded with token id 0, which the model masks out.

    Arguments, result and the :class:`RunError` cases are those of :func:`export_onnx`,
    for a LiteRT export.

    Raises:
        ExportError: ai-edge-litert is missing, an operation of the model has no
            LiteRT builtin kernel even at a fixed length, or the exported model does
            not reproduce the Keras model.
    """
    directory = os.fspath(directory)
    _check_target(directory, source, overwrite, LITERT_FILE, "a LiteRT export")
    _require("ai_edge_litert", "litert", package="ai-edge-litert")
    model = _exportable(model)
    with _room(directory, model, vocab, "the LiteRT export"), \
            files.atomic_directory(directory) as temporary:
        path = os.path.join(temporary, LITERT_FILE)
        length = _convert_litert(model, path, maxlen)
        with _quiet():  # the interpreter announces its XNNPACK delegate on stderr
            _check_outputs(model, litert_runner(path), f"LiteRT model in {directory}",
                           longest=length)
        return _write_sidecars(list(labels), vocab, temporary, directory, LITERT_FILE)


def onnx_runner(path: str | os.PathLike[str],
                threads: int | None = None) -> Callable[[Any, Any], np.ndarray]:
    """An exported ONNX model under ONNX Runtime, as ``predict(token_ids, segment_ids)``.

    Args:
        path: a ``model.onnx`` written by :func:`export_onnx`.
        threads: ONNX Runtime's intra-op threads (default: its own choice).

    Returns:
        a function of two ``(batch, length)`` int arrays returning float32
        ``(batch, labels)`` probabilities.
    """
    ort = _require("onnxruntime", "onnx")
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(os.fspath(path), options, providers=["CPUExecutionProvider"])

    def predict(token_ids: Any, segment_ids: Any) -> np.ndarray:
        feed = dict(zip(INPUTS, _int32(token_ids, segment_ids)))
        return session.run([OUTPUT], feed)[0]

    return predict


def litert_runner(path: str | os.PathLike[str],
                  threads: int | None = None) -> Callable[[Any, Any], np.ndarray]:
    """An exported LiteRT model under the LiteRT interpreter, as
    ``predict(token_ids, segment_ids)``.

    Inputs shorter than a fixed model length are padded with token id 0.

    Args:
        path: a ``model.tflite`` written by :func:`export_litert`.
        threads: the interpreter's threads (default: its own choice).

    Returns:
        a function of two ``(batch, length)`` int arrays returning float32
        ``(batch, labels)`` probabilities.

    Raises:
        ValueError (when called): inputs longer than the model's fixed length.
    """
    interpreter_module = _require("ai_edge_litert.interpreter", "litert", package="ai-edge-litert")
    interpreter = interpreter_module.Interpreter(model_path=os.fspath(path), num_threads=threads)
    runner = interpreter.get_signature_runner()
    fixed = int(runner.get_input_details()[INPUTS[0]]["shape_signature"][1])

    def predict(token_ids: Any, segment_ids: Any) -> np.ndarray:
        token_ids, segment_ids = _int32(token_ids, segment_ids)
        length = token_ids.shape[1]
        if fixed > 0 and length != fixed:
            if length > fixed:
                raise ValueError(f"token_ids of length {length} in {path}: the model takes at "
                                 f"most {fixed} tokens (its fixed length)")
            padding = ((0, 0), (0, fixed - length))
            token_ids, segment_ids = np.pad(token_ids, padding), np.pad(segment_ids, padding)
        return runner(token_ids=token_ids, segment_ids=segment_ids)[OUTPUT]

    return predict


def _int32(token_ids: Any, segment_ids: Any) -> tuple[np.ndarray, np.ndarray]:
    return (np.ascontiguousarray(token_ids, dtype="int32"),
            np.ascontiguousarray(segment_ids, dtype="int32"))


_FORMATS = {"onnx": "ONNX", "litert": "LiteRT"}


def _require(module: str, extra: str, package: str | None = None) -> Any:
    """Imports an optional dependency, or says in one line how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        name = package or module.split(".")[0]
        raise ExportError(f"{_FORMATS[extra]} export in --format {extra}: needs {name}, which "
                          f"is not installed; pip install 'kerasbert[{extra}]'") from None


def _check_target(directory: str, source: str | None, overwrite: bool, marker: str,
                  what: str) -> None:
    """Refuses ``source`` (the run directory), files, and non-empty folders that are not an
    earlier export (that holds ``marker``, ``labels.json`` and ``vocab.txt``, nothing else)."""
    check_export_target(directory, source)
    if os.path.isdir(directory) and os.listdir(directory):
        if not overwrite:
            raise RunError(f"--to in {directory}: exists and is not empty; pass --overwrite to "
                           "replace an earlier export, or choose a new directory")
        if not os.path.isfile(os.path.join(directory, marker)):
            raise RunError(f"--to in {directory}: is not {what} (no {marker}); --overwrite only "
                           "replaces an earlier export")
        others = sorted(set(os.listdir(directory)) - {marker, *SIDECARS})
        if others:
            raise RunError(f"--to in {directory}: holds other files than {what} "
                           f"({', '.join(others[:3])}); --overwrite only replaces an earlier "
                           "export")


def _room(directory: str, model: keras.Model, vocab: str | os.PathLike[str],
          what: str) -> contextlib.AbstractContextManager[Any]:
    """:func:`kerasbert.disk_space.room_for` an export of ``model``: its weights once (the
    model file, measured: about 1.3 kB a weight beyond their bytes), the graph, the vocab."""
    size = disk_space.estimated_size(model.weights, overhead=8 << 10) + (1 << 20)
    return disk_space.room_for(directory, size + os.path.getsize(vocab), what=what,
                          advice=disk_space.NOTHING_WRITTEN)


def _exportable(model: keras.Model) -> keras.Model:
    """The model with its output named ``probabilities``, computing in float32.

    A run trained with ``--mixed-precision`` saves 16-bit compute policies (bfloat16 or
    float16); the portable runtimes are checked against (and most run best in) float32.
    """
    if any(layer.dtype_policy.name != "float32" for layer in model.layers
           if isinstance(layer, keras.layers.Layer)):
        from kerasbert.inference.predictor import with_dtype_policy

        model = with_dtype_policy(model, "float32")
    return keras.Model(model.inputs, {OUTPUT: model.outputs[0]}, name=model.name)


def _signature(length: int | None) -> list[list[Any]]:
    import tensorflow as tf

    return [[tf.TensorSpec((None, length), tf.int32, name=name) for name in INPUTS]]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silences converters: their Python logs and warnings, and what their C++ writes to stderr.

    ``KERASBERT_DEBUG=1`` lets everything through.
    """
    if os.environ.get("KERASBERT_DEBUG") == "1":
        yield
        return
    logger = logging.getLogger("tf2onnx")
    level = logger.level
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        logger.setLevel(logging.ERROR)
        os.dup2(devnull, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
        logger.setLevel(level)


@functools.cache
def _register_erfc() -> None:
    """Teaches tf2onnx TensorFlow's ``Erfc`` (exact GELU) as ``1 - Erf`` (ONNX opset 9+)."""
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:  # registered by the decorator
        @classmethod
        def version_9(cls, ctx: Any, node: Any, **kwargs: Any) -> None:
            erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
            one = ctx.make_const(f"{node.name}/one", np.array(1, np.float32))
            shapes, dtypes, output = node.output_shapes, node.output_dtypes, node.output[0]
            ctx.remove_node(node.name)
            ctx.make_node("Sub", [one.output[0], erf.output[0]], outputs=[output],
                          name=node.name, shapes=shapes, dtypes=dtypes)


def _describe_onnx(path: str, num_labels: int, metadata: dict[str, str]) -> None:
    """Names the dynamic axes ``batch`` and ``length`` and stores ``metadata`` in the model."""
    import onnx
    from onnx.tools.update_model_dims import update_inputs_outputs_dims

    model = onnx.load(path)
    axes = ["batch", "length"]
    model = update_inputs_outputs_dims(model, {name: axes for name in INPUTS},
                                       {OUTPUT: ["batch", num_labels]})
    onnx.helper.set_model_props(model, metadata)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def _convert_litert(model: keras.Model, path: str,  # type: ignore[return]  # returns or raises
                    maxlen: int) -> int | None:
    """Converts on builtin operations; returns the fixed length, or None for a dynamic one."""
    import tensorflow as tf

    builtins = {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}
    for length in (None, maxlen):
        try:
            with _quiet():
                model.export(path, format="litert", input_signature=_signature(length),
                             verbose=False, target_spec=builtins)
            return length
        except Exception as error:  # the converter's ConverterError is not public API
            if disk_space.is_no_space(error):
                raise  # said as a full disk by the caller, not as a converter failure
            missing = _ops_without_builtins(error)
            if not missing:
                reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
                raise ExportError(f"LiteRT export in --format litert: the converter "
                                  f"failed: {reason[:300]}") from error
            if length is not None:
                raise ExportError(f"LiteRT export in --format litert: LiteRT has no builtin "
                                  f"kernel for {', '.join(missing)} of this model, even at a "
                                  f"fixed length of {maxlen}; only the TensorFlow Flex "
                                  "delegate could run it") from error
            log.info("LiteRT has no builtin kernel for %s at a dynamic length; the length is "
                     "fixed at maxlen %d", ", ".join(missing), maxlen)


def _ops_without_builtins(error: Exception) -> list[str]:
    """The TensorFlow operations a ConverterError says need the Flex delegate."""
    ops = []
    for item in getattr(error, "errors", []):
        codes = getattr(type(item), "ErrorCode", None)
        if (codes and codes.Name(item.error_code) == "ERROR_NEEDS_FLEX_OPS"
                and item.operator.name not in ops):
            ops.append(item.operator.name)
    return ops


def _check_outputs(model: keras.Model, predict: Callable[[Any, Any], np.ndarray], what: str,
                   longest: int | None = None, tolerance: float = TOLERANCE) -> None:
    """Runs probe batches through ``predict`` and the Keras model; refuses a difference.

    Two shapes (a pair with padding, a single short row) also prove the dynamic axes;
    ``longest`` is a fixed model length that the probes must not exceed.
    """
    vocab = model.get_layer("Embedding-Token").input_dim
    longest = longest or 16
    rng = np.random.default_rng(0)
    worst = 0.0
    for batch, length in ((2, min(16, longest)), (1, min(5, longest))):
        token_ids = rng.integers(1, vocab, (batch, length)).astype("int32")
        token_ids[-1, length // 2 + 1:] = 0  # padding in the last row
        segment_ids = np.zeros_like(token_ids)
        expected = np.asarray(model([token_ids, segment_ids], training=False)[OUTPUT])
        worst = max(worst, float(np.abs(predict(token_ids, segment_ids) - expected).max()))
    if not worst <= tolerance:
        raise ExportError(f"{what}: its probabilities differ from the Keras model's by "
                          f"{worst:.2e} (more than {tolerance:g}) on a probe batch; nothing "
                          "was written")


def _write_sidecars(labels: Sequence[str], vocab: str | os.PathLike[str], temporary: str,
                    directory: str, model_file: str) -> list[str]:
    """Writes ``labels.json`` and ``vocab.txt``; returns the final paths of the export."""
    files.write_json(os.path.join(temporary, "labels.json"), labels)
    files.copy_file(os.fspath(vocab), os.path.join(temporary, "vocab.txt"))
    return [os.path.join(directory, name) for name in (model_file, *SIDECARS)]
