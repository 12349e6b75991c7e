"""Moved to :mod:`kerasbert.inference.predictor`, below both tasks and serving; this name
stays for code written against earlier versions."""

from kerasbert.inference.predictor import DEFAULT_BUCKET, Predictor, with_dtype_policy

__all__ = ["DEFAULT_BUCKET", "Predictor", "with_dtype_policy"]
