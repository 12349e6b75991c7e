"""kerasbert: Google BERT checkpoints on Keras 3, with bert4keras layer names.

``import kerasbert`` loads no TensorFlow and changes nothing outside the package (no
environment variable, no import hook, nothing of Keras): each name below is imported on
first use (a tokenizer needs no TensorFlow at all). A saved kerasbert model, a run's
``model.keras``, loads with :func:`kerasbert.load_model` (Keras's safe mode), which
registers kerasbert's objects with Keras first (:mod:`kerasbert.saving`).

Example:
    >>> from kerasbert import build_transformer_model, add_cls_classifier
    >>> bert = build_transformer_model("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
    >>> add_cls_classifier(bert, num_labels=2).count_params()
    101678594
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Each public name -> the module it is imported from on first use.
PUBLIC = {
    "BertConfig": "kerasbert.models.config",
    "Bidirectional": "kerasbert.models.attention_masks",
    "Causal": "kerasbert.models.attention_masks",
    "CheckpointError": "kerasbert.checkpoints.io",
    "ConditionalRandomField": "kerasbert.models.crf",
    "LoadReport": "kerasbert.models.loading",
    "Predictor": "kerasbert.inference.predictor",
    "PrefixLM": "kerasbert.models.attention_masks",
    "QuestionAnswerer": "kerasbert.tasks.qa.span_qa",
    "Tokenizer": "kerasbert.text.tokenizer",
    "Transformer": "kerasbert.models.build",
    "UniLM": "kerasbert.models.attention_masks",
    "add_cls_classifier": "kerasbert.models.heads",
    "add_crf_tagger": "kerasbert.models.heads",
    "add_span_head": "kerasbert.tasks.qa.span_qa",
    "add_tagger": "kerasbert.models.heads",
    "build_bert": "kerasbert.models.bert",
    "build_transformer_model": "kerasbert.models.build",
    "enable_lora": "kerasbert.models.lora",
    "generate": "kerasbert.inference.generation",
    "load_checkpoint": "kerasbert.models.loading",
    "load_model": "kerasbert.saving",
    "load_vocab": "kerasbert.text.tokenizer",
    "quantize": "kerasbert.models.quantization",
    "register_saved_objects": "kerasbert.saving",
    "save_weights_as_checkpoint": "kerasbert.models.loading",
    "write_checkpoint": "kerasbert.checkpoints.io",
}
# Written out for the API reference, which reads it without running the module; the keys of
# PUBLIC (tests/test_library_use.py keeps the two equal).
__all__ = [
    "BertConfig",
    "Bidirectional",
    "Causal",
    "CheckpointError",
    "ConditionalRandomField",
    "LoadReport",
    "Predictor",
    "PrefixLM",
    "QuestionAnswerer",
    "Tokenizer",
    "Transformer",
    "UniLM",
    "add_cls_classifier",
    "add_crf_tagger",
    "add_span_head",
    "add_tagger",
    "build_bert",
    "build_transformer_model",
    "enable_lora",
    "generate",
    "load_checkpoint",
    "load_model",
    "load_vocab",
    "quantize",
    "register_saved_objects",
    "save_weights_as_checkpoint",
    "write_checkpoint",
]

if TYPE_CHECKING:  # the names as a type checker and the API reference read them
    from kerasbert.checkpoints.io import CheckpointError, write_checkpoint
    from kerasbert.inference.generation import generate
    from kerasbert.inference.predictor import Predictor
    from kerasbert.models.attention_masks import Bidirectional, Causal, PrefixLM, UniLM
    from kerasbert.models.bert import build_bert
    from kerasbert.models.build import Transformer, build_transformer_model
    from kerasbert.models.config import BertConfig
    from kerasbert.models.crf import ConditionalRandomField
    from kerasbert.models.heads import add_cls_classifier, add_crf_tagger, add_tagger
    from kerasbert.models.loading import LoadReport, load_checkpoint, save_weights_as_checkpoint
    from kerasbert.models.lora import enable_lora
    from kerasbert.models.quantization import quantize
    from kerasbert.saving import load_model, register_saved_objects
    from kerasbert.tasks.qa.span_qa import QuestionAnswerer, add_span_head
    from kerasbert.text.tokenizer import Tokenizer, load_vocab


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        if name.startswith("_") or importlib.util.find_spec(f"kerasbert.{name}") is None:
            raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")
        return importlib.import_module(f"kerasbert.{name}")  # a module: kerasbert.layers
    value = getattr(importlib.import_module(PUBLIC[name]), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})
