# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read Kubernetes objects as plain dicts (the JSON the API server sent), for the read-only modules.

``ObjectLister.list(kind, namespaces)`` pages through a LIST of one kind, in every namespace or
in the given ones, and returns the items with ``kind`` filled in (list responses leave it out),
so they can be walked like manifests. Errors become :class:`ClusterReadError` with the API
server's message. No Ansible import.

``call_json`` and ``list_pages`` are the one way this collection calls the generated client
(``_preload_content=False``: the JSON as sent, no model round trip); ``node_status`` uses
them too.
"""

from __future__ import annotations

import json
import traceback

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes.client.exceptions import ApiException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
    urllib3 = None
    k8s_client = None

    class ApiException(Exception):  # placeholder so except clauses stay valid
        pass

else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

try:
    from .errors import ApiCallError
    from .k8s_auth import is_timeout
except ImportError:  # loaded as a plain module, next to k8s_auth.py
    from errors import ApiCallError  # type: ignore[no-redef]
    from k8s_auth import is_timeout  # type: ignore[no-redef]


__all__ = ["ApiCallError", "ClusterReadError", "LISTABLE_KINDS", "ObjectLister", "call_json", "list_pages"]

PAGE_SIZE = 500
# Seconds a request may take when neither the call nor its client (k8s_auth.build_api_client) sets a bound.
REQUEST_TIMEOUT = 30

# kind -> (API group class name, apiVersion, method stem, namespaced)
_KINDS = {
    "Node": ("CoreV1Api", "v1", "node", False),
    "ResourceQuota": ("CoreV1Api", "v1", "resource_quota", True),
    "Pod": ("CoreV1Api", "v1", "pod", True),
    "PodTemplate": ("CoreV1Api", "v1", "pod_template", True),
    "ReplicationController": ("CoreV1Api", "v1", "replication_controller", True),
    "Deployment": ("AppsV1Api", "apps/v1", "deployment", True),
    "StatefulSet": ("AppsV1Api", "apps/v1", "stateful_set", True),
    "DaemonSet": ("AppsV1Api", "apps/v1", "daemon_set", True),
    "ReplicaSet": ("AppsV1Api", "apps/v1", "replica_set", True),
    "Job": ("BatchV1Api", "batch/v1", "job", True),
    "CronJob": ("BatchV1Api", "batch/v1", "cron_job", True),
}
LISTABLE_KINDS = tuple(sorted(_KINDS))


class ClusterReadError(Exception):
    """A LIST the API server refused or could not answer."""


def _api_exception_error(exc, error):
    message = exc.reason or "error"
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body:
        try:
            message = json.loads(body).get("message") or message
        except (ValueError, AttributeError):
            message = body.strip()[:500] or message
    try:
        value = (exc.headers or {}).get("Retry-After")
        retry_after = float(value) if value is not None else None
    except (TypeError, ValueError):
        retry_after = None
    return error(exc.status, message, retry_after)


def _api_client(method):
    return getattr(getattr(method, "__self__", None), "api_client", None)


def _is_timeout(exc):
    reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps the last attempt's error
    return any(is_timeout(e) for e in (exc, reason))


def _unreachable(method, exc, timeout, error):
    host = getattr(getattr(_api_client(method), "configuration", None), "host", None) or "(unknown address)"
    if _is_timeout(exc):
        return error(None, "cannot reach the API server (kube-apiserver) at {0}: no answer within {1:g} s; is it stopped, paused "
                           "or overloaded? ({2})".format(host, timeout, exc), timed_out=True)
    return error(None, "cannot reach the API server (kube-apiserver) at {0}: {1}".format(host, exc))


def call_json(method, *args, timeout=None, error=ApiCallError, **kwargs):
    """Call a generated client method; return the decoded JSON reply or raise ``error`` (an ApiCallError class).

    ``timeout`` (seconds) bounds the request; by default the client's own ``request_timeout``
    (k8s_auth.build_api_client), else REQUEST_TIMEOUT.
    """
    if timeout is None:
        timeout = getattr(_api_client(method), "request_timeout", None) or REQUEST_TIMEOUT
    kwargs["_preload_content"] = False
    kwargs["_request_timeout"] = timeout
    try:
        response = method(*args, **kwargs)
        try:
            data = response.data
        finally:
            response.release_conn()
    except ApiException as exc:
        raise _api_exception_error(exc, error) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _unreachable(method, exc, timeout, error) from None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise error(None, "the API server sent a response that is not JSON: {0}".format(exc)) from None


def list_pages(method, *args, timeout=None, error=ApiCallError, **kwargs):
    """Every item of a LIST, following ``continue`` tokens, PAGE_SIZE items a page."""
    items = []
    token = None
    while True:
        page_kwargs = dict(kwargs, limit=PAGE_SIZE)
        if token:
            page_kwargs["_continue"] = token
        page = call_json(method, *args, timeout=timeout, error=error, **page_kwargs)
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


class ObjectLister:
    """LIST calls on a ``kubernetes.client.ApiClient``, decoded from JSON without a model round trip."""

    def __init__(self, api_client, request_timeout=None):
        if not HAS_KUBERNETES:
            raise ClusterReadError("the kubernetes Python library is required")
        self._api_client = api_client
        self._apis = {}
        self._timeout = request_timeout

    def _api(self, name):
        if name not in self._apis:
            self._apis[name] = getattr(k8s_client, name)(self._api_client)
        return self._apis[name]

    def _pages(self, method, kind, *args):
        try:
            return list_pages(method, *args, timeout=self._timeout)
        except ApiCallError as exc:
            raise ClusterReadError("cannot list %s: %s" % (kind, exc)) from None

    def list(self, kind, namespaces=None):
        """Every object of ``kind`` (in ``namespaces`` when given and the kind is namespaced), sorted by namespace and name."""
        if kind not in _KINDS:
            raise ClusterReadError("cannot list %s: not one of %s" % (kind, ", ".join(LISTABLE_KINDS)))
        api_name, api_version, stem, namespaced = _KINDS[kind]
        api = self._api(api_name)
        if not namespaced:
            items = self._pages(getattr(api, "list_%s" % stem), kind)
        elif namespaces:
            items = []
            for namespace in namespaces:
                items.extend(self._pages(getattr(api, "list_namespaced_%s" % stem), kind, namespace))
        else:
            items = self._pages(getattr(api, "list_%s_for_all_namespaces" % stem), kind)
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return sorted(items, key=lambda item: ((item.get("metadata") or {}).get("namespace") or "", (item.get("metadata") or {}).get("name") or ""))
