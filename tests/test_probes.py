"""rollout/ and recipes/ ask an environment, engine or reward what it declares (rollout/envs.py
Environment, engine/base.py Engine, types.Reward), never what class it is: a new
getattr/hasattr/isinstance there fails here unless it joins the allow-list below, and the list
in docs/ARCHITECTURE.md ("What is still probed"), with its reason."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "posttrain"
FOLDERS = ("rollout", "recipes")
PROBE = re.compile(r"\b(getattr|hasattr|isinstance)\(")

# (file under src/posttrain, text on the line): why it may stay
ALLOWED = {
    ("rollout/config.py", "isinstance(data, dict)"): "raw config input (a renamed key)",
    ("rollout/length.py", "getattr(before, knob)"): "a LengthStage's knobs by name",
    ("rollout/length.py", "getattr(stage, k)"): "a LengthStage's knobs by name",
    ("rollout/envs.py", "isinstance(out, Exception)"): "a reward function's error, carried as a value",
    ("rollout/judge.py", "isinstance(answer, Exception)"): "a judge's failure, cached as a value",
    ("rollout/executors/ray_executor.py", "isinstance(e, EngineLost)"): "which Ray error lost a wave",
    ("recipes/rl/config.py", "getattr(stage, knob)"): "a LengthStage's knobs by name",
    ("recipes/rl/engines.py", "isinstance(env, SingleTurnEnv)"): "builder: the env wrapped to run in the engine's process",
    ("recipes/config_io.py", "isinstance(v, dict)"): "merging TOML tables",
    ("recipes/config_io.py", "isinstance(a, dict)"): "comparing TOML tables",
    ("recipes/progress.py", "isinstance(v, float)"): "formatting a metric",
    ("recipes/rl/domains.py", "isinstance(v, (list, tuple))"): "formatting an override",
    ("recipes/rl/run.py", 'getattr(trainer, "setup", {})'): "a trainer (Ray ranks keep no setup), not an env",
}


def probe_sites() -> list[tuple[str, str]]:
    """(file, line) of every getattr/hasattr/isinstance call in rollout/ and recipes/."""
    out = []
    for folder in FOLDERS:
        for path in sorted((SRC / folder).rglob("*.py")):
            rel = path.relative_to(SRC).as_posix()
            out += [(rel, line.strip()) for line in path.read_text(encoding="utf-8").splitlines()
                    if PROBE.search(line)]
    return out


def test_no_new_probes_of_envs_engines_or_rewards():
    unexplained = [f"src/posttrain/{rel}: {line}" for rel, line in probe_sites()
                   if not any(rel == f and text in line for f, text in ALLOWED)]
    assert not unexplained, ("declare it on the interface instead (rollout/envs.py Environment, "
                             "engine/base.py Engine, types.Reward), or add the site to ALLOWED with its "
                             "reason:\n" + "\n".join(unexplained))


def test_every_allowed_probe_is_still_there():
    sites = probe_sites()
    gone = [k for k in ALLOWED if not any(rel == k[0] and k[1] in line for rel, line in sites)]
    assert not gone, f"drop these from ALLOWED (and docs/ARCHITECTURE.md): {gone}"


def test_the_architecture_page_lists_each_allowed_probe():
    page = (SRC.parents[1] / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = page.split("## What is still probed", 1)[1].split("\n## ", 1)[0]
    missing = [f for f, _ in ALLOWED if f"`{f}`" not in section]
    assert not missing, f"docs/ARCHITECTURE.md 'What is still probed' lacks {sorted(set(missing))}"
