"""The config's sections (typed dataclasses), their allowed names and ranges, and `ConfigError`
(defined in p2pfl.errors, which the command line imports without the config)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any

from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions, option
from topologies import PRIVACY_ACCOUNTINGS, REGISTRY, UNDERLAYS, NamedTopology
from topologies.by_name import MAX_WINDOW

NETWORK_MODELS = ("ideal", "flow")


@dataclass
class DataConfig:
    name: str = "fashion_mnist"
    root: str = ""
    num_nodes: int = 100
    partition: str = "dirichlet"
    alpha: float = 0.3
    classes_per_node: int = 2
    shards_per_node: int = 2  # shards
    min_size: int = 10  # label_dirichlet, quantity_*: the fewest samples a node may get
    sigma: float = 1.0  # quantity_lognormal
    # label_dirichlet, quantity_dirichlet: cuts at floor(cumsum(p) n + cut_tolerance); 0 is
    # NIID-Bench, 1e-9 gives no sample to a full node that float rounding would give one
    cut_tolerance: float = 0.0
    local_test: float = 0.0  # share of each node's data held out as its own test split
    allow_overlap: bool = False  # a partition given as an object may give a sample to 2 nodes
    synthetic_train: int = 2000
    synthetic_test: int = 500


@dataclass
class ModelConfig:
    name: str = "mlp"


@dataclass
class TopologyConfig:
    """[topology]: what every topology has (its name, the union window, the neighbour
    selection, per-round faults); the options of the topology it names are the fields of a
    subclass made from its builder's signature (p2pfl/config/topology.py)."""

    name: str = "random_out"
    window: int = option(1, low=1, high=MAX_WINDOW, doc="B > 1: each round uses the union of B "
                         "consecutive graphs (union_window; a round builds B graphs)")
    # random_out: random | loss_based | loss_softmax; "" = the algorithm's (loss_softmax for
    # dfedsgpsm_s, random otherwise), resolved when the config is loaded
    selection: str = ""
    link_drop: float = option(0.0, low=0, high=1, high_open=True,
                              doc="probability that a message is lost, per message and round")
    node_drop: float = option(0.0, low=0, high=1, high_open=True,
                              doc="probability that a node is offline, per node and round")


COMMON = ("name", "window", "selection", "link_drop", "node_drop")  # TopologyConfig's fields


@functools.cache
def _options_class(entry: NamedTopology) -> type[TopologyConfig]:
    extra = []
    for o in entry.options.values():
        if o.name in COMMON:
            continue
        default = None if o.default is inspect.Parameter.empty else o.default
        extra.append((o.name, o.type, field(default=default, metadata={"doc": o.doc})))
    return dataclasses.make_dataclass(f"{entry.name.title().replace('_', '')}Topology", extra,
                                      bases=(TopologyConfig,))


def topology_options(name: str) -> type[TopologyConfig]:
    """The options class of topology `name`.

    TopologyConfig with a field per option of its builder (TopologyConfig itself for a topology
    given as an object, or an unknown name, which validation refuses).

    Parameters
    ----------
    name : the topology's name.

    Returns
    -------
    type, a TopologyConfig dataclass.
    """
    if name not in REGISTRY:
        return TopologyConfig
    return _options_class(REGISTRY[name])


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
    # a node's training loss above this is a divergence, like a non-finite one; 0 = no limit
    max_loss: float = 0.0
    compile: bool = False  # torch.compile the stacked forward/backward (docs/performance.md)
    mixing: str = "auto"  # auto | dense | sparse: layout of mixing matrices (p2pfl/core/mixing.py)
    # fp32 | bf16: bf16 runs forward and backward (training and evaluation) in bfloat16 under
    # autocast; parameters, optimizer state and mixing stay in float32 (docs/performance.md)
    precision: str = "fp32"


@dataclass
class NetworkConfig:
    """[network]: simulated time per round (p2pfl/scale/network.py, docs/network.md); off by
    default."""

    enabled: bool = False
    step_s: float = option(0.01, low=0, doc="compute seconds of one local step on a node")
    latency_s: float = option(0.005, low=0, doc="seconds from sending a message to its first "
                             "byte arriving, per link")
    bandwidth_gbps: float = option(1.0, low=0, low_open=True, doc="link bandwidth in gigabits "
                                  "per second")
    slow_links: float = option(0.0, low=0, high=1, doc="fraction of links (ordered node pairs, "
                              "fixed for the run) that take slow_factor times longer")
    stragglers: float = option(0.0, low=0, high=1, doc="fraction of nodes (fixed for the run) "
                              "whose local steps take slow_factor times longer")
    slow_factor: float = option(10.0, low=1, doc="how many times slower a slow link or a "
                               "straggler is (unless straggler_factor or slow_link_factor)")
    straggler_factor: float = option(0.0, low=0, doc="how many times longer a straggler's local "
                                     "steps take (0: slow_factor)")
    slow_link_factor: float = option(0.0, low=0, doc="how many times longer a slow link's "
                                     "latency and lower its capacity (0: slow_factor)")
    slow_link_latency_s: float = option(0.0, low=0, doc="a slow link's latency in seconds "
                                        "(0: latency_s times slow_link_factor)")
    slow_link_gbps: float = option(0.0, low=0, doc="a slow link's capacity in Gbit/s (0: "
                                   "bandwidth_gbps over slow_link_factor)")
    model: str = option("flow", choices=NETWORK_MODELS, doc="ideal: every message has its "
                        "link to itself; flow: a node's messages share its uplink and downlink "
                        "(max-min fair flows, p2pfl/scale/flows.py)")
    underlay: str = option("", choices=("", *UNDERLAYS, "object"), doc="flow: the physical "
                           "network under the overlay, by name ('' none; 'object': a graph "
                           "passed to p2pfl.run, underlay=G): node i sits at "
                           "its node i, messages take the path of least latency and share its "
                           "links")
    uplink_gbps: float = option(0.0, low=0, doc="flow: each node's uplink in Gbit/s (0: "
                                "bandwidth_gbps; a graph node attribute uplink_gbps overrides)")
    downlink_gbps: float = option(0.0, low=0, doc="flow: each node's downlink in Gbit/s (0: "
                                  "bandwidth_gbps; a graph node attribute downlink_gbps "
                                  "overrides)")
    jitter: float = option(0.0, low=0, high=3, doc="sigma of a lognormal factor on every compute "
                          "time (per node and round) and transfer (per message)")
    overlap: bool = False  # Push-Sum only: nodes never wait; messages arrive rounds late
    delays: str = option("clock", choices=("clock", "random"), doc="overlap: rounds a message "
                        "is late, from the simulated times (clock) or uniform in 0..max_delay "
                        "per message (random)")
    max_delay: int = option(8, low=0, high=1000, doc="most rounds a message can be in flight "
                           "with overlap (a later one is added at max_delay)")
    horizon_s: float = option(0.0, low=0, doc="end the run at the first round (an asynchronous "
                              "run's mark) whose simulated time reaches this many seconds, "
                              "evaluated (0: rounds only)")


@dataclass
class ByzantineConfig:
    """[byzantine]: nodes that send what an attack computes instead of their models
    (algorithms/attacks.py, docs/robustness.md); none by default. `nodes` is a fraction of the
    nodes in [0, 1) (a float), a count (an int) or a list of node ids."""

    nodes: Any = 0
    placement: str = option("random", doc="random | max_degree | cut: where a fraction or count "
                            "of Byzantine nodes goes, on the graph of round 0")
    attack: str = option("sign_flip", doc="sign_flip | gaussian | alie | ipm | dissensus | "
                         "none (placed and left out of the honest metrics, but honest)")
    scale: float = option(1.0, low=0, doc="sign_flip: the message is -scale x")
    std: float = option(1.0, low=0, low_open=True, doc="gaussian: the message is x + std xi, "
                        "xi ~ N(0, I)")
    z: float = option(0.0, doc="alie: the message is mu - z sd; 0 = the default z_max from "
                      "the numbers of nodes and Byzantine nodes, Phi^-1((N - f - s) / (N - f)), "
                      "s = floor(N / 2 + 1) - f (the decentralized authors' code)")
    ipm_epsilon: float = option(0.1, low=0, low_open=True, doc="ipm: the message is "
                                "-ipm_epsilon mu")
    dissensus_epsilon: float = option(1.5, low=0, low_open=True, doc="dissensus: the "
                                      "receiver moves (1 - dissensus_epsilon) times its honest "
                                      "neighbours' pull")


@dataclass
class PrivacyConfig:
    """[privacy]: private gossip (algorithms/muffliato.py, docs/robustness.md); off by default."""

    sigma: float = option(0.0, low=0, doc="noise multiplier: Gaussian noise of standard "
                          "deviation sigma * clip on every coordinate of a node's clipped round "
                          "update (0: off)")
    clip: float = option(0.0, low=0, doc="L2 bound of a node's round update (its local phase's "
                         "displacement)")
    delta: float = option(1e-5, low=0, high=1, low_open=True, high_open=True,
                          doc="delta of the (epsilon, delta)-DP written to privacy.json")
    accounting: str = option("reach", choices=PRIVACY_ACCOUNTINGS,
                             doc="pairwise loss: 'reach' (a bound for any run: j's releases up to "
                             "the last that reaches i) or 'linear' (the exact divergence if the "
                             "updates were fixed values; small runs)")


@dataclass
class Config:
    seed: int = 0
    rounds: int = 300
    device: str = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    topology: TopologyConfig = field(default_factory=lambda: topology_options("random_out")())
    algorithm: AlgorithmOptions = field(default_factory=lambda: algorithm_options("osgp")())
    eval: EvalConfig = field(default_factory=EvalConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    byzantine: ByzantineConfig = field(default_factory=ByzantineConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    compare: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")
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
    ("data", "shards_per_node"): (1, None, True, True),
    ("data", "min_size"): (1, None, True, True),
    ("data", "sigma"): (0, 20, True, True),
    ("data", "cut_tolerance"): (0, 1, True, False),
    ("data", "local_test"): (0, 1, True, False),
    ("data", "synthetic_train"): (1, None, True, True),
    ("data", "synthetic_test"): (1, None, True, True),
    ("eval", "every"): (1, None, True, True),
    ("eval", "local_samples"): (0, None, True, True),
    ("eval", "batch_size"): (1, None, True, True),
    ("engine", "chunk_size"): (0, None, True, True),
    ("engine", "checkpoint_every"): (0, None, True, True),
    ("engine", "max_loss"): (0, None, True, True),
}


def _choices() -> dict[tuple[str, str], tuple[str, ...]]:
    """Allowed names per field (imported lazily: registries live in other packages)."""
    from algorithms import ALGORITHMS
    from algorithms.attacks import ATTACKS
    from p2pfl.core.mixing import LAYOUTS
    from p2pfl.core.models import MODELS
    from p2pfl.data import DATASETS, PARTITIONS
    from topologies import PLACEMENTS, SELECTIONS

    return {
        ("", "device"): DEVICES,
        ("data", "name"): (*DATASETS, OBJECT),
        ("data", "partition"): (*PARTITIONS, OBJECT),
        ("model", "name"): (*MODELS, OBJECT),
        ("topology", "name"): (*REGISTRY, OBJECT),
        ("topology", "selection"): ("", *SELECTIONS),
        ("algorithm", "name"): tuple(ALGORITHMS),
        ("engine", "executor"): EXECUTORS,
        ("engine", "dtype"): DTYPES,
        ("engine", "precision"): PRECISIONS,
        ("engine", "on_divergence"): ON_DIVERGENCE,
        ("engine", "mixing"): LAYOUTS,
        ("byzantine", "placement"): PLACEMENTS,
        ("byzantine", "attack"): ATTACKS,
    }


def _type_name(tp: type) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        tp, tp.__name__
    )


def coerce(value: Any, tp: type, name: str) -> Any:
    """Check `value` against the field type; ints are accepted where floats are expected.

    Parameters
    ----------
    value : the value as parsed.
    tp : the field's type.
    name : the field's dotted name, for the error.

    Returns
    -------
    the value (an int made float for a float field).

    Raises
    ------
    ConfigError
        naming the field when a plain type (int, float, str, bool) does not match (a bool is no
        int).
    """
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and (
        not isinstance(value, tp) or (tp is int and isinstance(value, bool))
    ):
        raise ConfigError(name, f"must be {_type_name(tp)}, got {value!r}")
    return value


def algorithm_options(name: str) -> type[AlgorithmOptions]:
    """The options class of the registered algorithm `name`.

    Parameters
    ----------
    name : a registered algorithm's name.

    Returns
    -------
    type, its AlgorithmOptions dataclass.
    """
    from algorithms import ALGORITHMS

    return ALGORITHMS[name].Options
