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

import analysis as A
import topologies as T
from analysis import plots
from analysis.study_figures import plot_sweep
from analysis.study_plots import plot_convergence_vs_topology, plot_curves
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
    def row(label: str, kind: str, d: float, gap: float, acc: float, reach: float | None,
            sweep: str = "", value: Any = None) -> dict[str, Any]:
        return {"label": label, "status": "ok", "kind": kind, "sweep": sweep,
                "vary": "out_degree" if sweep else "", "value": value, "seeds": 3,
                "finished": 3, "reached": 0 if reach is None else 3,
                "diameter_mean": d, "diameter_sd": 0.0 if kind == "static" else 0.5,
                "spectral_gap_mean": gap, "spectral_gap_sd": 0.0,
                "final_acc_mean": acc, "final_acc_sd": 0.01,
                "rounds_to_target_mean": reach, "rounds_to_target_sd": None if reach is None
                else 1.5}
    return [row("complete", "static", 1, 1.0, 0.8, 10),
            row("ring", "static", 8, 0.05, 0.77, 23),
            row("directed_ring", "static", 15, 0.019, 0.76, None),
            row("random_out out_degree=1", "time-varying", 5, 0.3, 0.78, 15, "random_out", 1),
            row("random_out out_degree=2", "time-varying", 3.5, 0.6, 0.79, 12, "random_out", 2),
            row("random_out out_degree=4", "time-varying", 2.5, 0.7, 0.79, 11, "random_out", 4)]


def test_convergence_vs_topology(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    means = _means()
    fig = drawn(monkeypatch, lambda: plot_convergence_vs_topology(
        means, tmp_path / "conv", 0.75, 40, "title"))
    acc_d, acc_gap, rounds_d, rounds_gap = fig.axes
    for ax in (acc_d, acc_gap):
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 6
    for ax in (rounds_d, rounds_gap):  # directed_ring never reached: a triangle, no error bar
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 5
        assert [line.get_marker() for line in ax.get_lines()].count("^") == 1
        assert all(float(t).is_integer() for t in tick_labels(ax, "y"))
    assert acc_gap.get_xscale() == "log" and acc_d.get_xscale() == "linear"
    hollow = [line.get_markerfacecolor() for line in acc_d.get_lines()
              if line.get_linestyle() == "None"]
    assert hollow.count("none") == 3  # the three time-varying topologies
    legend = [t.get_text() for t in acc_gap.get_legend().get_texts()]  # beside the data
    assert legend[:3] == ["complete", "ring", "directed_ring (target: 0/3 seeds)"]
    assert legend[-1].startswith("time-varying")
    assert rounds_d.get_ylabel() == "rounds to 75.0 % test accuracy"
    assert fig.get_suptitle().startswith("title: mean ± sd over 3 seeds")
    assert "\n" not in fig.get_suptitle()  # one line
    assert_readable(fig)


def test_curves_coloured_by_diameter_and_gap(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    means = _means()
    histories = {("", m["label"], seed): history(20, 0.3 + 0.01 * seed, m["diameter_mean"])
                 for m in means for seed in range(3)}
    histories.update({("", "complete", s): [{**r, "consensus_dist": 0.0}
                                            for r in history(20, .3, 1)] for s in range(3)})
    for key, label in (("diameter", "diameter (hops)"),
                       ("spectral_gap", "spectral gap (1 - SLEM)")):
        fig = drawn(monkeypatch, lambda k=key: plot_curves(means, histories, k, tmp_path / k))
        acc, consensus, bar = fig.axes
        assert bar.get_xlabel() == label and tick_labels(bar, "x")
        assert len(acc.get_lines()) == len(consensus.get_lines()) == 6
        assert not acc.collections  # 6 topologies: no bands (they would hide each other)
        colors = [line.get_color() for line in acc.get_lines()]
        values = [m[f"{key}_mean"] for m in means]
        order = np.argsort(values)  # the colour map is monotone in the metric
        assert len({tuple(colors[i]) for i in order}) == len(set(values))
        dashed = [line.get_linestyle() == "--" for line in acc.get_lines()]
        assert dashed == [m["kind"] == "time-varying" for m in means]
        assert consensus.get_yscale() == "log"
        legend = [t.get_text() for t in consensus.get_legend().get_texts()]
        assert legend[0] == "complete (exact consensus: on the floor)"
        assert_readable(fig)
    few = means[:2]
    fig = drawn(monkeypatch, lambda: plot_curves(few, histories, "diameter", tmp_path / "few"))
    assert len(fig.axes[0].collections) == 2  # bands of ± sd with few topologies


def test_curves_of_one_topology_have_a_readable_colour_bar(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    ring = _means()[1]  # gap 0.05
    histories = {("", "ring", seed): history(20, 0.3, 1.0) for seed in range(3)}
    fig = drawn(monkeypatch, lambda: plot_curves([ring], histories, "spectral_gap", tmp_path / "g"))
    assert tick_labels(fig.axes[2], "x") == ["0.05", "0.07"]


def test_study_curves_average_the_finished_runs(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    import analysis.study_figures as SP
    from analysis.study import StudyResult
    from analysis.study_results import means

    rows = [{"label": "ring", "seed": 0, "status": "ok", "kind": "static", "diameter": 4,
             "spectral_gap": 0.2, "final_acc": 0.8, "best_acc": 0.8, "rounds_to_target": 5},
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
             "spectral_gap": 0.2, "final_acc": 0.8, "best_acc": 0.8, "rounds_to_target": 5},
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
    for ax in (acc, rounds, diameter):
        assert tick_labels(ax, "x") == ["1", "2", "4"] and ax.get_xlabel() == "out_degree"
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 1
    assert gap.get_yscale() == "log" and gap.get_ylabel() == "spectral gap (1 - SLEM)"
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
