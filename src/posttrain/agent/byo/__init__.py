"""Bring your own agent: a user's agent program, any language or framework, runs an episode by
talking to an OpenAI-compatible rollout endpoint; the episode is recorded token-in/token-out as
the built-in loop records it, so RL trains on it the same way (docs/agent.md).

- `endpoint.py`: the HTTP API (chat completions, tools, the task), one API key per episode
- `session.py`:  one episode behind one key: framing, sampling, tool calls, what is recorded
- `messages.py`: OpenAI messages compared (does a request extend the last?), framed, replied
- `runner.py`:   `run_byo_episodes`: the program as a subprocess per episode, then the verdict
"""

from posttrain.agent.byo.endpoint import RolloutEndpoint
from posttrain.agent.byo.runner import run_byo_episodes

__all__ = ["RolloutEndpoint", "run_byo_episodes"]
