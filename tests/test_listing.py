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
    assert table["dfedsgpsm"]["options"] == {"rho": 0.0, "momentum": 0.0,
                                             "momentum_form": "heavy_ball"}
    assert table["fedprox"]["options"]["prox_mu"] == 0.01 and table["all"]["options"]["lr"] == 0.1
    assert main(["algorithms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ALGORITHMS) + 2 and lines[2].startswith("dpsgd ")
    assert main(["topologies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(T.TOPOLOGIES)
    assert any(line.startswith("exponential ") and "(base=2, directed=True)" in line
               for line in lines)
