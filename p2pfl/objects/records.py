"""Reading a run directory's object records, and the record of a Python class or object."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from p2pfl.config import ConfigError


def read_record(path: Path) -> dict[str, Any] | None:
    """A JSON record of a run directory.

    Parameters
    ----------
    path : the record's file.

    Returns
    -------
    dict, or None when the file does not exist.

    Raises
    ------
    ConfigError
        naming resume when the file is not valid JSON.
    """
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError("resume", f"{path} is not valid JSON: {err}") from None


def class_path(cls: type) -> str:
    """A class's 'module.QualifiedName'.

    Parameters
    ----------
    cls : the class.

    Returns
    -------
    str.
    """
    return f"{cls.__module__}.{cls.__qualname__}"


def describe_code(obj: object) -> dict[str, Any]:
    """The record of a class, or of an object by its class and its plain attributes.

    Its path, and a fingerprint of its name, source (where Python has it) and those attributes
    (not of its module's name: a script run as __main__ and imported is the same class). A run
    directory never imports code; a resume compares the fingerprint of what it is given.

    Parameters
    ----------
    obj : a class or an object.

    Returns
    -------
    dict: class, params (plain attributes) and fingerprint.
    """
    cls = obj if isinstance(obj, type) else type(obj)
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # defined where Python keeps no source (an interactive session)
        source = ""
    params = {} if isinstance(obj, type) else {
        k: v for k, v in sorted(vars(obj).items())
        if isinstance(v, bool | int | float | str | type(None))}
    blob = json.dumps([cls.__qualname__, source, params], default=str).encode()
    return {"class": class_path(cls), "params": params,
            "fingerprint": hashlib.sha256(blob).hexdigest()}
