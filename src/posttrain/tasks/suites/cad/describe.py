"""Words for a part: `prose` (sentences with every dimension and position) or `drawing`
(a dimension table). Both state everything needed to rebuild the part exactly."""

from __future__ import annotations

from posttrain.tasks.suites.cad.part import Part


def _fmt(x: float) -> str:
    return f"{x:g}" if abs(x - round(x)) < 1e-9 else f"{x:.3f}".rstrip("0")


def _base_rows(b: dict) -> list[tuple[str, str]]:
    if b["kind"] == "plate":
        return [("base", f"rectangular plate {b['w']} (x) by {b['d']} (y) by {b['h']} (z) mm, "
                 "corner at the origin")]
    if b["kind"] == "lplate":
        return [("base", f"L-shaped plate, thickness {b['h']} mm: the rectangle 0..{b['w']} (x) by "
                 f"0..{b['d']} (y) with the corner rectangle x {b['w'] - b['cw']}..{b['w']}, "
                 f"y {b['d'] - b['cd']}..{b['d']} removed")]
    if b["kind"] == "disk":
        return [("base", f"disk of radius {b['r']} mm and height {b['h']} mm, centred on the z axis, "
                 "base at z = 0")]
    steps, z = [], 0
    for r, ln in zip(b["radii"], b["lengths"]):
        steps.append(f"radius {r} mm from z = {z} to z = {z + ln}")
        z += ln
    return [("base", "stepped shaft on the z axis (a solid of revolution): " + "; ".join(steps))]


def _feature_row(f: dict) -> tuple[str, str]:
    k = f["kind"]
    if k in ("line", "grid", "bolt_circle"):
        pts = ", ".join(f"({_fmt(x)}, {_fmt(y)})" for x, y in f["points"])
        return ("holes", f"{f['n']} through holes of radius {f['r']} mm, vertical, through the "
                f"whole part, centred at (x, y) = {pts}")
    if k == "pocket":
        cx, cy = f["center"]
        return ("pocket", f"rectangular blind pocket {f['w']} (x) by {f['d']} (y) mm, {f['depth']} mm "
                f"deep from the top face, centred at (x, y) = ({_fmt(cx)}, {_fmt(cy)})")
    if k == "boss":
        cx, cy = f["center"]
        return ("boss", f"cylindrical boss of radius {f['r']} mm and height {f['h']} mm standing on "
                f"the top face, centred at (x, y) = ({_fmt(cx)}, {_fmt(cy)})")
    return ("bore", f"through bore of radius {f['r']} mm along the z axis")


def describe(part: Part, detail: str) -> str:
    rows = _base_rows(part.base) + [_feature_row(f) for f in part.features]
    if detail == "drawing":
        return "| feature | dimensions (mm) |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    first, *rest = rows
    text = f"The part is a {first[1]}."
    for name, body in rest:
        text += f" It has a {body}." if not body[0].isdigit() else f" It has {body}."
    return text + " Units are millimetres, z points up."
