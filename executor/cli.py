"""`trainyard executor`: run an executor on this machine. The `trainyard` command finds it
by entry point."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import click

from executor.agent import Agent, AgentConfig
from trainyard import logs
from trainyard.exposition import metrics_port_file
from trainyard.ports import publish_port
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
@click.pass_context
def executor(
    ctx: click.Context, machine: str | None, devices: str, platform: bool, slots: int,
    clients: int, trainer: str, warm: bool, work_dir: Path | None,
) -> None:  # fmt: skip
    """Run an executor: claim tasks, run their trainers, report, obey cancels."""
    logs.configure("executor", fmt=os.environ.get("TRAINYARD_LOG_FORMAT", "auto"))
    home = Path(os.environ.get("TRAINYARD_HOME") or ".trainyard").resolve()
    journal = os.environ.get("TRAINYARD_EXECUTOR_JOURNAL")
    config = AgentConfig(
        url=ctx.obj["url"],
        bases=tuple(Catalog.from_env(os.environ).names),
        api_key=ctx.obj["api_key"],
        devices=tuple(d.strip() for d in devices.split(",") if d.strip()),
        platform=platform,
        slots=slots,
        clients=max(0, clients),
        trainer=trainer,
        warm=warm,
        work_root=work_dir or home / "executor",
        journal=Path(journal) if journal else None,
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
