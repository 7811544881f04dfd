"""Source mutations for the code suite, found with `ast` and spliced into the original text.

Only the mutated expression's text changes (the rest of the file keeps its formatting and
comments), so the agent's diff against the pristine file is the bug and nothing else.
Kinds: comparison (< to <=, == to !=, in to not in, ...), arithmetic (+ to -, ...),
constant (a small integer +1 or -1), boolean (and to or, dropping a `not`) and stub (a
function body replaced by `raise NotImplementedError`, for write-from-scratch tasks).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
           ast.IsNot: ast.Is}
ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
         ast.Mod: ast.FloorDiv}
BOOL = {ast.And: ast.Or, ast.Or: ast.And}
KINDS = ("comparison", "arithmetic", "constant", "boolean")
KIND_WORDS = {"comparison": "a comparison", "arithmetic": "an arithmetic operator",
              "constant": "a numeric constant", "boolean": "a boolean condition",
              "stub": "a missing implementation"}


@dataclass(frozen=True)
class Site:
    """One place to change: the span of an expression and its replacement text."""

    function: str
    kind: str
    start: tuple[int, int]     # (line, col), 1-based line as in ast
    end: tuple[int, int]
    new: str
    old: str


SYMBOLS = {ast.Lt: r"<(?!=)", ast.LtE: r"<=", ast.Gt: r">(?!=)", ast.GtE: r">=", ast.Eq: r"==",
           ast.NotEq: r"!=", ast.In: r"(?<!not )\bin\b", ast.NotIn: r"\bnot\s+in\b",
           ast.Is: r"\bis\b(?!\s+not\b)", ast.IsNot: r"\bis\s+not\b", ast.Add: r"\+",
           ast.Sub: r"-", ast.Mult: r"(?<!\*)\*(?!\*)", ast.FloorDiv: r"//", ast.Mod: r"%",
           ast.And: r"\band\b", ast.Or: r"\bor\b", ast.Not: r"\bnot\b\s*"}
TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+",
        ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.And: "and", ast.Or: "or"}


def _gap(node: ast.AST) -> tuple[ast.AST, ast.AST, type, type] | None:
    """(left, right, old op, new op) around the operator token a mutation swaps."""
    if isinstance(node, ast.Compare) and type(node.ops[0]) in COMPARE:
        return node.left, node.comparators[0], type(node.ops[0]), COMPARE[type(node.ops[0])]
    if isinstance(node, ast.BinOp) and type(node.op) in ARITH:
        return node.left, node.right, type(node.op), ARITH[type(node.op)]
    if isinstance(node, ast.BoolOp) and type(node.op) in BOOL:
        return node.values[0], node.values[1], type(node.op), BOOL[type(node.op)]
    return None


def _site(lines: list[str], name: str, node: ast.AST) -> Site | None:
    """The token-level edit for one node: only the operator (or constant) text changes."""
    kinds = {ast.Compare: "comparison", ast.BinOp: "arithmetic", ast.BoolOp: "boolean"}
    got = _gap(node)
    if got is not None:
        left, right, old, new = got
        a, b = (left.end_lineno, left.end_col_offset), (right.lineno, right.col_offset)
        text, repl, kind = _text(lines, a, b), TEXT[new], kinds[type(node)]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        a, b = (node.lineno, node.col_offset), (node.operand.lineno, node.operand.col_offset)
        text, old, repl, kind = _text(lines, a, b), ast.Not, "", "boolean"
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 8:
        a, b = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
        text = _text(lines, a, b)
        if text != str(node.value):
            return None
        v = node.value
        return Site(name, "constant", a, b, str(v + 1 if v < 2 else v - 1), text)
    else:
        return None
    m = re.search(SYMBOLS[old], text)
    if m is None or "#" in text:
        return None
    return Site(name, kind, a, b, text[:m.start()] + repl + text[m.end():], text)


def _text(lines: list[str], a: tuple[int, int], b: tuple[int, int]) -> str:
    full = "".join(lines)
    return full[_offset(lines, a):_offset(lines, b)]


def _skipped(func: ast.FunctionDef) -> set[int]:
    """Nodes inside default values, decorators, annotations and f-strings: not mutated."""
    skip: set[int] = set()
    parts = [*func.decorator_list, *func.args.defaults, *func.args.kw_defaults, func.returns]
    parts += [a.annotation for a in (*func.args.args, *func.args.kwonlyargs)]
    parts += [n for n in ast.walk(func) if isinstance(n, ast.JoinedStr)]
    for part in parts:
        if part is not None:
            skip |= {id(n) for n in ast.walk(part)}
    return skip


def sites(source: str, functions: list[str] | None = None) -> list[Site]:
    """Every mutation site in the module's top-level functions, in source order."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    out = []
    for func in tree.body:
        if not isinstance(func, ast.FunctionDef) or (functions and func.name not in functions):
            continue
        skip = _skipped(func)
        for node in ast.walk(func):
            if id(node) not in skip and hasattr(node, "end_col_offset"):
                site = _site(lines, func.name, node)
                if site is not None:
                    out.append(site)
    return sorted(out, key=lambda s: (s.start, s.end))


def stub_site(source: str, name: str) -> Site | None:
    """Replace the body of function `name` (after its docstring) with a NotImplementedError."""
    tree = ast.parse(source)
    for func in tree.body:
        if isinstance(func, ast.FunctionDef) and func.name == name:
            body = func.body
            first = 1 if (body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str)) else 0
            if first >= len(body):
                return None
            start, last = body[first], body[-1]
            return Site(name, "stub", (start.lineno, start.col_offset),
                        (last.end_lineno, last.end_col_offset),
                        f'raise NotImplementedError("{name}")', "")
    return None


def _offset(lines: list[str], pos: tuple[int, int]) -> int:
    """Character offset of an ast (line, col); ast columns count UTF-8 bytes."""
    line, col = pos
    text = lines[line - 1]
    return sum(len(x) for x in lines[:line - 1]) + len(text.encode()[:col].decode(errors="ignore"))


def apply(source: str, chosen: list[Site]) -> str:
    """The source with the (non-overlapping) sites applied; checked to compile."""
    lines = source.splitlines(keepends=True)
    spans = sorted(((_offset(lines, s.start), _offset(lines, s.end), s.new) for s in chosen),
                   reverse=True)
    for (a, b, _), (c, d, _) in zip(spans[1:], spans):
        if b > c:
            raise ValueError("overlapping mutation sites")
    out = source
    for a, b, new in spans:
        out = out[:a] + new + out[b:]
    compile(out, "<mutant>", "exec")
    return out
