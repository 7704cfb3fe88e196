"""The rows of a comparison table: runs grouped by label, pooled only where their configs agree.

Runs that share a label but were run with configs that differ in more than the seed (and the
fields a resume may change, `RESUMABLE`) are not pooled: each config gets its own row, labelled by
the fewest trailing path parts that tell the folders apart ("a/ring", "b/ring").
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from p2pfl.config import ConfigError
from p2pfl.config.diff import RESUMABLE, config_diff
from p2pfl.report.labels import separating_depth, suffix
from p2pfl.report.runs import read_config, variant_dir
from p2pfl.report.summary import run_label

POOLED = ("seed", *RESUMABLE)  # fields in which the runs of one row may differ


def experiment(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config without the fields in which runs of one experiment may differ (POOLED).

    Parameters
    ----------
    config : a config dict, or None.

    Returns
    -------
    dict (a copy), or None.
    """
    if config is None:
        return None
    out = copy.deepcopy(config)
    for name in POOLED:
        *parents, leaf = name.split(".")
        node = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def split_by_config(runs: list[Path]) -> list[list[Path]]:
    """The runs in groups of equal experiment (config up to POOLED), in order of appearance.

    Parameters
    ----------
    runs : run directories.

    Returns
    -------
    list of groups (lists of Path).
    """
    groups: list[tuple[dict[str, Any] | None, list[Path]]] = []
    for run_dir in runs:
        key = experiment(read_config(run_dir))
        match = next((members for k, members in groups if k == key), None)
        if match is None:
            groups.append((key, [run_dir]))
        else:
            match.append(run_dir)
    return [members for _, members in groups]


def _differences(a: Path, b: Path) -> str:
    """The fields two runs' configs differ in (beyond POOLED), as one phrase."""
    old, new = experiment(read_config(a)), experiment(read_config(b))
    if old is None or new is None:
        return f"{(a if old is None else b).name} has no config.json"
    return ", ".join(config_diff(old, new))


def _shared_folder(groups: list[list[Path]]) -> tuple[Path, Path]:
    """Two runs of different groups whose folder (variant_dir) is the same."""
    home: dict[Path, tuple[int, Path]] = {}
    for i, group in enumerate(groups):
        for run_dir in group:
            home.setdefault(variant_dir(run_dir), (i, run_dir))
    return next((home[variant_dir(r)][1], r) for i, group in enumerate(groups) for r in group
                if home[variant_dir(r)][0] != i)


def _mixed_folder(groups: list[list[Path]]) -> ConfigError:
    """The error for a folder whose seed directories hold runs of different configs."""
    a, b = _shared_folder(groups)
    return ConfigError("runs", f"{a.parent} holds runs of different configs ({a.name} and "
                       f"{b.name} differ in {_differences(a, b)}); the seed folders of one "
                       "variant may differ only in the seed: move the others to their own folder")


def group_runs(runs: list[Path]) -> dict[str, list[Path]]:
    """The rows of the table.

    Runs that share a label pool when they differ only in POOLED fields; otherwise each config is
    one row, labelled by the fewest trailing path parts that tell the folders apart.

    Parameters
    ----------
    runs : run directories.

    Returns
    -------
    dict {label: run directories}.
    """
    by_label: dict[str, list[Path]] = {}
    for run_dir in runs:
        by_label.setdefault(run_label(run_dir), []).append(run_dir)
    rows: dict[str, list[Path]] = {}
    for label, members in by_label.items():
        groups = split_by_config(members) if len(members) > 1 else [members]
        if len(groups) == 1:
            rows[label] = members
            continue
        folders = [[variant_dir(r) for r in group] for group in groups]
        depth = separating_depth(folders)
        if depth is None:
            raise _mixed_folder(groups)
        for group, where in zip(groups, folders):
            rows[" + ".join(sorted({suffix(f, depth) for f in where}))] = group
    return rows
