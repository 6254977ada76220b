"""pteforge.client: a Python client of the pteforge service, sync (``Client``) and asyncio
(``AsyncClient``), sharing one sans-IO core (``operations``) over ``httpx``.

    from pteforge.client import Client

    with Client("http://127.0.0.1:8000", token) as client:
        program = client.upload_program({"encode": encode_ep, "decode": "decode.pt2"})
        artifact = client.compile(program, {"all": {"partitioners": ["xnnpack"]}})
        client.download(artifact, "model.pte")
        (memory,) = client.infer(artifact, "encode", [tokens])
"""

from pteforge.client.aio import AsyncClient, AsyncSession
from pteforge.client.config import (
    Credentials,
    InvalidURLError,
    NotConfiguredError,
    base_url,
    load_credentials,
)
from pteforge.client.errors import (
    ERROR_CODES,
    APIError,
    BadRequestError,
    ChecksumMismatchError,
    CompileError,
    ConflictError,
    InferenceError,
    InsufficientStorageError,
    InvalidInputError,
    InvalidOptionsError,
    InvalidPlanError,
    InvalidProgramError,
    InvalidRequestError,
    JobCanceledError,
    LoweringFailedError,
    NotFoundError,
    NumericsWarning,
    PayloadTooLargeError,
    PteforgeError,
    RangeNotSatisfiableError,
    ServerError,
    ServiceUnavailableError,
    SessionsUnavailableError,
    TooManyRequestsError,
    TransportError,
    UnauthorizedError,
    UnknownBackendError,
    UploadRejectedError,
)
from pteforge.client.models import (
    Artifact,
    InferResult,
    Job,
    JobError,
    MethodSignature,
    Model,
    ModelVersion,
    Program,
    TensorSpec,
)
from pteforge.client.sync import Client, Session

__all__ = [
    "ERROR_CODES",
    "APIError",
    "Artifact",
    "AsyncClient",
    "AsyncSession",
    "BadRequestError",
    "ChecksumMismatchError",
    "Client",
    "CompileError",
    "ConflictError",
    "Credentials",
    "InferResult",
    "InferenceError",
    "InsufficientStorageError",
    "InvalidInputError",
    "InvalidOptionsError",
    "InvalidPlanError",
    "InvalidProgramError",
    "InvalidRequestError",
    "InvalidURLError",
    "Job",
    "JobCanceledError",
    "JobError",
    "LoweringFailedError",
    "MethodSignature",
    "Model",
    "ModelVersion",
    "NotConfiguredError",
    "NotFoundError",
    "NumericsWarning",
    "PayloadTooLargeError",
    "Program",
    "PteforgeError",
    "RangeNotSatisfiableError",
    "ServerError",
    "ServiceUnavailableError",
    "Session",
    "SessionsUnavailableError",
    "TensorSpec",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "UnknownBackendError",
    "UploadRejectedError",
    "base_url",
    "load_credentials",
]
