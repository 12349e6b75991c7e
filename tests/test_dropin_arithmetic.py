"""bert4keras's modules in kerasbert (``backend``, ``layers``, ``snippets``, ``optimizers``,
``tokenizers`` and ``kerasbert.models``'s own file) compute no attention, position or
decoding arithmetic of their own: each layer and function hands it to the one model-code
primitive (``attend``, ``attention_scores``, ``normalized``, ``positions.sinusoid`` and
``rotated``, ``crf.viterbi_decode``...), so that the two cannot drift apart.

Read as source (``ast``): no call of a softmax, a sine or cosine, an einsum or a matrix
product (``matmul``, ``dot``, ``tensordot``, ``batch_dot``, the ``@`` operator) on any
module. The one exception is Keras 2's own ``K.dot`` and ``K.batch_dot``, which the ``K``
object gives bert4keras scripts: Keras 3 dropped them, and no model code computes them.
"""

import ast
import os

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "kerasbert")
FACADE = ("backend.py", "layers.py", "snippets.py", "optimizers.py", "tokenizers.py",
          os.path.join("models", "__init__.py"))
REFUSED = {"softmax", "sin", "cos", "einsum", "matmul", "dot", "tensordot", "batch_dot"}
#: Keras 2's backend functions that ``K`` provides: (file, function name).
KERAS2 = {("backend.py", "dot"), ("backend.py", "batch_dot")}


def arithmetic(path):
    """``[(function, line, what)]``: the refused calls and ``@`` products in ``path``, by
    the function (or class) they are in."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
            if isinstance(child, ast.Call):
                name = (child.func.attr if isinstance(child.func, ast.Attribute)
                        else child.func.id if isinstance(child.func, ast.Name) else None)
                if name in REFUSED:
                    found.append((scope, child.lineno, name))
            if isinstance(child, ast.BinOp) and isinstance(child.op, ast.MatMult):
                found.append((scope, child.lineno, "@"))
            visit(child, inner)

    visit(tree, "<module>")
    return found


@pytest.mark.parametrize("file_name", FACADE)
def test_the_bert4keras_modules_hand_their_arithmetic_to_the_model_code(file_name):
    found = [(scope, line, what) for scope, line, what in
             arithmetic(os.path.join(PACKAGE, file_name)) if (file_name, scope) not in KERAS2]
    what = ", ".join(sorted({name for *_, name in found}))
    lines = ", ".join(str(line) for _, line, _ in found)
    assert not found, (f"kerasbert/{file_name} computes {what} itself (lines {lines}): call "
                       "the model code's primitive instead")


def test_the_scan_finds_what_it_refuses(tmp_path):
    """The scan is not blind: each refused form is found, and the K exceptions alone pass."""
    path = tmp_path / "sample.py"
    path.write_text("from keras import ops\n"
                    "def f(a, b):\n"
                    "    return ops.softmax(a) + ops.einsum('ij,jk->ik', a, b) + a @ b\n"
                    "class C:\n"
                    "    def g(self, x):\n"
                    "        return np.sin(x) + self.table.dot(x)\n"
                    "    h = staticmethod(ops.cos)\n")
    assert sorted(what for *_, what in arithmetic(path)) == ["@", "dot", "einsum", "sin",
                                                             "softmax"]


def test_the_bert4keras_functions_give_the_model_codes_numbers():
    """``attention_normalize`` is ``normalized`` after bert4keras's masking; ViterbiDecoder
    the graph's Viterbi, with its start and end labels."""
    from keras import ops

    from kerasbert.backend import attention_normalize
    from kerasbert.models.crf import viterbi_decode
    from kerasbert.models.layers import normalized
    from kerasbert.snippets import ViterbiDecoder

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 3, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    for method in ("softmax", "squared_relu", "softmax_plus"):
        found = np.asarray(attention_normalize(scores, mask, method=method))
        masked = np.where(mask[:, None, :], scores, -np.inf).astype("float32")
        length = mask.sum(-1).astype("float32")[:, None, None]
        expected = np.asarray(normalized(ops.convert_to_tensor(masked), method, length))
        np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-7)
        assert np.all(found[0, :, 4:] == 0)
    np.testing.assert_array_equal(attention_normalize(scores, method="none"), scores)
    nodes = rng.normal(size=(7, 4)).astype("float32")
    trans = rng.normal(size=(4, 4)).astype("float32")
    decoder = ViterbiDecoder(trans, starts=[0, 1], ends=[2])
    path = decoder.decode(nodes)
    assert path[0] in (0, 1) and path[-1] == 2
    limited = nodes.copy()
    limited[0, [2, 3]] = -np.inf
    limited[-1, [0, 1, 3]] = -np.inf
    np.testing.assert_array_equal(path, np.asarray(viterbi_decode(limited[None], trans)[0]))
