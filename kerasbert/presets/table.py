"""The presets: well-known checkpoints by name, read from one data table (``presets.json``).

Each preset says where its files live (a Google zip or a Hugging Face repository), its
family, its licence, its published size and checksum where known, and its fine-tuning
defaults. The table's sources are the published ones; ``KERASBERT_PRESETS`` names another
table of the same form (a mirror, or a test's server), and ``HF_ENDPOINT`` another hub.

This module imports nothing of kerasbert and no TensorFlow: the command line reads the
names from it (``--model``'s choices) before any model is loaded.

Example:
    >>> preset = get("chinese-base")
    >>> preset.family, preset.kind, preset.licence
    ('bert', 'zip', 'Apache-2.0')
    >>> get("rbt3").source
    'hfl/rbt3'
"""

import dataclasses
import json
import os
from typing import Any

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets.json")
TABLE_ENV = "KERASBERT_PRESETS"  # another table of the same form
HOME_ENV = "KERASBERT_HOME"  # the cache folder
KEYS = {"zip", "hf", "revision", "family", "licence", "description", "size_mb", "sha256",
        "finetune"}
#: The file a model folder carries its fine-tuning defaults in (a preset's folder gets one
#: from the table's ``finetune``), and the options it may set; the values a model without
#: one takes are in :data:`kerasbert.training.options.FALLBACK_DEFAULTS`.
DEFAULTS_FILE = "finetune_defaults.json"
DEFAULT_KEYS = ("lr", "epochs", "patience", "maxlen", "batch_size", "prefix_copies")


@dataclasses.dataclass(frozen=True)
class Preset:
    """One checkpoint of the table: ``zip`` (a URL) or ``hf`` (a repository), and its facts."""

    name: str
    family: str
    licence: str
    description: str = ""
    zip: str | None = None
    hf: str | None = None
    revision: str = "main"
    size_mb: float | None = None
    sha256: str | None = None
    finetune: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``"zip"`` (a Google zip at a URL) or ``"hf"`` (a Hugging Face repository)."""
        return "zip" if self.zip else "hf"

    @property
    def source(self) -> str | None:
        """The zip's URL or the repository's name."""
        return self.zip or self.hf


def table_path() -> str:
    """The table in use: ``$KERASBERT_PRESETS``, else the shipped ``presets.json``."""
    return os.environ.get(TABLE_ENV) or TABLE


def load(path: str | os.PathLike[str] | None = None) -> dict[str, Preset]:
    """The presets of a table file, by name.

    Args:
        path: a JSON file ``{"presets": {name: {...}}}``; None: :func:`table_path`.

    Returns:
        ``{name: Preset}``, in the table's order.

    Raises:
        ValueError: the file is not such a table (the message names the file and the entry).

    Example:
        >>> list(load())[:2]
        ['chinese-base', 'multilingual-cased-base']
    """
    path = path or table_path()
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)["presets"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"presets table in {path}: not readable as "
                         f"{{\"presets\": {{name: ...}}}} ({error})") from None
    found = {}
    for name, entry in entries.items():
        unknown = sorted(set(entry) - KEYS) if isinstance(entry, dict) else ["(not an object)"]
        if unknown or bool(entry.get("zip")) == bool(entry.get("hf")) or "family" not in entry:
            raise ValueError(f"preset {name} in {path}: needs exactly one of zip or hf, and "
                             f"family (unknown keys: {', '.join(unknown) or 'none'})")
        found[name] = Preset(name=name, licence=entry.get("licence", "unknown"),
                             **{key: value for key, value in entry.items() if key != "licence"})
    return found


def names(path: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The preset names of the table in use (``--model``'s choices, beside the families)."""
    return tuple(load(path))


def get(name: str, path: str | os.PathLike[str] | None = None) -> Preset:
    """The :class:`Preset` called ``name``.

    Raises:
        ValueError: no such preset (the message lists the known ones).
    """
    presets = load(path)
    if name not in presets:
        raise ValueError(f"preset {name!r} in {path or table_path()}: unknown; known presets: "
                         f"{', '.join(presets)}")
    return presets[name]


def is_preset(text: object, path: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``text`` names a preset and no file or folder (a path always wins).

    Example:
        >>> is_preset("chinese-base"), is_preset("checkpoints/chinese_L-12_H-768_A-12")
        (True, False)
    """
    return (isinstance(text, str) and not os.path.exists(text)
            and text in load(path))


def cache_home() -> str:
    """The cache folder: ``$KERASBERT_HOME``, else the platform's user cache folder."""
    if os.environ.get(HOME_ENV):
        return os.path.abspath(os.environ[HOME_ENV])
    import platformdirs

    return platformdirs.user_cache_dir("kerasbert")


def preset_dir(name: str) -> str:
    """The folder a preset is cached in once downloaded (``<cache>/presets/<name>``)."""
    return os.path.join(cache_home(), "presets", name)


def is_cached(name: str) -> bool:
    """Whether the preset's folder is in the cache (it appears only whole)."""
    return os.path.isfile(os.path.join(preset_dir(name), "bert_config.json"))


def finetune_defaults(preset: Preset) -> dict[str, Any]:
    """The ``finetune_defaults.json`` a preset's folder carries (:data:`DEFAULT_KEYS`).

    Example:
        >>> finetune_defaults(get("chinese-base"))
        {'lr': 2e-05, 'epochs': 3, 'maxlen': 128, 'batch_size': 32}
    """
    return {key: preset.finetune[key] for key in DEFAULT_KEYS if key in preset.finetune}
