"""The group ledger on its own: one state per group, a second train refused, a restart
re-issues what was in flight, lost groups found; and Ray's bad-input checks that need no cluster."""

import pytest

from posttrain.errors import PosttrainError
from posttrain.rollout.ledger import GroupLedger, LedgerError


def test_each_group_is_in_one_state_and_is_never_trained_twice():
    led = GroupLedger()
    for uid in range(4):
        led.issue(uid, f"t{uid}")
        led.start(uid)
    led.buffer(0)
    led.train(0, step=0)
    led.drop(1, "filtered")
    led.requeue(2, "worker_lost")
    assert led.counts() == {"issued": 1, "in_flight": 1, "buffered": 0, "trained": 1, "dropped": 1,
                            "dropped_filtered": 1}
    with pytest.raises(LedgerError, match="already trained at step 0"):
        led.train(0, step=1)
    with pytest.raises(LedgerError):
        led.buffer(1)  # a dropped group stays dropped
    assert led.audit(outstanding={2})["lost"] == [3]  # 3 is in flight, yet nobody holds it
    assert led.audit(outstanding={2, 3})["reissued"] == 1


def test_a_restored_ledger_reissues_what_was_in_flight():
    led = GroupLedger()
    led.issue(0, "a")
    led.start(0)
    led.issue(1, "b")
    led.start(1)
    led.buffer(1)
    back = GroupLedger()
    back.load_state_dict(led.state_dict())
    assert back.state(0) == "issued" and back.state(1) == "buffered"
    back.issue(0, "a")  # the sampler hands the re-queued group out again
    back.start(0)
    assert back.entries[0].reason == "restart"


def test_an_unreachable_address_fails_fast_and_bad_ranks_are_refused():
    from posttrain.cluster.ray_cluster import _reachable
    from posttrain.models.tiny import build_tiny_model
    from posttrain.train.fsdp import check_shards

    with pytest.raises(PosttrainError, match="cannot reach a Ray cluster"):
        _reachable("127.0.0.1:1")
    with pytest.raises(PosttrainError, match="expected host:port"):
        _reachable("nowhere")
    model = build_tiny_model(300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=1, intermediate_size=64, max_position_embeddings=64)
    check_shards(model, 2)
    with pytest.raises(PosttrainError, match="7 trainer ranks do not divide the model's shards"):
        check_shards(model, 7)


@pytest.mark.needs("ray")
def test_posttrain_rl_with_an_unreachable_cluster_address_fails_at_start(tmp_path):
    from posttrain.recipes.rl.run import run_rl
    from posttrain.recipes.rl.config import load_rl_config

    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', 'tasks.kind="copy"', "tasks.n_train=4",
                                'cluster.executor="ray"', 'cluster.address="127.0.0.1:1"'])
    with pytest.raises(PosttrainError, match="cluster.address 127.0.0.1:1: cannot reach a Ray cluster"):
        run_rl(cfg)
