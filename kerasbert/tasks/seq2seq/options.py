"""The options of ``kerasbert train --task seq2seq``: the flags only this task takes."""

import dataclasses

from kerasbert.tasks.options import TaskOptions
from kerasbert.training.options import COUNT, option, task_option


@dataclasses.dataclass(kw_only=True)
class Seq2SeqOptions(TaskOptions):
    """``kerasbert train --task seq2seq``: text generation (source to target), UniLM on a
    BERT-family model and its MLM head, or a T5 encoder-decoder (``t5``, ``t5.1.1``,
    ``mt5.1.1``) with its SentencePiece model (``sp_model``)."""

    SUMMARY = ("text generation, source to target (UniLM on a BERT-family model, or a T5 "
               "encoder-decoder with --sp-model); without --train it takes the shipped "
               "Chinese answer-generation set")
    FILES = "JSONL, one {\"source\": ..., \"target\": ...} object per line"
    TEXTS = ("source texts to generate from (--input: JSONL with 'source', or plain text, a "
             "source per line)")
    SHIPPED = "peoples_daily_seq2seq"
    LONG_TEXTS = False  # the generated tokens' positions follow the source's
    SIGNATURE = "generate"
    BACKENDS = ("tensorflow", "jax", "torch")
    EXAMPLE = {"run": "runs/gen", "train": "the shipped answer-generation set",
               "predict": "江泽民在北京会见了新华社记者。这句话提到的人是谁？"}

    task: str = task_option("seq2seq")
    max_new_tokens: int = option(32, "the most tokens generated per source, the closing "
                                 "[SEP] (T5: </s>) included", COUNT)
    num_beams: int = option(1, "beam search width of the generation (1: greedy)", COUNT)
    sp_model: str = option(None, "SentencePiece .model file of a T5 family (t5, t5.1.1, "
                           "mt5.1.1), its tokenizer instead of --vocab", metavar="FILE",
                           input="file")


OPTIONS = Seq2SeqOptions
