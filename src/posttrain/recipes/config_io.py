"""Reading a recipe's typed config: TOML file, then key=value overrides, validated once.
An unknown key or a wrong type is a one-line ConfigError naming the key."""

from __future__ import annotations

import contextlib
import json
import shutil
import tomllib
from pathlib import Path
from typing import Callable, TypeVar

from pydantic import BaseModel, ValidationError

from posttrain.config_base import first_error
from posttrain.errors import ConfigError, PosttrainError

M = TypeVar("M", bound=BaseModel)


def merge(base: dict, over: dict) -> dict:
    """Nested dict update: tables merge key by key, everything else is replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_override(item: str) -> dict:
    """`rl.steps=10` → {"rl": {"steps": 10}}; the value is read as TOML, else as a string."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value (e.g. rl.steps=10)")
    key, raw = item.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    for part in reversed(key.strip().split(".")):
        value = {part: value}
    return value


def load_model(model: type[M], path: str | None = None, overrides: list[str] = (),
               base: dict | None = None) -> M:
    """base (e.g. a preset) ← TOML file at path ← overrides, validated as `model`."""
    data = dict(base or {})
    if path:
        try:
            data = merge(data, tomllib.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
    for item in overrides:
        data = merge(data, parse_override(item))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(first_error(e)) from None


def fresh_run_dir(cfg: BaseModel, run_dir: Path, overwrite: bool, hint: str) -> Path:
    """An empty run directory holding the resolved config; a non-empty one is an error
    (whose message ends with `hint`) unless overwrite."""
    if file := next((p for p in (run_dir, *run_dir.parents) if p.is_file()), None):
        raise PosttrainError(f"cannot create the run directory {run_dir}: {file} is a file "
                             "(runs_dir and the run's name must name directories)")
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise PosttrainError(f"{run_dir} already exists; pass {hint}")
        shutil.rmtree(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PosttrainError(f"cannot create the run directory {run_dir}: {e.strerror or e}") from None
    (run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    return run_dir


@contextlib.contextmanager
def removed_on_failure(run_dir: Path, keep: Callable[[], bool]):
    """Remove run_dir if the body raises and keep() is false (nothing worth resuming from), so
    a failed run never leaves a directory whose "already exists" hides the real error."""
    try:
        yield
    except BaseException:
        if not keep():
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def config_changes(saved: dict, given: dict, prefix: str = "") -> list[str]:
    """`key: old -> new` for every leaf that differs between two config dicts."""
    out = []
    for k in sorted(set(saved) | set(given)):
        a, b, key = saved.get(k), given.get(k), f"{prefix}{k}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_changes(a, b, key + ".")
        elif a != b:
            out.append(f"{key}: {json.dumps(a)} -> {json.dumps(b)}")
    return out


def resumed_config(model: type[M], run_dir: Path, path: str | None, overrides: list[str]) -> M:
    """The run's own config (RUN/config.json), with the given file and overrides laid over it;
    refused, listing the differences, if they change anything."""
    saved_path = run_dir / "config.json"
    if not saved_path.is_file():
        raise PosttrainError(f"{run_dir}: no run to resume (no config.json)")
    saved = json.loads(saved_path.read_text(encoding="utf-8"))
    cfg = load_model(model, path, overrides, base=saved)
    changes = config_changes(model.model_validate(saved).model_dump(mode="json"), cfg.model_dump(mode="json"))
    if changes:
        raise ConfigError(f"--resume continues {run_dir} under its own config ({saved_path}), and the "
                          f"given config changes it: {'; '.join(changes)}; {_resume_advice(run_dir, changes)}")
    return cfg


def _resume_advice(run_dir: Path, changes: list[str]) -> str:
    """What to do instead; a longer run is a new run (rollout.steps is fixed when a run starts)."""
    if not any(c.startswith("rollout.steps:") for c in changes):
        return "drop the changes, or start a new run under another name"
    latest = run_dir / "checkpoints" / "latest"
    step = latest.read_text().strip() if latest.is_file() else "step-N"
    return (f"--resume cannot extend a run: start a new one under another name from its model, "
            f"policy.init = \"{run_dir}/checkpoints/{step}/model\" (the optimizer state starts fresh)")
