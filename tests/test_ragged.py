"""Nodes with different amounts of data: the batch plan, the ragged vectorized population against
per-node loops, aggregation weighted by n_i, per-node evaluation, records and resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from p2pfl.config import ConfigError, with_overrides
from p2pfl.core.federated import FederatedData, steps_per_node
from p2pfl.data import Dataset
from p2pfl.engine import build, run
from tests.conftest import play, small_config

SIZES = [7, 23, 40]  # n_i of the 3-node population below; batch 8 leaves partial batches


def ragged(**overrides):
    """6 nodes of synthetic data with label-Dirichlet sizes, one local epoch of batch 16."""
    base = {"data__partition": "label_dirichlet", "data__alpha": 0.3, "data__min_size": 10,
            "algorithm__local_steps": 0, "algorithm__local_epochs": 1}
    return small_config(**(base | overrides))


def three_nodes(dtype: torch.dtype = torch.float64) -> FederatedData:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(80, 1, 4, 4, generator=gen)
    y = torch.randint(0, 3, (80,), generator=gen)
    dataset = Dataset("toy", x, y, x[:10], y[:10], 3, (1, 4, 4))
    rows, start = [], 0
    for n in SIZES:
        rows.append(np.arange(start, start + n))
        start += n
    return FederatedData(dataset, rows, torch.device("cpu"), dtype)


@pytest.mark.parametrize("last_batch", ["keep", "drop"])
def test_an_epoch_visits_each_nodes_data_once(last_batch: str) -> None:
    data = three_nodes()
    plan = data.plan(seed=1, t=0, batch_size=8, local_epochs=2, local_steps=0,
                     last_batch=last_batch)
    expect = steps_per_node(data.sizes, 8, 2, 0, last_batch)
    assert plan.steps_of.tolist() == expect.tolist()
    assert expect.tolist() == ([2, 6, 10] if last_batch == "keep" else [0, 4, 10])
    for i, n in enumerate(SIZES):
        per_epoch = int(expect[i]) // 2
        for epoch in range(2):
            seen = []
            for k in range(epoch * per_epoch, (epoch + 1) * per_epoch):
                length = int(plan.lengths[i, k])
                assert length == (8 if last_batch == "drop" else min(8, n - (k % per_epoch) * 8))
                seen += plan.ids[k, i, :length].tolist()
            owned = data.node_indices(i).tolist()
            if last_batch == "keep":
                assert sorted(seen) == sorted(owned)  # every sample once per epoch
            else:
                assert len(set(seen)) == len(seen) and set(seen) <= set(owned)


def test_a_batch_larger_than_every_node_is_each_nodes_whole_data() -> None:
    """batch_size 2**63 (beyond int64) plans as batch_size 10**6: one step of all n_i samples
    ("keep"), none ("drop"), the same batches."""
    data = three_nodes()
    for last_batch, steps in (("keep", [1, 1, 1]), ("drop", [0, 0, 0])):
        assert steps_per_node(data.sizes, 2**63, 1, 0, last_batch).tolist() == steps
    huge, big = (data.plan(seed=2, t=0, batch_size=b, local_epochs=1) for b in (2**63, 10**6))
    assert huge.lengths.tolist() == big.lengths.tolist() == [[n] for n in SIZES]
    assert torch.equal(huge.ids, big.ids)


def test_fixed_local_steps_take_full_batches_across_epochs() -> None:
    data = three_nodes()
    plan = data.plan(seed=0, t=3, batch_size=8, local_epochs=0, local_steps=5)
    assert plan.steps_of.tolist() == [5, 5, 5]
    assert plan.lengths[0].tolist() == [7] * 5 and plan.lengths[2].tolist() == [8] * 5
    first = plan.ids[:, 1, :8].flatten().tolist()  # node 1: 40 draws over 2 epochs of 23
    assert sorted(first[:23]) == data.node_indices(1).tolist()


def test_a_step_with_unequal_batches_is_weighted_and_equal_batches_are_not() -> None:
    data = three_nodes()
    plan = data.plan(seed=0, t=0, batch_size=8, local_epochs=1)
    nodes = torch.tensor([2, 1, 0])  # in order of decreasing steps: 5, 3, 1
    first = data.batch(plan, 0, nodes)  # 8, 8 and 7 samples
    assert first.weight is not None
    assert first.weight.sum(1).tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-15)
    assert (first.weight[2] > 0).sum() == 7
    assert data.batch(plan, 3, nodes[:1]).weight is None  # node 2 alone still steps


def test_ragged_population_equals_separate_single_node_loops_float64(one_thread) -> None:
    """Every node of a ragged population, trained in one batched phase (the mlp's own backward
    with weights for the partial batches), ends where it ends trained alone by torch.optim.SGD,
    with momentum, weight decay and SAM."""
    for solver in ({"algorithm__name": "dfedavgm", "algorithm__momentum": 0.9,
                    "algorithm__weight_decay": 1e-3},
                   {"algorithm__name": "dfedsam", "algorithm__rho": 0.05}):
        rows = {}
        for executor in ("vectorized", "loop"):
            ctx, algorithm = build(ragged(engine__executor=executor, **solver))
            assert not ctx.data.balanced
            for t in range(2):
                play(algorithm, ctx, t, ctx.schedule.at(t))
            rows[executor] = {k: v.clone() for k, v in ctx.population.params.items()}
        diff = max((rows["vectorized"][k] - rows["loop"][k]).abs().max().item()
                   for k in rows["loop"])
        assert diff < 1e-12


@pytest.mark.parametrize("overrides", [
    {"model__name": "cnn", "algorithm__name": "dfedsam", "algorithm__rho": 0.01},
    {"engine__chunk_size": 4},
])
def test_ragged_autograd_path_and_chunks_equal_the_loop(overrides, one_thread) -> None:
    rows = {}
    for executor in ("vectorized", "loop"):
        ctx, algorithm = build(ragged(engine__executor=executor, **overrides))
        play(algorithm, ctx, 0, ctx.schedule.at(0))
        rows[executor] = {k: v.clone() for k, v in ctx.population.params.items()}
    assert max((rows["vectorized"][k] - rows["loop"][k]).abs().max().item()
               for k in rows["loop"]) < 1e-12


def test_fedavg_weights_clients_by_their_samples() -> None:
    """Hand-computed: the server model is sum_i n_i x_i / sum n over the clients that trained
    (their rows of the population hold the models they sent); uniform is the plain mean."""
    for weights in ("samples", "uniform"):
        cfg = ragged(algorithm__name="fedavg", topology__name="star",
                     algorithm__participation=0.5, algorithm__weights=weights)
        ctx, algorithm = build(cfg)
        play(algorithm, ctx, 0, ctx.schedule.at(0))
        nodes = algorithm.last_nodes
        n = torch.as_tensor(ctx.data.sizes[nodes.numpy()], dtype=torch.float64)
        w = n / n.sum() if weights == "samples" else torch.full_like(n, 1 / len(n))
        for k, v in algorithm.server.items():
            expect = torch.einsum("m,m...->...", w, ctx.population.params[k][nodes])
            assert torch.allclose(v, expect, atol=1e-14, rtol=0)
        assert len(set(n.tolist())) > 1  # the weights differ from the mean


def test_each_algorithm_records_its_papers_weights() -> None:
    from p2pfl.config import config_from_dict

    def weights_of(name: str) -> str:
        raw = {"algorithm": {"name": name}, "topology": {"name": "star"}}
        return config_from_dict(raw).algorithm.weights

    assert weights_of("fedavg") == "samples" and weights_of("fedgloss") == "samples"
    assert weights_of("scaffold") == "uniform" and weights_of("feddyn") == "uniform"


def test_scaffold_control_uses_each_clients_own_steps() -> None:
    """Option II of SCAFFOLD with c = c_i = 0: c_i+ = (x - y_i) / (K_i lr), K_i the client's own
    number of steps (they differ here)."""
    ctx, algorithm = build(ragged(algorithm__name="scaffold", topology__name="star",
                                  algorithm__participation=1.0))
    start = {k: v.clone() for k, v in algorithm.server.items()}
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    a = algorithm.cfg
    steps = steps_per_node(ctx.data.sizes, a.batch_size, a.local_epochs, 0)
    assert len(set(steps.tolist())) > 1
    nodes = torch.arange(ctx.num_nodes)
    control = algorithm.client_control.rows(nodes)
    for k, c in control.items():
        y = ctx.population.params[k]
        scale = torch.as_tensor(steps, dtype=torch.float64) * algorithm.lr(0)
        expect = (start[k] - y) / scale.view(-1, *[1] * (y.dim() - 1))
        assert torch.allclose(c, expect, atol=1e-12, rtol=0)


def test_node_with_no_step_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no local step .* last_batch"):
        build(ragged(algorithm__batch_size=500, algorithm__last_batch="drop"))
    with pytest.raises(ConfigError, match="last_batch"):
        build(small_config(algorithm__last_batch="drop"))  # local_steps > 0 takes full batches


def test_a_partition_parameter_the_partition_does_not_read_is_refused() -> None:
    with pytest.raises(ConfigError, match="data.min_size.*does not read it"):
        build(small_config(data__partition="iid", data__alpha=0.3, data__min_size=3))
    with pytest.raises(ConfigError, match="data.alpha.*does not read it"):
        build(small_config(data__partition="iid"))  # small_config's alpha is 0.5


def test_local_test_split_gives_per_node_metrics_and_records(tmp_path) -> None:
    cfg = ragged(data__local_test=0.2, rounds=1)
    history = run(cfg, tmp_path / "r")
    record = history[-1]
    assert 0 <= record["test_acc_node_worst10"] <= record["test_acc_node_mean"] <= 1
    assert record["test_acc_node_std"] >= 0
    data = json.loads((tmp_path / "r" / "data.json").read_text())
    assert data["partition"] == {"name": "label_dirichlet", "alpha": 0.3, "min_size": 10,
                                 "cut_tolerance": 0.0}
    assert len(data["sizes"]) == 6 and len(set(data["sizes"])) > 1
    assert [sum(c) for c in data["label_counts"]] == data["sizes"]
    total = [s + t for s, t in zip(data["sizes"], data["local_test_sizes"])]
    assert sum(total) == 600  # label_dirichlet deals every sample; 20 % of each held out


def test_resume_refuses_a_changed_partition(tmp_path) -> None:
    out = tmp_path / "r"
    cfg = ragged(rounds=2)
    run(with_overrides(cfg, {"rounds": 1}), out)
    changed = json.loads((out / "data.json").read_text())
    changed["partition_sha256"] = "0" * 64
    (out / "data.json").write_text(json.dumps(changed))
    with pytest.raises(ConfigError, match="partition differs"):
        run(cfg, out, resume=True)


def test_a_partition_of_unequal_lists_and_a_partitioner_function_run(tmp_path) -> None:
    lists = [list(range(0, 50)), list(range(50, 60)), list(range(60, 200)), [200, 201],
             list(range(202, 400)), list(range(400, 600))]
    cfg = small_config(data__partition="dirichlet", rounds=1)
    cfg = with_overrides(cfg, {"data.alpha": 0.3})
    history = run(cfg, tmp_path / "a", partition=lists)
    assert np.isfinite(history[-1]["test_acc"])
    sizes = json.loads((tmp_path / "a" / "data.json").read_text())["sizes"]
    assert sizes == [50, 10, 140, 2, 198, 200]

    def halves(labels, num_nodes, rng):
        order = rng.permutation(len(labels))
        return np.array_split(order, num_nodes)

    run(cfg, tmp_path / "b", partition=halves)
    with pytest.raises(ConfigError, match="node 1 has no samples"):
        run(cfg, tmp_path / "c", partition=[[0]] + [[]] + [[i] for i in range(2, 6)])


def test_data_describe_prints_sizes_and_skew_and_draws_bars(tmp_path, capsys) -> None:
    from p2pfl.cli import main
    from tests.conftest import tiny_toml

    path = tmp_path / "c.toml"
    path.write_text(tiny_toml('[[compare]]\n"algorithm.name" = "dfedavg"').replace(
        'num_nodes = 4', 'num_nodes = 4\npartition = "label_dirichlet"\nmin_size = 5'))
    assert main(["data", "describe", str(path), "--json", "--out", str(tmp_path / "bars")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["partition"] == "label_dirichlet" and result["nodes"] == 4
    assert sum(result["sizes"]) == result["samples"] == 200  # every sample dealt
    assert result["size_min"] == min(result["sizes"]) >= 5 and 0 <= result["label_tv"] <= 1
    assert (tmp_path / "bars.png").stat().st_size > 0
    assert main(["data", "describe", str(path), "--set", "data.min_size=0"]) == 2
    assert "data.min_size" in capsys.readouterr().err


def test_partition_summary_counts_effective_classes_by_label_entropy() -> None:
    from analysis.partition import partition_summary

    counts = np.array([[10, 0, 0], [5, 5, 0], [4, 4, 4], [98, 1, 1]])
    result = partition_summary(counts)
    assert result["classes_per_node"] == (1 + 2 + 3 + 3) / 4  # a sample is a class held
    h = -(0.98 * np.log(0.98) + 2 * 0.01 * np.log(0.01))  # 98 / 1 / 1: one class, in effect
    assert result["effective_classes_per_node"] == pytest.approx((1 + 2 + 3 + np.exp(h)) / 4,
                                                                 rel=1e-12)
    assert np.exp(h) == pytest.approx(1.1184, abs=1e-4)


def test_data_describe_reads_a_study_config_at_its_first_seed(tmp_path, capsys) -> None:
    """A study config's [data] at the seed its first cells run with (--set seed=K: another);
    a sweep over the number of nodes asks for one."""
    from p2pfl.cli import main
    from tests.conftest import tiny_toml

    plain = tiny_toml("").replace('num_nodes = 4', 'num_nodes = 4\npartition = "label_dirichlet"'
                                  '\nalpha = 0.1\nmin_size = 5')
    (tmp_path / "plain.toml").write_text(plain)
    study = tmp_path / "study.toml"
    study.write_text(plain + '[study]\nseeds = [3, 1]\ntopologies = ["ring", "complete"]\n')

    def described(*args: str) -> dict:
        assert main(["data", "describe", *args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    result = described(str(study))
    assert result["seed"] == 3 and result["nodes"] == 4
    assert result == described(str(tmp_path / "plain.toml"), "--set", "seed=3")
    assert result != described(str(tmp_path / "plain.toml"))  # seed 0: another split
    assert described(str(study), "--set", "seed=1") == described(
        str(tmp_path / "plain.toml"), "--set", "seed=1")
    assert 1 <= result["effective_classes_per_node"] <= result["classes_per_node"]
    assert main(["data", "describe", str(study)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("study: seed 3: the first of the study's seeds (3, 1)")
    assert "effective_classes_per_node" in printed
    study.write_text(plain + '[study]\n[[study.sweep]]\nlabel = "ring"\nvary = "num_nodes"\n'
                     'values = [4, 5]\ntopology = "ring"\n')
    assert main(["data", "describe", str(study)]) == 2
    assert "varies num_nodes (4, 5): describe one with --set data.num_nodes=N" in (
        capsys.readouterr().err)
    assert described(str(study), "--set", "data.num_nodes=5")["nodes"] == 5


def test_segment_permutations_even_when_a_key_rounds_into_the_next_segment() -> None:
    from p2pfl.core.federated import segment_permutations

    lengths = torch.tensor([2, 3] * 300)
    keys = torch.rand(int(lengths.sum()), generator=torch.Generator().manual_seed(0),
                      dtype=torch.float64)
    keys[747] = 1 - 2**-53  # in segment 299 (starting at 747): 299 + key is 300.0 in float64,
    keys[750] = 0.0  # a tie with the first key of segment 300
    perms = segment_permutations(lengths, keys).split(lengths.tolist())
    starts = (torch.cumsum(lengths, 0) - lengths).tolist()
    for start, length, perm in zip(starts, lengths.tolist(), perms):
        assert sorted(perm.tolist()) == list(range(length))
        assert torch.equal(perm, keys[start:start + length].argsort())


def _batch_norm_model(seed: int = 0) -> torch.nn.Module:
    """A model that normalises over the batch: a padded row would move every real row."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 12),
                               torch.nn.BatchNorm1d(12, track_running_stats=False),
                               torch.nn.ReLU(), torch.nn.Linear(12, 10))


@pytest.mark.parametrize("solver", [{"algorithm__name": "dfedavgm", "algorithm__momentum": 0.9},
                                    {"algorithm__name": "dfedsam", "algorithm__rho": 0.05}])
def test_batch_statistics_never_see_the_padding_of_partial_batches(solver, one_thread) -> None:
    """Unequal node sizes give steps whose batches differ in width (padding weighted 0); a
    BatchNorm without running statistics still normalises over each node's real samples only,
    so the batched population ends where the per-node loop does (it was 8.8e-3 away)."""
    from p2pfl.objects import Parts

    rows = {}
    for executor in ("vectorized", "loop"):
        cfg = ragged(engine__executor=executor, **solver)
        ctx, algorithm = build(cfg, parts=Parts(model=_batch_norm_model()))
        assert ctx.batch_statistics and not ctx.data.balanced
        play(algorithm, ctx, 0, ctx.schedule.at(0))
        rows[executor] = {k: v.clone() for k, v in ctx.population.params.items()}
    assert max((rows["vectorized"][k] - rows["loop"][k]).abs().max().item()
               for k in rows["loop"]) < 1e-12


def test_own_accuracy_with_batch_statistics_is_each_model_alone() -> None:
    """evaluate_own pads shorter sample lists; with batch statistics it must not: every model
    is right on every sample whose label is its own prediction on the batch it is alone in."""
    from p2pfl.core.metrics import evaluate_own
    from p2pfl.core.models import stacked_forward

    model = _batch_norm_model().double()
    forward = stacked_forward(model)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(60, 784, dtype=torch.float64, generator=gen)
    params = {k: torch.stack([v.detach() * (1 + 0.5 * i) for i in range(3)])
              for k, v in model.named_parameters()}
    rows = [np.arange(0, 5), np.arange(5, 25), np.arange(25, 37)]
    y = torch.zeros(60, dtype=torch.int64)
    with torch.no_grad():
        for i, r in enumerate(rows):  # labels: model i's predictions, batches of 8 alone
            own = {k: v[i:i + 1] for k, v in params.items()}
            for s in range(0, len(r), 8):
                y[r[s:s + 8]] = forward(own, x[r[s:s + 8]][None]).argmax(-1)[0]
    together = evaluate_own(forward, params, x, y, rows, batch_size=8, chunk_size=3,
                            batch_statistics=True)
    assert together.tolist() == [1.0, 1.0, 1.0]
    padded = evaluate_own(forward, params, x, y, rows, batch_size=8, chunk_size=3)
    assert padded.min() < 1.0  # the padding moves the batch statistics
