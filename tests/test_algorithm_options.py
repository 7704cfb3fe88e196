"""Every algorithm reads exactly the [algorithm] fields of its Options and refuses the others."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from algorithms import ALGORITHMS, CENTRALIZED, Server
from algorithms.decentralized import READERS
from p2pfl.config import ConfigError, config_from_dict, declared_options, load_config
from p2pfl.options import AlgorithmOptions, check_values, common_default, default_source
from tests.conftest import option_names
from topologies import ParameterError

COMMON = {f.name for f in dataclasses.fields(AlgorithmOptions)}


def non_default(f: dataclasses.Field, tp: type) -> object:
    """A value of an option other than its default, inside its declared limits (so a new
    hyperparameter is covered here without a line of its own)."""
    meta, default = f.metadata, f.default
    if tp is bool:
        return not default
    if meta.get("choices"):
        return next(c for c in meta["choices"] if c != default)
    low, high = meta.get("low"), meta.get("high")
    if tp is int:
        return default + 1 if high is None or default + 1 <= high else default - 1
    if high is None:
        return default + 0.5
    if default < high:
        return (default + high) / 2
    return default - 0.5 if low is None else (default + low) / 2


# A valid non-default value of every declared field outside the common ones.
NON_DEFAULT = {k: non_default(f, tp) for k, (f, tp) in declared_options().items()
               if k not in COMMON}


def _build(name: str, **fields):
    cfg = config_from_dict({"algorithm": {"name": name, **fields}})
    return ALGORITHMS[name](cfg.algorithm)


def test_every_field_has_a_non_default_value():
    assert set(NON_DEFAULT) >= {"participation", "momentum", "rho", "prox_mu", "order",
                                "server_rho_warmup", "top_c"}
    for key, value in NON_DEFAULT.items():
        assert declared_options()[key][0].default != value, key


def test_a_field_has_one_default_and_one_set_of_limits_everywhere():
    """A field at its common default is dropped for an algorithm that does not declare it: that
    is only sound if every declaration agrees on it and on the limits; only an algorithm's
    paper's default (p2pfl.options.paper_default, with its source) may differ."""
    def shared(f: dataclasses.Field) -> tuple:
        return common_default(f), {k: v for k, v in f.metadata.items()
                                   if k not in ("source", "common")}

    for cls in ALGORITHMS.values():
        for f in dataclasses.fields(cls.Options):
            first = declared_options()[f.name][0]
            assert shared(f) == shared(first), (cls.name, f.name)
            if f.default != common_default(f):
                assert default_source(f), (cls.name, f.name)


def test_the_non_default_values_are_valid():
    for key, value in NON_DEFAULT.items():
        cls = next(c for c in ALGORITHMS.values() if key in option_names(c))
        check_values(dataclasses.replace(cls.Options(), **{key: value}))


def test_limits_come_from_the_declaration():
    with pytest.raises(ParameterError, match="out of range"):
        check_values(dataclasses.replace(ALGORITHMS["fedavg"].Options(), participation=1.5))
    with pytest.raises(ConfigError, match=r"^algorithm.participation: 0.0 is out of range "
                                          r"\(0, 1\]$"):
        config_from_dict({"algorithm": {"name": "fedavg", "participation": 0.0}})


def _cases():
    for name, cls in sorted(ALGORITHMS.items()):
        for variant in cls.variants:
            for key in [*NON_DEFAULT, "variant"]:
                if key != "variant" or variant == "paper":
                    yield name, variant, key


@pytest.mark.parametrize(("name", "variant", "key"), list(_cases()))
def test_a_field_is_read_or_refused(name, variant, key):
    cls = ALGORITHMS[name]
    base = {"variant": variant}
    if "rho_warmup" in option_names(cls) and key != "rho_warmup":
        base["rho_warmup"] = 2  # FedGloSS reads the warm-up fields only during a warm-up
    if key == "compress_bits" and "compressor" in option_names(cls):
        base["compressor"] = "qsgd"  # CHOCO reads the quantization bits only for QSGD
    if key == "personal_epochs" and key in option_names(cls):
        base["personal_fraction"] = 0.3  # the fine-tuning epochs need a personalised split
    if key in ("clique_averaging", "persistent_momentum", "one_push_in_flight") and \
            key in option_names(cls):
        base["local_steps"] = 1  # dpsgd and async_sgp take them with one local step only
    if key in READERS and key in option_names(cls):
        base["aggregator"] = READERS[key]  # a robust aggregator's own setting
    other_forms = {k for v, keys in cls.form_options.items() if v != variant for k in keys}
    in_form = key not in other_forms or key in cls.form_options.get(variant, ())
    if key == "variant":
        reads, value = "reference_code" in cls.variants, "reference_code"
    else:
        reads, value = key in option_names(cls) and in_form, NON_DEFAULT[key]
    fields = base | {key: value}
    if reads:
        _build(name, **fields)
        return
    with pytest.raises(ConfigError) as err:
        _build(name, **fields)
    assert err.value.field == f"algorithm.{key}"
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(f"algorithm.{key}: {name} ")


# (algorithm, field, accepted?): what docs/algorithms*.md say each algorithm reads.
SPOT = [
    ("fedavg", "prox_mu", False), ("fedprox", "prox_mu", True), ("fedavg", "server_rho", False),
    ("fedavg", "dyn_alpha", False), ("fedavg", "rho_larger", False), ("fedavg", "rho", True),
    ("fedavg", "server_lr", True), ("fedavg", "participation", True),
    ("fedavg", "sampling", True), ("fedavg", "gossip_steps", False),
    ("fedadam", "server_beta1", True), ("fedadam", "server_tau", True),
    ("fedavg", "server_beta2", False), ("fedcm", "cm_alpha", True), ("fedcm", "rho", True),
    ("mofedsam", "cm_alpha", True), ("fedavg", "cm_alpha", False),
    ("scaffold", "server_lr", True), ("scaffold", "rho", True), ("scaffold", "dyn_alpha", False),
    ("feddyn", "dyn_alpha", True), ("feddyn", "server_lr", False), ("feddyn", "rho", True),
    ("fedspeed", "quasi_alpha", True), ("fedsmoo", "quasi_alpha", False),
    ("fedsmoo", "server_lr", False), ("fedlesam", "server_lr", True),
    ("fedlesam", "correction_scale", False), ("fedlesam_d", "dyn_alpha", True),
    ("fedlesam_d", "server_lr", False), ("fedgmt", "ema_alpha", True),
    ("fedgmt", "kl_temperature", True), ("fedgmt", "distill_gamma", True),
    ("fedgmt", "momentum", True), ("fedgmt", "rho", True), ("fedgmt", "server_lr", False),
    ("fedgloss", "server_rho", True), ("fedgloss", "rho_warmup", True),
    ("fedgloss", "server_lr", True), ("naive_fedgloss", "server_rho", True),
    ("fedgloss", "cm_alpha", False), ("fedfsa", "rho_larger", True), ("fedfsa", "top_c", True),
    ("fedfsa", "personal_fraction", True), ("fedfsa", "cm_alpha", True),
    ("mofedsam", "rho_larger", False), ("dfedavg", "participation", False),
    ("dfedavg", "prox_mu", False), ("dfedavg", "server_lr", False),
    ("dfedavg", "variant", False), ("dfedavg", "momentum", False),
    ("dfedavgm", "momentum", True), ("dfedsgpsm", "rho", True), ("dfedsgpsm", "sampling", False),
    ("sgp", "dyn_alpha", False), ("dpsgd", "order", True),
    ("fedavg", "order", False), ("fedavg", "momentum_form", False),
]


@pytest.mark.parametrize(("name", "key", "accepted"), SPOT)
def test_spot_checks(name, key, accepted):
    value = NON_DEFAULT.get(key, "reference_code")
    if accepted:
        _build(name, **{key: value})
    else:
        with pytest.raises(ConfigError, match=f"^algorithm.{key}: {name} "):
            _build(name, **{key: value})


def test_forms_and_warm_up():
    _build("fedlesam_s", variant="reference_code", correction_scale=0.5)
    with pytest.raises(ConfigError, match="fedlesam_s reads correction_scale only in its "
                                          "'reference_code' form"):
        _build("fedlesam_s", correction_scale=0.5)
    _build("fedspeed", quasi_alpha=0.5)
    with pytest.raises(ConfigError, match="algorithm.quasi_alpha: fedspeed reads quasi_alpha"):
        _build("fedspeed", variant="reference_code", quasi_alpha=0.5)
    with pytest.raises(ConfigError, match="algorithm.variant: fedavg has no 'reference_code'"):
        _build("fedavg", variant="reference_code")
    _build("fedgloss", rho_warmup=3, rho_start=0.01, server_rho_warmup=True)
    for key in ("rho_start", "server_rho_warmup"):
        with pytest.raises(ConfigError, match=f"algorithm.{key}: fedgloss reads {key} only "
                                              "during a warm-up"):
            _build("fedgloss", rho_warmup=0, **{key: NON_DEFAULT[key]})


def test_the_message_says_what_to_do():
    with pytest.raises(ConfigError) as err:
        _build("fedavg", prox_mu=0.5)
    assert str(err.value) == ("algorithm.prox_mu: fedavg does not use prox_mu (got 0.5); leave "
                              "it at 0.01 or pick an algorithm that takes it (docs/algorithms.md)")


def test_the_docs_table_lists_each_centralized_algorithms_own_fields():
    rows = {}
    for line in Path("docs/algorithms-centralized.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[1].endswith(".py"):
            fields = re.sub(r"\([^)]*\)", "", cells[5]).replace("server_beta1/2",
                                                                "server_beta1, server_beta2")
            rows[cells[0].strip("`")] = fields
    assert set(rows) == {cls.name for cls in CENTRALIZED}
    for cls in CENTRALIZED:
        text = rows[cls.name]
        listed = rows[text.split()[1]] if text.startswith("as ") else text
        own = option_names(cls) - option_names(Server)
        assert {f.strip() for f in listed.split(",") if f.strip()} == own, cls.name


def test_a_compare_variant_with_an_unread_option_is_refused_at_load(tmp_path):
    """Refused before any variant runs, naming the variant and the field."""
    path = tmp_path / "c.toml"
    path.write_text('[data]\nname = "synthetic"\n'
                    '[[compare]]\n"algorithm.name" = "fedavg"\n"topology.name" = "star"\n'
                    '[[compare]]\n"algorithm.name" = "dfedavg"\n"algorithm.prox_mu" = 0.5\n')
    with pytest.raises(ConfigError, match=r"^compare\[1\]\.algorithm\.prox_mu: dfedavg does not"):
        load_config(path)
