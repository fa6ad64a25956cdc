"""Upload and download throughput through the whole path a user takes: grant from the
gateway, PUT straight to the object store (SSE-C), read-back confirmation (the rows
checked as a dataset), presigned GET
with verification — against one stack started for the run.

    python bench/artifacts.py [--sizes 1,16,64] (MiB)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.stack import running
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
    args = parser.parse_args()
    print(f"{'size MiB':>9} {'upload MiB/s':>13} {'confirm s':>10} {'download MiB/s':>15}")
    with (
        running() as (ends, keys, _),
        Client(ends.gateway_url, keys["member"]) as client,
        tempfile.TemporaryDirectory() as work,
    ):
        for mib in (int(s) for s in args.sizes.split(",")):
            source = Path(work) / f"blob-{mib}"
            source.write_bytes(rows(mib * 1024 * 1024))
            marks: dict[str, float] = {}

            def progress(done: int, total: int, marks: dict[str, float] = marks) -> None:
                if done >= total:
                    marks.setdefault("sent", time.perf_counter())

            started = time.perf_counter()
            artifact = client.upload(source, progress=progress)
            confirmed = time.perf_counter()
            sent = marks.get("sent", confirmed)
            client.download(artifact.sha256, Path(work) / f"back-{mib}")
            downloaded = time.perf_counter()
            print(
                f"{mib:>9} {mib / (sent - started):>13.1f} {confirmed - sent:>10.2f} "
                f"{mib / (downloaded - confirmed):>15.1f}"
            )


if __name__ == "__main__":
    main()
