#!/usr/bin/env bash
# Regenerates debug_graph_pb2.py from debug_graph.proto. We use protoc 25 (grpcio-tools 1.62)
# on purpose: its output has no runtime-version check, so it loads on protobuf 4.21 to 7.x.
set -euo pipefail
cd "$(dirname "$0")"
venv=$(mktemp -d)
python3 -m venv "$venv"
"$venv/bin/pip" install -q "grpcio-tools==1.62.*"
"$venv/bin/python" -m grpc_tools.protoc -I. --python_out=. debug_graph.proto
rm -rf "$venv"
