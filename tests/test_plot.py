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
