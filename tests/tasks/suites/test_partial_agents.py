"""Every domain suite has scripted partial agents, and in the real sandbox they grade as each
reward formula says: between the probes (0) and the oracle (1) where the formula gives partial
credit (longctx here; cad in test_cad.py, code scratch tasks in the slow test_code_suite.py),
and 0 where it is all or nothing (finance, terminal-tools; code bug fixes)."""

import pytest

from posttrain.tasks.suites import SUITES, generate, probes_module
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runs import attempt

# Where each domain suite's partial agents live; code ships its near misses in every task.
PARTIAL_SOURCES = {"finance": "PARTIAL", "longctx": "PARTIAL", "cad": "PARTIAL",
                   "terminal-tools": "PARTIAL", "code": "solution/mutants/partial-fix.sh",
                   "instruct": "PARTIAL", "tool-use": "PARTIAL",
                   "reasoning-gym": "PARTIAL"}  # instruct, reasoning-gym: replies, graded in their tests


def _partial(suite: str) -> dict:
    return probes_module(suite).PARTIAL


def test_every_domain_suite_has_partial_agents():
    assert set(PARTIAL_SOURCES) == set(SUITES) - {"terminal-basics"}
    for suite, where in PARTIAL_SOURCES.items():
        if where == "PARTIAL":
            assert _partial(suite), suite


@pytest.mark.parametrize("suite, knobs, graded", [
    ("longctx", ["tokens=600", "families=multivalue,aggregate"], True),
    ("finance", ["tokens=1000", "families=growth"], False),
    ("terminal-tools", ["families=tar-repack,make-build"], False),
])
def test_partial_agents_grade_as_the_formula_says(tmp_path, suite, knobs, graded):
    cfg = ValidateConfig()
    scores = []
    for task in generate(suite, tmp_path / suite, 2, seed=11, knobs=knobs):
        assert attempt(task, cfg, oracle=True).reward == 1.0, task.id
        scores += [attempt(task, cfg, script=make(task)).reward for make in _partial(suite).values()]
    if graded:
        assert any(0.0 < s < 1.0 for s in scores), scores
    elif suite == "finance":      # a unit slip earns 0; an answer rounded within tolerance is right
        assert set(scores) == {0.0, 1.0}, scores
    else:
        assert set(scores) == {0.0}, scores
