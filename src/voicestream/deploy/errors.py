"""The one error the deploy commands raise on purpose: its message is what the user reads."""

from __future__ import annotations


class DeployError(Exception):
    """A deploy step cannot go on; the message says what is wrong and what to do."""
