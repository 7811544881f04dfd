"""The tool-use suite: same seed same bytes, disjoint splits, checked knobs; through the real
bwrap sandbox every family's oracle earns 1.0, a no-op agent 0.0 (its stated score), the hack
probes 0.0 and the partial agents less than 1.0; hostile arguments are one `error:` line with a
non-zero exit and change nothing."""

import copy
import hashlib
import json
from pathlib import Path

import pytest

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.errors import PosttrainError
from posttrain.tasks.suites import SUITES, probes_module
from posttrain.tasks.suites.tool_use import check, program, suite
from posttrain.tasks.suites.tool_use.families import Draft

NOOP_REWARD = 0.0      # no goal item starts at its target, so a no-op agent meets no condition


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _play(task) -> dict:
    goal = json.loads(task.files["tests/goal.json"])
    state = copy.deepcopy(goal["initial"])
    for step in json.loads(task.files["solution/steps.json"]):
        program.call(state, step["name"], step["arguments"])
    return check.score(goal["initial"], state, goal["conditions"])


def test_registered_with_its_probes():
    assert SUITES["tool-use"].module == "posttrain.tasks.suites.tool_use.suite"
    assert probes_module("tool-use").PROBES and probes_module("tool-use").PARTIAL


def test_same_seed_same_bytes_and_splits_disjoint(tmp_path):
    combos = {}
    for split in ("train", "heldout-family", "heldout-combo"):
        a = suite.generate(tmp_path / f"{split}-a", 12, seed=4, split=split)
        suite.generate(tmp_path / f"{split}-b", 12, seed=4, split=split)
        assert _digest(tmp_path / f"{split}-a") == _digest(tmp_path / f"{split}-b")
        combos[split] = {t.config.metadata["combo"] for t in a}
    suite.generate(tmp_path / "other", 12, seed=5)
    assert _digest(tmp_path / "other") != _digest(tmp_path / "train-a")
    assert {c.split("/")[0] for c in combos["heldout-family"]} == set(suite.HELDOUT_FAMILIES)
    assert not combos["train"] & combos["heldout-combo"]
    assert not (combos["train"] | combos["heldout-combo"]) & combos["heldout-family"]
    assert suite.split_families("heldout-family") == {"calendar": ("reschedule", "clear_day", "book")}


@pytest.mark.parametrize("split", ["train", "heldout-family", "heldout-combo"])
def test_every_combo_and_length_solved_by_its_oracle_and_not_by_noop(tmp_path, split):
    """In process, through the same tool program and checker the sandbox runs."""
    for n in range(2, 7):
        try:
            tasks = suite.generate(tmp_path / f"{split}{n}", 10, seed=n, split=split,
                                   knobs={"calls": str(n)})
        except PosttrainError:
            continue                         # no combo of this split has n calls
        for t in tasks:
            m = t.config.metadata
            assert m["calls"] == n and m["difficulty"] == suite.level(n) and m["multi_turn"]
            assert _play(t)["reward"] == 1.0, t.id
            goal = json.loads(t.files["tests/goal.json"])
            noop = check.score(goal["initial"], goal["initial"], goal["conditions"])
            assert noop["reward"] == NOOP_REWARD and noop["clean"] == 1.0, t.id


@pytest.mark.parametrize("knobs, needle", [
    ({"level": "1"}, "unknown knobs"), ({"families": "kv,email"}, "unknown families"),
    ({"calls": "1-3"}, "calls"), ({"calls": "5-3"}, "calls"), ({"calls": "x"}, "calls"),
    ({"distractors": "5"}, "distractors"), ({"obs_pad": "401"}, "obs_pad"),
    ({"obs_pad": "-1"}, "obs_pad"), ({"families": "kv", "calls": "5"}, "no task with 5-5 calls"),
])
def test_bad_knobs_are_one_clear_error(tmp_path, knobs, needle):
    split = "heldout-combo" if knobs.get("families") == "kv" else "train"
    with pytest.raises(PosttrainError, match=needle):
        suite.generate(tmp_path, 2, seed=0, split=split, knobs=knobs)


def test_knobs_shape_the_tasks(tmp_path):
    tasks = suite.generate(tmp_path, 8, seed=1, knobs={"families": "kv,inventory", "calls": "2",
                                                       "distractors": "3", "obs_pad": "50"})
    for t in tasks:
        m = t.config.metadata
        declared = [s["name"] for s in json.loads(t.files["tools.json"])["tools"]]
        assert m["family"] in ("kv", "inventory") and m["calls"] == 2 and m["difficulty"] == "easy"
        assert declared == sorted(declared) == m["tools"].split(",") and len(declared) == 4 + 3
        assert "submit" not in declared
        assert len(json.loads(t.files["environment/app/.tools/config.json"])["pad"]) == 50


def _one_per_family(tmp_path):
    knobs = {"distractors": "2", "obs_pad": "30", "calls": "2-4"}
    return (suite.generate(tmp_path / "train", 4, seed=7, knobs=knobs)
            + suite.generate(tmp_path / "family", 1, seed=7, split="heldout-family", knobs=knobs)
            + suite.generate(tmp_path / "combo", 4, seed=7, split="heldout-combo",
                             knobs=knobs | {"calls": "2-6"}))


def test_oracle_noop_probes_and_partial_agents_in_the_sandbox(tmp_path):
    tasks = _one_per_family(tmp_path)
    assert {t.config.metadata["family"] for t in tasks} == set(suite.FAMILIES)
    probes = probes_module("tool-use")
    partial = []
    for task in tasks:
        with open_task_sandbox(task) as sb:
            assert run_oracle(task, sb).exit_code == 0
            v = verify(task, sb)
            assert v.reward == 1.0 and v.details["clean"] == 1.0, (task.id, v)
        with open_task_sandbox(task) as sb:
            assert verify(task, sb).reward == NOOP_REWARD, task.id
        for name, make in probes.PROBES.items():
            with open_task_sandbox(task) as sb:
                sb.exec(make(task), timeout_s=60)
                assert verify(task, sb).reward == NOOP_REWARD, (task.id, name)
        for name, make in probes.PARTIAL.items():
            with open_task_sandbox(task) as sb:
                sb.exec(make(task), timeout_s=60)
                partial.append(verify(task, sb).reward)
                assert partial[-1] < 1.0, (task.id, name)
    assert any(0.0 < r < 1.0 for r in partial), partial       # partial credit exists


def test_a_wrong_extra_change_loses_all_credit():
    d = Draft("Copy key `a` into key `b`.", {"kv": {"a": "red", "c": "blue"}})
    d.call("kv_get", key="a")
    d.call("kv_set", ("value",), key="b", value="red")
    final, conditions = suite.goal(d)
    assert check.score(d.state, final, conditions)["reward"] == 1.0
    assert check.score(d.state, final | {"kv": {"a": "red", "b": "red"}}, conditions)["reward"] == 0.0
    assert check.score(d.state, {"kv": {"a": "red", "b": "blue", "c": "blue"}},
                       conditions)["reward"] == 0.0
    numeric = [{"item": "kv:total", "value": "42", "after": []}]        # numbers by value
    assert check.score({"kv": {}}, {"kv": {"total": " 42.0"}}, numeric)["reward"] == 1.0


HOSTILE = [
    ("read_file", {"path": "../../etc/passwd"}), ("read_file", {"path": "/etc/passwd"}),
    ("write_file", {"path": "../outside.txt", "content": "x"}),
    ("write_file", {"path": "notes/../../x", "content": "x"}),
    ("add_stock", {"warehouse": "north", "item": "bolts", "quantity": 10 ** 30}),
    ("add_stock", {"warehouse": "north", "item": "bolts", "quantity": True}),
    ("kv_set", {"key": "k", "value": "v" * 5000}), ("kv_set", {"key": "a/../../b", "value": "v"}),
    ("calculate", {"expression": "2 ** 99999999"}), ("calculate", {"expression": "9" * 150 + "*9"}),
    ("calculate", {"expression": "__import__('os').system('touch /app/pwned')"}),
    ("calculate", {"expression": "1/0"}), ("calculate", {"expression": "(" * 150}),
    ("kv_get", ["not", "an", "object"]), ("kv_get", {}),
]


def test_hostile_arguments_are_one_error_line_and_change_nothing(tmp_path):
    task = suite.generate(tmp_path, 1, seed=2, knobs={"families": "files"})[0]
    state = {"kv": {"k": "v"}, "files": {"a.txt": "x\n"}, "stock": {"north": {"bolts": 3}}}
    config = {"tools": sorted(program.TOOLS), "pad": ""}       # every tool, so each parser runs
    with open_task_sandbox(task) as sb:
        sb.exec(f"echo {json.dumps(json.dumps(config))} > /app/.tools/config.json && "
                f"echo {json.dumps(json.dumps(state))} > /app/.state/state.json", timeout_s=30)
        snapshot = "find /app | sort; cat /app/.state/state.json"
        before = sb.exec(snapshot, timeout_s=30).stdout
        commands = [f"TOOL_ARGS={json.dumps(json.dumps(args))} python3 /app/.tools/run.py {name}"
                    for name, args in HOSTILE]
        commands += ["TOOL_ARGS='{' python3 /app/.tools/run.py read_file",
                     "TOOL_ARGS=\"$(head -c 9000 /dev/zero | tr '\\0' a)\" python3 /app/.tools/run.py read_file",
                     "python3 /app/.tools/run.py no_such_tool", "python3 /app/.tools/run.py"]
        for command in commands:
            r = sb.exec(command, timeout_s=30)
            out = r.stdout + r.stderr
            assert r.exit_code != 0 and out.startswith("error: ") and out.count("\n") == 1, (command, out)
            assert "Traceback" not in out, out
        assert sb.exec(snapshot, timeout_s=30).stdout == before
        assert sb.exec("test ! -e /outside.txt && test ! -e /app/pwned && test ! -e /x",
                       timeout_s=30).exit_code == 0
