"""CreateDataSource, ListDataSources, DeleteDataSource: the S3 endpoints an org registers
for its `s3://` datasets (HIP-1333 §3). The access key and secret are sealed with AES-GCM
under a key derived from the master key, bound to the org and the name, and are opened
only where a dataset is read; no answer, log or audit row carries them."""

from __future__ import annotations

import dataclasses
import json
import re
from urllib.parse import urlsplit

import sqlalchemy as sa
from google.protobuf import timestamp_pb2
from sqlalchemy.exc import IntegrityError

from services.core import audit, errors, keys
from services.core import validation as v
from services.core.auth import Principal
from services.core.store import Store, utcnow
from services.jobs.store import DataSourceRow
from trainyard.job.v1 import data_source_pb2, job_service_pb2

REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# What S3 implementations accept as an access key id and a secret: printable, no spaces.
CREDENTIAL = re.compile(r"^[\x21-\x7e]{1,256}$")
PRINTABLE = re.compile(r"^[\x21-\x7e]+$")
DEFAULT_REGION = "us-east-1"


@dataclasses.dataclass(frozen=True)
class Credentials:
    """A data source opened for a read: where, and with what."""

    endpoint: str
    region: str
    access_key_id: str
    secret_access_key: str


class UnknownSource(errors.ValidationError):
    """`dataset.source` names no data source of the org (or one deleted since the create)."""

    def __init__(self) -> None:
        super().__init__("dataset.source", "names no data source of the org")


class Sealer:
    """Seals a data source's credentials under the master key, bound to its org and name."""

    def __init__(self, master: bytes) -> None:
        self._sealer = keys.Sealer(master, "data-source-credentials")

    def seal(self, org: str, name: str, access_key_id: str, secret: str) -> bytes:
        plain = json.dumps({"access_key_id": access_key_id, "secret_access_key": secret})
        return self._sealer.seal(f"{org}/{name}", plain.encode())

    def open(self, org: str, name: str, sealed: bytes) -> tuple[str, str]:
        doc = json.loads(self._sealer.open(f"{org}/{name}", sealed))
        return doc["access_key_id"], doc["secret_access_key"]


def _check_endpoint(endpoint: str) -> None:
    if not PRINTABLE.fullmatch(endpoint):
        raise errors.ValidationError("endpoint", "must be printable characters without spaces")
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 (raises on a port that is no number)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
        or len(endpoint) > 2048
    ):
        raise errors.ValidationError(
            "endpoint", "must be an http:// or https:// URL with a host and nothing after"
        )


def _check_name(name: str) -> None:
    if not name:
        raise errors.ValidationError("name", "is required")
    if not v.PROJECT.fullmatch(name):  # `$` alone would let a trailing newline through
        raise errors.ValidationError("name", "must be lower-case letters, digits and dashes")
    v.check_identifier("name", name, v.PROJECT, "lower-case letters, digits and dashes")


def _check(request: job_service_pb2.CreateDataSourceRequest) -> None:
    _check_name(request.name)
    if not request.endpoint:
        raise errors.ValidationError("endpoint", "is required")
    _check_endpoint(request.endpoint)
    if request.region and not REGION.fullmatch(request.region):
        raise errors.ValidationError("region", "must be lower-case letters, digits and dashes")
    for field in ("access_key_id", "secret_access_key"):
        value = getattr(request, field)
        if not value:
            raise errors.ValidationError(field, "is required")
        if not CREDENTIAL.fullmatch(value):
            raise errors.ValidationError(field, "must be 1 to 256 printable characters")


def to_proto(row: DataSourceRow) -> data_source_pb2.DataSource:
    created = timestamp_pb2.Timestamp()
    created.FromDatetime(row.create_time)
    return data_source_pb2.DataSource(
        name=row.name, endpoint=row.endpoint, region=row.region, create_time=created
    )


class DataSources:
    def __init__(self, store: Store, sealer: Sealer) -> None:
        self._store = store
        self._sealer = sealer

    def create(
        self,
        principal: Principal,
        request: job_service_pb2.CreateDataSourceRequest,
        request_id: str = "",
    ) -> data_source_pb2.DataSource:
        _check(request)
        org = principal.org
        sealed = self._sealer.seal(
            org, request.name, request.access_key_id, request.secret_access_key
        )
        try:
            with self._store.unit() as session:
                row = DataSourceRow(
                    org=org,
                    name=request.name,
                    endpoint=request.endpoint,
                    region=request.region or DEFAULT_REGION,
                    sealed=sealed,
                    create_time=utcnow(),
                )
                session.add(row)
                session.flush()  # a name the org already has fails here
                audit.record(
                    session,
                    "training.data_source.created",
                    org=org,
                    subject=request.name,
                    actor=principal.key_id,
                    request_id=request_id,
                )
                return to_proto(row)
        except IntegrityError:
            raise errors.Conflict("The org already has a data source of that name.") from None

    def list(self, principal: Principal) -> list[data_source_pb2.DataSource]:
        with self._store.unit(write=False) as session:
            rows = session.scalars(
                sa.select(DataSourceRow)
                .where(DataSourceRow.org == principal.org)
                .order_by(DataSourceRow.name)
            )
            return [to_proto(row) for row in rows]

    def delete(self, principal: Principal, name: str, request_id: str = "") -> bool:
        _check_name(name)
        with self._store.unit() as session:
            row = session.get(DataSourceRow, (principal.org, name))
            if row is not None:
                session.delete(row)
                audit.record(
                    session,
                    "training.data_source.deleted",
                    org=principal.org,
                    subject=name,
                    actor=principal.key_id,
                    request_id=request_id,
                )
            return True

    def credentials(self, org: str, name: str) -> Credentials:
        """The data source opened for a read; a name the org has not registered is refused
        as the dataset's (`dataset.source`)."""
        with self._store.unit(write=False) as session:
            row = session.get(DataSourceRow, (org, name))
            if row is None:
                raise UnknownSource()
            endpoint, region, sealed = row.endpoint, row.region, row.sealed
        access, secret = self._sealer.open(org, name, sealed)
        return Credentials(endpoint, region, access, secret)
