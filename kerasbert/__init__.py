"""kerasbert: Google BERT checkpoints on Keras 3, with bert4keras layer names."""

__version__ = "0.1.0"
