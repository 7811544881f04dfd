"""The tiny Llama fine-tuned, in seconds, on the embedded chat layout to solve one make-dir task:
`<bash>STEP</bash>`, then `<submit/>` (greedy decoding replays both)."""

import torch

from posttrain.agent.chat import SYSTEM_PROMPT, ChatFramer
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics


def _sequences(framer, task):
    """(context, reply) token ids for both turns of the oracle in the text protocol."""
    (step,) = task.oracle_steps()
    prompt, first = framer.prompt(task.instruction), framer.reply(f"<bash>{step}</bash>")
    after = prompt + first + framer.observation("(no output)")
    return [(prompt, first), (after, framer.reply("<submit/>"))]


def _fine_tune(model, seqs, steps=200):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and much faster on a busy box
    try:
        for _ in range(steps):
            loss = sum(torch.nn.functional.cross_entropy(
                model(input_ids=torch.tensor([p + r])).logits[0, len(p) - 1:-1], torch.tensor(r)) for p, r in seqs)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if loss.item() < 0.02:  # greedy decoding reproduces both replies well before this
                break
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def make_dir_checkpoint(d):
    """(task dir, checkpoint dir under a step dir, model, tokenizer) for one make-dir task."""
    terminal_basics.generate(d / "tasks", 1, seed=3, split="heldout", families=["make-dir"])
    task = load_tasks(d / "tasks")[0]
    (step,) = task.oracle_steps()
    tok = build_tokenizer([SYSTEM_PROMPT, task.instruction, f"<bash>{step}</bash>", "<submit/>"] * 5, vocab_size=400)
    torch.manual_seed(0)
    model = _fine_tune(build_tiny_model(len(tok), seed=0), _sequences(ChatFramer(tok), task))
    return d / "tasks", save_policy(model, tok, d / "run" / "step-1" / "model"), model, tok
