"""The ``generation`` description built from what a program's runner metadata methods
answered (``contracts/llm_runner.py``)."""

from __future__ import annotations

from pteforge.contracts.llm_runner import RUNNER_METADATA, generation_info

ANSWERS = {
    "get_max_seq_len": [128],
    "get_bos_id": [0],
    "get_eos_ids": [1, 3],
    "use_kv_cache": [True],
    "get_vocab_size": [384],
}


def test_a_runner_program_is_described() -> None:
    info = generation_info(["forward", *ANSWERS], ANSWERS)
    assert info is not None
    assert (info.method, info.max_seq_len, info.bos_id, info.eos_ids) == ("forward", 128, 0, [1, 3])
    assert (info.vocab_size, info.use_kv_cache, info.max_context_len) == (384, True, None)
    assert info.metadata == {
        "get_max_seq_len": 128,
        "get_bos_id": 0,
        "get_eos_ids": [1, 3],
        "use_kv_cache": True,
        "get_vocab_size": 384,
    }
    assert set(info.metadata) <= set(RUNNER_METADATA)


def test_one_eos_id_is_still_a_list() -> None:
    info = generation_info(["forward"], {"get_max_seq_len": [64], "get_eos_ids": [2]})
    assert info is not None and info.eos_ids == [2] and info.metadata["get_eos_ids"] == [2]


def test_optimum_executorchs_one_eos_id_is_read_where_get_eos_ids_is_missing() -> None:
    """optimum-executorch writes get_eos_id (one id), and its runner reads it."""
    answers = {"get_max_seq_len": [64], "get_eos_id": [2]}
    info = generation_info(["forward"], answers)
    assert info is not None and info.eos_ids == [2] and info.metadata["get_eos_id"] == 2
    both = generation_info(["forward"], {**answers, "get_eos_ids": [5, 6]})
    assert both is not None and both.eos_ids == [5, 6]


def test_other_programs_are_not_language_models() -> None:
    assert generation_info(["forward"], {}) is None  # no get_max_seq_len
    assert generation_info(["decode"], ANSWERS) is None  # no forward
    assert generation_info(["forward"], {"get_max_seq_len": [True]}) is None  # not an int
    assert generation_info(["forward"], {"get_max_seq_len": [1.5]}) is None


def test_unknown_metadata_is_left_out_and_odd_values_are_none() -> None:
    answers = {"get_max_seq_len": [64], "get_bos_id": [0.5], "get_secret": [7]}
    info = generation_info(["forward"], answers)
    assert info is not None and info.bos_id is None and "get_secret" not in info.metadata
