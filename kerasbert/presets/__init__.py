"""Presets: well-known checkpoints by name (:mod:`.table`), downloaded into a cache
(:mod:`.download`)."""
