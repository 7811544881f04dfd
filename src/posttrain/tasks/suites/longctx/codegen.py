"""Cross-file code questions over a generated Python package (pkg/mod_NN.py).

Functions come in levels: level 0 returns an expression of x; a level-L function
calls one or two functions of lower levels, usually in other modules (imported as
`from pkg.mod_NN import f_...`), so evaluating one makes at most 2**4 calls.
`code_exec` asks what a function returns (found by running it or tracing the
calls); `code_callers` asks which functions reach a given one (the call graph).
The package grows with unrelated functions until the token budget is met.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

WORDS = ("amber", "brisk", "cedar", "delta", "ember", "fable", "grove", "haven", "indigo", "jasper",
         "karma", "lumen", "mossy", "nectar", "onyx", "pebble", "quartz", "rustic", "sable", "tundra")
PER_MODULE = 12
MAX_LEVEL = 4


@dataclass
class Fn:
    name: str
    module: int
    level: int
    calls: list[str]
    body: str


@dataclass
class Package:
    fns: dict[str, Fn] = field(default_factory=dict)

    def module_source(self, m: int) -> str:
        fns = [f for f in self.fns.values() if f.module == m]
        deps = sorted({(self.fns[c].module, c) for f in fns for c in f.calls
                       if self.fns[c].module != m})
        imports = [f"from pkg.mod_{dm:02d} import {c}" for dm, c in deps]
        defs = [f"def {f.name}(x):\n    return {f.body}\n" for f in fns]
        return "\n".join(imports + [""] + defs)

    def sources(self) -> dict[str, str]:
        mods = sorted({f.module for f in self.fns.values()})
        return {"pkg/__init__.py": ""} | {f"pkg/mod_{m:02d}.py": self.module_source(m) for m in mods}

    def run(self, name: str, x: int) -> int:
        env: dict = {}
        for f in sorted(self.fns.values(), key=lambda f: f.level):
            exec(f"def {f.name}(x):\n    return {f.body}\n", env)   # our own generated code
        return env[name](x)

    def callers(self, name: str) -> set[str]:
        out, frontier = set(), {name}
        while frontier:
            frontier = {f.name for f in self.fns.values() if set(f.calls) & frontier} - out
            out |= frontier
        return out


def _add(pkg: Package, rng: random.Random, module: int) -> None:
    name = f"f_{rng.choice(WORDS)}_{rng.choice(WORDS)}_{len(pkg.fns):03d}"
    a, b = rng.randint(2, 9), rng.randint(1, 50)
    lower = [f for f in pkg.fns.values() if f.level < MAX_LEVEL]
    if not lower or rng.random() < 0.3:
        pkg.fns[name] = Fn(name, module, 0, [], f"({a} * x + {b}) % 97")
        return
    picks = rng.sample(lower, min(len(lower), rng.randint(1, 2)))
    level = 1 + max(f.level for f in picks)
    terms = [f"{f.name}(x + {rng.randint(1, 5)})" for f in picks]
    pkg.fns[name] = Fn(name, module, level, [f.name for f in picks],
                       f"({' + '.join(terms)} + {a} * x) % 1009")


def build_package(rng: random.Random, n_tokens: int, count) -> Package:
    pkg, module, done = Package(), 0, 0          # done: tokens of the finished modules
    while True:
        for _ in range(PER_MODULE):
            _add(pkg, rng, module)
            if done + count(pkg.module_source(module)) >= n_tokens:
                return pkg
        done += count(pkg.module_source(module))
        module += 1


def code_exec(rng: random.Random, pkg: Package) -> tuple[str, list[str]]:
    deep = [f for f in pkg.fns.values() if f.level >= 2] or list(pkg.fns.values())
    f, x = rng.choice(deep), rng.randint(1, 20)
    return (f"What does pkg.mod_{f.module:02d}.{f.name}({x}) return? Give the integer.",
            [str(pkg.run(f.name, x))])


def code_callers(rng: random.Random, pkg: Package) -> tuple[str, list[str]]:
    sample = rng.sample(list(pkg.fns.values()), min(200, len(pkg.fns)))
    options = [f for f in sample if 1 <= len(pkg.callers(f.name)) <= 6]
    f = rng.choice(options or sample)
    return (f"List every function in the package pkg that calls {f.name}, directly or through "
            f"other functions.", sorted(pkg.callers(f.name)))
