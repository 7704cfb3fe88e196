"""Every figure type, rendered and inspected: what it draws (lines, error bars, colour bar, tick
labels), not only that a file exists; tick labels never overlap."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.markers import CARETUPBASE

import analysis as A
import topologies as T
from analysis import plots
from analysis.study_curves import plot_curves
from analysis.study_figures import plot_sweep
from analysis.study_plots import plot_convergence_vs_topology
from p2pfl.report import figures
from p2pfl.report.plots import plot_histories


def drawn(monkeypatch: pytest.MonkeyPatch, make: Callable[[], list[Path]]) -> Figure:
    """The figure `make` draws (kept open), after checking it wrote a PNG and a PDF."""
    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *args: None)
    paths = make()
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    (fig,) = [plt.figure(n) for n in plt.get_fignums()]
    fig.canvas.draw()
    monkeypatch.undo()
    return fig


def shown_ticks(ax: Any, axis: str) -> list[Any]:
    """The labelled major tick labels of `axis` that lie inside the view."""
    low, high = sorted(getattr(ax, f"{axis}axis").get_view_interval())
    span = 1e-9 * (high - low)
    return [label for tick in getattr(ax, f"{axis}axis").get_major_ticks()
            if low - span <= tick.get_loc() <= high + span
            for label in (tick.label1, tick.label2) if label.get_visible() and label.get_text()]


def tick_labels(ax: Any, axis: str) -> list[str]:
    return [t.get_text() for t in shown_ticks(ax, axis)]


def assert_readable(fig: Figure) -> None:
    """Every axes has labelled ticks on both axes, and no two tick labels overlap."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for axis in ("x", "y"):
            labels = shown_ticks(ax, axis)
            if ax.get_label() == "<colorbar>" and axis == "y":
                continue
            if axis == "x" and ax.get_shared_x_axes().get_siblings(ax) != [ax]:
                continue  # a twin axes: its x axis is its sibling's
            assert labels or not getattr(ax, f"{axis}axis").get_visible(), (ax, axis)
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), (ax.get_title(), axis,
                                               [t.get_text() for t in labels])


def history(rounds: int, acc0: float, consensus: float) -> list[dict[str, Any]]:
    return [{"round": t, "test_acc": min(0.9, acc0 + 0.05 * t),
             "test_acc_local_mean": acc0 + 0.04 * t, "train_loss": 2.0 / t,
             "consensus_dist": consensus / t} for t in range(1, rounds + 1)]


def test_series_styles_are_unique_past_the_colour_cycle() -> None:
    styles = [tuple(figures.series_style(i).values()) for i in range(40)]
    assert len(set(styles)) == 40


def test_log_ticks_label_short_and_long_ranges() -> None:
    fig, (short, long) = plt.subplots(1, 2)
    for ax, (low, high) in ((short, (0.04, 1.5)), (long, (1e-9, 1.0))):
        ax.plot([low, high], [low, high])
        ax.set_xlim(low, high)
        figures.log_axis(ax, "x", low, high)
    fig.canvas.draw()
    assert tick_labels(short, "x") == ["0.05", "0.1", "0.2", "0.5", "1"]
    assert len(tick_labels(long, "x")) <= 10
    assert_readable(fig)
    plt.close(fig)


def test_round_axis_ticks_are_integers_with_one_integer_in_view() -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 3])  # every topology reached the target in round 3
    figures.round_axis(ax, "y")
    fig.canvas.draw()
    assert tick_labels(ax, "y") == ["3"]
    plt.close(fig)


def test_run_curves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = {f"run {i}": history(12, 0.3 + 0.01 * i, 10.0 ** -i) for i in range(12)}
    runs["complete"] = [{**r, "consensus_dist": 1e-15} for r in history(12, 0.5, 1.0)]
    fig = drawn(monkeypatch, lambda: plot_histories(runs, tmp_path / "curves", "title"))
    acc, local, loss, consensus = fig.axes[:4]
    for ax in (acc, local, loss, consensus):
        assert len(ax.get_lines()) == 13
        assert all(float(t).is_integer() for t in tick_labels(ax, "x"))  # round ticks
    styles = {(line.get_color(), line.get_linestyle()) for line in acc.get_lines()}
    assert len(styles) == 13  # run 0 and run 10 share a colour, not a line style
    assert consensus.get_yscale() == "log"
    low = consensus.get_ylim()[0]
    assert low > 1e-13  # the complete graph's ~1e-15 does not stretch the axis
    assert any("at exact consensus" in t.get_text() and "complete" in t.get_text()
               for t in consensus.texts)
    assert local.get_legend() is not None and fig.get_suptitle() == "title"
    assert_readable(fig)


def test_seed_bands_and_analysis_figures(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    groups = {"a": [history(9, 0.3, 1.0), history(9, 0.35, 1.0)], "b": [history(9, 0.4, 1.0)]}
    fig = drawn(monkeypatch, lambda: plots.plot_seed_bands(groups, tmp_path / "bands"))
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2 and len(ax.collections) == 1  # one band: a has 2 seeds
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["b", "a, 2 seeds"]
    assert_readable(fig)
    curve = A.consensus_distance(A.gossip_consensus(T.ring(8), np.arange(8.0), 30))
    fig = drawn(monkeypatch, lambda: plots.plot_consensus(
        {"ring": curve, "complete": np.zeros(30)}, tmp_path / "consensus"))
    assert len(fig.axes[0].get_lines()) == 2 and fig.axes[0].get_yscale() == "log"
    assert_readable(fig)
    fig = drawn(monkeypatch, lambda: plots.plot_spectrum(
        {"ring": T.ring(12), "directed ring": T.directed_ring(12)}, tmp_path / "spectrum"))
    assert len(fig.axes[0].collections) == 2
    assert_readable(fig)
    fig = drawn(monkeypatch, lambda: plots.plot_partition(
        np.array([[3, 0, 1], [0, 2, 2]]), tmp_path / "partition"))
    assert len(fig.axes) == 2  # heatmap and its colour bar
    fig = drawn(monkeypatch, lambda: plots.draw_topology(T.exponential(8), tmp_path / "topo"))
    assert fig.axes[0].get_title() == "8 nodes, 24 edges"


def _means() -> list[dict[str, Any]]:
    """Mean rows of 7 topologies over 3 seeds, 40 rounds: the complete graph and the one-peer
    exponential graph average exactly (gap 1 per round, in 1 and 4 rounds); no seed of the
    directed ring reached the target (a lower bound at 41 rounds)."""
    def row(label: str, kind: str, d: float, gap: float, acc: float, reach: float | None,
            sweep: str = "", value: Any = None, exact: float = math.inf) -> dict[str, Any]:
        return {"label": label, "status": "ok", "kind": kind, "sweep": sweep,
                "vary": "out_degree" if sweep else "", "value": value, "seeds": 3,
                "finished": 3, "reached": 0 if reach is None else 3,
                "diameter_mean": d, "diameter_sd": 0.0 if kind == "static" else 0.5,
                "spectral_gap_per_round_mean": gap, "spectral_gap_per_round_sd": 0.0,
                "exact_averaging_rounds_mean": exact, "effective_neighbors_mean": 16 * gap,
                "final_acc_mean": acc, "final_acc_sd": 0.01,
                "rounds_to_target_mean": 41.0 if reach is None else reach,
                "rounds_to_target_lower_bound": reach is None,
                "rounds_to_target_sd": None if reach is None else 1.5}
    return [row("complete", "static", 1, 1.0, 0.8, 10, exact=1),
            row("ring", "static", 8, 0.05, 0.77, 23),
            row("directed_ring", "static", 15, 0.019, 0.76, None),
            row("one_peer_exponential", "time-varying", 4, 1.0, 0.79, 12, exact=4),
            row("random_out out_degree=1", "time-varying", 5, 0.3, 0.78, 15, "random_out", 1),
            row("random_out out_degree=2", "time-varying", 3.5, 0.6, 0.79, 12, "random_out", 2),
            row("random_out out_degree=4", "time-varying", 2.5, 0.7, 0.79, 11, "random_out", 4)]


def _points(ax: Any) -> dict[str, tuple[float, float]]:
    """{marker colour: (x, y)} of the one-point lines (the error bars' markers) of `ax`."""
    return {line.get_markeredgecolor(): (line.get_xdata()[0], line.get_ydata()[0])
            for line in ax.get_lines() if len(line.get_xdata()) == 1}


def test_convergence_vs_topology(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    means = _means()
    tau = {"algorithm": "", "metric": "diameter", "kendall_tau": 0.5, "n": 21, "censored": 3}
    fig = drawn(monkeypatch, lambda: plot_convergence_vs_topology(
        means, tmp_path / "conv", 0.75, 40, "title", note="75 % (given)", correlations=(tau,)))
    acc_d, acc_gap, rounds_d, rounds_gap = fig.axes
    assert rounds_d.get_title() == "Kendall tau +0.50 (21 cells, 3 censored)"
    assert rounds_gap.get_title() == ""  # no coefficient given for the gap
    for ax in (acc_d, acc_gap, rounds_d, rounds_gap):
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 7
        joined = [line for line in ax.get_lines() if len(set(line.get_xdata())) > 1
                  and len(set(line.get_ydata())) > 1]
        assert not joined  # no line joins two topologies (only the last round, the break)
    assert acc_gap.get_xscale() == "log" and acc_d.get_xscale() == "linear"
    # every point at its true x: equal diameters are not spread sideways
    diameters = {x for x, _ in _points(acc_d).values()}
    assert diameters == {m["diameter_mean"] for m in means}
    # gaps: the numeric ones at their value; the two exact-averaging schedules past the break,
    # apart (1 round right of 4), never at the complete graph's x and never at a gap above 1
    gaps = [x for x, _ in _points(acc_gap).values()]
    numeric = sorted(x for x in gaps if x < 1)
    assert numeric == sorted(m["spectral_gap_per_round_mean"] for m in means
                             if m["exact_averaging_rounds_mean"] == math.inf)
    complete, one_peer = _points(acc_gap)["C0"][0], _points(acc_gap)["C3"][0]
    assert max(numeric) < one_peer < complete
    labels = tick_labels(acc_gap, "x")
    assert labels[-2:] == ["4 rds", "1 rd"] and all(float(t) <= 1 for t in labels[:-2])
    # the directed ring never reached the target: a lower bound at 41 rounds, an upward arrow
    x, y = _points(rounds_d)["C2"]
    assert (x, y) == (15, 41.0)
    arrows = [c for c in rounds_d.containers if isinstance(c, ErrorbarContainer) and c.has_yerr
              and c[1] and c[1][0].get_marker() == CARETUPBASE]  # matplotlib's lower limit
    assert len(arrows) == 1 and rounds_d.get_ylim()[1] > 41
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:4] == ["complete", "ring", "directed_ring (target: 0/3 seeds)",
                          "one_peer_exponential (time-varying)"]
    assert legend[-2].startswith("lower bound") and legend[-1] == "last round (40)"
    assert rounds_d.get_ylabel() == "rounds to 75.0 % test accuracy"
    assert acc_gap.get_xlabel() == "spectral gap per round (1 - per-round rate)"
    assert fig.get_suptitle() == "title: mean ± sd over 3 seeds"
    assert fig.get_supxlabel() == "target: 75 % (given)"
    assert_readable(fig)


def test_convergence_against_other_metrics(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    means = _means()
    means[4]["effective_neighbors_mean"] = None  # an aperiodic schedule has none
    fig = drawn(monkeypatch, lambda: plot_convergence_vs_topology(
        means, tmp_path / "conv", 0.75, 40, x=("effective_neighbors", "exact_averaging_rounds"),
        gamma=0.95))
    neff, exact = fig.axes[:2]
    assert neff.get_xlabel() == ("effective neighbours (gamma 0.95)\n(no value: random_out "
                                 "out_degree=1)")
    assert sum(isinstance(c, ErrorbarContainer) for c in neff.containers) == 6
    assert tick_labels(exact, "x")[-1] == "never"  # topologies that never average exactly
    never = [x for x, _ in _points(exact).values() if x > 4]
    assert len(never) == 5 and len(set(never)) == 1
    assert_readable(fig)


def _luminance(color: Any) -> float:
    r, g, b, _ = color
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_curves_coloured_by_diameter_and_gap(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    means = _means()
    histories = {("", m["label"], seed): history(20, 0.3 + 0.01 * seed, m["diameter_mean"])
                 for m in means for seed in range(3)}
    histories.update({("", "complete", s): [{**r, "consensus_dist": 0.0}
                                            for r in history(20, .3, 1)] for s in range(3)})
    for key, label, better in (("diameter", "diameter (hops)", min),
                               ("spectral_gap_per_round",
                                "spectral gap per round (1 - per-round rate)", max)):
        fig = drawn(monkeypatch, lambda k=key: plot_curves(means, histories, k, tmp_path / k))
        acc, consensus, bar = fig.axes
        assert bar.get_xlabel() == f"{label}: dark = better connected" and tick_labels(bar, "x")
        assert len(acc.get_lines()) == 7
        assert not acc.collections  # 7 topologies: no bands (they would hide each other)
        colors = [line.get_color() for line in acc.get_lines()]
        values = [m[f"{key}_mean"] for m in means]
        # one sense for every metric: the better connected, the darker
        order = sorted(range(7), key=lambda i: values[i], reverse=better is max)
        shades = [_luminance(colors[i]) for i in order]
        assert shades == sorted(shades) and shades[0] < shades[-1]
        dashed = [line.get_linestyle() == "--" for line in acc.get_lines()]
        assert dashed == [m["kind"] == "time-varying" for m in means]
        assert consensus.get_yscale() == "log"
        # the complete graph's consensus distance is 0: no curve at a made-up floor, but
        # triangles on the bottom edge (in axes coordinates), said in the legend
        marks, curve = consensus.get_lines()[:2]  # the complete graph's
        assert curve.get_color() == marks.get_color() == colors[0]
        assert np.isnan(curve.get_ydata()).all()
        assert marks.get_marker() == "v" and set(marks.get_ydata()) == {0.0}
        assert marks.get_transform() != consensus.transData
        legend = [t.get_text() for t in consensus.get_legend().get_texts()]
        assert legend[0].startswith("complete") and legend[0].endswith(
            "\n(consensus distance 0: \u25bc on the bottom edge)")
        if key == "spectral_gap_per_round":
            assert legend[3] == "one_peer_exponential (exact averaging in 4 rds)"
        assert_readable(fig)
    few = means[:2]
    fig = drawn(monkeypatch, lambda: plot_curves(few, histories, "diameter", tmp_path / "few"))
    assert len(fig.axes[0].collections) == 2  # bands of ± sd with few topologies


def test_curves_of_one_topology_have_a_readable_colour_bar(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    ring = _means()[1]  # gap 0.05
    histories = {("", "ring", seed): history(20, 0.3, 1.0) for seed in range(3)}
    fig = drawn(monkeypatch, lambda: plot_curves([ring], histories, "spectral_gap_per_round",
                                                 tmp_path / "g"))
    assert tick_labels(fig.axes[2], "x") == ["0.05", "0.07"]


def test_study_curves_average_the_finished_runs(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    import analysis.study_figures as SP
    from analysis.study import StudyResult
    from analysis.study_results import means

    rows = [{"label": "ring", "seed": 0, "status": "ok", "kind": "static", "diameter": 4,
             "spectral_gap_per_round": 0.2, "final_acc": 0.8, "best_acc": 0.8,
             "rounds_to_target": 5},
            {"label": "ring", "seed": 1, "status": "diverged: round 4"}]
    histories = {("", "ring", 0): history(9, 0.3, 1.0), ("", "ring", 1): history(3, 0.6, 1.0)}
    drawn_with: list[dict[tuple[str, str, int], Any]] = []
    monkeypatch.setattr(SP, "plot_curves", lambda m, h, *a, **k: drawn_with.append(h) or [])
    SP.plot_study(StudyResult(rows, means(rows), 0.75, histories), tmp_path)
    assert [list(h) for h in drawn_with] == [[("", "ring", 0)]] * 2


def test_study_time_curves_with_a_run_that_diverged_in_round_one(tmp_path: Path) -> None:
    from analysis.study import StudyResult
    from analysis.study_figures import plot_study
    from analysis.study_results import means

    rows = [{"label": "ring", "seed": 0, "status": "ok", "kind": "static", "diameter": 4,
             "spectral_gap_per_round": 0.2, "final_acc": 0.8, "best_acc": 0.8,
             "rounds_to_target": 5},
            {"label": "star", "seed": 0, "status": "diverged: round 1"}]
    timed = [{**r, "sim_time_s": 0.5 * r["round"]} for r in history(9, 0.3, 1.0)]
    result = StudyResult(rows, means(rows), 0.75, {("", "ring", 0): timed, ("", "star", 0): []})
    assert tmp_path / "curves_time.png" in plot_study(result, tmp_path)


def test_sweep_over_doubling_values_has_a_log_axis(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    values = [4, 8, 16, 32, 64, 128, 256]
    rows = [{**_means()[1], "label": f"ring n={n}", "sweep": "ring", "vary": "num_nodes",
             "value": n, "diameter_mean": n / 2} for n in values]
    fig = drawn(monkeypatch, lambda: plot_sweep(rows, "ring", tmp_path / "sweep", 0.75, 40))
    for ax in fig.axes[:3]:
        assert ax.get_xscale() == "log" and tick_labels(ax, "x") == [str(n) for n in values]
    assert_readable(fig)


def test_sweep_panels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    means = _means()
    fig = drawn(monkeypatch, lambda: plot_sweep(means, "random_out", tmp_path / "sweep", 0.75,
                                                40))
    acc, rounds, diameter, gap = fig.axes
    for ax, bars in ((acc, 3), (rounds, 3), (diameter, 1)):
        assert tick_labels(ax, "x") == ["1", "2", "4"] and ax.get_xlabel() == "out_degree"
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == bars
    assert gap.get_yscale() == "log"
    assert gap.get_ylabel() == "spectral gap per round (1 - per-round rate)"
    assert "sweep 'random_out' over out_degree" in fig.get_suptitle()
    assert_readable(fig)


def test_figures_are_written_whole(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    paths = figures.save(fig, tmp_path / "sub" / "f")
    assert [p.name for p in paths] == ["f.png", "f.pdf"]
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["f.pdf", "f.png"]
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"
    assert not math.isnan(paths[0].stat().st_size)


def test_network_study_figure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from analysis.network_study import figure

    def timed(acc0: float, step: float) -> list[dict[str, Any]]:
        return [{**r, "sim_time_s": step * r["round"]} for r in history(10, acc0, 1.0)]

    results = {f: {"sgp": timed(0.5, 1 + f), "sgp overlap": timed(0.5, 0.5 + f)}
               for f in (0.0, 0.1, 0.3)}
    fig = drawn(monkeypatch, lambda: figure(results, 0.75, 0.1, tmp_path / "net", title="t"))
    left, right = fig.axes
    assert len(left.get_lines()) == 3  # two variants and the target line
    assert [line.get_linestyle() for line in right.get_lines()] == ["-", "--"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["sgp", "sgp overlap"]
    assert_readable(fig)


def test_a_name_keeps_its_colour_across_figures_and_its_seeds_differ_in_style() -> None:
    """A name's colour does not depend on what else a figure shows; curves that share a colour
    (seeds, or two names hashed alike) differ in line style."""
    names = [f"variant {i}" for i in range(30)]
    alone = {k: figures.keyed_styles([k])[0]["color"] for k in names}
    together = figures.keyed_styles(names)
    assert [s["color"] for s in together] == [alone[k] for k in names]
    assert len({(s["color"], s["linestyle"], s["marker"]) for s in together}) == 30
    seeds = figures.keyed_styles(["D-PSGD", "D-PSGD"])
    assert seeds[0]["color"] == seeds[1]["color"] and seeds[0]["linestyle"] != seeds[1][
        "linestyle"]


def test_run_curves_say_what_diverged_and_what_hides_what(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """A diverged run's huge loss leaves the loss panel to the others' range and its legend entry
    says where it diverged; a run identical to another says it is drawn under it; FedBuff's
    test_acc is named its server's model; with attackers the honest nodes' metrics are drawn."""
    from p2pfl.report.runs import RunFacts

    calm = history(8, 0.3, 1.0)
    wild = [{**r, "train_loss": 5e25 if r["round"] > 5 else r["train_loss"]} for r in calm[:6]]
    runs = {"calm": calm, "twin": [dict(r) for r in calm], "wild": wild}
    facts = {"calm": RunFacts("calm", "server model", "mark"),
             "twin": RunFacts("twin", "server model", "mark"),
             "wild": RunFacts("wild", "server model", "mark", diverged_at=7)}
    fig = drawn(monkeypatch, lambda: plot_histories(runs, tmp_path / "c", facts=facts))
    acc, local, loss, _ = fig.axes[:4]
    assert acc.get_ylabel() == "test accuracy of the server model (%)"
    assert loss.get_ylim()[1] < 10  # not 5e25
    assert any("leaves the axis (diverged): wild" in t.get_text() for t in loss.texts)
    entries = [t.get_text() for t in local.get_legend().get_texts()]
    assert entries == ["calm", "twin (same curves as calm, drawn under it)",
                       "wild (diverged at mark 7)"]
    attacked = {"a": [{**r, "test_acc_honest_mean": 0.1} for r in calm], "b": calm}
    fig = drawn(monkeypatch, lambda: plot_histories(attacked, tmp_path / "h"))
    assert fig.axes[1].get_ylabel().replace("\n", " ") == (
        "test accuracy, mean of the honest nodes' own models (%) (all nodes in runs without "
        "attackers)")
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == [100 * 0.1] * 8


def test_seed_bands_against_simulated_time_interpolate_each_seed_within_its_span() -> None:
    seeds = [[{"round": 1, "sim_time_s": 1.0, "test_acc": 0.2},
              {"round": 2, "sim_time_s": 3.0, "test_acc": 0.6}],
             [{"round": 1, "sim_time_s": 2.0, "test_acc": 0.5},
              {"round": 2, "sim_time_s": 4.0, "test_acc": 0.7}]]
    xs, values = plots._seed_points(seeds, "test_acc", "time")
    assert list(xs) == [1.0, 2.0, 3.0, 4.0]
    assert [[round(v, 9) for v in at] for at in values] == [[20.0], [40.0, 50.0], [60.0, 60.0],
                                                             [70.0]]
    xs, values = plots._seed_points(seeds, "test_acc", "round")
    assert list(xs) == [1, 2]
    assert [[round(v, 9) for v in at] for at in values] == [[20.0, 50.0], [60.0, 70.0]]


def test_a_title_says_what_its_runs_share() -> None:
    """A run's curves name its aggregator and attack; several runs' figure names what they
    share and how many seeds a curve averages."""
    from p2pfl.report.runs import title_of

    run = {"data": {"name": "fashion_mnist", "num_nodes": 20, "partition": "dirichlet",
                    "alpha": 0.5}, "model": {"name": "mlp"},
           "algorithm": {"name": "dpsgd", "aggregator": "median"},
           "topology": {"name": "random_geometric"},
           "byzantine": {"nodes": 0.2, "attack": "alie"}}
    assert title_of([run]) == ("Fashion-MNIST, 20 nodes, Dirichlet(0.5) labels, mlp;\ndpsgd, "
                               "median aggregator, random_geometric, 4 alie attackers")
    other = {**run, "algorithm": {"name": "dpsgd", "aggregator": "mean"},
             "byzantine": {"nodes": 0.2, "attack": "none"},
             "network": {"enabled": True, "stragglers": 0.25, "slow_factor": 10.0}}
    assert title_of([run, other], seeds=2).replace("\n", " ") == (
        "Fashion-MNIST, 20 nodes, Dirichlet(0.5) labels, mlp; dpsgd, random_geometric, 4 "
        "Byzantine nodes (attack per curve: alie or none); mean of 2 seeds")


def test_reports_know_every_built_in_algorithm_without_importing_it() -> None:
    """The names a report reads without torch agree with the registry."""
    import algorithms
    from p2pfl.report import runs

    registry = {n: c for n, c in algorithms.ALGORITHMS.items()
                if c.__module__.split(".")[0] == "algorithms"}  # not one registered by a test
    assert {n for n, c in registry.items() if c.mixing == "server"} == runs.SERVER
    assert {n for n, c in registry.items() if c.mixing != "server"} == runs.DECENTRALIZED
    assert {n for n, c in registry.items()
                                 if issubclass(c, algorithms.Asynchronous)} == runs.ASYNCHRONOUS
