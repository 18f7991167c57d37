"""The exports bucket (S3): large exports as JSON Lines, written by a multipart upload
and fetched through a pre-signed link. This module alone knows their keys,
``exports/<user>/<projectId>/<exportId>.jsonl``, ``<user>`` the SHA-256 of the user id in
hex (the project id URL-quoted), which lets an erasure find a user's exports by prefix."""

from __future__ import annotations

from functools import lru_cache
import hashlib
from typing import TYPE_CHECKING
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from recall.errors import TooLarge, Unavailable
from recall.observability import logger
from recall.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

PART_MIN_BYTES = 5 * 1024 * 1024  # S3: every part but the last
PARTS_MAX = 10_000  # S3: parts of one upload
DELETE_MAX_KEYS = 1_000  # S3: keys of one DeleteObjects


@lru_cache(maxsize=1)
def s3_client() -> S3Client:
    """Made on first use, never at import, so tests can point it at moto first. SigV4, as
    pre-signed URLs need in every region."""
    attempts = get_settings().dynamodb_max_attempts
    config = Config(
        signature_version="s3v4",
        retries={"mode": "standard", "total_max_attempts": attempts},
    )
    return boto3.client("s3", config=config)


def export_prefix(user_id: str, project_id: str) -> str:
    """Where the user's exports of the project go. The user is named by a hash: a user id
    may be almost as long as S3's whole key (1,024 bytes), and three times that URL-quoted;
    the hash is 64 characters, the same for the same user every time, and no user's prefix
    holds another's."""
    user = hashlib.sha256(user_id.encode()).hexdigest()
    return f"exports/{user}/{quote(project_id, safe='')}/"


class ExportUpload:
    """One export being written. Lines gather until they fill a part, which goes up at
    once, so the upload holds at most one part and one line in memory."""

    def __init__(self, client: S3Client, bucket: str, key: str, part_bytes: int) -> None:
        self.key = key
        self.size = 0
        self._client = client
        self._bucket = bucket
        self._part_bytes = max(part_bytes, PART_MIN_BYTES)
        self._pending = bytearray()
        self._parts: list[CompletedPartTypeDef] = []
        # An attachment, so a browser following the link saves the file rather than show it.
        name = key.rsplit("/", 1)[-1]
        self._upload_id = client.create_multipart_upload(
            Bucket=bucket,
            Key=key,
            ContentType="application/x-ndjson",
            ContentDisposition=f'attachment; filename="recall-{name}"',
        )["UploadId"]

    def write(self, line: bytes) -> None:
        self._pending += line
        self.size += len(line)
        if len(self._pending) >= self._part_bytes:
            self._send_part()

    def _send_part(self) -> None:
        number = len(self._parts) + 1
        if number > PARTS_MAX:
            raise TooLarge(f"This export needs more than S3's {PARTS_MAX} parts.")
        answer = self._client.upload_part(
            Bucket=self._bucket,
            Key=self.key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=bytes(self._pending),
        )
        self._parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        self._pending.clear()

    def finish(self) -> int:
        """Send the last part and make the object: its size in bytes."""
        if self._pending or not self._parts:
            self._send_part()
        self._client.complete_multipart_upload(
            Bucket=self._bucket,
            Key=self.key,
            UploadId=self._upload_id,
            MultipartUpload={"Parts": self._parts},
        )
        return self.size

    def abort(self) -> None:
        """Drop the parts sent so far; the bucket's lifecycle rule drops them too, a day
        later, should this fail as well."""
        try:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=self.key, UploadId=self._upload_id
            )
        except (ClientError, BotoCoreError):
            logger.warning("an export's parts were left for the bucket's lifecycle rule")


class ExportStore:
    def __init__(self, settings: Settings, client: S3Client | None = None) -> None:
        self._bucket = settings.exports_bucket
        self._part_bytes = settings.export_part_bytes
        self._client = client

    @property
    def client(self) -> S3Client:
        return self._client or s3_client()

    def start(self, user_id: str, project_id: str, export_id: str) -> ExportUpload:
        if not self._bucket:
            raise Unavailable("No exports bucket is configured (EXPORTS_BUCKET).")
        key = f"{export_prefix(user_id, project_id)}{export_id}.jsonl"
        return ExportUpload(self.client, self._bucket, key, self._part_bytes)

    def link(self, key: str, seconds: int) -> str:
        """A GET URL signed with this process's credentials: whoever holds it may fetch
        the object until it expires, without a token."""
        url: str = self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self._bucket, "Key": key}, ExpiresIn=seconds
        )
        return url

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self._bucket, Key=key)

    def erase(self, user_id: str, project_id: str, budget: int) -> int:
        """Delete the user's exports of the project, at most ``budget`` objects: how many."""
        if not self._bucket:
            return 0
        deleted = 0
        prefix = export_prefix(user_id, project_id)
        while deleted < budget:
            listed = self.client.list_objects_v2(
                Bucket=self._bucket, Prefix=prefix, MaxKeys=min(DELETE_MAX_KEYS, budget - deleted)
            )
            keys = [found["Key"] for found in listed.get("Contents", [])]
            if not keys:
                break
            self.client.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True},
            )
            deleted += len(keys)
        return deleted
