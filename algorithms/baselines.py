"""An algorithm set back to a baseline: the values of its own options that turn its terms off
(a SAM radius of 0, a momentum of 0), and what it then computes.

Such a setting is allowed (an ablation runs it on purpose), and a run says so once in its log
(`Algorithm.baseline`), since the algorithm's name then no longer says what ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Baseline:
    """Values of an algorithm's options that turn its own terms off, and what it then is.

    options : option name -> the value that turns its term off; all of them must hold.
    computes : what the algorithm then computes, e.g. "DFedSGPM (no SAM ascent)".
    """

    options: Mapping[str, Any]
    computes: str


def settings(options: Mapping[str, Any]) -> str:
    """Option values as a config would write them, e.g. "rho = 0, variant = 'paper'".

    Parameters
    ----------
    options : option name -> value.

    Returns
    -------
    str.
    """
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v!r}"
                     for k, v in options.items())


def baseline_line(name: str, baselines: Sequence[Baseline], options: Any) -> str:
    """The line a run logs when `options` set algorithm `name` back to one of its baselines.

    Parameters
    ----------
    name : the algorithm's config name.
    baselines : its baselines, the most specific first (the first that holds is said).
    options : its options (an instance of its Options dataclass).

    Returns
    -------
    str, "<name> with <option> = <value>: it computes <what> (its default: <option> =
    <value>)"; "" when no baseline holds.
    """
    defaults = {f.name: f.default for f in dataclasses.fields(options)}
    for baseline in baselines:
        if all(getattr(options, k) == v for k, v in baseline.options.items()):
            own = settings({k: defaults[k] for k in baseline.options})
            return (f"{name} with {settings(baseline.options)}: it computes {baseline.computes} "
                    f"(its default: {own})")
    return ""
