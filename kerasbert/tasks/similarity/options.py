"""The options of ``kerasbert train --task similarity``: it takes only the flags every task
takes."""

import dataclasses

from kerasbert.tasks.options import TaskOptions
from kerasbert.training.options import task_option


@dataclasses.dataclass(kw_only=True)
class SimilarityOptions(TaskOptions):
    """``kerasbert train --task similarity``: a siamese (bi-)encoder that scores two texts by
    the cosine of their mean-pooled BERT vectors, trained with CoSENT."""

    SUMMARY = ("sentence-pair similarity: each text encoded alone by the same BERT, mean-pooled, "
               "scored by the cosine of the two vectors (CoSENT loss); without --train it takes "
               "the shipped Chinese name pairs (of one kind or not)")
    FILES = ("TSV, CSV or JSONL with the columns text_a, text_b and label (0 or 1, or a graded "
             "score such as STS-B's 0 to 5); a TSV or CSV without a header row is read as "
             "text_a, text_b, label (LCQMC's files)")
    TEXTS = ("TEXT_A TEXT_B pairs: two texts to compare (--input: TSV, CSV or JSONL with "
             "text_a and text_b)")
    TEXT_LINES = False
    SHIPPED = "peoples_daily_name_pairs"
    SIGNATURE = "similarity"
    BACKENDS = ("tensorflow", "jax", "torch")
    EXAMPLE = {"run": "runs/pairs", "train": "the shipped People's Daily name pairs",
               "predict": "克林顿 江泽民"}

    task: str = task_option("similarity")


OPTIONS = SimilarityOptions
