"""What a claiming executor offers (HIP-1333 §5), and whether a job fits it.

ClaimService parses and keeps it (`ExecutorRow.offer`, what `Offer.to_json` wrote);
JobService reads it back with `Offer.from_json` to tell where a job would run."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from services.core import errors
from services.core.wakeups import claimable_topic
from trainyard.claim.v1 import task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import Catalog

DEVICE_KINDS = ("cuda", "rocm", "metal", "vulkan", "cpu")
MACHINE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
_WORD = re.compile(r"^[A-Za-z0-9._/-]{1,128}$")


def protections(protect: job_pb2.Protection) -> tuple[str, ...]:
    """What an executor's `supports.protect` must hold to run a job protecting this
    (HIP-1333 §5's words): `projection` and `distillation` where the job asks for them.
    Suites alone are graded, not trained against, so they need neither."""
    needs = []
    if protect.HasField("projection"):
        needs.append("projection")
    if protect.distillation:
        needs.append("distillation")
    return tuple(needs)


@dataclasses.dataclass(frozen=True)
class Offer:
    """What a claiming executor is and runs."""

    machine: str
    platform: bool
    bases: tuple[str, ...]
    devices: tuple[str, ...]
    adaptations: tuple[str, ...]
    outputs: tuple[str, ...]
    protect: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    # Training clients it can hold at once; 0 serves none.
    clients: int = 0
    # Tasks it runs at once (its hello's `slots`), which a queue's estimate fills.
    slots: int = 1

    @classmethod
    def parse(
        cls,
        machine: str,
        platform: bool,
        bases: Iterable[str],
        devices: Iterable[str],
        supports: task_pb2.Supports,
        clients: int = 0,
        slots: int = 1,
    ) -> Offer:
        if not MACHINE.match(machine):
            raise errors.ValidationError("machine", "must be a machine name")
        devices = tuple(devices)
        if not 1 <= len(devices) <= 64 or any(d not in DEVICE_KINDS for d in devices):
            raise errors.ValidationError(
                "devices",
                "must list 1 to 64 of cuda, rocm, metal, vulkan, cpu",
                metadata={"supported": ",".join(DEVICE_KINDS)},
            )
        words = [
            *bases,
            *supports.adaptations,
            *supports.outputs,
            *supports.protect,
            *supports.terms,
        ]
        if len(words) > 256 or any(not _WORD.match(w) for w in words):
            raise errors.ValidationError("supports", "must hold short names")
        if not 0 <= clients <= 64:
            raise errors.ValidationError("clients", "must be between 0 and 64")
        return cls(
            machine,
            platform,
            tuple(bases),
            devices,
            tuple(supports.adaptations),
            tuple(supports.outputs),
            tuple(supports.protect),
            tuple(supports.terms),
            clients,
            # As the stream runs them: 1 when unset; a queue's estimate reads no more.
            min(max(1, slots), 256),
        )

    def with_bases(self, bases: Iterable[str]) -> Offer:
        """The same offer training `bases` instead (an executor's announcement)."""
        bases = tuple(bases)
        if len(bases) > 256 or any(not _WORD.match(b) for b in bases):
            raise errors.ValidationError("bases", "must hold short names")
        return dataclasses.replace(self, bases=bases)

    def claimable(self, org: str) -> str:
        """The wake-up topic of the tasks this executor may claim (`claim_candidates`):
        the platform's, or its org's named for its machine."""
        return claimable_topic(org, "" if self.platform else self.machine)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Offer:
        """The offer `to_json` wrote (a stored row's): a list it lacks is empty, as is
        the count of clients; its slots are 1."""
        return cls(
            machine=str(data.get("machine", "")),
            platform=bool(data.get("platform", False)),
            bases=tuple(data.get("bases", ())),
            devices=tuple(data.get("devices", ())),
            adaptations=tuple(data.get("adaptations", ())),
            outputs=tuple(data.get("outputs", ())),
            protect=tuple(data.get("protect", ())),
            terms=tuple(data.get("terms", ())),
            clients=int(data.get("clients", 0)),
            slots=max(1, int(data.get("slots", 1))),
        )

    def device_for(self, spec: job_pb2.Job, catalog: Catalog) -> str | None:
        """The device kind a job with this frozen spec runs on here, or None when this
        executor cannot run it at all."""
        if spec.base_model not in self.bases or spec.adaptation.mode not in self.adaptations:
            return None
        if spec.output.kind not in self.outputs:
            return None
        if any(term.kind not in self.terms for term in spec.objective.terms):
            return None
        if any(need not in self.protect for need in protections(spec.protect)):
            return None
        base = catalog.get(spec.base_model)
        allowed = list(spec.resources.devices) or (base.devices if base else DEVICE_KINDS)
        return next((d for d in self.devices if d in allowed), None)
