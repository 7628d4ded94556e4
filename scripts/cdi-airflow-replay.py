#!/usr/bin/env python3
"""cdi-airflow-replay.py - replay the HTTP exchange of the Airflow Braze provider's CDI sync-and-wait.

Written for this repository from a reading of the provider's source (none of its code is copied), so that the
service can be checked against what the provider sends and requires without installing Airflow: run by
test/cdi/cdi-airflow.test.ts, and against the demo as docs/cdi.md shows.

Mirrors: PyPI package `airflow-provider-braze` 1.0.4
         source repo github.com/eldar-elne/airflow-braze-provider
         commit b27ee8857a3c185bd7ae70e345d1999275a92bf5 (tag 1.0.4), files
         braze_provider/hooks/braze.py and braze_provider/operators/braze_cdi.py
         (BrazeRunCDIJobOperator -> BrazeHook.trigger_cdi_job_sync + BrazeHook.wait_for_cdi_job).
         Transport semantics mirror airflow.providers.http.hooks.http.HttpHook (apache/airflow
         providers/http/src/airflow/providers/http/hooks/http.py @ 9c62bfae76b8aa52642a4f935d1a204cc5433faf)
         plus python-requests defaults (headers, redirects, Response.json(), raise_for_status()).

Standard library only. Environment:
  BASE_URL        required. Used like the Airflow connection "host": if it contains "://" it is used
                  verbatim (a trailing "/" yields "//cdi/..." exactly as HttpHook does); otherwise
                  "http://" is prepended (HttpHook's default schema) - NOT https.
  API_KEY         required. Sent as "Authorization: Bearer <API_KEY>" (connection password).
  INTEGRATION_ID  required. Interpolated raw into the path (no URL-encoding), as the provider does.
  POLL_INTERVAL   optional, seconds, default 30 (operator default poll_interval).
  TIMEOUT         optional, seconds, default 3600 (operator default timeout).
  WAIT_FOR_COMPLETION optional, default "true"; "false" = trigger only (operator wait_for_completion=False).
  HTTP_TIMEOUT    optional, socket timeout in seconds; default none (HttpHook sends timeout=None).
  STRICT_ISO      optional, default "1": also reject sync_start_time strings that
                  datetime.fromisoformat() on Python 3.9/3.10 would reject (the provider supports
                  python_requires>=3.9; Airflow workers on 3.9/3.10 would crash on e.g. 2-digit
                  fractions or "+0000"). Set "0" to judge only with this interpreter's parser.

Output: one JSON object per line on stdout (requests, responses, poll decisions, final result).
Exit status: 0 only if the provider's operator would have returned normally (task success);
1 otherwise (any exception the provider would raise); 2 for bad usage.
Note: Airflow task-level retries (which would re-run the whole operator, re-POSTing /sync)
are not modelled.
"""
import codecs
import http.client
import json
import os
import re
import sys
import time
import zlib
from datetime import datetime, timezone
from urllib.parse import urljoin, urlsplit

# requests' default headers (requests.utils.default_headers); the exact requests version varies.
REQUESTS_DEFAULT_HEADERS = [
    ("User-Agent", "python-requests/2.32.3"),
    ("Accept-Encoding", "gzip, deflate"),
    ("Accept", "*/*"),
    ("Connection", "keep-alive"),
]
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_REDIRECTS = 30  # requests.models.DEFAULT_REDIRECT_LIMIT

# Python 3.7-3.10 datetime.fromisoformat grammar (after the provider's .replace("Z", "+00:00")).
PY310_ISO_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}"
    r"(?:.\d{2}(?::\d{2}(?::\d{2}(?:\.(?:\d{3}|\d{6}))?)?)?"
    r"(?:[+-]\d{2}:\d{2}(?::\d{2}(?:\.\d{6})?)?)?)?",
    re.DOTALL,
)


class ProviderFailure(Exception):
    """Anything the provider would raise (AirflowException, HTTPError, JSONDecodeError, ...)."""


def emit(obj):
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def env_bool(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    return v.strip().lower() in ("1", "true", "yes", "y", "on")


def build_base_url(host):
    # HttpHook._set_base_url: host with "://" used as-is, else f"{schema or 'http'}://{host}".
    if "://" in host:
        return host
    return "http://" + host if host else "http://"


def url_from_endpoint(base_url, endpoint):
    # airflow.providers.http.hooks.http._url_from_endpoint
    if base_url and not base_url.endswith("/") and endpoint and not endpoint.startswith("/"):
        return base_url + "/" + endpoint
    return (base_url or "") + (endpoint or "")


def should_strip_auth(old_url, new_url):
    # requests.sessions.SessionRedirectMixin.should_strip_auth
    old, new = urlsplit(old_url), urlsplit(new_url)
    if old.hostname != new.hostname:
        return True
    if (old.scheme == "http" and old.port in (80, None)
            and new.scheme == "https" and new.port in (443, None)):
        return False
    changed_port = old.port != new.port
    changed_scheme = old.scheme != new.scheme
    default_port = (DEFAULT_PORTS.get(old.scheme, None), None)
    if not changed_scheme and old.port in default_port and new.port in default_port:
        return False
    return changed_port or changed_scheme


def decode_content(body, headers):
    enc = (headers.get("content-encoding") or "").lower()
    for token in [t.strip() for t in enc.split(",") if t.strip()][::-1]:
        if token == "gzip":
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif token == "deflate":
            try:
                body = zlib.decompress(body)
            except zlib.error:
                body = zlib.decompress(body, -zlib.MAX_WBITS)
    return body


def send_once(method, url, headers, body, http_timeout):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ProviderFailure("InvalidSchema: No connection adapters were found for %r" % url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=http_timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in headers:
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, resp.reason, hdrs, decode_content(raw, hdrs)
    except (OSError, http.client.HTTPException) as exc:
        raise ProviderFailure("ConnectionError: %s: %s" % (type(exc).__name__, exc))
    finally:
        conn.close()


def request(step, method, url, api_key, http_timeout):
    """One requests.Session.send() with redirects, as HttpHook.run_and_check does."""
    headers = list(REQUESTS_DEFAULT_HEADERS) + [
        ("Authorization", "Bearer %s" % api_key),
        ("Content-Type", "application/json"),
    ]
    body = None
    if method not in ("GET", "HEAD"):
        headers.append(("Content-Length", "0"))  # requests: body None + non-GET -> Content-Length: 0
        body = b""
    for hop in range(MAX_REDIRECTS + 1):
        shown = [(k, "Bearer ***" if k == "Authorization" else v) for k, v in headers]
        emit({"event": "request", "step": step, "hop": hop, "method": method, "url": url,
              "headers": dict(shown), "body": None if not body else body.decode("latin-1")})
        status, reason, rh, content = send_once(method, url, headers, body, http_timeout)
        location = rh.get("location")
        if not (location and status in (301, 302, 303, 307, 308)):
            return status, reason, rh, content
        emit({"event": "redirect", "step": step, "status": status, "location": location})
        new_url = urljoin(url, "%s:%s" % (urlsplit(url).scheme, location) if location.startswith("//") else location)
        if status == 303 and method != "HEAD":
            method = "GET"
        if status == 302 and method != "HEAD":
            method = "GET"
        if status == 301 and method == "POST":
            method = "GET"
        if status not in (307, 308):
            headers = [(k, v) for k, v in headers
                       if k.lower() not in ("content-length", "content-type", "transfer-encoding")]
            body = None
        if should_strip_auth(url, new_url):
            headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
        url = new_url
    raise ProviderFailure("TooManyRedirects: Exceeded %d redirects." % MAX_REDIRECTS)


def guess_json_utf(data):
    # requests.utils.guess_json_utf
    sample = data[:4]
    if sample in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE):
        return "utf-32"
    if sample[:3] == codecs.BOM_UTF8:
        return "utf-8-sig"
    if sample[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "utf-16"
    nullcount = sample.count(b"\x00")
    if nullcount == 0:
        return "utf-8"
    if nullcount == 2:
        if sample[::2] == b"\x00\x00":
            return "utf-16-be"
        if sample[1::2] == b"\x00\x00":
            return "utf-16-le"
    if nullcount == 3:
        if sample[:3] == b"\x00\x00\x00":
            return "utf-32-be"
        if sample[1:] == b"\x00\x00\x00":
            return "utf-32-le"
    return None


def encoding_from_headers(headers):
    # requests.utils.get_encoding_from_headers
    ctype = headers.get("content-type")
    if not ctype:
        return None
    params = {}
    for item in ctype.split(";")[1:]:
        if "=" in item:
            k, v = item.split("=", 1)
            params[k.strip().lower()] = v.strip(" '\"")
    if "charset" in params:
        return params["charset"]
    if "text" in ctype:
        return "ISO-8859-1"
    if "application/json" in ctype:
        return "utf-8"
    return None


def response_json(headers, content):
    """requests.Response.json(): raises (-> task failure) if the body is not JSON."""
    enc = encoding_from_headers(headers)
    try:
        if not enc and content and len(content) > 3:
            guessed = guess_json_utf(content)
            if guessed is not None:
                return json.loads(content.decode(guessed))
        return json.loads(content.decode(enc or "utf-8", errors="replace"))
    except ValueError as exc:
        raise ProviderFailure("JSONDecodeError: %s" % exc)


def body_for_log(headers, content):
    try:
        return response_json(headers, content)
    except ProviderFailure:
        return content.decode("utf-8", errors="replace")


def is_http_error(status):
    # requests.Response.raise_for_status(): 400 <= status < 600
    return 400 <= status < 600


def trigger(base_url, api_key, integration_id, http_timeout):
    """BrazeHook.trigger_cdi_job_sync (check_response=False)."""
    url = url_from_endpoint(base_url, "/cdi/integrations/%s/sync" % integration_id)
    status, reason, rh, content = request("trigger", "POST", url, api_key, http_timeout)
    emit({"event": "response", "step": "trigger", "status": status, "reason": reason,
          "body": body_for_log(rh, content)})
    if status == 429:
        body = response_json(rh, content)
        try:
            message = body.get("message", "")
        except AttributeError as exc:
            raise ProviderFailure("AttributeError: %s" % exc)
        raise ProviderFailure("AirflowException: %s" % message)
    if is_http_error(status):
        kind = "Client" if status < 500 else "Server"
        raise ProviderFailure("HTTPError: %d %s Error: %s for url: %s" % (status, kind, reason, url))
    return response_json(rh, content)


def get_status(base_url, api_key, integration_id, http_timeout, poll_no):
    """BrazeHook.get_cdi_job_sync_status (check_response=True) -> response.json()["results"]."""
    url = url_from_endpoint(base_url, "/cdi/integrations/%s/job_sync_status" % integration_id)
    status, reason, rh, content = request("poll-%d" % poll_no, "GET", url, api_key, http_timeout)
    emit({"event": "response", "step": "poll-%d" % poll_no, "status": status, "reason": reason,
          "body": body_for_log(rh, content)})
    if is_http_error(status):
        raise ProviderFailure("AirflowException: %d:%s" % (status, reason))
    data = response_json(rh, content)
    try:
        return data["results"]
    except (KeyError, TypeError, IndexError) as exc:
        raise ProviderFailure("%s: %r" % (type(exc).__name__, exc))


def find_job_after(results, triggered_after, strict_iso):
    """BrazeHook._find_job_after: only results[0] is considered."""
    try:
        if not results:
            return None
        job = results[0]
        sync_start = job.get("sync_start_time", "")
        if not sync_start:
            return None
        normalized = sync_start.replace("Z", "+00:00")
        job_time = datetime.fromisoformat(normalized)
        if strict_iso and not PY310_ISO_RE.fullmatch(normalized):
            raise ValueError("Invalid isoformat string for Python 3.9/3.10: %r" % normalized)
        return job if job_time >= triggered_after else None
    except Exception as exc:  # TypeError (naive vs aware), ValueError, AttributeError, KeyError...
        raise ProviderFailure("%s: %s" % (type(exc).__name__, exc))


def wait_for_job(base_url, api_key, integration_id, triggered_after, poll_interval, timeout,
                 http_timeout, strict_iso):
    """BrazeHook.wait_for_cdi_job."""
    terminal = {"success", "partial", "error", "config_error"}
    errors = {"error", "config_error"}
    start = time.monotonic()
    poll_no = 0
    while True:
        poll_no += 1
        results = get_status(base_url, api_key, integration_id, http_timeout, poll_no)
        job = find_job_after(results, triggered_after, strict_iso)
        if job is None:
            elapsed = time.monotonic() - start
            emit({"event": "poll", "poll": poll_no, "decision": "no_job_yet",
                  "elapsed_s": round(elapsed, 3)})
            if elapsed + poll_interval > timeout:
                raise ProviderFailure("AirflowException: CDI job for integration %s did not appear "
                                      "within %ss after trigger." % (integration_id, timeout))
            time.sleep(poll_interval)
            continue
        status = job.get("job_status", "")
        try:
            is_terminal = status in terminal
            is_error = status in errors
        except TypeError as exc:  # unhashable job_status
            raise ProviderFailure("TypeError: %s" % exc)
        emit({"event": "poll", "poll": poll_no, "job_status": status,
              "decision": "error" if is_error else ("done" if is_terminal else "running")})
        if is_terminal:
            if is_error:
                raise ProviderFailure("AirflowException: CDI job for integration %s failed with "
                                      "status '%s': %s" % (integration_id, status, job))
            return job
        elapsed = time.monotonic() - start
        if elapsed + poll_interval > timeout:
            raise ProviderFailure("AirflowException: CDI job for integration %s timed out after %ss. "
                                  "Last status: '%s'" % (integration_id, timeout, status))
        time.sleep(poll_interval)


def main():
    base = os.environ.get("BASE_URL")
    api_key = os.environ.get("API_KEY")
    integration_id = os.environ.get("INTEGRATION_ID")
    if base is None or api_key is None or integration_id is None:
        sys.stderr.write("BASE_URL, API_KEY and INTEGRATION_ID must be set\n")
        return 2
    poll_interval = float(os.environ.get("POLL_INTERVAL") or 30)
    timeout = float(os.environ.get("TIMEOUT") or 3600)
    wait = env_bool("WAIT_FOR_COMPLETION", True)
    strict_iso = env_bool("STRICT_ISO", True)
    http_timeout = float(os.environ["HTTP_TIMEOUT"]) if os.environ.get("HTTP_TIMEOUT") else None
    base_url = build_base_url(base)
    try:
        triggered_after = datetime.now(timezone.utc)  # taken BEFORE the POST, on this machine's clock
        emit({"event": "start", "base_url": base_url, "integration_id": integration_id,
              "triggered_after": triggered_after.isoformat(), "poll_interval": poll_interval,
              "timeout": timeout, "wait_for_completion": wait, "strict_iso": strict_iso})
        trigger_response = trigger(base_url, api_key, integration_id, http_timeout)
        if not wait:
            emit({"event": "result", "success": True, "returned": trigger_response})
            return 0
        job = wait_for_job(base_url, api_key, integration_id, triggered_after, poll_interval,
                           timeout, http_timeout, strict_iso)
        emit({"event": "result", "success": True, "returned": job,
              "job_status": job.get("job_status"), "rows_synced": job.get("rows_synced"),
              "rows_failed_with_errors": job.get("rows_failed_with_errors")})
        return 0
    except ProviderFailure as exc:
        emit({"event": "result", "success": False, "error": str(exc)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
