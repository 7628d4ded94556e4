#!/usr/bin/env bash
# Node 24 LTS for the compatibility run, from the npm registry (node-linux-<arch>, the binary the `node` package
# installs), unpacked once into tools/node24/. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=tools/node24
case "$(uname -m)" in
  x86_64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) echo "node24: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
esac
if [ ! -x "$DIR/package/bin/node" ]; then
  mkdir -p "$DIR"
  (cd "$DIR" && tgz=$(npm pack "node-linux-${ARCH}@${NODE24_VERSION:-24}" --silent 2>/dev/null | tail -1) && tar xzf "$tgz" && rm -f "$tgz")
fi
echo "$PWD/$DIR/package/bin/node"
