import shutil

import pytest

from kerasbert.cli.main import main
from kerasbert.models import plot as plotting

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_plot_draws_a_cut_model(tmp_path, capsys):
    full, cut = tmp_path / "full.png", tmp_path / "cut.png"
    assert main(["plot", "checkpoints/chinese_L-12_H-768_A-12/bert_config.json", "-o", str(cut),
                 "--num-labels", "2", "--layers", "2"]) == 0
    assert main(["plot", "checkpoints/chinese_L-12_H-768_A-12/bert_config.json", "-o", str(full),
                 "--num-labels", "2", "--layers", "4"]) == 0
    assert cut.read_bytes().startswith(PNG_MAGIC)
    # More layers make a taller picture.
    assert full.stat().st_size > cut.stat().st_size
    assert "wrote" in capsys.readouterr().out


def test_missing_graphviz_gives_install_instructions(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plotting.shutil, "which", lambda name: None)
    code = main(["plot", "checkpoints/chinese_L-12_H-768_A-12/bert_config.json",
                 "-o", str(tmp_path / "x.png"), "--layers", "1"])
    assert code == 2
    assert "apt-get install graphviz" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
@pytest.mark.parametrize("config, family, shown", [
    ("checkpoints/albert_tiny_zh/albert_config.json", "albert",
     ("Embedding-Mapping", "Transformer-MultiHeadSelfAttention", "Transformer-FeedForward-Norm")),
    ("checkpoints/nezha_base_zh/bert_config.json", "nezha", ("Embedding-Relative-Position",)),
    ("checkpoints/chinese_roformer-v2-char_L-12_H-768_A-12/bert_config.json", "roformer_v2",
     ("Embedding-Rotary-Position",)),
])
def test_plot_draws_each_family_with_its_own_layers(tmp_path, config, family, shown):
    picture = tmp_path / f"{family}.svg"
    assert main(["plot", config, "--model", family, "--layers", "2", "-o", str(picture)]) == 0
    drawn = picture.read_text().replace("&#45;", "-")  # SVG escapes the hyphens
    for name in shown:
        assert f">{name}" in drawn, name
    assert ("Embedding-Position<" in drawn or ">Embedding-Position " in drawn) == (
        family == "albert")
