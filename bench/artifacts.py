"""Upload and download throughput through the whole path a user takes: grant from the
gateway, PUT straight to the object store (SSE-C), read-back confirmation, presigned GET
with verification — against one stack started for the run.

    python bench/artifacts.py [--sizes 1,16,64] (MiB)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from infra.stack import Stack, ensure_key
from services.core.config import Config
from trainyard.sdk import Client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,16,64", help="object sizes in MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        config = Config.from_env({"TRAINYARD_HOME": home, "TRAINYARD_GATEWAY_PORT": "0"})
        with open(Path(home) / "stack.log", "w") as log:
            stack = Stack(config, output=log)
            try:
                ends = stack.start()
                key = ensure_key(
                    config, config.home / "bench.key", org="bench", role="member", label="bench"
                )
                print(
                    f"{'size MiB':>9} {'upload MiB/s':>13} {'confirm s':>10} {'download MiB/s':>15}"
                )
                with Client(ends.gateway_url, key) as client:
                    for mib in (int(s) for s in args.sizes.split(",")):
                        source = Path(home) / f"blob-{mib}"
                        source.write_bytes(os.urandom(mib * 1024 * 1024))
                        marks: dict[str, float] = {}

                        def progress(
                            done: int, total: int, marks: dict[str, float] = marks
                        ) -> None:
                            if done >= total:
                                marks.setdefault("sent", time.perf_counter())

                        started = time.perf_counter()
                        artifact = client.upload(source, progress=progress)
                        confirmed = time.perf_counter()
                        sent = marks.get("sent", confirmed)
                        client.download(artifact.sha256, Path(home) / f"back-{mib}")
                        downloaded = time.perf_counter()
                        print(
                            f"{mib:>9} {mib / (sent - started):>13.1f} {confirmed - sent:>10.2f} "
                            f"{mib / (downloaded - confirmed):>15.1f}"
                        )
            finally:
                stack.stop()


if __name__ == "__main__":
    main()
