"""The first half of the `tool-use` suite's tool program (program.py has the tools): refused
calls, the limits and checks on arguments, and the calculator. Stdlib only: suite.py ships
this module and program.py as one file, /app/.tools/run.py (suite.py `shipped_program`)."""

import ast
import math
import operator
import re

MAX_ARGS = 4000          # characters of TOOL_ARGS
MAX_TEXT = 1000          # characters of one value, line or file
MAX_ENTRIES = 200        # keys, files, events
MAX_STOCK = 1_000_000
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
PATH_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}(/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}){0,3}")
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
       ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


class ToolError(Exception):
    """A refused call: shown to the agent as `error: <message>`."""


# arguments

def name_arg(args, key, pattern=NAME_RE, optional=False):
    v = args.get(key)
    if v is None and optional:
        return ""
    if not isinstance(v, str) or not pattern.fullmatch(v) or ".." in v:
        raise ToolError(f"argument '{key}' must be a plain name (letters, digits, _ . -)"
                        if pattern is NAME_RE else f"argument '{key}' must be a relative path "
                        "like notes/a.txt (no '..', no leading '/')")
    return v


def text_arg(args, key):
    v = args.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        v = format_number(v)
    if not isinstance(v, str) or len(v) > MAX_TEXT or "\0" in v:
        raise ToolError(f"argument '{key}' must be a string of at most {MAX_TEXT} characters")
    return v


def int_arg(args, key, lo, hi):
    v = args.get(key)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ToolError(f"argument '{key}' must be a whole number from {lo} to {hi}")
    return v


# calculator

def format_number(v):
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v) if isinstance(v, int) else repr(round(v, 6))


def evaluate(text):
    if not isinstance(text, str) or not text.strip() or len(text) > 200:
        raise ToolError("argument 'expression' must be 1 to 200 characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise ToolError("cannot parse the expression; use numbers, + - * / // % and parentheses")
    return _eval(tree.body)


def _eval(node):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand) * (-1 if isinstance(node.op, ast.USub) else 1)
    elif isinstance(node, ast.BinOp) and type(node.op) in OPS:
        a, b = _eval(node.left), _eval(node.right)
        if b == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            raise ToolError("division by zero")
        v = OPS[type(node.op)](a, b)
    else:
        raise ToolError("only numbers, + - * / // % and parentheses are allowed")
    if abs(v) > 1e15 or not math.isfinite(v):
        raise ToolError("number too large")
    return v
