# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client's retries (urllib3's ``Retry``, k8s_auth.api_retry) and headers, on the wire.

A small HTTP server answers each request from a script (503, 429 with Retry-After, 200 ...) and records
what arrived, so the tests see what the kubernetes client and urllib3 really send: how many tries, after
how long, with which headers.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.cluster_objects import ObjectLister
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi, NodeApiError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.node_status import apply_node_resources

NODE = {"metadata": {"name": "n", "resourceVersion": "1", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"capacity": {}, "allocatable": {}}}


class Script:
    """Answers in order (the last one repeats); every request recorded as (method, path, headers)."""

    def __init__(self):
        self.answers = []
        self.seen = []
        self.times = []

    def answer(self, status, body=None, headers=None, times=1):
        self.answers.extend([(status, body if body is not None else {"kind": "Status", "message": "HTTP %d" % status}, headers or {})] * times)


@pytest.fixture
def server():
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            script.seen.append((self.command, self.path, self.headers))
            script.times.append(time.monotonic())
            status, body, headers = script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = _reply

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    script.host = "http://127.0.0.1:%d" % httpd.server_port
    yield script
    httpd.shutdown()
    httpd.server_close()


def client(host, **params):
    return k8s_auth.build_api_client(dict({"host": host, "api_key": "token", "request_timeout": 5}, **params), environ={})


@pytest.fixture
def fast(monkeypatch):
    """Short backoff, so a test that exhausts the retries does not wait ~10 s."""
    monkeypatch.setattr(k8s_auth, "RETRY_BACKOFF", 0.001)
    monkeypatch.setattr(k8s_auth, "RETRY_JITTER", 0.0)


def test_a_read_answered_503_is_retried_with_backoff(server):
    server.answer(503, times=2)
    server.answer(200, NODE)
    api = CoreNodeApi(client(server.host))
    started = time.monotonic()
    assert api.get_node("n")["metadata"]["name"] == "n"
    assert [method for method, _path, _headers in server.seen] == ["GET"] * 3
    gaps = [b - a for a, b in zip(server.times, server.times[1:])]
    # urllib3's backoff: none before the first retry, then RETRY_BACKOFF * 2 (+ up to RETRY_JITTER)
    assert gaps[1] >= 2 * k8s_auth.RETRY_BACKOFF, gaps
    assert time.monotonic() - started < 1.0


def test_429_waits_as_long_as_retry_after_says(server):
    server.answer(429, headers={"Retry-After": "1"})
    server.answer(200, {"kind": "NodeList", "items": [NODE], "metadata": {}})
    nodes = CoreNodeApi(client(server.host)).list_nodes()
    assert [n["metadata"]["name"] for n in nodes] == ["n"]
    assert len(server.seen) == 2 and server.times[1] - server.times[0] >= 1.0


def test_retry_after_is_capped(monkeypatch):
    monkeypatch.setattr(k8s_auth, "RETRY_AFTER_MAX", 3)
    assert k8s_auth.api_retry().parse_retry_after("3600") == 3


def test_when_the_retries_are_spent_the_api_server_s_answer_is_reported(server, fast):
    server.answer(503, {"kind": "Status", "message": "etcd is overloaded"})
    with pytest.raises(NodeApiError) as err:
        CoreNodeApi(client(server.host)).get_node("n")
    assert str(err.value) == "HTTP 503: etcd is overloaded"
    assert len(server.seen) == 1 + k8s_auth.RETRIES


def test_a_merge_patch_is_sent_again_a_post_is_not(server):
    server.answer(502)
    server.answer(200, NODE)
    node_api = CoreNodeApi(client(server.host))
    assert node_api.patch_node_status("n", {"status": {"capacity": {"example.com/gpu": "1"}}})["metadata"]["name"] == "n"
    assert [method for method, _path, _headers in server.seen] == ["PATCH", "PATCH"]

    from kubernetes import client as k8s_client

    server.seen.clear()
    server.answers[:] = []
    server.answer(503)
    core = k8s_client.CoreV1Api(client(server.host))
    with pytest.raises(k8s_client.exceptions.ApiException) as err:
        core.create_namespaced_service_account_token("sa", "ns", {"spec": {"audiences": ["x"]}})
    assert err.value.status == 503 and [method for method, _path, _headers in server.seen] == ["POST"]


def test_a_conflict_is_left_to_the_caller_which_rereads(server):
    """409 is not urllib3's to retry: apply_node_resources re-reads the Node and plans again."""
    server.answer(200, NODE)  # GET
    server.answer(409, {"kind": "Status", "message": "the object has been modified"})  # PATCH
    server.answer(200, NODE)  # GET again
    server.answer(200, dict(NODE, status={"capacity": {"example.com/gpu": "1"}, "allocatable": {"example.com/gpu": "1"}}))
    results = apply_node_resources(CoreNodeApi(client(server.host)), {"example.com/gpu": 1}, names=["n"])
    assert results[0]["changed"] and "error" not in results[0]
    assert [method for method, _path, _headers in server.seen] == ["GET", "PATCH", "GET", "PATCH"]


def test_a_refused_connection_is_tried_a_few_times_then_named(fast):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = CoreNodeApi(client("http://127.0.0.1:%d" % port))
    started = time.monotonic()
    with pytest.raises(NodeApiError) as err:
        api.get_node("n")
    assert time.monotonic() - started < 1.0
    assert "cannot reach the API server (kube-apiserver) at http://127.0.0.1:%d: " % port in str(err.value)
    assert "Connection refused" in str(err.value)


def test_every_list_request_goes_through_the_same_retries(server):
    server.answer(500)
    server.answer(200, {"kind": "PodList", "items": [], "metadata": {}})
    assert ObjectLister(client(server.host)).list("Pod") == []
    assert len(server.seen) == 2


def test_impersonation_headers_one_line_per_group(server):
    server.answer(200, NODE)
    api = client(server.host, impersonate_user="jane", impersonate_groups=["dev", "ops"])
    CoreNodeApi(api).get_node("n")
    (_method, _path, headers), = server.seen
    assert headers.get_all("Impersonate-User") == ["jane"]
    assert headers.get_all("Impersonate-Group") == ["dev", "ops"]
    assert headers["Authorization"] == "Bearer token"


def test_impersonation_from_the_environment(server):
    server.answer(200, NODE)
    api = k8s_auth.build_api_client({"host": server.host}, environ={"K8S_AUTH_API_KEY": "t", "K8S_AUTH_IMPERSONATE_USER": "bob",
                                                                    "K8S_AUTH_IMPERSONATE_GROUPS": "a,b"})
    CoreNodeApi(api).get_node("n")
    (_method, _path, headers), = server.seen
    assert headers.get_all("Impersonate-User") == ["bob"] and headers.get_all("Impersonate-Group") == ["a", "b"]
