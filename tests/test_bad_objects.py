"""Bad Python objects handed to p2pfl.run: one clear error naming the problem before any round,
and no run directory left behind; or, for a callback that fails mid-run, an error naming it with
the checkpoint of the rounds before intact. (The cases a probe of the Python API found.)"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch import nn

import p2pfl
import topologies as T
from p2pfl.config import ConfigError
from p2pfl.data import Dataset
from p2pfl.engine.checkpoint import CHECKPOINT
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import skip_plots, small_config

pytestmark = pytest.mark.usefixtures("one_thread")


def refused(tmp_path, match: str, cfg=None, **objects) -> None:
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=match):
        p2pfl.run(cfg or small_config(), out, progress=False, **objects)
    assert not out.exists()


def ring_matrix(diagonal: float | None) -> np.ndarray:
    W = T.doubly_stochastic(nx.cycle_graph(6))
    if diagonal is not None:
        np.fill_diagonal(W, diagonal)
    return W


@pytest.mark.parametrize("layout", [np.asarray, sp.csr_array])
def test_a_mixing_matrix_whose_columns_do_not_sum_to_one_is_refused(tmp_path, layout):
    refused(tmp_path, "^topology: mixing matrix column 0 sums to 1.56666",
            topology=layout(ring_matrix(0.9)))


def test_a_zero_diagonal_is_implied_and_runs_as_the_whole_matrix(tmp_path, monkeypatch):
    skip_plots(monkeypatch)
    whole = p2pfl.run(small_config(), tmp_path / "whole", topology=ring_matrix(None))
    implied = p2pfl.run(small_config(), tmp_path / "implied", topology=ring_matrix(0.0))
    assert [r["train_loss"] for r in whole] == [r["train_loss"] for r in implied]


def test_every_graph_of_a_period_is_checked_before_round_0(tmp_path):
    directed = nx.DiGraph([(i, (i + 1) % 6) for i in range(6)])
    refused(tmp_path, r"^topology: dfedavg needs doubly-stochastic mixing \(the graph of round 1\)",
            topology=[nx.cycle_graph(6), directed])


@pytest.mark.parametrize("name", ["dfedavg", "osgp"])
def test_a_round_without_edges_is_a_round_without_messages(tmp_path, monkeypatch, name):
    """Joint connectivity: the ring in even rounds, no edge in odd ones."""
    skip_plots(monkeypatch)
    history = p2pfl.run(small_config(algorithm__name=name, rounds=2), tmp_path / "run",
                        topology=[nx.cycle_graph(6), nx.empty_graph(6)])
    assert [r["messages"] for r in history] == [12, 0]


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.ReLU(), nn.Linear(16, 10))


def _frozen() -> nn.Module:
    model = _mlp()
    model[1].requires_grad_(False)
    return model


@pytest.mark.parametrize(("model", "match"), [
    (_frozen(), "^model: parameter 1.weight has requires_grad=False"),
    (nn.Sequential(nn.Flatten(), nn.AdaptiveAvgPool1d(10)), "^model: Sequential has no parameters"),
    (nn.Sequential(nn.Flatten(), nn.Linear(784, 10, device="meta")),
     "^model: 1.weight is on the meta device"),
])
def test_a_module_that_cannot_be_trained_as_given_is_refused(tmp_path, model, match):
    refused(tmp_path, match, model=model)


class Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used, self.spare = nn.Linear(784, 10), nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x.flatten(1))


def test_a_parameter_forward_never_uses_is_refused(tmp_path):
    refused(tmp_path, "^model: parameter spare.weight of Unused is not used by forward",
            model=Unused())


def test_batch_norm_without_running_statistics_trains(tmp_path, monkeypatch):
    """Batch statistics only: no state beside the parameters, so the population can run it."""
    skip_plots(monkeypatch)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.BatchNorm1d(16,
                          track_running_stats=False), nn.ReLU(), nn.Linear(16, 10))
    history = p2pfl.run(small_config(), tmp_path / "run", model=model)
    assert np.isfinite(history[-1]["train_loss"])


def _arrays(n: int = 300) -> tuple[np.ndarray, ...]:
    gen = np.random.default_rng(0)
    x = gen.normal(size=(n, 20)).astype(np.float32)
    y = gen.integers(0, 3, n)
    return x, y, x[:60].copy(), y[:60].copy()


def _with(index: int, value: np.ndarray) -> tuple[np.ndarray, ...]:
    parts = list(_arrays())
    parts[index] = value
    return tuple(parts)


def _dataset(**changes) -> Dataset:
    x, y, xt, yt = (torch.as_tensor(v) for v in _arrays())
    fields = {"name": "mine", "x_train": x, "y_train": y, "x_test": xt, "y_test": yt,
              "num_classes": 3, "input_shape": (20,)} | changes
    return Dataset(**fields)


NAN_ROWS = _arrays()[0].copy()
NAN_ROWS[::5, 0] = np.nan
HUGE_LABEL = _arrays()[1].copy()
HUGE_LABEL[0] = 10**6


@pytest.mark.parametrize(("data", "match"), [
    (_with(0, NAN_ROWS), "^data: train inputs: 60 samples hold NaN or infinite values"),
    (_with(2, np.full((60, 20), np.inf, dtype=np.float32)), "^data: test inputs: 60 samples"),
    (_with(0, _arrays()[0][:, 0]), r"^data: train: expected inputs \[n, ...\] \(at least one"),
    (_with(1, HUGE_LABEL), "^data: the largest label 1000000 makes 1000001 classes, more than"),
    (_with(0, _arrays()[0].astype(np.complex64)), "^data: train: inputs must be real numbers"),
    (_dataset(y_train=torch.zeros(290, dtype=torch.long)), r"^data: train: expected inputs"),
    (_dataset(num_classes=2), r"^data: labels must be 0..num_classes - 1 = 1, got 0..2"),
    (_dataset(input_shape=(4, 5)), r"^data: train inputs are \[20\] per sample, but input_shape"),
])
def test_data_that_would_fail_or_mislead_a_round_is_refused(tmp_path, data, match):
    cfg = small_config(data__synthetic_train=2000, data__synthetic_test=500, data__alpha=0.3)
    refused(tmp_path, match, cfg=cfg, data=data)


class Fails(p2pfl.Callback):
    def after_round(self, end):
        if end.t == 1:
            raise RuntimeError("disk quota\nsecond line")
        return {"ok": 1.0}


class ReturnsFloat(p2pfl.Callback):
    def after_round(self, end):
        return 3.0


def test_a_failing_callback_is_named_and_the_rounds_before_stay(tmp_path, monkeypatch):
    skip_plots(monkeypatch)
    out = tmp_path / "run"
    cfg = small_config(rounds=3, engine__checkpoint_every=1)
    with pytest.raises(p2pfl.CallbackError,
                       match="^callback Fails failed in round 2: RuntimeError: disk quota$"):
        p2pfl.run(cfg, out, callbacks=[Fails()])
    assert [r["round"] for r in read_metrics(out / METRICS)] == [1]
    assert (out / CHECKPOINT).exists()
    with pytest.raises(p2pfl.CallbackError, match="^callback ReturnsFloat returned a float in "
                       "round 1; after_round returns a dict"):
        p2pfl.run(cfg, tmp_path / "float", callbacks=[ReturnsFloat()])


def _turns_directed(t: int) -> nx.Graph:
    return nx.cycle_graph(6) if t < 22 else nx.DiGraph([(i, (i + 1) % 6) for i in range(6)])


def _grows(t: int) -> nx.Graph:
    return nx.cycle_graph(6 if t < 22 else 7)


@pytest.mark.parametrize(("fn", "match"), [
    (_turns_directed, r"^topology: dfedavg needs doubly-stochastic mixing \(the graph of round "
                      r"22\): doubly-stochastic \(symmetric\) mixing needs an undirected"),
    (_grows, r"^topology: the graph of round 22 has 7 nodes, round 0's has 6$"),
])
def test_a_schedule_function_that_turns_bad_after_the_checked_rounds_stops_naming_the_round(
        tmp_path, monkeypatch, fn, match):
    """Rounds 0-19 are checked before round 0; a later bad graph stops the run in its round,
    the 22 rounds before written."""
    skip_plots(monkeypatch)
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=match):
        p2pfl.run(small_config(rounds=25, engine__checkpoint_every=5, eval__every=5), out,
                  topology=fn)
    assert len(read_metrics(out / METRICS)) == 22
    assert (out / CHECKPOINT).exists()


class Keeps(p2pfl.Callback):
    """Its state is a set after round 1: torch.save writes it, a weights-only load could not."""

    def __init__(self) -> None:
        self.seen: object = []

    def after_round(self, end):
        self.seen = {end.t}
        return None

    def state_dict(self):
        return {"seen": self.seen}


def test_a_callback_state_a_resume_could_not_load_is_refused_when_written(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(p2pfl.CallbackError, match=r"^callback Keeps: \['seen'\] = set: a "
                       "checkpoint keeps tensors"):
        p2pfl.run(small_config(rounds=2, engine__checkpoint_every=1), out, callbacks=[Keeps()])
    assert not (out / CHECKPOINT).exists()


def test_callbacks_are_a_list(tmp_path):
    refused(tmp_path, r"^callbacks: expected a list of p2pfl.Callback objects, got one Fails: "
            r"pass \[Fails\(...\)\]", callbacks=Fails())


class Lying:
    """A Schedule of one's own whose graphs have 7 nodes while it says 6."""

    n, directed, period, needs_losses = 6, False, 1, False

    def at(self, t: int) -> nx.Graph:
        return nx.cycle_graph(7)


def test_a_schedule_whose_graphs_disagree_with_its_n_is_refused_by_size(tmp_path):
    refused(tmp_path, r"^topology: dfedavg needs doubly-stochastic mixing: the graph has 7 nodes, "
            r"the schedule says n = 6$", topology=Lying())


def _fails_in_round_3(t: int) -> nx.Graph:
    if t == 22:
        raise RuntimeError("trace file gone\nsecond line")
    return nx.cycle_graph(6)


class FlakySchedule:
    """A schedule class of one's own whose `at` raises in round 23 (t = 22)."""

    n, period, directed, needs_losses = 6, None, False, False

    def at(self, t: int) -> nx.Graph:
        return _fails_in_round_3(t)


class ForwardFails(nn.Module):
    """Fine on the probe and for 2 rounds of 3 local steps, then its forward raises."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 2 and torch.is_grad_enabled():  # a local step, not the probe
            self.calls += 1
            if self.calls > 6:
                raise RuntimeError("cuda kernel said no")
        return self.fc(x.flatten(1))


@pytest.mark.parametrize(("objects", "match", "written"), [
    ({"topology": _fails_in_round_3}, "^schedule function _fails_in_round_3 failed in round 23: "
     "RuntimeError: trace file gone$", 22),
    ({"topology": FlakySchedule()}, "^schedule FlakySchedule.at failed in round 23: "
     "RuntimeError: trace file gone$", 22),
    ({"model": ForwardFails()}, "^model ForwardFails failed in round 3: RuntimeError: cuda "
     "kernel said no$", 2),
])
def test_user_code_that_raises_mid_run_is_named_with_its_round_and_the_rounds_before_stay(
        tmp_path, monkeypatch, objects, match, written):
    """A schedule function, a schedule class and a model's forward, each raising in a later
    round: one line naming the object, the round and the error; the rounds before and the last
    checkpoint stay."""
    skip_plots(monkeypatch)
    out = tmp_path / "run"
    cfg = small_config(rounds=25, engine__checkpoint_every=1, eval__every=5,
                       engine__dtype="float32", engine__chunk_size=6)  # no memory probe
    with pytest.raises(p2pfl.UserCodeError, match=match) as caught:
        p2pfl.run(cfg, out, **objects)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert len(read_metrics(out / METRICS)) == written
    assert (out / CHECKPOINT).exists()


def test_a_partition_function_that_raises_is_named(tmp_path):
    def split(labels, num_nodes, rng):
        raise KeyError("node_map")

    with pytest.raises(p2pfl.UserCodeError,
                       match="^partition function .*split failed: KeyError: 'node_map'$"):
        p2pfl.run(small_config(data__alpha=0.3), tmp_path / "run",
                  partition=split, progress=False)
    assert not (tmp_path / "run" / METRICS).exists()


@pytest.mark.parametrize(("shift_train", "drop", "match"), [
    (50, None, r"^data: test labels 0\.\.9 occur in no training sample \(the training labels "
               r"are 50\.\.59\): map the labels"),
    (0, 7, r"^data: test labels 7 occur in no training sample \(the training labels are 0\.\.6, "
           r"8\.\.9\)"),
    ("codes", None, r"^data: the labels make 91 classes \(0\.\.90\), 81 of which have no "
                    r"training sample \(1\.\.9, 11\.\.19, 21\.\.29, 31\.\.39, \.\.\.\)"),
])
def test_labels_that_infer_misleading_classes_are_refused(tmp_path, shift_train, drop, match):
    """Training labels 50..59 beside test labels 0..9 would run as 60 classes, every test label
    unseen; a class missing from training is never learned; labels that are codes (0, 10, ...,
    90) make classes of which most have no sample."""
    x, y, x_test, y_test = _arrays()
    y, y_test = y % 10, y_test % 10
    y = np.where(y == 0, 1, y)
    y[:10], y_test[:10] = np.arange(10), np.arange(10)
    if shift_train == "codes":
        y, y_test = 10 * y, 10 * y_test
    else:
        y = y + shift_train
    if drop is not None:
        y = np.where(y == drop, drop + 1, y)
    refused(tmp_path, match, data=(x, y, x_test, y_test))
    dataset = Dataset("codes", torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(x_test),
                      torch.as_tensor(y_test), int(max(y.max(), y_test.max())) + 1, (20,))
    cfg = small_config(rounds=1, data__alpha=0.3, data__synthetic_train=2000,
                       data__synthetic_test=500)
    p2pfl.run(cfg, tmp_path / "explicit", data=dataset, progress=False)  # num_classes stated
