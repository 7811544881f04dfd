"""Several simulated nodes (ray.cluster_utils.Cluster): the engine replica's node is lost
mid-run; its placement group moves to the other node, the replica is replaced there with the
current weights (and any sandbox actor that was on the lost node too), and the synchronous run
ends with exactly the local executor's metrics."""

import pytest
from tests_ray import optional_ray  # noqa: E402

ray = optional_ray()   # None without the extra: then deselected (tests/needs.py)

from posttrain.cluster.config import ClusterConfig  # noqa: E402
from posttrain.rollout.config import RolloutConfig  # noqa: E402
from posttrain.rollout.executors.ray_executor import RayExecutor  # noqa: E402
from posttrain.rollout.pipeline import Pipeline  # noqa: E402
from posttrain.schedule.sampler import TaskSampler  # noqa: E402
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.needs("ray")]
NODE = dict(num_cpus=1, resources={"fake_gpu": 1}, object_store_memory=80 * 2**20)


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, object_store_memory=80 * 2**20))
    nodes = [c.add_node(**NODE) for _ in range(2)]
    ray.init(address=c.address, log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def strip(stats: dict) -> dict:
    return {k: v for k, v in stats.items()
            if not (k.endswith("_s") or "idle" in k or "busy" in k or k.startswith("actor_"))}


def run(make_parts, executor=None, on_step=None):
    env, model, engine = make_parts()
    if executor is not None:
        env, engine = executor.wrap(env, engine)
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
    rc = RolloutConfig(steps=8, groups_per_step=2, group_size=env.group_size, max_staleness=0)
    pipe = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"))
    rows = []

    def step(i, stats):
        rows.append(strip(stats))
        if on_step:
            on_step(i)
    pipe.run(step)
    return pipe, rows


def test_losing_the_engines_node_moves_it_and_the_run_goes_on(make_parts, cluster):
    c, nodes = cluster
    _, local = run(make_parts)
    cfg = ClusterConfig(executor="ray", sandbox_actors=2, sandbox_cpus=0.25, engine_replicas=1, engine_cpus=0.5,
                        engine_resources={"fake_gpu": 0.5}, start_timeout_s=120, heartbeat_s=0.5)
    with RayExecutor(cfg) as ex:
        lost = []

        def lose_node(step):
            if step == 2:
                where = ex.replicas.slots[0].where["node"]
                node = next(n for n in nodes if n.node_id == where)
                c.remove_node(node)
                lost.append(where)
        pipe, rows = run(make_parts, ex, lose_node)
        after = {s.where["node"] for pool in (ex.replicas, ex.sandboxes) for s in pool.slots}
        restarts = ex.restarts()
    assert rows == local
    assert lost and lost[0] not in after  # every actor now runs on the surviving node
    assert restarts["engine"] >= 1
    assert pipe.audit()["lost"] == []
