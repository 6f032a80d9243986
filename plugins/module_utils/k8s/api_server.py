# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Is there a cluster to talk to? The first check of a run, before any other task reads or writes the cluster.

:func:`api_server_errors` checks, in order, that a kubeconfig given as a path exists, that the auth options make a
client (the kubeconfig parses, its context exists), and that the API server answers ``GET /version``. Each problem
is one message ending with the fix the caller passes (for the lab: start the local cluster, or point
``gpushare_kubeconfig`` at a running one); an API server that does not answer is named by its URL, with the message
every API call of the collection gives (:mod:`cluster_objects`). No Ansible import.
"""

from __future__ import annotations

import os

from .cluster_objects import ApiCallError, Route, call_json
from .auth import HAS_KUBERNETES, K8sAuthError, build_api_client, resolve_auth_params

__all__ = ["DEFAULT_FIX", "api_server_errors", "missing_kubeconfigs"]

DEFAULT_FIX = ("start the cluster (the local lab cluster: the playbook gpushare.k8s.cluster, or `make cluster` in a checkout), "
               "or set kubeconfig (K8S_AUTH_KUBECONFIG) to the kubeconfig of a running cluster")


def missing_kubeconfigs(kubeconfig):
    """The files of a kubeconfig path (several joined with ``os.pathsep``, ``~`` expanded) that do not exist."""
    if not isinstance(kubeconfig, str) or not kubeconfig:
        return []
    paths = [os.path.expanduser(path) for path in kubeconfig.split(os.pathsep) if path]
    return [path for path in paths if not os.path.isfile(path)]


def _fixed(problem, fix):
    return "%s. Fix: %s" % (problem.rstrip(". "), fix.rstrip(". ") + ".")


def api_server_errors(params, fix=DEFAULT_FIX, environ=None):
    """Check that the auth options ``params`` reach an API server; return ``(errors, info)``.

    ``errors`` is ``[]`` or one message ending with ``Fix: <fix>``; ``info`` holds what was learnt: ``host`` (the API
    server's URL, once a client was made) and ``version`` (the ``gitVersion`` it reports). ``params`` are the
    kubernetes.core-style auth options (``kubeconfig``, ``context``, ``host``, ..., ``request_timeout``);
    ``K8S_AUTH_*`` variables of ``environ`` fill the ones not given. The request is bounded by ``request_timeout``.
    """
    info = {"host": None, "version": None}
    auth = resolve_auth_params(params, environ)
    missing = missing_kubeconfigs(auth.get("kubeconfig"))
    if missing:
        return [_fixed("kubeconfig %s does not exist, so there is no cluster to run against" % ", ".join(missing), fix)], info
    if not HAS_KUBERNETES:
        return [_fixed("the kubernetes Python library is required", "install it (pip install kubernetes)")], info
    try:
        api_client = build_api_client(params or {}, environ)
    except K8sAuthError as exc:
        return [_fixed(str(exc), fix)], info
    info["host"] = getattr(getattr(api_client, "configuration", None), "host", None)
    try:
        version = call_json(Route(api_client, "GET", "/version"))
    except ApiCallError as exc:
        if exc.status is None:  # no answer: the message names the URL
            return [_fixed(exc.message, fix)], info
        return [_fixed("the API server (kube-apiserver) at %s answered GET /version with %s" % (info["host"], exc),
                       "check the credentials of the kubeconfig's context, or " + fix)], info
    info["version"] = (version or {}).get("gitVersion")
    return [], info
