"""The one error the deploy commands raise on purpose: its message is what the user reads."""

from __future__ import annotations

from voicestream.wire.errors import CodedError


class DeployError(CodedError):
    """A deploy step cannot go on; the message says what is wrong and what to do."""

    code = "deploy_failed"
