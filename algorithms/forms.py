"""Which decentralized algorithms compute the same round: the round forms they share.

Two forms are shared by a Gossip algorithm and a Push-Sum one:

- "local steps, then mix": K steps of the shared local solver (SGD, heavy-ball momentum, SAM),
  then one mixing of the models. Gossip mixes with W = `doubly_stochastic(G)`; Push-Sum mixes
  (x, w) with P = `column_stochastic(G)` and steps by lr / w_i at z = x / w. DFedAvg, D-PSGD in
  its adapt-then-combine form, DFedAvgM, DFedSAM (and DFedSAM-MGS with one gossip step) on one
  side; SGP, OSGP, DFedSGPM, DFedSGPSM on the other.
- "gradient tracking, adapt then combine": DSGT (`order = "atc"`, its paper's) with W, Push-DIGing
  with P (x, the weights and the trackers mixed after the local phase).

With the same options (the same step size, steps, momentum, SAM radius, ...), two algorithms of
one form and one round kind run the same code on the same matrix. A Gossip and a Push-Sum
algorithm of one form compute the same round where P = W: W is doubly stochastic, so P w = w
keeps every Push-Sum weight at 1, the step lr / w is lr, z = x, and P diag(w) = W (a regular
undirected graph with the uniform push split, which Metropolis-Hastings weights are there). The
caller checks that condition on every round's graph (analysis.study_same).

A class counts only if it, and every class between it and its form's class, defines nothing but
its name, source, Options, forms and the check of its options: a subclass that overrides a step
computes another round.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from algorithms.base import Algorithm
from algorithms.decentralized import Gossip, PushSum
from algorithms.dfedsgpsm import DFedSGPSM
from algorithms.dpsgd import DPSGD
from algorithms.dsgt import DSGT
from algorithms.options import Robust
from algorithms.push_diging import PushDIGing
from p2pfl.options import AlgorithmOptions

LOCAL_THEN_MIX = "local steps, then mix"
TRACKING_ATC = "gradient tracking, adapt then combine"

# (class, the options it must have, its form, whether it mixes by Push-Sum); the first class of
# an algorithm's MRO found here decides (D-PSGD's combine-then-adapt form has none)
FORMS: tuple[tuple[type[Algorithm], dict[str, Any], str, bool], ...] = (
    (DPSGD, {"order": "atc"}, LOCAL_THEN_MIX, False),
    (DSGT, {"order": "atc"}, TRACKING_ATC, False),
    (PushDIGing, {}, TRACKING_ATC, True),
    (DFedSGPSM, {}, LOCAL_THEN_MIX, True),  # its round, written out, is PushSum's
    (Gossip, {}, LOCAL_THEN_MIX, False),
    (PushSum, {}, LOCAL_THEN_MIX, True),
)

# The options the round kinds read with these values where an algorithm does not declare them
# (the getattr defaults of algorithms/base.py and algorithms/decentralized.py).
ABSENT = {"momentum": 0.0, "momentum_form": "heavy_ball", "rho": 0.0, "gossip_steps": 1,
          "clique_averaging": False, "persistent_momentum": 0.0,
          **{f.name: f.default for f in dataclasses.fields(Robust)}}  # plain gossip: "mean"

# What a class may define and still run its parent's round.
METADATA = frozenset({"name", "source", "Options", "variants", "default_variant", "form_options",
                      "orders", "paper_order", "baselines",  # what it takes, not how it runs
                      "check_options",
                      "__module__", "__qualname__", "__doc__", "__annotations__",
                      "__abstractmethods__", "_abc_impl", "__firstlineno__",
                      "__static_attributes__", "__dict__", "__weakref__"})


@dataclass(frozen=True)
class RoundForm:
    """The round an algorithm computes: its form, whether it mixes by Push-Sum, and the options
    that decide it (name -> value, sorted; the form's own options left out)."""

    form: str
    push_sum: bool
    options: tuple[tuple[str, Any], ...]

    def same_options(self, other: RoundForm) -> bool:
        """Whether `other` is the same form with the same options (the round is then the same
        computation for the same graph, or, across round kinds, where P = W)."""
        return (self.form, self.options) == (other.form, other.options)


def round_form(cls: type[Algorithm], options: AlgorithmOptions) -> RoundForm | None:
    """The round form of algorithm `cls` configured by `options`.

    Parameters
    ----------
    cls : an Algorithm class.
    options : its options.

    Returns
    -------
    RoundForm, or None if it has none here (a centralized or another decentralized round, a form
    whose options differ, or a class that defines a method of its own).
    """
    for klass in cls.__mro__:
        for form_class, required, form, push_sum in FORMS:
            if klass is form_class:
                if any(_resolved(form_class, options, k) != v for k, v in required.items()):
                    return None
                fields = {**ABSENT, **dataclasses.asdict(options)}
                kept = {k: v for k, v in fields.items() if k != "name" and k not in required}
                return RoundForm(form, push_sum, tuple(sorted(kept.items())))
        if set(vars(klass)) - METADATA:
            return None
    return None


def _resolved(cls: type[Algorithm], options: AlgorithmOptions, key: str) -> Any:
    """The value of option `key` as algorithm `cls` runs it ("" order: its paper's)."""
    value = getattr(options, key, None)
    return cls.paper_order if key == "order" and value == "" else value
