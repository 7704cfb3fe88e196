"""Which fields two resolved configs (`Config.to_dict()`, a run's config.json) differ in."""

from __future__ import annotations

from typing import Any

# Fields a resumed run may change: the number of rounds (extended, or cut back to no earlier than
# the checkpoint), where and how it runs, and what it does on a later divergence. Any other
# difference would make the resumed rounds those of another experiment.
# engine.chunk_size is not among them: batched kernels round differently for other batch counts
# (about 1e-8 in float32 parameters after one round), and the checkpoint keeps the chunk sizes
# an automatic plan chose so that a resume batches as the run did.
RESUMABLE = ("rounds", "device", "engine.checkpoint_every", "engine.on_divergence",
             "engine.max_loss", "network.horizon_s")


def config_diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """The fields whose values differ between two config dicts.

    Parameters
    ----------
    old, new : config dicts (nested).
    prefix : put before every name (for the recursion into tables).

    Returns
    -------
    list of str, 'dotted.name (old -> new)', sorted by name.
    """
    out = []
    for key in sorted(set(old) | set(new)):
        name = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{name}.")
        elif a != b:
            out.append(f"{name} ({a!r} -> {b!r})")
    return out
