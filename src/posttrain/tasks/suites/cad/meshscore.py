"""The cad verifier (shipped as tests/score.py; stdlib only): a mesh against a target.

Valid = the OBJ parses, has faces, every edge joins exactly two faces with opposite
directions after welding vertices (watertight, consistently oriented), the volume
is positive (outward normals) and the part fits in 3x the target's size. IoU in
absolute units: |T and C| is V_T times the share of points sampled inside the target
that lie inside C (ray parity), V_C comes from the divergence theorem. F-score: the
share of C's surface samples within tau (1% of the target diagonal) of T's surface
and of T's samples within tau of C's, harmonic mean. Both are scored as gains over
the target's convex hull (which contains its bounding box's gain):
reward = valid * (0.8 * clip((IoU - IoU_hull) / (1 - IoU_hull)) + 0.2 * clip((F - F_hull) / (1 - F_hull))).
"""

import json
import math
import os
import random
import stat
import sys

MAX_BYTES = 30_000_000
MAX_FACES = 200_000


def parse_obj(text):
    """(vertices, triangles) from OBJ text; polygons are fanned; raises ValueError."""
    verts, tris = [], []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            verts.append(tuple(float(x) for x in parts[1:4]))
        elif parts[0] == "f":
            idx = []
            for p in parts[1:]:
                i = int(p.split("/")[0])
                idx.append(i - 1 if i > 0 else len(verts) + i)
            for k in range(1, len(idx) - 1):
                tris.append((idx[0], idx[k], idx[k + 1]))
            if len(tris) > MAX_FACES:
                raise ValueError("too many faces")
    for t in tris:
        if min(t) < 0 or max(t) >= len(verts):
            raise ValueError("face index out of range")
    if any(not math.isfinite(c) for v in verts for c in v):
        raise ValueError("non-finite vertex")
    return verts, tris


def weld(verts, tris, digits=5):
    key, remap, out = {}, [], []
    for v in verts:
        k = tuple(round(c, digits) for c in v)
        if k not in key:
            key[k] = len(out)
            out.append(v)
        remap.append(key[k])
    welded = [(remap[a], remap[b], remap[c]) for a, b, c in tris]
    return out, [t for t in welded if len(set(t)) == 3]


def closed_and_oriented(tris):
    edges = {}
    for a, b, c in tris:
        for e in ((a, b), (b, c), (c, a)):
            edges[e] = edges.get(e, 0) + 1
    return bool(edges) and all(n == 1 and edges.get((e[1], e[0])) == 1 for e, n in edges.items())


def volume(verts, tris):
    total = 0.0
    for a, b, c in tris:
        (x1, y1, z1), (x2, y2, z2), (x3, y3, z3) = verts[a], verts[b], verts[c]
        total += x1 * (y2 * z3 - y3 * z2) - x2 * (y1 * z3 - y3 * z1) + x3 * (y1 * z2 - y2 * z1)
    return total / 6.0


def bounds(verts):
    return [min(v[i] for v in verts) for i in range(3)], [max(v[i] for v in verts) for i in range(3)]


class Grid:
    """Triangles binned by their bounding boxes into cubes of side `cell` (pad added)."""

    def __init__(self, verts, tris, cell, pad=0.0, dims=3):
        self.cell, self.dims, self.cells = cell, dims, {}
        self.tris = [(verts[a], verts[b], verts[c]) for a, b, c in tris]
        for i, t in enumerate(self.tris):
            lo = [math.floor((min(p[d] for p in t) - pad) / cell) for d in range(dims)]
            hi = [math.floor((max(p[d] for p in t) + pad) / cell) for d in range(dims)]
            for key in _box(lo, hi):
                self.cells.setdefault(key, []).append(i)

    def near(self, p):
        return self.cells.get(tuple(math.floor(p[d] / self.cell) for d in range(self.dims)), ())


def _box(lo, hi):
    keys = [()]
    for a, b in zip(lo, hi):
        keys = [k + (i,) for k in keys for i in range(a, b + 1)]
    return keys


def inside(grid, p):
    """Ray parity along +z through the triangles above p's (x, y) cell."""
    x, y, z = p
    hits = 0
    for i in grid.near(p):
        (x1, y1, z1), (x2, y2, z2), (x3, y3, z3) = grid.tris[i]
        d = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
        if d == 0:
            continue
        l1 = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / d
        l2 = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / d
        l3 = 1 - l1 - l2
        if l1 < 0 or l2 < 0 or l3 < 0:
            continue
        if l1 * z1 + l2 * z2 + l3 * z3 > z:
            hits += 1
    return hits % 2 == 1


def _seg_dist2(p, a, b):
    ab = [b[i] - a[i] for i in range(3)]
    ap = [p[i] - a[i] for i in range(3)]
    den = sum(c * c for c in ab)
    t = 0.0 if den == 0 else max(0.0, min(1.0, sum(ap[i] * ab[i] for i in range(3)) / den))
    return sum((ap[i] - t * ab[i]) ** 2 for i in range(3))


def tri_dist2(p, t):
    a, b, c = t
    ab = [b[i] - a[i] for i in range(3)]
    ac = [c[i] - a[i] for i in range(3)]
    n = [ab[1] * ac[2] - ab[2] * ac[1], ab[2] * ac[0] - ab[0] * ac[2], ab[0] * ac[1] - ab[1] * ac[0]]
    nn = sum(x * x for x in n)
    if nn > 0:
        ap = [p[i] - a[i] for i in range(3)]
        dist = sum(ap[i] * n[i] for i in range(3)) / nn
        q = [p[i] - dist * n[i] for i in range(3)]
        # barycentric test of the projection
        v0, v1, v2 = ab, ac, [q[i] - a[i] for i in range(3)]
        d00 = sum(x * x for x in v0); d01 = sum(v0[i] * v1[i] for i in range(3))
        d11 = sum(x * x for x in v1); d20 = sum(v2[i] * v0[i] for i in range(3))
        d21 = sum(v2[i] * v1[i] for i in range(3))
        den = d00 * d11 - d01 * d01
        if den > 0:
            v = (d11 * d20 - d01 * d21) / den
            w = (d00 * d21 - d01 * d20) / den
            if v >= 0 and w >= 0 and v + w <= 1:
                return dist * dist * nn
    return min(_seg_dist2(p, a, b), _seg_dist2(p, b, c), _seg_dist2(p, c, a))


def share_within(points, grid, tau):
    t2, near = tau * tau, 0
    for p in points:
        if any(tri_dist2(p, grid.tris[i]) <= t2 for i in grid.near(p)):
            near += 1
    return near / max(1, len(points))


def sample_surface(verts, tris, n, seed=0):
    rng = random.Random(seed)
    areas, acc = [], 0.0
    for a, b, c in tris:
        A, B, C = verts[a], verts[b], verts[c]
        u = [B[i] - A[i] for i in range(3)]
        v = [C[i] - A[i] for i in range(3)]
        cr = (u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0])
        acc += math.sqrt(sum(x * x for x in cr)) / 2
        areas.append(acc)
    out = []
    for _ in range(n):
        r = rng.random() * acc
        lo, hi = 0, len(areas) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if areas[mid] < r else (lo, mid)
        A, B, C = (verts[i] for i in tris[lo])
        s, t = rng.random(), rng.random()
        if s + t > 1:
            s, t = 1 - s, 1 - t
        out.append(tuple(A[i] + s * (B[i] - A[i]) + t * (C[i] - A[i]) for i in range(3)))
    return out


def fscore(verts, tris, target_tris, target_samples, tau, n):
    mine = sample_surface(verts, tris, n)
    tgrid = Grid([p for t in target_tris for p in t], [(3 * i, 3 * i + 1, 3 * i + 2)
                 for i in range(len(target_tris))], tau, pad=tau)
    cgrid = Grid(verts, tris, tau, pad=tau)
    precision = share_within(mine, tgrid, tau)
    recall = share_within(target_samples, cgrid, tau)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def iou(verts, tris, e):
    lo, hi = bounds(verts)
    cell = max(hi[0] - lo[0], hi[1] - lo[1], 1e-9) / 40
    grid = Grid(verts, tris, cell, dims=2)
    share = sum(inside(grid, p) for p in e["interior"]) / len(e["interior"])
    inter = e["volume"] * share
    return inter / (e["volume"] + volume(verts, tris) - inter)


def gain(x, base):
    return max(0.0, min(1.0, (x - base) / (1 - base)))


def score_mesh(verts, tris, e):
    """The reward and its parts for a parsed mesh against expected data `e`."""
    verts, tris = weld(verts, tris)
    if not tris or not closed_and_oriented(tris):
        return {"reward": 0.0, "valid": 0.0}
    vol = volume(verts, tris)
    lo, hi = bounds(verts)
    size = max(h - l for h, l in zip(hi, lo))
    if vol <= 0 or size > 3 * e["size"]:
        return {"reward": 0.0, "valid": 0.0, "volume": vol}
    i = iou(verts, tris, e)
    f = fscore(verts, tris, e["triangles"], e["surface"], e["tau"], len(e["surface"]))
    r = 0.8 * gain(i, e["hull_iou"]) + 0.2 * gain(f, e["hull_f"])
    return {"reward": round(r, 4), "valid": 1.0, "iou": i, "fscore": f, "volume": vol}


def to_obj(verts, tris):
    """OBJ text (5 decimals, 1-based faces) for vertices and triangles (lists or arrays)."""
    lines = ["v %.5f %.5f %.5f" % (float(x), float(y), float(z)) for x, y, z in verts]
    lines += ["f %d %d %d" % (int(a) + 1, int(b) + 1, int(c) + 1) for a, b, c in tris]
    return "\n".join(lines) + "\n"


def read_mesh(path):
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_obj(f.read())
    except (OSError, ValueError, IndexError):
        return None


def main():
    e = json.load(open("/tests/expected.json"))
    mesh = read_mesh(e.get("answer_path", "/app/part.obj"))
    result = {"reward": 0.0, "valid": 0.0} if mesh is None else score_mesh(*mesh, e)
    json.dump(result, open("/logs/verifier/reward.json", "w"))
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
