"""The `cad` suite: build a described part as a closed triangle mesh in /app/part.obj.

Targets come from the grammar in part.py (manifold3d), are checked watertight and
consistently wound with trimesh, and are kept only when their convex hull is a poor
fit (hull IoU <= MAX_HULL_IOU), so the box and hull probes cannot score. The
verifier is meshscore.py; tests/expected.json holds the target's triangles, volume,
points sampled inside it and on its surface, tau and the hull's scores.
"""

from __future__ import annotations

import random

import numpy as np
import trimesh
from manifold3d import Manifold
from pydantic import Field

from posttrain.config_base import StrictModel
from posttrain.tasks.suites import scored
from posttrain.tasks.suites.cad import meshscore
from posttrain.tasks.suites.cad.describe import describe
from posttrain.tasks.suites.cad.part import build as build_part
from posttrain.tasks.task import Task

SUITE = "cad"
MAX_HULL_IOU = 0.92
N_INTERIOR, N_SURFACE = 600, 600
NOISE_MARGIN = 0.03


class Knobs(StrictModel):
    detail: str = Field("prose", pattern="^(prose|drawing)$")
    max_features: int = Field(3, ge=1, le=3)


def _interior(rng, verts, tris, n):
    lo, hi = meshscore.bounds(verts)
    grid = meshscore.Grid(verts, tris, max(hi[0] - lo[0], hi[1] - lo[1]) / 40, dims=2)
    out = []
    while len(out) < n:
        p = tuple(rng.uniform(lo[i], hi[i]) for i in range(3))
        if meshscore.inside(grid, p):
            out.append(tuple(round(c, 4) for c in p))
    return out


def expected_for(rng, obj_text: str, hull_obj: str) -> dict:
    verts, tris = meshscore.parse_obj(obj_text)
    lo, hi = meshscore.bounds(verts)
    diag = sum((h - l) ** 2 for h, l in zip(hi, lo)) ** 0.5
    e = {"volume": meshscore.volume(verts, tris), "tau": 0.01 * diag,
         "size": max(h - l for h, l in zip(hi, lo)), "bbox": [lo, hi],
         "triangles": [[verts[i] for i in t] for t in tris],
         "interior": _interior(rng, verts, tris, N_INTERIOR),
         "surface": [tuple(round(c, 4) for c in p)
                     for p in meshscore.sample_surface(verts, tris, N_SURFACE, seed=rng.randint(0, 10**6))],
         "hull_iou": 0.0, "hull_f": 0.0, "answer_path": "/app/part.obj"}
    hv, ht = meshscore.parse_obj(hull_obj)
    # plus a margin for sampling noise: another triangulation of the hull must not score
    e["hull_iou"] = min(0.99, meshscore.iou(hv, ht, e) + NOISE_MARGIN)
    e["hull_f"] = min(0.99, meshscore.fscore(hv, ht, e["triangles"], e["surface"], e["tau"],
                                             N_SURFACE) + NOISE_MARGIN)
    return e


def _draw(rng, k: Knobs):
    for _ in range(50):
        part = build_part(rng, rng.randint(1, k.max_features))
        verts, tris = part.mesh()
        tm = trimesh.Trimesh(verts, tris, process=False)
        if not (tm.is_watertight and tm.is_winding_consistent and tm.volume > 0):
            continue
        obj = meshscore.to_obj(verts, tris)
        hull = Manifold.hull_points(np.asarray(meshscore.parse_obj(obj)[0])).to_mesh()
        hull_obj = meshscore.to_obj(np.asarray(hull.vert_properties)[:, :3], np.asarray(hull.tri_verts))
        e = expected_for(rng, obj, hull_obj)
        e["part"] = {"base": part.base, "features": part.features}   # for scripted partial agents
        if e["hull_iou"] <= MAX_HULL_IOU and e["hull_f"] < 0.97:
            return part, obj, e
    raise RuntimeError("cad: no part with a poor convex-hull fit in 50 draws")


def _instruction(part, detail: str) -> str:
    return (describe(part, detail) + "\n\nWrite the part as a closed, consistently oriented "
            "triangle mesh (outward normals) in Wavefront OBJ format to /app/part.obj, in "
            "millimetres and in the coordinates given (`v x y z` and `f i j k` lines). Any program "
            "may write it (python3 is available, without extra packages). Scored by volume IoU and "
            "surface F-score against the exact part; an open or inverted mesh scores 0.")


def _level(part) -> str:
    n = len(part.features) + (part.base["kind"] in ("lplate", "shaft"))
    return "easy" if n <= 1 else "medium" if n == 2 else "hard"


def make_task(task_id: str, part, obj: str, e: dict, k: Knobs) -> Task:
    task = scored.answer_task(
        task_id, domain=SUITE, family=part.base["kind"], difficulty=_level(part),
        instruction=_instruction(part, k.detail), app_files={},
        answer="cp /solution/part.obj /app/part.obj", scorer=scored.module_source(meshscore),
        expected=e, knobs={"detail": k.detail, "features": len(part.features),
                           "hull_iou": round(e["hull_iou"], 4)},
        verifier_timeout_s=120.0, steps=["cat > /app/part.obj <<'EOF'\n" + obj + "EOF"])
    task.files["solution/part.obj"] = obj
    return task


def build(n: int, seed: int, split: str, knobs: Knobs | None) -> list[Task]:
    k = knobs or Knobs()
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n):
        part, obj, e = _draw(rng, k)
        tasks.append(make_task(f"{split}-{i:04d}-{part.base['kind']}", part, obj, e, k))
    return tasks
