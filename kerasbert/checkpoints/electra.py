"""ELECTRA's mapping table (Google's and HFL's Chinese discriminator checkpoints).

BERT's table under the ``electra/`` scope, the embedding projection
(``Embedding-Mapping``, from ``embedding_size`` to ``hidden_size``) and the
discriminator head.
"""

from kerasbert.checkpoints import mapping as bert
from kerasbert.models import names

WORD_EMBEDDINGS = "electra/embeddings/word_embeddings"


def variable_mapping(num_hidden_layers):
    """ELECTRA's table ``{layer name: {weight attribute: Google variable name}}``.

    Example:
        >>> variable_mapping(12)["Embedding-Mapping"]
        {'kernel': 'electra/embeddings_project/kernel', 'bias': 'electra/embeddings_project/bias'}
    """
    mapping = {
        layer: {attribute: name.replace("bert/", "electra/", 1)
                for attribute, name in weights.items()}
        for layer, weights in bert.variable_mapping(num_hidden_layers).items()
        if layer not in (names.POOLER_DENSE, names.NSP_PROBA) and not layer.startswith("MLM-")
    }
    mapping[names.EMBEDDING_MAPPING] = bert.dense("electra/embeddings_project")
    mapping[names.DISCRIMINATOR_DENSE] = bert.dense("discriminator_predictions/dense")
    mapping[names.DISCRIMINATOR_PREDICTION] = bert.dense("discriminator_predictions/dense_1")
    return mapping
