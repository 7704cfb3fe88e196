"""analysis.across: each variant's final accuracy across settings (one comparison folder each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.across import collect, main, table


def _run(path: Path, accs: list[float], finished: bool = True) -> None:
    path.mkdir(parents=True)
    with open(path / "metrics.jsonl", "w") as f:
        for t, acc in enumerate(accs, start=1):
            f.write(json.dumps({"round": t, "messages": 4, "bytes_sent": 1.0,
                                "test_acc": acc}) + "\n")
    if finished:
        (path / "summary.json").write_text("{}")


def test_cells_are_the_finished_seeds_last_evaluations_by_setting(tmp_path, capsys):
    _run(tmp_path / "a" / "sgp" / "seed0", [0.1, 0.5, 0.7])
    _run(tmp_path / "a" / "sgp" / "seed1", [0.1, 0.7, 0.9])
    _run(tmp_path / "a" / "sgp" / "seed2", [0.1, 0.2, 0.3], finished=False)  # still running
    _run(tmp_path / "b" / "sgp" / "seed0", [0.2, 0.4, 0.4])
    _run(tmp_path / "b" / "dfedavg" / "seed0", [0.5, 0.5, 0.6])
    cells = collect({"0.1": tmp_path / "a", "2 classes": tmp_path / "b"}, last=2)
    assert cells == {"sgp": {"0.1": pytest.approx([60.0, 80.0]), "2 classes": [40.0]},
                     "dfedavg": {"2 classes": pytest.approx([55.0])}}
    assert table(cells, ["0.1", "2 classes"]).splitlines()[2:] == [
        "| sgp | 70.00 ± 10.00 | 40.00 (1 seeds) |", "| dfedavg | - | 55.00 (1 seeds) |"]
    assert main([f"0.1={tmp_path / 'a'}", f"2 classes={tmp_path / 'b'}", "--last", "2",
                 "--figure", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").is_file() and (tmp_path / "fig.pdf").is_file()
    assert main([str(tmp_path / "a")]) == 2
    assert "across: error: settings: each is SETTING=FOLDER" in capsys.readouterr().err
    assert main([f"0.1={tmp_path / 'a'}", "--last", "2", "--names", "sgp=SGP,dfedavg=DFedAvg"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| SGP | 70.00 ± 10.00 |")
    assert main([f"0.1={tmp_path / 'a'}", "--names", "sgp"]) == 2


def test_one_row_gathers_a_variant_from_each_folder(tmp_path, capsys):
    _run(tmp_path / "a" / "dfedavg" / "seed0", [0.5, 0.6])
    _run(tmp_path / "a" / "dfedsam" / "seed0", [0.5, 0.4])
    _run(tmp_path / "b" / "dfedsam_rho0.1" / "seed0", [0.3, 0.2])
    _run(tmp_path / "b" / "other" / "seed0", [0.9, 0.9])
    assert main([f"0={tmp_path / 'a'}:dfedavg", f"0.05={tmp_path / 'a'}:dfedsam",
                 f"0.1={tmp_path / 'b'}:dfedsam_rho0.1", "--row", "DFedSAM", "--last", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == ["| DFedSAM | 60.00 | 40.00 | 20.00 |"]
