"""Asynchronous Push-Sum / SGP (Assran and Rabbat, asynchronous subgradient-push; Assran et al.
2019, SGP): no barrier, and mass conserved in flight.

Node i holds a numerator x_i and a Push-Sum weight w_i; its de-biased model is z_i = x_i / w_i
(the population stores z, as the synchronous `PushSum` does). It repeats, on its own clock:

1. read z_i and w_i, and take its local step at z_i (`local_steps = 1`, SGP's); the step on the
   numerator is x_i <- x_i - lr m(z_i), i.e. the offset of the phase (taken with lr / w_i) times
   the weight it was read with;
2. push: keep P_ii of (x_i, w_i) and send P_ji x_i, P_ji w_i to each out-neighbour j, where P is
   the column-stochastic matrix of the graph of its phase index k (its k-th push uses round k's
   graph); the message is a snapshot of z_i with w_i, taken when it is sent. One push at a time
   (`one_push_in_flight`, the default): a node whose previous push has not all arrived skips
   this one and keeps its mass, as the authors' SGP code gossips in a thread that starts a new
   exchange only when the last one is done; a node whose pushes outpace its uplink then sends
   less often instead of queueing ever older models;
3. begin the next phase at once.

A message that has arrived is added to its receiver's numerator and weight (x_j <- x_j + P_ji x_i,
w_j <- w_j + P_ji w_i, then z_j = x_j / w_j) whatever the receiver is doing: a node never waits.
Additions commute, so the receiver adds what has arrived when it next reads its model (its phase
end, its next phase), all at once: the models read are those of adding each message the instant
it arrives (in another order of float additions), for one update per read instead of one per
message. A record (a mark) adds them to the weights (what it reports) and keeps them; the rows
show them when a model is read (`settle`, through `Asynchronous.current`), so that a mark no one
evaluates costs no pass over the rows. The phase end adds them again to its result from the
weight its phase read, so where the marks fall, and which are read, changes no bit of the run.
The mass is conserved exactly: sum_i w_i plus the weights sent and not yet added stays N (each
sender keeps w_i minus what it sends). With equal speeds, no jitter and zero
latency every node pushes at the same instants and receives before its next phase, which is
synchronous SGP. The staleness the run records is the age of each message added: its arrival
minus its send time.

**Unequal speeds.** SGP's theorem (Assran et al. 2019) has every node take each iteration,
with messages late by a bounded number of them. With nodes at different speeds, asynchronous
subgradient-push (Assran and Rabbat) converges, for strongly convex objectives and bounded
delays, to a neighbourhood of the minimiser whose size grows with the asynchrony; to the
minimiser itself at equal rates, or when each node scales its step size in inverse proportion
to its number of updates, which this class does not do (docs/async.md, "Unequal speeds").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import torch

import topologies as T
from algorithms.asynchronous import Asynchronous, Instant
from algorithms.base import require_one_local_step
from algorithms.weight_collapse import collapsed, warn_collapse, weights_clause
from p2pfl.context import RunContext
from p2pfl.core.population import Params, row_block, row_scale
from p2pfl.options import AlgorithmOptions, option
from p2pfl.scale.payload_sum import scaled_rows

if TYPE_CHECKING:
    from p2pfl.scale.mailbox import Delivery


class AsyncSGP(Asynchronous):
    """Push-Sum without a barrier (module docstring)."""

    name = "async_sgp"
    source = "asynchronous SGP: Assran and Rabbat 2020 (arXiv 1803.08950); Assran et al. 2019"
    mixing = "column_stochastic"
    snapshot_in_row = True  # a row changes only at its node's own phase end and read, and marks

    @dataclass
    class Options(AlgorithmOptions):
        one_push_in_flight: bool = option(True, doc="a node whose previous push has not all "
                                          "arrived skips this one (keeps its mass), as the "
                                          "authors' code gossips one exchange at a time; false: "
                                          "push at every phase end")

    def check_options(self, cfg: AlgorithmOptions) -> None:
        """Also refuse more than one local step: SGP pushes after every step.

        Parameters
        ----------
        cfg : the algorithm's options.

        Raises
        ------
        ConfigError
            naming algorithm.local_steps unless it is 1 (and as `Algorithm.check_options`).
        """
        super().check_options(cfg)
        require_one_local_step(cfg, "async_sgp pushes after every local step")

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """A model copy and the float64 weight."""
        return super().message_bytes(num_params, dtype) + 8

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.weights = torch.ones(ctx.num_nodes, device=ctx.device, dtype=torch.float64)
        self.read_weights = self.weights.clone()  # w when each node's phase read its model
        self.row_weights = self.weights.clone()  # w each row is divided by (z = x / w)
        self.lowest_weights = self.weights.clone()  # the smallest w each node's phases read
        self.collapse_warned = False  # a WeightCollapseWarning was given (once per run)
        self._columns: dict[int, sp.csc_array] = {}
        # arrived, kept until the receiver's phase ends or it reads its model (`shown`: added to
        # its weight, by the `shows`-th addition, `shown_by`; `in_row`: and to its row)
        self.inbox = {"dst": np.zeros(0, dtype=np.int64), "slot": np.zeros(0, dtype=np.int64),
                      "mass": np.zeros(0), "shown": np.zeros(0, dtype=bool),
                      "shown_by": np.zeros(0, dtype=np.int64), "in_row": np.zeros(0, dtype=bool)}
        self.shows = 0  # additions to the weights so far

    def start(self, ctx: RunContext, ev: Instant) -> None:
        ev.begin(np.arange(ctx.num_nodes))

    def phase_lr(self, ctx: RunContext, nodes: np.ndarray, k: np.ndarray) -> torch.Tensor:
        """lr(k) / w_i: the numerator step expressed on the stored z (w as read now, after what
        has arrived; a collapsed weight warned first: `check_collapse`)."""
        self.read_arrived(ctx, self.events, nodes)
        index = torch.as_tensor(nodes, device=ctx.device)
        self.read_weights[index] = self.weights[index]
        self.lowest_weights[index] = torch.minimum(self.lowest_weights[index],
                                                   self.weights[index])
        self.check_collapse(ctx, nodes, k)
        return (super().phase_lr(ctx, nodes, k).double() / self.weights[index]).to(ctx.dtype)

    def check_collapse(self, ctx: RunContext, nodes: np.ndarray, k: np.ndarray) -> None:
        """Warn (WeightCollapseWarning, once per run) when the weight a beginning phase reads is
        below COLLAPSE_W (algorithms/weight_collapse.py). A node's weight falls only when it
        pushes, and it begins its next phase then, so every fall is checked.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], the rows whose phases begin.
        k : int64 [m], their phase indices.
        """
        found = None if self.collapse_warned else collapsed(self.read_weights[nodes])
        if found is None:
            return
        self.collapse_warned = True
        at, w = found
        now = float(self.events.time(nodes[at:at + 1])[0])  # in row m when within round-off
        # after mark m (MARK_TOLERANCE)
        mark = max(1, math.ceil(now / ctx.clock.nominal_s(self.transfers) * (1 - 1e-9)))
        warn_collapse(int(nodes[at]), w, self.lr(int(k[at])),
                      f"at mark {mark} ({now:.4g} simulated s, its phase {int(k[at]) + 1})",
                      "its inbound messages are slow relative to its sends: each push keeps "
                      "P_ii of its weight while what it is sent is still in flight (stragglers "
                      "or slow links around it; one_push_in_flight = true bounds its pushes)")

    def phase_end(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> None:
        models = self.end_rows(ctx, ev, nodes)
        busy = ev.sending(nodes) if self.cfg.one_push_in_flight else np.zeros(len(nodes), bool)
        ev.drop(models[busy])
        if not busy.all():
            self.push(ctx, ev, nodes[~busy], models[~busy])
        ev.begin(nodes)

    def push(self, ctx: RunContext, ev: Instant, nodes: np.ndarray, models: np.ndarray) -> None:
        """Keep P_ii of (x_i, w_i) and send P_ji of it to each out-neighbour j.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        nodes : int64 [m], the senders.
        models : int64 [m], the payload slots holding their models z_i (`end_rows`; sent,
            or dropped where a node has no out-neighbour).
        """
        k = ev.phase(nodes)
        src, dst, share = [], [], []
        for kk in np.unique(k).tolist():
            senders = nodes[k == kk]
            P = self.columns(ev, kk)[:, senders]  # the senders' columns, in their order
            i = np.repeat(senders, np.diff(P.indptr))
            out = P.indices != i
            src.append(i[out])
            dst.append(P.indices[out])
            share.append(P.data[out])
        src_a, dst_a = (np.concatenate(a).astype(np.int64) for a in (src, dst))
        share_a = np.concatenate(share)
        sent = self.weights.cpu().numpy()[src_a] * share_a  # float64 mass of each message
        kept = np.zeros(ctx.num_nodes)
        np.add.at(kept, src_a, sent)
        index = torch.as_tensor(nodes, device=ctx.device)
        w_send = self.weights[index].cpu().numpy()
        self.weights -= torch.as_tensor(kept, device=ctx.device)
        self.row_weights -= torch.as_tensor(kept, device=ctx.device)  # x and w scaled: z kept
        if not len(src_a):
            ev.drop(models)
            return
        owner = np.searchsorted(nodes, src_a)
        phase = ev.phase(src_a)
        ev.send(src_a, dst_a, phase, share=share_a, slots=models,
                snapshot=nodes, owner=owner, scalar=w_send, read=ev.time(nodes),
                copies=1, scalars=1)

    def columns(self, ev: Instant, k: int) -> sp.csc_array:
        """The column-stochastic P of round k's graph, by columns (kept while a node may still
        push with it).

        Parameters
        ----------
        ev : the instant.
        k : the round.

        Returns
        -------
        scipy.sparse CSC [N, N].
        """
        if k not in self._columns:
            self._columns[k] = sp.csc_array(T.column_stochastic(ev.graph(k), sparse=True))
            alive = int(ev.phase(np.arange(len(self.weights))).min())
            self._columns = {r: P for r, P in self._columns.items() if r >= alive or r == k}
        return self._columns[k]

    def arrive(self, ctx: RunContext, ev: Instant, messages: Delivery) -> None:
        """Keep the arrived messages for their receivers (added when they next read)."""
        scalar, _, _ = ev.slot_info(messages.slot)
        ev.hold(messages.slot)
        self.inbox = {"dst": np.concatenate([self.inbox["dst"], messages.dst]),
                      "slot": np.concatenate([self.inbox["slot"], messages.slot]),
                      "mass": np.concatenate([self.inbox["mass"], messages.share * scalar]),
                      "shown": np.concatenate([self.inbox["shown"],
                                               np.zeros(len(messages), dtype=bool)]),
                      "shown_by": np.concatenate([self.inbox["shown_by"],
                                                  np.zeros(len(messages), dtype=np.int64)]),
                      "in_row": np.concatenate([self.inbox["in_row"],
                                                np.zeros(len(messages), dtype=bool)])}
        ev.mixed(messages.due - messages.sent)

    def mark(self, ctx: RunContext, ev: Instant) -> None:
        """At a mark, add what has arrived to the weights (what the record reports), not yet
        to the rows: those are shown only when a model is read (`settle`), so that a mark no
        one evaluates costs no pass over the rows."""
        self._show_weights(None)

    def settle(self, ctx: RunContext, ev: Instant) -> None:
        """Show in every weight and row what has arrived, the messages kept for the phase ends,
        which add them again to their results from the weights their phases read: where the
        marks fall, and which of them are read, changes no bit of the run."""
        self._show_weights(None)
        self._show_rows(ctx, ev, None)

    def read_arrived(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> None:
        """The phases of `nodes` (int64 [m], sorted) read their models: add what has arrived
        to their weights and rows, and let the messages go."""
        self._show_weights(nodes)
        self._show_rows(ctx, ev, nodes)
        mine = np.isin(self.inbox["dst"], nodes)
        ev.drop(self.inbox["slot"][mine])
        self.inbox = {k: v[~mine] for k, v in self.inbox.items()}

    def _show_weights(self, nodes: np.ndarray | None) -> None:
        """w_j <- w_j + sum P_ji w_i over the messages arrived at `nodes` (None: every node)
        that no mark has added yet."""
        box = self.inbox
        now = ~box["shown"] if nodes is None else ~box["shown"] & np.isin(box["dst"], nodes)
        if not now.any():
            return
        receivers, at = np.unique(box["dst"][now], return_inverse=True)
        index = torch.as_tensor(receivers, device=self.weights.device)
        self.weights[index] = self.weights[index] + torch.as_tensor(
            np.bincount(at, weights=box["mass"][now], minlength=len(receivers)),
            device=self.weights.device)
        box["shown"] = box["shown"] | now
        box["shown_by"] = np.where(now, self.shows, box["shown_by"])
        self.shows += 1

    def _show_rows(self, ctx: RunContext, ev: Instant, nodes: np.ndarray | None) -> None:
        """The rows of `nodes` (None: every node) with messages in their weights and not in
        their rows: x_j <- x_j + sum P_ji x_i, on the stored z: z_j <- (w_before / w_after) z_j
        plus the payload rows times P_ji w_i / w_after, one addition to the weights after the
        other (`shown_by`), each as it was made (w_after = w_before plus its messages' weights,
        the same sum), so that a row is the same bit for bit whenever it is read; one sparse
        product with the payload pool per addition, a `row_block` of receivers at a time, in
        place where they are consecutive. O(messages x parameters)."""
        box = self.inbox
        now = box["shown"] & ~box["in_row"]
        if nodes is not None:
            now &= np.isin(box["dst"], nodes)
        for show in np.unique(box["shown_by"][now]).tolist():
            these = now & (box["shown_by"] == show)
            self._add_to_rows(ctx, ev, box["dst"][these], box["slot"][these], box["mass"][these])
        box["in_row"] = box["in_row"] | now

    def _add_to_rows(self, ctx: RunContext, ev: Instant, dst: np.ndarray, slot: np.ndarray,
                     mass: np.ndarray) -> None:
        """One addition of `_show_rows`: messages [M] (receivers, payload slots, weights)."""
        receivers, at = np.unique(dst, return_inverse=True)
        index = torch.as_tensor(receivers, device=ctx.device)
        before = self.row_weights[index]
        after = before + torch.as_tensor(np.bincount(at, weights=mass, minlength=len(receivers)),
                                         device=ctx.device)  # as `_show_weights` added them
        keep_rows = (before / after).to(ctx.dtype)
        coef = mass / after.cpu().numpy()[at]  # z_j += (P_ji w_i / w_after) z_i, per message
        params, block = ctx.population.params, row_block(ctx.population.params)
        for start in range(0, len(receivers), block):  # receivers, a block at a time
            part, scale = index[start:start + block], keep_rows[start:start + block]
            these = (at >= start) & (at < start + len(part))
            first, last = int(receivers[start]), int(receivers[start + len(part) - 1])
            if last - first == len(part) - 1:  # consecutive rows: in place, on their view
                rows = {k: v[first:last + 1] for k, v in params.items()}
                for v in rows.values():
                    v.mul_(row_scale(scale, v))
                ev.add_payloads(rows, at[these] - start, slot[these], coef[these])
                continue
            rows = scaled_rows(params, part, scale)
            ev.add_payloads(rows, at[these] - start, slot[these], coef[these])
            ctx.population.write(part, rows)
        self.row_weights[index] = after

    def end_rows(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> np.ndarray:
        """The phases of `nodes` end: x_j <- x_read + w_read (y - z_read) plus every message
        that arrived since the read (shown at a mark or not), w_j <- w_read plus their weights;
        on the stored z, z_j <- (w_read / w_new) y_j plus the payload rows times
        P_ji w_i / w_new, the phase's result y_j read as one more payload
        (`Instant.result_slots`), in one sparse product into new payload slots, then copied
        into the rows. Where the marks fell changes no bit of it.

        Parameters
        ----------
        ctx : the run.
        ev : the simulation.
        nodes : int64 [m], sorted rows.

        Returns
        -------
        int64 [m], the payload slots holding the new rows (held once: the caller sends or
        drops them).
        """
        box = self.inbox
        mine = np.isin(box["dst"], nodes)
        slot, mass, at = box["slot"][mine], box["mass"][mine], np.searchsorted(nodes,
                                                                                box["dst"][mine])
        self.inbox = {k: v[~mine] for k, v in box.items()}
        index = torch.as_tensor(nodes, device=ctx.device)
        read = self.read_weights[index]
        new = read + torch.as_tensor(np.bincount(at, weights=mass, minlength=len(nodes)),
                                     device=ctx.device)
        result = ev.result_slots(nodes)
        to = new.cpu().numpy()
        models = ev.sums(len(nodes), np.concatenate([np.arange(len(nodes)), at]),
                         np.concatenate([result, slot]),  # its own result first
                         np.concatenate([(read / new).cpu().numpy(), mass / to[at]]))
        ev.copy_out(ctx.population.params, index, models)
        self.weights[index] = new
        self.row_weights[index] = new
        ev.drop(slot)
        return models

    def results_of_offsets(self, ctx: RunContext, nodes: np.ndarray, offsets: Params) -> Params:
        """z_j + (w_read / w_j) offset_j, the phases then read with w_j: their ends,
        (w_j / w_new) z_j + (w_read / w_new) offset_j plus what arrives, are those of the
        offsets (`Asynchronous.results_of_offsets`)."""
        index = torch.as_tensor(nodes, device=ctx.device)
        scale = (self.read_weights[index] / self.weights[index]).to(ctx.dtype)
        self.read_weights[index] = self.weights[index]
        return {k: ctx.population.params[k].index_select(0, index).add_(
            v * row_scale(scale, v)) for k, v in offsets.items()}

    def mass_in_flight(self) -> float:
        """The Push-Sum weight sent and not yet in its receiver's weight (in flight, or arrived,
        kept in the inbox and not shown at a mark)."""
        carried = self.events.carried() if self.events is not None else 0.0
        unshown = self.inbox["mass"][~self.inbox["shown"]]  # a mark's: in the weights
        return carried + math.fsum(unshown.tolist())  # exact: any order

    def average_model(self, ctx: RunContext) -> Any:
        """sum_i w_i z_i / sum_i w_i over the nodes (what is in flight aside)."""
        self.current(ctx)
        return ctx.comm.node_sum(ctx.population.params, self.weights / self.weights.sum())

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        in_flight = self.mass_in_flight()
        return {"ps_weight_min": self.weights.min().item(),
                "ps_weight_max": self.weights.max().item(),
                "ps_weight_sum": self.weights.sum().item(), "ps_weight_in_flight": in_flight}

    def divergence_hint(self, t: int, nodes: list[int]) -> str:
        """The Push-Sum weights w of `nodes` as their latest local phases read them, and their
        steps lr(k) / w.

        Parameters
        ----------
        t : the mark, from 0.
        nodes : the nodes that went non-finite.

        Returns
        -------
        str, the clause for the divergence message ("" without nodes).
        """
        if not nodes or self.events is None:
            return ""
        phases = self.events.phase(np.asarray(nodes[:5], dtype=np.int64)).tolist()
        shown = weights_clause(nodes, self.read_weights[nodes[:5]].tolist(),
                               [self.lr(max(k, 0)) for k in phases],
                               self.read_weights.min().item())
        low, at = torch.min(self.lowest_weights, 0)
        return (f"Push-Sum weights in their latest local phases: {shown}; the lowest any phase "
                f"read: node {int(at)} w = {float(low):.3g}; a weight falls when "
                "a node's inbound messages are slow relative to its sends (one_push_in_flight "
                "= true, fewer stragglers or faster links keep w near 1), a smaller lr or "
                "algorithm.clip_norm bound the step")

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.clone(), "read_weights": self.read_weights.clone(),
                "row_weights": self.row_weights.clone(), "shows": self.shows,
                "inbox": {k: torch.from_numpy(v.copy()) for k, v in self.inbox.items()},
                "lowest_weights": self.lowest_weights.clone(),
                "collapse_warned": self.collapse_warned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights = state["weights"].clone()
        self.read_weights = state["read_weights"].clone()
        self.lowest_weights = state.get("lowest_weights", self.read_weights).clone()  # older:
        # the lowest since the checkpoint
        self.inbox = {k: v.cpu().numpy().copy() for k, v in state["inbox"].items()}
        self.inbox.setdefault("shown", np.zeros(len(self.inbox["dst"]), dtype=bool))  # older
        self.inbox.setdefault("in_row", self.inbox["shown"].copy())  # older: shown in the rows
        self.inbox.setdefault("shown_by", np.zeros(len(self.inbox["dst"]), dtype=np.int64))
        self.row_weights = state.get("row_weights", self.weights).clone()  # older: as weights
        self.shows = int(state.get("shows", 0))
        self.collapse_warned = bool(state.get("collapse_warned", False))  # older: not yet

