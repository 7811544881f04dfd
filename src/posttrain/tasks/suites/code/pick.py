"""Choose and screen the code suite's bugs: a mutant is kept only if it breaks at least one
test and leaves at least one passing (the fail-to-pass and pass-to-pass sets)."""

from __future__ import annotations

import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.tasks.suites.code import grade as code_grade
from posttrain.tasks.suites.code import mutate as code_mutate
from posttrain.tasks.suites.code.host import Prepared, module_name, run_tests


@dataclass
class Bug:
    family: str                       # bugfix | scratch
    module: str                       # file path relative to the tree
    sites: list[code_mutate.Site]
    source: str                       # the bugged module text
    f2p: list[str]
    p2p: list[str]
    cases: list[dict] = field(default_factory=list)
    wrong: list[tuple[dict, str]] = field(default_factory=list)  # (case, bugged outcome)

    @property
    def functions(self) -> list[str]:
        return sorted({s.function for s in self.sites})


def screen(prep: Prepared, family: str, module: str, chosen: list[code_mutate.Site]) -> Bug | None:
    """Run the tests on the mutant; a Bug if it splits them into failing and passing."""
    pristine = (prep.root / module).read_text()
    try:
        source = code_mutate.apply(pristine, chosen)
    except (SyntaxError, ValueError):
        return None
    base = prep.baseline[module]
    passing = [t for t, o in base.items() if o == "passed"]
    with tempfile.TemporaryDirectory(prefix="posttrain-mutant-") as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(prep.root, work)
        (work / module).write_text(source)
        outcomes = run_tests(prep, work, module, prep.screen_timeout_s)
        if not outcomes:
            return None
        f2p = [t for t in passing if outcomes.get(t) != "passed"]
        p2p = [t for t in passing if outcomes.get(t) == "passed"]
        if not f2p or not p2p:
            return None
        funcs = {f"{module_name(module)}:{s.function}" for s in chosen}
        cases = [c for q in sorted(funcs) for c in prep.cases.get(q, [])]
        got = code_grade.run_cases(prep.python, str(work), cases, timeout=60) if cases else []
    if cases and not got:
        return None          # the mutant hangs or crashes the case runner: not a fair bug
    wrong = [(c, g) for c, g in zip(cases, got) if g != c["expect"]]
    return Bug(family, module, chosen, source, f2p, p2p, cases, wrong)


def pick(prep: Prepared, rng: random.Random, family: str, count: int, kinds: list[str],
         seen: set, attempts: int = 30) -> Bug | None:
    """A screened bug of `family` with `count` mutations (or stubs) in distinct functions."""
    modules = sorted(prep.host.modules)
    for _ in range(attempts):
        module = rng.choice(modules)
        source = (prep.root / module).read_text()
        with_cases = sorted(q.split(":")[1] for q in prep.cases if q.startswith(module_name(module) + ":"))
        if family == "bugfix":
            chosen = _bugfix_sites(source, with_cases, rng, count, kinds)
        else:
            chosen = _stub_sites(source, with_cases, rng, count)
        if not chosen:
            continue
        key = (module, tuple(sorted((s.start, s.new) for s in chosen)))
        if key in seen:
            continue
        seen.add(key)
        bug = screen(prep, family, module, chosen)
        if bug is not None and (family == "scratch" or bug.cases):
            return bug
    return None


def _bugfix_sites(source: str, funcs: list[str], rng: random.Random, count: int,
                  kinds: list[str]) -> list[code_mutate.Site]:
    by_func: dict[str, list[code_mutate.Site]] = {}
    for s in code_mutate.sites(source, funcs):
        if s.kind in kinds:
            by_func.setdefault(s.function, []).append(s)
    names = sorted(by_func)
    if len(names) < count:
        return []
    return [rng.choice(by_func[f]) for f in rng.sample(names, count)]


def _stub_sites(source: str, funcs: list[str], rng: random.Random,
                count: int) -> list[code_mutate.Site]:
    if len(funcs) < count:
        return []
    got = [code_mutate.stub_site(source, f) for f in rng.sample(funcs, count)]
    return [s for s in got if s is not None] if all(got) else []


def near_misses(prep: Prepared, bug: Bug, rng: random.Random, want: int = 2) -> list[tuple[str, str]]:
    """(name, module source) of wrong fixes a weak verifier would pass: the fix plus a bug
    elsewhere in the module that breaks a pass-to-pass test (checked), and for several
    mutations, all but one fixed."""
    pristine = (prep.root / bug.module).read_text()
    out = []
    if len(bug.sites) > 1:
        rest = [s for s in bug.sites if s is not bug.sites[-1]]
        if bug.family == "scratch" or screen(prep, "bugfix", bug.module, rest) is not None:
            out.append(("partial-fix", code_mutate.apply(pristine, rest)))
    others = [s for s in code_mutate.sites(pristine) if s.function not in bug.functions]
    for site in rng.sample(others, min(len(others), 8)):
        if len(out) >= want + (len(bug.sites) > 1):
            break
        if screen(prep, "bugfix", bug.module, [site]) is not None:
            out.append((f"collateral-{len(out)}", code_mutate.apply(pristine, [site])))
    return out
