"""A model given as an object (any torch.nn.Module) and its record (model.json)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from p2pfl.config import OBJECT, Config, ConfigError, ModelConfig
from p2pfl.objects.records import read_record

MODEL_RECORD = "model.json"


def describe_model(model: nn.Module) -> dict[str, Any]:
    """The record of a model object.

    Parameters
    ----------
    model : the module.

    Returns
    -------
    dict: class, parameter shapes, number of parameters and SHA-256 of the initial state
    (parameters and buffers).
    """
    digest = hashlib.sha256()
    shapes = {}
    for name, value in model.state_dict().items():
        shapes[name] = list(value.shape)
        digest.update(name.encode())
        digest.update(value.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    cls = type(model)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "shapes": shapes,
            "num_params": sum(p.numel() for p in model.parameters()),
            "fingerprint": digest.hexdigest()}


def check_module(model: nn.Module) -> None:
    """Refuse what the population cannot train as given.

    Parameters
    ----------
    model : the module.

    Raises
    ------
    ConfigError
        naming model and the parameter: no parameters, frozen or non-floating parameters, or
        tensors without data (the meta device).
    """
    params = list(model.named_parameters())
    if not params:
        raise ConfigError("model", f"{type(model).__name__} has no parameters to train")
    for name, p in [*params, *model.named_buffers()]:
        if p.is_meta:
            raise ConfigError("model", f"{name} is on the meta device (no data): materialize the "
                              "module first (e.g. module.to_empty(device='cpu') and initialize)")
    for name, p in params:
        if not p.is_floating_point():
            raise ConfigError("model", f"parameter {name} is {p.dtype}; parameters must be "
                              "floating point (keep integer state in a buffer)")
        if not p.requires_grad:
            raise ConfigError("model", f"parameter {name} has requires_grad=False, but every "
                              "parameter is trained: register a frozen tensor as a buffer")


def resolve_model(cfg: Config, out: Path, resume: bool,
                  model: object | None) -> tuple[Config, nn.Module | None, dict | None]:
    """The model given as an object, checked and recorded.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    model : a torch.nn.Module, or None.

    Returns
    -------
    tuple (config as recorded, model to run or None for a named one, record to write).

    Raises
    ------
    ConfigError
        naming model: "object" in the config with nothing passed, not a Module, what
        `check_module` refuses, or a model other than the run had.
    """
    recorded = read_record(out / MODEL_RECORD) if resume else None
    if model is None:
        if cfg.model.name != OBJECT:
            return cfg, None, None
        if recorded is None:
            raise ConfigError("model.name", f"{OBJECT!r} means a model passed to "
                              "p2pfl.run(cfg, out, model=...); none was passed")
        raise ConfigError("model", f"{out} ran a {recorded['class']} given as a Python object and"
                          " a run directory never imports code: pass it again, "
                          "p2pfl.run(cfg, out, model=..., resume=True)")
    if not isinstance(model, nn.Module):
        raise ConfigError("model", f"expected a torch.nn.Module, got {type(model).__name__}")
    check_module(model)
    record = describe_model(model)
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("model", f"the model differs from the one {out} started from "
                          f"({recorded['class']}; class, shapes or initial parameters): pass "
                          "the same one")
    return dataclasses.replace(cfg, model=ModelConfig(name=OBJECT)), model, record
