"""Read and write Harbor task directories.

<task>/instruction.md, task.toml, environment/, solution/solve.sh, tests/test.sh.
posttrain also reads an optional solution/steps.json: the oracle as agent turns
(a list of shell commands), used to build SFT demonstrations.

A single-turn task (metadata.kind = "single-turn", e.g. the instruct suite) is answered by one
reply, scored on the host by its suite's scorer (tasks.suites.score_reply): it has no tests/
or environment/, and its oracle is the reply in solution/reply.md.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from posttrain.config_base import error_key
from posttrain.errors import TaskError
from posttrain.tasks.config import TaskConfig

MAX_INSTRUCTION_BYTES = 1_000_000


@dataclass
class Task:
    id: str
    instruction: str
    config: TaskConfig
    path: Path
    files: dict[str, str] = field(default_factory=dict)  # only for tasks not yet written

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def domain(self) -> str:
        return str(self.config.metadata.get("domain", self.config.metadata.get("category", "")))

    @property
    def single_turn(self) -> bool:
        return self.config.metadata.get("kind") == "single-turn"

    def oracle_reply(self) -> str:
        """A single-turn task's oracle reply (solution/reply.md, exactly as written)."""
        p = self.solution_dir / "reply.md"
        if not p.is_file():
            raise TaskError(f"{p}: missing (a single-turn task's oracle reply)")
        return p.read_text(encoding="utf-8")

    def oracle_steps(self) -> list[str | dict] | None:
        """The oracle as agent turns, if the task ships solution/steps.json: shell commands, or
        tool calls {"name": ..., "arguments": {...}} for a task that declares tools."""
        p = self.solution_dir / "steps.json"
        if not p.is_file():
            return None
        steps = json.loads(p.read_text())
        if not isinstance(steps, list) or not all(isinstance(s, str) or _is_call(s) for s in steps):
            raise TaskError(f"{p}: must be a JSON list of shell commands or of tool calls "
                            '{"name": ..., "arguments": {...}}')
        return steps


def _is_call(step) -> bool:
    return isinstance(step, dict) and isinstance(step.get("name"), str) \
        and isinstance(step.get("arguments", {}), dict)


def _format_validation(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{error_key(first) or 'task.toml'}: {first['msg']} (got {first.get('input')!r})"


def parse_config(path: Path) -> TaskConfig:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: not valid TOML: {e}") from None
    try:
        return TaskConfig.model_validate(raw)
    except ValidationError as e:
        raise TaskError(f"{path}: {_format_validation(e)}") from None


def read_task(path: str | Path) -> Task:
    """Read one task directory; raise TaskError with a one-line reason if it is malformed."""
    path = Path(path)
    if not path.is_dir():
        raise TaskError(f"{path}: not a task directory (does not exist or is not a directory)")
    for required in ("instruction.md", "task.toml"):
        if not (path / required).is_file():
            raise TaskError(f"{path}: missing {required}")
    inst_path = path / "instruction.md"
    if inst_path.stat().st_size > MAX_INSTRUCTION_BYTES:
        raise TaskError(f"{inst_path}: larger than {MAX_INSTRUCTION_BYTES} bytes")
    try:
        instruction = inst_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskError(f"{inst_path}: not UTF-8 text") from None
    if not instruction.strip():
        raise TaskError(f"{inst_path}: empty instruction")
    config = parse_config(path / "task.toml")
    if config.metadata.get("kind") != "single-turn" and not (path / "tests/test.sh").is_file():
        raise TaskError(f"{path}: missing tests/test.sh")
    return Task(id=path.name, instruction=instruction, config=config, path=path)


def load_tasks(root: str | Path) -> list[Task]:
    """Every task directory directly under root (or root itself if it is one), sorted by id."""
    root = Path(root)
    if (root / "task.toml").is_file():
        return [read_task(root)]
    if not root.is_dir():
        raise TaskError(f"{root}: no such task directory")
    tasks = [read_task(p) for p in sorted(root.iterdir()) if (p / "task.toml").is_file()]
    if not tasks:
        raise TaskError(f"{root}: contains no task directories (no */task.toml)")
    return tasks


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dump_config(config: TaskConfig) -> str:
    """TOML text for a config: top-level scalars, then one table per section."""
    data = config.model_dump(exclude_none=True)
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, table in data.items():
        if isinstance(table, dict):
            lines.append(f"\n[{section}]")
            lines += [f"{json.dumps(k) if not k.isidentifier() else k} = {_toml_value(v)}"
                      for k, v in table.items()]
    return "\n".join(lines) + "\n"


def plain_name(name: str, what: str) -> str:
    """A name that becomes one path component (task id, split): no '/', no '..', not hidden,
    so a task is never written outside its output directory."""
    if not name or "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise TaskError(f"{what} {name!r}: use a plain name (no '/', not starting with '.')")
    return name


def write_task(task: Task, root: str | Path) -> Path:
    """Write task under root/<id>: instruction, task.toml and every file in task.files."""
    dest = Path(root) / plain_name(task.id, "task id")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "instruction.md").write_text(task.instruction, encoding="utf-8")
    (dest / "task.toml").write_text(dump_config(task.config), encoding="utf-8")
    for rel, content in task.files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        if rel.endswith(".sh"):
            p.chmod(0o755)
    task.path = dest
    return dest
