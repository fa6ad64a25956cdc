"""The SDK's calls on the org itself: its keys (make, list, read, revoke, rotate), its
audit trail and its limits. `trainyard.sdk.Client` has them all; keys and the trail take
an org admin's key (or the operator's, with the client's `org`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

from trainyard.org.v1 import audit_pb2, key_pb2, limits_pb2, org_service_pb2
from trainyard.sdk_base import Calls


def rfc3339(value: dt.datetime | str | None) -> str:
    """A time as the trail's filters read it; a naive datetime is taken as UTC."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.isoformat()


class OrgMethods(Calls):
    """The org calls of `Client`."""

    def create_key(
        self,
        role: str,
        *,
        label: str = "",
        projects: Sequence[str] = (),
        bases: Sequence[str] = (),
        monthly_spend_cap: int | None = None,
        ttl_seconds: int | None = None,
    ) -> key_pb2.ApiKey:
        """Make a key of the org: `role` `member`, `admin` or `executor`, limited to
        `projects` and `bases` when given, its jobs' spend capped at `monthly_spend_cap`
        US cents a month, expiring after `ttl_seconds`. Its `secret` is in this answer
        only."""
        request = org_service_pb2.CreateKeyRequest(
            role=role, label=label, projects=list(projects), bases=list(bases)
        )
        if monthly_spend_cap is not None:
            request.monthly_spend_cap = monthly_spend_cap
        if ttl_seconds is not None:
            request.ttl_seconds = ttl_seconds
        return self._call("CreateKey", request)

    def list_keys(self, *, page_size: int = 0) -> Iterator[key_pb2.ApiKey]:
        """The org's keys, newest first, page after page; never a secret."""
        token = ""
        while True:
            page = self._call(
                "ListKeys", org_service_pb2.ListKeysRequest(page_size=page_size, page_token=token)
            )
            yield from page.keys
            if not (token := page.next_page_token):
                return

    def get_key(self, key_id: str) -> key_pb2.ApiKey:
        return self._call("GetKey", org_service_pb2.GetKeyRequest(id=key_id))

    def revoke_key(self, key_id: str) -> key_pb2.ApiKey:
        """Revoke a key: its next call, through any service, is refused."""
        return self._call("RevokeKey", org_service_pb2.RevokeKeyRequest(id=key_id))

    def rotate_key(self, key_id: str) -> key_pb2.ApiKey:
        """A new secret for the key (in this answer only); the old one is refused from now."""
        return self._call("RotateKey", org_service_pb2.RotateKeyRequest(id=key_id))

    def audit(
        self,
        *,
        actor: str = "",
        action: str = "",
        since: dt.datetime | str | None = None,
        until: dt.datetime | str | None = None,
        page_size: int = 0,
    ) -> Iterator[audit_pb2.AuditEntry]:
        """The org's audit trail, newest first, page after page: only the key `actor`'s
        entries, only `action` (an event name, or a prefix ending in `*`), from `since`
        and before `until` when given."""
        token = ""
        while True:
            page = self._call(
                "ListAuditEntries",
                org_service_pb2.ListAuditEntriesRequest(
                    actor=actor,
                    action=action,
                    start_time=rfc3339(since),
                    end_time=rfc3339(until),
                    page_size=page_size,
                    page_token=token,
                ),
            )
            yield from page.entries
            if not (token := page.next_page_token):
                return

    def limits(self) -> limits_pb2.Limits:
        """The org's limits and its use of them, with this key's own scope and spend."""
        return self._call("GetLimits", org_service_pb2.GetLimitsRequest())
