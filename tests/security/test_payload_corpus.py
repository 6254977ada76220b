"""The schema-generated payload corpus against the sandbox (issue 18).

Every case is refused by the static validator with its field's reason, naming the field, or
(free text) accepted and then loaded for real, in the sandbox and in plain torch
(``torch.export.load``, ``ep.module()``, its code, a call), with its marker never created.
The live cases are shown to run their payload in plain torch, so the corpus has teeth.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from pteforge.children.forkserver import SANDBOX_PRELOAD
from pteforge.server.sandbox import (
    ForkServerIsolation,
    IsolatedLoadError,
    UnsafeArchiveError,
    load_programs_isolated,
    validate_pt2_archive,
)
from tests.sandbox.archives import read_archive, write_archive
from tests.security.corpus import (
    INERT,
    LIVE,
    MODEL_JSON,
    CorpusCase,
    DictKey,
    base_archives,
    detailed_cases,
    marker_for,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
PLAIN_TORCH = """
import sys, torch
for path in sys.argv[1:]:
    try:
        ep = torch.export.load(path)
        module = ep.module()
        print(module.code[:0])
        args, kwargs = ep.example_inputs
        module(*args, **kwargs)
    except Exception as e:  # a broken archive may fail to load: it must not run anything
        print(f"{path}: {type(e).__name__}", file=sys.stderr)
"""


@dataclass
class Corpus:
    cases: list[CorpusCase]
    markers: Path


@pytest.fixture(scope="module")
def isolation() -> ForkServerIsolation:
    """Sandbox children forked from a preloaded fork server, as the server starts them."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(SANDBOX_PRELOAD)
    return ForkServerIsolation(context)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    directory = tmp_path_factory.mktemp("corpus")
    markers = tmp_path_factory.mktemp("markers")
    return Corpus(list(detailed_cases(directory, markers)), markers)


def _plain_torch(archives: list[Path]) -> None:
    """Load ``archives`` as a careless server would: no validator, no confinement."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_WEIGHTS_ONLY_LOAD"}
    command = [sys.executable, "-c", PLAIN_TORCH, *map(str, archives)]
    subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, timeout=300)


def test_the_corpus_covers_every_class_and_live_attacks(corpus: Corpus) -> None:
    expected = {case.expected for case in corpus.cases}
    assert {"unsafe_name", "unsafe_string", "unsafe_operator", INERT} <= expected
    assert {"unsafe_expression", "unsafe_guard_code"} <= expected
    assert set(LIVE) <= {case.name for case in corpus.cases}
    assert len(corpus.cases) > 300, "the schema walk found fewer sites than expected"


def test_refused_payloads_name_their_field(corpus: Corpus) -> None:
    wrong = []
    for case in corpus.cases:
        if case.expected == INERT:
            continue
        try:
            validate_pt2_archive(case.archive)
            wrong.append(f"{case.name}: accepted")
        except UnsafeArchiveError as e:
            if e.reason != case.expected or case.field not in e.message:
                wrong.append(f"{case.name}: [{e.reason}] {e.message[:300]}")
    assert wrong == []
    assert not any(corpus.markers.iterdir())


def test_free_text_payloads_load_and_stay_inert(
    corpus: Corpus, isolation: ForkServerIsolation
) -> None:
    """Accepted payloads load in the sandbox (a broken component may fail the load, as a
    clear refusal) and in plain torch, code and a call included; no marker appears."""
    inert = [case for case in corpus.cases if case.expected == INERT]
    assert len(inert) >= 10
    for case in inert:
        validate_pt2_archive(case.archive)
        try:
            load_programs_isolated(case.archive, isolation=isolation)
        except IsolatedLoadError as e:
            assert e.reason == "invalid_program", (case.name, e.reason, e.message)
    _plain_torch([case.archive for case in inert])
    ran = [case.name for case in inert if marker_for(corpus.markers, case.name).exists()]
    assert ran == []


def test_the_live_cases_run_without_the_validator(corpus: Corpus) -> None:
    """Plain torch runs these payloads: the corpus holds real attacks, not strawmen."""
    live = [case for case in corpus.cases if case.name in LIVE]
    _plain_torch([case.archive for case in live])
    ran = {case.name for case in live if marker_for(corpus.markers, case.name).exists()}
    for case in live:
        marker_for(corpus.markers, case.name).unlink(missing_ok=True)
    assert ran == set(LIVE)


def test_the_benign_programs_are_accepted_and_load(
    tmp_path: Path, isolation: ForkServerIsolation
) -> None:
    """A ``rounding_mode="floor"`` argument, a string input, parameters, buffers, a tensor
    constant, dynamic shapes, dictionary and keyword inputs."""
    for name, archive in base_archives(tmp_path).items():
        methods = validate_pt2_archive(archive).methods
        described = load_programs_isolated(archive, isolation=isolation).methods
        assert [m.name for m in described] == [m.name for m in methods], name


def test_a_sample_input_key_with_a_quote_is_refused(tmp_path: Path) -> None:
    """The sample inputs' keys reach the guard message too: checked even when the program's
    own pytree spec is benign."""
    hostile = next(c for c in detailed_cases(tmp_path, tmp_path) if c.name == "live.dict_key")
    root, entries = read_archive(hostile.archive)
    benign = tmp_path / "benign.pt2"
    x = torch.ones(2, 3)
    torch.export.save(torch.export.export(DictKey(), (x, {"k": x})), benign)
    entries[MODEL_JSON] = read_archive(benign)[1][MODEL_JSON]
    mixed = write_archive(tmp_path / "mixed.pt2", root, entries)
    with pytest.raises(UnsafeArchiveError, match="sample input string") as info:
        validate_pt2_archive(mixed)
    assert info.value.reason == "unsafe_string"
