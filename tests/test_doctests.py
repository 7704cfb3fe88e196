"""Every Examples section of the library runs: each module whose source holds a doctest prompt
is run by `doctest.testmod`, so no example rots unseen."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("topologies", "p2pfl", "algorithms", "analysis", "bench")


def modules_with_examples() -> list[str]:
    """The dotted names of the library's modules whose source holds '>>>', sorted."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_search_finds_the_examples_of_each_package() -> None:
    assert {"topologies.connectivity", "topologies.placement", "topologies.privacy",
            "p2pfl.data.partition", "analysis.privacy", "analysis.pairwise", "algorithms.adpsgd",
            "algorithms.fedbuff", "algorithms.attacks"} <= set(modules_with_examples())


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0
