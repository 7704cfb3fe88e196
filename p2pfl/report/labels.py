"""Short labels that tell run directories apart: the fewest trailing path parts that differ,
e.g. "ring/seed0" and "exponential/seed0" for runs/x/ring/seed0 and runs/x/exponential/seed0;
and other names to show them under (`--names` of `p2pfl plot` and `python -m analysis.across`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from p2pfl.config import ConfigError


def unique_paths(paths: Iterable[str | Path]) -> list[Path]:
    """The absolute form of each path (".." resolved, links kept), in order, each once.

    Parameters
    ----------
    paths : the paths.

    Returns
    -------
    list of Path.
    """
    seen: dict[Path, None] = {}
    for path in paths:
        seen.setdefault(Path(os.path.abspath(path)), None)
    return list(seen)


def suffix(path: Path, depth: int) -> str:
    """The last `depth` parts of an absolute path, joined by "/".

    Parameters
    ----------
    path : an absolute path.
    depth : parts kept.

    Returns
    -------
    str.
    """
    return "/".join(path.parts[1:][-depth:])


def separating_depth(groups: Sequence[Sequence[Path]]) -> int | None:
    """The fewest trailing parts at which no two groups of absolute paths share a suffix.

    Parameters
    ----------
    groups : groups of absolute paths.

    Returns
    -------
    int, or None if two groups share a path.
    """
    longest = max(len(path.parts) for group in groups for path in group)
    for depth in range(1, longest):
        suffixes = [{suffix(path, depth) for path in group} for group in groups]
        if sum(map(len, suffixes)) == len(set().union(*suffixes)):
            return depth
    return None


def distinct_labels(paths: Sequence[Path]) -> list[str]:
    """One label per path: its last parts, as many for every path as it takes to tell them apart.

    Parameters
    ----------
    paths : distinct absolute paths, as `unique_paths` gives.

    Returns
    -------
    list of str, one per path.

    Raises
    ------
    ValueError
        when two paths are the same.
    """
    depth = separating_depth([[path] for path in paths])
    if depth is None:
        raise ValueError("distinct_labels needs distinct paths")
    return [suffix(path, depth) for path in paths]


def parse_names(text: str, where: str = "--names") -> dict[str, str]:
    """Labels shown under other names (a paper's, say) in a table or a figure.

    A label not named keeps its own.

    Parameters
    ----------
    text : 'dfedavg=DFedAvg,osgp=OSGP'.
    where : the option's name, for the error.

    Returns
    -------
    dict, {'dfedavg': 'DFedAvg', 'osgp': 'OSGP'}.

    Raises
    ------
    ConfigError
        naming `where` for an item that is not label=name.
    """
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(p) != 2 or not p[0].strip() or not p[1].strip() for p in pairs):
        raise ConfigError(where, f"is a comma-separated list of label=name, got {text!r}")
    return {old.strip(): new.strip() for old, new in pairs}
