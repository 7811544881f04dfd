"""CAD probes: the target's bounding box and convex hull, an empty and an inverted mesh,
and a reader that copies any target-looking file it can find.

The box, hull and inverted probes know the target (from solution/part.obj, read on
the host): they are the strongest cheap guesses. Each must score 0 on a good task:
the hull contains the box, so scoring gains over the hull beats both; the inverted
mesh fails the orientation check.
"""

from __future__ import annotations

import numpy as np

from posttrain.tasks import Task
from posttrain.tasks.suites.cad import meshscore


def _target(task: Task):
    return meshscore.parse_obj((task.solution_dir / "part.obj").read_text())


def _write(obj: str) -> str:
    return f"cat > /app/part.obj <<'PROBE_EOF'\n{obj}PROBE_EOF\n"


def box_obj(lo, hi) -> str:
    corners = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
             (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    return meshscore.to_obj(corners, faces)


def bounding_box(task: Task) -> str:
    verts, _ = _target(task)
    return _write(box_obj(*meshscore.bounds(verts)))


def convex_hull(task: Task) -> str:
    from manifold3d import Manifold

    verts, _ = _target(task)
    m = Manifold.hull_points(np.asarray(verts)).to_mesh()
    return _write(meshscore.to_obj(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts)))


def empty_mesh(task: Task) -> str:
    return ": > /app/part.obj\n"


def inverted_mesh(task: Task) -> str:
    verts, tris = _target(task)
    return _write(meshscore.to_obj(verts, [(a, c, b) for a, b, c in tris]))


def target_reader(task: Task) -> str:
    return ("for f in /tests/*.obj /tests/expected.json /solution/part.obj $(find /app /tmp /home "
            "/root /opt /srv /mnt /var /usr/local \\( -name '*.obj' -o -name '*.stl' -o -name "
            "'expected.json' \\) 2>/dev/null | head -20); do [ -f \"$f\" ] && [ \"$f\" != /app/part.obj ] && "
            "cp \"$f\" /app/part.obj && break; done; true\n")


def _rebuild(task: Task, features: bool, segments: int = 48, scale: float = 1.0) -> str:
    """The part rebuilt from its recorded parameters: base only, coarse circles or resized."""
    import json

    from posttrain.tasks.suites.cad import part as grammar

    spec = json.loads((task.tests_dir / "expected.json").read_text())["part"]
    old, grammar.SEGMENTS = grammar.SEGMENTS, segments
    try:
        solid = grammar.rebuild(spec["base"], spec["features"] if features else [])
    finally:
        grammar.SEGMENTS = old
    m = solid.scale([scale] * 3).to_mesh()
    return _write(meshscore.to_obj(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts)))


# Scripted partial agents (not probes): what they score shows how the reward grades.
PARTIAL = {"base_only": lambda t: _rebuild(t, False),
           "coarse_circles": lambda t: _rebuild(t, True, segments=8),
           "five_percent_large": lambda t: _rebuild(t, True, scale=1.05)}

PROBES = {"bounding_box": bounding_box, "convex_hull": convex_hull, "empty_mesh": empty_mesh,
          "inverted_mesh": inverted_mesh, "target_reader": target_reader}
