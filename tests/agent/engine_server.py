"""A real /v1/completions server on loopback (stdlib HTTP, its own thread) for the agent tests.

It answers each prompt with the scripted reply of the turn that prompt is at (counted from its
end tokens, so a resumed episode gets the reply it would have got; the last reply repeats),
and fails its first `fail_first` requests with a 503: a restarting server as RemoteEngine
sees it. `on_request(turn)` runs before each answer. `stop()` then `start()` on the same port is a server that went away.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from posttrain.agent.chat import SYSTEM_PROMPT
from posttrain.models.tiny import build_tokenizer

REPLIES = ["<bash>echo hi</bash>", "<bash>false</bash>", "<bash>seq 1 500</bash>", "<submit/>"]


def agent_tokenizer():
    return build_tokenizer([SYSTEM_PROMPT, *REPLIES, "echo hi false seq 1 500 done"] * 4, vocab_size=300)


class _Reusing(ThreadingHTTPServer):
    allow_reuse_address = True      # restart on the port it had
    daemon_threads = True


class ScriptedEngineServer:
    def __init__(self, tokenizer, replies: list[str], fail_first: int = 0, on_request=None):
        self.end = tokenizer.eos_token_id
        self.replies = [tokenizer.encode(r, add_special_tokens=False) + [self.end] for r in replies]
        self.fail_first, self.on_request = fail_first, on_request
        self.requests = 0
        self.port = 0               # start() binds a free one, or the one it had
        self.lock = threading.Lock()
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answer(self, body: dict) -> tuple[int, dict]:
        with self.lock:
            self.requests += 1
            n = self.requests
            if n <= self.fail_first:
                return 503, {"error": {"message": f"restarting ({n} of {self.fail_first})"}}
        turn = (body["prompt"][0].count(self.end) - 2) // 2   # system, user; then reply, observation
        if self.on_request:
            self.on_request(turn)
        ids = self.replies[min(turn, len(self.replies) - 1)]
        choices = [{"index": i, "token_ids": ids, "finish_reason": "stop",
                    "logprobs": {"token_logprobs": [-0.5] * len(ids)}} for i in range(len(body["prompt"]))]
        return 200, {"choices": choices}

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code, answer = server._answer(body)
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.http = _Reusing(("127.0.0.1", self.port), Handler)
        self.port = self.http.server_port
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
