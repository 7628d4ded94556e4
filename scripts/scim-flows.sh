#!/usr/bin/env bash
# The provisioning flows of Okta and Microsoft Entra ID, by curl, against a running service (docs/scim.md, "The
# identity-provider flows by curl"). Each request is the body the provider's documentation shows, adapted only where
# the spec requires it (userName an email; department and permissions given). Stops at the first unexpected status.
#
#   npm run demo                       # in one terminal: the service with the demo company and its SCIM token
#   bash scripts/scim-flows.sh         # in another
#
# BASE (default http://127.0.0.1:3000) and SCIM_TOKEN (default: the demo's published token) point it elsewhere.
set -euo pipefail

BASE=${BASE:-http://127.0.0.1:3000}
SCIM_TOKEN=${SCIM_TOKEN:-ces_scim_demo_000000000000000000000000000}
RUN=$(date +%s)-$$
PATCH_OP='urn:ietf:params:scim:api:messages:2.0:PatchOp'
EXT='urn:ietf:params:scim:schemas:extension:ces:2.0:User'
ENTERPRISE='urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'
PERMISSIONS='{"companyPermissions": [], "appGroup": [{"appGroupName": "Demo Workspace", "appGroupPermissions": ["basic_access"]}]}'

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# scim METHOD PATH EXPECTED_STATUS [BODY]: prints the answer; fails unless the status is the expected one.
scim() {
  local method=$1 path=$2 expected=$3 body=${4:-}
  local args=(-sS -X "$method" "${BASE}${path}" -H "Authorization: Bearer ${SCIM_TOKEN}" -H 'X-Request-Origin: scim-flows.sh'
    -H 'Content-Type: application/scim+json' -o /tmp/scim-flows.$$ -w '%{http_code}')
  [ -n "$body" ] && args+=(--data "$body")
  local status
  status=$(curl "${args[@]}")
  printf '%s %s -> %s\n' "$method" "$path" "$status"
  [ -s /tmp/scim-flows.$$ ] && { head -c 600 /tmp/scim-flows.$$; echo; }
  if [ "$status" != "$expected" ]; then echo "expected ${expected}" >&2; exit 1; fi
}
# The value of a top-level field of the last answer (no jq needed).
field() { node -e 'const v=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"))[process.argv[2]];process.stdout.write(String(v))' /tmp/scim-flows.$$ "$1"; }
expect_field() { local got; got=$(field "$1"); [ "$got" = "$2" ] || { echo "expected $1 = $2, got ${got}" >&2; exit 1; }; }
filter() { node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$1"; }
trap 'rm -f /tmp/scim-flows.$$' EXIT

step "Discovery"
scim GET /scim/v2/ServiceProviderConfig 200
scim GET /scim/v2/ResourceTypes 200

OKTA_USER="test.user.${RUN}@okta.local"
step "Okta: look up ${OKTA_USER} (none yet)"
scim GET "/scim/v2/Users?filter=$(filter "userName eq \"${OKTA_USER}\"")&startIndex=1&count=100" 200
expect_field totalResults 0

step "Okta: create"
scim POST /scim/v2/Users 201 "{
  \"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\", \"${EXT}\"],
  \"userName\": \"${OKTA_USER}\", \"name\": {\"givenName\": \"Test\", \"familyName\": \"User\"},
  \"emails\": [{\"primary\": true, \"value\": \"${OKTA_USER}\", \"type\": \"work\"}],
  \"displayName\": \"Test User\", \"locale\": \"en-US\", \"externalId\": \"00ujl29u0le5T6Aj10h7\", \"groups\": [],
  \"password\": \"1mz050nq\", \"active\": true,
  \"${EXT}\": {\"department\": \"engineering\", \"permissions\": ${PERMISSIONS}}}"
OKTA_ID=$(field id)

step "Okta: update the profile (PUT)"
scim PUT "/scim/v2/Users/${OKTA_ID}" 200 "{
  \"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\", \"${EXT}\"], \"id\": \"${OKTA_ID}\",
  \"userName\": \"${OKTA_USER}\", \"name\": {\"givenName\": \"Another\", \"middleName\": \"\", \"familyName\": \"User\"},
  \"emails\": [{\"primary\": true, \"value\": \"${OKTA_USER}\", \"type\": \"work\"}], \"active\": true,
  \"${EXT}\": {\"department\": \"engineering\", \"permissions\": ${PERMISSIONS}}}"

step "Okta: deactivate"
scim PATCH "/scim/v2/Users/${OKTA_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"replace\", \"value\": {\"active\": false}}]}"
expect_field active false
scim GET "/scim/v2/Users/${OKTA_ID}" 200
expect_field active false

step "Okta: reactivate"
scim PATCH "/scim/v2/Users/${OKTA_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"replace\", \"value\": {\"active\": true}}]}"
expect_field active true

step "Okta: delete (Okta itself never deletes; an admin may)"
scim DELETE "/scim/v2/Users/${OKTA_ID}" 204

ENTRA_USER="Test_User_${RUN}@testuser.com"
step "Entra ID: create ${ENTRA_USER}"
scim POST /scim/v2/Users 201 "{
  \"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\", \"${ENTERPRISE}\", \"${EXT}\"],
  \"externalId\": \"0a21f0f2-8d2a-4f8e-bf98-${RUN}\", \"userName\": \"${ENTRA_USER}\", \"active\": true,
  \"emails\": [{\"primary\": true, \"type\": \"work\", \"value\": \"${ENTRA_USER}\"}], \"meta\": {\"resourceType\": \"User\"},
  \"name\": {\"formatted\": \"givenName familyName\", \"familyName\": \"familyName\", \"givenName\": \"givenName\"}, \"roles\": [],
  \"${ENTERPRISE}\": {\"department\": \"engineering\"}, \"${EXT}\": {\"permissions\": ${PERMISSIONS}}}"
ENTRA_ID=$(field id)

step "Entra ID: get by query"
scim GET "/scim/v2/Users?filter=$(filter "userName eq \"${ENTRA_USER}\"")" 200
expect_field totalResults 1
scim GET "/scim/v2/Users?filter=$(filter 'userName eq "non-existent user@testuser.com"')" 200
expect_field totalResults 0

step "Entra ID: update multi-valued and single-valued attributes"
scim PATCH "/scim/v2/Users/${ENTRA_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [
  {\"op\": \"Replace\", \"path\": \"emails[type eq \\\"work\\\"].value\", \"value\": \"updatedEmail.${RUN}@microsoft.com\"},
  {\"op\": \"Replace\", \"path\": \"emails[type eq \\\"work\\\"].primary\", \"value\": true},
  {\"op\": \"Replace\", \"path\": \"title\", \"value\": \"tester\"},
  {\"op\": \"Add\", \"path\": \"${ENTERPRISE}:department\", \"value\": \"finance\"}]}"
expect_field department finance
step "Entra ID: a userName change is refused (the spec keeps userName immutable), nothing applied"
scim PATCH "/scim/v2/Users/${ENTRA_ID}" 400 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"Replace\", \"path\": \"userName\", \"value\": \"5b50642d-79fc-4410-9e90-4c077cdd1a59@testuser.com\"}]}"
expect_field scimType mutability

step "Entra ID: disable (soft delete), with Entra's string boolean"
scim PATCH "/scim/v2/Users/${ENTRA_ID}" 200 "{\"Operations\": [{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"False\"}], \"schemas\": [\"${PATCH_OP}\"]}"
expect_field active false
scim GET "/scim/v2/Users?filter=$(filter "externalId eq \"0a21f0f2-8d2a-4f8e-bf98-${RUN}\"")" 200
expect_field totalResults 1

step "Entra ID: reactivate"
scim PATCH "/scim/v2/Users/${ENTRA_ID}" 200 "{\"Operations\": [{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"True\"}], \"schemas\": [\"${PATCH_OP}\"]}"
expect_field active true

step "Entra ID: delete"
scim DELETE "/scim/v2/Users/${ENTRA_ID}" 204
scim GET "/scim/v2/Users/${ENTRA_ID}" 404

printf '\n\033[1mAll flows ran as documented.\033[0m\n'
