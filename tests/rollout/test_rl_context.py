"""`posttrain rl`'s [[domains]] choose their context policy; SandboxEnv runs each group under its
domain's, and the trainer steps on the segments a rewriting policy produced."""

import torch

from posttrain.agent.chat import SYSTEM_PROMPT, ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.recipes.rl.config import RLRunConfig
from posttrain.rollout.envs import SandboxEnv
from posttrain.schedule.sampler import GroupJob
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig


def test_each_domain_runs_under_its_policy_and_segments_train(tmp_path):
    cfg = RLRunConfig.model_validate({"domains": [
        {"name": "short", "source": "terminal-basics", "context": {"kind": "last_k", "k": 1}},
        {"name": "long", "source": "terminal-basics"}]})
    contexts = {d.name: d.context for d in cfg.domains if d.context is not None}
    assert contexts["short"].label() == "last_k:k=1" and "long" not in contexts

    generated, = terminal_basics.generate(tmp_path, 1, seed=0, families=["create-file"])
    task = read_task(tmp_path / generated.id)
    tok = build_tokenizer([SYSTEM_PROMPT, "<bash>ls</bash>", "<submit/>"] * 4, vocab_size=300)
    model = build_tiny_model(len(tok), seed=0, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, intermediate_size=64)
    agent = AgentConfig(max_turns=3, max_reply_tokens=6, sandbox_backend="bwrap")
    env = SandboxEnv([task], ChatFramer(tok), agent, group_size=2, contexts=contexts)
    jobs = [GroupJob(0, 0, task.id, seed=1, domain="short"), GroupJob(1, 0, task.id, seed=1, domain="long")]
    short, long = env.run(jobs, LocalEngine(model, tok))
    assert all(len(e.segments) == 1 for e in short) and all(e.segments == [] for e in long)

    for e, r in zip(short + long, (1.0, 0.0, 1.0, 0.0)):
        e.reward = r
    torch.manual_seed(0)
    trainer = PolicyTrainer(model, tok.pad_token_id, OptimConfig(lr=1e-3, micro_batch=8))
    stats = trainer.rl_step(short + long, RLConfig())
    assert stats["tokens"] == sum(e.tokens_out for e in short + long)
