#!/usr/bin/env bash
# Regenerates the Python stubs under trainyard/, Envoy's descriptor set and the REST
# surface's OpenAPI document (gateway/openapi.json) from proto/.
# With --check, fails when the committed files differ from a fresh generation.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WKT=$("$PY" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')
mapfile -t PROTOS < <(cd proto && find trainyard -name '*.proto' | LC_ALL=C sort)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$PY" -m grpc_tools.protoc -I proto -I third_party/googleapis -I "$WKT" \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${PROTOS[@]}"
mkdir -p "$out/gateway"
# Envoy answers errors with an empty body unless status and error_details are in the set.
"$PY" -m grpc_tools.protoc -I proto -I third_party/googleapis -I "$WKT" \
  --include_imports --include_source_info -o "$out/gateway/trainyard.binpb" \
  "${PROTOS[@]}" google/rpc/status.proto google/rpc/error_details.proto
# The REST surface as OpenAPI 3.1, from that descriptor set and the status table.
"$PY" -m gateway.openapi --descriptor "$out/gateway/trainyard.binpb" --output "$out/gateway/openapi.json"

generated() { (cd "$1" && find trainyard gateway -type f \( -name '*_pb2*.py' -o -name '*_pb2.pyi' -o -name '*.binpb' -o -name openapi.json \) | LC_ALL=C sort); }

if [[ "${1:-}" == "--check" ]]; then
  fresh=$(generated "$out"); committed=$(generated .)
  status=0
  if [[ "$fresh" != "$committed" ]]; then
    echo "generated files added or removed:"; diff <(echo "$fresh") <(echo "$committed") || true; status=1
  fi
  for f in $fresh; do
    cmp -s "$out/$f" "$f" 2>/dev/null || { echo "stale generated file: $f"; status=1; }
  done
  [[ $status == 0 ]] && echo "generated code is current"
  exit $status
fi

while read -r f; do rm -f "$f"; done < <(generated .)
(cd "$out" && find trainyard gateway -type f) | while read -r f; do
  mkdir -p "$(dirname "$f")"; cp "$out/$f" "$f"
done
for d in $(cd "$out" && find trainyard -type d); do [[ -f "$d/__init__.py" ]] || : > "$d/__init__.py"; done
echo "generated ${#PROTOS[@]} protos"
