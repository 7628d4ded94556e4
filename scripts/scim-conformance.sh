#!/usr/bin/env bash
# Runs two SCIM conformance suites nobody here wrote, scim2-tester and scim-sanity (RFC 7643/7644 checkers), against a
# running service, and prints their counts (docs/scim.md, "Conformance suites", records them).
#
#   npm run demo                                                     # one terminal: the demo and its SCIM token
#   SUITES_DIR=/path/to/suites bash scripts/scim-conformance.sh      # another
#
# Their code is not in this repository: SUITES_DIR holds their source trees, one directory each, named
#   scim2-models   github.com/python-scim/scim2-models   d5db17c56b10314c26c746113ab83fe1d1115fe1 (0.6.12)
#   scim2-client   github.com/python-scim/scim2-client   cc7195f49343f6e6a33e9c96b1bd098f7ae7ee4d (0.7.5)
#   scim2-tester   github.com/python-scim/scim2-tester   84e6560b2d7f0ee4aa042cf0b40ff547802ee208 (0.2.8)
#   scim-sanity    github.com/thomaselliottbetz/scim-sanity 86c84be6eaac83b80a8d7e36d0f0ac3b301d1fa1 (0.7.2)
# (a `git clone` of each at that commit, or the `git archive` of a mirror). Their Python dependencies that are not
# installed (httpx, httpcore, h11, anyio, email-validator, dnspython) are installed with pip from the configured index
# into SUITES_DIR/.vendor, once; pydantic >= 2.12 and click must be installed. Python >= 3.10.
#
# Env: BASE_URL (default the demo's http://127.0.0.1:3000/scim/v2), TOKEN (default the demo's published SCIM token),
# ORIGIN (the X-Request-Origin header, default scim-conformance.sh), RUNS (default "scim2-tester scim-sanity";
# "scim2-tester-as-published" runs scim2-tester without value_rules.py, to see what the design choices cost),
# VERBOSE=1. Exit status: 0 when no check of the runs failed.
# Each run creates users and groups and deletes them (about 260 requests of the company's daily SCIM budget).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${SUITES_DIR:?set SUITES_DIR to the directory holding scim2-models, scim2-client, scim2-tester and scim-sanity}"
SUITES_DIR="$(cd "$SUITES_DIR" && pwd)"
export BASE_URL="${BASE_URL:-http://127.0.0.1:3000/scim/v2}"
export TOKEN="${TOKEN:-ces_scim_demo_000000000000000000000000000}"
export ORIGIN="${ORIGIN:-scim-conformance.sh}"
RUNS="${RUNS:-scim2-tester scim-sanity}"
export NO_PROXY="127.0.0.1,localhost,::1${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost,::1${no_proxy:+,$no_proxy}"

for tree in scim2-models scim2-client scim2-tester scim-sanity; do
  [ -d "$SUITES_DIR/$tree" ] || { echo "missing $SUITES_DIR/$tree (see the header of this script)" >&2; exit 2; }
done
VENDOR="$SUITES_DIR/.vendor"
if [ ! -f "$VENDOR/.done" ]; then
  mkdir -p "$VENDOR/wheels"
  pip download --quiet --no-deps -d "$VENDOR/wheels" httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 anyio==4.15.1 email-validator==2.3.0 dnspython==2.8.0 ||
    { echo "pip download failed: is a package index reachable?" >&2; exit 2; }
  pip install --quiet --no-deps --no-index --target "$VENDOR/lib" "$VENDOR"/wheels/*.whl || { echo "pip install --target failed" >&2; exit 2; }
  touch "$VENDOR/.done"
fi
export PYTHONPATH="$VENDOR/lib:$SUITES_DIR/scim2-models:$SUITES_DIR/scim2-client:$SUITES_DIR/scim2-tester:$SUITES_DIR/scim-sanity"
python3 -c 'import sys, pydantic; assert sys.version_info >= (3, 10), "python >= 3.10"; assert tuple(map(int, pydantic.VERSION.split(".")[:2])) >= (2, 12), "pydantic >= 2.12"; import scim2_tester, scim_sanity, httpx, click' ||
  { echo "the suites cannot be imported (see above)" >&2; exit 2; }

summary=()
failed=0
for run in $RUNS; do
  case "$run" in
    scim2-tester) cmd=(env VALUE_RULES=1 python3 "$HERE/scim-conformance/run_scim2_tester.py") ;;
    scim2-tester-as-published) cmd=(env VALUE_RULES=0 python3 "$HERE/scim-conformance/run_scim2_tester.py") ;;
    scim-sanity) cmd=(python3 "$HERE/scim-conformance/run_scim_sanity.py") ;;
    *) echo "unknown run $run" >&2; exit 2 ;;
  esac
  printf '\n\033[1m==> %s against %s\033[0m\n' "$run" "$BASE_URL"
  log="$(mktemp)"
  "${cmd[@]}" 2>&1 | tee "$log"
  line="$(grep -E '^(scim2-tester|scim-sanity): [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)"
  rm -f "$log"
  if [ -z "$line" ]; then line="did not finish"; failed=1; fi
  case "$line" in *" 0 failed"*) ;; *) failed=1 ;; esac
  summary+=("$(printf '%-26s %s' "$run" "${line#*: }")")
done

printf '\n\033[1mcounts (%s, %s)\033[0m\n' "$(date -u +%Y-%m-%d)" "$BASE_URL"
for s in "${summary[@]}"; do echo "$s"; done
exit "$failed"
