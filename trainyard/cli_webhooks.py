"""`trainyard webhooks create|list|get|delete|deliveries|redeliver`: an org's endpoints for
its events and their delivery logs."""

from __future__ import annotations

import click

from trainyard.cli_base import client, print_message
from trainyard.webhook.v1 import webhook_pb2


@click.group()
def webhooks() -> None:
    """Register endpoints for the org's events (admin keys), read their delivery logs and
    send a message again. Deliveries follow the Standard Webhooks specification."""


@webhooks.command("create")
@click.argument("url")
@click.option(
    "--event",
    "events",
    multiple=True,
    required=True,
    help=(
        "An event type to receive, repeated for more: job.succeeded, job.failed, "
        "job.cancelled, job.stopped, job.rejected, job.stalled, budget.threshold, "
        "spend_cap.threshold, artifact.expiring."
    ),
)
@click.option("--description", default="", help="A note for the org's people.")
@click.option(
    "--stalled-after", type=int, default=0, help="job.stalled: seconds of silence (900 when 0)."
)
@click.option(
    "--expiring-within",
    type=int,
    default=0,
    help="artifact.expiring: seconds of notice (86400 when 0).",
)
@click.option(
    "--threshold",
    "thresholds",
    type=int,
    multiple=True,
    help="A percent of a budget or cap to announce; repeat it (50, 80, 100 when none).",
)
@click.pass_context
def webhooks_create(
    ctx: click.Context,
    url: str,
    events: tuple[str, ...],
    description: str,
    stalled_after: int,
    expiring_within: int,
    thresholds: tuple[int, ...],
) -> None:
    """Register URL for the events; print the endpoint with its signing secret, shown this
    once."""
    with client(ctx) as api:
        made = api.create_webhook(
            url,
            events,
            description=description,
            stalled_after_seconds=stalled_after,
            expiring_within_seconds=expiring_within,
            thresholds_percent=thresholds,
        )
    print_message(made)
    click.echo("keep the secret: it is not shown again", err=True)


@webhooks.command("list")
@click.pass_context
def webhooks_list(ctx: click.Context) -> None:
    """List the org's endpoints, newest first: id, events, URL."""
    with client(ctx) as api:
        for hook in api.list_webhooks():
            click.echo(f"{hook.id}  {','.join(hook.events)}  {hook.url}")


@webhooks.command("get")
@click.argument("webhook_id")
@click.pass_context
def webhooks_get(ctx: click.Context, webhook_id: str) -> None:
    """Show one endpoint as JSON (never its secret)."""
    with client(ctx) as api:
        print_message(api.get_webhook(webhook_id))


@webhooks.command("delete")
@click.argument("webhook_id")
@click.pass_context
def webhooks_delete(ctx: click.Context, webhook_id: str) -> None:
    """Delete an endpoint and its delivery log."""
    with client(ctx) as api:
        api.delete_webhook(webhook_id)
    click.echo(f"{webhook_id}  deleted")


def _line(delivery: webhook_pb2.Delivery) -> str:
    code = delivery.last_status_code or "-"
    return (
        f"{delivery.id}  {delivery.status:<9} {delivery.event_type:<19} "
        f"attempts {delivery.attempts:<3} last {code} {delivery.last_error or '-'}  "
        f"{delivery.message_id}  {delivery.create_time.ToDatetime():%Y-%m-%dT%H:%M:%SZ}"
    )


@webhooks.command("deliveries")
@click.argument("webhook_id")
@click.option("--limit", default=25, show_default=True, help="At most this many deliveries.")
@click.option("--json", "as_json", is_flag=True, help="Each delivery as JSON, its payload too.")
@click.pass_context
def webhooks_deliveries(ctx: click.Context, webhook_id: str, limit: int, as_json: bool) -> None:
    """An endpoint's delivery log, newest first: id, status, event, attempts, the last HTTP
    status and error, the message id (`webhook-id`) and when it was queued."""
    with client(ctx) as api:
        for count, delivery in enumerate(api.webhook_deliveries(webhook_id), start=1):
            if as_json:
                print_message(delivery)
            else:
                click.echo(_line(delivery))
            if count >= limit:
                break


@webhooks.command("redeliver")
@click.argument("webhook_id")
@click.argument("delivery_id")
@click.pass_context
def webhooks_redeliver(ctx: click.Context, webhook_id: str, delivery_id: str) -> None:
    """Send a delivery's message again, with the same webhook-id, as a new delivery."""
    with client(ctx) as api:
        click.echo(_line(api.redeliver(webhook_id, delivery_id)))
