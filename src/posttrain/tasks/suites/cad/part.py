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


def _base(rng: random.Random, kind: str) -> tuple[dict, Manifold]:
    if kind == "plate":
        w, d, h = rng.randint(40, 120), rng.randint(30, 80), rng.randint(4, 15)
        return {"kind": kind, "w": w, "d": d, "h": h}, Manifold.cube([w, d, h])
    if kind == "lplate":
        w, d, h = rng.randint(60, 120), rng.randint(50, 90), rng.randint(5, 15)
        cw, cd = rng.randint(w // 4, w // 2), rng.randint(d // 4, d // 2)
        outline = [[0, 0], [w, 0], [w, d - cd], [w - cw, d - cd], [w - cw, d], [0, d]]
        return ({"kind": kind, "w": w, "d": d, "h": h, "cw": cw, "cd": cd},
                CrossSection([outline]).extrude(h))
    if kind == "disk":
        r, h = rng.randint(20, 60), rng.randint(5, 20)
        return {"kind": kind, "r": r, "h": h}, Manifold.cylinder(h, r, r, SEGMENTS)
    radii = sorted(rng.sample(range(6, 30), 3), reverse=rng.random() < 0.5)
    lengths = [rng.randint(8, 30) for _ in radii]
    profile, z = [[0, 0]], 0
    for r, ln in zip(radii, lengths):
        profile += [[r, z], [r, z + ln]]
        z += ln
    profile.append([0, z])
    return ({"kind": "shaft", "radii": radii, "lengths": lengths},
            CrossSection([profile]).revolve(SEGMENTS))


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
    kind = rng.choice(["plate", "plate", "lplate", "disk", "shaft"])
    base, solid = _base(rng, kind)
    part = Part(base)
    if kind == "shaft":
        bore = rng.randint(2, max(2, min(base["radii"]) - 3))
        solid = solid - _cyl(bore, sum(base["lengths"]) + 2, 0, 0, -1)
        part.features.append({"kind": "bore", "r": bore})
        part.solid = solid
        return part
    h = base["h"]
    for _ in range(n_features):
        choice = rng.choice(["holes", "holes", "pocket", "boss"])
        if choice == "holes" and not any(f["kind"] in ("line", "grid", "bolt_circle") for f in part.features):
            f = _holes(rng, base)      # cut last, through everything (a boss too)
        elif choice == "pocket" and kind != "disk" and not any(f["kind"] == "pocket" for f in part.features):
            w, d = base["w"] - base.get("cw", 0), base["d"] - base.get("cd", 0)
            pw, pd, dep = rng.randint(w // 5, w // 3), rng.randint(d // 5, d // 3), rng.randint(1, h - 2)
            cx, cy = w / 2, d / 2
            f = {"kind": "pocket", "w": pw, "d": pd, "depth": dep, "center": (cx, cy)}
            solid = solid - Manifold.cube([pw, pd, dep + 1]).translate([cx - pw / 2, cy - pd / 2, h - dep])
        else:
            r, bh = rng.randint(3, 8), rng.randint(3, 12)
            cx, cy = ((0.0, 0.0) if kind == "disk" else
                      ((base["w"] - base.get("cw", 0)) / 2, (base["d"] - base.get("cd", 0)) / 2))
            if any(f["kind"] == "pocket" for f in part.features) or any(f["kind"] == "boss" for f in part.features):
                continue
            f = {"kind": "boss", "r": r, "h": bh, "center": (cx, cy)}
            solid = solid + _cyl(r, bh, cx, cy, h)
        part.features.append(f)
    for f in part.features:
        if f["kind"] in ("line", "grid", "bolt_circle"):
            for x, y in f["points"]:
                solid = solid - _cyl(f["r"], h + 40, x, y, -1)
    part.solid = solid
    return part
