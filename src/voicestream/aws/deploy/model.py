"""The model data of the endpoint: Kokoro-82M's files from Hugging Face into the model bucket.

The revision is pinned, so every deploy serves the same bytes. `voicestream.engine.models.hub`
downloads and checks each file against the hub's own metadata for that revision (LFS sha256,
git blob ids); the checkpoint is also checked against the digest pinned here, so a rewritten
revision cannot slip through. The upload is verified twice: S3 checks a SHA-256 checksum of
every object it receives, and each object records its file's sha256 as metadata, which is what
makes the step resumable: a file already in the bucket with the right size and digest is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from voicestream import env
from voicestream.aws.clients import error_code, error_message
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.pins import CHECKPOINT, CHECKPOINT_SHA256, MODEL_REPO, MODEL_REVISION
from voicestream.aws.deploy.progress import Progress

SHA256_METADATA = "sha256"  # S3 user metadata key (x-amz-meta-sha256)


@dataclass(frozen=True)
class LocalFile:
    key: str  # path below the model directory, with "/" separators
    path: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class UploadSummary:
    uploaded: list[str]
    skipped: list[str]

    @property
    def total(self) -> int:
        return len(self.uploaded) + len(self.skipped)


def model_prefix(revision: str = MODEL_REVISION) -> str:
    """Where a revision's files live in the model bucket (the endpoint's ModelDataPrefix)."""
    return f"kokoro-82m/{revision[:12]}/"


def default_cache_dir(revision: str = MODEL_REVISION) -> Path:
    return env.cache_dir() / "kokoro-82m-hub" / revision[:12]


def fetch_model(cache_dir: Path, revision: str, progress: Progress) -> Path:
    """The revision's files in `cache_dir`, downloaded (or reused) and verified."""
    from voicestream.engine.models.assets import AssetError, sha256_of
    from voicestream.engine.models.hub import fetch_hub_assets

    try:
        root = fetch_hub_assets(cache_dir, revision=revision, progress=lambda line: progress(f"      {line}"))
    except AssetError as error:
        raise DeployError(str(error)) from None
    if revision == MODEL_REVISION and sha256_of(root / CHECKPOINT) != CHECKPOINT_SHA256:
        raise DeployError(f"{CHECKPOINT} of {MODEL_REPO}@{revision[:12]} is not the pinned checkpoint (sha256)")
    return root


def local_files(root: Path) -> list[LocalFile]:
    """Every file below `root` (hidden ones aside), with its size and sha256, in key order."""
    from voicestream.engine.models.assets import sha256_of

    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        files.append(LocalFile(key=relative.as_posix(), path=path, size=path.stat().st_size, sha256=sha256_of(path)))
    if not files:
        raise DeployError(f"no model files in {root}")
    return files


def remote_digest(s3: Any, bucket: str, key: str) -> tuple[int, str] | None:
    """(size, recorded sha256) of an object, or None when it is absent."""
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error_code(error) in {"404", "NoSuchKey", "NotFound"}:
            return None
        raise DeployError(f"cannot read s3://{bucket}/{key}: {error_message(error) or error_code(error)}") from None
    return int(head["ContentLength"]), str(head.get("Metadata", {}).get(SHA256_METADATA, ""))


def upload_model(s3: Any, bucket: str, prefix: str, files: list[LocalFile], progress: Progress) -> UploadSummary:
    """Put each file under `prefix` unless the bucket already holds exactly it; verify each upload."""
    uploaded, skipped = [], []
    for file in files:
        key = prefix + file.key
        if remote_digest(s3, bucket, key) == (file.size, file.sha256):
            skipped.append(file.key)
            continue
        progress(f"      uploading {file.key} ({file.size / 1e6:.1f} MB)")
        try:
            s3.upload_file(
                str(file.path), bucket, key,
                ExtraArgs={"Metadata": {SHA256_METADATA: file.sha256}, "ChecksumAlgorithm": "SHA256"},
            )  # fmt: skip
        except (ClientError, OSError) as error:
            raise DeployError(f"upload of {file.key} to s3://{bucket}/{key} failed: {error}") from None
        if remote_digest(s3, bucket, key) != (file.size, file.sha256):
            raise DeployError(f"s3://{bucket}/{key} does not hold what was uploaded; run the command again")
        uploaded.append(file.key)
    return UploadSummary(uploaded=uploaded, skipped=skipped)
