# Sourced by the bench scripts (scripts/bench*.sh): the one way they build what they time.
#
# usage: source "$root/scripts/bench/build.sh"
#        bench_build [PACKAGE | PACKAGE:EXAMPLE]...
#
# bench_build builds, in release and quietly, the `unbound` CLI and then each item: a whole
# package (e.g. a plugin's cdylib) or one example of a package. The CLI is its own cargo
# command: with `--example`, cargo builds only the examples named, never the CLI, so a bench
# that built only its example would time a stale CLI. Then it sets:
#   bench_release  the release directory (honours CARGO_TARGET_DIR)
#   unbound        the CLI binary
# Examples are at "$bench_release/examples/NAME", libraries in "$bench_release".

bench_build() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  (cd "$root" && cargo build --release --quiet -p unbound-cli) || return 1
  local item
  for item in "$@"; do
    case "$item" in
      *:*) (cd "$root" && cargo build --release --quiet -p "${item%%:*}" --example "${item#*:}") ;;
      *) (cd "$root" && cargo build --release --quiet -p "$item") ;;
    esac || return 1
  done
  bench_release="${CARGO_TARGET_DIR:-$root/target}/release"
  unbound="$bench_release/unbound"
}
