"""Who may call what: one default-deny table naming, for every method of every service,
the roles that may call it.

The interceptor refuses a method this table does not name, so a new RPC is callable by
nobody until it is placed here, and `tests/unit/test_roles.py` fails until it is. The
org a call acts in is settled apart from this (`auth.authenticate`): member, admin and
executor keys act in their own org only; platform and operator keys may name another.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# An org's people: its members and admins in their own org, the operator in any org.
ORG_USERS = frozenset({"member", "admin", "operator"})
# An org's admins in their own org, and the operator in any.
ORG_ADMINS = frozenset({"admin", "operator"})
# The machines that train: an org's executors and the platform's (whose key is nothing
# more, so a trainer that escapes into its executor reaches no service's internal calls).
MACHINES = frozenset({"executor", "platform-machine", "platform"})
# The services calling each other through the gateway, acting in the work's org.
INTERNAL = frozenset({"platform"})
# Operations on the whole deployment rather than on one org's work.
DEPLOYMENT = frozenset({"operator"})
# An org's administrators, in their own org, and the operator in any: its keys and trail.
ORG_ADMINS = frozenset({"admin", "operator"})
# A method whose request carries its own credential (a download URL's sealed token): no
# key is asked, and the method answers only what that credential names.
TOKEN_HOLDERS = frozenset({"token holder"})

_TABLE: dict[str, dict[str, frozenset[str]]] = {
    "trainyard.job.v1.JobService": {
        "CreateJob": ORG_USERS,
        "GetJob": ORG_USERS,
        "ListJobs": ORG_USERS,
        "CancelJob": ORG_USERS,
        "RetryJob": ORG_USERS,
        "PublishJob": ORG_USERS,
        "ListJobEvents": ORG_USERS,
        "WatchJob": ORG_USERS,
        "ListJobMetrics": ORG_USERS,
        "ListJobAttempts": ORG_USERS,
        "GetAttemptLog": ORG_USERS,
        "ListJobDatasetItems": ORG_USERS,
        "GetJobDatasetItem": ORG_USERS,
        "ListModels": ORG_USERS,
        "EstimateJob": ORG_USERS,
        "CreateDataSource": ORG_USERS,
        "ListDataSources": ORG_USERS,
        "DeleteDataSource": ORG_USERS,
        # Every org's publications at once: the platform's own read (HIP-1333 §9).
        "ListPublished": INTERNAL,
    },
    "trainyard.org.v1.OrgService": {
        "CreateKey": ORG_ADMINS,
        "ListKeys": ORG_ADMINS,
        "GetKey": ORG_ADMINS,
        "RevokeKey": ORG_ADMINS,
        "RotateKey": ORG_ADMINS,
        # The trail names every key's work in the org: its admins read it, members do not.
        "ListAuditEntries": ORG_ADMINS,
        "GetLimits": ORG_USERS,
    },
    "trainyard.client.v1.ClientService": {
        # A client holds a model in engine memory every org shares, so only the operator
        # creates one (HIP-1333 §7); the org's users then work the client in their org.
        "CreateTrainingClient": DEPLOYMENT,
        "ListTrainingClients": ORG_USERS,
        "GetTrainingClient": ORG_USERS,
        "DeleteTrainingClient": ORG_USERS,
        "RunForwardBackward": ORG_USERS,
        "RunOptimStep": ORG_USERS,
        "SampleTrainingClient": ORG_USERS,
        "SaveTrainingClientWeights": ORG_USERS,
        "GetFuture": ORG_USERS,
    },
    "trainyard.claim.v1.ClaimService": {
        "Connect": MACHINES,
        "ClaimTask": MACHINES,
        "ReportTask": MACHINES,
        "RegisterTaskArtifact": MACHINES,
        "ReadTaskInput": MACHINES,
    },
    "trainyard.artifact.v1.ArtifactService": {
        "CreateArtifact": ORG_USERS,
        "ListArtifacts": ORG_USERS,
        # Also the platform's: ClaimService answers an executor's ReadTaskInput with the
        # object's download URL read here, acting in the task's org. It grants nothing
        # ReadArtifact does not; an internal method for it would let this go back.
        "GetArtifact": ORG_USERS | INTERNAL,
        "DeleteArtifact": ORG_USERS,
        # Keeping an object is as much the org's people's as deleting it.
        "PinArtifact": ORG_USERS,
        "UnpinArtifact": ORG_USERS,
        "ExtendArtifact": ORG_USERS,
        "ConfirmArtifact": ORG_USERS,
        "ListJobArtifacts": ORG_USERS,
        "DownloadArtifact": TOKEN_HOLDERS,
        "DeleteJobArtifact": ORG_USERS,
        "GetJobProvenance": ORG_USERS,
        "GrantJobArtifact": INTERNAL,
        "ConfirmJobArtifact": INTERNAL,
        "ReadArtifact": INTERNAL,
        "RecordProvenance": INTERNAL,
        "SweepArtifacts": DEPLOYMENT,
    },
    "trainyard.meter.v1.MeterService": {
        "ListRates": ORG_USERS,
        "GetWallet": ORG_USERS,
        "ListLedgerEntries": ORG_USERS,
        "SetRate": DEPLOYMENT,
        "CreditWallet": DEPLOYMENT,
        # An org's admins cap what its work may spend; the operator may too.
        "SetSpendCap": ORG_ADMINS,
        "EstimatePrice": INTERNAL,
        "SweepStorage": DEPLOYMENT,
    },
    "trainyard.webhook.v1.WebhookService": {
        # An org's admins decide where its events go (and the operator may); its people
        # read the endpoints and their delivery logs.
        "CreateWebhook": ORG_ADMINS,
        "ListWebhooks": ORG_USERS,
        "GetWebhook": ORG_USERS,
        "DeleteWebhook": ORG_ADMINS,
        "ListWebhookDeliveries": ORG_USERS,
        "RedeliverWebhookDelivery": ORG_ADMINS,
    },
}

TABLE: Mapping[str, Mapping[str, frozenset[str]]] = MappingProxyType(
    {service: MappingProxyType(methods) for service, methods in _TABLE.items()}
)


def for_service(full_name: str) -> Mapping[str, frozenset[str]]:
    """A service's methods by short name; a service not in the table allows nothing."""
    return TABLE.get(full_name, MappingProxyType({}))


def for_services(*full_names: str) -> Mapping[str, frozenset[str]]:
    """The methods of several services one process serves, by short name, as the
    interceptor looks them up; two services sharing a method name cannot share a process."""
    merged: dict[str, frozenset[str]] = {}
    for full_name in full_names:
        table = for_service(full_name)
        if shared := merged.keys() & table.keys():
            raise ValueError(f"{full_name} repeats method names: {sorted(shared)}")
        merged.update(table)
    return MappingProxyType(merged)


def allowed(method: str) -> frozenset[str]:
    """The roles that may call a full method path (`/pkg.Service/Method`); none if unnamed."""
    service, _, name = method.lstrip("/").partition("/")
    return for_service(service).get(name, frozenset())
