"""The value rules of this service that no SCIM schema can express, applied to scim2-tester's random data.

scim2-tester fills every attribute with random strings guided only by /Schemas. Three rules of the API spec refuse
such strings, on purpose (docs/scim.md, "Conformance suites", says why):

  * userName is an email address: a random userName becomes "scim2-tester-<hex>@example.com";
  * department and permission strings come from the company's allowed lists: a random department becomes one of
    SCIM_DEPARTMENTS, a random companyPermissions one of SCIM_COMPANY_PERMISSIONS;
  * workspaces, teams and permission sets must exist in the company, and a workspace entry carries direct
    permissions or one permission set, never both: a random appGroup becomes [] (no workspace entry).

Everything else is as scim2-tester generates it, and every check runs as published. The permissions rule applies to
a user's permissions and to a group's role (our Group extension) alike.
"""

import os
import random
import sys
import uuid

import scim2_tester.filling as filling

DEPARTMENTS = [d for d in os.environ.get("SCIM_DEPARTMENTS", "agency,bi,c_suite,engineering,finance,marketing,pm").split(",") if d]
# One string by default: department and permissions are one attribute shown twice (at the root, as the API spec shows
# them, and in our extension), and scim2-tester adds to each as if they were two. Adding a second string to what the
# first add set is, by RFC 7644 3.5.2.1, a union, which the suite then compares with the second value alone.
COMPANY_PERMISSIONS = [p for p in os.environ.get("SCIM_COMPANY_PERMISSIONS", "manage_company_settings").split(",") if p]

_generate = filling.generate_random_value


def _leaf(path) -> str:
    """'urn:...:ces:2.0:User:permissions.companyPermissions' -> 'permissions.companypermissions'."""
    text = str(path)
    if text.lower().startswith("urn:"):
        text = text.rsplit(":", 1)[-1]
    return text.lower()


def _permissions(field_type):
    value = {"companyPermissions": [random.choice(COMPANY_PERMISSIONS)], "appGroup": []}
    return field_type.model_validate(value) if hasattr(field_type, "model_validate") else value


def generate_random_value(context, path, mutability=None, required=None):
    value = _generate(context, path, mutability=mutability, required=required)
    if value is None:  # left out by the mutability or required filter: stays out
        return None
    leaf = _leaf(path)
    if leaf == "username":
        return f"scim2-tester-{uuid.uuid4().hex[:12]}@example.com"
    if leaf == "department":
        return random.choice(DEPARTMENTS)
    if leaf == "permissions":
        return _permissions(path.field_type)
    if leaf == "permissions.companypermissions":
        return [random.choice(COMPANY_PERMISSIONS)]
    if leaf == "permissions.appgroup":
        return []
    if leaf.startswith("permissions.appgroup."):
        return None
    return value


def enable() -> None:
    """Every scim2-tester module that imported generate_random_value uses the rule-following one."""
    for name, module in list(sys.modules.items()):
        if name.startswith("scim2_tester") and getattr(module, "generate_random_value", None) is _generate:
            module.generate_random_value = generate_random_value
