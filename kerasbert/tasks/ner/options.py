"""The options of ``kerasbert train --task ner``: the flags only this task takes."""

import dataclasses

from kerasbert.tasks.options import TaskOptions
from kerasbert.training.options import option, task_option


@dataclasses.dataclass(kw_only=True)
class NerOptions(TaskOptions):
    """``kerasbert train --task ner``: a named-entity tagger (CRF) on the sequence output."""

    SUMMARY = ("a named-entity tagger (BERT + CRF); without --train it takes the shipped "
               "People's Daily split")
    FILES = ("CoNLL (a token and its BIO, IOB1 or BIOES tag per line) or JSONL (text and "
             "entities at character offsets)")
    TEXTS = ("texts to tag (--input: plain text, a text per line; TSV, CSV or JSONL with a "
             "'text' column; or a tagged file)")
    SHIPPED = "peoples_daily"
    SIGNATURE = "entities"
    BACKENDS = ("tensorflow", "jax", "torch")
    EXAMPLE = {"run": "runs/ner", "train": "the shipped People's Daily split",
               "predict": "江泽民在北京会见了新华社记者。"}

    task: str = task_option("ner")
    no_crf: bool = option(False, "a softmax tagger instead of the CRF")


OPTIONS = NerOptions
