"""ELECTRA (Google's and HFL's Chinese discriminators): BERT under the ``electra/`` scope,
with an embedding projection and the replaced-token discriminator head.

``Embedding-Mapping`` (``electra/embeddings_project``) takes the embeddings from
``embedding_size`` to ``hidden_size``; there is no pooler, NSP or MLM head (as in
bert4keras), and no language-model application.

Audit: factorised embeddings; ``Discriminator-Dense`` H·H+H, ``-Prediction`` H+1.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from kerasbert.models import names
from kerasbert.models.checkpoint_names import dense
from kerasbert.models.families.base import AuditRow, HuggingFaceLayout, Step
from kerasbert.models.families.bert import (
    BERT,
    HF_LAYER,
    HF_LAYER_MODULES,
    hf_embedding_modules,
)
from kerasbert.models.layers import get_activation

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig


class ELECTRA(BERT):
    """ELECTRA's discriminator (``model="electra"``)."""

    model_type = "electra"
    default_name = "electra"
    factorised = True
    head_flags = ("with_discriminator",)
    masked_lm = False
    applications = ("encoder",)
    marker_layer = names.DISCRIMINATOR_DENSE
    checkpoint_pattern = r"(electra|generator|discriminator_predictions|generator_predictions)/"
    checkpoint_description = "an ELECTRA"
    names_bert_checkpoints = True
    unilm_seq2seq = False  # a discriminator: no MLM head
    hf_layout = HuggingFaceLayout(
        "electra.", "electra",
        {**hf_embedding_modules("electra"), "embeddings_project": "electra/embeddings_project",
         "discriminator_predictions.dense": "discriminator_predictions/dense",
         "discriminator_predictions.dense_prediction": "discriminator_predictions/dense_1"},
        HF_LAYER, "electra/encoder/layer_{index}", HF_LAYER_MODULES, {},
        ("embeddings.position_ids",))

    def heads(self, x: Any, step: Step | None = None) -> list[Any]:
        if not self.with_discriminator:
            return []
        x = self.dense(x, self.hidden_size, names.DISCRIMINATOR_DENSE,
                       activation=get_activation(self.hidden_act))
        activation = "sigmoid" if self.with_discriminator is True else self.with_discriminator
        return [self.dense(x, 1, names.DISCRIMINATOR_PREDICTION, activation=activation)]

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """BERT's table under ``electra/``, the projection and the discriminator.

        Example:
            >>> ELECTRA.checkpoint_table(12)["Embedding-Mapping"]["kernel"]
            'electra/embeddings_project/kernel'
        """
        mapping = {
            layer: {attribute: name.replace("bert/", "electra/", 1)
                    for attribute, name in weights.items()}
            for layer, weights in BERT.checkpoint_table(num_hidden_layers).items()
            if layer not in (names.POOLER_DENSE, names.NSP_PROBA) and not layer.startswith("MLM-")
        }
        mapping[names.EMBEDDING_MAPPING] = dense("electra/embeddings_project")
        mapping[names.DISCRIMINATOR_DENSE] = dense("discriminator_predictions/dense")
        mapping[names.DISCRIMINATOR_PREDICTION] = dense("discriminator_predictions/dense_1")
        return mapping

    @classmethod
    def claims_checkpoint(cls, layers: Collection[str], available: Collection[str]) -> bool:
        """ELECTRA's discriminator encoder is BERT's graph: a model of BERT's layers reads an
        ELECTRA checkpoint, unless it has a head ELECTRA's checkpoints lack (pooler, NSP,
        MLM), which stays BERT's."""
        embeddings = cls.checkpoint_table(0)[names.EMBEDDING_TOKEN]["embeddings"]
        return embeddings in available and not {
            names.POOLER_DENSE, names.NSP_PROBA, names.MLM_DENSE} & set(layers)

    @classmethod
    def head_rows(cls, config: BertConfig, with_pool: bool | str, with_nsp: bool,
                  with_mlm: bool | str, with_discriminator: bool | str) -> list[AuditRow]:
        H = config.hidden_size
        if not with_discriminator:
            return []
        return [cls.dense_row("discriminator", names.DISCRIMINATOR_DENSE, "H", H, "H", H),
                ("discriminator", names.DISCRIMINATOR_PREDICTION, "H+1", H + 1)]
