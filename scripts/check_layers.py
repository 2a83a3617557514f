#!/usr/bin/env python3
"""Checks the workspace's layering (ARCHITECTURE.md): no crate depends on one above it, and the
pure-Rust crates build without a C compiler.

    python3 scripts/check_layers.py

Reads `cargo metadata`. Every workspace package must be in LAYERS; a normal or build dependency
on another workspace package must point to a strictly lower layer (dev-dependencies are free:
tests may use anything). The crates in NO_C_COMPILER must not have the `cc` crate anywhere in
their normal or build dependency tree. Exits 1 naming every violation.
"""

import json
import subprocess
import sys

# Bottom to top. A crate may depend only on crates of lower layers.
LAYERS = [
    ["unbound-proto", "unbound-grappler-abi"],
    ["unbound-io"],
    ["unbound-records", "unbound-wire"],
    ["unbound-chunked", "unbound-canonical"],
    ["unbound-bundle", "unbound-graph"],
    ["unbound-savedmodel"],
    ["unbound-grappler", "unbound-grappler-sdk", "unbound-dtensor", "unbound-tpu",
     "unbound-externalize"],
    ["unbound-plugin-prune-identity", "unbound-plugin-fold-constants", "unbound-reshard",
     "unbound-plan"],
    ["unbound-convert"],
    ["unbound-cli", "unbound-python"],
]
# Built only for tests; may sit anywhere, nothing but dev-dependencies may use it.
TEST_ONLY = {"unbound-test-support"}
NO_C_COMPILER = ["unbound-wire", "unbound-graph", "unbound-bundle", "unbound-reshard", "unbound-convert"]


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1"],
            check=True,
            capture_output=True,
        ).stdout
    )
    layer_of = {name: i for i, names in enumerate(LAYERS) for name in names}
    members = set(meta["workspace_members"])
    packages = {p["id"]: p for p in meta["packages"]}
    workspace = {packages[m]["name"] for m in members}
    failures = []
    for member in sorted(members):
        pkg = packages[member]
        name = pkg["name"]
        if name in TEST_ONLY:
            continue
        if name not in layer_of:
            failures.append(f"{name}: not placed in a layer (add it to LAYERS and ARCHITECTURE.md)")
            continue
        for dep in pkg["dependencies"]:
            if dep["name"] not in workspace or dep["kind"] == "dev":
                continue
            if dep["name"] in TEST_ONLY:
                failures.append(f"{name}: {dep['name']} may only be a dev-dependency")
            elif layer_of.get(dep["name"], len(LAYERS)) >= layer_of[name]:
                failures.append(
                    f"{name} (layer {layer_of[name]}) depends on {dep['name']} "
                    f"(layer {layer_of.get(dep['name'])}): not below it"
                )
    for name in NO_C_COMPILER:
        tree = subprocess.run(
            ["cargo", "tree", "-p", name, "-e", "normal,build", "--prefix", "none"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        if any(line.startswith("cc v") for line in tree.splitlines()):
            failures.append(f"{name}: needs a C compiler (the cc crate is in its dependency tree)")
    for failure in failures:
        print(f"FAIL {failure}")
    checked = len(members) + len(NO_C_COMPILER)
    print(f"layers: {checked - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
