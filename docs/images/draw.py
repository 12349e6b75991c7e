"""Draws the pictures of docs/images/ with kerasbert's own code: ``python docs/images/draw.py``
from the repository root (Graphviz's ``dot`` on PATH, as for ``kerasbert plot``).

ner_tagger.png: the tagger ``kerasbert train --task ner`` fine-tunes (the shipped
kerasbert-zh-small with ``add_tagger(..., crf=True)``, People's Daily's 7 BIO tags), cut to
one transformer layer so that the head fits on the page, drawn by ``kerasbert.models.plot``
and stored with 16 colours (a third of the bytes; the drawing is black on white).
"""

import os

from PIL import Image

from kerasbert import add_crf_tagger, build_transformer_model
from kerasbert.models.plot import plot
from kerasbert.shipped import model_dir

HERE = os.path.dirname(os.path.abspath(__file__))
TAGS = 7  # O, B-/I-PER, B-/I-LOC, B-/I-ORG


def main():
    bert = build_transformer_model(os.path.join(model_dir(), "bert_config.json"),
                                   num_hidden_layers=1)
    path = plot(add_crf_tagger(bert, TAGS), os.path.join(HERE, "ner_tagger.png"), dpi=60)
    with Image.open(path) as drawn:
        small = drawn.convert("RGB").quantize(16)
    small.save(path, optimize=True)
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
