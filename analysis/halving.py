"""Successive halving at equal simulated time: the short runs that check the design command's
predictions (analysis.design).

The full horizon H (simulated seconds) is cut into rungs (`rung_plan`): rung r runs each
candidate left for H_r = H / eta^(rungs - 1 - r) simulated seconds (ceil(H_r / its fastest
seed's round) rounds, at least the candidate's fewest: two evaluations and the rounds its
union graph takes to connect) on its first seeds (one more share of the seeds each rung, all of
them at the last). A later rung extends a candidate's runs (`analysis.study.run` extends a shorter
run), so it costs only its new rounds. After each rung the candidates are ranked (`order`): more
seeds at the target first, then fewer mean seconds to it, then a higher mean accuracy at H_r
(the last evaluation at or before it, else the first after); the best ceil(m / eta) go on, at
least 2 after a rung on one seed.
Without a target given, each rung has its own: 0.9 x the best mean accuracy at its horizon.
With a target given, it stops early when one is clearly best (`clearly_best`): on at least 2
seeds, every pair of its seed and another candidate's seed has it faster to the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

History = list[dict[str, Any]]


@dataclass
class Evidence:
    """A candidate's runs at the horizon of the last rung it ran: per seed, its accuracy at the
    horizon and its simulated seconds to the target (None: not reached, or not known yet)."""

    horizon_s: float
    seeds: list[int]
    accuracy: list[float | None]
    seconds: list[float | None]

    def reached(self) -> int:
        """Seeds that reached the target."""
        return sum(s is not None for s in self.seconds)

    def mean(self, key: str) -> float | None:
        """Mean over the seeds that have it, of "accuracy" or "seconds"."""
        values = [v for v in getattr(self, key) if v is not None]
        return float(np.mean(values)) if values else None


def _within(history: History, horizon: float) -> History:
    """The records up to simulated time `horizon` (1e-9 relative slack)."""
    return [r for r in history if r.get("sim_time_s", math.inf) <= horizon * (1 + 1e-9)]


def accuracy_at(history: History, horizon: float) -> float | None:
    """Test accuracy of the last evaluation at or before `horizon` simulated seconds, else of
    the first after it (a run's first evaluation may land just past a short horizon).

    Parameters
    ----------
    history : a run's records.
    horizon : seconds.

    Returns
    -------
    float, or None (no evaluation, or not finite: a run that diverged by then).
    """
    evaluated = [r for r in history if r.get("test_acc") is not None]
    accs = [r["test_acc"] for r in _within(evaluated, horizon)] or [
        r["test_acc"] for r in evaluated[:1]]
    return accs[-1] if accs and math.isfinite(accs[-1]) else None


def seconds_to(history: History, target: float, horizon: float) -> float | None:
    """Simulated seconds of the first evaluation at or above `target`, within `horizon`.

    Parameters
    ----------
    history : a run's records.
    target : a test accuracy.
    horizon : seconds.

    Returns
    -------
    float, or None if not reached.
    """
    return next((r["sim_time_s"] for r in _within(history, horizon)
                 if r.get("test_acc") is not None and r["test_acc"] >= target), None)


def evidence(histories: Mapping[int, History], horizon: float,
             target: float | None) -> Evidence:
    """One candidate's evidence from its runs.

    Parameters
    ----------
    histories : {seed: records}.
    horizon : the rung's seconds.
    target : a test accuracy, or None (no seconds).

    Returns
    -------
    Evidence.
    """
    seeds = sorted(histories)
    return Evidence(horizon, seeds, [accuracy_at(histories[s], horizon) for s in seeds],
                    [None if target is None else seconds_to(histories[s], target, horizon)
                     for s in seeds])


def _score(e: Evidence, i: int, target: bool) -> float:
    """Seed i's score, lower is better: seconds to the target (inf: not reached), or without a
    target minus the accuracy (inf: none)."""
    if target:
        return e.seconds[i] if e.seconds[i] is not None else math.inf
    return -e.accuracy[i] if e.accuracy[i] is not None else math.inf


def faster_share(a: Evidence, b: Evidence, target: bool) -> float:
    """The share of seed pairs (one of a, one of b) in which a is better: faster to the target
    (`target`), else more accurate at the horizon; a tie counts one half.

    Parameters
    ----------
    a, b : two candidates' evidence.
    target : compare seconds to the target (else accuracy).

    Returns
    -------
    float in [0, 1].
    """
    pairs = [(_score(a, i, target), _score(b, j, target)) for i in range(len(a.seeds))
             for j in range(len(b.seeds))]
    return float(np.mean([1.0 if x < y else 0.5 if x == y else 0.0 for x, y in pairs]))


def order(found: Mapping[str, Evidence], target: bool) -> list[str]:
    """The labels best first (module docstring): with a target, more seeds reaching it, then
    fewer mean seconds; then a higher mean accuracy at the horizon; ties in the given order.

    Parameters
    ----------
    found : {label: evidence}.
    target : whether the evidence has seconds to a target.

    Returns
    -------
    list of labels.
    """
    def key(label: str) -> tuple[float, float, float]:
        e = found[label]
        share = e.reached() / len(e.seeds) if target else 0.0
        seconds = e.mean("seconds") if target and e.reached() else math.inf
        accuracy = e.mean("accuracy")
        return (-share, seconds, -accuracy if accuracy is not None else math.inf)

    return sorted(found, key=key)


def clearly_best(found: Mapping[str, Evidence], ranked: Sequence[str], target: bool) -> bool:
    """Whether the first of `ranked` is clearly best: at least 2 seeds, all at the target, and
    better in every seed pair against each other candidate (of which there is at least one).

    Parameters
    ----------
    found : {label: evidence}.
    ranked : the labels, best first.
    target : whether the evidence has seconds to a target.

    Returns
    -------
    bool.
    """
    best = found[ranked[0]]
    if not target or len(ranked) < 2 or len(best.seeds) < 2 or best.reached() < len(best.seeds):
        return False
    return all(faster_share(best, found[other], True) == 1.0 for other in ranked[1:])


def rung_plan(horizon: float, rungs: int, eta: int, seeds: Sequence[int], least: float = 0.0
              ) -> list[tuple[float, list[int]]]:
    """Each rung's horizon and seeds.

    Parameters
    ----------
    horizon : H, the last rung's seconds.
    rungs : how many.
    eta : the horizon grows eta times a rung (and eta times fewer candidates go on).
    seeds : all seeds (the last rung's).
    least : the shortest horizon of a rung, seconds (the first rounds of decentralized SGD
        barely tell graphs apart: the average model moves alike on all of them).

    Returns
    -------
    list of (seconds, seeds), first rung first.
    """
    return [(min(max(horizon / eta ** (rungs - 1 - r), least), max(horizon, least)),
             list(seeds[:max(1, math.ceil(len(seeds) * (r + 1) / rungs))])) for r in range(rungs)]


def rounds_to(horizon: float, round_s: float) -> int:
    """Rounds of `round_s` seconds that reach `horizon` seconds (at least 1).

    Parameters
    ----------
    horizon : seconds.
    round_s : seconds a round.

    Returns
    -------
    int.
    """
    return max(1, math.ceil(horizon / round_s * (1 - 1e-12)))


def run_rungs(plan: Sequence[tuple[float, list[int]]], entries: Mapping[str, Any],
              fastest_round: Mapping[str, float], eta: int, min_rounds: Mapping[str, int],
              study: Callable[[dict[str, Any], list[int]], dict[tuple[str, int], History]],
              target: float | None, echo: Callable[[str], None]
              ) -> tuple[dict[str, Evidence], dict[tuple[str, int], History], list[dict[str, Any]],
                         bool]:
    """Successive halving over the rungs of `plan` (module docstring).

    Parameters
    ----------
    plan : `rung_plan`'s rungs.
    entries : {label: analysis.study_spec.Entry}, best predicted first.
    fastest_round : {label: seconds of its fastest seed's round}.
    eta : the share of candidates kept is 1 / eta (at least 1).
    min_rounds : {label: the fewest rounds its run has} (a rung's horizon may hold fewer:
        evaluations and a time-varying topology's connectivity need some).
    study : runs {label: Entry with its rounds} on seeds; returns {(label, seed): records}.
    target : a test accuracy; None: each rung's own, 0.9 of the best mean accuracy
        at its horizon (`final_target`).
    echo : prints one line per rung.

    Returns
    -------
    tuple (each candidate's evidence at the last rung it ran, every history, the rungs' records,
    whether a rung found one clearly best at the given target: before the last rung, the
    halving stops there).
    """
    alive = list(entries)
    found: dict[str, Evidence] = {}
    histories: dict[tuple[str, int], History] = {}
    rungs: list[dict[str, Any]] = []
    for r, (horizon, seeds) in enumerate(plan):
        rounds = {label: max(min_rounds[label], rounds_to(horizon, fastest_round[label]))
                  for label in alive}
        cells = {label: replace(entries[label], overrides={**entries[label].overrides,
                                                           "rounds": rounds[label]})
                 for label in alive}
        histories.update(study(cells, seeds))
        runs = {label: {s: histories.get((label, s), []) for s in seeds} for label in alive}
        goal = target if target is not None else final_target(
            {label: evidence(runs[label], horizon, None) for label in alive}, alive, None)[0]
        known = math.isfinite(goal)
        for label in alive:
            found[label] = evidence(runs[label], horizon, goal if known else None)
        ranked = order({label: found[label] for label in alive}, known)
        last = r == len(plan) - 1
        clear = r > 0 and target is not None and clearly_best(found, ranked, known)
        # a rung on one seed leaves at least two: one seed never decides alone
        count = max(math.ceil(len(ranked) / eta), 2 if len(seeds) < 2 else 1)
        kept = ranked if last or clear else ranked[:count]
        rungs.append({"horizon_s": horizon, "seeds": seeds, "rounds": rounds, "ranked": ranked,
                      "kept": kept, "target": goal if known else None})
        many = "s" if len(seeds) != 1 else ""
        echo(f"design: rung {r + 1}/{len(plan)}: {len(alive)} candidate(s) x {len(seeds)} "
             f"seed{many}"
             f" to {horizon:.4g} simulated s; best {ranked[0]}"
             + ("; clearly best, stopping" if clear and not last else ""))
        alive = kept
        if clear:
            return found, histories, rungs, True
    return found, histories, rungs, False


def final_target(found: Mapping[str, Evidence], last: Sequence[str], target: float | None
                 ) -> tuple[float, str]:
    """The design's target: the one given, else 0.9 of the best mean accuracy at the
    horizon over the last rung's candidates, floored to 0.01 %.

    Parameters
    ----------
    found : {label: evidence}.
    last : the last rung's candidates.
    target : the given accuracy, or None.

    Returns
    -------
    tuple (accuracy, how it was chosen).
    """
    from analysis.study import TARGET_FRACTION, share_of_best

    if target is not None:
        return target, f"{100 * target:.2f} % test accuracy (given)"
    means = {label: found[label].mean("accuracy") for label in last}
    best = max((label for label in last if means[label] is not None), key=lambda k: means[k],
               default=None)
    if best is None:
        return math.inf, "none: no run of the last rung was evaluated"
    value = share_of_best(means[best])
    return value, (f"{100 * value:.2f} % test accuracy = {TARGET_FRACTION:g} x "
                   f"{100 * means[best]:.2f} %, the best mean accuracy at the horizon ({best})")


def rescore(found: Mapping[str, Evidence], histories: Mapping[tuple[str, int], History],
            target: float) -> None:
    """Set each candidate's seconds to `target` (inf: none) at its own horizon, in place.

    Parameters
    ----------
    found : {label: evidence}.
    histories : {(label, seed): records}.
    target : a test accuracy, or inf (nothing reached).
    """
    for label, e in found.items():
        e.seconds = [seconds_to(histories.get((label, s), []), target, e.horizon_s)
                     if math.isfinite(target) else None for s in e.seeds]


def final_ranking(rungs: Sequence[Mapping[str, Any]], found: Mapping[str, Evidence],
                  target: bool) -> list[str]:
    """Every candidate that ran, best first: the last rung's in `order`, then those each earlier
    rung left behind, in that rung's order (the later the rung, the earlier in the list).

    Parameters
    ----------
    rungs : the rungs' records (`ranked`, `kept`), first rung first.
    found : {label: evidence}.
    target : whether the evidence has seconds to a target.

    Returns
    -------
    list of labels.
    """
    ranked = order({k: found[k] for k in rungs[-1]["ranked"]}, target)
    for rung in reversed(rungs[:-1]):
        ranked += [k for k in rung["ranked"] if k not in rung["kept"]]
    return ranked


def pick_against_runner_up(rungs: Sequence[Mapping[str, Any]], ranked: Sequence[str],
                           histories: Mapping[tuple[str, int], History], clear: bool
                           ) -> dict[str, Any]:
    """The pick (ranked[0]) against the best other candidate of the deepest rung that ran two or
    more, on that rung's seeds and horizon and at that rung's target (the one that decided;
    their accuracy at the horizon where neither reached it): the share of seed pairs it is
    better in (`faster_share`), and whether it is clearly best there (`clearly_best`; or
    `clear`, the halving's own finding).

    Parameters
    ----------
    rungs : the rungs' records, first rung first.
    ranked : every candidate that ran, best first.
    histories : {(label, seed): records}.
    clear : whether the halving found the pick clearly best.

    Returns
    -------
    dict: runner_up (None where no rung ran two), horizon_s, seeds, target (None: accuracy
    compared), confidence, clearly_best.
    """
    deepest = next((r for r in reversed(rungs) if len(r["ranked"]) > 1), None)
    if deepest is None:
        return {"runner_up": None, "horizon_s": None, "seeds": [], "target": None,
                "confidence": None, "clearly_best": clear}
    target = deepest["target"]
    at = {k: evidence({s: histories.get((k, s), []) for s in deepest["seeds"]},
                      deepest["horizon_s"], target) for k in deepest["ranked"]}
    pick = ranked[0]
    others = [k for k in ranked if k in at and k != pick]
    if target is not None and at[pick].reached() + at[others[0]].reached() == 0:
        target = None  # neither reached it there: their accuracy at the horizon decided
        at = {k: evidence({s: histories.get((k, s), []) for s in deepest["seeds"]},
                          deepest["horizon_s"], None) for k in deepest["ranked"]}
    reached = target is not None
    return {"runner_up": others[0], "horizon_s": deepest["horizon_s"],
            "seeds": list(deepest["seeds"]), "target": target,
            "confidence": faster_share(at[pick], at[others[0]], reached),
            "clearly_best": clear or clearly_best(at, [pick, *others], reached)}
