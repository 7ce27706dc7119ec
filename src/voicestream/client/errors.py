"""The exceptions a bidi session raises on purpose: one family, each with a clear message.

Callers catch `SessionError` for "the session is unusable"; the subclasses say why, so a
retry policy can tell a refused connection from a model that crashed mid-stream.
"""

from __future__ import annotations


class SessionError(Exception):
    """Base class: the bidi session cannot go on."""


class SessionConnectError(SessionError):
    """The session could not be opened (refused, unreachable, rejected, or timed out)."""


class SessionTimeoutError(SessionError):
    """No frame arrived for `silence_timeout` seconds while the session was waiting for one."""


class ConnectionLostError(SessionError):
    """The stream ended or broke while the session still expected frames."""


class StreamFailedError(SessionError):
    """The service ended the stream with an error (SageMaker ModelStreamError/InternalStreamFailure).

    `kind` is the service's error name, `code` its error code (may be None), and the message
    is the service's message, verbatim.
    """

    def __init__(self, kind: str, message: str, code: str | None = None) -> None:
        self.kind = kind
        self.code = code
        self.service_message = message
        detail = f" [{code}]" if code else ""
        super().__init__(f"{kind}{detail}: {message}")


class ProtocolViolationError(SessionError):
    """The server sent something the wire contract does not allow."""


class SessionClosedError(SessionError):
    """The session is closed (or was never opened); nothing can be sent on it."""
