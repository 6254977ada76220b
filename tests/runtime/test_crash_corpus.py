"""A corpus of mutated XNNPACK ``.pte`` files: crashes fail one request, the pool recovers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from pteforge.runtime import RuntimeLayerError, RuntimePool
from pteforge.runtime.errors import CrashingInputError
from tests.runtime.helpers import Compiled
from tests.runtime.mutations import crashing_flips, flip, random_flips


def test_mutated_corpus_only_fails_its_own_requests(
    artifacts: dict[str, Compiled], tmp_path: Path
) -> None:
    good = artifacts["mlp"]
    data = good.path.read_bytes()
    x = [t.numpy() for t in good.model.inputs["forward"]]
    expected = RuntimePool(1, 1 << 20, tmp_path / "ref")
    with expected:
        reference = expected.infer(good.sha256, "forward", x, good.path).outputs[0]
    corpus = random_flips(data, 32) + crashing_flips(data, 8)
    outcomes: dict[str, int] = {}
    with RuntimePool(2, 1 << 20, tmp_path / "cache") as pool:
        for i, (offset, bit) in enumerate(corpus):
            mutated = tmp_path / f"mutant-{i}.pte"
            mutated.write_bytes(flip(data, offset, bit))
            sha = hashlib.sha256(mutated.read_bytes()).hexdigest()
            try:
                pool.infer(sha, "forward", x, mutated)
                kind = "ok"
            except RuntimeLayerError as exc:
                kind = type(exc).__name__
                assert str(exc), "errors must say what went wrong"
            outcomes[kind] = outcomes.get(kind, 0) + 1
            # the good artifact keeps working after every mutant, crash or not
            result = pool.infer(good.sha256, "forward", x, good.path)
            np.testing.assert_allclose(result.outputs[0], reference, rtol=1e-5)
        # each crashing mutant is retried once on another worker, and crashes that one too
        crashing = outcomes.get(CrashingInputError.__name__, 0)
        assert pool.stats.worker_crashes == 2 * crashing
        assert pool.stats.worker_restarts >= 16
    assert crashing >= 8, outcomes
    assert sum(outcomes.values()) == 40
