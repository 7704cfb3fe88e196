"""The one JSON file of `bench/gpu_check.sh`: its parts merged, compiled rounds against eager
ones, and the targets passed or failed (`python -m bench.gpu_report --dir DIR --out FILE
[--device cuda|cpu] [--quick] [--budget S]`).

The script leaves, for each part NAME in DIR: NAME.cmd (its command line), NAME.limit (its time
limit, s), NAME.rc (its exit status), NAME.wall (its seconds), NAME.log (its output) and the
NAME.json it wrote. A part is "ok" when it exited 0 and its JSON reads, with no point of a
scaling curve failed; "timed out" when `timeout` stopped it (exit 124, or 137 after the kill);
"failed" otherwise, with the last lines of its output; "not run" when the time budget was spent
before it.

Targets (issue 50), measured on the SGD rows (`dfedsgpm`), best of the rows timed (fp32 and
bf16, eager and compiled), the row named:

- mlp-100: s/round <= 2 ms;
- mlp-1000: >= 200x the per-node loop;
- cnn: >= 30x the per-node loop;
- stacked seeds: >= 10x the same runs one after another.

They apply to a full run on a GPU (`targets_apply`); in a --quick or CPU run they are shown
but mean nothing, and a workload that was not run is "not measured".
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from p2pfl.report.results import write_json_atomic

PARTS = ("bench", "stacked", "compile", "gloo", "scaling-linear", "scaling-consensus")
TAIL_LINES = 20
TIMED_OUT = (124, 137)  # timeout's status; 137 when it had to kill
COMPILE_MODE = ("engine.compile: torch.compile(forward) in its default mode; CUDA graphs "
                "(mode='reduce-overhead') are not an engine option, so they are not timed")
GLOO_NOTE = ("gloo on the CPU cores of the machine: a CUDA run's ranks use NCCL with one GPU "
             "each (cuda:LOCAL_RANK), so two ranks cannot share one GPU")


def _read(path: Path) -> str | None:
    """The file's text, stripped; None when it is absent."""
    return path.read_text().strip() if path.exists() else None


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a log ('' when it is absent)."""
    text = _read(path) or ""
    return "\n".join(text.splitlines()[-lines:])


def read_part(folder: Path, name: str) -> dict[str, Any]:
    """One part's record from the files the script left.

    Parameters
    ----------
    folder : the script's working folder.
    name : the part.

    Returns
    -------
    dict {"status": "ok" | "failed" | "timed out" | "not run", "command", "limit_s", "exit",
    "wall_s", "result" (its JSON, where it reads), "error" (why it is not ok, with the tail of
    its output)}.
    """
    command, rc = _read(folder / f"{name}.cmd"), _read(folder / f"{name}.rc")
    record: dict[str, Any] = {"command": command}
    if rc is None:
        return record | {"status": "not run", "error": "the time budget was spent before it"
                         if command else "the script did not reach it"}
    limit, wall = _read(folder / f"{name}.limit"), _read(folder / f"{name}.wall")
    record |= {"limit_s": float(limit) if limit else None, "exit": int(rc),
               "wall_s": float(wall) if wall else None}
    log = folder / f"{name}.log"
    if int(rc) in TIMED_OUT:
        return record | {"status": "timed out", "error": f"stopped after {limit} s (exit {rc})"
                         f":\n{_tail(log)}"}
    if int(rc) != 0:
        return record | {"status": "failed", "error": f"exit {rc}:\n{_tail(log)}"}
    try:
        record["result"] = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError) as err:
        return record | {"status": "failed", "error": f"exit 0 but its JSON does not read "
                         f"({err}):\n{_tail(log)}"}
    failed = _failed_points(record["result"])
    if failed:
        return record | {"status": "failed", "error": "; ".join(failed)}
    return record | {"status": "ok"}


def _failed_points(result: Any) -> list[str]:
    """The failed points of a bench.scaling result ([] for any other result)."""
    if not isinstance(result, dict) or result.get("workload") != "scaling":
        return []
    return [f"{p['kind']} N = {p['nodes']}: {p['failed']}" for kind in ("linear", "consensus")
            for p in result.get(kind, []) if "failed" in p]


def _rows(part: dict[str, Any], compiled: bool) -> list[dict[str, Any]]:
    """Every row of a `p2pfl bench` part, with its workload and whether it was compiled."""
    if part.get("status") != "ok":
        return []
    return [{"workload": w["workload"], "compiled": compiled, **row}
            for w in part["result"] for row in w.get("rows", [])]


def _label(row: dict[str, Any]) -> str:
    return (f"{row['workload']} {row['solver']} {row['precision']} "
            f"{'compiled' if row['compiled'] else 'eager'}")


def compile_vs_eager(parts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each compiled row against the eager row of the same workload, solver and precision.

    Parameters
    ----------
    parts : the part records (`read_part`), by name.

    Returns
    -------
    list of dict {"workload", "solver", "precision", "eager_s", "compiled_s", "speedup":
    eager_s / compiled_s}, one per compiled row that has an eager twin.
    """
    eager = {(r["workload"], r["solver"], r["precision"]): r["s_per_round"]
             for r in _rows(parts.get("bench", {}), False)}
    pairs = []
    for row in _rows(parts.get("compile", {}), True):
        key = (row["workload"], row["solver"], row["precision"])
        if key in eager:
            pairs.append({"workload": key[0], "solver": key[1], "precision": key[2],
                          "eager_s": eager[key], "compiled_s": row["s_per_round"],
                          "speedup": eager[key] / row["s_per_round"]})
    return pairs


def _target(name: str, threshold: float, at_most: bool, value: float | None,
            row: str | None) -> dict[str, Any]:
    """One target's record: pass when `value` is on the right side of `threshold`."""
    if value is None:
        status = "not measured"
    else:
        status = "pass" if (value <= threshold if at_most else value >= threshold) else "fail"
    return {"target": name, "threshold": threshold, "at_most": at_most, "value": value,
            "row": row, "status": status}


def _best(rows: list[dict[str, Any]], workload: str, key: str,
          pick: Callable[..., Any]) -> tuple[float | None, str | None]:
    """The best (`pick`: min or max) `key` of the SGD rows of `workload`, and that row's name."""
    chosen = [r for r in rows if r["workload"] == workload and r["solver"] == "sgd"]
    if not chosen:
        return None, None
    best = pick(chosen, key=lambda r: r[key])
    return best[key], _label(best)


def targets(parts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The four targets of the GPU check, each passed, failed or not measured.

    Parameters
    ----------
    parts : the part records (`read_part`), by name.

    Returns
    -------
    list of dict {"target", "threshold", "at_most", "value", "row", "status"}: mlp-100 s/round
    (at most 0.002 s), speed-up over the per-node loop of mlp-1000 (at least 200) and cnn (at
    least 30), stacked seeds against one after another (at least 10).
    """
    rows = _rows(parts.get("bench", {}), False) + _rows(parts.get("compile", {}), True)
    stacked = parts.get("stacked", {})
    speedup = stacked["result"]["speedup"] if stacked.get("status") == "ok" else None
    return [
        _target("mlp-100 s/round <= 2 ms", 0.002, True, *_best(rows, "mlp-100", "s_per_round",
                                                                  min)),
        _target("mlp-1000 >= 200x the per-node loop", 200.0, False,
                *_best(rows, "mlp-1000", "speedup", max)),
        _target("cnn >= 30x the per-node loop", 30.0, False, *_best(rows, "cnn", "speedup", max)),
        _target("stacked seeds >= 10x one after another", 10.0, False, speedup,
                None if speedup is None else f"{stacked['result']['rows'][0]['experiments']} "
                "seeds"),
    ]


ENV_KEYS = ("device", "device_name", "threads", "torch", "python", "numpy", "cuda", "cudnn",
            "nccl")


def environment(parts: dict[str, dict[str, Any]], device: str) -> dict[str, Any]:
    """What the check ran on: as the bench part recorded it, else torch's own account.

    Parameters
    ----------
    parts : the part records (`read_part`), by name.
    device : the check's --device.

    Returns
    -------
    dict: device, its name, threads and library versions (`bench.suite.environment`'s keys), or
    device, torch, python and whether CUDA is available when the bench part has no result.
    """
    bench = parts.get("bench", {})
    if bench.get("status") == "ok" and bench["result"]:
        first = bench["result"][0]
        return {"device": device} | {k: first[k] for k in ENV_KEYS if k in first}
    import torch  # only here: a report from the parts' results needs no torch

    return {"device": device, "torch": torch.__version__, "python": platform.python_version(),
            "cuda_available": torch.cuda.is_available()}


def report(folder: Path, device: str, quick: bool, budget: float) -> dict[str, Any]:
    """The check's JSON object.

    Parameters
    ----------
    folder : the script's working folder.
    device : "cuda" or "cpu".
    quick : whether the parts ran their tiny sizes.
    budget : the script's time budget, s.

    Returns
    -------
    dict {"check", "date", "device", "quick", "ok" (every part ok), "wall_s", "environment",
    "parts" (by name), "compile_mode", "compile_vs_eager", "gloo_note", "targets_apply",
    "targets"}.
    """
    parts = {name: read_part(folder, name) for name in PARTS}
    return {"check": "bench/gpu_check.sh", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "device": device, "quick": quick, "budget_s": budget,
            "ok": all(p["status"] == "ok" for p in parts.values()),
            "wall_s": sum(p.get("wall_s") or 0.0 for p in parts.values()),
            "environment": environment(parts, device), "parts": parts, "compile_mode": COMPILE_MODE,
            "compile_vs_eager": compile_vs_eager(parts), "gloo_note": GLOO_NOTE,
            "targets_apply": device == "cuda" and not quick, "targets": targets(parts)}


def summary(result: dict[str, Any]) -> list[str]:
    """Lines for the terminal: each part's status and each target's.

    Parameters
    ----------
    result : `report`'s dict.

    Returns
    -------
    list of str.
    """
    lines = [f"{name:<18} {p['status']:<9} " + (f"{p['wall_s']:.1f} s" if p.get("wall_s")
                                                  is not None else "")
             + (f"  {p['error'].splitlines()[0]}" if p["status"] != "ok" else "")
             for name, p in result["parts"].items()]
    for pair in result["compile_vs_eager"]:
        lines.append(f"compiled {pair['workload']} {pair['solver']} {pair['precision']}: "
                     f"{pair['speedup']:.2f}x eager")
    note = "" if result["targets_apply"] else " (not a full GPU run: informative only)"
    for t in result["targets"]:
        value = "" if t["value"] is None else f" {t['value']:.4g} ({t['row']})"
        lines.append(f"target {t['target']}: {t['status']}{value}{note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.gpu_report`: write the check's JSON file and print its summary.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, 0 when every part is ok, else 1.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_report", description=__doc__)
    parser.add_argument("--dir", required=True, type=Path, help="the script's working folder")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=float, default=0.0)
    args = parser.parse_args(argv)
    result = report(args.dir, args.device, args.quick, args.budget)
    write_json_atomic(args.out, result)
    print("\n".join(summary(result)))
    print(f"wrote {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
