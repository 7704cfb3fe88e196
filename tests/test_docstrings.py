"""The house's docstring convention, read from the source: every module-level public function of
the library has a numpydoc docstring, with a `Parameters` section naming each of its parameters
and a `Returns` (or `Yields`) section unless it returns None (docs/architecture.md, "Docstrings").
`python -m tests.test_docstrings` prints what is missing."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("topologies", "p2pfl", "algorithms", "analysis", "bench")
PARAMETER_SECTIONS = {"Parameters", "Other Parameters"}
RETURN_SECTIONS = {"Returns", "Yields"}
_UNDERLINE = re.compile(r"-{3,}")
_NAMES = re.compile(r"\*{0,2}(\w+)")


def sections(docstring: str) -> dict[str, list[str]]:
    """The numpydoc sections of a docstring.

    Parameters
    ----------
    docstring : the docstring's text, as `ast.get_docstring` gives it.

    Returns
    -------
    dict from each section's title (a line underlined by dashes) to its lines, dedented.
    """
    lines = inspect.cleandoc(docstring).splitlines()
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and line.strip() and _UNDERLINE.fullmatch(lines[i + 1].strip()):
            current = found.setdefault(line.strip(), [])
        elif current is not None and not _UNDERLINE.fullmatch(line.strip()):
            current.append(line)
    return found


def documented_names(lines: list[str]) -> set[str]:
    """The parameter names a Parameters section lists.

    Parameters
    ----------
    lines : the section's lines; a parameter's line starts (unindented) with its name, or a
        comma-separated group of names (``rows, cols : ...``), then `` :``.

    Returns
    -------
    set of the names found (without leading ``*``).
    """
    names: set[str] = set()
    for line in lines:
        if not line or line[0].isspace() or " :" not in line:
            continue
        head = line.split(" :", 1)[0]
        parts = [part.strip() for part in head.split(",")]
        if all(_NAMES.fullmatch(part) for part in parts):
            names.update(_NAMES.fullmatch(part).group(1) for part in parts)
    return names


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions without a leading underscore (under a top-level if/try too)."""
    found = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            overload = any("overload" in ast.unparse(d) for d in node.decorator_list)
            if not node.name.startswith("_") and not overload:
                found.append(node)
        elif isinstance(node, ast.If):
            pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody
            pending += [stmt for handler in node.handlers for stmt in handler.body]
    return found


def _returns_none(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True where the return annotation is None or NoReturn (no value to document)."""
    if node.returns is None:
        return False
    return ast.unparse(node.returns).strip("'\"") in {"None", "NoReturn", "typing.NoReturn"}


def missing(source: str, path: str = "<string>") -> list[str]:
    """What the module's public functions lack.

    Parameters
    ----------
    source : the module's Python source.
    path : the name to report the module by.

    Returns
    -------
    list of 'path:function (what is missing)', one per offending function.
    """
    problems = []
    for node in _public_functions(ast.parse(source)):
        where = f"{path}:{node.name}"
        docstring = ast.get_docstring(node, clean=False)
        if not docstring:
            problems.append(f"{where} (no docstring)")
            continue
        found = sections(docstring)
        args = node.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        params = [p for p in params if p not in ("self", "cls")]
        lacks = []
        if params:
            listed = [line for title in PARAMETER_SECTIONS for line in found.get(title, [])]
            if not any(title in found for title in PARAMETER_SECTIONS):
                lacks.append("no Parameters section")
            else:
                absent = [p for p in params if p not in documented_names(listed)]
                if absent:
                    lacks.append(f"Parameters lacks {', '.join(absent)}")
        if not _returns_none(node) and not RETURN_SECTIONS & found.keys():
            lacks.append("no Returns section")
        if lacks:
            problems.append(f"{where} ({'; '.join(lacks)})")
    return problems


def library_problems() -> list[str]:
    """What every module of the library's packages lacks ('path:function (what)')."""
    problems = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            problems += missing(path.read_text(), str(path.relative_to(ROOT)))
    return problems


def test_public_functions_have_numpydoc_docstrings():
    problems = library_problems()
    assert not problems, "numpydoc docstrings incomplete:\n" + "\n".join(problems)


def test_checker_reports_prose_docstrings():
    source = '''
def good(rows: int, cols: int, *args, seed=None, **kwargs) -> float:
    """Summary.

    Parameters
    ----------
    rows, cols : sizes.
    seed : int or None.

    Returns
    -------
    float.
    """

def quiet(x) -> None:
    """Summary.

    Parameters
    ----------
    x : anything.
    """

def prose(x: float, y: float) -> tuple:
    """Returns (x [m], y [m]): the point, where x is the x coordinate and y : the other."""

def partial(x: float, y: float) -> float:
    """Summary.

    Parameters
    ----------
    x : the x.
        y : indented, so a description, not y's entry.
    """

def bare(x):
    pass

def _private(x):
    pass

try:
    import numpy
except ImportError:
    def fallback(x):
        pass
'''
    assert missing(source, "m.py") == [
        "m.py:prose (no Parameters section; no Returns section)",
        "m.py:partial (Parameters lacks y; no Returns section)",
        "m.py:bare (no docstring)",
        "m.py:fallback (no docstring)",
    ]


if __name__ == "__main__":
    print("\n".join(library_problems()) or "all public functions documented")
