"""`p2pfl algorithms` and `p2pfl topologies`: what exists, listed."""

from __future__ import annotations

import pytest

from p2pfl.cli import main


def test_the_algorithms_and_topologies_are_listed_with_sources_and_defaults(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json as json_module

    import topologies as T
    from algorithms import ALGORITHMS

    assert main(["algorithms", "--json"]) == 0
    table = json_module.loads(capsys.readouterr().out)
    assert set(table) == {"all", "server", *ALGORITHMS}
    for name, cls in ALGORITHMS.items():
        assert cls.source and table[name]["source"] == cls.source  # every one names its paper
    assert table["dfedsgpsm"]["options"] == {"rho": 0.05, "momentum": 0.9, "clip_norm": 10.0,
                                             "momentum_form": "heavy_ball"}
    assert "App. A" in table["dfedsgpsm"]["sources"]["momentum"]  # the paper's defaults, sourced
    assert set(table["dfedsgpsm"]["sources"]) == {"rho", "momentum", "clip_norm"}
    assert table["fedsam"]["options"]["rho"] == 0.05  # a server algorithm's own rho is listed
    assert "rho" not in table["fedavg"]["options"]  # ... the shared one (0) is the server row's
    assert table["fedprox"]["options"]["prox_mu"] == 0.01 and table["all"]["options"]["lr"] == 0.1
    assert main(["algorithms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ALGORITHMS) + 2 and lines[2].startswith("dpsgd ")
    assert any(line.startswith("dfedsgpsm ") and "momentum=0.9" in line
               and "; momentum from Li et al. 2023" in line for line in lines)
    assert main(["topologies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(T.TOPOLOGIES)
    assert any(line.startswith("exponential ") and "(base=2, directed=True)" in line
               for line in lines)


def test_one_algorithm_is_shown_option_by_option_with_its_sources_and_baselines(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["algorithms", "dfedsgpsm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dfedsgpsm  push-sum  DFedSGPSM: Li et al. 2023")
    assert "  momentum = 0.9: heavy-ball coefficient" in out
    assert "    default from Li et al. 2023 (DFedSGPSM), arXiv 2310.05093, App. A" in out
    assert "  baseline: rho = 0 computes DFedSGPM (no SAM ascent)" in out
    assert main(["algorithms", "dfedsgpsm", "--json"]) == 0
    assert '"sources"' in capsys.readouterr().out
    assert main(["algorithms", "dfedsgpms"]) == 2  # one line, exit 2
    assert "unknown algorithm 'dfedsgpms'" in capsys.readouterr().err
