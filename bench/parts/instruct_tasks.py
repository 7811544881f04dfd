"""The SmolLM2 recipe's work, shared by bench/real_rl.py and bench/trainer_modes.py: the
`instruct` suite's train and held-out splits with the families whose base pass@8 is above 0.12
(bench/results/instruct_base.json), so that most groups have reward variance."""

from __future__ import annotations

from pathlib import Path

from posttrain.tasks.suites import generate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "smollm2_instruct.toml"
FAMILIES = ("bullets,end,forbidden,highlights,json,keyword_count,keywords,no_comma,paragraphs,"
            "placeholders,postscript,sections,start,title,words")


def make_tasks(root: Path, n_train: int, n_heldout: int) -> tuple[Path, Path]:
    """Train (seed 0) and held-out (`--split heldout --seed 2`) task folders under root, made once."""
    knobs = [f"families={FAMILIES}"]
    train, held = root / f"train-{n_train}", root / f"heldout-{n_heldout}"
    for path, n, seed, split in ((train, n_train, 0, "train"), (held, n_heldout, 2, "heldout")):
        if not path.is_dir():
            generate("instruct", path, n, seed, split, knobs)
    return train, held
