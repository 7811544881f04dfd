"""A bring-your-own agent: a short ReAct loop on the plain OpenAI SDK, standing for a user's own
program (it imports nothing of posttrain). posttrain runs it once per episode with
OPENAI_BASE_URL and OPENAI_API_KEY pointing at the episode's rollout endpoint:

    from posttrain.agent.byo import run_byo_episodes
    run_byo_episodes(jobs, engine, framer, params, cfg, ["python", "examples/byo_agent.py"])

It reads the task, chats with the task's tools, runs each tool call the model makes through the
endpoint, sends the results back as `tool` messages, and stops on submit or after MAX_TURNS.
"""

import os
import sys

import httpx
from openai import OpenAI

MAX_TURNS = int(os.environ.get("BYO_MAX_TURNS", "8"))
NUDGE = "Call one of the tools; call submit when the task is done."


def main() -> int:
    base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600)
    task = http.get("/task").raise_for_status().json()
    client = OpenAI()           # reads OPENAI_BASE_URL and OPENAI_API_KEY
    messages = [{"role": "user", "content": task["instruction"]}]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model="policy", messages=messages,
                                               tools=task["tools"]).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            messages.append({"role": "user", "content": NUDGE})
            continue
        for call in reply.tool_calls:
            # the arguments go as the model wrote them; the endpoint checks them
            output = http.post(f"/tools/{call.function.name}", content=call.function.arguments,
                               headers={"Content-Type": "application/json"})
            if call.function.name == "submit":
                return 0
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": output.raise_for_status().json()["output"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
