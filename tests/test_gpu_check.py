"""bench/gpu_check.sh and bench.gpu_report: the GPU check's tiny CPU run writes every part,
a failed or timed-out part is recorded with its output, the targets are judged on the rows they
name, and bad arguments are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.gpu_report import PARTS, TAIL_LINES, main, report
from bench.stacked import main as stacked_main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_check.sh"
MLP_PARAMS = 199_210


def check(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`bench/gpu_check.sh ARGS` with this Python and one thread."""
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHON": sys.executable,
                                                "OMP_NUM_THREADS": "1"})


def test_quick_check_on_cpu_writes_every_part(tmp_path: Path) -> None:
    """The tiny CPU run: every part ok, with the rows each part must hold."""
    out = tmp_path / "check.json"
    done = check("--device", "cpu", "--quick", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    parts = result["parts"]
    assert sorted(parts) == sorted(PARTS) and result["ok"]
    assert {n: p["status"] for n, p in parts.items()} == {n: "ok" for n in PARTS}
    assert result["environment"]["device"] == "cpu" and not result["targets_apply"]
    bench, compiled = parts["bench"]["result"], parts["compile"]["result"]
    assert [w["workload"] for w in bench] == ["mlp-10"] and not bench[0]["compile"]
    assert {(r["solver"], r["precision"]) for r in bench[0]["rows"]} == {
        (s, p) for s in ("sgd", "sam") for p in ("fp32", "bf16")}
    assert compiled[0]["compile"] and {r["precision"] for r in compiled[0]["rows"]} == {"fp32"}
    pairs = {(p["solver"], p["precision"]): p for p in result["compile_vs_eager"]}
    assert set(pairs) == {("sgd", "fp32"), ("sam", "fp32")}
    eager = {r["solver"]: r["s_per_round"] for r in bench[0]["rows"] if r["precision"] == "fp32"}
    assert all(p["eager_s"] == eager[s] and p["speedup"] == p["eager_s"] / p["compiled_s"]
               for (s, _), p in pairs.items())
    # 2 ranks of 10 nodes over random_out(9), a complete digraph: each node's row crosses once
    (gloo,) = parts["gloo"]["result"]
    assert gloo["processes"] == 2 and gloo["mixing_bytes"] == 10 * MLP_PARAMS * 4
    (linear,) = parts["scaling-linear"]["result"]["linear"]
    assert linear["nodes"] == 100 and linear["restored_exactly"]
    (consensus,) = parts["scaling-consensus"]["result"]["consensus"]
    assert consensus["nodes"] == 100 and consensus["conservation_error"] < 1e-6
    stacked = parts["stacked"]["result"]
    assert stacked["rows"][0]["experiments"] == 2
    judged = {t["target"].split()[0]: t for t in result["targets"]}
    assert [judged[w]["status"] for w in ("mlp-100", "mlp-1000", "cnn")] == ["not measured"] * 3
    assert judged["stacked"]["value"] == stacked["speedup"]


def _part(folder: Path, name: str, rc: int, log: str = "", result: Any = None) -> None:
    """The files gpu_check.sh leaves for one part."""
    (folder / f"{name}.cmd").write_text(f"python -m {name}\n")
    (folder / f"{name}.limit").write_text("60\n")
    (folder / f"{name}.rc").write_text(f"{rc}\n")
    (folder / f"{name}.wall").write_text("1.5\n")
    (folder / f"{name}.log").write_text(log)
    if result is not None:
        (folder / f"{name}.json").write_text(json.dumps(result))


def _row(solver: str, precision: str, seconds: float, speedup: float) -> dict[str, Any]:
    return {"solver": solver, "precision": precision, "s_per_round": seconds,
            "speedup": speedup}


def test_failed_timed_out_and_unreached_parts_are_recorded(tmp_path: Path, capsys: Any) -> None:
    log = "".join(f"line {i}\n" for i in range(50)) + "ValueError: the last words\n"
    _part(tmp_path, "bench", 1, log)
    _part(tmp_path, "compile", 124, "compiling\n")
    _part(tmp_path, "gloo", 0, "done\n")  # exit 0 without its JSON
    _part(tmp_path, "scaling-linear", 0, "", {"workload": "scaling", "linear": [
        {"kind": "linear", "nodes": 1000, "us_per_node_step": 3.0},
        {"kind": "linear", "nodes": 10000, "failed": "killed by signal 9 (MemoryError)"}],
        "consensus": []})
    _part(tmp_path, "stacked", 0, "", {"workload": "stacked-seeds", "speedup": 2.0,
                                       "rows": [{"experiments": 8, "speedup": 2.0}]})
    (tmp_path / "scaling-consensus.cmd").write_text("python -m bench.scaling\n")  # no time left
    result = report(tmp_path, "cuda", False, 460.0)
    status = {n: p["status"] for n, p in result["parts"].items()}
    assert status == {"bench": "failed", "stacked": "ok", "compile": "timed out",
                      "gloo": "failed", "scaling-linear": "failed",
                      "scaling-consensus": "not run"}
    error = result["parts"]["bench"]["error"]
    assert error.endswith("ValueError: the last words") and "line 31" in error
    assert "line 30" not in error and len(error.splitlines()) == TAIL_LINES + 1
    assert "stopped after 60 s" in result["parts"]["compile"]["error"]
    assert "JSON does not read" in result["parts"]["gloo"]["error"]
    assert result["parts"]["scaling-linear"]["error"] == (
        "linear N = 10000: killed by signal 9 (MemoryError)")
    assert "budget" in result["parts"]["scaling-consensus"]["error"]
    assert not result["ok"] and result["wall_s"] == 5 * 1.5
    out = tmp_path / "out.json"
    assert main(["--dir", str(tmp_path), "--out", str(out), "--device", "cuda"]) == 1
    assert json.loads(out.read_text())["parts"]["stacked"]["status"] == "ok"
    assert "compile            timed out" in capsys.readouterr().out


def test_targets_are_judged_on_the_best_sgd_row(tmp_path: Path) -> None:
    """mlp-100 passes on its compiled bf16 SGD row (a faster SAM row does not count), mlp-1000
    fails at 150x, cnn was not run, stacked seeds pass at 12x; compiled rows are paired with
    their eager twins."""
    bench = [{"workload": "mlp-100", "rows": [_row("sgd", "fp32", 0.004, 40.0),
                                              _row("sgd", "bf16", 0.003, 50.0),
                                              _row("sam", "fp32", 0.001, 90.0)]},
             {"workload": "mlp-1000", "rows": [_row("sgd", "fp32", 0.04, 150.0),
                                               _row("sam", "fp32", 0.07, 260.0)]}]
    compiled = [{"workload": "mlp-100", "rows": [_row("sgd", "bf16", 0.0015, 90.0)]}]
    _part(tmp_path, "bench", 0, "", bench)
    _part(tmp_path, "compile", 0, "", compiled)
    _part(tmp_path, "stacked", 0, "", {"workload": "stacked-seeds", "speedup": 12.0,
                                       "rows": [{"experiments": 8, "speedup": 12.0}]})
    result = report(tmp_path, "cuda", False, 460.0)
    judged = [(t["status"], t["value"], t["row"]) for t in result["targets"]]
    assert judged == [("pass", 0.0015, "mlp-100 sgd bf16 compiled"),
                      ("fail", 150.0, "mlp-1000 sgd fp32 eager"),
                      ("not measured", None, None), ("pass", 12.0, "8 seeds")]
    assert result["compile_vs_eager"] == [{"workload": "mlp-100", "solver": "sgd",
                                           "precision": "bf16", "eager_s": 0.003,
                                           "compiled_s": 0.0015, "speedup": 2.0}]
    assert result["targets_apply"] and result["environment"]["device"] == "cuda"


@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "--device must be cuda or cpu, got 'tpu'"),
    (["--out"], "--out needs a value"),
    (["--budget", "soon"], "--budget must be a whole number of seconds"),
    (["--fast"], "unknown argument '--fast'"),
])
def test_bad_arguments_are_refused_in_one_line(args: list[str], message: str) -> None:
    done = check(*args, timeout=10)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr


def test_stacked_refuses_a_count_below_one(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        stacked_main(["--seeds", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "python -m bench.stacked: error: --seeds must be at least 1, got 0")
