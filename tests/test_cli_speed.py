"""The `p2pfl` command imports the engine (torch) only for the commands that train: `--help`,
`analyze`, `table` and `plot` start without it. Each command runs in a fresh interpreter, so
what other tests imported does not count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Runs the command given as arguments, then prints which heavy packages it imported.
PROBE = """import json
import sys
from p2pfl.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps([code, sorted(m for m in ("torch", "matplotlib", "networkx")
                               if m in sys.modules)]))
"""


def _imports(argv: list[str]) -> tuple[int, list[str]]:
    """The exit status of `p2pfl ARGV` and the heavy packages it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    code, imported = json.loads(done.stdout.splitlines()[-1])
    return code, imported


def _run_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text(json.dumps(
        {"round": 1, "test_acc": 0.5, "messages": 4, "bytes_sent": 1.0}) + "\n")
    return path


@pytest.mark.parametrize(("argv", "allowed"), [
    (["--help"], []),
    (["run", "--help"], []),
    (["analyze", "ring", "--n", "16"], ["networkx"]),
    (["analyze", "rnig"], ["networkx"]),
])
def test_help_and_analyze_do_not_import_torch(argv, allowed):
    code, imported = _imports(argv)
    assert code == (2 if "rnig" in argv else 0)
    assert imported == allowed


def test_table_and_plot_do_not_import_torch(tmp_path):
    run = _run_dir(tmp_path / "ring" / "seed0")
    assert _imports(["table", str(tmp_path)]) == (0, ["networkx"])
    code, imported = _imports(["plot", str(run), "--out", str(tmp_path / "fig")])
    assert code == 0 and "torch" not in imported


def test_the_lazy_analysis_package_keeps_every_public_name():
    """`import analysis` (and the command's analysis commands) loads no numpy; every public
    name is then the function or class it was when analysis/__init__.py imported them all, even
    after its submodule was imported first (the module analysis.summary beside the function
    summary)."""
    probe = """import json, sys, types
import analysis
import p2pfl.cli.analysis
light = "numpy" not in sys.modules
import analysis.summary
import analysis as A
import topologies as T
modules = [n for n in A.__all__ if isinstance(getattr(A, n), types.ModuleType)]
print(json.dumps([light, modules, A.summary(T.ring(8))["diameter"]]))
"""
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [True, [], 4]
