"""Fuzzing the command line: bad input of every kind through `p2pfl.cli.main`.

Each case holds the CLI to its promise for bad input: exit status 2, exactly one line on stderr,
no traceback, and no file outside the run's own output created, changed or removed (the case's
temporary tree, inputs and working directory included, is compared before and after). A valid
generated input may exit 0 instead, or 3 with one line (a value so large that training
diverges). Every call must return within BUDGET_S seconds.

The named cases are the reported bugs (files that are directories, corrupt datasets, checkpoints
and run directories, sizes that must be refused quickly, [[compare]] variants); the generated ones
are seeded mutations of one valid tiny config, each given by `--set` and in the TOML file. Calls
run in-process; the few that could run away (huge sizes) run in a child process under a time and
memory limit. The terminal summary says how many cases were tried (tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np
import pytest
import torch

from algorithms import ALGORITHMS
from p2pfl.cli import main
from p2pfl.config import Config
from p2pfl.data import files as loaders
from p2pfl.engine.checkpoint import CHECKPOINT, MANIFEST
from tests.conftest import fuzz_budget, skip_plots

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 10.0  # seconds any one call may take, refused or run
CHILD_MEMORY = 6 << 30  # address space of a child process (bytes)
PROPERTY = "fuzz_cli_cases"  # counted by pytest_terminal_summary in tests/conftest.py
ELAPSED = "fuzz-elapsed-s="
QUIET_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)

pytestmark = pytest.mark.usefixtures("one_thread")

# The valid tiny experiment, table -> key -> TOML literal ("" is the top level): one round of
# one local step on 4 synthetic nodes.
Tables = dict[str, dict[str, str]]
BASE: Tables = {
    "": {"seed": "0", "rounds": "1", "device": '"cpu"'},
    "data": {"name": '"synthetic"', "num_nodes": "4", "synthetic_train": "100",
             "synthetic_test": "20"},
    "model": {"name": '"mlp"'},
    "topology": {"name": '"ring"'},
    "algorithm": {"name": '"dfedavg"', "local_steps": "1", "local_epochs": "0",
                  "batch_size": "4"},
    "eval": {"local_samples": "10"},
}


def render(tables: Tables) -> str:
    """The TOML text of `tables`."""
    lines = [f"{k} = {v}" for k, v in tables[""].items()]
    for name, table in tables.items():
        if name:
            lines += [f"[{name}]", *(f"{k} = {v}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def with_tables(**replaced: dict[str, str]) -> Tables:
    """BASE with whole tables replaced."""
    return {**BASE, **replaced}


def mutated(dotted: str, value: str) -> Tables:
    """BASE with `dotted = value` (a TOML literal) written into the file: a key of a table, a
    top-level key, or a table replaced by a top-level value."""
    tables = {name: dict(table) for name, table in BASE.items()}
    section, _, key = dotted.rpartition(".")
    if not section:
        tables.pop(key, None)
    tables.setdefault(section, {})[key] = value
    return tables


def literal(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def variants(*tables: str) -> str:
    """[[compare]] tables, each given as its TOML body."""
    return "".join(f"[[compare]]\n{body}\n" for body in tables)


# --- running one case ---------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    seconds: float
    error: str = ""  # the exception that escaped main, "Type: message"
    where: str = ""  # where it was raised (or where a timed-out call was)
    timed_out: bool = False


@dataclass
class Call:
    argv: list[str]
    out: tuple[Path, ...] = ()  # what the command writes (left out of the comparison)
    refuse: bool = True  # False: a valid input, exit 0 allowed
    frozen: tuple[Path, ...] = ()  # must not change, even inside `out`
    check: Callable[[Outcome], str] | None = None  # a further promise: "" or what broke
    isolated: bool = False  # in a child process (a size that could run away)


@dataclass
class Scene:
    """A case's temporary tree (all of it compared before and after) and a finished run."""

    root: Path
    finished: Path

    @property
    def out(self) -> Path:
        return self.root / "out"

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def config(self, tables: Tables = BASE, extra: str = "") -> Path:
        return self.file("cfg.toml", render(tables) + extra)

    def run_dir(self) -> Path:
        """A copy of the finished one-round run."""
        return Path(shutil.copytree(self.finished, self.root / "run"))

    def run(self, config: Path, *sets: str, refuse: bool = True,
            check: Callable[[Outcome], str] | None = None, isolated: bool = False) -> Call:
        argv = ["run", str(config), "--out", str(self.out), "--quiet"]
        for item in sets:
            argv += ["--set", item]
        return Call(argv, (self.out,), refuse, check=check, isolated=isolated)


Frame = tuple[str, int, str]  # file, line, function


def _where(frames: list[Frame]) -> str:
    """The innermost frame of this repository's code (and the innermost of all, if elsewhere);
    `frames` innermost last."""
    def shown(frame: Frame) -> str:
        path = Path(frame[0])
        return f"{path.relative_to(ROOT) if _own(path) else path.name}:{frame[1]} in {frame[2]}"

    own = [f for f in frames if _own(Path(f[0]))]
    if not own or own[-1] == frames[-1]:
        return shown(frames[-1]) if frames else "?"
    return f"{shown(own[-1])}, in {shown(frames[-1])}"


def _own(path: Path) -> bool:
    return path.is_relative_to(ROOT) and "site-packages" not in path.parts


def _in_process(argv: list[str], capfd: pytest.CaptureFixture[str]) -> Outcome:
    """main(argv) here; warnings a fresh process would print count as lines on stderr."""
    capfd.readouterr()
    error = where = ""
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except Exception as exc:  # what would be a traceback and exit status 1
            code, error = 1, f"{type(exc).__name__}: {exc}".splitlines()[0]
            where = _where([(f.filename, f.lineno or 0, f.name)
                            for f in traceback.extract_tb(exc.__traceback__)])
    seconds = time.monotonic() - start
    captured = capfd.readouterr()
    shown = {(w.category.__name__, str(w.message)) for w in caught
             if not issubclass(w.category, QUIET_WARNINGS)}
    err = captured.err + "".join(f"{name}: {message}\n" for name, message in sorted(shown))
    return Outcome(code, captured.out, err, seconds, error, where)


CHILD = f"""
import faulthandler, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))
from p2pfl.cli import main
faulthandler.dump_traceback_later({BUDGET_S}, exit=True)
start = time.monotonic()
code = main(sys.argv[1:])
print("{ELAPSED}%.3f" % (time.monotonic() - start))
sys.exit(code)
"""
_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')


def _isolated(argv: list[str], cwd: Path) -> Outcome:
    """main(argv) in a child process: stopped after BUDGET_S seconds, CHILD_MEMORY of memory."""
    env = {k: v for k, v in os.environ.items() if k != "P2PFL_DATA"}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=BUDGET_S + 120)
    out, mark, seconds = proc.stdout.rpartition(ELAPSED)
    if not mark:
        out, seconds = proc.stdout, "0"
    timed_out = "Timeout (" in proc.stderr
    error = where = ""
    if timed_out:  # faulthandler's dump: one block per thread, innermost first; main's holds cli
        block = next((b for b in proc.stderr.split("\n\n") if "cli.py" in b), proc.stderr)
        frames = [(f, int(n), name) for f, n, name in _FRAME.findall(block)][::-1]
        where = _where(frames) if frames else proc.stderr.strip().splitlines()[-1]
    elif "Traceback" in proc.stderr:
        error = proc.stderr.strip().splitlines()[-1]
        last = proc.stderr.rpartition("Traceback")[2]
        where = _where([(f, int(n), name) for f, n, name in _FRAME.findall(last)])
    return Outcome(proc.returncode, out, proc.stderr, float(seconds), error, where, timed_out)


def _state(paths: Iterable[Path], skip: tuple[Path, ...] = ()) -> dict[Path, tuple]:
    """Every file and directory at or below `paths` (not below `skip`): kind, mode, size, mtime
    and content hash."""
    state: dict[Path, tuple] = {}

    def add(path: Path) -> None:
        if path in skip or any(s in path.parents for s in skip) or not os.path.lexists(path):
            return
        st = path.lstat()
        if path.is_dir() and not path.is_symlink():
            state[path] = ("dir", st.st_mode)
            for child in sorted(path.iterdir()):
                add(child)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            state[path] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)

    for path in paths:
        add(path)
    return state


def _changes(before: dict[Path, tuple], after: dict[Path, tuple], root: Path) -> list[str]:
    def name(path: Path) -> str:
        return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)

    return ([f"created {name(p)}" for p in after if p not in before]
            + [f"removed {name(p)}" for p in before if p not in after]
            + [f"changed {name(p)}" for p in before if p in after and before[p] != after[p]])


def _listed(changes: list[str]) -> str:
    return ", ".join(changes[:4]) + (f" (+{len(changes) - 4} more)" if len(changes) > 4 else "")


def _problems(call: Call, o: Outcome, changed: list[str], thawed: list[str],
              root: Path) -> list[str]:
    """How the outcome breaks the promise, one phrase each (none: it holds); `changed`: what
    changed outside the run's output, `thawed`: what changed of `call.frozen`."""
    lines = o.err.splitlines()
    found = []
    if o.timed_out:
        found.append(f"still running after {BUDGET_S:g} s (at {o.where})")
    elif o.error:
        found.append(f"exit {o.code}, traceback: {o.error} (raised at {o.where})")
    elif "Traceback" in o.out + o.err:
        found.append(f"exit {o.code}, a traceback is printed")
    elif o.code != 2 and (call.refuse or o.code not in (0, 3)):
        said = f": {lines[0]}" if lines else ""
        found.append(f"exit {o.code}{said}" if o.code else "exit 0: accepted, not refused")
    elif o.code in (2, 3) and len(lines) != 1:
        found.append(f"{len(lines)} lines on stderr: {' | '.join(lines[:3])}")
    if o.seconds > BUDGET_S:
        found.append(f"took {o.seconds:.1f} s (budget {BUDGET_S:g} s)")
    if changed:
        found.append(f"changed outside the run directory: {_listed(changed)}")
    if thawed:
        found.append(f"changed what must stay as it was: {_listed(thawed)}")
    if call.check and (broken := call.check(o)):
        found.append(broken)
    # Short: the temporary root as <tmp>, a run of one character as 'x*5000', 300 characters.
    found = [re.sub(r"(.)\1{19,}", lambda m: f"{m[1]}*{len(m[0])}", p.replace(str(root), "<tmp>"))
             for p in found]
    return [p if len(p) <= 300 else f"{p[:297]}..." for p in found]


# --- the named cases ----------------------------------------------------------------------------

Builder = Callable[[Scene], Call]
CASES: dict[str, Builder] = {}


def case(name: str) -> Callable[[Builder], Builder]:
    def register(builder: Builder) -> Builder:
        assert name not in CASES, name
        CASES[name] = builder
        return builder
    return register


def _no_file(path: Path) -> Callable[[Outcome], str]:
    return lambda o: f"{path.name} left in --out" if path.exists() else ""


@case("set-lr-1e39-float32-overflow")
def _lr_overflow(s: Scene) -> Call:
    return s.run(s.config(), "algorithm.lr=1e39", check=_no_file(s.out / "config.json"))


# A config path, or an --out, that is the wrong kind of thing.


def _config_dir(s: Scene) -> Path:
    path = s.root / "config-dir"
    path.mkdir()
    return path


case("config-is-a-directory-run")(lambda s: s.run(_config_dir(s)))
case("config-is-a-directory-compare")(lambda s: Call(
    ["compare", str(_config_dir(s)), "--out", str(s.out), "--quiet"], (s.out,)))
case("config-is-a-directory-study")(lambda s: Call(
    ["study", str(_config_dir(s)), "--topologies", "ring", "--out", str(s.out), "--quiet"],
    (s.out,)))


def _out_call(s: Scene, command: str, config: Path, below: str) -> Call:
    """--out a user's file (below="") or a path below it; the file must stay as it is."""
    taken = s.file("taken", "a user's file")
    out = taken / below if below else taken
    topologies = ["--topologies", "ring"] if command == "study" else []
    return Call([command, str(config), *topologies, "--out", str(out), "--quiet"], (out,),
                frozen=(taken,))


COMPARE_AB = variants('label = "a"', 'label = "b"')
for _command, _extra in (("run", ""), ("run", COMPARE_AB), ("compare", COMPARE_AB),
                         ("study", "")):
    _kind = f"{_command}-compare-config" if _command == "run" and _extra else _command
    for _place, _below in (("is-a-file", ""), ("below-a-file", "sub")):
        case(f"out-{_place}-{_kind}")(
            lambda s, c=_command, e=_extra, b=_below: _out_call(s, c, s.config(extra=e), b))


@case("out-in-read-only-directory")
def _read_only(s: Scene) -> Call:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories (see out-under-sys)")
    locked = s.root / "locked"
    locked.mkdir(mode=0o555)
    return Call(["run", str(s.config()), "--out", str(locked / "run"), "--quiet"])


def _ran(o: Outcome) -> str:
    return "" if o.code == 0 else f"a valid run exited {o.code}"


@case("paths-with-spaces-and-unicode-run")
def _unicode_paths(s: Scene) -> Call:
    config = s.file("my configs é/exp 名.toml", render(BASE))
    out = s.root / "runs ü/ring 1"
    return Call(["run", str(config), "--out", str(out), "--quiet"], (s.root / "runs ü",),
                refuse=False, check=_ran)


@case("config-is-a-symlink-run")
def _config_link(s: Scene) -> Call:
    link = s.root / "link.toml"
    link.symlink_to(s.config())
    return Call(["run", str(link), "--out", str(s.out), "--quiet"], (s.out,), refuse=False,
                check=_ran)


@case("out-is-a-symlink-to-an-empty-directory-run")
def _out_link(s: Scene) -> Call:
    target = s.root / "target"
    target.mkdir()
    (s.root / "link").symlink_to(target)
    return Call(["run", str(s.config()), "--out", str(s.root / "link"), "--quiet"],
                (s.root / "link", target), refuse=False, check=_ran)


@case("out-is-a-dangling-symlink-run")
def _out_dangling(s: Scene) -> Call:
    (s.root / "link").symlink_to(s.root / "nowhere")
    return Call(["run", str(s.config()), "--out", str(s.root / "link"), "--quiet"],
                (s.root / "link", s.root / "nowhere"))


case("out-under-sys")(lambda s: Call(
    ["run", str(s.config()), "--out", "/sys/p2pfl-fuzz/run", "--quiet"]))
case("out-under-proc")(lambda s: Call(
    ["run", str(s.config()), "--out", "/proc/p2pfl-fuzz/run", "--quiet"]))


# Topology files.


def _topology_file(s: Scene, name: str, content: str | bytes | np.ndarray) -> Path:
    if isinstance(content, np.ndarray):
        path = s.root / name
        np.save(path, content)
        return path
    return s.file(name, content)


TOPOLOGY_FILES: dict[str, tuple[str, str, Any]] = {
    # case: (topology, file name, its content; no file name: the content is the path)
    "from-edges-1d-npy": ("from_edges", "edges.npy", np.arange(4)),
    "from-adjacency-garbage-npz": ("from_adjacency", "a.npz", random.Random(1).randbytes(512)),
    "from-edges-endpoint-0.5": ("from_edges", "edges.txt", "0 1\n1 2\n2 3\n3 0.5\n"),
    "from-edges-endpoint-inf": ("from_edges", "edges.txt", "0 1\n1 2\n2 3\n3 inf\n"),
    "from-edges-endpoint-nan": ("from_edges", "edges.txt", "0 1\n1 2\n2 3\n3 nan\n"),
    "from-adjacency-path-too-long": ("from_adjacency", "", "x" * 5000),
}


def _topology_case(s: Scene, command: str, topology: str, name: str, content: Any) -> Call:
    path = str(_topology_file(s, name, content)) if name else content
    if command == "analyze":
        return Call(["analyze", topology, "--n", "4", "--set", f"path={path}",
                     "--set", "directed=false"])
    tables = with_tables(topology={"name": literal(topology), "path": literal(path),
                                   "directed": "false"})
    return s.run(s.config(tables))


for _name, (_topology, _file, _content) in TOPOLOGY_FILES.items():
    for _command in ("run", "analyze"):
        case(f"{_name}-{_command}")(
            lambda s, c=_command, t=_topology, f=_file, x=_content: _topology_case(s, c, t, f, x))


# Fashion-MNIST files under data.root that are there but broken.


def _idx(dims: tuple[int, ...], fill: int = 0, size: int | None = None) -> bytes:
    """An IDX uint8 file of `dims` (its header), with `size` data bytes (default: all)."""
    body = math.prod(dims) if size is None else size
    return bytes((0, 0, 8, len(dims))) + struct.pack(f">{len(dims)}I", *dims) + bytes([fill]) * body


def _idx_pair(images: bytes, labels: bytes) -> dict[str, bytes]:
    return {f"{split}-{kind}": content for split in ("train", "t10k")
            for kind, content in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels))}


def _gz(files: dict[str, bytes], cut: bool = False) -> dict[str, bytes]:
    out = {}
    for name, content in files.items():
        packed = gzip.compress(content)
        out[f"{name}.gz"] = packed[:len(packed) // 2] if cut else packed
    return out


_GARBAGE = random.Random(2).randbytes(1000)
FASHION_MNIST: dict[str, dict[str, bytes]] = {
    "garbage-gz": {f"{name}.gz": _GARBAGE for name in _idx_pair(b"", b"")},
    "truncated-gz": _gz(_idx_pair(_idx((100, 28, 28)), _idx((100,))), cut=True),
    "idx-shorter-than-its-header-says": _gz(_idx_pair(_idx((60000, 28, 28), size=100),
                                                      _idx((60000,), size=100))),
    "images-and-labels-differ-in-count": _gz(_idx_pair(_idx((10, 28, 28)), _idx((9,)))),
    "label-out-of-range": _gz(_idx_pair(_idx((10, 28, 28)), _idx((10,), fill=200))),
    "empty-plain-files": {name: b"" for name in _idx_pair(b"", b"")},
}


def _fashion_mnist(s: Scene, root: str) -> Call:
    tables = with_tables(data={"name": '"fashion_mnist"', "root": literal(root),
                               "num_nodes": "4"})
    return s.run(s.config(tables))


def _dataset_dir(s: Scene, files: dict[str, bytes]) -> str:
    for name, content in files.items():
        s.file(f"fmnist/{name}", content)
    return str(s.root / "fmnist")


for _name, _files in FASHION_MNIST.items():
    case(f"fashion-mnist-{_name}")(
        lambda s, f=_files: _fashion_mnist(s, _dataset_dir(s, f)))
case("fashion-mnist-root-too-long")(lambda s: _fashion_mnist(s, "x" * 5000))
case("fashion-mnist-root-with-nul")(lambda s: _fashion_mnist(s, "data\x00root"))


# Sizes: refused, or failing, within the budget (the integer ones in a child process).

SIZES = {"data.synthetic_train": ("1e9", "1000000000"), "data.num_nodes": ("1e7", "10000000"),
         "topology.window": ("1e6", "1000000", "1e8", "100000000")}
for _key, _values in SIZES.items():
    for _value in _values:
        _runaway = "e" not in _value  # an integer: valid to the loader, so it must be quick
        case(f"size-{_key}={_value}")(
            lambda s, k=_key, v=_value, r=_runaway: s.run(s.config(), f"{k}={v}", isolated=r))


# A finished run directory, broken before a resume.


def _resume(run: Path, *sets: str) -> Call:
    argv = ["resume", str(run), "--quiet"]
    for item in sets:
        argv += ["--set", item]
    return Call(argv, (run,))


def _replace(path: Path, content: str | bytes | None) -> None:
    """`path` replaced by `content` (None: by an empty directory)."""
    path.unlink()
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


RUN_FILES: dict[str, tuple[str, str | bytes | None]] = {
    "config-json-is-a-list": ("config.json", "[1, 2, 3]\n"),
    "config-json-is-null": ("config.json", "null\n"),
    "config-json-not-utf8": ("config.json", b'{"seed": "\xff\xfe"}\n'),
    "config-json-is-a-directory": ("config.json", None),
    "metrics-jsonl-is-a-directory": ("metrics.jsonl", None),
}


def _broken_run(s: Scene, file: str, content: str | bytes | None) -> Call:
    run = s.run_dir()
    _replace(run / file, content)
    return _resume(run, "rounds=2")


for _name, (_file, _content) in RUN_FILES.items():
    case(f"resume-{_name}")(lambda s, f=_file, c=_content: _broken_run(s, f, c))


def _edit_checkpoint(run: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change checkpoint.pt and list its new digest in the manifest (a consistent pair)."""
    path = run / CHECKPOINT
    state = torch.load(path, map_location="cpu", weights_only=True)
    edit(state)
    torch.save(state, path)
    manifest = json.loads((run / MANIFEST).read_text())
    manifest["sha256"] = [hashlib.sha256(path.read_bytes()).hexdigest()]
    (run / MANIFEST).write_text(json.dumps(manifest))


def _checkpoint_case(s: Scene, edit: Callable[[dict[str, Any]], None]) -> Call:
    run = s.run_dir()
    _edit_checkpoint(run, edit)
    return _resume(run, "rounds=2")


for _key in ("population", "algorithm", "metrics", "round", "config", "streams"):
    case(f"resume-checkpoint-without-{_key}")(
        lambda s, k=_key: _checkpoint_case(s, lambda state: state.pop(k)))


def _five_nodes(state: dict[str, Any]) -> None:
    """The parameters of 5 nodes in the checkpoint of a run of 4."""
    flat = state["population"]["flat"]
    state["population"]["flat"] = torch.cat([flat, flat[:len(flat) // 4]])


CHECKPOINT_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "population-of-5-nodes": _five_nodes,
    "population-one-value-short": lambda state: state["population"].update(
        flat=state["population"]["flat"][:-1]),
    "population-is-a-tensor": lambda state: state.update(population=torch.zeros(3)),
    "round-is-a-string": lambda state: state.update(round="1"),
}
for _name, _edit in CHECKPOINT_EDITS.items():
    case(f"resume-checkpoint-{_name}")(lambda s, e=_edit: _checkpoint_case(s, e))


@case("resume-set-compare-on-a-single-run")
def _resume_compare(s: Scene) -> Call:
    run = s.run_dir()
    call = _resume(run, 'compare=[{label = "a"}]')
    return dataclasses.replace(call, frozen=(run / "config.json",))


@case("run-compare-config-resume-a-single-run")
def _run_resume_compare(s: Scene) -> Call:
    run = s.run_dir()
    return Call(["run", str(s.config(extra=COMPARE_AB)), "--resume", str(run), "--quiet"],
                (run,), frozen=(run,))


# plot and table on broken metrics.

METRICS: dict[str, str | bytes | None] = {
    "not-utf8": b'{"round": 1, "test_acc": 0.5}\n\xff\xfe\n',
    "bare-nan-line": '{"round": 1, "test_acc": 0.5, "messages": 8, "bytes_sent": 8}\nNaN\n',
    "json-list-line": '[1, 2]\n{"round": 1, "test_acc": 0.5}\n',
    "record-without-round": '{"test_acc": 0.5, "messages": 8, "bytes_sent": 8}\n',
    "is-a-directory": None,
}


def _metrics_case(s: Scene, command: str, content: str | bytes | None) -> Call:
    run = s.root / "runs" / "bad"
    run.mkdir(parents=True)
    if content is None:
        (run / "metrics.jsonl").mkdir()
    else:
        s.file("runs/bad/metrics.jsonl", content)
    if command == "table":
        return Call(["table", str(run)])
    stem = s.root / "figure"
    return Call(["plot", str(run), "--out", str(stem)],
                (stem.with_suffix(".png"), stem.with_suffix(".pdf")))


for _name, _content in METRICS.items():
    for _command in ("plot", "table"):
        case(f"{_command}-metrics-{_name}")(
            lambda s, c=_command, x=_content: _metrics_case(s, c, x))
case("plot-out-in-a-missing-directory")(lambda s: Call(
    ["plot", str(s.run_dir()), "--out", "/nonexistent/p2pfl-fuzz/x"]))


# [[compare]] variants and labels, through `run` and through `compare`.


def _no_variant_ran(out: Path, index: int) -> Callable[[Outcome], str]:
    def check(o: Outcome) -> str:
        ran = sorted(str(p.parent.relative_to(out)) for p in out.rglob("metrics.jsonl"))
        broken = [f"variants ran before the refusal: {', '.join(ran)}"] if ran else []
        if f"compare[{index}]" not in o.err:
            broken.append(f"the message does not name compare[{index}]")
        return "; ".join(broken)
    return check


def _compare(s: Scene, command: str, tables: str, check: Callable[[Outcome], str] | None = None,
             refuse: bool = True, *options: str) -> Call:
    config = s.config(extra=tables)
    if command == "run":
        return s.run(config, refuse=refuse, check=check)
    return Call(["compare", str(config), "--out", str(s.out), "--quiet", *options], (s.out,),
                refuse, check=check)


BAD_LAST = {
    "topology": 'label = "c"\ntopology.name = "directed_ring"',  # gossip needs undirected
    "data": 'label = "c"\ndata.num_nodes = 200',  # more nodes than samples
}
LABELS = {  # case: (labels, refused)
    "duplicate-labels": (("a", "a"), True),
    "labels-of-one-folder": (("A b", "a-b"), True),
    "labels-dot-and-dotdot": ((".", ".."), True),
    "label-dotdot": (("..",), False),
    "label-dot": ((".",), False),
}
for _command in ("run", "compare"):
    for _name, _body in BAD_LAST.items():
        case(f"compare-bad-{_name}-variant-after-good-ones-{_command}")(
            lambda s, c=_command, b=_body: _compare(
                s, c, COMPARE_AB + variants(b), _no_variant_ran(s.out, 2)))
    for _name, (_labels, _refuse) in LABELS.items():
        case(f"compare-{_name}-{_command}")(
            lambda s, c=_command, x=_labels, r=_refuse: _compare(
                s, c, variants(*(f"label = {literal(label)}" for label in x)), refuse=r))


def _seeds_once(o: Outcome) -> str:
    seeds = [line.split("|")[2].strip() for line in o.out.splitlines()
             if line.startswith("| ") and not line.startswith("| run ")]
    return "" if o.code != 0 or seeds == ["1"] else f"seed 0 twice is tabulated as n={seeds}"


case("compare-seeds-0-0")(lambda s: _compare(
    s, "compare", variants('label = "a"'), _seeds_once, False, "--seeds", "0,0"))
for _name, _topologies in (("unknown-topology", "moebius"),
                           ("good-and-unknown-topology", "ring,moebius")):
    case(f"study-{_name}")(lambda s, t=_topologies: Call(
        ["study", str(s.config()), "--topologies", t, "--out", str(s.out), "--quiet"],
        (s.out,)))


# --- generated cases: seeded mutations of the valid config --------------------------------------


def _fields() -> list[tuple[str, type]]:
    """(dotted name, type) of every scalar field of Config and its tables; [algorithm]: those of
    the base's algorithm (another algorithm's field is refused whatever its value)."""
    found = []
    for name, tp in get_type_hints(Config).items():
        if name == "algorithm":
            tp = ALGORITHMS[BASE["algorithm"]["name"].strip('"')].Options
        if dataclasses.is_dataclass(tp):
            found += [(f"{name}.{k}", t) for k, t in get_type_hints(tp).items()]
        elif name != "compare":
            found.append((name, tp))
    return found


WRONG_TYPE = {int: ['"ten"', "1.5", "true", "[1]"], float: ['"x"', "true", "[0.5]"],
              str: ["5", "true", '["a"]'], bool: ["1", '"yes"', "[true]"],
              Any: ['"ten"', "true", "[1.5]", "[-1]", "[0, 0]"]}  # byzantine.nodes
NUMBERS = ["-1", "0", "1", "1e-320", "1e39", "1e300", "-1e300", str(2**63), "nan", "inf", "-inf"]
STRINGS = ['""', literal("x" * 5000), '"nope"']
# Fields whose huge valid value is a long run, not bad input (the sizes above cover them).
COSTLY = {"rounds", "data.num_nodes", "data.synthetic_train", "data.synthetic_test",
          "algorithm.local_epochs", "algorithm.local_steps", "algorithm.gossip_steps",
          "topology.window"}
MUTATIONS = fuzz_budget(90, 360)


def mutations(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """`count` (dotted key, TOML literal) pairs: mostly a known field with a value of the wrong
    type, a bad number or a bad string; else an unknown key, table or top-level field, or a
    table replaced by a number."""
    rng = random.Random(seed)
    fields = _fields()
    tables = [name for name in BASE if name] + ["engine"]
    found = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.85:
            name, tp = rng.choice(fields)
            values = WRONG_TYPE[tp] + NUMBERS + STRINGS
            if name in COSTLY:
                values.remove(str(2**63))
            found.append((name, rng.choice(values)))
        elif kind < 0.90:
            found.append((f"{rng.choice(tables)}.colour{i}", rng.choice(NUMBERS + STRINGS)))
        elif kind < 0.94:
            found.append((f"section{i}.x", "1"))
        elif kind < 0.97:
            found.append((f"field{i}", rng.choice(NUMBERS)))
        else:
            found.append((rng.choice(tables), "5"))
    return found


def _shown(value: str) -> str:
    return value if len(value) <= 24 else f"{value[:6]}...({len(value)} chars)"


for _i, (_key, _value) in enumerate(mutations(MUTATIONS)):
    case(f"gen{_i:03d}-set-{_key}={_shown(_value)}")(
        lambda s, k=_key, v=_value: s.run(s.config(), f"{k}={v}", refuse=False))
    case(f"gen{_i:03d}-toml-{_key}={_shown(_value)}")(
        lambda s, k=_key, v=_value: s.run(s.config(mutated(k, v)), refuse=False))


# --- the test -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the base config (one round, with its checkpoint)."""
    root = tmp_path_factory.mktemp("finished")
    (root / "cfg.toml").write_text(render(BASE))
    with pytest.MonkeyPatch.context() as patch:
        skip_plots(patch)
        assert main(["run", str(root / "cfg.toml"), "--out", str(root / "run"), "--quiet"]) == 0
    return root / "run"


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_clean_line(name: str, tmp_path: Path, finished: Path,
                                     capfd: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch,
                                     record_property: Callable[[str, object], None]) -> None:
    cwd = tmp_path / "cwd"  # relative and default paths land in the compared tree
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("P2PFL_DATA", raising=False)  # data.root is then the only place looked
    monkeypatch.setattr(loaders, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian-dataset")
    skip_plots(monkeypatch)
    call = CASES[name](Scene(tmp_path, finished))
    before, frozen = _state([tmp_path], call.out), _state(call.frozen)
    outcome = _isolated(call.argv, cwd) if call.isolated else _in_process(call.argv, capfd)
    record_property(PROPERTY, 1)
    changed = _changes(before, _state([tmp_path], call.out), tmp_path)
    thawed = _changes(frozen, _state(call.frozen), tmp_path)
    problems = _problems(call, outcome, changed, thawed, tmp_path)
    assert not problems, "; ".join(problems)
