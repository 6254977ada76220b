"""Read the LLM runner's metadata methods of a loaded program (``get_max_seq_len``, ...).

Only a confined child calls this on an upload: it executes the program's methods. The
description it builds is :class:`pteforge.contracts.llm_runner.GenerationInfo`.
"""

from __future__ import annotations

from typing import Any

from pteforge.contracts.llm_runner import (
    MAX_VALUES,
    RUNNER_METADATA,
    GenerationInfo,
    Scalar,
    generation_info,
)


def runner_answers(program: Any) -> dict[str, list[Scalar]]:
    """What each runner metadata method of ``program`` (an ``executorch.runtime``
    Program) answers; a method that takes inputs, fails, or answers anything but a few
    plain numbers is left out."""
    answers: dict[str, list[Scalar]] = {}
    names = set(program.method_names)
    for name in RUNNER_METADATA:
        if name not in names:
            continue
        try:
            method = program.load_method(name)
            values = list(method.execute([])) if method.metadata.num_inputs() == 0 else []
        except RuntimeError:  # ExecuTorch's bindings raise this for any error code
            continue
        if 0 < len(values) <= MAX_VALUES and all(isinstance(v, Scalar) for v in values):
            answers[name] = values
    return answers


def describe_generation(program: Any) -> GenerationInfo | None:
    """``program``'s ``generation`` description, or None when it does not follow the
    runner convention (no ``forward``, or no integer ``get_max_seq_len``)."""
    return generation_info(sorted(program.method_names), runner_answers(program))
