"""Experiment trackers (p2pfl.trackers): what a run sends to TensorBoard and W&B, read back."""

from __future__ import annotations

import struct
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import small_config

import p2pfl
from p2pfl.report.results import read_metrics
from p2pfl.trackers import TensorBoard, WandB, scalars


def _events(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every scalar in the TFRecord event files under `log_dir`."""
    from tensorboardX.proto import event_pb2

    found: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = event_pb2.Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def test_tensorboard_gets_every_metric_of_every_round(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX")
    history = p2pfl.run(small_config(rounds=3), tmp_path / "run",
                        callbacks=[TensorBoard(tmp_path / "tb", prefix="ring/")])
    events = _events(tmp_path / "tb")
    assert set(events) == {f"ring/{k}" for k in scalars(history[0])}
    for key in ("test_acc", "train_loss", "consensus_dist"):
        assert events[f"ring/{key}"] == [(r["round"], pytest.approx(r[key], rel=1e-6))
                                         for r in history]
    assert history == read_metrics(tmp_path / "run" / "metrics.jsonl")  # nothing added


def test_wandb_runs_offline_with_the_config_and_finishes_after_the_last_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    class Run:
        def log(self, values: dict[str, float], step: int) -> None:
            calls.append(("log", (step, values)))

        def finish(self) -> None:
            calls.append(("finish", None))

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: (calls.append(("init", kwargs)), Run())[1]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    cfg = small_config(rounds=2)
    history = p2pfl.run(cfg, tmp_path / "run", callbacks=[WandB(project="p", dir=str(tmp_path))])
    assert [c[0] for c in calls] == ["init", "log", "log", "finish"]
    init = calls[0][1]
    assert init["mode"] == "offline" and init["project"] == "p" and init["config"]["seed"] == 3
    assert [c[1] for c in calls[1:3]] == [(r["round"], scalars(r)) for r in history]


def test_a_tracker_without_its_library_is_refused_when_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install 'p2pfl\[wandb\]'"):
        WandB()
    with pytest.raises(ValueError, match="mode"):
        WandB(mode="cloud")


def test_the_engine_never_imports_a_tracker_library() -> None:
    code = ("import sys, p2pfl.engine, p2pfl.cli.main, analysis; "
            "print(sorted(m for m in ('tensorboardX', 'tensorboard', 'wandb', 'p2pfl.trackers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
