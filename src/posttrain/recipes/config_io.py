"""Reading a recipe's typed config: TOML file, then key=value overrides, validated once.
An unknown key or a wrong type is a one-line ConfigError naming the key."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

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
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
        raise ConfigError(f"config key {where}: {err['msg']}{got}") from None


def fresh_run_dir(cfg: BaseModel, run_dir: Path, overwrite: bool, hint: str) -> Path:
    """An empty run directory holding the resolved config; a non-empty one is an error
    (whose message ends with `hint`) unless overwrite."""
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise PosttrainError(f"{run_dir} already exists; pass {hint}")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    return run_dir
