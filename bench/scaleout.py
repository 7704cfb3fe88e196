"""`p2pfl bench --nproc 1,2`: one workload run as R local processes (gloo on CPU,
p2pfl.scale.launch) against one process: seconds per round and the bytes that cross processes
per round.

Each R runs the workload's SGD round (bench.workloads) through `p2pfl run` with --nproc R for
`rounds` + 2 rounds (the first is a warm-up; only the last round evaluates, and it is not timed)
and reads its metrics.jsonl: the median wall_s of the timed rounds (rank 0's clock: it waits for
the slowest rank at every exchange), and the mixing and collective bytes of a round.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.workloads import Workload, workload_config
from p2pfl.config import ConfigError
from p2pfl.report.results import read_metrics

COLUMNS = ("workload", "N", "processes", "s/round", "vs 1 process", "mixing MB/round",
           "collective MB/round")


def toml_text(raw: dict[str, Any]) -> str:
    """A config dict (scalars in one level of tables) as TOML.

    Parameters
    ----------
    raw : the config dict.

    Returns
    -------
    str.
    """
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return f'"{v}"' if isinstance(v, str) else repr(v)

    top = [f"{k} = {value(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{key} = {value(x)}" for key, x in v.items())
              for k, v in raw.items() if isinstance(v, dict)]
    return "\n".join(top + tables) + "\n"


def run_processes(workload: Workload, data_name: str, processes: int, rounds: int,
                  folder: Path) -> dict[str, Any]:
    """One run of `workload` on `processes` processes; its per-round time and bytes.

    Parameters
    ----------
    workload : the workload.
    data_name : the engine's dataset name.
    processes : ranks.
    rounds : rounds timed: the run has rounds + 2 rounds; the median wall_s is over all but
        its first and last.
    folder : where the config and run go.

    Returns
    -------
    dict, one row of the table.

    Raises
    ------
    ConfigError
        naming --nproc when the processes fail.
    """
    raw = workload_config(workload, "sgd", "vectorized", workload.num_nodes, "cpu",
                          data_name).to_dict()
    raw["rounds"] = rounds + 2
    raw["eval"] = {"every": rounds + 2}
    raw["engine"] = {**raw["engine"], "checkpoint_every": rounds + 2}
    config = folder / f"{workload.name}-{processes}.toml"
    config.write_text(toml_text(raw))
    out = folder / f"{workload.name}-{processes}"
    command = [sys.executable, "-m", "p2pfl", "run", str(config), "--out", str(out), "--quiet"]
    if processes > 1:
        command += ["--nproc", str(processes)]
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": str(
                              max(1, (os.cpu_count() or 1) // processes))})
    if done.returncode != 0:
        raise ConfigError("--nproc", f"{processes} processes failed: "
                          f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    timed = read_metrics(out / "metrics.jsonl")[1:-1]
    return {"workload": workload.name, "N": workload.num_nodes, "processes": processes,
            "s_per_round": statistics.median(r["wall_s"] for r in timed),
            "mixing_bytes": statistics.median(r.get("rank_bytes_mixing", 0) for r in timed),
            "collective_bytes": statistics.median(r.get("rank_bytes_collective", 0)
                                                  for r in timed)}


def scaleout(workload: Workload, data_name: str, nprocs: list[int],
             rounds: int) -> list[dict[str, Any]]:
    """The workload on each number of processes in `nprocs`, in one temporary folder.

    Parameters
    ----------
    workload : the workload.
    data_name : the engine's dataset name.
    nprocs : numbers of processes.
    rounds : rounds timed.

    Returns
    -------
    list of dict, one row per number of processes (vs_one: the speed-up over one process).
    """
    with tempfile.TemporaryDirectory(prefix="p2pfl-bench-") as folder:
        rows = [run_processes(workload, data_name, r, rounds, Path(folder)) for r in nprocs]
    base = next((r["s_per_round"] for r in rows if r["processes"] == 1), None)
    for row in rows:
        row["vs_one"] = base / row["s_per_round"] if base else None
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table.

    Parameters
    ----------
    rows : `scaleout`'s rows.

    Returns
    -------
    str.
    """
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        vs = f"{r['vs_one']:.2f}x" if r["vs_one"] else ""
        lines.append(f"| {r['workload']} | {r['N']} | {r['processes']} | "
                     f"{r['s_per_round']:.3f} | {vs} | {r['mixing_bytes'] / 1e6:.1f} | "
                     f"{r['collective_bytes'] / 1e6:.1f} |")
    return "\n".join(lines)
