"""`scim-sanity probe` as published, against BASE_URL, with the X-Request-Origin header this service requires (its
CLI has --token but no option for other headers). Prints scim-sanity's report, every answer of 400 or more (its
report gives only the status), and a closing counts line.

Env: BASE_URL, TOKEN, ORIGIN. Counting: PASS passes; FAIL and ERROR fail; SKIP is skipped.
"""

import os
import sys

import scim_sanity.http_client as http_client
import scim_sanity.probe.runner as runner
from scim_sanity.cli import main as cli_main
from scim_sanity.probe.report import build_results_dict

origin = os.environ.get("ORIGIN", "scim-conformance.sh")
_build_headers = http_client.SCIMClient._build_headers


def build_headers(self, extra=None, method=""):
    headers = _build_headers(self, extra, method=method)
    headers.setdefault("X-Request-Origin", origin)
    return headers


http_client.SCIMClient._build_headers = build_headers

refusals = []
_request = http_client.SCIMClient._request


def request(self, method, path, payload=None, extra_headers=None):
    resp = _request(self, method, path, payload, extra_headers)
    if resp.status_code >= 400:
        refusals.append(f"{method} {path} -> {resp.status_code} {resp.body[:300]}")
    return resp


http_client.SCIMClient._request = request

_print_results = runner.print_results


def print_results(results, json_output=False, mode="strict", version="", timestamp=""):
    _print_results(results, json_output=json_output, mode=mode, version=version, timestamp=timestamp)
    summary = build_results_dict(results, mode=mode, version=version, timestamp=timestamp)["summary"]
    print("\nanswers of 400 or more (expected ones included):")
    for line in refusals:
        print(f"  {line}")
    failed = summary.get("failed", 0) + summary.get("errors", 0)
    print(f"\nwarnings (a SHOULD missed, not counted as failures): {summary.get('warnings', 0)}")
    print(f"scim-sanity: {summary.get('passed', 0)} passed, {failed} failed, {summary.get('skipped', 0)} skipped")


runner.print_results = print_results
sys.argv = ["scim-sanity", "probe", os.environ["BASE_URL"].rstrip("/"), "--token", os.environ["TOKEN"], "--i-accept-side-effects"]
cli_main()
