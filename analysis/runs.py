"""Finished (or running) runs as one table a researcher plots with anything: one row per run and
round, with the run's algorithm, topology, seed, the topology's diameter and spectral gap per
round, its metrics and every config field.

    import analysis as A, seaborn as sns
    df = A.load_runs(["runs/study_grid"])               # a pandas.DataFrame
    sns.lineplot(df, x="round", y="test_acc", hue="algorithm", style="topology")

A run of a study (`p2pfl study`, analysis.study) takes its algorithm, topology, diameter and
spectral gap per round from the study's study.csv (`spectral_gap` in one written before
the gap was named per round): the study's labels ("exponential:directed=false", a
topology object's label) and what the study measured; a cell the study ran once for another
(`same_as` in study.csv) gets that run's rows under its own algorithm and topology, `same_as`
naming the cell that ran (its config fields are that run's). Other runs: the config's algorithm
and topology names, the topology measured as the study measures it.

`run_records` gives the same rows as dicts without pandas (an optional extra:
`pip install pandas`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIRST = ("run_dir", "algorithm", "topology", "num_nodes", "seed", "same_as", "diameter",
         "spectral_gap_per_round", "round")  # the leading columns; metrics follow, then every
# config field "table.key"
STUDY_DEPTH = 3  # a study's run is OUT/<algorithm>/<label>/seed<k>, or OUT/<label>/seed<k>
Row = dict[str, str]


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'algorithm': {'lr': 0.1}} -> {'algorithm.lr': 0.1} (lists such as [[compare]] left out)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def _number(text: str) -> int | float | None:
    """A study.csv number: '' -> None, '3' -> 3, 'inf' -> inf, '0.25' -> 0.25."""
    if not text:
        return None
    return int(text) if text.lstrip("-").isdigit() else float(text)


class Studies:
    """The study.csv rows that runs belong to, each study read once: a run's row is the one
    whose run_dir ends with the run's path below the study's folder."""

    def __init__(self) -> None:
        # folder -> (parts of a run below it, count) -> (the row that ran, rows that reuse it)
        self.index: dict[Path, dict[tuple[str, ...], tuple[Row | None, list[Row]]]] = {}

    def _read(self, folder: Path) -> dict[tuple[str, ...], tuple[Row | None, list[Row]]]:
        if folder not in self.index:
            index: dict[tuple[str, ...], tuple[Row | None, list[Row]]] = {}
            path = folder / "study.csv"
            rows = list(csv.DictReader(path.open(newline=""))) if path.is_file() else []
            for row in rows:
                parts = Path(row.get("run_dir") or "").parts
                for depth in (2, STUDY_DEPTH):
                    ran, reused = index.get(parts[-depth:], (None, []))
                    if row.get("same_as"):
                        index[parts[-depth:]] = (ran, [*reused, row])
                    else:
                        index[parts[-depth:]] = (row, reused)
            self.index[folder] = index
        return self.index[folder]

    def find(self, run_dir: Path) -> tuple[Row, list[Row]] | None:
        """(the study.csv row of `run_dir`, the rows of the cells that reused it), from the
        nearest study folder above it; None for a run of no study."""
        for folder in list(run_dir.parents)[:STUDY_DEPTH]:
            ran, reused = self._read(folder).get(run_dir.relative_to(folder).parts, (None, []))
            if ran is not None:
                return ran, reused
        return None


def topology_metrics(config: dict[str, Any]) -> dict[str, Any]:
    """Diameter, spectral gap per round and kind of the topology that the run of `config` used.

    Measured as the study measures it.

    Parameters
    ----------
    config : a run's config.json, as a dict.

    Returns
    -------
    dict with diameter, spectral_gap_per_round and kind; None for each where the topology cannot
    be rebuilt (a topology given as an object, a config of another version) or the algorithm
    cannot use it.
    """
    from analysis.study_measure import measure
    from p2pfl.config import ConfigError, config_from_dict

    empty = {"diameter": None, "spectral_gap_per_round": None, "kind": None}
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


def _study_info(row: Row) -> dict[str, Any]:
    """The columns a study.csv row gives a run."""
    return {"algorithm": row["algorithm"], "topology": row["label"],
            "seed": _number(row["seed"]), "diameter": _number(row["diameter"]),
            "spectral_gap_per_round": _number(row.get("spectral_gap_per_round",
                                                      row.get("spectral_gap", ""))),
            "same_as": row.get("same_as") or None}


def run_records(paths: Sequence[str | Path], measure: bool = True) -> list[dict[str, Any]]:
    """One dict per run and round of every run directory at or below `paths`.

    Columns: FIRST, then the round's metrics, then the run's config fields as "table.key"; also
    the rows of every study cell that reused one of them (module docstring).

    Parameters
    ----------
    paths : run directories or folders holding them.
    measure : measure the topology of a run that belongs to no study (one measurement per
        distinct topology).

    Returns
    -------
    list of dict.
    """
    from p2pfl.report.results import read_metrics
    from p2pfl.report.runs import read_config
    from p2pfl.report.summary import find_runs

    measured: dict[str, dict[str, Any]] = {}
    studies = Studies()
    rows = []
    for run_dir in find_runs(list(paths)):
        config = read_config(run_dir) or {}
        fields = _flat(config)
        info = {"run_dir": str(run_dir), "algorithm": fields.get("algorithm.name"),
                "topology": fields.get("topology.name"),
                "num_nodes": fields.get("data.num_nodes"), "seed": fields.get("seed"),
                "same_as": None, "diameter": None, "spectral_gap_per_round": None}
        study = studies.find(run_dir)
        reused: list[Row] = []
        if study is not None:
            info |= _study_info(study[0])
            reused = study[1]
        elif measure and config:
            key = json.dumps({k: config.get(k) for k in ("topology", "seed", "rounds")}
                             | {"nodes": info["num_nodes"], "algorithm": info["algorithm"]},
                             sort_keys=True, default=str)
            if key not in measured:
                measured[key] = topology_metrics(config)
            info |= {k: measured[key][k] for k in ("diameter", "spectral_gap_per_round")}
        records = read_metrics(run_dir / "metrics.jsonl")
        for cell in [info, *(info | _study_info(row) for row in reused)]:
            for record in records:
                rows.append(cell | record | {k: v for k, v in fields.items() if k not in cell})
    return rows


def load_runs(paths: str | Path | Sequence[str | Path], measure: bool = True) -> Any:
    """`run_records` as a pandas.DataFrame: one row per run x round (see the module docstring).

    Parameters
    ----------
    paths : a run directory or folder, or several.
    measure : as in `run_records`.

    Returns
    -------
    pandas.DataFrame.

    Raises
    ------
    ImportError
        without pandas.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_runs needs pandas (pip install pandas); run_records gives the "
                          "same rows as dicts") from None
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    rows = run_records(paths, measure)
    columns = list(dict.fromkeys([*FIRST, *(k for row in rows for k in row)]))
    return pd.DataFrame(rows, columns=columns)
