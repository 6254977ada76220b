"""Session fixtures: compiled artifacts, one runtime pool and one /v2 server over a socket."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.native import build_xnnpack_options
from tests.generation.lm_builder import LmFiles
from tests.models import MultiMethod, seq2seq_programs, shared_linear_programs, small_mlp_programs
from tests.runtime.helpers import (
    Compiled,
    MemoryResolver,
    build_app,
    compile_pte,
    crashing_copy,
    dynamic_mlp_programs,
    serve,
)


class CompiledOnUse(Mapping[str, Compiled]):
    """The test artifacts by name, each exported and lowered the first time it is read: a
    test process (pytest-xdist runs two) that only runs tests of the small MLP never
    lowers the others."""

    BUILDERS: dict[str, Callable[[], MultiMethod]] = {
        "mlp": small_mlp_programs,
        "seq2seq": seq2seq_programs,
        "shared": lambda: shared_linear_programs(2048),
        "dynamic": dynamic_mlp_programs,
    }

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Compiled] = {}

    def __getitem__(self, name: str) -> Compiled:
        if name not in self.built:
            model = self.BUILDERS[name]()
            self.built[name] = compile_pte(model, self.root / f"{name}.pte")
        return self.built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.BUILDERS)

    def __len__(self) -> int:
        return len(self.BUILDERS)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> CompiledOnUse:
    return CompiledOnUse(tmp_path_factory.mktemp("pte"))


@pytest.fixture(scope="session")
def weight_cache_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_xnnpack_options(tmp_path_factory.mktemp("native"))


@pytest.fixture(scope="session")
def pool(
    tmp_path_factory: pytest.TempPathFactory, weight_cache_library: Path
) -> Iterator[RuntimePool]:
    with RuntimePool(
        2,
        64 << 20,
        tmp_path_factory.mktemp("artifacts"),
        weight_cache_library=weight_cache_library,
        request_timeout_s=60,
    ) as runtime_pool:
        yield runtime_pool


@dataclass
class Server:
    url: str
    resolver: MemoryResolver
    registry: object


@pytest.fixture(scope="session")
def server(pool: RuntimePool, artifacts: dict[str, Compiled]) -> Iterator[Server]:
    resolver = MemoryResolver()
    resolver.add("project-a", "mlp", artifacts["mlp"], as_path=False)
    resolver.add("project-a", "s2s", artifacts["seq2seq"], as_path=True)
    resolver.add("project-b", "other", artifacts["mlp"], as_path=True)
    resolver.add("project-a", "crash", crashing_copy(artifacts["mlp"]), as_path=True)
    app, registry = build_app(resolver, pool)
    with serve(app) as url:
        yield Server(url, resolver, registry)


@pytest.fixture(scope="package")
def lm() -> LmFiles:
    """The tiny Llama of the generation tests (built once per machine by ``lm_builder``)."""
    from tests.generation.lm_builder import build_tiny_lm

    return build_tiny_lm("llama")


@pytest.fixture(scope="package")
def gen_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimePool]:
    """One worker, so that a test can see it freed."""
    with RuntimePool(1, 64 << 20, tmp_path_factory.mktemp("lm-artifacts")) as pool:
        yield pool


@pytest.fixture(scope="module")
def byte_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE with no merges: every byte of a multi-byte character is a token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + 1, special_tokens=["<eos>"], initial_alphabet=alphabet
    )
    tokenizer.train_from_iterator(["plain text"], trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return path
