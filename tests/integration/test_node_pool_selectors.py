# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node pools' label selectors against the API server's own: the selector cases of the unit tests, every one
evaluated by the API server (a list with ``labelSelector`` over objects carrying the cases' labels) and by
``node_pools.selector_matches``; any disagreement fails.

The API server takes a selector as text on a list: this file writes each ``matchLabels`` / ``matchExpressions``
selector out in that syntax itself (``k=v``, ``k in (a,b)``, ``k notin (a)``, ``k``, ``!k``, ANDed with commas).
"""
from __future__ import annotations

import importlib.util
import uuid

import pytest
from kubernetes import client

from conftest import REPO
from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.node_pools import selector_matches


def _unit_cases():
    path = REPO / "tests" / "unit" / "plugins" / "module_utils" / "test_node_pools.py"
    spec = importlib.util.spec_from_file_location("node_pool_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


CASES = _unit_cases()
# The objects the API server filters: every label set the cases use, and one without labels.
LABEL_SETS = {}
for _selector, _labels, _matches in CASES:
    LABEL_SETS.setdefault(tuple(sorted(_labels.items())), "labels-%d" % len(LABEL_SETS))
SELECTORS = []
for _selector, _labels, _matches in CASES:
    if _selector not in SELECTORS:
        SELECTORS.append(_selector)


def as_text(selector):
    """A LabelSelector in the API's text syntax."""
    parts = ["%s=%s" % (key, value) for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        parts.append({"In": "%s in (%s)", "NotIn": "%s notin (%s)"}[operator] % (key, ",".join(values))
                     if operator in ("In", "NotIn") else (key if operator == "Exists" else "!" + key))
    return ",".join(parts)


@pytest.fixture(scope="module")
def objects(api_client):
    core = client.CoreV1Api(api_client)
    namespace = "gpushare-selectors-%s" % uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        for labels, name in LABEL_SETS.items():
            core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": dict(labels)}})
        yield core, namespace
    finally:
        core.delete_namespace(namespace)


@pytest.mark.parametrize("selector", SELECTORS, ids=[as_text(selector) or "everything" for selector in SELECTORS])
def test_pool_selectors_match_what_the_api_server_matches(objects, selector):
    core, namespace = objects
    listed = core.list_namespaced_config_map(namespace, label_selector=as_text(selector)).items
    served = {item.metadata.name for item in listed} & set(LABEL_SETS.values())  # not the namespace's kube-root-ca.crt
    ours = {name for labels, name in LABEL_SETS.items() if selector_matches(selector, dict(labels))}
    assert ours == served, (as_text(selector), sorted(ours), sorted(served))


def test_the_cases_reach_both_answers():
    """Not vacuous: the API server is asked selectors that match some objects and miss others."""
    assert len(LABEL_SETS) >= 5 and len(SELECTORS) >= 15
