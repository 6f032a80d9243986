# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every request of the collection's modules is bounded by ``request_timeout``.

The API server here is a real listening socket that accepts connections and never answers, which is
what a paused (SIGSTOP) kube-apiserver looks like to a client: the kernel completes the handshake,
nothing reads. Each call must fail within the timeout, once (no retry of a read that timed out),
with a message naming the API server's address.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ClusterReadError, ObjectLister
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi, NodeApiError

TIMEOUT = 0.5


@pytest.fixture
def silent_server():
    """host URL of a server that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield "http://127.0.0.1:%d" % listener.getsockname()[1]
    listener.close()


def bounded(call, limit):
    """Run ``call`` in a thread; (seconds it took, what it raised). Fails the test if it runs past ``limit``."""
    outcome = {}

    def run():
        start = time.monotonic()
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), "the call still hangs after %ss" % limit
    return outcome["seconds"], outcome.get("error")


def client(host, **params):
    return k8s_auth.build_api_client(dict({"host": host, "api_key": "token", "request_timeout": TIMEOUT}, **params), environ={})


def test_node_calls_fail_within_the_timeout_naming_the_api_server(silent_server):
    api = CoreNodeApi(client(silent_server))
    seconds, error = bounded(lambda: api.get_node("lab-node-0"), limit=10 * TIMEOUT)
    assert isinstance(error, NodeApiError), error
    assert error.timed_out and not error.retryable
    assert "cannot reach the API server (kube-apiserver) at %s: no answer within 0.5 s" % silent_server in str(error)
    assert seconds < 3 * TIMEOUT, "a read that timed out was retried (%.1fs)" % seconds


@pytest.mark.parametrize("method", ["get", "patch"])
def test_a_request_that_timed_out_is_not_sent_again(silent_server, method):
    """GET and PATCH are retried after a 429/5xx or a cut connection (k8s_auth.api_retry), never after a timeout."""
    api = CoreNodeApi(client(silent_server))
    call = (lambda: api.get_node("lab-node-0")) if method == "get" else (lambda: api.patch_node_status("lab-node-0", {"status": {}}))
    seconds, error = bounded(call, limit=10 * TIMEOUT)
    assert isinstance(error, NodeApiError) and error.timed_out, error
    assert seconds < 2 * TIMEOUT, "a request that timed out was sent again (%.1fs)" % seconds


def test_lists_fail_within_the_timeout_naming_the_api_server(silent_server):
    lister = ObjectLister(client(silent_server))
    seconds, error = bounded(lambda: lister.list("Pod"), limit=10 * TIMEOUT)
    assert isinstance(error, ClusterReadError), error
    assert "cannot list Pod: cannot reach the API server (kube-apiserver) at %s: no answer within" % silent_server in str(error)
    assert seconds < 3 * TIMEOUT


def test_any_call_through_the_client_is_bounded(silent_server):
    from kubernetes import client as k8s_client

    core = k8s_client.CoreV1Api(client(silent_server))
    seconds, error = bounded(lambda: core.read_namespaced_secret("lab-token", "gpu-share"), limit=10 * TIMEOUT)
    assert error is not None and "timed out" in str(error).lower(), error
    assert seconds < 3 * TIMEOUT


def test_a_refused_connection_names_the_api_server():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = CoreNodeApi(client("http://127.0.0.1:%d" % port))
    _seconds, error = bounded(lambda: api.get_node("n"), limit=10)
    assert isinstance(error, NodeApiError) and not error.timed_out
    assert not error.retryable  # the client already retried it (k8s_auth.api_retry)
    assert "cannot reach the API server (kube-apiserver) at http://127.0.0.1:%d: " % port in str(error)
    assert "Connection refused" in str(error)


def test_the_default_request_timeout_is_30_seconds():
    api_client = k8s_auth.build_api_client({"host": "http://127.0.0.1:1", "api_key": "t"}, environ={})
    assert api_client.request_timeout == 30


@pytest.mark.parametrize("value", [0, -1, "soon", True, float("nan"), float("inf")])
def test_a_request_timeout_that_is_not_a_positive_number_is_refused(value):
    with pytest.raises(k8s_auth.K8sAuthError, match=r"request_timeout: .* is not a number of seconds above 0; set e\.g\. request_timeout: 30"):
        k8s_auth.build_api_client({"host": "http://127.0.0.1:1", "api_key": "t", "request_timeout": value}, environ={})
