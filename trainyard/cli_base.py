"""What the `trainyard` commands share: the client they call through, how a refusal is
printed (its stable code, its message and its detail, then exit 1), how answers are
printed, and the exit codes `trainyard --help` lists."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from trainyard import sdk
from trainyard.rest import NULLABLE

# Exit codes, as `trainyard --help` lists them.
REFUSED, JOB_UNSUCCESSFUL, UNREACHABLE = 1, 3, 4


@contextmanager
def client(ctx: click.Context) -> Iterator[sdk.Client]:
    """A client for the command; an API error ends the command with its reason."""
    made = sdk.Client(
        ctx.obj["url"], ctx.obj["api_key"], org=ctx.obj.get("org") or None, tls=ctx.obj.get("tls")
    )
    try:
        yield made
    except sdk.TrainyardError as exc:
        if not exc.answered and "CERTIFICATE_VERIFY_FAILED" in exc.message:
            click.echo(
                f"error: the gateway's certificate at {ctx.obj['url']} did not verify; give "
                "the CA it was issued by with --ca-file / TRAINYARD_CA_FILE (`make up "
                "TLS=self-signed` says which file)",
                err=True,
            )
            sys.exit(UNREACHABLE)
        if not exc.answered:
            click.echo(
                f"error: no gateway answered at {ctx.obj['url']}; `make up` starts the stack "
                "(or set --url / TRAINYARD_URL to where it runs)",
                err=True,
            )
            sys.exit(UNREACHABLE)
        click.echo("\n".join(refusal(exc)), err=True)
        sys.exit(REFUSED)
    finally:
        made.close()


def refusal(exc: sdk.TrainyardError) -> list[str]:
    """A refusal in one or two plain lines: its code and message, then its detail — the
    error's metadata (field, supported values, limits, line; all safe to show) and any
    field violation the metadata does not already name."""
    lines = [f"error: {exc.reason}: {exc.message}" if exc.message else f"error: {exc.reason}"]
    meta = exc.metadata
    detail = [f"field: {meta['field']}"] if "field" in meta else []
    detail += [
        f"{k}: {(v.replace(',', ', ') if k == 'supported' else v) or 'none'}"
        for k, v in sorted(meta.items())
        if k != "field"
    ]
    detail += [f"{f}: {d}" for f, d in exc.violations if f != meta.get("field")]
    if detail:
        lines.append("  " + "; ".join(detail))
    return lines


# Byte sizes and parameter counts are proto doubles so REST writes them as JSON numbers;
# Python's JSON would print them as `17000.0`, so the CLI writes them as the gateway does.
_WHOLE = frozenset({"size", "parameters"})


def whole(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: int(v) if k in _WHOLE and isinstance(v, float) and v.is_integer() else whole(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [whole(v) for v in value]
    return value


_WIDE = frozenset({FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64})


def numbers(message: Message, as_dict: dict[str, Any]) -> dict[str, Any]:
    """`as_dict` (`message` as proto JSON) with each 64-bit integer a number and each of
    the contract's `null`s written, as the REST face writes them: amounts, counters and
    figures a device cannot give print as they read there."""
    nulls = NULLABLE.get(message.DESCRIPTOR.full_name, ())
    for field in message.DESCRIPTOR.fields:
        if field.name in nulls and not message.HasField(field.name):
            as_dict[field.name] = None
        if field.name not in as_dict or as_dict[field.name] is None:
            continue
        value, read = getattr(message, field.name), as_dict[field.name]
        if field.cpp_type in _WIDE:
            as_dict[field.name] = [int(v) for v in read] if isinstance(read, list) else int(read)
        elif field.message_type is None or field.message_type.full_name.startswith("google."):
            continue
        elif field.message_type.GetOptions().map_entry:
            inner = field.message_type.fields_by_name["value"]
            for key in read:
                if inner.cpp_type in _WIDE:
                    read[key] = int(read[key])
                elif inner.message_type and not inner.message_type.full_name.startswith("google."):
                    numbers(value[key], read[key])  # the contract's maps have text keys
        elif isinstance(read, list):
            for one, each in zip(value, read, strict=True):
                numbers(one, each)
        else:
            numbers(value, read)
    return as_dict


def print_message(message: Message) -> None:
    as_dict = json_format.MessageToDict(message, preserving_proto_field_name=True)
    click.echo(json.dumps(whole(numbers(message, as_dict)), indent=2))


def dollars(micro_cents: int) -> str:
    sign = "-" if micro_cents < 0 else ""
    return f"{sign}${abs(micro_cents) / 10**8:,.4f}"


def exact_dollars(micro_cents: int) -> str:
    """An amount to its last micro-cent, as a ledger entry is kept: four decimals at least,
    more where a sub-cent amount needs them (`-$0.00004167`, never `-$0.0000`)."""
    sign = "-" if micro_cents < 0 else ""
    whole, part = divmod(abs(micro_cents), 10**8)
    decimals = f"{part:08d}".rstrip("0")
    return f"{sign}${whole:,}.{decimals:0<4}"


def bar(label: str) -> Progress:
    """A transfer's progress on stderr, shown only on a terminal."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        disable=not sys.stderr.isatty(),
    )
