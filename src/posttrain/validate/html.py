"""validation.html: one self-contained page, a table of tasks sortable by any column
(status by severity by default), each row expandable to the evidence of every check, and
per surviving mutant the deliverable it changed, how, the diff and why it counts."""

from __future__ import annotations

import html
import json
from pathlib import Path

from posttrain.validate.record import STATUSES

COLORS = {"ok": "#2e7d32", "broken": "#c62828", "flaky": "#ef6c00", "hackable": "#6a1b9a",
          "weak-verifier": "#1565c0"}
CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
       "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:3px 8px;"
       "font-size:13px;text-align:left;vertical-align:top}th{cursor:pointer;background:#f4f4f4}"
       "pre{white-space:pre-wrap;font-size:12px;margin:0}.st{color:#fff;padding:1px 6px;"
       "border-radius:3px}details summary{cursor:pointer}")
SORT_JS = """
function sortBy(col){const tb=document.querySelector('tbody');const rows=[...tb.rows];
const asc=tb.dataset.col==col?tb.dataset.asc!='1':true;tb.dataset.col=col;tb.dataset.asc=asc?'1':'0';
rows.sort((a,b)=>{const x=a.cells[col].dataset.k||a.cells[col].innerText,
y=b.cells[col].dataset.k||b.cells[col].innerText;return (x>y?1:x<y?-1:0)*(asc?1:-1)});
rows.forEach(r=>tb.appendChild(r));}
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _survivors(mutation: dict) -> str:
    rows = mutation.get("evidence", {}).get("survivors") or []
    if not rows:
        return ""
    items = "".join(f"<p><b>{_esc(r['name'])}</b>: {_esc(r.get('how', ''))}<br>why it counts: "
                    f"{_esc(r['why'])}</p><pre>{_esc(r.get('diff', ''))}</pre>" for r in rows)
    return f"<details><summary>surviving mutants ({len(rows)})</summary>{items}</details>"


def _row(t: dict) -> str:
    st = t["status"]
    checks = t["checks"]
    marks = " ".join(f"{k}:{'-' if c['passed'] is None else ('ok' if c['passed'] else 'FAIL')}"
                     for k, c in checks.items())
    diff = (t.get("difficulty") or {}).get("label", "")
    strength = checks.get("mutation", {}).get("evidence", {}).get("strength")
    evidence = _esc(json.dumps(checks, indent=1))
    return (f"<tr><td data-k='{STATUSES.index(st)}'><span class='st' style='background:"
            f"{COLORS[st]}'>{_esc(st)}</span></td><td>{_esc(t['id'])}</td>"
            f"<td>{_esc('; '.join(t['reasons']))}</td><td>{_esc(diff)}</td>"
            f"<td data-k='{'' if strength is None else f'{strength:.3f}'}'>"
            f"{'' if strength is None else f'{strength:.2f}'}</td>"
            f"<td>{_survivors(checks.get('mutation', {}))}<details><summary>{_esc(marks)}</summary>"
            f"<pre>{evidence}</pre></details></td></tr>")


def render(manifest: dict) -> str:
    counts = ", ".join(f"{k}: {v}" for k, v in manifest["counts"].items())
    head = "".join(f"<th onclick='sortBy({i})'>{h}</th>" for i, h in enumerate(
        ("status", "task", "reasons", "difficulty", "verifier strength", "checks (click)")))
    rows = "".join(_row(t) for t in manifest["tasks"])
    cfg = _esc(json.dumps(manifest.get("config", {})))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Task validation</title>"
            f"<style>{CSS}</style><script>{SORT_JS}</script></head><body>"
            f"<h1>Task validation</h1><p>{len(manifest['tasks'])} tasks &mdash; {_esc(counts)}."
            f" Created {_esc(manifest['created'])}. Click a column to sort.</p>"
            f"<p style='font-size:12px;color:#555'>settings: {cfg}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></body></html>")


def write_html(manifest: dict, path: Path) -> Path:
    Path(path).write_text(render(manifest), encoding="utf-8")
    return Path(path)
