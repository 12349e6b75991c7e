"""kerasbert: Google BERT checkpoints on Keras 3, with bert4keras layer names.

Importing the package registers every object a saved kerasbert model refers to (its
layers, the learning-rate schedule), so ``keras.saving.load_model(path, safe_mode=True)``
loads a run's ``model.keras`` in any script that has run ``import kerasbert``.

Example:
    >>> from kerasbert import build_transformer_model, add_cls_classifier
    >>> bert = build_transformer_model("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
    >>> add_cls_classifier(bert, num_labels=2).count_params()
    101678594
"""

__version__ = "0.1.0"

from kerasbert.quiet import import_tensorflow

import_tensorflow()

# The rest imports TensorFlow (already loaded, quietly).
from kerasbert import layers  # noqa: F401  (registers bert4keras's layers for load_model)
from kerasbert.checkpoints.io import CheckpointError, write_checkpoint
from kerasbert.inference.generation import generate
from kerasbert.inference.predictor import Predictor
from kerasbert.models.attention_masks import Bidirectional, Causal, PrefixLM, UniLM
from kerasbert.models.bert import build_bert
from kerasbert.models.build import Transformer, build_transformer_model
from kerasbert.models.config import BertConfig
from kerasbert.models.crf import ConditionalRandomField
from kerasbert.models.heads import add_cls_classifier, add_crf_tagger, add_tagger
from kerasbert.models.loading import LoadReport, load_checkpoint, save_weights_as_checkpoint  # noqa: E402
from kerasbert.tasks.qa.span_qa import QuestionAnswerer, add_span_head
from kerasbert.text.tokenizer import Tokenizer, load_vocab
from kerasbert.training import optimizer  # noqa: F401  (registers WarmupLinearDecay for load_model)

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
    "generate",
    "load_checkpoint",
    "load_vocab",
    "save_weights_as_checkpoint",
    "write_checkpoint",
]
