"""analysis.communication: accuracy against megabytes sent and simulated seconds, seeds pooled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.communication import curves, main


def _run(path: Path, accs: list[float | None], sent: float, step_s: float | None) -> None:
    """A run that sends `sent` bytes a round and evaluates where accs has a value."""
    path.mkdir(parents=True)
    with open(path / "metrics.jsonl", "w") as f:
        for t, acc in enumerate(accs, start=1):
            record = {"round": t, "messages": 4, "bytes_sent": sent}
            if step_s is not None:
                record["sim_time_s"] = t * step_s
            if acc is not None:
                record["test_acc"] = acc
            f.write(json.dumps(record) + "\n")


def test_curves_are_cumulative_megabytes_and_seed_means_at_the_evaluated_rounds(tmp_path):
    _run(tmp_path / "small" / "seed0", [None, 0.5, None, 0.7], 1e5, 0.5)
    _run(tmp_path / "small" / "seed1", [None, 0.3, None, 0.9], 1e5, 0.5)
    _run(tmp_path / "whole" / "seed0", [0.6, 0.8], 2e6, None)
    found = curves(tmp_path)
    np.testing.assert_allclose(found["small"].megabytes, [0.2, 0.4])
    np.testing.assert_allclose(found["small"].seconds, [1.0, 2.0])
    np.testing.assert_allclose(found["small"].accuracy, [40.0, 80.0])
    np.testing.assert_allclose(found["small"].spread, [10.0, 10.0])
    np.testing.assert_allclose(found["whole"].megabytes, [2.0, 4.0])
    assert found["whole"].seconds is None


def test_the_command_prints_the_table_and_draws_the_figure(tmp_path, capsys):
    _run(tmp_path / "runs" / "a" / "seed0", [0.5, 0.9], 1e6, 1.0)
    _run(tmp_path / "runs" / "b" / "seed0", [0.2, 0.4], 1e4, 1.0)
    assert main([str(tmp_path / "runs"), "--target", "0.8",
                 "--figure", str(tmp_path / "fig.png")]) == 0
    out = capsys.readouterr().out
    assert "| a | 1 | 2 (1 unfinished) | 90.00 | 90.00 | 2.0 | 2.0 | 2 |" in out  # final
    assert (tmp_path / "fig.png").is_file() and (tmp_path / "fig.pdf").is_file()
    assert main([str(tmp_path / "none")]) == 2
    assert "communication: error: runs: " in capsys.readouterr().err
