#!/usr/bin/env bash
# The provisioning flows of Okta and Microsoft Entra ID, by curl, against a running service (docs/scim.md, "The
# identity-provider flows by curl"): users (create, update, deactivate, reactivate, delete) and group push (create a
# group, give it a role, add members, rename, remove a member, delete). Each request is the body the provider's
# documentation shows, adapted only where the spec requires it (userName an email). Stops at the first unexpected
# status or value; test/scim/scim-flows-script.test.ts runs it.
#
#   npm run demo                       # in one terminal: the service with the demo company and its SCIM token
#   bash scripts/scim-flows.sh         # in another
#
# BASE (default http://127.0.0.1:3000), SCIM_TOKEN (default: the demo's published token), WORKSPACE (a workspace of
# the token's company, default the demo's "Demo Workspace") and PERMISSION_SET (a permission set of that company,
# default the demo's "Campaign editors") point it elsewhere.
set -euo pipefail

BASE=${BASE:-http://127.0.0.1:3000}
SCIM_TOKEN=${SCIM_TOKEN:-ces_scim_demo_000000000000000000000000000}
RUN=$(date +%s)-$$
PATCH_OP='urn:ietf:params:scim:api:messages:2.0:PatchOp'
EXT='urn:ietf:params:scim:schemas:extension:ces:2.0:User'
ENTERPRISE='urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'
WORKSPACE=${WORKSPACE:-Demo Workspace}
PERMISSION_SET=${PERMISSION_SET:-Campaign editors}
PERMISSIONS="{\"companyPermissions\": [], \"appGroup\": [{\"appGroupName\": \"${WORKSPACE}\", \"appGroupPermissions\": [\"basic_access\"]}]}"
ROLE="{\"appGroup\": [{\"appGroupName\": \"${WORKSPACE}\", \"appGroupPermissionSets\": [{\"appGroupPermissionSetName\": \"${PERMISSION_SET}\"}]}]}"
GROUP='urn:ietf:params:scim:schemas:core:2.0:Group'
GROUP_EXT='urn:ietf:params:scim:schemas:extension:ces:2.0:Group'

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
# expect_js EXPRESSION: a JavaScript expression over the last answer `b` that must be true.
expect_js() {
  node -e 'const b=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));if(!eval(process.argv[2])){console.error("expected "+process.argv[2]);process.exit(1)}' /tmp/scim-flows.$$ "$1"
}
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

# Group push. Both providers provision the users first and push a group's members by the ids our creates returned.
step "Group push: two users of the identity provider, with no permissions of their own"
scim POST /scim/v2/Users 201 "{\"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\"], \"userName\": \"group.one.${RUN}@okta.local\",
  \"name\": {\"givenName\": \"Group\", \"familyName\": \"One\"}, \"active\": true}"
MEMBER_1=$(field id)
scim POST /scim/v2/Users 201 "{\"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\"], \"userName\": \"group.two.${RUN}@okta.local\",
  \"name\": {\"givenName\": \"Group\", \"familyName\": \"Two\"}, \"active\": true}"
MEMBER_2=$(field id)

OKTA_GROUP="Test SCIMv2 ${RUN}"
step "Okta: look the group up by displayName (none yet)"
scim GET "/scim/v2/Groups?filter=$(filter "displayName eq \"${OKTA_GROUP}\"")&startIndex=1&count=100" 200
expect_field totalResults 0
step "Okta: push the group (Okta's body: displayName, no members yet)"
scim POST /scim/v2/Groups 201 "{\"schemas\": [\"${GROUP}\"], \"displayName\": \"${OKTA_GROUP}\", \"members\": []}"
OKTA_GROUP_ID=$(field id)
step "The group gets its role (our Group extension; an admin's mapping sends it)"
scim PATCH "/scim/v2/Groups/${OKTA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"replace\", \"path\": \"${GROUP_EXT}:permissions\", \"value\": ${ROLE}}]}"
step "Okta: add members"
scim PATCH "/scim/v2/Groups/${OKTA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"add\", \"path\": \"members\",
  \"value\": [{\"value\": \"${MEMBER_1}\", \"display\": \"group.one.${RUN}@okta.local\"}, {\"value\": \"${MEMBER_2}\", \"display\": \"group.two.${RUN}@okta.local\"}]}]}"
expect_js 'b.members.length === 2'
step "A member now holds the group's role in its effective permissions"
scim GET "/scim/v2/Users/${MEMBER_1}?attributes=groups,${EXT}:effectivePermissions" 200
expect_js "b.groups[0].display === '${OKTA_GROUP}'"
expect_js "b['${EXT}'].effectivePermissions.appGroup[0].appGroupPermissionSets[0].appGroupPermissionSetName === '${PERMISSION_SET}'"
step "Okta: rename (Okta sends the group's id with the new displayName)"
scim PATCH "/scim/v2/Groups/${OKTA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"replace\", \"value\": {\"id\": \"${OKTA_GROUP_ID}\", \"displayName\": \"${OKTA_GROUP} renamed\"}}]}"
expect_field displayName "${OKTA_GROUP} renamed"
step "Okta: remove a member"
scim PATCH "/scim/v2/Groups/${OKTA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"remove\", \"path\": \"members[value eq \\\"${MEMBER_1}\\\"]\"}]}"
expect_js "b.members.length === 1 && b.members[0].value === '${MEMBER_2}'"
scim GET "/scim/v2/Users/${MEMBER_1}?attributes=groups,${EXT}:effectivePermissions" 200
expect_js "b.groups === undefined && b['${EXT}'].effectivePermissions.appGroup.length === 0"
step "Okta: delete the group; its remaining member loses the role at once"
scim DELETE "/scim/v2/Groups/${OKTA_GROUP_ID}" 204
scim GET "/scim/v2/Groups/${OKTA_GROUP_ID}" 404
scim GET "/scim/v2/Users/${MEMBER_2}?attributes=groups,${EXT}:effectivePermissions" 200
expect_js "b.groups === undefined && b['${EXT}'].effectivePermissions.appGroup.length === 0"

ENTRA_GROUP="displayName ${RUN}"
step "Entra ID: create the group (Entra's body)"
scim POST /scim/v2/Groups 201 "{\"externalId\": \"8aa1a0c0-c4c3-4bc0-b4a5-${RUN}\", \"displayName\": \"${ENTRA_GROUP}\",
  \"meta\": {\"resourceType\": \"Group\"}, \"schemas\": [\"${GROUP}\"]}"
ENTRA_GROUP_ID=$(field id)
step "Entra ID: get the group by displayName, without members"
scim GET "/scim/v2/Groups?excludedAttributes=members&filter=$(filter "displayName eq \"${ENTRA_GROUP}\"")" 200
expect_field totalResults 1
expect_js "b.Resources[0].members === undefined"
step "Entra ID: add members"
scim PATCH "/scim/v2/Groups/${ENTRA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"Add\", \"path\": \"members\", \"value\": [{\"value\": \"${MEMBER_1}\"}, {\"value\": \"${MEMBER_2}\"}]}]}"
expect_js 'b.members.length === 2'
step "Entra ID: update the displayName"
scim PATCH "/scim/v2/Groups/${ENTRA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"Replace\", \"path\": \"displayName\", \"value\": \"${ENTRA_GROUP} updated\"}]}"
expect_field displayName "${ENTRA_GROUP} updated"
step "Entra ID: remove a member"
scim PATCH "/scim/v2/Groups/${ENTRA_GROUP_ID}" 200 "{\"schemas\": [\"${PATCH_OP}\"], \"Operations\": [{\"op\": \"Remove\", \"path\": \"members\", \"value\": [{\"value\": \"${MEMBER_2}\"}]}]}"
expect_js "b.members.length === 1 && b.members[0].value === '${MEMBER_1}'"
step "Entra ID: delete the group"
scim DELETE "/scim/v2/Groups/${ENTRA_GROUP_ID}" 204
scim DELETE "/scim/v2/Users/${MEMBER_1}" 204
scim DELETE "/scim/v2/Users/${MEMBER_2}" 204

printf '\n\033[1mAll flows ran as documented.\033[0m\n'
