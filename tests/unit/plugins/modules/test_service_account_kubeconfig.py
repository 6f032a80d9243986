# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpushare.k8s.service_account_kubeconfig with a fake API: the token lands in the file (0600), never in the result."""

from __future__ import annotations

import base64
import json
import os
import stat
import time
import types

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.modules import service_account_kubeconfig as module

SECRET_TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload-of-a-module-test-token.signature"
SA_USER = "system:serviceaccount:gpushare-system:gpushare-lab"
SOMEONES_KEY = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nsomeones-private-key\n-----END PRIVATE KEY-----\n").decode()
SOMEONES_PASSWORD = "someones-password-1234"
SOMEONES_KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "prod",
    "clusters": [{"name": "prod", "cluster": {"server": "https://prod:6443"}}],
    "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "admin"}}],
    "users": [{"name": "admin", "user": {"client-key-data": SOMEONES_KEY, "client-certificate-data": SOMEONES_KEY}},
              {"name": "basic", "user": {"username": "admin", "password": SOMEONES_PASSWORD}}],
}


def jwt(exp, salt):
    def part(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return "%s.%s.%s" % (part({"alg": "RS256"}), part({"sub": SA_USER, "exp": exp}), salt)


class FakeResponse:  # pylint: disable=too-few-public-methods
    def __init__(self, body):
        self.data = json.dumps(body).encode()

    def release_conn(self):
        pass


class FakeApiException(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.reason, self.body = status, "Error", json.dumps({"message": message})


class Cluster:
    """The API calls the module makes, recorded; tokens it issued are the valid ones."""

    def __init__(self):
        self.secrets = {("gpushare-system", "gpushare-lab-token"): {
            "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "gpushare-lab-token", "namespace": "gpushare-system",
                         "annotations": {"kubernetes.io/service-account.name": "gpushare-lab"}},
            "data": {"token": base64.b64encode(SECRET_TOKEN.encode()).decode()},
        }}
        self.service_accounts = {("gpushare-system", "gpushare-lab")}
        self.requests, self.issued, self.calls = [], [], 0

    def client(self):
        cluster = self

        class CoreV1Api:  # pylint: disable=too-few-public-methods
            def __init__(self, api_client):
                self.api_client = api_client

            def read_namespaced_secret(self, name, namespace, **_kwargs):
                cluster.calls += 1
                if (namespace, name) not in cluster.secrets:
                    raise FakeApiException(404, f'secrets "{name}" not found')
                return FakeResponse(cluster.secrets[(namespace, name)])

            def create_namespaced_service_account_token(self, name, namespace, body, **_kwargs):
                cluster.calls += 1
                if (namespace, name) not in cluster.service_accounts:
                    raise FakeApiException(404, f'serviceaccounts "{name}" not found')
                seconds = body["spec"]["expirationSeconds"]
                cluster.requests.append(seconds)
                token = jwt(int(time.time()) + seconds, "issued-%d" % len(cluster.issued))
                cluster.issued.append(token)
                return FakeResponse({"status": {"token": token}})

            def read_namespaced_config_map(self, name, namespace, **_kwargs):
                raise FakeApiException(404, "not found")

        class AuthenticationV1Api:  # pylint: disable=too-few-public-methods
            def __init__(self, api_client):
                self.api_client = api_client

            def create_token_review(self, body, **_kwargs):
                cluster.calls += 1
                valid = body["spec"]["token"] in cluster.issued
                return FakeResponse({"status": {"authenticated": valid, "user": {"username": SA_USER} if valid else {}}})

        return types.SimpleNamespace(CoreV1Api=CoreV1Api, AuthenticationV1Api=AuthenticationV1Api,
                                     ApiClient=lambda configuration: configuration)


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text("CA\n")
    configuration = types.SimpleNamespace(host="https://127.0.0.1:6443", ssl_ca_cert=str(ca_file), verify_ssl=True)
    fake = Cluster()
    monkeypatch.setattr(module, "build_api_client", lambda params: types.SimpleNamespace(configuration=configuration))
    monkeypatch.setattr(module, "k8s_client", fake.client())
    monkeypatch.setattr(module, "ApiException", FakeApiException)
    return fake


def run(capsys, cluster, check_mode=False, diff=False, **args):
    args = {"service_account": "gpushare-lab", "namespace": "gpushare-system", **args}
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    out = capsys.readouterr().out
    for token in [SECRET_TOKEN] + cluster.issued:
        assert token not in out and base64.b64encode(token.encode()).decode() not in out
    return json.loads(out)


def test_writes_a_private_kubeconfig_with_an_expiring_token(capsys, cluster, tmp_path):
    path = tmp_path / "creds" / "lab.kubeconfig"
    result = run(capsys, cluster, diff=True, path=str(path), context_namespace="gpu-share")
    assert result["changed"] and result["server"] == "https://127.0.0.1:6443" and result["context"] == "gpushare-lab"
    assert cluster.requests == [8 * 3600] and result["token_source"] == "request" and result["token_expires"].endswith("Z")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    written = yaml.safe_load(path.read_text())
    assert written["users"][0]["user"]["token"] == cluster.issued[0]
    assert base64.b64decode(written["clusters"][0]["cluster"]["certificate-authority-data"]) == b"CA\n"
    assert result["diff"]["after"]["kubeconfig"]["users"][0]["user"]["token"].startswith("<redacted sha256:")
    # A second run keeps the token (valid, more than half of its lifetime left): nothing changes.
    again = run(capsys, cluster, path=str(path), context_namespace="gpu-share")
    assert again["changed"] is False and cluster.requests == [8 * 3600]


def test_token_expiration_is_an_option(capsys, cluster, tmp_path):
    run(capsys, cluster, path=str(tmp_path / "lab.kubeconfig"), token_expiration=3600)
    assert cluster.requests == [3600]
    result = run(capsys, cluster, path=str(tmp_path / "other.kubeconfig"), token_expiration=60)
    assert result["failed"] and "at least 600" in result["msg"] and cluster.requests == [3600]


def test_check_mode_requests_no_token_and_writes_nothing(capsys, cluster, tmp_path):
    path = tmp_path / "lab.kubeconfig"
    result = run(capsys, cluster, check_mode=True, diff=True, path=str(path))
    assert result["changed"] and not path.exists() and cluster.requests == []
    assert result["diff"]["after"]["kubeconfig"]["users"][0]["user"]["token"] == "<a new token from the TokenRequest API>"


def test_the_long_lived_secret_token_only_when_asked(capsys, cluster, tmp_path):
    path = tmp_path / "lab.kubeconfig"
    result = run(capsys, cluster, path=str(path), token_source="secret")
    assert result["changed"] and cluster.requests == [] and result["token_expires"] is None
    assert yaml.safe_load(path.read_text())["users"][0]["user"]["token"] == SECRET_TOKEN
    assert run(capsys, cluster, path=str(path), token_source="secret")["changed"] is False


def test_check_mode_before_the_secret_exists_predicts_a_change(capsys, cluster, tmp_path):
    path = tmp_path / "lab.kubeconfig"
    result = run(capsys, cluster, check_mode=True, path=str(path), token_source="secret", secret="not-created-yet")
    assert result["changed"] and not path.exists()


def test_a_missing_secret_fails_naming_it(capsys, cluster, tmp_path):
    result = run(capsys, cluster, path=str(tmp_path / "lab.kubeconfig"), token_source="secret", secret="nope")
    assert result["failed"] and "gpushare-system/nope" in result["msg"] and "404" in result["msg"]


def test_a_missing_service_account_fails_naming_it(capsys, cluster, tmp_path):
    result = run(capsys, cluster, path=str(tmp_path / "lab.kubeconfig"), service_account="nobody")
    assert result["failed"] and "ServiceAccount gpushare-system/nobody" in result["msg"] and "404" in result["msg"]


def test_refuses_to_replace_a_kubeconfig_it_did_not_write(capsys, cluster, tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(SOMEONES_KUBECONFIG))
    before = path.read_text()
    result = run(capsys, cluster, path=str(path))
    assert result["failed"] and "was not written by" in result["msg"] and "force: true" in result["msg"]
    assert path.read_text() == before and cluster.calls == 0  # refused before any API call, no token issued
    result = run(capsys, cluster, state="absent", path=str(path))
    assert result["failed"] and "force: true to remove it" in result["msg"] and path.read_text() == before


def test_a_forced_replacement_shows_no_credential_of_the_replaced_file(capsys, cluster, tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(SOMEONES_KUBECONFIG))
    result = run(capsys, cluster, diff=True, path=str(path), force=True)
    shown = json.dumps(result)
    assert result["changed"] and yaml.safe_load(path.read_text())["users"][0]["user"]["token"] == cluster.issued[0]
    assert SOMEONES_KEY[:20] not in shown and SOMEONES_PASSWORD not in shown
    assert result["diff"]["before"]["kubeconfig"]["users"][0]["user"]["client-key-data"] == "<redacted>"


def test_state_absent_removes_its_own_file(capsys, cluster, tmp_path):
    path = tmp_path / "lab.kubeconfig"
    run(capsys, cluster, path=str(path))
    assert run(capsys, cluster, state="absent", path=str(path), check_mode=True)["changed"] and path.exists()
    assert run(capsys, cluster, state="absent", path=str(path))["changed"] and not path.exists()
    assert run(capsys, cluster, state="absent", path=str(path))["changed"] is False


def test_a_token_in_an_unexpected_error_is_masked(capsys, tmp_path, cluster, monkeypatch):
    def explode(*_args, **_kwargs):
        raise RuntimeError(f"boom with {cluster.issued[-1]}")

    monkeypatch.setattr(module, "ensure_kubeconfig", explode)
    result = run(capsys, cluster, path=str(tmp_path / "lab.kubeconfig"))
    assert result["failed"] and "boom with" in result["msg"]
