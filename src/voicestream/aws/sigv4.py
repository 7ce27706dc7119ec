"""SigV4 for a Lambda function URL with AuthType AWS_IAM, with botocore's own signer.

One place for what the benchmark task, `voicestream call` and `voicestream serve --speak-url`
all do: sign the exact bytes that will be sent, for service `lambda` in the URL's region, with
the caller's credentials (boto3's chain: environment, profile, SSO, instance role...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from voicestream.wire.errors import CodedError

SERVICE: Final = "lambda"
# https://<url-id>.lambda-url.<region>.on.aws/
_FUNCTION_URL_HOST: Final = re.compile(r"^[a-z0-9]+\.lambda-url\.([a-z0-9-]+)\.on\.aws$")


class SigningError(CodedError):
    """No credentials or no region to sign with; the message says which."""

    code = "signing_failed"
    status = 400


def function_url_region(url: str) -> str | None:
    """The region a function URL lives in (from its host), or None for any other URL."""
    match = _FUNCTION_URL_HOST.match(urlsplit(url).hostname or "")
    return match.group(1) if match else None


def caller_credentials(session: boto3.Session | None = None) -> Any:
    """The caller's credentials from boto3's chain; `SigningError` when there are none.

    Returned live, not frozen: temporary ones (SSO, an assumed role, a credential process)
    are refreshable, and `signed_headers` reads them anew for every signature, so botocore
    renews them before they expire. A long-running signer (`serve --speak-url`) keeps working."""
    credentials = (session or boto3.Session()).get_credentials()
    if credentials is None:
        raise SigningError(
            "no AWS credentials to sign with: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        )
    return credentials


def signed_headers(
    method: str,
    url: str,
    body: bytes,
    *,
    region: str,
    credentials: Any,
    headers: Mapping[str, str] | None = None,
    service: str = SERVICE,
) -> dict[str, str]:
    """`headers` plus SigV4's (Authorization, X-Amz-Date, X-Amz-Security-Token when temporary
    credentials are used) for exactly this method, URL and body."""
    if hasattr(credentials, "get_frozen_credentials"):
        credentials = credentials.get_frozen_credentials()
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    SigV4Auth(credentials, service, region).add_auth(request)
    return dict(request.headers.items())
