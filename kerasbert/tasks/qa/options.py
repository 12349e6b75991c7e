"""The options of ``kerasbert train --task qa``: the flags only this task takes."""

import dataclasses

from kerasbert.tasks.options import TaskOptions
from kerasbert.training.options import task_option


@dataclasses.dataclass(kw_only=True)
class QaOptions(TaskOptions):
    """``kerasbert train --task qa``: span question answering (start and end of the answer)."""

    SUMMARY = ("span question answering; without --train it takes the shipped Chinese QA set")
    FILES = "SQuAD v1.1 / v2.0 JSON (CMRC 2018 and DRCD too)"
    TEXTS = ("QUESTION CONTEXT pairs: a question, then the text to answer it from (--input: "
             "SQuAD JSON, JSONL with 'question' and 'context', or a question, a tab and its "
             "context per line)")
    SHIPPED = "peoples_daily_qa"
    TEXT_LINES = False
    SIGNATURE = "answer"
    BACKENDS = ("tensorflow", "jax", "torch")
    EXAMPLE = {"run": "runs/qa", "train": "the shipped Chinese QA set",
               "predict": "这句话提到的人是谁？ 江泽民在北京会见了新华社记者。"}

    task: str = task_option("qa")


OPTIONS = QaOptions
