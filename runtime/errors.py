"""The exception root of ``pteforge.runtime`` and its subclasses."""

from __future__ import annotations

from pteforge.contracts.runtime_messages import WorkerErrorKind


class RuntimeLayerError(Exception):
    """Root of every error raised by ``pteforge.runtime``."""


class ArtifactIntegrityError(RuntimeLayerError):
    """The local artifact file does not match the sha256 it was requested under."""


class ProgramLoadError(RuntimeLayerError):
    """ExecuTorch refused to load the program or one of its methods."""


class UnknownMethodError(RuntimeLayerError):
    """The program has no method of the requested name."""


class InvalidInputError(RuntimeLayerError):
    """The inputs do not match what the method expects (count, dtype or shape)."""


class ContextLengthError(InvalidInputError):
    """A prompt has more tokens than the language model's context holds."""


class TokenizerError(InvalidInputError):
    """The tokenizer, its config or its chat template cannot be read or used."""


class NotALanguageModelError(InvalidInputError):
    """The program does not follow ExecuTorch's LLM runner convention."""


class ExecutionError(RuntimeLayerError):
    """The method failed while executing (ExecuTorch returned an error)."""


class MalformedProgramError(ExecutionError):
    """A ``.pte``'s program flatbuffer is malformed (found by pteforge's bounded reader,
    :mod:`pteforge.runtime.program_reader`, before ExecuTorch is given it)."""


class WorkerCrashedError(RuntimeLayerError):
    """The worker process died while serving the request; it has been replaced."""


class WorkerTimeoutError(RuntimeLayerError):
    """The worker did not answer in time; it was killed and replaced."""


class PoolClosedError(RuntimeLayerError):
    """The pool was shut down."""


class ProtocolError(InvalidInputError):
    """An inference request body is malformed (bad JSON, bad binary section, bad fields)."""


class CrashingInputError(WorkerCrashedError):
    """The same request crashed a runtime worker twice: the inputs (or the method) are at
    fault, not the server."""


class PoolUnavailableError(RuntimeLayerError):
    """No runtime worker is running and starting one has failed (the server's fault).

    ``retry_after_s``: when a request may start another round of restarts (the pool's
    ``RestartPolicy.retry_after_s``), which is what clients are told to wait.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class CrashBudgetError(RuntimeLayerError):
    """The caller's project has crashed or hung as many runtime workers recently as it may
    (``crash_budget``): its requests are refused before they reach one (the client's fault).

    ``retry_after_s``: when the oldest of those deaths leaves the window and it may retry.
    """

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SessionError(RuntimeLayerError):
    """Root of the errors of sessions (the protocol's sequence extension)."""


class UnknownSessionError(SessionError):
    """The request continues a sequence that was never started (or is for another program)."""


class SessionEndedError(SessionError):
    """The sequence existed but has ended: it expired, or its runtime worker crashed."""


class SessionLimitError(SessionError):
    """A new sequence would exceed the sequences, or the memory, one project may hold."""


class SessionMemoryError(SessionError):
    """A new sequence would exceed the memory all sequences together may hold."""


class SessionLostError(SessionError):
    """A worker was asked for a session it does not hold (pool and worker out of step)."""


ERROR_KINDS: dict[WorkerErrorKind, type[RuntimeLayerError]] = {
    "integrity": ArtifactIntegrityError,
    "load": ProgramLoadError,
    "unknown_method": UnknownMethodError,
    "invalid_input": InvalidInputError,
    "execution": ExecutionError,
    "session": SessionLostError,
    "context_length": ContextLengthError,
    "tokenizer": TokenizerError,
    "not_a_language_model": NotALanguageModelError,
}


def kind_of(error: Exception) -> WorkerErrorKind:
    """The wire name of ``error``'s class, used between worker and pool (``execution`` for
    any other exception)."""
    for kind, cls in ERROR_KINDS.items():
        if type(error) is cls:
            return kind
    return "execution"
