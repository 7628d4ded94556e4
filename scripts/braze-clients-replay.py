#!/usr/bin/env python3
"""
Replays, with the Python standard library only (urllib), the HTTP requests that two third-party Python Braze
clients send to the user-data endpoints, so that this service can be checked against what those clients send and
read. test/user-data/user-data-clients.test.ts runs it against a test app; it can also be pointed at a running service.

Where each request comes from (the clients' own source, read at these commits):

  edX   = "edx-braze-client" 1.1.3 on PyPI: github.com/edx/braze-client, tag 1.1.3 = commit
          d42209c6831b51e5e60cf62fbe9f1a2887627928, braze/client.py and braze/constants.py.
          * POST /users/export/ids  {"email_address", "fields_to_export": ["external_id"]}  get_braze_external_id,
                                    the lookup send_email / send_campaign_message / send_canvas_message make per email;
                                    reads response["users"][0]["external_id"].
          * POST /users/export/ids  {"user_aliases": [...], "fields_to_export": ["external_id", "email"]}
                                    get_braze_external_id_batch (chunks of 50); reads response["users"][*].email and
                                    .external_id.
          * POST /users/alias/new   {"user_aliases": [{alias_label, alias_name[, external_id]}]}  (chunks of 50)
          * POST /users/track       {"attributes": [{"user_alias": {...}, "email": ...}]}  (chunks of 75)
            The three above are create_braze_alias, replayed in its order: export by aliases, then alias/new with the
            external_id the export found for that email, then track. The user_alias dict in the track object is the
            one sent to alias/new (the client shares it), so it carries the external_id too when one was found.
          * POST /users/identify    {"aliases_to_identify": [{"external_id": <int>, "user_alias": {...}}]}
                                    create_recipients; the external_id is the caller's LMS user id, an integer.
          * GET  /email/unsubscribes?start_date&end_date&limit=500&offset=0&sort_direction=desc
                                    retrieve_unsubscribed_emails: while a page holds >= 500 emails, the next one
                                    (offset += 500); reads response.get("emails").
          Headers: Authorization: Bearer <key>, Content-Type: application/json (on the GET too), the requests
          library's User-Agent. The client joins URLs with urljoin, so a path prefix in BASE_URL is dropped; so here.
          The client raises on any 4xx/5xx and calls resp.json() on everything else.

  PyPI  = "braze-client" 2.3.3 on PyPI: github.com/dtatarkin/braze-client, release 2.3.3 = commit
          4d8e02d3693ffb63be8a7442c47013bf046661b7 (read from the fork kpeutcr8/braze-client, which has the commits
          after v2.3.1 = 02c39aeda5fcdb9e7ebc08289b9fb081e51f1806), braze/client.py.
          * POST /users/export/ids  {"external_ids": [...], "fields_to_export": [...]}   user_export(external_ids=...)
          * POST /users/export/ids  {"email_address": ...}                               user_export(email=...)
          * POST /users/delete      {"external_ids": [...]}                              user_delete
          Headers: Authorization: Bearer <key> (use_auth_header=True, the default since 2.3.2),
          User-Agent: braze-client python, Content-Type: application/json. URL = BASE_URL + path.
          The client ignores the status code and requires body["message"] == "success" (it raises otherwise).
          NOT SUPPORTED: the client's use_auth_header=False mode, the default of 2.3.1 and older, which sends no
          Authorization header and puts "api_key" in the JSON body. This service takes the key from the
          Authorization header only, so that mode is not replayed; upgrade to 2.3.2+ or pass use_auth_header=True.

  docs  = NOT sent by either client (neither has a method for them). The bodies follow Braze's API documentation
          (braze-inc/braze-docs: _docs/_api/endpoints/user_data/post_users_merge.md,
          external_id_migration/post_external_ids_rename.md and post_external_ids_remove.md), sent with edX-style
          headers. /users/merge, /users/external_ids/rename, /users/external_ids/remove. Skipped with --clients-only.

Byte for byte: bodies are json.dumps(...) with its default separators and key order as the clients build them. The
one header that differs is Connection (urllib sends "close", requests "keep-alive"). This was checked by running the
clients' own code (the commits above, outside this repository) and this script against a test app and comparing
method, path, query, body bytes and headers: identical for every request above but the PyPI user_export(email=...),
which that check ran only in the unsupported api_key-in-body mode (its Bearer form, here, follows from the source).

Environment: BASE_URL (default http://127.0.0.1:3000), API_KEY (default the demo key published in
workspace/demo.yaml), REPLAY_TIMEOUT (seconds per request, default 2: both clients use timeout=2).
The users to use are given as options, each also readable from the environment variable named in --help; an empty
value skips the requests that need it.

Output: one JSON object per request on stdout:
  {"client": "edx" | "pypi" | "docs", "call": <the client method>, "method", "path", "status", "body", "request"}
(body: the answer, parsed; request: the JSON body sent, or the query of a GET). Exit status 1 when any answer is not
2xx, is not JSON, or lacks what the client reads from it (why is written on stderr, "FAIL ..."), 0 otherwise. Objects
refused inside an answer the client accepts anyway ("errors" in a /users/track answer, which edX never reads) do not
fail the run; they are written on stderr as "NOTE ...".

Refuses to run against a *.braze.com host (it deletes and merges users) unless REPLAY_ALLOW_REAL_BRAZE=1.
"""
import argparse
import gzip
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import zlib

DEMO_KEY = "ces_key_demo_0000000000000000000000000000"
BASE_URL = os.environ.get("BASE_URL", "http://127.0.0.1:3000").rstrip("/")
API_KEY = os.environ.get("API_KEY", DEMO_KEY)
TIMEOUT = float(os.environ.get("REPLAY_TIMEOUT", "2"))

# What requests.Session sends by default (the version is the one the requests were captured with).
REQUESTS_HEADERS = {"User-Agent": "python-requests/2.34.2", "Accept-Encoding": "gzip, deflate", "Accept": "*/*"}

# edX braze/constants.py
GET_EXTERNAL_IDS_CHUNK_SIZE = 50
USER_ALIAS_CHUNK_SIZE = 50
TRACK_USER_COMPONENT_CHUNK_SIZE = 75
UNSUBSCRIBED_EMAILS_API_LIMIT = 500

failures = []


class ClientError(Exception):
    """The client would have raised (or, for edX's lookup, given up) here."""


def edx_url(path):
    # edX: urljoin(self.api_url, endpoint), endpoint starting with "/"
    return urllib.parse.urljoin(BASE_URL, path)


def edx_headers():
    # edX: session.headers.update({"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    return {**REQUESTS_HEADERS, "Authorization": "Bearer {}".format(API_KEY), "Content-Type": "application/json"}


def pypi_url(path):
    # PyPI braze-client: self.api_url + ENDPOINT (with a trailing slash in api_url the client would send "//users/...")
    return BASE_URL + path


def pypi_headers():
    # 2.3.2+: session User-Agent "braze-client python"; headers={"Authorization": "Bearer <key>"};
    # Content-Type from requests' json=
    return {**REQUESTS_HEADERS, "User-Agent": "braze-client python", "Authorization": "Bearer {}".format(API_KEY),
            "Content-Type": "application/json"}


def _decode(headers, raw):
    encoding = (headers.get("Content-Encoding") or "").lower()
    if encoding == "gzip":
        raw = gzip.decompress(raw)
    elif encoding == "deflate":
        try:
            raw = zlib.decompress(raw)
        except zlib.error:
            raw = zlib.decompress(raw, -zlib.MAX_WBITS)
    return raw.decode("utf-8")


def send(client, call, method, url, headers, body=None, query=None):
    """Sends one request, prints its line, and returns the parsed answer (or raises ClientError)."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    if query is not None:
        url = url + "?" + urllib.parse.urlencode(query)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as res:
            status, res_headers, raw = res.status, res.headers, res.read()
    except urllib.error.HTTPError as err:
        status, res_headers, raw = err.code, err.headers, err.read()
    except OSError as err:  # refused, reset, timed out
        line = {"client": client, "call": call, "method": method, "path": urllib.parse.urlsplit(url).path,
                "status": None, "body": repr(err), "request": body if body is not None else query}
        print(json.dumps(line), flush=True)
        raise ClientError("{} {}: no answer ({!r})".format(method, url, err))
    text = _decode(res_headers, raw)
    try:
        parsed = json.loads(text)
        is_json = True
    except ValueError:
        parsed, is_json = text, False
    line = {"client": client, "call": call, "method": method, "path": urllib.parse.urlsplit(url).path,
            "status": status, "body": parsed, "request": body if body is not None else query}
    print(json.dumps(line), flush=True)
    where = "{} {} ({} {})".format(method, line["path"], client, call)
    if not 200 <= status < 300:
        raise ClientError("{}: answered {}, the client raises on it: {}".format(where, status, text[:500]))
    if not is_json:
        raise ClientError("{}: the answer is not JSON; the client's resp.json() raises: {}".format(where, text[:500]))
    return parsed


def require(condition, message):
    if not condition:
        raise ClientError(message)


def note_errors(answer, where, reader):
    """Objects refused in an answer the client accepts: not a failure of the client, but written on stderr."""
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if errors:
        print("NOTE {}: the answer lists refused objects ({}): {}".format(where, reader, json.dumps(errors)),
              file=sys.stderr, flush=True)


def run(label, fn, *args):
    """Runs one client method; a ClientError is recorded and the replay goes on with the next method."""
    try:
        return fn(*args)
    except ClientError as err:
        failures.append("{}: {}".format(label, err))
        print("FAIL {}: {}".format(label, err), file=sys.stderr, flush=True)
        return None


def chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


# ---------------------------------------------------------------------------------------------------------------
# edX (edx-braze-client 1.1.3)

def edx_users(answer, where):
    require(isinstance(answer, dict) and isinstance(answer.get("users"), list),
            "{}: the answer has no 'users' list; the client reads response['users'] (KeyError)".format(where))
    return answer["users"]


def edx_get_braze_external_id(email):
    answer = send("edx", "get_braze_external_id", "POST", edx_url("/users/export/ids"), edx_headers(),
                  {"email_address": email, "fields_to_export": ["external_id"]})
    users = edx_users(answer, "get_braze_external_id")
    if users and "external_id" in users[0]:
        return users[0].get("external_id")
    return None


def edx_send_flow_lookup(emails):
    # send_email / send_campaign_message / send_canvas_message: one lookup per email, in order; an email without an
    # external_id stops the send with BrazeClientError("Braze user with email ... was not found.").
    found = []
    for email in emails:
        external_id = edx_get_braze_external_id(email)
        require(external_id, "send-flow lookup: /users/export/ids gave no users[0].external_id for {}; the client raises "
                             "BrazeClientError('Braze user with email {} was not found.') and sends nothing".format(email, email))
        found.append(external_id)
    return found


def edx_get_braze_external_id_batch(emails, alias_label):
    external_ids_by_email = {}
    for batch in chunks(emails, GET_EXTERNAL_IDS_CHUNK_SIZE):
        payload = {"user_aliases": [{"alias_label": alias_label, "alias_name": email} for email in batch],
                   "fields_to_export": ["external_id", "email"]}
        answer = send("edx", "create_braze_alias/get_braze_external_id_batch", "POST", edx_url("/users/export/ids"),
                      edx_headers(), payload)
        for user in edx_users(answer, "get_braze_external_id_batch"):
            require(isinstance(user, dict), "get_braze_external_id_batch: users[] entries must be objects")
            if user.get("email") and user.get("external_id"):
                external_ids_by_email[user.get("email")] = user.get("external_id")
    return external_ids_by_email


def edx_track_user(attributes):
    # track_user(attributes=...): attributes only, so each request is {"attributes": chunk}
    for chunk in chunks(attributes, TRACK_USER_COMPONENT_CHUNK_SIZE):
        answer = send("edx", "create_braze_alias/track_user", "POST", edx_url("/users/track"), edx_headers(),
                      {"attributes": chunk})
        note_errors(answer, "edx create_braze_alias/track_user", "the client ignores the answer")


def edx_create_braze_alias(emails, alias_label):
    user_aliases, attributes = [], []
    external_ids_by_email = edx_get_braze_external_id_batch(emails, alias_label)
    for email in emails:
        user_alias = {"alias_label": alias_label, "alias_name": email}
        if external_ids_by_email.get(email):
            user_alias["external_id"] = external_ids_by_email.get(email)
        user_aliases.append(user_alias)
        attributes.append({"user_alias": user_alias, "email": email})
    for chunk in chunks(user_aliases, USER_ALIAS_CHUNK_SIZE):
        send("edx", "create_braze_alias", "POST", edx_url("/users/alias/new"), edx_headers(), {"user_aliases": chunk})
    if attributes:
        edx_track_user(attributes)


def edx_create_recipients(alias_label, user_id_by_email):
    # Only the /users/identify request; the recipients it builds are returned to the caller, not sent.
    send("edx", "create_recipients/identify_users", "POST", edx_url("/users/identify"), edx_headers(),
         {"aliases_to_identify": [{"external_id": user_id, "user_alias": {"alias_label": alias_label, "alias_name": email}}
                                  for email, user_id in user_id_by_email.items()]})


def edx_retrieve_unsubscribed_emails(start_date, end_date):
    params = {"start_date": start_date, "end_date": end_date, "limit": UNSUBSCRIBED_EMAILS_API_LIMIT, "offset": 0,
              "sort_direction": "desc"}

    def page():
        answer = send("edx", "retrieve_unsubscribed_emails", "GET", edx_url("/email/unsubscribes"), edx_headers(),
                      query=list(params.items()))
        # The client reads response.get('emails', []): a missing list silently ends the listing, so it is required here.
        require(isinstance(answer, dict) and isinstance(answer.get("emails"), list),
                "retrieve_unsubscribed_emails: the answer has no 'emails' list")
        return answer["emails"]

    emails = page()
    listed = list(emails)
    while len(emails) >= UNSUBSCRIBED_EMAILS_API_LIMIT:
        params["offset"] += UNSUBSCRIBED_EMAILS_API_LIMIT
        emails = page()
        listed.extend(emails)
    return listed


# ---------------------------------------------------------------------------------------------------------------
# PyPI braze-client 2.3.3

def pypi_request(call, path, payload):
    answer = send("pypi", call, "POST", pypi_url(path), pypi_headers(), payload)
    # __create_request: response = {"errors": []}; response.update(r.json()); message = response["message"];
    # raises BrazeClientError unless message == "success".
    require(isinstance(answer, dict), "{}: the answer is not a JSON object; dict.update(r.json()) fails".format(call))
    require("message" in answer, "{}: the answer has no 'message'; the client raises KeyError".format(call))
    require(answer["message"] == "success",
            "{}: message is {!r}; the client raises BrazeClientError unless it is 'success'".format(call, answer["message"]))
    # With "errors" in a "success" answer the client returns success=False without raising.
    note_errors(answer, call, "the client returns it with success=False")
    return answer


def pypi_user_export(external_ids=None, email=None, fields_to_export=None):
    payload = {}
    if external_ids:
        payload["external_ids"] = external_ids
    elif email:
        payload["email_address"] = email
    if fields_to_export:
        payload["fields_to_export"] = fields_to_export
    answer = pypi_request("user_export", "/users/export/ids", payload)
    # The client hands the rest of the answer to its caller, who reads the users.
    require(isinstance(answer.get("users"), list), "user_export: the answer has no 'users' list")
    return answer


def pypi_user_delete(external_ids):
    return pypi_request("user_delete", "/users/delete", {"external_ids": external_ids})


# ---------------------------------------------------------------------------------------------------------------
# From Braze's API documentation (no client sends these)

def docs_request(call, path, payload, fields):
    answer = send("docs", call, "POST", edx_url(path), edx_headers(), payload)
    require(isinstance(answer, dict) and answer.get("message") == "success",
            "{}: message is not 'success' (documented answer: {})".format(call, ", ".join(fields)))
    for field in fields:
        require(field in answer, "{}: the answer has no '{}' (documented: {})".format(call, field, ", ".join(fields)))
    return answer


def docs_merge(external_pair, alias_pair):
    updates = []
    if external_pair:
        updates.append({"identifier_to_merge": {"external_id": external_pair[0]},
                        "identifier_to_keep": {"external_id": external_pair[1]}})
    if alias_pair:
        updates.append({"identifier_to_merge": {"user_alias": {"alias_name": alias_pair[0], "alias_label": "email"}},
                        "identifier_to_keep": {"user_alias": {"alias_name": alias_pair[1], "alias_label": "email"}}})
    if updates:
        docs_request("users/merge", "/users/merge", {"merge_updates": updates}, ["message"])


def docs_rename(pair):
    answer = docs_request("external_ids/rename", "/users/external_ids/rename",
                          {"external_id_renames": [{"current_external_id": pair[0], "new_external_id": pair[1]}]},
                          ["message", "external_ids", "rename_errors"])
    require(not answer["rename_errors"], "external_ids/rename: rename_errors {}".format(answer["rename_errors"]))


def docs_remove(external_ids):
    answer = docs_request("external_ids/remove", "/users/external_ids/remove", {"external_ids": external_ids},
                          ["message", "removed_ids", "removal_errors"])
    require(not answer["removal_errors"], "external_ids/remove: removal_errors {}".format(answer["removal_errors"]))


# ---------------------------------------------------------------------------------------------------------------

def split_list(value):
    return [v.strip() for v in value.split(",") if v.strip()]


def split_pair(value, what):
    if not value:
        return None
    parts = value.split(":")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        sys.exit("{}: expected FROM:TO, got {!r}".format(what, value))
    return parts[0], parts[1]


def user_ids_by_email(value):
    # email=lms_user_id,...; edX's callers pass LMS user ids, integers: sent as JSON numbers when they are digits.
    result = {}
    for item in split_list(value):
        email, _, user_id = item.partition("=")
        if not email or not user_id:
            sys.exit("--identify: expected EMAIL=ID[,EMAIL=ID...], got {!r}".format(value))
        result[email] = int(user_id) if user_id.isdigit() else user_id
    return result


def options(argv):
    def opt(parser, flag, env, default, text):
        parser.add_argument(flag, default=os.environ.get(env, default), help="{} (env {}; default {!r})".format(text, env, default))

    p = argparse.ArgumentParser(description="Replay the requests of edX's and the PyPI Braze clients (see the header).")
    opt(p, "--email", "REPLAY_EMAIL", "user@example.com",
        "an identified user's address: edX's send-flow lookup and the PyPI user_export(email=...)")
    opt(p, "--alias-label", "REPLAY_ALIAS_LABEL", "Enterprise", "edX's alias_label")
    opt(p, "--alias-emails", "REPLAY_ALIAS_EMAILS", "a@example.com,b@example.com", "edX create_braze_alias emails, comma-separated")
    opt(p, "--identify", "REPLAY_IDENTIFY", "a@example.com=12345,b@example.com=56789",
        "edX create_recipients: EMAIL=LMS_USER_ID,... (digits are sent as a JSON integer)")
    opt(p, "--unsubscribes-start", "REPLAY_UNSUBSCRIBES_START", "2024-01-01", "edX retrieve_unsubscribed_emails start_date")
    opt(p, "--unsubscribes-end", "REPLAY_UNSUBSCRIBES_END", "2024-02-01", "edX retrieve_unsubscribed_emails end_date")
    opt(p, "--export-external-ids", "REPLAY_EXPORT_EXTERNAL_IDS", "adc15c7d-858b-4261-bec7-2ac085778e41",
        "PyPI user_export(external_ids=...), comma-separated")
    opt(p, "--delete-external-ids", "REPLAY_DELETE_EXTERNAL_IDS", "1,2", "PyPI user_delete(external_ids=...), comma-separated")
    opt(p, "--merge", "REPLAY_MERGE", "old-user1:current-user1", "docs /users/merge by external_id: MERGE:KEEP")
    opt(p, "--merge-aliases", "REPLAY_MERGE_ALIASES", "old-user2@example.com:current-user2@example.com",
        "docs /users/merge by user_alias (label 'email'): MERGE:KEEP")
    opt(p, "--rename", "REPLAY_RENAME", "existing_external_id:new_external_id", "docs /users/external_ids/rename: CURRENT:NEW")
    opt(p, "--remove", "REPLAY_REMOVE", "existing_deprecated_external_id_string",
        "docs /users/external_ids/remove: deprecated external ids, comma-separated")
    p.add_argument("--clients-only", action="store_true", help="skip the requests taken from Braze's docs")
    return p.parse_args(argv)


def main(argv):
    o = options(argv)
    host = urllib.parse.urlsplit(BASE_URL).hostname or ""
    if host.endswith("braze.com") and os.environ.get("REPLAY_ALLOW_REAL_BRAZE") != "1":
        sys.exit("refusing to delete and merge users on a Braze host; set REPLAY_ALLOW_REAL_BRAZE=1 to do so")

    alias_emails = split_list(o.alias_emails)
    identify = user_ids_by_email(o.identify)
    export_ids = split_list(o.export_external_ids)
    delete_ids = split_list(o.delete_external_ids)
    remove_ids = split_list(o.remove)
    merge = split_pair(o.merge, "--merge")
    merge_aliases = split_pair(o.merge_aliases, "--merge-aliases")
    rename = split_pair(o.rename, "--rename")

    # edX, in the order an edX service calls them: aliases for new learners, their LMS ids, then a send's lookup.
    if alias_emails:
        run("edx create_braze_alias", edx_create_braze_alias, alias_emails, o.alias_label)
    if identify:
        run("edx create_recipients", edx_create_recipients, o.alias_label, identify)
    if o.email:
        run("edx send-flow lookup", edx_send_flow_lookup, [o.email])
    if o.unsubscribes_start and o.unsubscribes_end:
        run("edx retrieve_unsubscribed_emails", edx_retrieve_unsubscribed_emails, o.unsubscribes_start, o.unsubscribes_end)

    # PyPI braze-client 2.3.3
    if export_ids:
        run("pypi user_export(external_ids)", pypi_user_export, export_ids, None, ["external_id", "email"])
    if o.email:
        run("pypi user_export(email)", pypi_user_export, None, o.email)
    if delete_ids:
        run("pypi user_delete", pypi_user_delete, delete_ids)

    if not o.clients_only:
        run("docs /users/merge", docs_merge, merge, merge_aliases)
        if rename:
            run("docs /users/external_ids/rename", docs_rename, rename)
        if remove_ids:
            run("docs /users/external_ids/remove", docs_remove, remove_ids)

    if failures:
        print("{} client call(s) failed: see FAIL above".format(len(failures)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
