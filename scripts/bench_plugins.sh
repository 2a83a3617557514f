#!/usr/bin/env bash
# Issue 4's speed target: the plugin host's overhead per plugin call on a graph of 100,000
# nodes is within 2x the time of one parse plus one serialization of that graph.
#
# usage: scripts/bench_plugins.sh [NODES]
#
# Runs crates/grappler/examples/bench_host.rs (release): the whole host pass over a MetaGraphDef
# with one plugin that returns a copy of its input (examples/echo_plugin.c), best of 7, minus
# the plugin's own copy (one malloc + memcpy of the serialized graph, timed separately); then the
# same with --isolate (the plugin in a worker process, the graph over pipes both ways). The
# reference (parse + serialize) is prost's, the same code the host uses.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
nodes="${1:-100000}"
cargo run --quiet --release -p unbound-grappler --example bench_host -- "$nodes"
