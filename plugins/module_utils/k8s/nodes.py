# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Node API: read, list and patch Nodes and their status subresource, as the JSON the API server sent.

One adapter for every module that reads or writes Nodes (the lab's node status writer, the operator wait): the
routes come from :mod:`cluster_objects`, errors are :class:`NodeApiError`. No Ansible import.
"""

from __future__ import annotations

from .cluster_objects import ApiCallError, Route, api_path, call_json, list_pages

MERGE_PATCH = "application/merge-patch+json"

# 409: resourceVersion precondition failed (someone else wrote first): re-read, re-plan, write again.
# Other transient answers (429, 5xx) were already retried by the client (auth.api_retry).
CONFLICT = 409


class NodeApiError(ApiCallError):
    """An API call failed. ``status`` is the HTTP status, ``None`` for a network error."""

    @property
    def retryable(self):
        """True for a conflict, which the executor retries on a fresh read of the Node.

        Everything else reaching this layer is final: the client already retried what a retry can fix
        (auth.api_retry), and a request that timed out is not sent again.
        """
        return self.status == CONFLICT


class CoreNodeApi:
    """The Node calls (get, list, patch, patch status), on a ``kubernetes.client.ApiClient``.

    Responses are decoded from JSON as the API server sent them (no model
    round trip), so quantities keep their exact spelling. Errors become
    ``NodeApiError``.
    """

    def __init__(self, api_client, request_timeout=None):
        self._api_client = api_client
        self._timeout = request_timeout

    def _route(self, verb, name=None, subresource=None):
        return Route(self._api_client, verb, api_path("v1", "nodes", name=name, subresource=subresource))

    def get_node(self, name):
        return call_json(self._route("GET", name), timeout=self._timeout, error=NodeApiError)

    def list_nodes(self, label_selector=None):
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return list_pages(self._route("GET"), timeout=self._timeout, error=NodeApiError, **kwargs)

    def patch_node(self, name, patch):
        return call_json(self._route("PATCH", name), patch, timeout=self._timeout, error=NodeApiError, _content_type=MERGE_PATCH)

    def patch_node_status(self, name, patch):
        return call_json(self._route("PATCH", name, "status"), patch, timeout=self._timeout, error=NodeApiError, _content_type=MERGE_PATCH)
