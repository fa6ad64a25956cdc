"""`trainyard executor`: run an executor on this machine; `trainyard models export`: write
a built-in base to disk. The `trainyard` command finds them by entry point."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
from pathlib import Path

import click
import grpc

from executor.agent.agent import Agent, refusal
from executor.agent.config import AgentConfig
from executor.agent.disk import GiB, base_bytes
from trainyard import logs
from trainyard.exposition import metrics_port_file
from trainyard.ports import publish_port
from trainyard.private import private
from trainyard.training.catalog import Catalog


@click.command()
@click.option("--machine", help="This machine's name (the host name by default).")
@click.option(
    "--devices", default="cpu", show_default=True, help="One entry per accelerator, e.g. cpu,cpu."
)
@click.option(
    "--platform", is_flag=True, help="Claim any org's jobs that name no machine (platform key)."
)
@click.option("--slots", default=1, show_default=True, help="Tasks run at once.")
@click.option(
    "--clients",
    default=0,
    show_default=True,
    help="Training clients held at once, each in an engine process; 0 serves none.",
)
@click.option(
    "--trainer",
    envvar="TRAINYARD_TRAINER",
    default="executor.train",
    show_default=True,
    help="The trainer module (executor.scripted emits events without a model).",
)
@click.option(
    "--warm/--no-warm",
    default=True,
    show_default=True,
    help="Keep a trainer process ready with its imports done, so a task starts in it.",
)
@click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path), help="Where tasks run."
)
@click.option(
    "--keep-work",
    is_flag=True,
    help="Keep every task's work directory, its data in the clear included (for debugging).",
)
@click.option(
    "--failed-work-hours",
    envvar="TRAINYARD_FAILED_WORK_HOURS",
    default=24.0,
    show_default=True,
    help="How long a failed task's log and plan are kept for diagnosis.",
)
@click.option(
    "--work-budget-gib",
    envvar="TRAINYARD_EXECUTOR_WORK_BUDGET_GIB",
    default=0.0,
    show_default=True,
    help="The most the work directory may hold; a task that would pass it is refused (0: the disk's free space alone).",
)
@click.option(
    "--disk-margin-gib",
    envvar="TRAINYARD_EXECUTOR_DISK_MARGIN_GIB",
    default=2.0,
    show_default=True,
    help="Free space a task needs beyond its base's size, else it is refused.",
)
@click.option(
    "--client-cert",
    envvar="TRAINYARD_CLIENT_CERT",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A PEM client certificate shown to an https:// gateway that asks executors for "
    "one (mutual TLS), besides the key.",
)
@click.option(
    "--client-key",
    envvar="TRAINYARD_CLIENT_KEY",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The client certificate's PEM private key.",
)
@click.pass_context
def executor(
    ctx: click.Context,
    machine: str | None,
    devices: str,
    platform: bool,
    slots: int,
    clients: int,
    trainer: str,
    warm: bool,
    work_dir: Path | None,
    keep_work: bool,
    failed_work_hours: float,
    work_budget_gib: float,
    disk_margin_gib: float,
    client_cert: Path | None,
    client_key: Path | None,
) -> None:
    """Run an executor: claim tasks, run their trainers, report, obey cancels."""
    if bool(client_cert) != bool(client_key):
        raise click.UsageError("--client-cert and --client-key go together")
    private()  # its work directories hold an org's dataset and outputs in the clear
    logs.configure("executor", fmt=os.environ.get("TRAINYARD_LOG_FORMAT", "auto"))
    home = Path(os.environ.get("TRAINYARD_HOME") or ".trainyard").resolve()
    journal = os.environ.get("TRAINYARD_EXECUTOR_JOURNAL")
    catalog = Catalog.from_env(os.environ)
    config = AgentConfig(
        url=ctx.obj["url"],
        tls=dataclasses.replace(ctx.obj["tls"], cert_file=client_cert, key_file=client_key),
        bases=tuple(catalog.names),
        bases_now=lambda: tuple(catalog.names),
        api_key=ctx.obj["api_key"],
        devices=tuple(d.strip() for d in devices.split(",") if d.strip()),
        platform=platform,
        slots=slots,
        clients=max(0, clients),
        trainer=trainer,
        warm=warm,
        work_root=work_dir or home / "executor",
        journal=Path(journal) if journal else None,
        keep_work=keep_work,
        failed_work_seconds=max(0.0, failed_work_hours) * 3600,
        work_budget_bytes=int(max(0.0, work_budget_gib) * GiB),
        disk_margin_bytes=int(max(0.0, disk_margin_gib) * GiB),
        base_size=lambda name: base_bytes(catalog.get(name)),
    )
    if machine:
        config.machine = machine
    agent = Agent(config)
    # The supervisor asks for metrics on loopback; an executor started by hand serves none.
    if port := os.environ.get("TRAINYARD_METRICS_PORT", "").strip():
        exporter = agent.metrics.serve(int(port))
        publish_port(metrics_port_file(home / "run", "executor"), exporter.port)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    logging.getLogger(__name__).info("executor %s connecting to %s", config.machine, config.url)
    try:
        agent.run()
    except KeyboardInterrupt:
        agent.stop()
    except grpc.RpcError as exc:
        # Refused for good (its key, or a certificate the gateway asks for): said, not raised.
        raise click.ClickException(f"the gateway refused this executor: {refusal(exc)}") from None


@click.command("export")
@click.argument("name")
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new or empty directory to write the base into.",
)
def export(name: str, out: Path) -> None:
    """Write the built-in base NAME to a directory and print its base_sha256.

    The fixture is written as a Hugging Face model directory (config, safetensors, a
    tokenizer with its chat template), so a job's LoRA adapter or capability applies to it
    outside Trainyard. base_sha256 is the digest a job's result names, and the sha256 of
    the directory's model.safetensors. Built here from code: no gateway is asked.
    """
    from executor.models import bases  # torch and transformers: loaded for this command only

    try:
        digest = bases.export(name, out)
    except bases.CannotExport as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(json.dumps({"base_model": name, "base_sha256": digest, "dir": str(out)}, indent=2))
