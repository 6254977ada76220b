"""Choosing the next token from a language model's logits: greedy or seeded sampling."""

from __future__ import annotations

import numpy as np


class Sampler:
    """Picks tokens from logits.

    ``temperature`` 0 is greedy: the first index of the largest logit (``torch.argmax``'s
    and ``numpy.argmax``'s choice alike). Otherwise the softmax of ``logits / temperature``
    is cut to the smallest set of most likely tokens whose probabilities reach ``top_p``,
    and one is drawn with a generator seeded by ``seed`` (fresh entropy when None), so a
    seed repeats its draws exactly.
    """

    def __init__(self, temperature: float, top_p: float, seed: int | None) -> None:
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self._rng: np.random.Generator | None = None  # made on first draw: greedy needs none

    @property
    def rng(self) -> np.random.Generator:
        """The generator the draws come from (OS entropy, ~20 us, when unseeded)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

    def pick(self, logits: np.ndarray) -> int:
        """The next token for a 1-D row of logits."""
        if self.temperature == 0:
            return int(logits.argmax())  # the method: ~0.7 us less than np.argmax's wrapper
        scaled = logits.astype(np.float64) / self.temperature
        probs = np.exp(scaled - scaled.max())
        order = np.argsort(-probs, kind="stable")
        ranked = probs[order] / probs.sum()
        cumulative = np.cumsum(ranked)
        keep = int(np.searchsorted(cumulative, self.top_p * cumulative[-1])) + 1
        kept = cumulative[: min(keep, len(ranked))]
        drawn = int(np.searchsorted(kept, self.rng.random() * kept[-1], side="right"))
        return int(order[min(drawn, len(kept) - 1)])
