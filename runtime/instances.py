"""Loaded copies of a program, each with its own memory arenas and so its own mutable state.

A stateless request must start from the program's initial state. ``ProgramInstance.reset``
restores a method's named buffers in place from a snapshot taken right after the method
was loaded (microseconds); a method with buffers it cannot name runs on a fresh instance
instead (a reload: program and method load, delegate initialisation included). A session
owns one instance for its whole life. ``bench/state_reset.py`` measures both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.oip import BFLOAT16, tensor_numpy
from pteforge.contracts.specs import MethodSignature
from pteforge.runtime.artifact_files import data_beside
from pteforge.runtime.errors import ExecutionError, ProgramLoadError
from pteforge.runtime.state import MethodState, ProgramState


class ProgramInstance:
    """One ``executorch.runtime`` Program and the methods loaded from it.

    When ``eager`` (the program keeps state), every method is loaded now, before anything
    runs: loading a method writes its buffers' initial values, which must neither land on
    state a session has built nor be snapshotted after another request's writes.
    ``loading`` wraps each method load (``weight_cache.WeightCache.admit``'s setting).
    """

    def __init__(
        self,
        runtime: Any,
        path: Path,
        state: ProgramState,
        *,
        eager: bool,
        loading: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        try:
            self.program = runtime.load_program(path, data_path=data_beside(path))
        except Exception as exc:
            raise ProgramLoadError(f"ExecuTorch cannot load the artifact: {exc}") from exc
        self.state = state
        self.loading = loading
        self.methods: dict[str, Any] = {}
        self._views: dict[str, list[tuple[Any, Any]]] = {}  # method -> (live view, initial)
        if eager:
            for name in sorted(self.program.method_names):
                self.method(name)

    def method(self, name: str) -> Any:
        """Method ``name``, loaded (and its named buffers snapshotted) on first use."""
        if name not in self.methods:
            try:
                with self.loading():
                    self.methods[name] = self.program.load_method(name)
            except Exception as exc:
                raise ProgramLoadError(f"cannot load method {name!r}: {exc}") from exc
            self._views[name] = self._snapshot(name, self.state.method(name))
        return self.methods[name]

    def _snapshot(self, name: str, state: MethodState) -> list[tuple[Any, Any]]:
        views = []
        for buffer in state.buffers:
            try:
                view = self.methods[name]._method.get_attribute(buffer)
            except Exception as exc:
                raise ProgramLoadError(
                    f"method {name!r}: mutable buffer {buffer!r} cannot be read: {exc}"
                ) from exc
            views.append((view, view.clone()))
        return views

    def reset(self, name: str) -> None:
        """Put method ``name``'s named buffers back to their initial values."""
        for view, initial in self._views.get(name, ()):
            view.copy_(initial)


def opaque_state(program: Any) -> ProgramState:
    """The state assumed when the flatbuffer cannot be read: every method keeps some."""
    return ProgramState({name: MethodState(unnamed=1) for name in program.method_names})


def to_numpy(value: Any) -> np.ndarray:
    """An output value as a contiguous numpy array (a bfloat16 tensor's as BF16's dtype)."""
    if hasattr(value, "numpy"):
        return np.ascontiguousarray(tensor_numpy(value.detach()))
    return np.ascontiguousarray(np.asarray(value))


def to_tensor(array: np.ndarray) -> Any:
    """The torch tensor over ``array``'s memory (BF16's as a bfloat16 tensor)."""
    import torch

    try:
        return torch.from_numpy(array)
    except TypeError:  # BF16: torch reads ml_dtypes' bfloat16 through int16
        if array.dtype != BFLOAT16:
            raise
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)


def run_method(
    method: Any, inputs: list[np.ndarray], name: str = "", signature: MethodSignature | None = None
) -> list[np.ndarray]:
    """Execute an ExecuTorch method on numpy inputs; outputs as numpy arrays. ``signature``'s
    constants (the non-tensor inputs the program was exported with) are put in their places
    here, the one place every caller's inputs pass. A failure names the method ``name`` (a
    session's requests reach several methods of a program)."""
    tensors = [to_tensor(a) for a in inputs]
    values = tensors if signature is None else signature.positional(tensors)
    try:
        outputs = method.execute(values)
    except Exception as exc:
        what = f"method {name!r}" if name else "execution"
        raise ExecutionError(f"{what} failed: {exc}") from exc
    return [to_numpy(o) for o in outputs]
