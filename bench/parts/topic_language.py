"""A synthetic language with topics, for training a tiny MoE until its experts specialise
(bench/parts/moe_trained.py; issue 32). Nothing is downloaded; everything follows from a seed.

Each of `topics` topics owns `words` tokens drawn at random from the non-special vocabulary (so
topics share some tokens) and a sparse Markov chain over them: each word is followed by one of
`branching` successors (words of the same topic), with probabilities from a flat Dirichlet. A
sequence is <bos>, a random word of one topic, then that topic's chain. A shared word's successors
depend on the topic, so predicting well needs the topic, read from the context.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

BOS, FIRST_WORD = 1, 10  # ids below FIRST_WORD are the tiny model's special tokens


@dataclass
class TopicLanguage:
    vocab: int
    words: list[list[int]]  # [topic] -> its words
    successors: list[dict[int, list[tuple[int, float]]]]  # [topic] word -> [(next word, probability)]

    @classmethod
    def build(cls, vocab: int, topics: int = 8, words: int = 128, branching: int = 4,
              seed: int = 0) -> "TopicLanguage":
        rng = random.Random(seed)
        all_words = range(FIRST_WORD, vocab)
        owned = [rng.sample(all_words, words) for _ in range(topics)]
        chains = [{w: _successors(rng, own, branching) for w in own} for own in owned]
        return cls(vocab, owned, chains)

    def sample(self, rng: random.Random, length: int, topic: int | None = None) -> tuple[int, list[int]]:
        """(topic, `length` tokens: <bos> then the topic's chain from a random word)."""
        topic = rng.randrange(len(self.words)) if topic is None else topic
        tokens = [BOS, rng.choice(self.words[topic])]
        while len(tokens) < length:
            nxt, probs = zip(*self.successors[topic][tokens[-1]])
            tokens.append(rng.choices(nxt, probs)[0])
        return topic, tokens

    def transition_nll(self, topic: int, tokens: list[int]) -> list[float]:
        """-log p(next | word, topic) of each transition after the first word: what a model that
        knows the topic and the chain pays, the floor of the model's loss on the same positions."""
        return [-math.log(dict(self.successors[topic][a])[b]) for a, b in zip(tokens[1:-1], tokens[2:])]


def _successors(rng: random.Random, words: list[int], branching: int) -> list[tuple[int, float]]:
    """`branching` distinct words with flat-Dirichlet probabilities (normalised Exp(1) draws)."""
    draws = [rng.expovariate(1.0) for _ in range(branching)]
    return list(zip(rng.sample(words, branching), (d / sum(draws) for d in draws)))
