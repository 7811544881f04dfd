"""The hostile-survivor suite: processes the agent leaves running (kept as servers) that go
for the reward while the verifier runs. Every attack must end as a non-reward (0 or an
error) on every backend, while a legitimate server the tests query still earns 1."""

import pytest

from posttrain.validate import survivors


def _check(results: dict, caught: tuple[str, ...] = ()) -> None:
    assert results.pop("legit_server") == {"reward": 1.0, "status": "ok", "started": True,
                                           "error": ""}
    for name, r in results.items():
        assert r["started"], f"{name}: the survivor did not start: {r}"
        assert r["reward"] == 0.0, f"{name} earned a reward: {r}"
    assert set(results) == set(survivors.ATTACKS)
    # bwrap: what they write into their own /logs/verifier is caught, not just ignored
    # (docker: they cannot write there at all, the verifier's uid owns it).
    for name in caught:
        assert results[name]["status"] == "verifier_tampered", results[name]


def test_survivors_earn_nothing_bwrap(tmp_path):
    _check(survivors.suite(tmp_path, "bwrap"), caught=("reward_txt", "reward_json"))


@pytest.mark.slow
def test_survivors_earn_nothing_docker(tmp_path, docker_engine):
    _check(survivors.suite(tmp_path, "docker"))
