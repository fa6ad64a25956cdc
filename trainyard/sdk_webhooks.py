"""The SDK's webhook calls: register an endpoint (its signing secret answered once), list,
read and delete endpoints, page a delivery log and redeliver a message.
`trainyard.sdk.Client` has them all.

Verify what arrives with the Standard Webhooks library of your language, e.g. in Python
`standardwebhooks.webhooks.Webhook(secret).verify(body, headers)`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from trainyard.sdk_base import Calls
from trainyard.webhook.v1 import webhook_pb2, webhook_service_pb2


class WebhookMethods(Calls):
    """The webhook calls of `Client`."""

    def create_webhook(
        self,
        url: str,
        events: Sequence[str],
        *,
        description: str = "",
        stalled_after_seconds: int = 0,
        expiring_within_seconds: int = 0,
        thresholds_percent: Sequence[int] = (),
    ) -> webhook_pb2.Webhook:
        """Register an endpoint for `events`; the answer's `secret` is shown this once."""
        request = webhook_service_pb2.CreateWebhookRequest(
            url=url,
            events=list(events),
            description=description,
            stalled_after_seconds=stalled_after_seconds,
            expiring_within_seconds=expiring_within_seconds,
            thresholds_percent=list(thresholds_percent),
        )
        return self._call("CreateWebhook", request)  # type: ignore[no-any-return]

    def list_webhooks(self) -> Iterator[webhook_pb2.Webhook]:
        """The org's endpoints, newest first, page after page."""
        token = ""
        while True:
            page = self._call(
                "ListWebhooks", webhook_service_pb2.ListWebhooksRequest(page_token=token)
            )
            yield from page.webhooks
            if not (token := page.next_page_token):
                return

    def get_webhook(self, webhook_id: str) -> webhook_pb2.Webhook:
        request = webhook_service_pb2.GetWebhookRequest(id=webhook_id)
        return self._call("GetWebhook", request)  # type: ignore[no-any-return]

    def delete_webhook(self, webhook_id: str) -> bool:
        request = webhook_service_pb2.DeleteWebhookRequest(id=webhook_id)
        return bool(self._call("DeleteWebhook", request).deleted)

    def webhook_deliveries(self, webhook_id: str) -> Iterator[webhook_pb2.Delivery]:
        """An endpoint's delivery log, newest first, page after page."""
        token = ""
        while True:
            page = self._call(
                "ListWebhookDeliveries",
                webhook_service_pb2.ListWebhookDeliveriesRequest(id=webhook_id, page_token=token),
            )
            yield from page.deliveries
            if not (token := page.next_page_token):
                return

    def redeliver(self, webhook_id: str, delivery_id: str) -> webhook_pb2.Delivery:
        """Send a delivery's message again (the same `webhook-id`), as a new delivery."""
        request = webhook_service_pb2.RedeliverWebhookDeliveryRequest(
            id=webhook_id, delivery_id=delivery_id
        )
        return self._call("RedeliverWebhookDelivery", request)  # type: ignore[no-any-return]
