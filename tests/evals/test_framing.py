"""TemplateFramer frames turns exactly as the checkpoint's own chat template renders them."""

from pathlib import Path

import pytest

from posttrain.agent.chat import ChatFramer
from posttrain.agent.framing import TemplateFramer, framer_for
from posttrain.models.tiny import build_tokenizer

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def chatml_tokenizer():
    tok = build_tokenizer(["<bash>ls /app</bash> hello world"] * 10, vocab_size=300)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHATML
    return tok


def _check_matches_template(tok):
    f = TemplateFramer(tok)
    ids = f.prompt("Do X") + f.reply("<bash>ls</bash>") + f.observation("a.txt")
    msgs = [{"role": "system", "content": f.system_prompt}, {"role": "user", "content": "Do X"},
            {"role": "assistant", "content": "<bash>ls</bash>"}, {"role": "user", "content": "a.txt"}]
    assert tok.decode(ids) == tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert f.decode_reply(f.reply("<submit/>")) == ("<submit/>", True)
    assert f.decode_reply(tok.encode("<bash>l", add_special_tokens=False))[1] is False


def test_chatml_framing_matches_template():
    _check_matches_template(chatml_tokenizer())


def test_framer_for_picks_chatframer_for_the_embedded_tokenizer():
    assert isinstance(framer_for(build_tokenizer(["a b"] * 5, vocab_size=300)), ChatFramer)


SMOL = Path.home() / ".cache" / "posttrain" / "models" / "smollm2-135m-instruct"


@pytest.mark.needs("smollm2")   # tests/needs.py
def test_smollm2_template():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SMOL)
    assert isinstance(framer_for(tok), TemplateFramer)
    _check_matches_template(tok)
