"""Experiment configuration: TOML file -> validated, typed `Config`.

Every field is checked before any work starts. A bad value raises `ConfigError`, whose message is
one line naming the field and what is allowed; the CLI prints it and exits with status 2.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from p2pfl.options import AlgorithmOptions, OptionError, check_number, check_values, field_types

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    """An invalid configuration; `str(err)` is one line that names the field."""

    def __init__(self, field_name: str, message: str) -> None:
        shown = field_name if field_name.isprintable() else repr(field_name)
        super().__init__(f"{shown}: {' '.join(str(message).splitlines())}")
        self.field = field_name


@dataclass
class DataConfig:
    name: str = "fashion_mnist"
    root: str = ""
    num_nodes: int = 100
    partition: str = "dirichlet"
    alpha: float = 0.3
    classes_per_node: int = 2
    synthetic_train: int = 2000
    synthetic_test: int = 500


@dataclass
class ModelConfig:
    name: str = "mlp"


@dataclass
class TopologyConfig:
    name: str = "random_out"
    out_degree: int = 10
    directed: bool = True
    base: int = 2
    rows: int = 0  # grid / torus shape; 0 = choose from num_nodes
    cols: int = 0
    p: float = 0.1  # erdos_renyi edge probability
    degree: int = 4  # random_regular, random_regular_schedule
    ws_k: int = 4  # watts_strogatz ring neighbours (even)
    rewire: float = 0.1  # watts_strogatz rewiring probability
    ba_m: int = 2  # barabasi_albert edges per new node
    window: int = 1  # B > 1: each round uses the union of B consecutive graphs
    selection: str = ""  # random_out: random | loss_based | loss_softmax; "" = the algorithm's
    # (loss_softmax for dfedsgpsm_s, random otherwise), resolved when the config is loaded
    temperature: float = 1.0  # loss_softmax
    path: str = ""  # from_adjacency / from_edges file
    link_drop: float = 0.0  # probability that a message is lost, per message and round
    node_drop: float = 0.0  # probability that a node is offline, per node and round


@dataclass
class EvalConfig:
    every: int = 1
    local_samples: int = 2000
    batch_size: int = 1000


@dataclass
class EngineConfig:
    chunk_size: int = 0
    dtype: str = "float32"
    executor: str = "vectorized"
    checkpoint_every: int = 0  # rounds between checkpoints; 0 = auto (saving <= ~5% of run time)
    on_divergence: str = "stop"  # stop | skip_node (docs/reliability.md)
    compile: bool = False  # torch.compile the stacked forward/backward (docs/performance.md)
    mixing: str = "auto"  # auto | dense | sparse: layout of mixing matrices (p2pfl/comm.py)


@dataclass
class Config:
    seed: int = 0
    rounds: int = 300
    device: str = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    algorithm: AlgorithmOptions = field(default_factory=lambda: algorithm_options("sgp")())
    eval: EvalConfig = field(default_factory=EvalConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    compare: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
EXECUTORS = ("vectorized", "loop")
OBJECT = "object"  # topology.name of a run whose topology was a Python object (p2pfl.objects)
ON_DIVERGENCE = ("stop", "skip_node")

# (section, field) -> (low, high, low_inclusive, high_inclusive); None means unbounded.
_RANGES: dict[tuple[str, str], tuple[float | None, float | None, bool, bool]] = {
    ("", "seed"): (0, None, True, True),
    ("", "rounds"): (1, None, True, True),
    ("data", "num_nodes"): (1, None, True, True),
    ("data", "alpha"): (0, None, True, True),
    ("data", "classes_per_node"): (1, None, True, True),
    ("data", "synthetic_train"): (1, None, True, True),
    ("data", "synthetic_test"): (1, None, True, True),
    ("topology", "out_degree"): (1, None, True, True),
    ("topology", "base"): (2, None, True, True),
    ("topology", "rows"): (0, None, True, True),
    ("topology", "cols"): (0, None, True, True),
    ("topology", "p"): (0, 1, True, True),
    ("topology", "degree"): (0, None, True, True),
    ("topology", "ws_k"): (2, None, True, True),
    ("topology", "rewire"): (0, 1, True, True),
    ("topology", "ba_m"): (1, None, True, True),
    ("topology", "window"): (1, None, True, True),
    ("topology", "temperature"): (0, None, False, True),
    ("topology", "link_drop"): (0, 1, True, False),
    ("topology", "node_drop"): (0, 1, True, False),
    ("eval", "every"): (1, None, True, True),
    ("eval", "local_samples"): (0, None, True, True),
    ("eval", "batch_size"): (1, None, True, True),
    ("engine", "chunk_size"): (0, None, True, True),
    ("engine", "checkpoint_every"): (0, None, True, True),
}


def _choices() -> dict[tuple[str, str], tuple[str, ...]]:
    """Allowed names per field (imported lazily: registries live in other packages)."""
    from algorithms import ALGORITHMS
    from p2pfl.comm import LAYOUTS
    from p2pfl.data import DATASETS, PARTITIONS
    from p2pfl.models import MODELS
    from topologies import SELECTIONS, TOPOLOGIES

    return {
        ("", "device"): DEVICES,
        ("data", "name"): (*DATASETS, OBJECT),
        ("data", "partition"): (*PARTITIONS, OBJECT),
        ("model", "name"): (*MODELS, OBJECT),
        ("topology", "name"): (*TOPOLOGIES, OBJECT),
        ("topology", "selection"): ("", *SELECTIONS),
        ("algorithm", "name"): tuple(ALGORITHMS),
        ("engine", "executor"): EXECUTORS,
        ("engine", "dtype"): DTYPES,
        ("engine", "on_divergence"): ON_DIVERGENCE,
        ("engine", "mixing"): LAYOUTS,
    }


def _type_name(tp: type) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        tp, tp.__name__
    )


def _coerce(value: Any, tp: type, name: str) -> Any:
    """Check `value` against the field type; ints are accepted where floats are expected."""
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and (
        not isinstance(value, tp) or (tp is int and isinstance(value, bool))
    ):
        raise ConfigError(name, f"must be {_type_name(tp)}, got {value!r}")
    return value


def _build_section(cls: type, values: Any, prefix: str) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(prefix, f"must be a table, got {values!r}")
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise ConfigError(f"{prefix}.{unknown[0]}", f"unknown field (allowed: {allowed})")
    kwargs = {k: _coerce(v, hints[k], f"{prefix}.{k}") for k, v in values.items()}
    return cls(**kwargs)


def algorithm_options(name: str) -> type[AlgorithmOptions]:
    """The options class of the registered algorithm `name`."""
    from algorithms import ALGORITHMS

    return ALGORITHMS[name].Options


def declared_options() -> dict[str, tuple[dataclasses.Field, type]]:
    """Every [algorithm] field some registered algorithm declares -> (its field, its type)."""
    from algorithms import ALGORITHMS

    out: dict[str, tuple[dataclasses.Field, type]] = {}
    for cls in ALGORITHMS.values():
        types = field_types(cls.Options)
        for f in fields(cls.Options):
            out.setdefault(f.name, (f, types[f.name]))
    return out


def _any_options() -> type[AlgorithmOptions]:
    """An options class with every declared field: a [[compare]] root's [algorithm] table, which
    may hold settings for the variants' algorithms (each variant is checked against its own)."""
    base = {f.name for f in fields(AlgorithmOptions)}
    extra = [(k, tp, dataclasses.field(default=f.default, metadata=f.metadata))
             for k, (f, tp) in declared_options().items() if k not in base]
    return dataclasses.make_dataclass("AnyAlgorithmOptions", extra, bases=(AlgorithmOptions,))


def _build_algorithm(values: Any, prefix: str, compare_root: bool) -> AlgorithmOptions:
    """The [algorithm] table read into its algorithm's options class. A field that only other
    algorithms declare is refused unless it is at its default (then it changes nothing)."""
    from algorithms import ALGORITHMS

    if not isinstance(values, dict):
        raise ConfigError(prefix, f"must be a table, got {values!r}")
    name = _coerce(values.get("name", AlgorithmOptions.name), str, f"{prefix}.name")
    if name not in ALGORITHMS:
        raise ConfigError(f"{prefix}.name", f"unknown value {name!r} (allowed: "
                          f"{', '.join(ALGORITHMS)})")
    cls = _any_options() if compare_root else ALGORITHMS[name].Options
    own, declared = field_types(cls), declared_options()
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key in own:
            kwargs[key] = _coerce(value, own[key], f"{prefix}.{key}")
            continue
        if key not in declared:
            raise ConfigError(f"{prefix}.{key}", f"unknown field (allowed: "
                              f"{', '.join(sorted(own))})")
        other, tp = declared[key]
        if _coerce(value, tp, f"{prefix}.{key}") != other.default:
            raise ConfigError(f"{prefix}.{key}", f"{name} does not use {key} (got {value!r}); "
                              f"leave it at {other.default!r} or pick an algorithm that takes "
                              "it (docs/algorithms.md)")
    return cls(**kwargs)


_SECTIONS = {
    "data": DataConfig,
    "model": ModelConfig,
    "topology": TopologyConfig,
    "eval": EvalConfig,
    "engine": EngineConfig,
}


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Build and validate a `Config` from a plain nested dict (as parsed from TOML)."""
    top_hints = get_type_hints(Config)
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _SECTIONS:
            kwargs[key] = _build_section(_SECTIONS[key], value, key)
        elif key == "algorithm":
            kwargs[key] = _build_algorithm(value, key, compare_root=bool(raw.get("compare")))
        elif key == "compare":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError("compare", "must be an array of tables ([[compare]])")
            kwargs[key] = value
        elif key in top_hints:
            kwargs[key] = _coerce(value, top_hints[key], key)
        else:
            allowed = ", ".join(sorted(top_hints))
            raise ConfigError(key, f"unknown field (allowed: {allowed})")
    cfg = _with_implied(Config(**kwargs))
    # A [[compare]] root is never run itself: only its variants are checked against their
    # algorithm (its own algorithm name may be a placeholder).
    (check_fields if cfg.compare else validate)(cfg)
    for i, variant in enumerate(cfg.compare):
        try:
            validate(with_overrides(cfg, variant_overrides(variant)))
        except ConfigError as err:
            raise ConfigError(f"compare[{i}].{err.field}", str(err).split(": ", 1)[1]) from None
    return cfg


def _with_implied(cfg: Config) -> Config:
    """`cfg` with the settings its algorithm implies (`Algorithm.implied`) filled in where the
    config left them unset (""), and the remaining unset ones at their plain defaults."""
    from algorithms import ALGORITHMS

    if cfg.compare or cfg.algorithm.name not in ALGORITHMS:
        return cfg  # a [[compare]] root is never run; an unknown name fails in validation
    algorithm = ALGORITHMS[cfg.algorithm.name]
    implied = {"topology.selection": "random", "algorithm.variant": algorithm.default_variant,
               **algorithm.implied(cfg)}
    for dotted, value in implied.items():
        section, key = dotted.split(".")
        part = getattr(cfg, section)
        if getattr(part, key) == "":
            cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(part, **{key: value})})
    return cfg


def _check_range(name: str, value: float, bounds: tuple) -> None:
    low, high, low_incl, high_incl = bounds
    why = check_number(value, low, high, not low_incl, not high_incl)
    if why:
        raise ConfigError(name, why)


def validate(cfg: Config) -> None:
    """`check_fields`, then that every [algorithm] field the chosen algorithm does not read is at
    its default."""
    check_fields(cfg)
    from algorithms import ALGORITHMS

    ALGORITHMS[cfg.algorithm.name](cfg.algorithm)  # its constructor refuses unread options


def check_fields(cfg: Config) -> None:
    """Check names against the registries and numbers against their ranges."""
    for (section, key), allowed in _choices().items():
        obj = getattr(cfg, section) if section else cfg
        value = getattr(obj, key)
        if value not in allowed:
            name = f"{section}.{key}" if section else key
            raise ConfigError(name, f"unknown value {value!r} (allowed: {', '.join(allowed)})")
    for (section, key), bounds in _RANGES.items():
        obj = getattr(cfg, section) if section else cfg
        _check_range(f"{section}.{key}" if section else key, getattr(obj, key), bounds)
    try:
        check_values(cfg.algorithm)
    except OptionError as err:
        raise ConfigError(f"algorithm.{err.key}", str(err)) from None
    alg = cfg.algorithm
    if alg.local_epochs == 0 and alg.local_steps == 0:
        raise ConfigError("algorithm.local_steps", "local_epochs and local_steps are both 0")
    if cfg.engine.compile and cfg.engine.executor == "loop":
        raise ConfigError("engine.compile", "compiles the vectorized population; the loop "
                          "executor runs plain modules (set engine.executor = \"vectorized\")")


def _parse_value(text: str) -> Any:
    """A --set value: a TOML literal (number, bool, quoted string, array) or else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = raw
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(dotted, f"'{part}' is not a table")
        node = child
    node[leaf] = value


def variant_overrides(variant: dict[str, Any]) -> dict[str, Any]:
    """The dotted-key overrides of one [[compare]] table (everything but its label)."""
    return {k: v for k, v in variant.items() if k != "label"}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """['algorithm.lr=0.05', ...] -> {'algorithm.lr': 0.05, ...}."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", f"expected key=value, got {item!r}")
        out[key.strip()] = _parse_value(text.strip())
    return out


def with_overrides(cfg: Config, overrides: dict[str, Any]) -> Config:
    """A new validated config with dotted-key overrides applied."""
    raw = cfg.to_dict()
    raw.pop("compare")
    for key, value in overrides.items():
        _set_path(raw, key, value)
    return config_from_dict(raw)


def config_with_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> Config:
    """A validated config from a plain nested dict (e.g. a run's config.json) with dotted-key
    overrides applied; unlike `with_overrides`, [[compare]] variants are kept."""
    raw = copy.deepcopy(raw)
    for key, value in overrides.items():
        _set_path(raw, key, value)
    return config_from_dict(raw)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
    """Read a TOML experiment file, apply dotted-key overrides, validate."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError("config", f"file not found: {path}") from None
    except UnicodeDecodeError as err:
        raise ConfigError("config", f"{path} is not UTF-8 text: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("config", f"{path} is not valid TOML: {err}") from None
    for key, value in (overrides or {}).items():
        _set_path(raw, key, value)
    return config_from_dict(raw)
