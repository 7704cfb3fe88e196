"""Import paths of the flat layout before the engine was split into packages (core, data, scale,
config, report, engine, cli), kept for one release: importing one warns (DeprecationWarning) and
gives the module that now holds it (or, for a module split in parts, a module of all their
names)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

MOVED: dict[str, tuple[str, ...]] = {
    "p2pfl.population": ("p2pfl.core.population",),
    "p2pfl.comm": ("p2pfl.core.mixing",),
    "p2pfl.models": ("p2pfl.core.models",),
    "p2pfl.gradients": ("p2pfl.core.gradients",),
    "p2pfl.local": ("p2pfl.core.solver", "p2pfl.core.terms", "p2pfl.core.trainer"),
    "p2pfl.reference": ("p2pfl.core.reference",),
    "p2pfl.federated": ("p2pfl.core.federated",),
    "p2pfl.metrics": ("p2pfl.core.metrics",),
    "p2pfl.guard": ("p2pfl.core.guard",),
    "p2pfl.memory": ("p2pfl.core.memory",),
    "p2pfl.seeding": ("p2pfl.core.seeding",),
    "p2pfl.distributed": ("p2pfl.scale.distributed", "p2pfl.scale.processes"),
    "p2pfl.network": ("p2pfl.scale.network",),
    "p2pfl.launch": ("p2pfl.scale.launch",),
    "p2pfl.entry": ("p2pfl.cli.entry", "p2pfl.cli.starting", "p2pfl.scale.launch"),
    "p2pfl.results": ("p2pfl.report.results",),
    "p2pfl.table": ("p2pfl.report.table",),
    "p2pfl.figures": ("p2pfl.report.figures",),
    "p2pfl.plots": ("p2pfl.report.plots",),
    "p2pfl.labels": ("p2pfl.report.labels",),
    "p2pfl.build": ("p2pfl.engine.builder",),
    "p2pfl.loop": ("p2pfl.engine.loop",),
    "p2pfl.rundir": ("p2pfl.engine.rundir",),
    "p2pfl.checkpoint": ("p2pfl.engine.checkpoint",),
    "p2pfl.evaluation": ("p2pfl.engine.evaluation",),
    "p2pfl.network_time": ("p2pfl.engine.network_time",),
    "p2pfl.compare": ("p2pfl.engine.compare",),
}


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of `MOVED` (installed on sys.meta_path by `import p2pfl`)."""

    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        homes = MOVED[spec.name]
        warnings.warn(f"{spec.name} is now {' and '.join(homes)}; the old path goes in the "
                      "next release", DeprecationWarning, stacklevel=2)
        parts = [importlib.import_module(home) for home in homes]
        if len(parts) == 1:
            return parts[0]
        merged = types.ModuleType(spec.name, f"{spec.name}: the names of {', '.join(homes)}")
        for part in reversed(parts):
            merged.__dict__.update({k: v for k, v in vars(part).items()
                                    if not k.startswith("__")})
        return merged

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module was made by `create_module`."""


def install() -> None:
    """Put the finder of the moved import paths first on sys.meta_path (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())  # before any finder of a stale install
