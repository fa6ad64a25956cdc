"""Upload and download throughput through the whole path a user takes: grant from the
gateway, PUT straight to the object store (SSE-C), read-back confirmation (the rows
checked as a dataset), presigned GET with verification — against one stack started for
the run, each beside a bare S3 PUT and GET of the same size on the same object store (no
grant, no SSE-C, no check), the runs of the two taken in turn. An upload's figure runs
until it is confirmed, as a bare PUT's runs until the store answers; its note splits it
into sending the bytes and confirming them. Each run uploads new rows: an upload the org
holds already sends nothing.

    python bench/artifacts.py [--sizes 1,16,64] (MiB) [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, report, s3_seconds
from bench.stack import running
from infra.objectstore import credentials
from trainyard.sdk import Client


def rows(size: int) -> bytes:
    """About `size` bytes of chat rows, incompressible (an upload is checked as a dataset,
    so the figure includes reading it back as one)."""
    line = b'{"messages": [{"role": "user", "content": "%s"}, {"role": "assistant", "content": "%s"}]}\n'
    out = bytearray()
    while len(out) < size:
        out += line % (os.urandom(1024).hex().encode(), os.urandom(1024).hex().encode())
    return bytes(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,16,64", help="object sizes in MiB")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with (
        running() as (ends, keys, config),
        Client(ends.gateway_url, keys["member"]) as client,
        tempfile.TemporaryDirectory() as work,
    ):
        access, secret, _ = credentials(config.home)
        for mib in (int(s) for s in args.sizes.split(",")):
            upload, sending, confirm, download, bare_put, bare_get = [], [], [], [], [], []
            for run in range(args.runs):
                data = rows(mib * 1024 * 1024)
                put, got = s3_seconds(ends.s3_endpoint, access, secret, config.s3_bucket, data)
                bare_put.append(mib / put)
                bare_get.append(mib / got)
                source = Path(work) / f"blob-{mib}-{run}"
                source.write_bytes(data)
                marks: dict[str, float] = {}

                def progress(done: int, total: int, marks: dict[str, float] = marks) -> None:
                    if done >= total:
                        marks.setdefault("sent", time.perf_counter())

                started = time.perf_counter()
                artifact = client.upload(source, progress=progress)
                confirmed = time.perf_counter()
                sent = marks.get("sent", confirmed)
                client.download(artifact.sha256, Path(work) / f"back-{mib}-{run}")
                downloaded = time.perf_counter()
                upload.append(mib / (confirmed - started))
                sending.append(mib / (sent - started))
                confirm.append(confirmed - sent)
                download.append(mib / (downloaded - confirmed))
            report(
                Figure(
                    "artifacts", f"upload to confirmed, {mib} MiB", "MiB/s", upload,
                    f"bare S3 PUT, {mib} MiB", "MiB/s", bare_put,
                    note=f"bytes sent at {statistics.median(sending):.1f} MiB/s, then confirmed "
                    f"(rows read back) in {statistics.median(confirm):.2f} s",
                )
            )  # fmt: skip
            report(
                Figure(
                    "artifacts", f"download, {mib} MiB", "MiB/s", download,
                    f"bare S3 GET, {mib} MiB", "MiB/s", bare_get,
                )
            )  # fmt: skip


if __name__ == "__main__":
    main()
