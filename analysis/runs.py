"""Finished (or running) runs as one table a researcher plots with anything: one row per run and
round, with the run's algorithm, topology, seed, the topology's diameter and spectral gap, its
metrics and every config field.

    import analysis as A, seaborn as sns
    df = A.load_runs(["runs/study_grid"])               # a pandas.DataFrame
    sns.lineplot(df, x="round", y="test_acc", hue="algorithm", style="topology")

`run_records` gives the same rows as dicts without pandas (an optional extra:
`pip install pandas`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIRST = ("run_dir", "algorithm", "topology", "num_nodes", "seed", "diameter", "spectral_gap",
         "round")  # the leading columns; metrics follow, then every config field "table.key"


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'algorithm': {'lr': 0.1}} -> {'algorithm.lr': 0.1} (lists such as [[compare]] left out)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def topology_metrics(config: dict[str, Any]) -> dict[str, Any]:
    """Diameter, spectral gap and kind of the topology that the run of `config` (a config.json)
    used, measured as the study measures it; None for each where it cannot be rebuilt (a
    topology given as an object, a config of another version) or the algorithm cannot use it."""
    from analysis.study import measure
    from p2pfl.config import ConfigError, config_from_dict

    empty = {"diameter": None, "spectral_gap": None, "kind": None}
    if config.get("topology", {}).get("name") == "object":
        return empty
    try:
        measured = measure(config_from_dict({k: v for k, v in config.items() if k != "compare"}),
                           None)
    except (ConfigError, ValueError):  # a config.json this version does not read
        return empty
    if isinstance(measured, str):
        return empty
    return {k: measured.get(k) for k in empty}


def run_records(paths: Sequence[str | Path], measure: bool = True) -> list[dict[str, Any]]:
    """One dict per run and round of every run directory at or below `paths` (columns: FIRST,
    then the round's metrics, then the run's config fields as "table.key"). `measure`: add the
    topology's diameter and spectral gap (one measurement per distinct topology)."""
    from p2pfl.report.results import read_metrics
    from p2pfl.report.table import find_runs, read_config

    measured: dict[str, dict[str, Any]] = {}
    rows = []
    for run_dir in find_runs(list(paths)):
        config = read_config(run_dir) or {}
        fields = _flat(config)
        info = {"run_dir": str(run_dir), "algorithm": fields.get("algorithm.name"),
                "topology": fields.get("topology.name"),
                "num_nodes": fields.get("data.num_nodes"), "seed": fields.get("seed"),
                "diameter": None, "spectral_gap": None}
        if measure and config:
            key = json.dumps({k: config.get(k) for k in ("topology", "seed", "rounds")}
                             | {"nodes": info["num_nodes"], "algorithm": info["algorithm"]},
                             sort_keys=True, default=str)
            if key not in measured:
                measured[key] = topology_metrics(config)
            info |= {k: measured[key][k] for k in ("diameter", "spectral_gap")}
        for record in read_metrics(run_dir / "metrics.jsonl"):
            rows.append(info | record | {k: v for k, v in fields.items() if k not in info})
    return rows


def load_runs(paths: str | Path | Sequence[str | Path], measure: bool = True) -> Any:
    """`run_records` as a pandas.DataFrame: one row per run x round (see the module docstring)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_runs needs pandas (pip install pandas); run_records gives the "
                          "same rows as dicts") from None
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    rows = run_records(paths, measure)
    columns = list(dict.fromkeys([*FIRST, *(k for row in rows for k in row)]))
    return pd.DataFrame(rows, columns=columns)
