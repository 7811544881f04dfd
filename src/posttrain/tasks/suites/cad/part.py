"""Parts from a seeded grammar, built with manifold3d: a base sketch extruded or revolved,
then features (through holes in a line, grid or bolt circle, a blind pocket, a boss).

Coordinates in millimetres, z up. Plates start at the origin corner; disks and
shafts are centred on the z axis with their base at z = 0. Each feature records
what the description needs to state it exactly.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
from manifold3d import CrossSection, Manifold

SEGMENTS = 48


@dataclass
class Part:
    base: dict
    features: list[dict] = field(default_factory=list)
    solid: Manifold | None = None

    def mesh(self) -> tuple[np.ndarray, np.ndarray]:
        m = self.solid.to_mesh()
        return np.asarray(m.vert_properties)[:, :3].astype(float), np.asarray(m.tri_verts)


def _cyl(r: float, h: float, x: float, y: float, z: float = 0.0) -> Manifold:
    return Manifold.cylinder(h, r, r, SEGMENTS).translate([x, y, z])


def _base(rng: random.Random, kind: str) -> dict:
    if kind == "plate":
        return {"kind": kind, "w": rng.randint(40, 120), "d": rng.randint(30, 80), "h": rng.randint(4, 15)}
    if kind == "lplate":
        w, d, h = rng.randint(60, 120), rng.randint(50, 90), rng.randint(5, 15)
        return {"kind": kind, "w": w, "d": d, "h": h, "cw": rng.randint(w // 4, w // 2),
                "cd": rng.randint(d // 4, d // 2)}
    if kind == "disk":
        return {"kind": kind, "r": rng.randint(20, 60), "h": rng.randint(5, 20)}
    radii = sorted(rng.sample(range(6, 30), 3), reverse=rng.random() < 0.5)
    return {"kind": "shaft", "radii": radii, "lengths": [rng.randint(8, 30) for _ in radii]}


def _holes(rng, base: dict) -> dict:
    if base["kind"] == "disk":
        n, rad = rng.randint(3, 6), rng.randint(base["r"] // 3, int(base["r"] * 0.7))
        r = rng.randint(2, max(2, min(6, base["r"] - rad - 3)))
        pts = [(rad * math.cos(2 * math.pi * k / n), rad * math.sin(2 * math.pi * k / n)) for k in range(n)]
        return {"kind": "bolt_circle", "n": n, "r": r, "circle_r": rad, "points": pts}
    w, d = base["w"], base["d"] - base.get("cd", 0)
    r, m = rng.randint(2, 5), rng.randint(8, 12)
    if rng.random() < 0.5:
        n = rng.randint(2, 4)
        xs = [m + k * (w - 2 * m) / (n - 1) for k in range(n)] if base["kind"] == "plate" else \
             [m + k * (w - base.get("cw", 0) - 2 * m) / max(1, n - 1) for k in range(n)]
        return {"kind": "line", "n": n, "r": r, "margin": m, "points": [(x, d / 2) for x in xs]}
    x1 = (w - base.get("cw", 0)) - m if base["kind"] == "lplate" else w - m
    pts = [(m, m), (x1, m), (m, d - m), (x1, d - m)]
    return {"kind": "grid", "n": 4, "r": r, "margin": m, "points": pts}


def build(rng: random.Random, n_features: int) -> Part:
    """Draw a base and up to n_features features (at most one of each kind), then build."""
    kind = rng.choice(["plate", "plate", "lplate", "disk", "shaft"])
    base = _base(rng, kind)
    part = Part(base)
    if kind == "shaft":
        part.features.append({"kind": "bore", "r": rng.randint(2, max(2, min(base["radii"]) - 3))})
        part.solid = rebuild(base, part.features)
        return part
    have = lambda *kinds: any(f["kind"] in kinds for f in part.features)
    w, d, h = base.get("w", 0) - base.get("cw", 0), base.get("d", 0) - base.get("cd", 0), base["h"]
    for _ in range(n_features):
        choice = rng.choice(["holes", "holes", "pocket", "boss"])
        if choice == "holes" and not have("line", "grid", "bolt_circle"):
            part.features.append(_holes(rng, base))      # cut last, through everything
        elif choice == "pocket" and kind != "disk" and not have("pocket"):
            part.features.append({"kind": "pocket", "w": rng.randint(w // 5, w // 3),
                                  "d": rng.randint(d // 5, d // 3), "depth": rng.randint(1, h - 2),
                                  "center": (w / 2, d / 2)})
        elif choice == "boss" and not have("pocket", "boss"):
            r, bh = rng.randint(3, 8), rng.randint(3, 12)
            center = (0.0, 0.0) if kind == "disk" else (w / 2, d / 2)
            part.features.append({"kind": "boss", "r": r, "h": bh, "center": center})
    part.solid = rebuild(base, part.features)
    return part


def base_solid(b: dict) -> Manifold:
    if b["kind"] == "plate":
        return Manifold.cube([b["w"], b["d"], b["h"]])
    if b["kind"] == "lplate":
        w, d, cw, cd = b["w"], b["d"], b["cw"], b["cd"]
        return CrossSection([[[0, 0], [w, 0], [w, d - cd], [w - cw, d - cd], [w - cw, d], [0, d]]]).extrude(b["h"])
    if b["kind"] == "disk":
        return Manifold.cylinder(b["h"], b["r"], b["r"], SEGMENTS)
    profile, z = [[0, 0]], 0
    for r, ln in zip(b["radii"], b["lengths"]):
        profile += [[r, z], [r, z + ln]]
        z += ln
    return CrossSection([profile + [[0, z]]]).revolve(SEGMENTS)


def rebuild(base: dict, features: list[dict]) -> Manifold:
    """The solid for recorded parameters (the same construction as build)."""
    solid, h = base_solid(base), base.get("h", 0)
    for f in features:
        if f["kind"] == "pocket":
            (cx, cy), pw, pd, dep = f["center"], f["w"], f["d"], f["depth"]
            solid = solid - Manifold.cube([pw, pd, dep + 1]).translate([cx - pw / 2, cy - pd / 2, h - dep])
        elif f["kind"] == "boss":
            solid = solid + _cyl(f["r"], f["h"], *f["center"], h)
        elif f["kind"] == "bore":
            solid = solid - _cyl(f["r"], sum(base["lengths"]) + 2, 0, 0, -1)
    for f in features:
        if f["kind"] in ("line", "grid", "bolt_circle"):
            for x, y in f["points"]:
                solid = solid - _cyl(f["r"], h + 40, x, y, -1)
    return solid
