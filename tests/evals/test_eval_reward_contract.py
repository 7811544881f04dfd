"""`eval` under the verifier output contract: a reward outside the task's range is the
trial's error, never a reward (the oracle plays through a real tool-calling server)."""

import json

from posttrain.evals.launch import EvalRequest, evaluate
from scripted_server import Script, serve


def test_out_of_range_reward_is_a_trial_error(tmp_path, task_dir, oracle):
    for test_sh in task_dir.glob("*/tests/test.sh"):
        test_sh.write_text("#!/bin/bash\nmkdir -p /logs/verifier\necho 2 > /logs/verifier/reward.txt\n")
    with serve(Script(oracle)) as url:
        path, summary = evaluate(EvalRequest(str(task_dir), "scripted", k=1, jobs=2, base_url=url,
                                             job="j", jobs_dir=str(tmp_path / "jobs")))
    records = [json.loads(p.read_text()) for p in path.glob("*/result.json")]
    assert len(records) == 4
    for rec in records:
        assert rec["status"] == "infra_error" and "reward 2.0 is outside" in rec["error"]
        assert rec["verifier_result"] is None
    assert summary["counts"].get("passed", 0) == 0
