"""Who and where: the AWS session the commands act with, checked before anything else runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound

from voicestream.aws.clients import client
from voicestream.aws.deploy.errors import DeployError

CREDENTIALS_HINT = (
    "configure them with `aws configure` (or `aws sso login`), or set AWS_PROFILE, "
    "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)


@dataclass(frozen=True)
class AwsTarget:
    """A boto3 session whose credentials and region were checked, and the account they reach."""

    session: boto3.Session
    region: str
    account: str
    profile: str | None = None

    def client(self, service: str) -> Any:
        # Standard retries back off on throttling; long polls (stacks, builds, executions) are ours.
        return client(service, self.region, self.session)

    @property
    def describe(self) -> str:
        return f"account {self.account}, region {self.region}" + (f", profile {self.profile}" if self.profile else "")


def connect(profile: str | None = None, region: str | None = None) -> AwsTarget:
    """The session for `profile`/`region` (defaults: the environment's), or DeployError saying
    what is missing. Calls STS once, so refused or expired credentials fail here, not mid-deploy."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except ProfileNotFound:
        raise DeployError(f"AWS profile {profile!r} is not configured: {CREDENTIALS_HINT}") from None
    if not session.region_name:
        raise DeployError("no AWS region: pass --region, or set AWS_REGION (or a region in your AWS profile)")
    try:
        credentials = session.get_credentials()
    except BotoCoreError as error:
        raise DeployError(f"AWS credentials could not be loaded ({error}): {CREDENTIALS_HINT}") from None
    if credentials is None:
        raise DeployError(f"no AWS credentials found: {CREDENTIALS_HINT}")
    try:
        identity = client("sts", session.region_name, session).get_caller_identity()
    except NoCredentialsError:
        raise DeployError(f"no AWS credentials found: {CREDENTIALS_HINT}") from None
    except (ClientError, BotoCoreError) as error:
        raise DeployError(f"AWS refused these credentials ({error}): {CREDENTIALS_HINT}") from None
    return AwsTarget(session=session, region=session.region_name, account=str(identity["Account"]), profile=profile)
