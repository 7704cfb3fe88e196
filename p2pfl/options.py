"""An algorithm's options: one dataclass per algorithm, each field with its default, limits and doc.

The `[algorithm]` table of a config is read into the options class of the algorithm it names
(`Algorithm.Options`, a subclass of `AlgorithmOptions`). A field is declared once, with `option`:

    @dataclass
    class Options(FedAvg.Options):
        prox_mu: float = option(0.01, low=0, doc="proximal coefficient mu")

and its limits are checked when a config is loaded (`check_values`, which raises
topologies.ParameterError naming the field), so a new hyperparameter is a change to the
algorithm's own module only. `option` is `topologies.params.param`: topology parameters are
declared the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import get_type_hints

from topologies.params import check_values
from topologies.params import param as option

__all__ = ["VARIANTS", "AlgorithmOptions", "check_values", "field_types", "option"]

VARIANTS = ("paper", "reference_code")


def field_types(cls: type) -> dict[str, type]:
    """Field name -> type of an options dataclass (annotations resolved)."""
    return {k: v for k, v in get_type_hints(cls).items()
            if k in {f.name for f in dataclasses.fields(cls)}}


@dataclass
class AlgorithmOptions:
    """The fields every algorithm reads."""

    name: str = option("sgp", doc="the algorithm")
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
