"""The exceptions a bidi session raises on purpose: one family, each with a clear message.

Callers catch `SessionError` for "the session is unusable"; the subclasses say why, so a
retry policy can tell a refused connection from a model that crashed mid-stream. Their `code`
is what a caller that speaks for the session reports: `tts_unavailable` when it could not be
opened, `tts_error` when it broke (`voicestream.wire.errors.ErrorCode`).
"""

from __future__ import annotations

from voicestream.wire.errors import CodedError, ErrorCode


class SessionError(CodedError):
    """Base class: the bidi session cannot go on."""

    code = ErrorCode.TTS_ERROR
    status = 502


class SessionConnectError(SessionError):
    """The session could not be opened (refused, unreachable, rejected, or timed out): worth
    retrying later. `server_code` is the server's own reason when it refused the session after
    the handshake (`server_busy`, `not_ready`), else None."""

    code = ErrorCode.TTS_UNAVAILABLE
    status = 503

    def __init__(self, message: str, *, server_code: str | None = None) -> None:
        super().__init__(message)
        self.server_code = server_code


class SessionTimeoutError(SessionError):
    """No frame arrived for `silence_timeout` seconds while the session was waiting for one."""

    status = 504


class ConnectionLostError(SessionError):
    """The stream ended or broke while the session still expected frames."""


class StreamFailedError(SessionError):
    """The service ended the stream with an error (SageMaker ModelStreamError/InternalStreamFailure).

    `kind` is the service's error name, `service_code` its error code (may be None), and
    `service_message` the service's message, verbatim.
    """

    def __init__(self, kind: str, message: str, service_code: str | None = None) -> None:
        self.kind = kind
        self.service_code = service_code
        self.service_message = message
        detail = f" [{service_code}]" if service_code else ""
        super().__init__(f"{kind}{detail}: {message}")


class ProtocolViolationError(SessionError):
    """The server sent something the wire contract does not allow."""


class SessionClosedError(SessionError):
    """The session is closed (or was never opened); nothing can be sent on it."""
