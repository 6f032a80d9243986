# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Two writers create the same object at once, on the live lab cluster.

kubernetes.core reads an object and creates it when it was absent. When another writer (a second lab
run) creates it in between, the API server refuses the create: 409 AlreadyExists, or an admission
error first (a full quota: admission runs before storage sees the name). ``gpushare.k8s.objects`` then
acts on the object that exists now. Here the other writer is kubectl, run right after the collection's
read: every answer comes from the real API server.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils import k8s_objects
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s_objects import OBJECTS_ARG_SPEC, run_objects

NAMESPACE = "it-objects-race"


@pytest.fixture
def namespace(kubectl):
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=120)
    kubectl("create", "namespace", NAMESPACE)
    yield NAMESPACE
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


@pytest.fixture
def other_writer_after_first_read(monkeypatch, kubectl):
    """Make kubectl act (``kubectl <args>``) right after the collection's first read of the object; by default it
    creates ``manifest``. Returns the list of what each read found."""
    def arm(manifest=None, args=("create", "-f", "-")):
        reads = []

        class Service(k8s_objects.K8sService):
            def retrieve(self, resource, definition):
                existing = super().retrieve(resource, definition)
                reads.append(existing)
                if len(reads) == 1:
                    kubectl(*args, input_text=None if manifest is None else json.dumps(manifest))
                return existing

        monkeypatch.setattr(k8s_objects, "K8sService", Service)
        return reads
    return arm


def params(kubeconfig, definition):
    out = {key: value.get("default") for key, value in OBJECTS_ARG_SPEC.items()}
    out.update(kubeconfig=kubeconfig, resource_definition=definition)
    return out


def test_an_object_created_meanwhile_is_updated_to_the_definition(kubeconfig, kubectl, namespace, other_writer_after_first_read):
    theirs = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "namespace": namespace},
              "data": {"owner": "other", "kept": "yes"}}
    ours = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "namespace": namespace},
            "data": {"owner": "us"}}
    reads = other_writer_after_first_read(theirs)

    result = run_objects(params(kubeconfig, ours))

    assert not result.get("failed"), result
    assert reads[0] is None  # the first read found nothing: the create raced with kubectl's
    assert result["method"] == "update" and result["changed"] is True
    assert not any("409" in warning for warning in result.get("warnings", []))
    data = json.loads(kubectl("get", "configmap", "shared", "-n", namespace, "-o", "json").stdout)["data"]
    assert data == {"owner": "us", "kept": "yes"}  # a strategic merge patch of what the other writer made


def test_a_pod_created_meanwhile_under_a_full_quota_is_not_a_quota_failure(
        kubeconfig, kubectl, namespace, other_writer_after_first_read):
    """The failure CI saw when two lab runs started a team's Pods at once: 403 exceeded quota, not 409."""
    kubectl("create", "quota", "one-pod", "--hard=pods=1", "-n", namespace)
    kubectl("wait", "--for=jsonpath={.status.hard.pods}=1", "resourcequota/one-pod", "-n", namespace, "--timeout=60s")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job", "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    reads = other_writer_after_first_read(pod)

    result = run_objects(params(kubeconfig, pod))

    assert not result.get("failed"), result
    assert reads[0] is None
    # An update of the Pod kubectl made (kwok may have placed it meanwhile, so whether it changed is not asserted).
    assert result["method"] == "update" and result["result"]["metadata"]["name"] == "job"


def test_a_create_refused_for_its_own_reason_still_fails_with_it(kubeconfig, kubectl, namespace):
    """Refused by a full quota, and nobody creates the Pod: the API server's refusal, after looking for 0.85 s."""
    kubectl("create", "quota", "no-pods", "--hard=pods=0", "-n", namespace)
    kubectl("wait", "--for=jsonpath={.status.hard.pods}=0", "resourcequota/no-pods", "-n", namespace, "--timeout=60s")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job", "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

    result = run_objects(params(kubeconfig, pod))

    assert result["failed"]
    assert "Failed to create object" in result["msg"] and "exceeded quota: no-pods" in result["msg"]


def test_an_object_deleted_meanwhile_is_absent_not_a_failure(kubeconfig, kubectl, namespace, other_writer_after_first_read):
    """The failure two lab runs at once met: both read the intent Pod, the other run deleted it first, and this run's
    delete got 404 NotFound. The object is gone, as asked: unchanged, and no error."""
    kubectl("create", "configmap", "going", "-n", namespace, "--from-literal=k=v")
    reads = other_writer_after_first_read(args=("delete", "configmap", "going", "-n", namespace))
    definition = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "going", "namespace": namespace}}

    result = run_objects(dict(params(kubeconfig, definition), state="absent", wait=True, wait_sleep=0.2))

    assert not result.get("failed"), result
    assert reads[0] is not None and len(reads) >= 2  # found, then read again after the 404
    assert result["changed"] is False
    assert kubectl("get", "configmap", "going", "-n", namespace, check=False).returncode != 0


def test_an_object_deleted_before_the_patch_is_created_again(kubeconfig, kubectl, namespace, other_writer_after_first_read):
    """The other half of two lab runs at once: this run found the intent Pod (the other run's), the other run then
    deleted it, and this run's patch got 404 NotFound. The object is created to the definition instead."""
    kubectl("create", "configmap", "back", "-n", namespace, "--from-literal=owner=other")
    reads = other_writer_after_first_read(args=("delete", "configmap", "back", "-n", namespace))
    definition = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "back", "namespace": namespace},
                  "data": {"owner": "us"}}

    result = run_objects(params(kubeconfig, definition))

    assert not result.get("failed"), result
    assert reads[0] is not None and reads[1] is None  # found, then (after the 404) found gone
    assert result["method"] == "create" and result["changed"] is True
    data = json.loads(kubectl("get", "configmap", "back", "-n", namespace, "-o", "json").stdout)["data"]
    assert data == {"owner": "us"}
