"""An algorithm class and round callbacks given as objects, and their records (algorithm.json,
callbacks.json)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p2pfl.callbacks import Callback, check_state
from p2pfl.config import Config, ConfigError, config_with_overrides
from p2pfl.errors import CallbackError
from p2pfl.objects.records import describe_code, read_record

ALGORITHM_RECORD = "algorithm.json"
CALLBACKS_RECORD = "callbacks.json"
COMPRESSOR_RECORD = "compressor.json"


def resolve_algorithm(cfg: Config, out: Path, resume: bool,
                      algorithm: type | None) -> tuple[Config, dict | None]:
    """The algorithm class given as an object, registered and recorded.

    A class passed is registered under its `name`, which replaces cfg.algorithm.name; an
    algorithm not built in is recorded by its class.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    algorithm : an Algorithm class, or None.

    Returns
    -------
    tuple (config as recorded, record to write or None for a built-in algorithm).

    Raises
    ------
    ConfigError
        naming algorithm when the class cannot be registered, or differs from the one the run had.
    """
    from algorithms import ALGORITHMS, register

    if algorithm is not None:
        try:
            register(algorithm)
        except (TypeError, ValueError) as err:
            raise ConfigError("algorithm", str(err)) from None
        if cfg.algorithm.name != algorithm.name:
            old = ALGORITHMS[cfg.algorithm.name]
            overrides: dict[str, Any] = {"algorithm.name": algorithm.name}
            if cfg.algorithm.variant == old.default_variant:
                overrides["algorithm.variant"] = ""  # the new class's own default form
            cfg = config_with_overrides(cfg.to_dict(), overrides)
    cls = ALGORITHMS[cfg.algorithm.name]
    record = None if cls.__module__.split(".")[0] == "algorithms" else describe_code(cls)
    recorded = read_record(out / ALGORITHM_RECORD) if resume else None
    if recorded is not None and (record is None or record["fingerprint"] !=
                                 recorded["fingerprint"]):
        raise ConfigError("algorithm", f"{out} ran the algorithm class {recorded['class']}; "
                          "this is another class or its source changed: pass the same one")
    return cfg, record


def resolve_callbacks(out: Path, resume: bool, callbacks: Sequence[Any] | None
                      ) -> tuple[list[Callback], dict | None]:
    """The callbacks given as objects, checked and recorded.

    Parameters
    ----------
    out : the run directory.
    resume : whether the run resumes.
    callbacks : p2pfl.Callback objects, or None.

    Returns
    -------
    tuple (the callbacks, record to write or None without callbacks).

    Raises
    ------
    ConfigError
        naming callbacks for something that is not a list of Callback objects, a state a checkpoint
        cannot keep, or, on resume, callbacks (class, source and plain attributes) other than the
        run had.
    """
    if isinstance(callbacks, Callback):
        raise ConfigError("callbacks", f"expected a list of p2pfl.Callback objects, got one "
                          f"{type(callbacks).__name__}: pass [{type(callbacks).__name__}(...)]")
    given = list(callbacks or [])
    for callback in given:
        if not isinstance(callback, Callback):
            raise ConfigError("callbacks", "expected p2pfl.Callback objects, got "
                              f"{type(callback).__name__}")
        try:
            check_state(callback)
        except CallbackError as err:
            raise ConfigError("callbacks", str(err)) from None
    record = {"callbacks": [describe_code(c) for c in given]} if given else None
    if resume:
        recorded = read_record(out / CALLBACKS_RECORD) or {"callbacks": []}
        ran = [c["class"] for c in recorded["callbacks"]]
        if not given and ran:
            raise ConfigError("callbacks", f"{out} ran with the callbacks {ran} given as Python "
                              "objects: pass them again, p2pfl.run(cfg, out, callbacks=[...], "
                              "resume=True)")
        prints = [c["fingerprint"] for c in (record or {"callbacks": []})["callbacks"]]
        if prints != [c["fingerprint"] for c in recorded["callbacks"]]:
            raise ConfigError("callbacks", f"the callbacks differ from those {out} ran with "
                              f"({ran or 'none'}; class, source or attributes): pass the same ones")
    return given, record


def resolve_compressor(cfg: Config, out: Path, resume: bool, compressor: object | None
                       ) -> tuple[Config, object | None, dict | None]:
    """The compressor given as an object, checked and recorded.

    A compressor object sets `algorithm.compressor = "object"` and is recorded by its class,
    source and plain attributes; a resume needs the same one again.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    compressor : an object with compress, decompress and bits, or None.

    Returns
    -------
    tuple (config as recorded, the compressor, record to write or None).

    Raises
    ------
    ConfigError
        naming compressor when it lacks a method, the algorithm does not compress, or it differs
        from the one the run had.
    """
    from algorithms import ALGORITHMS
    from p2pfl.core.compression import check_compressor

    record = None
    if compressor is not None:
        try:
            check_compressor(compressor)
        except TypeError as err:
            raise ConfigError("compressor", str(err)) from None
        options = ALGORITHMS[cfg.algorithm.name].Options
        if "compressor" not in {f for f in options.__dataclass_fields__}:
            raise ConfigError("compressor", f"{cfg.algorithm.name} sends whole models; a "
                              "compressor is for an algorithm that compresses (choco)")
        cfg = config_with_overrides(cfg.to_dict(), {"algorithm.compressor": "object"})
        record = describe_code(compressor)
    recorded = read_record(out / COMPRESSOR_RECORD) if resume else None
    if recorded is not None and (record is None or
                                 record["fingerprint"] != recorded["fingerprint"]):
        ran = f"{out} ran with the compressor {recorded['class']} {recorded['params']}"
        raise ConfigError("compressor", f"{ran}: pass it again (compressor=...)" if record is None
                          else f"{ran}; this is another one (class, source or attributes): "
                          "pass the same one")
    return cfg, compressor, record
