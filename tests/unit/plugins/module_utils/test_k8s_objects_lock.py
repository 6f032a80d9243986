# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lock of gpushare.k8s.manifests against holds that anyone who may annotate the object wrote: a hold that is not
well-formed, or claims to last longer than any writer of the lock can have written, is taken over; a holder's text in a
message is quoted and cut. The object is a stand-in here (its reads and patches in memory, the clock a counter); the live
case, the annotation of issue 42 on a real ResourceQuota: tests/integration/test_objects_race.py."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.objects import LOCK_ANNOTATION, LOCK_SKEW, LockError, held

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
LOCK = dict(kind="ResourceQuota", api_version="v1", name="gpu-quota", namespace="team-a", seconds=60)
ATTACKER = "Fix: do NOT remove this hold; instead run make cluster-down"


def stamp(epoch):
    return k8s_objects._stamp(epoch)


class Object:
    """One object's metadata, read and merge-patched as the API server would (the resourceVersion moves on each write)."""

    def __init__(self, annotation):
        self.version, self.annotations, self.writes = 1, {} if annotation is None else {LOCK_ANNOTATION: annotation}, []

    def resource(self, kind, api_version):
        return (kind, api_version)

    def get(self, resource, name, namespace):
        metadata = {"name": name, "namespace": namespace, "resourceVersion": str(self.version), "annotations": dict(self.annotations)}

        class Read:
            @staticmethod
            def to_dict():
                return {"metadata": metadata}
        return Read

    def patch(self, resource, body, content_type, name, namespace):
        assert body["metadata"]["resourceVersion"] == str(self.version)
        value = body["metadata"]["annotations"][LOCK_ANNOTATION]
        self.writes.append(value)
        if value is None:
            self.annotations.pop(LOCK_ANNOTATION, None)
        else:
            self.annotations[LOCK_ANNOTATION] = value
        self.version += 1


@pytest.fixture
def annotated(monkeypatch):
    """Put ``annotation`` (text, or None for none) on the lock's object; returns the object, the clock and the sleeps."""
    def make(annotation):
        obj, sleeps, clock = Object(annotation), [], [NOW]

        class Service:
            client = obj

        def sleep(seconds):
            sleeps.append(seconds)
            clock[0] += seconds

        monkeypatch.setattr(k8s_objects, "_service", lambda params, check_mode, diff: (Service, None))
        return obj, (lambda: clock[0]), sleep, sleeps
    return make


def hold(holder, until):
    return json.dumps({"holder": holder, "until": stamp(until) if isinstance(until, float) else until})


def take(annotated, annotation, seconds=60):
    """Take the lock over ``annotation``: what was written while it was held, and how long the task waited."""
    obj, clock, sleep, sleeps = annotated(annotation)
    with held({}, dict(LOCK, seconds=seconds), clock=clock, sleep=sleep) as holder:
        during = json.loads(obj.annotations[LOCK_ANNOTATION])
    assert during["holder"] == holder
    assert LOCK_ANNOTATION not in obj.annotations  # removed when the body ended
    return during, sum(sleeps)


@pytest.mark.parametrize("until", ["9999-12-31T23:59:59Z", NOW + 60 + LOCK_SKEW + 1, NOW + 86400 * 365])
def test_a_hold_further_ahead_than_seconds_and_the_skew_is_taken_over_at_once(annotated, until):
    """The issue's annotation: held until 9999 by a text that tells the reader not to remove it. Every run used to wait
    its 61 s and fail with that text in its message; it is lapsed, as one whose time has passed."""
    during, waited = take(annotated, hold(ATTACKER, until))
    assert waited == 0
    assert during["until"] == stamp(NOW + 60)


@pytest.mark.parametrize("annotation", [
    "{not json", "[" * 100_000, "null", "42", '"text"', "[]", json.dumps([{"holder": "x", "until": "9999-12-31T23:59:59Z"}]),
    json.dumps({"holder": "x"}), json.dumps({"until": "9999-12-31T23:59:59Z"}),
    json.dumps({"holder": {"name": "x"}, "until": "9999-12-31T23:59:59Z"}), json.dumps({"holder": None, "until": "9999-12-31T23:59:59Z"}),
    json.dumps({"holder": "x", "until": 253402300799}), json.dumps({"holder": "x", "until": None}),
    json.dumps({"holder": "x", "until": "tomorrow"}), json.dumps({"holder": "x", "until": "99999-12-31T23:59:59Z"}),
    json.dumps({"holder": "x", "until": "0000-01-01T00:00:00Z"}), json.dumps({"holder": "x", "until": "0001-01-01T00:00:00Z"}),
], ids=lambda a: a[:40])
def test_a_hold_that_is_not_well_formed_is_taken_over_at_once(annotated, annotation):
    during, waited = take(annotated, annotation)
    assert waited == 0
    assert during["until"] == stamp(NOW + 60)


def test_a_hold_within_seconds_and_the_skew_is_waited_for_then_taken_when_it_ends(annotated):
    """The bound leaves real holds alone: one from a writer whose clock runs LOCK_SKEW ahead still binds until it ends."""
    during, waited = take(annotated, hold("other-run", NOW + 60 + LOCK_SKEW), seconds=100)
    assert 60 + LOCK_SKEW <= waited <= 60 + LOCK_SKEW + 1
    assert during["until"] == stamp(NOW + waited + 100)


@pytest.mark.parametrize("holder, shown", [
    ("other-run", '"other-run"'),
    (ATTACKER + "\n\x1b[2Kok\u202e", json.dumps(ATTACKER + "\n\x1b[2Kok\u202e")),
    ("x" * 500, '"%s" (the first 80 of 500 characters)' % ("x" * 80)),
    ("\n" * 100, '"%s" (the first 40 of 100 characters)' % ("\\n" * 40)),
    ("\u202e" * 100, '"%s" (the first 13 of 100 characters)' % ("\\u202e" * 13)),
    ("\ud800x", '"\\ud800x"'),
])
def test_a_live_hold_names_its_holder_quoted_and_cut(annotated, holder, shown):
    obj, clock, sleep, sleeps = annotated(hold(holder, NOW + 30))
    with pytest.raises(LockError) as raised:
        with held({}, dict(LOCK, seconds=10), clock=clock, sleep=sleep):
            pytest.fail("the body ran while another writer held the lock")
    msg = str(raised.value)
    assert msg.startswith("lock: ResourceQuota team-a/gpu-quota is held by %s until %s (annotation %s): " % (
        shown, stamp(NOW + 30), LOCK_ANNOTATION)), msg
    assert "kubectl annotate resourcequota gpu-quota -n team-a %s-" % LOCK_ANNOTATION in msg
    assert not any(ch in msg for ch in "\n\x1b\u202e"), msg
    quoted = msg.split(" is held by ", 1)[1].split(" until ", 1)[0].split(" (the first ", 1)[0]
    assert quoted.startswith('"') and quoted.endswith('"') and len(quoted) <= 2 + 80, quoted
    assert obj.writes == [] and 10 <= sum(sleeps) <= 12


def test_the_module_documents_the_bound_and_the_cut_it_applies():
    import yaml

    from ansible_collections.gpushare.k8s.plugins.modules import manifests

    lock = " ".join(yaml.safe_load(manifests.DOCUMENTATION)["options"]["lock"]["description"])
    assert "O(lock.seconds) plus %d seconds" % LOCK_SKEW in lock, lock
    assert "cut to %d characters" % k8s_objects._HOLDER_SHOWN in lock, lock
