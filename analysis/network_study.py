"""The network-time study: a [[compare]] config with [network] enabled, run at several slow
fractions (the share of slow links and of stragglers), summarized as accuracy against simulated
time and seconds to a target accuracy against the slow fraction.

    python -m analysis.network_study configs/network_study.toml --out runs/network \\
        [--vary slow_links,stragglers] [--fractions 0,0.1,0.2,0.4] [--target 0.75] \\
        [--set network.stragglers=0] [--figure docs/figures/network_study.png]

Each fraction's runs go to OUT/<varied fields>-<fraction>/<variant>/seed<k>/; a rerun continues
what is there.
Prints a Markdown table (one row per variant, seconds to target and simulated seconds per round
at each fraction) and writes the figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from analysis.study import rounds_to_target
from p2pfl.report.figures import plt, save, series_style

History = list[dict[str, Any]]


VARIED = ("slow_links", "stragglers")  # the [network] fractions a study can vary


def run_fractions(cfg: Any, out: Path, fractions: list[float], vary: tuple[str, ...] = VARIED,
                  progress: bool = False) -> dict[float, dict[str, History]]:
    """The config's variants with each [network] field in `vary` set to each fraction (the others as
    configured).

    Parameters
    ----------
    cfg : a [[compare]] config with [network] enabled.
    out : the output folder (a subfolder per fraction).
    fractions : the values given to the varied fields.
    vary : the [network] fields varied (slow_links, stragglers).
    progress : whether to draw progress bars.

    Returns
    -------
    dict {fraction: {variant label: history}}.
    """
    from p2pfl.config import with_overrides
    from p2pfl.engine import run_compare

    results = {}
    for fraction in fractions:
        where = out / f"{'+'.join(vary)}-{fraction:g}"
        overrides = {f"network.{field}": fraction for field in vary}
        results[fraction] = run_compare(with_overrides(cfg, overrides), where, progress=progress,
                                        resume=(where / "config.json").exists())
    return results


def seconds_to(history: History, target: float) -> float | None:
    """Simulated seconds at the first evaluation reaching `target` test accuracy.

    Parameters
    ----------
    history : a run's metric records.
    target : test accuracy in (0, 1].

    Returns
    -------
    float, or None if never reached.
    """
    return rounds_to_target(history, target, "sim_time_s")


def table(results: dict[float, dict[str, History]], target: float, shown: float) -> str:
    """Markdown: per variant, the final accuracy and simulated seconds per round at fraction
    `shown`, and the simulated seconds to `target` at each fraction.

    Parameters
    ----------
    results : {fraction: {variant label: history}}.
    target : test accuracy in (0, 1].
    shown : the fraction of the first columns.

    Returns
    -------
    str.
    """
    fractions = sorted(results)
    reach_heads = " | ".join(f"s to {target:.0%} @ {f:g}" for f in fractions)
    lines = [f"| variant | final acc @ {shown:g} | s/round @ {shown:g} | {reach_heads} |",
             "|---" * (3 + len(fractions)) + "|"]
    for label, history in results[shown].items():
        reach = [seconds_to(results[f][label], target) for f in fractions]
        cells = " | ".join("not reached" if s is None else f"{s:.1f}" for s in reach)
        lines.append(f"| {label} | {100 * history[-1]['test_acc']:.1f} % | "
                     f"{history[-1]['sim_time_s'] / len(history):.2f} | {cells} |")
    return "\n".join(lines) + "\n"


def figure(results: dict[float, dict[str, History]], target: float, shown: float,
           path: Path, varied: str = "slow links and stragglers",
           title: str = "") -> list[Path]:
    """Test accuracy against simulated time at fraction `shown` (left), and seconds to `target`
    against the slow fraction (right).

    A variant that never reaches the target is left out of the right panel. One legend below both
    panels.

    Parameters
    ----------
    results : {fraction: {variant label: history}}.
    target : test accuracy in (0, 1].
    shown : the fraction of the left panel.
    path : the figure's path (PNG; a PDF beside it).
    varied : what the fraction sets, for the x axis.
    title : above the panels.

    Returns
    -------
    list of the Paths written.
    """
    fractions = sorted(results)
    fig, axes = plt.subplots(1, 2 if len(fractions) > 1 else 1,
                             figsize=(12 if len(fractions) > 1 else 7, 4.6), squeeze=False)
    left, right = axes[0][0], (axes[0][1] if len(fractions) > 1 else None)
    for i, label in enumerate(results[shown]):
        style = "--" if "overlap" in label else "-"
        colour = series_style(i)["color"]
        history = [r for r in results[shown][label] if "test_acc" in r]
        left.plot([r["sim_time_s"] for r in history], [100 * r["test_acc"] for r in history],
                  style, color=colour, label=label)
        reach = [(f, seconds_to(results[f][label], target)) for f in fractions]
        reach = [(f, s) for f, s in reach if s is not None]
        if right is not None:
            right.plot([f for f, _ in reach], [s for _, s in reach], style, marker="o",
                       color=colour, label=label)
    left.axhline(100 * target, color="grey", lw=0.8, ls=":")
    left.annotate(f"target {target:.0%}", (1, 100 * target), xycoords=("axes fraction", "data"),
                  xytext=(-4, 3), textcoords="offset points", ha="right", fontsize=8,
                  color="grey")
    left.set(xlabel="simulated time (s)", ylabel="test accuracy of the average model (%)",
             title=f"{shown:.0%} {varied}")
    if right is not None:
        right.set(xlabel=f"fraction of {varied}",
                  ylabel=f"simulated seconds to {target:.0%} accuracy", xticks=fractions,
                  title="time to accuracy as the network slows")
        right.set_ylim(bottom=0)
    for ax in axes[0]:
        ax.grid(alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
               fontsize=8, frameon=False)  # below the panels: the saved figure grows to hold it
    if title:
        fig.suptitle(title)
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """The `python -m analysis.network_study` command: a [[compare]] config run at several slow
    fractions, then its table and figure.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    from p2pfl.config import ConfigError, load_config, parse_overrides

    parser = argparse.ArgumentParser(prog="python -m analysis.network_study",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--out", default="runs/network")
    parser.add_argument("--fractions", default="0,0.1,0.2,0.4")
    parser.add_argument("--vary", default=",".join(VARIED),
                        help="[network] fields set to each fraction: slow_links, stragglers")
    parser.add_argument("--target", type=float, default=0.75)
    parser.add_argument("--figure", default="runs/network/network_study.png")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        dest="overrides", help="config override, e.g. network.stragglers=0")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        fractions = sorted({float(f) for f in args.fractions.split(",")})
        vary = tuple(v.strip() for v in args.vary.split(","))
        if not set(vary) <= set(VARIED):
            raise ConfigError("--vary", f"choose among {', '.join(VARIED)}, got {args.vary!r}")
        cfg = load_config(args.config, parse_overrides(args.overrides))
        results = run_fractions(cfg, Path(args.out), fractions, vary, not args.quiet)
    except (ConfigError, ValueError) as err:
        print(f"network_study: error: {err}", file=sys.stderr)
        return 2
    shown = 0.1 if 0.1 in results else fractions[len(fractions) // 2]
    print(table(results, args.target, shown), end="")
    varied = " and ".join(v.replace("_", " ") for v in vary)
    d = cfg.data
    title = (f"{d.name}, {d.num_nodes} nodes, Dirichlet({d.alpha}), {cfg.model.name}, "
             f"seed {cfg.seed}; dashed: overlap")
    for p in figure(results, args.target, shown, Path(args.figure), varied, title):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
