"""A study killed with SIGKILL at random points resumes to the same table.

`p2pfl study` runs as a process, killed at a seeded random time (anywhere: importing, training,
writing a checkpoint, study.csv or a figure) twice in the test run and 20 times under `make
fuzz`, then run once more to the end. Its study.csv must equal an uninterrupted study's, and every
run directory must have finished cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from p2pfl.cli import main
from tests.conftest import fuzz_budget
from tests.test_analysis_study import GRID, TINY, _table

KILLS = fuzz_budget(2, 20)
CONFIG = TINY.replace("rounds = 2", "rounds = 4") + "[engine]\ncheckpoint_every = 1\n" + GRID


def _study(config: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "p2pfl.cli", "study", str(config), "--out",
                             str(out), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_study_killed_at_random_points_resumes_to_the_same_table(tmp_path, record_property):
    config = tmp_path / "grid.toml"
    config.write_text(CONFIG)
    whole, grid = tmp_path / "whole", tmp_path / "grid"
    started = time.monotonic()
    assert main(["study", str(config), "--out", str(whole), "--quiet"]) == 0
    duration = time.monotonic() - started
    rng = np.random.default_rng(2026)
    killed = 0
    for _ in range(KILLS):
        proc = _study(config, grid)
        try:
            proc.wait(timeout=float(rng.uniform(0.5, 2.5 + 2 * duration / KILLS)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            killed += 1
        else:  # it finished before the kill: the later kills start from a finished study
            assert proc.returncode == 0, proc.stderr.read()
    record_property("fuzz_study_kills", killed)
    proc = _study(config, grid)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert killed >= KILLS // 2  # most kills land before the study is done
    assert _table(grid / "study.csv") == _table(whole / "study.csv")
