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
from urllib.parse import quote

try:
    import urllib3
    from kubernetes.client.exceptions import ApiException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
    urllib3 = None

    class ApiException(Exception):  # placeholder so except clauses stay valid
        pass

else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

from ..errors import ApiCallError, GpushareError
from .auth import is_timeout


__all__ = ["ApiCallError", "ClusterReadError", "LISTABLE_KINDS", "ObjectLister", "Route", "api_path", "call_json", "list_pages"]

PAGE_SIZE = 500
# Seconds a request may take when neither the call nor its client (k8s_auth.build_api_client) sets a bound.
REQUEST_TIMEOUT = 30

# kind: (apiVersion, plural, namespaced)
_KINDS = {
    "Node": ("v1", "nodes", False),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "Pod": ("v1", "pods", True),
    "PodTemplate": ("v1", "podtemplates", True),
    "ReplicationController": ("v1", "replicationcontrollers", True),
    "Deployment": ("apps/v1", "deployments", True),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    "DaemonSet": ("apps/v1", "daemonsets", True),
    "ReplicaSet": ("apps/v1", "replicasets", True),
    "Job": ("batch/v1", "jobs", True),
    "CronJob": ("batch/v1", "cronjobs", True),
}
LISTABLE_KINDS = tuple(sorted(_KINDS))


class ClusterReadError(GpushareError):
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
    return getattr(method, "api_client", None) or getattr(getattr(method, "__self__", None), "api_client", None)


def api_path(api_version, plural, namespace=None, name=None, subresource=None):
    """The REST path of a collection or an object: ``/api/v1/nodes``, ``/apis/apps/v1/namespaces/ns/deployments``."""
    path = ("/api/" if "/" not in api_version else "/apis/") + api_version
    if namespace:
        path += "/namespaces/" + quote(namespace, safe="")
    path += "/" + plural
    if name:
        path += "/" + quote(name, safe="")
    if subresource:
        path += "/" + subresource
    return path


# The generated client's keyword names, as the API server spells the query parameters.
_QUERY_NAMES = {"label_selector": "labelSelector", "field_selector": "fieldSelector", "_continue": "continue"}


class Route:
    """One REST call on a ``kubernetes.client.ApiClient``, called as :func:`call_json` calls a generated client method.

    The generated API classes (``CoreV1Api`` ...) import their model classes at first use: 1.3 s for CoreV1Api with
    kubernetes 37, paid by every module process, and by a playbook's controller. The collection sends and reads
    plain JSON, so it calls the paths itself through the same ``ApiClient`` (auth, TLS, proxy, retries, timeouts).
    ``Route(api_client, "GET", "/api/v1/nodes")(label_selector="a=b", _preload_content=False)``; a positional
    argument is the request body.
    """

    def __init__(self, api_client, verb, path):
        self.api_client = api_client
        self.verb = verb
        self.path = path

    # _preload_content: call_json asks generated methods for the raw response; a Route always returns it.
    def __call__(self, body=None, _preload_content=False, _request_timeout=None, _content_type=None, **query):
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = _content_type or "application/json"
        params = [(_QUERY_NAMES.get(key, key), value) for key, value in query.items() if value is not None]
        request = self.api_client.param_serialize(self.verb, self.path, query_params=params, header_params=headers, body=body,
                                                  auth_settings=["BearerToken"])
        response = self.api_client.call_api(*request, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response


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
        self._timeout = request_timeout

    def _pages(self, kind, path):
        try:
            return list_pages(Route(self._api_client, "GET", path), timeout=self._timeout)
        except ApiCallError as exc:
            raise ClusterReadError("cannot list %s: %s" % (kind, exc)) from None

    def list(self, kind, namespaces=None):
        """Every object of ``kind`` (in ``namespaces`` when given and the kind is namespaced), sorted by namespace and name."""
        if kind not in _KINDS:
            raise ClusterReadError("cannot list %s: not one of %s" % (kind, ", ".join(LISTABLE_KINDS)))
        api_version, plural, namespaced = _KINDS[kind]
        if namespaced and namespaces:
            items = []
            for namespace in namespaces:
                items.extend(self._pages(kind, api_path(api_version, plural, namespace)))
        else:
            items = self._pages(kind, api_path(api_version, plural))
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return sorted(items, key=lambda item: ((item.get("metadata") or {}).get("namespace") or "", (item.get("metadata") or {}).get("name") or ""))
