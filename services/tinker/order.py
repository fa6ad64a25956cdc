"""Request ids, and one model's calls handed on in the SDK's `seq_id` order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from services.tinker.refusals import Refused

# -- request ids ---------------------------------------------------------------------------
# A request id names what to read and how to answer it, so a poll needs nothing kept: a
# ClientService future (`fut_…`) with the kind of answer the SDK expects, or a model whose
# create the poll waits on. Tags: fb forward_backward, os optim_step, sm sample (pl: with
# prompt logprobs), sw save_weights, ss save_weights_for_sampler (se: without a name, with
# the sampler's number), cm a model created (create_model, load_weights), er a refusal
# named by its code.

ERRORS = {
    "gone": "The training client's executor went away; create a new training client.",
}


def rid(tag: str, value: str) -> str:
    return f"{tag}.{value}"


class Order:
    """One model's calls in the SDK's `seq_id` order: each waits for the one before it to
    be handed to ClientService, and a repeated `seq_id` answers the first's request id."""

    def __init__(self) -> None:
        self.next: int | None = None
        self.done: dict[int, str] = {}
        self.changed = asyncio.Condition()

    async def run(self, seq: int, submit: Callable[[], Awaitable[str]]) -> str:
        """The request id of the model's call `seq`, submitted once every call before it
        was; a client gone (its executor lost) answers a future that fails, as the SDK
        expects of a call that could not run."""
        async with self.changed:
            if seq in self.done:
                return self.done[seq]
            if self.next is None or seq < self.next:
                self.next = seq
            try:
                # Not `asyncio.wait_for`: on Python 3.11 it can drop a cancel (`woken`).
                async with asyncio.timeout(60):
                    await self.changed.wait_for(lambda: self.next == seq or seq in self.done)
            except TimeoutError:
                raise Refused(400, "A call before this one (by seq_id) never arrived.") from None
            if seq in self.done:
                return self.done[seq]
            try:
                request_id = await submit()
            except Refused as exc:
                if exc.reason != "CLIENT_GONE":
                    raise
                request_id = rid("er", "gone")
            finally:
                self.next = seq + 1
                self.changed.notify_all()
            self.done[seq] = request_id
            if len(self.done) > 4096:
                for old in sorted(self.done)[:2048]:
                    del self.done[old]
            return request_id
