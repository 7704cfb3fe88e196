"""Messages in flight on the simulated clock of an event-driven run, as arrays.

A message is a row of parallel arrays: when it is due, its sender and receiver (graph node ids),
its share (a fraction of the payload, e.g. a Push-Sum share), when it was sent, the slot of its
payload (-1: none) and its group: a message whose arrival a flow-level network decides is due at
infinity until `deliver` gives its group's arrival time (-1: due when posted). A payload is a
model snapshot taken when it was sent: one row of a stacked pool (name -> [capacity, *shape],
the models' dtype) with a float64 scalar (e.g. the sender's Push-Sum weight), the time its
parameters were read and an integer tag (e.g. a model version). The messages of one send
share one slot, which is free again once the last of them is released. There is no Python
object per message, and the whole state is tensors and arrays (a checkpoint holds it: the
messages, and each payload still needed once, not the pool's free slots).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from p2pfl.core.population import Params, copy_rows, same_rows
from p2pfl.scale.payload_sum import add_rows_of

_FIELDS = {"due": np.float64, "src": np.int64, "dst": np.int64, "share": np.float64,
           "sent": np.float64, "slot": np.int64, "group": np.int64}
_SLOT_FIELDS = {"scalar": np.float64, "read": np.float64, "tag": np.int64, "refs": np.int64,
                "row": np.int64}  # row: the source row a snapshot was copied from (-1: none)


@dataclass(frozen=True)
class Delivery:
    """Messages taken together, sorted by (arrival, sender, receiver, order of posting)."""

    src: np.ndarray  # int64 [M], graph node ids
    dst: np.ndarray  # int64 [M]
    share: np.ndarray  # float64 [M]
    sent: np.ndarray  # float64 [M], send times (s)
    slot: np.ndarray  # int64 [M], payload slots (-1: none)
    due: np.ndarray  # float64 [M], arrival times (s)

    def __len__(self) -> int:
        return len(self.src)

    def subset(self, index: np.ndarray) -> Delivery:
        """The messages index [m] (their order).

        Parameters
        ----------
        index : int64 [m], positions.

        Returns
        -------
        Delivery.
        """
        return Delivery(self.src[index], self.dst[index], self.share[index], self.sent[index],
                        self.slot[index], self.due[index])


class Mailbox:
    """Messages in flight and their payloads (see the module docstring).

    Parameters
    ----------
    like : name -> [rows, *shape]; the payloads' shapes, dtype and device (the pool starts with
        as many slots as rows, allocated when the first payload is stored, and grows by half).
    """

    def __init__(self, like: Params) -> None:
        self.pool: Params = {k: v.new_empty((0, *v.shape[1:])) for k, v in like.items()}
        for name, kind in {**_FIELDS, **_SLOT_FIELDS}.items():
            setattr(self, name, np.zeros(0, dtype=kind))
        self.first_capacity = len(next(iter(like.values())))  # as many slots as rows at first

    def __len__(self) -> int:
        return len(self.due)

    def store(self, source: Params, scalar: np.ndarray, read: np.ndarray, tag: np.ndarray,
              refs: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Copy payload rows into free slots.

        Parameters
        ----------
        source : name -> [m, *shape], the snapshots; or, with `rows`, the stacked models whose
            rows `rows` are copied (`copy_rows`: a bounded block gathered at a time).
        scalar, read : float64 [m], each payload's scalar and the time its parameters were read.
        tag : int64 [m], each payload's tag.
        refs : int64 [m], the messages that will carry each payload.
        rows : int64 [m] rows of `source`, or None.

        Returns
        -------
        int64 array [m], the slots.
        """
        slots = self.claim(len(scalar))
        device = next(iter(self.pool.values())).device
        index = torch.as_tensor(slots, device=device)
        run = self.run_of(slots)
        if rows is not None and run is not None and all(
                source[k].dtype == v.dtype for k, v in self.pool.items()):
            of = torch.as_tensor(rows, device=device)  # straight into the slots: one pass
            for k, v in self.pool.items():
                torch.index_select(source[k], 0, of, out=v[run])
        elif rows is not None:
            copy_rows(self.pool, index, source, torch.as_tensor(rows, device=device))
        else:
            for k, v in self.pool.items():
                v.index_copy_(0, index, source[k].to(v.dtype))
        self.label(slots, scalar, read, tag, refs, rows)
        return slots

    def claim(self, m: int, high: bool = False) -> np.ndarray:
        """Take m free slots, consecutive where a run of m is free (the pool grows first where
        fewer are free; else the longest runs first); each held once (`refs` 1) until `label`
        or `release_slots`. A claim may move the pool: take views of it after.

        Parameters
        ----------
        m : slots.
        high : from the last run that holds them (large batches, kept apart from the small
            claims, which take the first).

        Returns
        -------
        int64 [m], ascending.
        """
        free = np.flatnonzero(self.refs == 0)
        if len(free) < m:
            self._grow(len(self.refs) + m - len(free))
            free = np.flatnonzero(self.refs == 0)
        starts = np.flatnonzero(np.diff(free, prepend=-2) != 1)  # the runs of free slots
        lengths = np.diff(np.append(starts, len(free)))
        fits = np.flatnonzero(lengths >= m)
        if len(fits) and high:  # the last run that holds them all, its last slots
            last = starts[fits[-1]] + lengths[fits[-1]]
            slots = free[last - m:last]
        elif len(fits):  # the first run that holds them all
            slots = free[starts[fits[0]]:starts[fits[0]] + m]
        else:  # the longest runs first
            order = np.argsort(-lengths, kind="stable")
            taken = np.concatenate([free[a:a + n] for a, n in zip(starts[order],
                                                                   lengths[order], strict=True)])
            slots = np.sort(taken[:m])
        self.refs[slots], self.row[slots] = 1, -1
        return slots

    @staticmethod
    def run_of(slots: np.ndarray) -> slice | None:
        """slots as a slice where they are consecutive and ascending (one view of the pool),
        else None."""
        if len(slots) and int(slots[-1]) - int(slots[0]) == len(slots) - 1:
            return slice(int(slots[0]), int(slots[-1]) + 1)
        return None

    def label(self, slots: np.ndarray, scalar: np.ndarray, read: np.ndarray, tag: np.ndarray,
              refs: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Say what written slots [m] hold: each payload's scalar, read time and tag (float64,
        float64, int64 [m]), the messages that will carry it (`refs` [m]; 0 frees it) and the
        rows of the models it equals (int64 [m], or None: none)."""
        self.scalar[slots], self.read[slots], self.tag[slots] = scalar, read, tag
        self.refs[slots] = refs
        self.row[slots] = -1 if rows is None else rows

    def sums(self, count: int, rows: np.ndarray, slots: np.ndarray, weights: np.ndarray,
             start: Params | None = None) -> np.ndarray:
        """Write weighted sums of payload rows into `count` claimed slots (`claim`): row r is
        start[r] (none: 0) plus weights[e] * the payload of slots[e] for every e with
        rows[e] = r, in the order given, each row from its own entries (`add_rows_of`); on the
        CPU, into the pool itself where the claimed slots are consecutive, else through a
        copy.

        Parameters
        ----------
        count : rows (the slots claimed).
        rows : int64 [M], in 0..count-1, every one of them present unless `start` is given.
        slots : int64 [M], payload slots (not the new ones).
        weights : float64 [M].
        start : name -> [count, *shape], or None.

        Returns
        -------
        int64 [count], the new slots, held once (`label` them or `release_slots` them).
        """
        new = self.claim(count)
        run = self.run_of(new)
        direct = run is not None and all(v.device.type == "cpu" for v in self.pool.values())
        out = {k: v[run] if direct else v.new_zeros((count, *v.shape[1:]))  # zeros: beta = 0
               for k, v in self.pool.items()}  # is not relied on to ignore NaNs off the CPU
        if start is not None:
            for k, v in out.items():
                v.copy_(start[k])
        add_rows_of(out, rows, slots, weights, self.pool, overwrite=start is None)
        if not direct:
            index = torch.as_tensor(new, device=next(iter(self.pool.values())).device)
            for k, v in self.pool.items():
                v.index_copy_(0, index, out[k])
        return new

    def copy_out(self, out: Params, rows: torch.Tensor, slots: np.ndarray) -> None:
        """out[k][rows[e]] = the payload row of slots[e] (one pass where the slots are a run).

        Parameters
        ----------
        out : name -> [n, *shape], written in place.
        rows : int64 [m], distinct rows of `out`, on its device.
        slots : int64 [m], payload slots.
        """
        run = self.run_of(slots)
        if run is None:
            copy_rows(out, rows, self.pool, torch.as_tensor(slots, device=rows.device))
            return
        for k, v in out.items():
            v.index_copy_(0, rows, self.pool[k][run])

    def release_slots(self, slots: np.ndarray) -> None:
        """Release one hold of each of slots [u] (a held result, a claimed slot not sent)."""
        np.subtract.at(self.refs, slots, 1)

    def _grow(self, capacity: int) -> None:
        capacity = max(capacity, len(self.refs) * 3 // 2, self.first_capacity)
        extra = capacity - len(self.refs)
        for k, v in self.pool.items():
            self.pool[k] = torch.cat([v, v.new_empty((extra, *v.shape[1:]))])
        for name, kind in _SLOT_FIELDS.items():
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra, kind)]))

    def post(self, due: np.ndarray, src: np.ndarray, dst: np.ndarray, share: np.ndarray,
             sent: np.ndarray, slot: np.ndarray, group: np.ndarray | None = None) -> None:
        """Put messages in flight.

        Parameters
        ----------
        due : float64 [M], arrival times (s; inf: until `deliver`).
        src, dst : int64 [M], senders and receivers.
        share : float64 [M], each message's share of its payload.
        sent : float64 [M], the send times (s).
        slot : int64 [M], payload slots from `store`, or -1.
        group : int64 [M], the groups `deliver` names (default: -1, none).
        """
        group = np.full(len(due), -1) if group is None else group
        new = {"due": due, "src": src, "dst": dst, "share": share,
               "sent": sent, "slot": slot, "group": group}
        for name, kind in _FIELDS.items():
            setattr(self, name, np.concatenate([getattr(self, name),
                                                np.asarray(new[name], dtype=kind)]))

    def deliver(self, groups: np.ndarray, time: float) -> None:
        """Make the messages of `groups` due at `time` (s)."""
        self.due[np.isin(self.group, groups)] = time

    def next_due(self) -> float:
        """When the next message arrives (inf when none is in flight)."""
        return float(self.due.min()) if len(self.due) else float("inf")

    def take(self, until: float) -> Delivery:
        """Remove the messages due at or before `until` and return them.

        Their payloads stay readable until `release`.

        Parameters
        ----------
        until : seconds.

        Returns
        -------
        Delivery, sorted by (arrival, sender, receiver, order of posting).
        """
        now = self.due <= until
        order = np.flatnonzero(now)
        order = order[np.lexsort((order, self.dst[order], self.src[order], self.due[order]))]
        taken = Delivery(self.src[order], self.dst[order], self.share[order], self.sent[order],
                         self.slot[order], self.due[order])
        for name in _FIELDS:
            setattr(self, name, getattr(self, name)[~now])
        return taken

    def release(self, delivery: Delivery) -> None:
        """Free the payload slots of delivered messages no other message carries.

        Parameters
        ----------
        delivery : what `take` returned.
        """
        self.release_slots(delivery.slot[delivery.slot >= 0])

    def payload(self, slots: np.ndarray) -> Params:
        """The payload rows of `slots`: name -> [m, *shape] (copies; a view for one slot, valid
        until it is released)."""
        if len(slots) == 1:
            s = int(slots[0])
            return {k: v[s:s + 1] for k, v in self.pool.items()}
        index = torch.as_tensor(slots, device=next(iter(self.pool.values())).device)
        return {k: v.index_select(0, index) for k, v in self.pool.items()}

    def add_payloads(self, out: Params, rows: np.ndarray, slots: np.ndarray,
                     weights: np.ndarray) -> None:
        """out[k][rows[e]] += weights[e] * the payload row of slots[e], for every e at once: one
        sparse [rows x slots] x pool product per tensor, a row's messages in the order given, its
        result the same whatever other rows share the product (p2pfl/scale/payload_sum.py).

        Parameters
        ----------
        out : name -> [r, *shape], contiguous, the pool's dtype and device; added to in place.
        rows : int64 [M], rows of `out`.
        slots : int64 [M], payload slots.
        weights : float64 [M].
        """
        add_rows_of(out, rows, slots, weights, self.pool)

    def carried(self) -> float:
        """Sum over the messages in flight of share * the payload's scalar (e.g. the Push-Sum
        weight in flight)."""
        has = self.slot >= 0  # summed exactly: the same whatever order they were posted in
        return math.fsum((self.share[has] * self.scalar[self.slot[has]]).tolist())

    def state_dict(self, source: Params | None = None) -> dict[str, Any]:
        """The messages and the payload table, which holds each payload still needed (by a
        message in flight or a held delivery) once: `payload_slots` [u], the slots in use;
        `payload_rows` [u], the row of `source` a slot's payload still equals bit for bit (a
        snapshot of a model that has not changed since), or -1; `payloads`, name -> [s, *shape],
        the rows of the others, in order. The free slots' rows are not saved.

        Parameters
        ----------
        source : name -> [rows, *shape], the models snapshots were copied from (`store`'s
            `source` with `rows`), or None.

        Returns
        -------
        dict of tensors.
        """
        state: dict[str, Any] = {name: torch.from_numpy(getattr(self, name).copy())
                                 for name in {**_FIELDS, **_SLOT_FIELDS}}
        used = np.flatnonzero(self.refs > 0)
        index = torch.as_tensor(used, device=next(iter(self.pool.values())).device)
        rows = self._unchanged_rows(index, source)
        return state | {"payload_slots": torch.from_numpy(used), "payload_rows": rows.cpu(),
                        "payloads": {k: v.index_select(0, index[rows < 0])
                                     for k, v in self.pool.items()}}

    def _unchanged_rows(self, slots: torch.Tensor, source: Params | None) -> torch.Tensor:
        """int64 [u]: the row of `source` each slot's payload was copied from and still equals
        bit for bit, or -1."""
        rows = torch.as_tensor(self.row[slots.cpu().numpy()], device=slots.device)
        if source is None:
            return torch.full_like(rows, -1)
        copied = torch.nonzero(rows >= 0).squeeze(1)
        changed = ~same_rows(self.pool, slots[copied], source, rows[copied])
        rows[copied[changed]] = -1
        return rows

    def load_state_dict(self, state: dict[str, Any], source: Params | None = None) -> None:
        """Put a `state_dict` back: the pool at its saved capacity, the used slots' rows from
        `payloads` or from `source` (free slots zero: `store` writes a slot before it is read).
        A checkpoint written before the payload table holds the whole pool (`pool`), which
        loads as it is.

        Parameters
        ----------
        state : what `state_dict` returned (or the older form).
        source : the models as `state_dict` was given them (restored first), or None.
        """
        for name, kind in {**_FIELDS, **_SLOT_FIELDS}.items():  # a field added since: -1
            size = len(state["due"] if name in _FIELDS else state["refs"])
            setattr(self, name, (state[name].cpu().numpy() if name in state
                                 else np.full(size, -1)).astype(kind))
        device = next(iter(self.pool.values())).device
        if "pool" in state:  # the whole pool, free slots too (before the payload table)
            self.pool = {k: v.to(device).clone() for k, v in state["pool"].items()}
            return
        used, rows = (state[k].to(device) for k in ("payload_slots", "payload_rows"))
        copied = rows >= 0
        self.pool = {k: v.new_zeros((len(self.refs), *v.shape[1:])) for k, v in self.pool.items()}
        for k, v in self.pool.items():
            v.index_copy_(0, used[~copied], state["payloads"][k].to(device, v.dtype))
        if copied.any():
            copy_rows(self.pool, used[copied], source, rows[copied])
