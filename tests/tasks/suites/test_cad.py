"""The cad suite: the mesh verifier in absolute units, validity checks, graded partial
credit, and the box, hull, empty, inverted and target-reader probes (weakened variants
caught)."""

import json

import pytest

from weakened import raised_by, validate_one, weaken

from posttrain.tasks.suites import generate
from posttrain.tasks.suites.cad import meshscore, probes

pytestmark = pytest.mark.needs("cad")   # tests/needs.py


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("cad")
    return generate("cad", root / "t", 1, seed=3)[0]


def _score(task, obj_text):
    e = json.loads((task.path / "tests/expected.json").read_text())
    return meshscore.score_mesh(*meshscore.parse_obj(obj_text), e)


def _oracle(task):
    return (task.path / "solution/part.obj").read_text()


def _scaled(obj, s):
    out = []
    for line in obj.splitlines():
        if line.startswith("v "):
            x, y, z = (float(c) * s for c in line.split()[1:])
            line = f"v {x} {y} {z}"
        out.append(line)
    return "\n".join(out) + "\n"


def test_oracle_scores_one_and_probes_zero(task):
    assert _score(task, _oracle(task))["reward"] == 1.0
    verts, _ = meshscore.parse_obj(_oracle(task))
    assert _score(task, probes.box_obj(*meshscore.bounds(verts)))["reward"] == 0.0
    inverted = probes.inverted_mesh(task).split("\n", 1)[1].rsplit("PROBE_EOF", 1)[0]
    assert _score(task, inverted) == {"reward": 0.0, "valid": 0.0, "volume": pytest.approx(
        -meshscore.volume(*meshscore.parse_obj(_oracle(task))))}


def test_absolute_units_and_open_meshes(task):
    assert _score(task, _scaled(_oracle(task), 1.15))["reward"] < 0.8      # wrong size
    assert _score(task, _scaled(_oracle(task), 1000))["reward"] == 0.0     # metres vs mm
    lines = _oracle(task).splitlines()
    open_mesh = "\n".join(lines[:-1]) + "\n"                               # one face missing
    assert _score(task, open_mesh)["valid"] == 0.0
    with pytest.raises(ValueError):
        meshscore.parse_obj("v 0 0 0\nf 1 2 3\n")


def test_partial_part_is_graded_between_probes_and_oracle(task):
    """The base sketch alone (no holes, pockets or bosses) on an L-plate scores in between."""
    import re

    import numpy as np
    from manifold3d import CrossSection


    lp = task
    assert lp.config.metadata["family"] == "lplate"
    text = lp.instruction
    w, d, h = (int(v) for v in re.search(r"0\.\.(\d+) \(x\) by 0\.\.(\d+) \(y\)", text).groups() + (
        re.search(r"thickness (\d+)", text).group(1),))
    xs = re.search(r"x (\d+)\.\.\d+, y (\d+)\.\.", text).groups()
    cx, cy = int(xs[0]), int(xs[1])
    outline = [[0, 0], [w, 0], [w, cy], [cx, cy], [cx, d], [0, d]]
    m = CrossSection([outline]).extrude(h).to_mesh()
    base = meshscore.to_obj(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts))
    r = _score(lp, base)["reward"]
    assert 0.05 < r < 0.99, r


def test_good_task_validates_ok(task, tmp_path, quick_cfg):
    r = validate_one(task.path, tmp_path / "st", quick_cfg)
    assert r.status == "ok", r.reasons


WEAK = {
    "bounding_box": '''
def score_mesh(verts, tris, e):   # raw IoU and F-score, no gain over the hull
    verts, tris = weld(verts, tris)
    if not tris or not closed_and_oriented(tris) or volume(verts, tris) <= 0:
        return {"reward": 0.0}
    i = iou(verts, tris, e)
    f = fscore(verts, tris, e["triangles"], e["surface"], e["tau"], len(e["surface"]))
    return {"reward": 0.8 * i + 0.2 * f}''',
    "inverted_mesh": '''
def score_mesh(verts, tris, e):   # orientation ignored: |volume| and no edge-direction check
    verts, tris = weld(verts, tris)
    if not tris:
        return {"reward": 0.0}
    if volume(verts, tris) < 0:
        tris = [(a, c, b) for a, b, c in tris]
    i = iou(verts, tris, e)
    return {"reward": round(0.8 * gain(i, e["hull_iou"]) + 0.2, 4)}''',
    "empty_mesh": '''
_strict = score_mesh
def score_mesh(verts, tris, e):   # a missing surface counts as no distance at all
    return {"reward": 1.0} if not tris else _strict(verts, tris, e)''',
}


@pytest.mark.slow
@pytest.mark.parametrize("probe", list(WEAK) + ["convex_hull", "target_reader"])
def test_weakened_variants_are_caught(tmp_path, quick_cfg, probe):
    t = generate("cad", tmp_path / "t", 1, seed=3)[0]
    if probe == "convex_hull":
        weaken(t.path, WEAK["bounding_box"])
    elif probe == "target_reader":      # the suite leaks the target into the environment
        (t.path / "environment/app").mkdir(parents=True)
        (t.path / "environment/app/reference.obj").write_text("# reference\n" + _oracle(t))
        (t.path / "environment/Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n")
    else:
        weaken(t.path, WEAK[probe])
    r = validate_one(t.path, tmp_path / "st", quick_cfg)
    assert r.status == "hackable" and probe in raised_by(r), (r.reasons, raised_by(r))
