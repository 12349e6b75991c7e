"""The options of ``kerasbert train --task classification``: the flags only this task takes."""

import dataclasses

from kerasbert.tasks.options import TaskOptions
from kerasbert.training.options import NON_NEGATIVE_INT, option, task_option


@dataclasses.dataclass(kw_only=True)
class ClassificationOptions(TaskOptions):
    """``kerasbert train --task classification``: a text classifier on the [CLS] token."""

    SUMMARY = ("a text classifier on the [CLS] token (the default task); without --train and "
               "--config it fine-tunes the shipped kerasbert-zh-small on the shipped review "
               "split")
    FILES = "labelled TSV, CSV or JSONL with a header naming the columns"
    TEXTS = "texts to classify (a run on sentence pairs: TEXT PAIR, TEXT PAIR...)"
    SHIPPED = "reviews"
    SIGNATURE = "classify"
    FORMATS = ("saved_model", "onnx", "litert")
    BACKENDS = ("tensorflow", "jax", "torch")
    EXAMPLE = {"run": "runs/reviews", "train": "the shipped model and review split",
               "predict": "这家店的菜很好吃 服务太差了"}

    task: str = task_option("classification")
    text_column: str = option("text", "column of the text", metavar="NAME")
    pair_column: str = option(None, "column of the second text of sentence pairs",
                              metavar="NAME")
    label_column: str = option("label", "column of the label", metavar="NAME")
    strategy: str = option(None, "distribution strategy (multi-worker: one process per host, "
                           "each with its TF_CONFIG)", choices=("mirrored", "multi-worker"))
    skip_bad_rows: bool = option(False, "skip and count bad rows instead of failing")
    prefix_copies: int = option(None, "also train on a copy of each example longer than N "
                                "tokens, cut to N as --maxlen cuts, with its label: short "
                                "texts to learn from where the training texts are long (0: "
                                "none; default: the model's for the task, else 0)",
                                NON_NEGATIVE_INT, metavar="N")


OPTIONS = ClassificationOptions
