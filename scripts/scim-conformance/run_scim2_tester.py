"""scim2-tester's check_server against BASE_URL, as its CLI runs it, plus the X-Request-Origin header this service
requires (the CLI takes --token only). Prints every check and a closing counts line.

Env: BASE_URL, TOKEN, ORIGIN; VALUE_RULES=0 runs with scim2-tester's data as published (see value_rules.py);
VERBOSE=1 prints the data of failed checks.
Counting: SUCCESS, COMPLIANT and ACCEPTABLE pass; ERROR, CRITICAL and DEVIATION fail; SKIPPED is skipped.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from httpx import Client  # noqa: E402
from scim2_client.engines.httpx import SyncSCIMClient  # noqa: E402

from scim2_tester import Status, check_server  # noqa: E402

if os.environ.get("VALUE_RULES", "1") != "0":
    import value_rules

    value_rules.enable()

client = SyncSCIMClient(
    Client(
        base_url=os.environ["BASE_URL"].rstrip("/"),
        headers={"Authorization": f"Bearer {os.environ['TOKEN']}", "X-Request-Origin": os.environ.get("ORIGIN", "scim-conformance.sh")},
        timeout=30,
    )
)
client.discover()
results = check_server(client)

PASSED = {Status.SUCCESS, Status.COMPLIANT, Status.ACCEPTABLE}
FAILED = {Status.ERROR, Status.CRITICAL, Status.DEVIATION}
for r in results:
    where = f" [{r.resource_type}]" if r.resource_type else ""
    print(f"{r.status.name:<10} {r.title}{where}")
    if r.status not in PASSED and r.reason:
        print(f"           {r.reason}")
    if os.environ.get("VERBOSE") == "1" and r.status in FAILED and r.data is not None:
        print(f"           data: {r.data!r}"[:2000])
passed = sum(r.status in PASSED for r in results)
failed = sum(r.status in FAILED for r in results)
skipped = sum(r.status == Status.SKIPPED for r in results)
print(f"\nscim2-tester: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
