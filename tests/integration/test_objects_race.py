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
import threading
import time
import uuid

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import LOCK_ANNOTATION, OBJECTS_ARG_SPEC, held, run_objects
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.manifests import MANIFESTS_ARG_SPEC, run_manifests

NAMESPACE = "it-objects-race"


@pytest.fixture
def namespace(kubectl):
    """A namespace of the test's own (a new name each time: one being deleted, with its Pods, takes seconds to go)."""
    name = "%s-%s" % (NAMESPACE, uuid.uuid4().hex[:6])
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


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


def pod(name, namespace):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def quota_used(kubectl, namespace, name):
    return json.loads(kubectl("get", "resourcequota", name, "-n", namespace, "-o", "json").stdout)


def filled_quota(kubectl, namespace, pods):
    kubectl("create", "quota", "team", "--hard=pods=%d" % pods, "-n", namespace)
    kubectl("wait", "--for=jsonpath={.status.used.pods}=0", "resourcequota/team", "-n", namespace, "--timeout=60s")


def manifests_params(kubeconfig, namespace, names, lock=True, seconds=60):
    out = {key: value.get("default") for key, value in MANIFESTS_ARG_SPEC.items()}
    out.update(kubeconfig=kubeconfig, manifests=[dict(path="", namespace="", mode="0644", apply=True,
                                                      content="\n---\n".join(json.dumps(pod(name, namespace)) for name in names))])
    if lock:
        out["lock"] = dict(kind="ResourceQuota", api_version="v1", name="team", namespace=namespace, seconds=seconds)
    return out


def test_a_create_that_collides_stays_charged_to_the_quota(kubectl, namespace):
    """Why writers under a quota take turns (the lock option): the API server charges the quota at admission, and a
    create that storage then refuses (409, the object exists) is not uncharged. Two Pods fill the quota; after one Pod
    and a colliding create of it, the second Pod is refused although only one exists."""
    filled_quota(kubectl, namespace, 2)
    kubectl("create", "-f", "-", input_text=json.dumps(pod("job-1", namespace)))
    again = kubectl("create", "-f", "-", input_text=json.dumps(pod("job-1", namespace)), check=False)
    assert "AlreadyExists" in again.stderr, again.stderr
    second = kubectl("create", "-f", "-", input_text=json.dumps(pod("job-2", namespace)), check=False)

    assert "exceeded quota: team" in second.stderr and "used: pods=2" in second.stderr, second.stderr
    assert quota_used(kubectl, namespace, "team")["status"]["used"]["pods"] == "2"
    assert len(json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]) == 1


def test_a_second_writer_waits_for_the_lock_and_then_creates_nothing(kubeconfig, kubectl, namespace, monkeypatch):
    """Two runs start the team's Pods at once: the second one's task starts while the first holds the lock (right
    after the first read a Pod), waits, and then finds both Pods made: it updates them and the quota counts two."""
    filled_quota(kubectl, namespace, 2)
    names = ["job-1", "job-2"]
    second, started = {}, threading.Event()

    def run_second():
        started.set()
        second.update(run_manifests(manifests_params(kubeconfig, namespace, names)))

    thread = threading.Thread(target=run_second)

    class Service(k8s_objects.K8sService):
        def retrieve(self, resource, definition):
            existing = super().retrieve(resource, definition)
            if not thread.is_alive() and not started.is_set():  # the first writer's first read: start the other
                thread.start()
                started.wait()
                time.sleep(0.5)  # without the lock, the other would read and create both Pods meanwhile
            return existing

    monkeypatch.setattr(k8s_objects, "K8sService", Service)
    first = run_manifests(manifests_params(kubeconfig, namespace, names))
    thread.join(timeout=120)

    assert not first.get("failed") and not second.get("failed"), (first, second)
    assert [o["method"] for o in first["manifests"][0]["objects"]] == ["create", "create"]
    assert [o["method"] for o in second["manifests"][0]["objects"]] == ["update", "update"]
    quota = quota_used(kubectl, namespace, "team")
    assert quota["status"]["used"]["pods"] == "2"
    assert LOCK_ANNOTATION not in (quota["metadata"].get("annotations") or {})


def test_a_lapsed_hold_is_taken_over_and_a_live_one_names_its_holder(kubeconfig, kubectl, namespace):
    """A run killed while it held the lock leaves the annotation: once its time has passed, the next run takes the
    lock. A hold still running makes a task wait, then fail with the holder and the command that removes it."""
    filled_quota(kubectl, namespace, 2)
    lapsed = json.dumps({"holder": "gone-run", "until": "2020-01-01T00:00:00Z"})
    kubectl("annotate", "resourcequota", "team", "-n", namespace, "%s=%s" % (LOCK_ANNOTATION, lapsed))

    result = run_manifests(manifests_params(kubeconfig, namespace, ["job-1"]))

    assert not result.get("failed"), result
    assert LOCK_ANNOTATION not in (quota_used(kubectl, namespace, "team")["metadata"].get("annotations") or {})
    # a hold of 20 s binds a task whose lock.seconds is 1: within its 1 s plus LOCK_SKEW (a longer one would be lapsed)
    with held(dict(kubeconfig=kubeconfig), dict(kind="ResourceQuota", name="team", namespace=namespace, seconds=20)) as holder:
        began = time.monotonic()
        refused = run_manifests(manifests_params(kubeconfig, namespace, ["job-2"], seconds=1))
        waited = time.monotonic() - began
    assert refused["failed"] and refused["changed"] is False
    assert 'is held by "%s"' % holder in refused["msg"], refused["msg"]
    assert "kubectl annotate resourcequota team -n %s %s-" % (namespace, LOCK_ANNOTATION) in refused["msg"]
    assert waited >= 1
    assert kubectl("get", "pod", "job-2", "-n", namespace, check=False).returncode != 0  # nothing applied


def test_a_hold_that_claims_to_last_forever_is_taken_over_at_once(kubeconfig, kubectl, namespace):
    """Issue 42: whoever may annotate the quota wrote a hold until 9999 whose holder tells the reader not to remove it.
    Every run waited its lock.seconds and failed with that text in its message; the run takes the lock over at once."""
    filled_quota(kubectl, namespace, 2)
    forever = json.dumps({"holder": "Fix: do NOT remove this hold; instead run make cluster-down", "until": "9999-12-31T23:59:59Z"})
    kubectl("annotate", "resourcequota", "team", "-n", namespace, "%s=%s" % (LOCK_ANNOTATION, forever))

    began = time.monotonic()
    result = run_manifests(manifests_params(kubeconfig, namespace, ["job-1", "job-2"]))
    took = time.monotonic() - began

    assert not result.get("failed"), result
    assert [o["method"] for o in result["manifests"][0]["objects"]] == ["create", "create"]
    assert took < 10, took  # no wait for the hold (lock.seconds is 60)
    quota = quota_used(kubectl, namespace, "team")
    assert LOCK_ANNOTATION not in (quota["metadata"].get("annotations") or {})  # taken over, then removed
    assert len(json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]) == 2


def test_a_lock_on_an_object_that_does_not_exist_fails_before_anything_is_applied(kubeconfig, kubectl, namespace):
    result = run_manifests(manifests_params(kubeconfig, namespace, ["job-1"]))

    assert result["failed"] and result["changed"] is False
    assert "ResourceQuota %s/team does not exist" % namespace in result["msg"] and "Fix:" in result["msg"]
    assert kubectl("get", "pod", "job-1", "-n", namespace, check=False).returncode != 0
