# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write and read Kubernetes objects with kubernetes.core's own service, in the calling process.

A ``kubernetes.core.k8s`` or ``k8s_info`` task starts a Python process, imports ``kubernetes`` and
builds a client: 0.7-0.9 s, against milliseconds for the API calls. The collection's action plugins
``gpushare.k8s.objects`` and ``gpushare.k8s.objects_info`` call :func:`run_objects` and
:func:`run_objects_info` in the controller instead, where ``kubernetes`` is imported once per
playbook run; the module files of the same names call them on a remote host.

The work is kubernetes.core's: its ``K8sService`` finds, creates, patches, deletes and waits, its
``perform_action`` decides create/update/delete and diffs, with the semantics of the two modules
(strategic merge patch, server-side dry run in check mode). What this file adds: the client is the
collection's (``k8s_auth.build_api_client``: ``request_timeout`` and retries), a module stand-in
that returns instead of exiting, several definitions or several reads in one call, and a diff list
that ``--diff`` shows for every object.

No Ansible controller import: pytest reaches it directly.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import os
import socket
import time
import traceback
import uuid

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
    DELETE_OPTS_ARG_SPEC,
    NAME_ARG_SPEC,
    RESOURCE_ARG_SPEC,
    WAIT_ARG_SPEC,
)

try:
    from ansible_collections.kubernetes.core.plugins.module_utils import k8sdynamicclient
    from ansible_collections.kubernetes.core.plugins.module_utils.client.discovery import LazyDiscoverer
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import K8SClient
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner import get_definitions, perform_action
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService, decode_response
    from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

    class CoreException(Exception):  # placeholder so except clauses stay valid
        pass

else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

from ..errors import GpushareError, is_int
from .auth import AUTH_ARG_SPEC, K8sAuthError, build_api_client


__all__ = [
    "LOCK_ANNOTATION",
    "LOCK_ARG_SPEC",
    "LockError",
    "OBJECTS_ARG_SPEC",
    "OBJECTS_INFO_ARG_SPEC",
    "OBJECTS_MUTUALLY_EXCLUSIVE",
    "held",
    "run_objects",
    "run_objects_info",
]


# kubernetes.core's wait options, but wait_sleep takes fractions of a second (doc fragment gpushare.k8s.wait): its waiter
# sleeps whatever number it is given, and a Pod binds in a fraction of a second.
_WAIT_ARG_SPEC = copy.deepcopy(WAIT_ARG_SPEC)
_WAIT_ARG_SPEC["wait_sleep"]["type"] = "float"

# gpushare.k8s.objects: kubernetes.core.k8s's options for present/absent/patched with a wait (its own
# specs, imported), the collection's auth options (kubernetes.core's plus request_timeout).
OBJECTS_ARG_SPEC = dict(
    copy.deepcopy(NAME_ARG_SPEC),
    **copy.deepcopy(RESOURCE_ARG_SPEC),
    **copy.deepcopy(_WAIT_ARG_SPEC),
    **copy.deepcopy(AUTH_ARG_SPEC),
)
# kubernetes.core's spec types resource_definition with a function its doc fragment leaves untyped; raw takes the
# same values (an object, a list of them, or YAML text), which kubernetes.core's runner then reads.
OBJECTS_ARG_SPEC["resource_definition"]["type"] = "raw"
OBJECTS_ARG_SPEC.update(
    state=dict(type="str", default="present", choices=["present", "absent", "patched"]),
    merge_type=dict(type="list", elements="str", choices=["json", "merge", "strategic-merge"]),
    force=dict(type="bool", default=False),
    hidden_fields=dict(type="list", elements="str"),
    delete_options=dict(type="dict", options=copy.deepcopy(DELETE_OPTS_ARG_SPEC)),
)
OBJECTS_MUTUALLY_EXCLUSIVE = [("resource_definition", "src")]

# One read: what kubernetes.core.k8s_info takes.
_QUERY_SPEC = dict(
    kind=dict(type="str", required=True),
    api_version=dict(type="str", default="v1", aliases=["api", "version"]),
    name=dict(type="str"),
    namespace=dict(type="str"),
    label_selectors=dict(type="list", elements="str", default=[]),
    field_selectors=dict(type="list", elements="str", default=[]),
)

# gpushare.k8s.objects_info: one read given at the top level (as kubernetes.core.k8s_info), or several in queries.
OBJECTS_INFO_ARG_SPEC = dict(copy.deepcopy(_WAIT_ARG_SPEC), **copy.deepcopy(AUTH_ARG_SPEC))
OBJECTS_INFO_ARG_SPEC.update({key: dict(value, required=False) for key, value in copy.deepcopy(_QUERY_SPEC).items()})
OBJECTS_INFO_ARG_SPEC.update(
    names=dict(type="list", elements="str"),
    queries=dict(type="list", elements="dict", options=copy.deepcopy(_QUERY_SPEC)),
    hidden_fields=dict(type="list", elements="str"),
)
OBJECTS_INFO_MUTUALLY_EXCLUSIVE = [("kind", "queries"), ("name", "names"), ("names", "queries")]
OBJECTS_INFO_REQUIRED_ONE_OF = [("kind", "queries")]


class _Done(Exception):
    """kubernetes.core's code called exit_json or fail_json: the task's result."""

    def __init__(self, result):
        super().__init__(result.get("msg", ""))
        self.result = result


class _Module:
    """What kubernetes.core's service and runner use of a module, returning instead of exiting."""

    def __init__(self, params, check_mode, diff):
        self.params = params
        self.check_mode = check_mode
        self.server_side_dry_run = check_mode
        self._diff = diff
        self._name = "gpushare.k8s.objects"
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)

    def deprecate(self, msg, **kwargs):
        self.warnings.append(msg)

    def debug(self, msg):
        pass

    def exit_json(self, **kwargs):
        raise _Done(kwargs)

    def fail_json(self, msg, **kwargs):
        raise _Done(dict(kwargs, msg=msg, failed=True))

    def fail_from_exception(self, exception):
        self.fail_json(msg=to_native(exception))

    def requires(self, dependency, minimum=None, reason=None):
        if not HAS_KUBERNETES:
            self.fail_json(msg="the Python library kubernetes is required: %s" % KUBERNETES_IMPORT_ERROR)

    def has_at_least(self, dependency, minimum=None, warn=False):
        return HAS_KUBERNETES


# Seconds before each read that looks for an object another writer created. A 409 AlreadyExists means storage holds
# it: one read. A quota refusal can come while the other writer's create is between its quota charge and its storage
# write (milliseconds): a second read 0.1 s later. A create refused for its own reason (a quota that is really full,
# as the lab's step 5 proves) pays those 0.1 s, asleep.
_RACE_WAITS = {"conflict": (0,), "quota": (0, 0.1), "other": (0,)}


# A quota refusal's message gives the quota's recorded use, which can be more than what exists: the API server charges
# a quota at admission, before storage, and a create that storage then refuses (409: two writers created the same
# object at once) stays charged until the quota controller recounts (kube-controller-manager's
# --resource-quota-sync-period, 5 minutes by default). Measured on the lab cluster: one Pod, a second create of it
# (409), and status.used counted 2.
_PHANTOM_HINT = (" (if fewer objects exist than the quota's use says, a create that collided with another writer's is still counted: "
                 "the quota controller recounts within its sync period, 5 minutes by default; writers that create the same objects "
                 "under a quota should take turns, as gpushare.k8s.manifests' lock option does)")


class _CreatedMeanwhile(Exception):
    """Creating an object failed because another writer created it after this call read it."""


def _create_or_report_race(svc, resource, definition):
    """Create ``definition``; if that fails and the object now exists, raise :class:`_CreatedMeanwhile`.

    kubernetes.core reads an object, then creates it when it was absent. Another writer (a second lab run,
    a controller) can create it in between. The API server then refuses the create: 409 AlreadyExists, or
    first an admission error such as "exceeded quota" (admission runs before storage sees the name). Upstream
    reports the 409 as a change with a warning about ProjectRequests and fails on the rest; here the caller
    acts again on what exists now (an update, whose diff says whether anything changed).
    """
    namespace = definition["metadata"].get("namespace")
    try:
        return decode_response(svc.client.create(resource, definition, namespace=namespace, serialize=False))
    except Exception as exc:  # any refusal: whether the object exists now decides what it means
        reason = exc.body if hasattr(exc, "body") else exc
        # A quota counts an object at admission, before storage holds it: another writer's object that took the last
        # unit may take a moment to appear. Other refusals are judged on one read.
        kind = "conflict" if getattr(exc, "status", None) == 409 else "quota" if "exceeded quota" in to_native(reason) else "other"
        waits = _RACE_WAITS[kind]
        for wait in waits:
            time.sleep(wait)
            try:
                existing = svc.retrieve(resource, definition)
            except CoreException:
                existing = None
            if existing:
                raise _CreatedMeanwhile("%s was created by another writer while this task created it" % (
                    definition["metadata"].get("name"),)) from exc
        hint = _PHANTOM_HINT if kind == "quota" else ""
        raise CoreException("Failed to create object: {0}{1}".format(reason, hint)) from exc


class _DeletedMeanwhile(Exception):
    """Deleting or patching an object failed because another writer deleted it after this call read it."""


def _report_deletion_race(write, resource, definition, existing=None):
    """kubernetes.core's ``delete`` or ``update`` (``write``); a 404 (another writer, such as a second lab run, deleted
    the object between this call's read and its write) raises :class:`_DeletedMeanwhile`, so the caller reads again:
    a delete then finds it gone, a patch creates it. Upstream fails the task with "Failed to delete object" or "Failed
    to patch object: ... not found"."""
    try:
        return write(resource, definition, existing)
    except CoreException as exc:
        if getattr(exc.__cause__, "status", None) == 404:
            raise _DeletedMeanwhile("%s was deleted by another writer while this task wrote it" % (
                definition["metadata"].get("name"),)) from exc
        raise


def _service(params, check_mode, diff):
    """kubernetes.core's K8sService over the collection's client (request_timeout, retries)."""
    api_client = build_api_client(params)
    dynamic = k8sdynamicclient.K8SDynamicClient(api_client, discoverer=LazyDiscoverer)
    client = K8SClient(configuration=api_client.configuration, client=dynamic, dry_run=check_mode)
    module = _Module(params, check_mode, diff)
    svc = K8sService(client, module)
    svc.create = lambda resource, definition: _create_or_report_race(svc, resource, definition)
    delete, update = svc.delete, svc.update
    svc.delete = lambda resource, definition, existing=None: _report_deletion_race(delete, resource, definition, existing)
    svc.update = lambda resource, definition, existing: _report_deletion_race(update, resource, definition, existing)
    return svc, module


# The lock option of gpushare.k8s.manifests: an annotation on an object that exists.
LOCK_ANNOTATION = "gpushare.k8s/writer"
LOCK_ARG_SPEC = dict(
    kind=dict(type="str", required=True),
    api_version=dict(type="str", default="v1"),
    name=dict(type="str", required=True),
    namespace=dict(type="str", default=""),
    seconds=dict(type="int", default=60),
)
_LOCK_POLL = 0.1
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class LockError(GpushareError):
    """The lock could not be taken: its object is missing, or another writer held it for the whole wait."""


# A hold is read back from the cluster, where anyone who may annotate the object wrote it: untrusted input. What is
# not a hold this code writes counts as no hold, and so does one whose until lies further ahead than any writer of the
# lock can have written (its lock.seconds from its own now), plus LOCK_SKEW for clocks that differ: a hold that
# claims to last a year, or until 9999, lapses like one whose time has passed.
LOCK_SKEW = 30
# How much of a holder's text a message shows (JSON-quoted: control and non-ASCII characters escaped).
_HOLDER_SHOWN = 80


def _lock_state(obj):
    """(resourceVersion, the hold recorded on ``obj`` as a dict with holder and until (epoch seconds), or None).

    None when there is no annotation or it is not well-formed: a JSON object whose ``holder`` is text and whose ``until``
    is a UTC time in :data:`_TIME_FORMAT`.
    """
    metadata = obj.get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(LOCK_ANNOTATION)
    try:
        hold = json.loads(text)
        if not isinstance(hold, dict) or not isinstance(hold.get("holder"), str) or not isinstance(hold.get("until"), str):
            raise ValueError("not a hold")
        until = datetime.datetime.strptime(hold["until"], _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc).timestamp()
        hold = dict(holder=hold["holder"], until=until)
    except (TypeError, ValueError, OverflowError, RecursionError):  # none, or not one this code wrote: nobody holds it
        hold = None
    return metadata.get("resourceVersion"), hold


def _lapsed(hold, now, seconds):
    """Whether ``hold`` (from :func:`_lock_state`) binds no one at ``now``: none, its time passed, or absurdly far ahead."""
    return hold is None or hold["until"] <= now or hold["until"] > now + seconds + LOCK_SKEW


def _quoted(text, limit=_HOLDER_SHOWN):
    """Text another writer chose, for a message: JSON-quoted (control and non-ASCII characters escaped), and cut where
    its escaped form would pass ``limit`` characters (never inside an escape)."""
    shown, used = [], 0
    for count, char in enumerate(text):
        escaped = json.dumps(char)[1:-1]
        if used + len(escaped) > limit:
            return '"%s" (the first %d of %d characters)' % ("".join(shown), count, len(text))
        shown.append(escaped)
        used += len(escaped)
    return '"%s"' % "".join(shown)


def _stamp(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(_TIME_FORMAT)


def _lock_text(holder, until):
    return json.dumps(dict(holder=holder, until=_stamp(until)), sort_keys=True)


@contextlib.contextmanager
def held(params, lock, clock=time.time, sleep=time.sleep):
    """Hold ``lock`` (:data:`LOCK_ARG_SPEC`: an existing object) while the body runs, so writers take turns.

    Why: the API server charges a ResourceQuota at admission, before storage; when two writers create the same
    object at once, the one storage refuses (409) stays charged until the quota controller recounts (5 minutes by
    default), and a quota the team's objects fill exactly then refuses the next object of both writers. Writers
    that hold the lock while they create never collide.

    The hold is the annotation :data:`LOCK_ANNOTATION` (``{"holder": ..., "until": <UTC>}``), written with the
    object's resourceVersion as a precondition, so two writers cannot both take it; it lapses ``seconds`` after it was
    taken (a writer that was killed holds it no longer), and is removed when the body ends. A writer waits for
    another's hold to end or lapse, ``seconds`` at most, then raises :class:`LockError` naming the holder (quoted, cut).
    A hold that is not well-formed, or lasts longer than ``seconds`` plus :data:`LOCK_SKEW` from now, is lapsed
    (:func:`_lapsed`): whoever may annotate the object cannot block every writer for good.
    """
    label = "%s %s%s" % (lock["kind"], "%s/" % lock["namespace"] if lock.get("namespace") else "", lock["name"])
    seconds = lock.get("seconds", LOCK_ARG_SPEC["seconds"]["default"])
    if not is_int(seconds) or seconds < 1:
        raise LockError("lock.seconds: %r is not a number of seconds a hold lasts. Fix: give a whole number of at least 1, e.g. 60" % (seconds,))
    try:
        svc = _service(params, False, False)[0]
        resource = svc.client.resource(lock["kind"], lock.get("api_version") or "v1")
    except Exception as exc:  # no client, or no such kind: the lock's fault, with the reason
        raise LockError("lock: %s: %s" % (label, to_native(exc))) from exc
    where = dict(name=lock["name"], namespace=lock.get("namespace") or None)
    holder = "%s/%d/%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8])

    def read():
        try:
            return _lock_state(svc.client.get(resource, **where).to_dict())
        except NotFoundError:
            raise LockError("lock: %s does not exist; the lock is an annotation on an existing object. Fix: create it in an earlier "
                            "task, or name one that exists" % label) from None
        except Exception as exc:  # the API server unreachable or refusing: a message, not a traceback
            raise LockError("lock: reading %s failed: %s" % (label, to_native(exc))) from exc

    def write(version, text):
        body = {"metadata": {"resourceVersion": version, "annotations": {LOCK_ANNOTATION: text}}}
        try:
            svc.client.patch(resource, body, content_type="application/merge-patch+json", **where)
            return True
        except ConflictError:  # written by someone else since the read: read again
            return False
        except Exception as exc:  # refused (no patch permission) or unreachable
            raise LockError("lock: writing the annotation %s on %s failed: %s" % (LOCK_ANNOTATION, label, to_native(exc))) from exc

    deadline = clock() + seconds + 1  # another's hold lapses within seconds
    while True:
        version, hold = read()
        now = clock()
        if _lapsed(hold, now, seconds) and write(version, _lock_text(holder, now + seconds)):
            break
        if now >= deadline:
            live = None if _lapsed(hold, now, seconds) else hold  # a lapsed one lost to a faster writer: name no one
            raise LockError("lock: %s is held by %s until %s (annotation %s): another run is writing the same objects. Fix: let it "
                            "finish; if that run is gone, remove the annotation (kubectl annotate %s %s%s %s-)" % (
                                label, _quoted(live["holder"]) if live else "another writer", _stamp(live["until"] if live else now),
                                LOCK_ANNOTATION, lock["kind"].lower(), lock["name"],
                                " -n %s" % lock["namespace"] if lock.get("namespace") else "", LOCK_ANNOTATION))
        sleep(_LOCK_POLL)
    try:
        yield holder
    finally:
        try:
            for _attempt in range(5):  # a conflict means the object changed meanwhile (its status): read again
                version, hold = read()
                if not hold or hold["holder"] != holder or write(version, None):
                    break
        except Exception:  # the body's outcome stands; the hold lapses on its own
            pass


def _failure(exc):
    """The result kubernetes.core's runner makes of an exception raised while acting on one definition."""
    error = dict(getattr(exc, "result", None) or {})
    reason = getattr(exc.__cause__, "reason", None)
    if reason is not None:  # an HTTP reason phrase, or (connection refused) urllib3's exception: a task result holds text
        error["reason"] = reason if isinstance(reason, str) else to_native(reason)
    error["msg"] = to_native(exc)
    error["failed"] = True
    return error


def _no_kubernetes():
    return dict(failed=True, msg="the Python library kubernetes is required on the host that runs this task",
                exception=KUBERNETES_IMPORT_ERROR)


def run_objects(params, check_mode=False, diff=False):
    """Create, patch or delete every object of ``params`` (kubernetes.core.k8s's semantics); return the result.

    One definition returns kubernetes.core.k8s's result for it (``result``, ``method``, ``diff``); several
    return ``result.results`` with one entry each, as kubernetes.core.k8s does, and ``diff`` as a list so that
    ``--diff`` shows every object that changes. The first failure ends the call with its message.
    """
    if not HAS_KUBERNETES:
        return _no_kubernetes()
    try:
        svc, module = _service(params, check_mode, diff)
        definitions = get_definitions(svc, params)
    except (CoreException, K8sAuthError) as exc:
        return dict(failed=True, msg=to_native(exc))
    except _Done as done:
        return done.result
    except Exception as exc:  # the API server unreachable, a kubeconfig that does not load: a message, not a traceback
        return _failure(exc)
    results = []
    for definition in definitions:
        try:
            try:
                results.append(perform_action(svc, definition, params))
            except (_CreatedMeanwhile, _DeletedMeanwhile):  # another writer acted between the read and the write: act on what is now
                results.append(perform_action(svc, definition, params))
        except _Done as done:
            return done.result
        except Exception as exc:  # kubernetes.core's runner turns any failure into the task's message
            error = _failure(exc)
            if module.warnings:
                error["warnings"] = module.warnings
            return error
    if len(results) == 1:
        result = results[0]
    else:
        result = dict(changed=any(each["changed"] for each in results), result=dict(results=results))
        diffs = [each["diff"] for each in results if each.get("diff")]
        if diffs:
            result["diff"] = diffs
    if module.warnings:
        result.setdefault("warnings", []).extend(module.warnings)
    return result


def _query(params):
    return {key: params.get(key) for key in _QUERY_SPEC}


def run_objects_info(params, check_mode=False):
    """Read the objects of one query (kubernetes.core.k8s_info's result) or of each of ``queries``.

    With ``queries``, ``results`` holds one entry per query in order, each with the query as ``item`` and
    kubernetes.core.k8s_info's keys (``resources``, ``api_found``): the shape a looped k8s_info task
    registers. ``names`` is one query per name, the other options shared. The wait options apply to every query.
    """
    if not HAS_KUBERNETES:
        return _no_kubernetes()
    queries = params.get("queries")
    if params.get("names") is not None:
        queries = [dict(_query(params), name=name) for name in params["names"]]
    try:
        svc, module = _service(params, check_mode, False)
        found = []
        for query in queries or [_query(params)]:
            facts = svc.find(
                query["kind"],
                query["api_version"],
                name=query.get("name"),
                namespace=query.get("namespace"),
                label_selectors=query.get("label_selectors"),
                field_selectors=query.get("field_selectors"),
                wait=params.get("wait"),
                wait_sleep=params.get("wait_sleep"),
                wait_timeout=params.get("wait_timeout"),
                condition=params.get("wait_condition"),
                hidden_fields=params.get("hidden_fields"),
            )
            found.append(dict(facts, item=query))
    except (CoreException, K8sAuthError) as exc:
        return dict(failed=True, msg=to_native(exc))
    except _Done as done:
        return done.result
    except Exception as exc:  # the API server unreachable, a kubeconfig that does not load: a message, not a traceback
        return _failure(exc)
    if queries is None:
        result = dict(found[0], changed=False)
        result.pop("item")
    else:
        result = dict(changed=False, results=found)
    if module.warnings:
        result["warnings"] = module.warnings
    return result
