"""Per-domain advantage normalisation: each domain of a batch whitened on its own, the
group estimators unchanged without it, and the domain carried from the job to episodes."""

import torch

from posttrain.rollout.buffer import Group
from posttrain.schedule.sampler import GroupJob
from posttrain.train.advantages import episode_advantages
from posttrain.types import Episode


def batch():
    """Domain 'big' rewards on a 0..10 scale, 'small' on 0..1; two groups of 4 each."""
    eps = []
    for gid, (domain, rewards) in enumerate([("big", [10, 0, 0, 0]), ("big", [10, 10, 0, 5]),
                                             ("small", [1, 0, 0, 0]), ("small", [0, 0, 0, 0])]):
        for r in rewards:
            eps.append(Episode(f"t{gid}", gid, reward=float(r), domain=domain))
    return eps


def test_each_domain_is_whitened_on_its_own():
    eps = batch()
    plain = torch.tensor(episode_advantages(eps, "dr_grpo"))
    normed = torch.tensor(episode_advantages(eps, "dr_grpo", by_domain=True))
    big, small = slice(0, 8), slice(8, 16)
    assert plain[big].abs().max() > 5 * plain[small].abs().max()   # big outweighs small
    for part in (big, small):
        assert abs(normed[part].mean()) < 1e-5 and abs(normed[part].std(unbiased=False) - 1) < 1e-3
    assert torch.all(normed[12:16] == 0) and torch.all(plain[12:16] == 0)  # no signal stays 0
    assert torch.equal(torch.sign(normed[big]), torch.sign(plain[big]))


def test_a_group_takes_its_domain_from_the_job():
    job = GroupJob(3, 0, "t", 1, "files")
    group = Group.of(job, [Episode("t", 3), Episode("t", 3)], 0)
    assert [e.domain for e in group.episodes] == ["files", "files"]
