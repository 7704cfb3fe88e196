"""The Flower side of `bench.peer_flower`: p2pfl's FedAvg workload as a Flower app, run in
Flower's simulation engine (Ray backend). Needs `flwr[simulation]` (`pip install -e '.[flower]'`).

Virtual SuperNode k (node_config "partition-id" = k) is p2pfl's client k: it trains on row k of
p2pfl's partition. Before round 1 the ServerApp asks every SuperNode for its partition id (one
QUERY message each), so that in round t its strategy can send the global model to exactly the
clients p2pfl samples in round t. A client trains an `nn.Module` with torch.optim.SGD on the
minibatches p2pfl gives it (`bench.peer_match`) and replies with its model and its sample count;
Flower's FedAvg averages the replies weighted by that count. The global model is evaluated on the
server after the last round only.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterable
from typing import Any

import flwr
import torch
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from bench import peer_match as M
from p2pfl.config import Config
from p2pfl.core.federated import FederatedData
from p2pfl.core.models import build_model

VERSION = flwr.__version__
_WORKLOADS: dict[str, tuple[Config, FederatedData]] = {}  # per process: each Ray actor loads once


def _workload(text: str) -> tuple[Config, FederatedData]:
    """The config (JSON) of a train message and its data, loaded once per process."""
    if text not in _WORKLOADS:
        cfg = M.from_json(text)
        _WORKLOADS[text] = cfg, M.federated_data(cfg)
    return _WORKLOADS[text]


client_app = ClientApp()


@client_app.query()
def report_partition(msg: Message, context: Context) -> Message:
    """Tell the server which of p2pfl's clients this SuperNode is.

    Parameters
    ----------
    msg : the server's query.
    context : the SuperNode's context (its partition-id).

    Returns
    -------
    Message, the reply with the partition-id.
    """
    record = MetricRecord({"partition-id": int(context.node_config["partition-id"])})
    return Message(RecordDict({"node": record}), reply_to=msg)


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """Round t of client `partition-id`: p2pfl's local SGD steps from the received model.

    Parameters
    ----------
    msg : the server's message: the model's arrays and the config (workload, threads, round).
    context : the SuperNode's context (its partition-id).

    Returns
    -------
    Message, the reply with the trained model, its train_loss and num-examples.
    """
    config = msg.content["config"]
    cfg, data = _workload(str(config["workload"]))
    torch.set_num_threads(int(config["threads"]))
    model = build_model(cfg.model.name, data.input_shape, data.num_classes)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    client = int(context.node_config["partition-id"])
    loss = M.local_sgd(model, cfg, data, int(config["server-round"]) - 1, client)
    metrics = MetricRecord({"train_loss": loss, "num-examples": int(data.sizes[client])})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}),
                   reply_to=msg)


class MatchedFedAvg(FedAvg):
    """Flower's FedAvg whose round t trains the SuperNodes of the clients p2pfl samples in
    round t (`node_ids`: p2pfl client -> SuperNode id) instead of a fresh random sample."""

    def __init__(self, cfg: Config, node_ids: dict[int, int]) -> None:
        super().__init__(fraction_train=cfg.algorithm.participation, fraction_evaluate=0.0,
                         min_available_nodes=cfg.data.num_nodes)
        self.cfg, self.node_ids = cfg, node_ids

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        clients = M.sampled_clients(self.cfg, server_round - 1)
        return [Message(record, self.node_ids[c], MessageType.TRAIN) for c in clients]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """FedAvg's aggregation, refusing a round where a sampled client failed (FedAvg itself
        would average the others: not the same work as p2pfl's)."""
        replies = list(replies)
        expected = len(M.sampled_clients(self.cfg, server_round - 1))
        for reply in replies:
            if reply.has_error():
                raise RuntimeError(f"round {server_round}: SuperNode "
                                   f"{reply.metadata.src_node_id} failed: {reply.error.reason}")
        if len(replies) != expected:
            raise RuntimeError(f"round {server_round}: {len(replies)} of {expected} replies")
        return super().aggregate_train(server_round, replies)


def _registered_nodes(grid: Grid, expected: int, timeout: float = 300.0) -> list[int]:
    """The SuperNode ids, once all `expected` have registered (they register while the
    ServerApp starts)."""
    deadline = time.perf_counter() + timeout
    while len(ids := list(grid.get_node_ids())) < expected:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"only {len(ids)} of {expected} SuperNodes registered in "
                               f"{timeout:.0f} s")
        time.sleep(0.05)
    return ids


def _partition_nodes(grid: Grid, ids: list[int]) -> dict[int, int]:
    """p2pfl client (SuperNode partition id) -> SuperNode id, asked of every SuperNode."""
    queries = [Message(RecordDict(), node, MessageType.QUERY) for node in ids]
    nodes = {}
    for reply in grid.send_and_receive(queries):
        if reply.has_error():
            raise RuntimeError(f"SuperNode {reply.metadata.src_node_id}: {reply.error.reason}")
        nodes[int(reply.content["node"]["partition-id"])] = reply.metadata.src_node_id
    if sorted(nodes) != list(range(len(ids))):
        raise RuntimeError(f"expected partition ids 0..{len(ids) - 1}, got {sorted(nodes)}")
    return nodes


def _server_app(cfg: Config, threads: int, out: dict[str, Any]) -> ServerApp:
    """A ServerApp that runs `cfg`'s rounds and fills `out` with times and the final model."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        ids = _registered_nodes(grid, cfg.data.num_nodes)
        start = time.perf_counter()
        node_ids = _partition_nodes(grid, ids)
        out["query_s"] = time.perf_counter() - start
        data = M.federated_data(cfg)  # the server's copy, for the final evaluation
        model = M.initial_model(cfg, data)
        ticks: list[float] = []

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            ticks.append(time.perf_counter())  # round 0: before training; r: after round r
            if server_round < cfg.rounds:
                return None
            model.load_state_dict(arrays.to_torch_state_dict())
            out["final_test_acc"] = M.accuracy(model, data)
            out["eval_s"] = time.perf_counter() - ticks[-1]
            return MetricRecord({"accuracy": out["final_test_acc"]})

        workload = ConfigRecord({"workload": M.config_json(cfg), "threads": threads})
        MatchedFedAvg(cfg, node_ids).start(grid, ArrayRecord(model.state_dict()),
                                           num_rounds=cfg.rounds, train_config=workload,
                                           evaluate_fn=evaluate)
        out["ticks"] = ticks
        out["model"] = {k: v.clone() for k, v in model.state_dict().items()}

    return app


def run(cfg: Config, cpus: int, client_cpus: int, verbose: bool = False) -> dict[str, Any]:
    """Run `cfg` (bench.peer_match.fedavg_config) in Flower's simulation.

    cpus // client_cpus clients train at once.

    Parameters
    ----------
    cfg : the FedAvg config.
    cpus : Ray CPUs.
    client_cpus : CPUs (= torch threads) per virtual client.
    verbose : let Flower and Ray log.

    Returns
    -------
    dict: setup_s (start until round 1 begins: Ray, actors, SuperNodes, the partition query, the
    server's data), query_s (the partition query, once every SuperNode has registered; it waits
    for the Ray actors to start), per-round seconds, eval_s, total_s (until run_simulation
    returns, Ray shut down), final_test_acc and the final global model (name -> tensor).
    """
    out: dict[str, Any] = {}
    if not verbose:
        logging.getLogger("flwr").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", category=FutureWarning, module="ray")
    backend = {"client_resources": {"num_cpus": client_cpus, "num_gpus": 0.0},
               "init_args": {"num_cpus": cpus, "num_gpus": 0, "logging_level": "ERROR",
                             "log_to_driver": verbose}}
    start = time.perf_counter()
    run_simulation(server_app=_server_app(cfg, client_cpus, out), client_app=client_app,
                   num_supernodes=cfg.data.num_nodes, backend_config=backend,
                   verbose_logging=verbose)
    total = time.perf_counter() - start
    if "ticks" not in out:
        raise RuntimeError("the Flower run ended before its last round (see the log above)")
    ticks = out.pop("ticks")
    rounds = [b - a for a, b in zip(ticks, ticks[1:])]  # each tick precedes any evaluation
    return {**out, "setup_s": ticks[0] - start, "rounds_s": rounds, "total_s": total}
