"""sandbox_hide: host Python packages are covered by an empty read-only directory."""

import glob

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.bwrap.args import hidden_paths

SITE = sorted(glob.glob("/usr/lib/python3/dist-packages") + glob.glob("/usr/local/lib/python3*/dist-packages"))


@pytest.mark.skipif(not SITE, reason="this host has no system dist-packages to hide")
def test_python_packages_are_hidden_only_when_asked():
    path = SITE[0]
    assert path in hidden_paths(("python-packages",))
    with open_sandbox("bwrap", SandboxSpec()) as sb:
        shown = sb.exec(f"ls -A {path} | wc -l", timeout_s=10).stdout.strip()
    with open_sandbox("bwrap", SandboxSpec(hidden=("python-packages",))) as sb:
        hidden = sb.exec(f"ls -A {path} | wc -l; touch {path}/x 2>&1 || echo refused",
                         timeout_s=10).stdout.split()
        stdlib = sb.exec("python3 -c 'import json, sqlite3; print(1)'", timeout_s=20).stdout
    assert int(shown) > 0 and hidden[0] == "0" and hidden[-1] == "refused"
    assert stdlib.strip() == "1"


def test_unknown_group_is_an_error():
    with pytest.raises(SandboxError, match="unknown groups"):
        hidden_paths(("everything",))
