"""`hf://` datasets online: huggingface_hub reaches the Hub that `HF_ENDPOINT` names (a
mirror served here on loopback), records the commit the revision resolved to, and what the
Hub refuses is a category (`revision`, `not_found`)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote

REPO = "acme/support"


MIRRORED = b'{"messages": [{"role": "user", "content": "mirrored"}]}\n'
COMMIT = "a" * 40


class _Mirror(http.server.BaseHTTPRequestHandler):
    """The Hub's resolve route for one dataset repository with one commit, and its
    refusals as the Hub words them (`X-Error-Code`)."""

    def _resolve(self) -> tuple[int, dict[str, str], bytes]:
        parts = unquote(self.path).split("/", 6)  # "", datasets, owner, name, resolve, rev, file
        if parts[1:3] != ["datasets", REPO.split("/")[0]] or parts[3] != REPO.split("/")[1]:
            return 404, {"X-Error-Code": "RepoNotFound"}, b""
        if parts[5] not in ("main", COMMIT):
            return 404, {"X-Error-Code": "RevisionNotFound"}, b""
        if parts[6] != "train/rows.jsonl":
            return 404, {"X-Error-Code": "EntryNotFound"}, b""
        etag = hashlib.sha256(MIRRORED).hexdigest()
        return 200, {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}, MIRRORED

    def _answer(self, with_body: bool) -> None:
        status, headers, body = self._resolve()
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def log_message(self, *args: object) -> None:
        pass


READ_EACH = """
import json, sys
from services.jobs import remote
from trainyard.job.v1 import job_pb2
answers = []
for uri in sys.argv[1:]:
    dataset = job_pb2.Dataset(uri=uri)
    try:
        remote.fetch(dataset, "acme", None)
        answers.append([dataset.resolved_revision, dataset.source_sha256])
    except remote.Unreadable as exc:
        answers.append(exc.category)
print(json.dumps(answers))
"""


def test_online_the_hub_is_the_mirror_hf_endpoint_names(tmp_path: Path) -> None:
    """A fresh process, as the JobService reads `HF_ENDPOINT` at its start."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_CACHE": str(tmp_path),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    uris = [
        f"hf://datasets/{REPO}@main/train/rows.jsonl",
        f"hf://datasets/{REPO}@v9/train/rows.jsonl",
        f"hf://datasets/{REPO}/train/other.jsonl",
        "hf://datasets/acme/elsewhere/rows.jsonl",
    ]
    try:
        done = subprocess.run(
            [sys.executable, "-c", READ_EACH, *uris],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    finally:
        server.shutdown()
    assert json.loads(done.stdout) == [
        [COMMIT, hashlib.sha256(MIRRORED).hexdigest()],
        "revision",
        "not_found",
        "not_found",
    ]
