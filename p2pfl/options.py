"""An algorithm's options: one dataclass per algorithm, each field with its default, limits and doc.

The `[algorithm]` table of a config is read into the options class of the algorithm it names
(`Algorithm.Options`, a subclass of `AlgorithmOptions`). A field is declared once, with `option`:

    @dataclass
    class Options(FedAvg.Options):
        prox_mu: float = option(0.01, low=0, doc="proximal coefficient mu")

and its limits are checked when a config is loaded (`check_values`, which raises
topologies.ParameterError naming the field), so a new hyperparameter is a change to the
algorithm's own module only. The config's own sections declare their bounded fields with
`option` too.

A default taken from a paper names its source (`option(..., source=...)`). An option group that
several algorithms share (algorithms/options.py) keeps one default, the `common_default` that an
algorithm not reading the field leaves it at; an algorithm whose paper runs another value
declares it with `paper_default`, so that a config naming the algorithm alone runs the paper's
setting (`p2pfl algorithms` lists each default with its source).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from topologies import ParameterError

__all__ = ["VARIANTS", "AlgorithmOptions", "check_number", "check_values", "common_default",
           "default_source", "field_types", "option", "paper_default"]

VARIANTS = ("paper", "reference_code")


def option(default: Any, *, low: float | None = None, high: float | None = None,
          low_open: bool = False, high_open: bool = False, choices: tuple[str, ...] = (),
          doc: str = "", source: str = "") -> Any:
    """A dataclass field with its limits.

    Parameters
    ----------
    default : the field's default.
    low, high : the number's bounds; None is unbounded.
    low_open, high_open : whether that end is excluded.
    choices : the allowed strings (empty: any).
    doc : the field's help.
    source : where the default comes from (a paper, its table or section); "" for the engine's
        own choice.

    Returns
    -------
    dataclasses.Field with the limits in its metadata.
    """
    meta = {"low": low, "high": high, "low_open": low_open, "high_open": high_open,
            "choices": choices, "doc": doc}
    return field(default=default, metadata=meta | ({"source": source} if source else {}))


def paper_default(group: type, name: str, value: Any, source: str) -> Any:
    """Field `name` of the option group `group` with the default of an algorithm's paper.

    The field keeps the group's limits and doc; the group's own default stays its
    `common_default`, the value an algorithm that does not read the field leaves it at.

    Parameters
    ----------
    group : a dataclass of options (algorithms/options.py) that declares `name`.
    name : the field.
    value : the paper's value, the field's default for the algorithm declaring it so.
    source : where `value` comes from (paper, table or section).

    Returns
    -------
    dataclasses.Field, to assign to `name` in the algorithm's Options.
    """
    shared = next(f for f in dataclasses.fields(group) if f.name == name)
    return field(default=value, metadata={**shared.metadata, "source": source,
                                          "common": common_default(shared)})


def common_default(f: dataclasses.Field) -> Any:
    """The default of an option field that every algorithm declaring it shares: the field's own
    default, or the group's where an algorithm's paper sets another (`paper_default`).

    Parameters
    ----------
    f : a field of an options dataclass.

    Returns
    -------
    the value.
    """
    return f.metadata.get("common", f.default)


def default_source(f: dataclasses.Field) -> str:
    """Where the default of an option field comes from ("" for the engine's own choice).

    Parameters
    ----------
    f : a field of an options dataclass.

    Returns
    -------
    str.
    """
    return f.metadata.get("source", "")


def check_number(value: float, low: float | None, high: float | None, low_open: bool = False,
                 high_open: bool = False) -> str:
    """Why `value` is outside [low, high] (ends excluded when open).

    Parameters
    ----------
    value : the number.
    low, high : bounds, None for unbounded.
    low_open, high_open : whether that end is excluded.

    Returns
    -------
    str, the reason ("must be finite ..." or "... is out of range [low, high]"); "" when inside.
    """
    if not math.isfinite(value):
        return f"must be finite, got {value!r}"
    too_low = low is not None and (value < low or (value == low and low_open))
    too_high = high is not None and (value > high or (value == high and high_open))
    if not (too_low or too_high):
        return ""
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    interval = f"{'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"
    return f"{value!r} is out of range {interval}"


def check_values(values: Any) -> None:
    """Check every field of a dataclass against the limits `option` declared for it.

    Parameters
    ----------
    values : an options dataclass instance.

    Raises
    ------
    ParameterError
        naming the first field outside its choices or range.
    """
    for f in dataclasses.fields(values):
        meta, value = f.metadata, getattr(values, f.name)
        if meta.get("choices") and value not in meta["choices"]:
            shown = (str(c) if c != "" else "''" for c in meta["choices"])
            raise ParameterError(f.name, f"unknown value {value!r} (allowed: "
                                 f"{', '.join(shown)})")
        if isinstance(value, int | float) and not isinstance(value, bool) and "low" in meta:
            why = check_number(value, meta["low"], meta["high"], meta["low_open"],
                               meta["high_open"])
            if why:
                raise ParameterError(f.name, why)


def field_types(cls: type) -> dict[str, type]:
    """Field name -> type of an options dataclass (annotations resolved).

    Parameters
    ----------
    cls : an options dataclass.

    Returns
    -------
    dict {field name: type}.
    """
    return {k: v for k, v in get_type_hints(cls).items()
            if k in {f.name for f in dataclasses.fields(cls)}}


@dataclass
class AlgorithmOptions:
    """The fields every algorithm reads."""

    name: str = option("osgp", doc="the algorithm")
    lr: float = option(0.1, low=0, low_open=True, doc="local learning rate")
    lr_decay: float = option(0.998, low=0, high=1, low_open=True,
                             doc="factor on the learning rate per round")
    local_epochs: int = option(5, low=0, doc="local epochs per round (0: use local_steps)")
    local_steps: int = option(0, low=0, doc="local steps per round (0: use local_epochs)")
    batch_size: int = option(128, low=1, doc="local minibatch size")
    last_batch: str = option("keep", choices=("keep", "drop"),
                             doc="an epoch's last, partial batch: a step (keep) or unused (drop)")
    weight_decay: float = option(0.0, low=0, doc="L2 coefficient added to the gradient")
    clip_norm: float = option(0.0, low=0, doc="clip each local gradient to this norm (0: off)")
    variant: str = option("", choices=("", *VARIANTS),
                          doc="paper | reference_code form; '' = the algorithm's default form")
