# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""run_objects and run_objects_info when nothing listens: a failed result that a task can carry (text, not exceptions)."""

from __future__ import annotations

import json
import socket

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import AUTH_ARG_SPEC
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import OBJECTS_ARG_SPEC, run_objects, run_objects_info


@pytest.fixture
def closed_port_kubeconfig(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))
    return str(path)


def params(spec, **values):
    out = {key: value.get("default") for key, value in spec.items()}
    out.update(values, request_timeout=2)
    return out


def test_an_unreachable_api_server_gives_a_failed_result_of_plain_values(closed_port_kubeconfig):
    written = run_objects(params(OBJECTS_ARG_SPEC, kubeconfig=closed_port_kubeconfig, resource_definition={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}))
    read = run_objects_info(params(AUTH_ARG_SPEC, kubeconfig=closed_port_kubeconfig, kind="Node", api_version="v1", name=None,
                                   namespace=None, label_selectors=[], field_selectors=[], queries=None, wait=False))
    for result in (written, read):
        assert result["failed"] and result["msg"]
        json.dumps(result)  # what ansible-core must send back from the task: no exception objects


def test_a_refused_connection_after_discovery_gives_its_reason_as_text():
    """kubernetes.core wraps urllib3's MaxRetryError, whose reason is the connection error itself (an exception)."""
    import urllib3

    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import _failure

    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    wrapped = RuntimeError("Failed to patch object")
    wrapped.__cause__ = urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces/default/configmaps/a", reason=refused)
    result = _failure(wrapped)
    assert result["failed"] and result["msg"] == "Failed to patch object"
    assert "Connection refused" in result["reason"]
    json.dumps(result)


def test_a_lock_on_an_unreachable_api_server_fails_with_a_message_and_applies_nothing(closed_port_kubeconfig):
    from ansible_collections.gpushare.k8s.plugins.module_utils.lab.manifests import MANIFESTS_ARG_SPEC, run_manifests

    definition = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}}
    lock = dict(kind="ResourceQuota", api_version="v1", name="gpu-quota", namespace="team-a", seconds=60)
    result = run_manifests(params(MANIFESTS_ARG_SPEC, kubeconfig=closed_port_kubeconfig, lock=lock,
                                  manifests=[dict(path="", namespace="", mode="0644", apply=True, content=json.dumps(definition))]))

    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("lock: ResourceQuota team-a/gpu-quota: "), result["msg"]
    json.dumps(result)


@pytest.mark.parametrize("seconds", [0, -5, True, "60"])
def test_a_lock_that_lasts_no_time_is_refused_before_any_call(seconds):
    from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import LockError, held

    with pytest.raises(LockError, match=r"^lock\.seconds: .* Fix: give a whole number of at least 1"):
        with held({}, dict(kind="ResourceQuota", name="q", namespace="n", seconds=seconds)):
            pass
