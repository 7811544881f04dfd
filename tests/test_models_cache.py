"""The model cache as a shared directory: a killed import neither lists as a model nor stays
behind, and imported files are as readable as the umask allows (not mkdtemp's 0700)."""

import os
import signal
import stat
import subprocess
import sys
import time

from posttrain.models.gguf import save_atomically

HALF_SAVE = """
import sys, time
from pathlib import Path
from posttrain.models.gguf import save_atomically

def half(d):
    (d / "config.json").write_text("{}")
    print("saving", flush=True)
    time.sleep(600)

save_atomically(Path(sys.argv[1]), half)
"""


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_killed_import_is_not_listed_and_is_removed_by_the_next(tmp_path):
    env = {**os.environ, "POSTTRAIN_CACHE": str(tmp_path)}
    models = tmp_path / "models"
    proc = subprocess.Popen([sys.executable, "-c", HALF_SAVE, str(models / "m")], stdout=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "saving"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    staged = [p for p in models.iterdir() if p.name.startswith(".")]
    assert len(staged) == 1 and (staged[0] / "config.json").is_file()
    assert "no models in" in _cli("models", "list", env=env).stdout
    save_atomically(models / "other", lambda d: (d / "config.json").write_text("{}"))
    assert sorted(p.name for p in models.iterdir()) == ["other"]
    listed = _cli("models", "list", env=env).stdout
    assert listed.startswith("other\t")


def test_imported_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = save_atomically(tmp_path / "m", lambda d: (d / "config.json").write_text("{}"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "config.json").stat().st_mode) == 0o644
