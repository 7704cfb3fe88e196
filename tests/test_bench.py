"""The benchmark suite's pieces: the FLOP rule on hand-counted models, and one tiny workload run
end to end (fields present and finite; no timing is asserted)."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from torch import nn

from bench.flops import (
    forward_flops_per_sample,
    gradient_flops_per_sample,
    layer_flops,
    products_gflops,
)
from bench.memory import PeakMemory
from bench.runner import run_workload, time_rounds
from bench.suite import main as suite_main
from bench.suite import mixing_line, parser, table_rows
from bench.workloads import QUICK_WORKLOADS, WORKLOADS, Workload, select, workload_config
from p2pfl.cli import main as cli_main
from p2pfl.cli.main import _parser
from p2pfl.core.models import build_model
from p2pfl.data.loaders import make_synthetic
from p2pfl.engine import build
from tests.conftest import tiny_toml


def test_mlp_flops_by_hand():
    # fc1 4->200, fc2 200->200, fc3 200->3; multiply-adds 800 + 40000 + 600.
    model = build_model("mlp", (1, 2, 2), 3)
    assert forward_flops_per_sample(model, (1, 2, 2)) == 2 * 41_400
    # 3 x forward, minus fc1's input gradient (2 x 800).
    assert gradient_flops_per_sample(model, (1, 2, 2)) == 3 * 82_800 - 1_600 == 246_800


def test_cnn_flops_by_hand():
    # 1x16x16: conv1 5x5 1->64 gives 64x12x12, pool 6x6; conv2 5x5 64->64 gives 64x2x2, pool 1x1;
    # then 64 -> 384 -> 192 -> 10.
    model = build_model("cnn", (1, 16, 16), 10)
    macs = [25 * 1 * 64 * 144, 25 * 64 * 64 * 4, 64 * 384, 384 * 192, 192 * 10]
    assert [name for name, _ in layer_flops(model, (1, 16, 16))] == [
        "conv1", "conv2", "fc1", "fc2", "fc3"]
    assert gradient_flops_per_sample(model, (1, 16, 16)) == 6 * sum(macs) - 2 * macs[0]
    assert gradient_flops_per_sample(model, (1, 16, 16)) == 3_980_544


def test_grouped_strided_conv_flops():
    # Conv2d 4->6, 3x3, groups 2, stride 2, padding 1 on 8x8: output 6x4x4, 2 x 3 x 3 inputs each.
    model = nn.Sequential(nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), nn.Flatten(),
                          nn.Linear(96, 5))
    forward = 2 * (2 * 3 * 3 * 96) + 2 * 96 * 5
    assert forward_flops_per_sample(model, (4, 8, 8)) == forward
    assert gradient_flops_per_sample(model, (4, 8, 8)) == 3 * forward - 2 * (2 * 3 * 3 * 96)


def test_tiny_workload_runs(one_thread):
    dataset = make_synthetic(64, 16, seed=0)
    tiny = Workload("tiny", "mlp", "synthetic", num_nodes=2, loop_nodes=2, local_steps=1,
                    batch_size=8)
    result = run_workload(tiny, dataset, "synthetic 1x28x28", "cpu", rounds=1,
                          matmul_gflops={"fp32": 100.0, "bf16": 200.0},
                          precisions=("fp32", "bf16"))
    per_sample = gradient_flops_per_sample(build_model("mlp", (1, 28, 28), 10), (1, 28, 28))
    assert result["gradient_flops_per_sample"] == per_sample == 3 * 2 * (
        784 * 200 + 200 * 200 + 200 * 10) - 2 * 784 * 200
    assert result["num_params"] == 784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10
    rows = result["rows"]
    assert [(r["solver"], r["precision"]) for r in rows] == [
        ("sgd", "fp32"), ("sgd", "bf16"), ("sam", "fp32"), ("sam", "bf16")]
    for r in rows:
        solver = r["solver"]
        assert r["algorithm"] == {"sgd": "dfedsgpm", "sam": "dfedsgpsm"}[solver]
        for key in ("s_per_round", "node_steps_per_s", "samples_per_s", "gflops",
                    "pct_of_matmul", "peak_mem_mb", "loop_s_per_round", "speedup"):
            assert math.isfinite(r[key]) and r[key] >= 0, (solver, key, r[key])
        assert r["s_per_round"] > 0 and r["loop_s_per_round"] > 0
        gradients = 2 if solver == "sam" else 1
        assert r["flops_per_round"] == 2 * 1 * 8 * gradients * per_sample
        assert r["node_steps_per_s"] * r["s_per_round"] == pytest.approx(2)
        assert r["pct_of_matmul"] == pytest.approx(100 * r["gflops"] / r["matmul_gflops"])
        assert r["matmul_gflops"] == {"fp32": 100.0, "bf16": 200.0}[r["precision"]]
        assert r["loop_nodes"] == 2 and not r["loop_scaled"]
        assert r["num_params"] == result["num_params"] and r["chunk_size"] >= 1
    sgd = [r for r in rows if r["solver"] == "sgd"]  # one loop timing for both precisions
    assert sgd[0]["loop_s_per_round"] == sgd[1]["loop_s_per_round"]
    with pytest.raises(ValueError, match="tiny: 32 samples per node, fewer than the batch size 40"):
        run_workload(Workload("tiny", "mlp", "synthetic", 2, 2, 1, 40), dataset, "", "cpu", 1,
                     {"fp32": 1.0})
    for r in rows:
        assert r["s_range"][0] <= r["s_per_round"] <= r["s_range"][1]
        assert r["loop_s_range"][0] <= r["loop_s_per_round"] <= r["loop_s_range"][1]
        assert r["mem_per_node_mb"] == pytest.approx(r["peak_mem_mb"] / 2)
        if r["precision"] == "fp32":  # the products' ceiling, measured beside the round
            assert r["products_gflops"] > 0
            assert r["pct_of_products"] == pytest.approx(100 * r["gflops"] / r["products_gflops"])
        else:
            assert r["products_gflops"] is None is r["pct_of_products"]
    result["mixing"] = "bench.mixing not present"
    for r in rows:  # steady rounds: no mark
        r["s_range"], r["loop_s_range"] = [1.0, 1.2], [2.0, 2.5]
    lines = table_rows(result)
    assert len(lines) == 4 and "bf16" in lines[1] and "fp32" in lines[2]
    assert not any("!" in line for line in lines)
    rows[2]["loop_s_range"] = [0.46, 1.06]  # the loop switched speed during the run
    assert table_rows(result)[2].endswith("! rounds ranged 1-1.2 s, loop 0.46-1.06 s")
    assert "n/a" in mixing_line(result)


def test_bf16_is_probed_and_left_out_with_its_reason(one_thread, monkeypatch):
    import bench.runner as R

    dataset = make_synthetic(64, 16, seed=0)
    tiny = Workload("tiny", "mlp", "synthetic", num_nodes=2, loop_nodes=2, local_steps=1,
                    batch_size=8)
    monkeypatch.setattr(R, "bf16_support", lambda device: (False, "no bf16 products here"))
    result = run_workload(tiny, dataset, "", "cpu", 1, {"fp32": 1.0, "bf16": 1.0},
                          solvers=("sgd",), precisions=("fp32", "bf16"), bf16_auto=True)
    assert [(r["precision"], r["bf16_off"]) for r in result["rows"]] == [
        ("fp32", "no bf16 products here")]
    result["mixing"] = "n/a"
    assert table_rows(result)[1] == "  bf16 off for tiny sgd: no bf16 products here"
    # a device with bf16: the probe rounds decide (here bf16's rounds take twice as long)
    monkeypatch.setattr(R, "bf16_support", lambda device: (True, "AMX"))
    fp32, bf16 = (object(), object(), 0), (object(), object(), 0)
    monkeypatch.setattr(R, "timed_round", lambda ctx, a, t: 2.0 if ctx is bf16[0] else 1.0)
    assert R.probe_bf16(fp32, bf16, torch.device("cpu")) == (
        "a probe round took 2.000 s in bf16 against 1.000 s in fp32 (AMX)")
    monkeypatch.setattr(R, "timed_round", lambda ctx, a, t: 0.5 if ctx is bf16[0] else 1.0)
    assert R.probe_bf16(fp32, bf16, torch.device("cpu")) is None


def test_products_ceiling_counts_the_rounds_flops():
    model = build_model("mlp", (1, 28, 28), 10)
    rate = products_gflops(model, (1, 28, 28), 3, 2, 2, 4, torch.device("cpu"), repeats=1)
    assert rate is not None and rate > 0
    assert products_gflops(build_model("cnn", (3, 32, 32), 10), (3, 32, 32), 2, 2, 1, 2,
                           torch.device("cpu")) is None


def test_workload_selection():
    assert [w.name for w in select(WORKLOADS, "mlp")] == ["mlp-10", "mlp-100", "mlp-1000"]
    assert [w.name for w in select(QUICK_WORKLOADS, "cnn,mlp-10")] == ["mlp-10", "cnn"]
    with pytest.raises(ValueError, match="unknown workload vgg"):
        select(WORKLOADS, "vgg")


def test_bad_options_exit_2(capsys):
    assert suite_main(["--only", "vgg", "--device", "cpu"]) == 2
    assert "--only: unknown workload vgg" in capsys.readouterr().err  # one line, exit 2
    assert suite_main(["--rounds", "0", "--device", "cpu"]) == 2
    assert suite_main(["--nproc", "2", "--rounds", "0", "--device", "cpu"]) == 2
    assert suite_main(["--precision", "fp16", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--precision: unknown precision fp16 (allowed: auto, fp32, bf16)" in err


def test_cli_bench_options():
    args, rest = _parser().parse_known_args(["bench", "--quick", "--only", "mlp-10"])
    assert (args.command, [*rest, *args.argv]) == ("bench", ["--quick", "--only", "mlp-10"])
    args = parser().parse_args(["--quick", "--only", "mlp-10", "--rounds", "2", "--device",
                                "cpu", "--json-out", "b.json"])
    assert (args.quick, args.only, args.rounds, args.device, args.json_out) == (
        True, "mlp-10", 2, "cpu", "b.json")
    assert cli_main(["bench", "--only", "vgg", "--device", "cpu"]) == 2


def test_cli_bench_without_the_suite(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "bench.suite", None)  # as if bench/ were not importable
    assert cli_main(["bench", "--quick"]) == 2
    assert "python -m p2pfl.cli bench" in capsys.readouterr().err


def test_peak_memory_sees_an_allocation():
    device = torch.device("cpu")
    with PeakMemory(device) as memory:
        block = torch.ones(16 * 2**20)  # 64 MiB, every page touched
    assert memory.peak_bytes >= 0.9 * block.numel() * 4


def test_mixing_line_reads_the_mixing_dict():
    result = {"workload": "mlp-100", "num_nodes": 100, "num_params": 199_210,
              "mixing": {"seconds": 0.02, "gb_per_s": 8.0, "copy_gb_per_s": 16.0}}
    assert mixing_line(result) == ("mixing mlp-100 (N=100, P=199,210): 0.0200 s, 8.0 GB/s "
                                   "(copy 16.0 GB/s, 50% of copy)")


def test_mixing_line_of_a_real_measurement(one_thread):
    from bench.mixing import mixing_throughput

    measured = mixing_throughput(40, 1000, 4, "sparse", torch.device("cpu"), repeats=1)
    line = mixing_line({"workload": "w", "num_nodes": 40, "num_params": 1000,
                        "mixing": {**measured, "copy_gb_per_s": 1.0}})
    assert "sparse" in line and "nan" not in line


def test_build_uses_a_supplied_cifar_shaped_dataset(one_thread):
    dataset = make_synthetic(40, 10, seed=1, shape=(3, 32, 32))
    assert dataset.x_train.shape == (40, 3, 32, 32) and dataset.input_shape == (3, 32, 32)
    tiny = Workload("tiny-cnn", "cnn", "cifar", num_nodes=2, loop_nodes=2, local_steps=1,
                    batch_size=4)
    ctx, algorithm = build(workload_config(tiny, "sam", "vectorized", 2, "cpu", dataset.name),
                           dataset)
    assert ctx.data.input_shape == (3, 32, 32) and (ctx.data.sizes == 20).all()
    assert ctx.population.num_params == 797_962  # cnn on 3x32x32, as docs/performance.md says
    assert len(time_rounds(ctx, algorithm, 1)) == 1


def test_compile_reaches_the_vectorized_population_only():
    tiny = Workload("tiny", "mlp", "synthetic", 2, 2, 1, 4)
    assert workload_config(tiny, "sgd", "vectorized", 2, "cpu", "synthetic", True).engine.compile
    assert not workload_config(tiny, "sgd", "loop", 2, "cpu", "synthetic", True).engine.compile
    assert not workload_config(tiny, "sgd", "vectorized", 2, "cpu", "synthetic").engine.compile


def test_reproduce_runs_each_experiment_and_continues_it(tmp_path, monkeypatch, capsys):
    from bench import reproduce

    config = tmp_path / "paper.toml"
    config.write_text(tiny_toml("""[[compare]]
label = "sgp"
"algorithm.name" = "osgp"
[[compare]]
label = "osgp"
"algorithm.name" = "osgp"
""", topology="exponential", rounds=3))
    monkeypatch.setattr(reproduce, "EXPERIMENTS",
                        (reproduce.Experiment("tiny", str(config), 2, "a tiny paper"),))
    out = tmp_path / "out"
    assert reproduce.main(["--out", str(out), "--seeds", "0,1", "--rounds", "2", "--quiet"]) == 0
    assert "## tiny" in capsys.readouterr().out
    assert (out / "tiny" / "curves.png").exists()
    assert "| sgp | 2 | 2 |" in (out / "tiny" / "table.md").read_text()
    assert reproduce.main(["--out", str(out), "--seeds", "0,1", "--quiet", "--figures",
                           str(tmp_path / "fig")]) == 0  # 2 -> 3 rounds
    assert (tmp_path / "fig" / "reproduction_tiny.png").exists()
    before = (out / "tiny" / "sgp" / "seed0" / "metrics.jsonl").read_text()
    assert reproduce.main(["--out", str(out), "--seeds", "0,1", "--rounds", "9", "--no-run",
                           "--quiet"]) == 0  # tabulates, trains nothing
    assert (out / "tiny" / "sgp" / "seed0" / "metrics.jsonl").read_text() == before
    assert "| osgp | 2 | 3 |" in (out / "tiny" / "table.md").read_text()
    assert reproduce.main(["--only", "nope"]) == 2
    assert "no experiment named 'nope'" in capsys.readouterr().err


def test_overlap_mix_is_timed_against_the_synchronous_one(one_thread):
    from bench.overlap import overlap_cost, overlap_line

    result = overlap_cost(12, 50, 3, "cpu", repeats=1)
    assert result["sync_s"] > 0 and result["overlap_s"] > 0
    assert overlap_line(result).startswith("overlap Push-Sum mix, N = 12, P = 50, delays 0..3")


def test_capacity_search_reports_only_measured_populations(monkeypatch):
    import bench.capacity as C

    measured, measure_apart = [], C.measure_apart

    def fake(name, n, device):  # 3 MiB a node above 1 GiB of fixed cost; none past 9,000
        measured.append(n)
        return None if n > 9000 else 2**30 + 3 * 2**20 * n

    monkeypatch.setattr(C, "measure_apart", fake)
    monkeypatch.setattr(C, "available_bytes", lambda device: 2**40)
    result = C.search("mlp-100", 16 * 2**30, "cpu", echo=lambda line: None)
    fits = result["largest_fitting"]
    assert fits in measured and fake("", fits, "") <= 16 * 2**30
    assert fake("", fits, "") >= 0.97 * 16 * 2**30  # aimed within 3 % under the budget
    assert measured[:2] == [100, 200] and max(measured) > fits  # and one above it was tried
    assert result["bytes_per_node"] == pytest.approx(3 * 2**20)
    with pytest.raises(RuntimeError, match="mlp-100 at N = 5: crashed \\(signal 11\\)"):
        monkeypatch.setattr(C.subprocess, "run", lambda *a, **k: type(
            "Done", (), {"returncode": -11, "stderr": "", "stdout": ""})())
        measure_apart("mlp-100", 5, "cpu")


def test_repeats_give_each_rows_median_and_range():
    from bench.repeats import repeat_lines

    def result(seconds, speedup):
        return {"workload": "mlp-100", "rows": [
            {"solver": "sgd", "precision": "fp32", "s_per_round": seconds, "speedup": speedup,
             "pct_of_matmul": 40.0, "pct_of_products": None, "matmul_gflops": 150.0,
             "products_gflops": None}]}

    lines = repeat_lines([result(0.2, 2.5), result(0.1, 3.0), result(0.3, 2.0)])
    assert lines == ["  mlp-100 sgd fp32, 3 repeats, median (range): s/round 0.200 "
                     "(0.100-0.300), vs loop 2.50 (2.00-3.00), % matmul 40 (40-40), % products "
                     "n/a, matmul GFLOP/s 150 (150-150), products GFLOP/s n/a"]
    assert suite_main(["--repeats", "0", "--device", "cpu"]) == 2


def test_profile_sorts_a_rounds_operators_into_parts(one_thread):
    from bench.profile import breakdown, part_of

    assert part_of("aten::baddbmm") == "products (bmm, baddbmm)"
    assert part_of("aten::addmm") == "mixing (addmm, mm)"
    assert part_of("aten::index_select") == "minibatch gathering"
    assert part_of("aten::frobnicate") == "other operators"
    lines = breakdown("mlp-10", "sgd", 1, "cpu", 3)
    parts = {line[:40].strip(): float(line[40:50]) for line in lines[2:10] if line.strip()}
    assert parts["products (bmm, baddbmm)"] > 0 and parts["mixing (addmm, mm)"] > 0
    assert "Python, dispatch and the rest" in parts and len(lines) == 2 + len(parts) + 1 + 3


def test_capacity_and_profile_refuse_bad_input_in_one_line(monkeypatch, capsys):
    import bench.capacity as C
    from bench.profile import main as profile_main

    assert C.main(["--only", "vgg"]) == 2 and C.main(["--budget-gb", "0"]) == 2
    assert profile_main(["--rounds", "0"]) == 2 and profile_main(["--only", "vgg"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(": error: " in line for line in err)
    monkeypatch.setattr(C, "measure_apart", lambda name, n, device: 2**30 * n)  # 1 GiB a node
    with pytest.raises(RuntimeError, match="no population measured fits 16 GiB"):
        C.search("mlp-100", 16 * 2**30, "cpu", echo=lambda line: None)


def test_capacity_search_when_the_budget_is_near_the_start(monkeypatch):
    import bench.capacity as C

    monkeypatch.setattr(C, "measure_apart", lambda name, n, device: 2**20 * n)  # 1 MiB a node
    monkeypatch.setattr(C, "available_bytes", lambda device: 2**40)
    result = C.search("mlp-100", 150 * 2**20, "cpu", echo=lambda line: None)  # 150 MiB
    assert result["largest_fitting"] == 147  # aimed between the two first, then 2 % above
    assert sorted(map(int, result["measured"])) == [100, 144, 147, 200]


def test_personal_protocols_reload_a_run_and_match_its_logged_metrics(one_thread, tmp_path,
                                                                      capsys):
    """The logged fine-tuning and the server model on the clients' splits come out of the
    reloaded checkpoint as the run logged them at its last round; the other protocols are
    different evaluations of the same models."""
    from bench.personal_protocols import load_run, main, protocols
    from p2pfl.engine import run
    from tests.conftest import small_config

    cfg = small_config(**{"algorithm__name": "fedavg", "topology__name": "star",
                          "data__num_nodes": 4, "algorithm__participation": 0.5,
                          "algorithm__personal_fraction": 0.3, "rounds": 3,
                          "eval__every": 1})
    last = run(cfg, tmp_path / "fedavg", figures=False)[-1]
    ctx, server, rounds = load_run(tmp_path / "fedavg")
    row = protocols(ctx, server, rounds, epochs=2)
    assert rounds == 3 and list(row) == ["server model", "head, as logged", "head, 2 epochs",
                                         "whole model", "own local model"]
    assert row["head, as logged"] == 100 * last["test_acc_personal"]
    assert row["server model"] == 100 * last["test_acc_personal_global"]
    assert all(0 <= v <= 100 for v in row.values())
    assert main([str(tmp_path / "fedavg"), "--epochs", "2"]) == 0
    assert f"| {tmp_path / 'fedavg'} | 3 | " in capsys.readouterr().out
    run(small_config(**{"algorithm__name": "fedavg", "topology__name": "star",
                        "data__num_nodes": 4, "rounds": 1}), tmp_path / "plain", figures=False)
    assert main([str(tmp_path / "plain")]) == 2
    assert "personal_fraction" in capsys.readouterr().err
