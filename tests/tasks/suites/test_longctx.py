"""The longctx suite: F1 with the over-listing rule, token budgets with a real tokenizer,
no answer in any question, both modes, and weakened variants caught by their probes."""

import json
import re

import pytest

from posttrain.tasks.suites import generate
from posttrain.tasks.suites.longctx import setscore
from posttrain.tasks.suites.longctx.suite import ALL
from weakened import raised_by, validate_one, weaken


@pytest.mark.parametrize("text,want,reward", [
    ("48213\n", ["48213"], 1.0), ("48213\n12345\n", ["48213"], 2 / 3),
    ("48213\n12345\n11111\n", ["48213"], 0.0), ("a\nb\n", ["a", "b", "c", "d"], 2 / 3),
    ("A.\n a \n", ["a"], 1.0), ("", ["a"], 0.0), ("x\ny\n", ["a", "b"], 0.0),
    ("a\nb\nc\nd\ne\n", ["a", "b"], 0.0)])
def test_set_f1_with_over_listing_rule(text, want, reward):
    assert setscore.score(text, {"items": want})["reward"] == pytest.approx(reward)


def _tokenizer(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from posttrain.tasks.suites.longctx.haystack import sentence
    import random

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    rng = random.Random(0)
    tok.train_from_iterator([sentence(rng) for _ in range(2000)],
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    return tok


def test_budget_is_met_with_the_given_tokenizer(tmp_path):
    tok = _tokenizer(tmp_path)
    tasks = generate("longctx", tmp_path / "t", 3, seed=2,
                     knobs=[f"tokenizer={tmp_path}", "tokens=3000", "families=needle,aggregate,code_exec"])
    for t in tasks:
        files = [p for p in (t.path / "environment/app").rglob("*") if p.is_file()]
        n = sum(len(tok.encode(p.read_text()).ids) for p in files)
        assert 2500 <= n <= 3600, (t.id, n)
        assert 2500 <= t.config.metadata["tokens_measured"] <= 3600


def test_no_answer_in_any_question_and_deterministic(tmp_path):
    a = generate("longctx", tmp_path / "a", 27, seed=4, knobs=["tokens=800"])
    b = generate("longctx", tmp_path / "b", 27, seed=4, knobs=["tokens=800"])
    for ta, tb in zip(a, b):
        assert ta.instruction == tb.instruction
        items = json.loads((ta.path / "tests/expected.json").read_text())["items"]
        q = re.search(r"Question: (.*)", ta.instruction).group(1).lower()
        assert not any(re.search(rf"\b{re.escape(i.lower())}\b", q) for i in items), (ta.id, q)
    assert {t.config.metadata["family"] for t in a} == set(ALL)


def test_instruction_mode_holds_the_haystack(tmp_path):
    t = generate("longctx", tmp_path / "t", 1, seed=0, knobs=["mode=instruction", "tokens=2000"])[0]
    assert not (t.path / "environment/app").exists()
    assert len(t.instruction) > 6000 and "COPY" not in (t.path / "environment/Dockerfile").read_text()


def test_good_tasks_validate_ok(tmp_path, quick_cfg):
    for t in generate("longctx", tmp_path / "t", 1, seed=5, knobs=["families=code_callers",
                                                                  "tokens=1000"]):
        r = validate_one(t.path, tmp_path / "st", quick_cfg)
        assert r.status == "ok", r.reasons


CONTAINMENT = '''
def score(text, expected):   # RULER-style: full credit when every item appears somewhere
    low = text.lower()
    return {"reward": float(all(normalize(i) in low for i in expected["items"]))}'''


@pytest.mark.parametrize("family", ["multikey", pytest.param("vartrack", marks=pytest.mark.slow)])
def test_containment_scorer_is_caught_by_the_sprayer(tmp_path, quick_cfg, family):
    t = generate("longctx", tmp_path / "t", 1, seed=1, knobs=[f"families={family}", "tokens=1000"])[0]
    weaken(t.path, CONTAINMENT)
    r = validate_one(t.path, tmp_path / "st", quick_cfg)
    assert r.status == "hackable" and "sprayer" in raised_by(r), r.reasons


@pytest.mark.slow
def test_answer_leaked_into_the_question_is_caught_by_the_guesser(tmp_path, quick_cfg):
    t = generate("longctx", tmp_path / "t", 1, seed=1, knobs=["families=needle", "tokens=1000"])[0]
    value = json.loads((t.path / "tests/expected.json").read_text())["items"][0]
    inst = t.path / "instruction.md"
    inst.write_text(re.sub(r"(Question: .*)\?", rf"\1 (hint: {value})?", inst.read_text()))
    r = validate_one(t.path, tmp_path / "st", quick_cfg)
    assert r.status == "hackable" and "no_context_guesser" in raised_by(r), r.reasons
