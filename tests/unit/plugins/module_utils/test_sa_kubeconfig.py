# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/k8s/sa_kubeconfig.py: tokens (requested or from a Secret), private kubeconfigs, redaction, ownership."""

from __future__ import annotations

import base64
import json
import os
import stat
import time

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import sa_kubeconfig as skc

TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload-of-a-test-token.signature"
SA_USER = "system:serviceaccount:gpushare-system:gpushare-lab"
NOW = 1_900_000_000


def b64(text):
    return base64.b64encode(text.encode()).decode()


def jwt(sub=SA_USER, exp=NOW + 8 * 3600, salt="a"):
    """A token shaped as the API server issues them (claims readable, signature fake)."""
    def part(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return "%s.%s.sig-%s" % (part({"alg": "RS256"}), part({"sub": sub, "exp": exp}), salt)


def secret(token=TOKEN, owner="gpushare-lab", kind=skc.TOKEN_SECRET_TYPE, ca="Q0EK"):
    data = {"token": b64(token), "ca.crt": ca} if token else {}
    return {
        "type": kind,
        "metadata": {"name": "gpushare-lab-token", "namespace": "gpushare-system", "annotations": {skc.SA_NAME_ANNOTATION: owner}},
        "data": data,
    }


def ours(token=TOKEN, source="request"):
    return skc.build_kubeconfig("https://h", token, "gpushare-lab", "c", "gpushare-lab", owner="gpushare-system/gpushare-lab",
                                token_source=source)


# Someone's own kubeconfig: every kind of credential a kubeconfig can hold.
FOREIGN_SECRETS = {
    "token": "static-admin-token-0123456789",
    "password": "hunter2-password",
    "client-key-data": b64("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"),
    "client-certificate-data": b64("-----BEGIN CERTIFICATE-----\nMIIDCERTIFICATEDATA\n-----END CERTIFICATE-----\n"),
    "exec-arg": "--secret=exec-argument-secret",
    "exec-env": "exec-env-secret-value",
    "auth-provider": "oidc-refresh-token-secret",
    "proxy": "proxy-password-secret",
}
FOREIGN = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "prod", "cluster": {"server": "https://prod:6443", "certificate-authority-data": "Q0EK",
                                              "proxy-url": "http://me:%s@proxy:3128" % FOREIGN_SECRETS["proxy"]}}],
    "users": [
        {"name": "admin", "user": {"token": FOREIGN_SECRETS["token"]}},
        {"name": "basic", "user": {"username": "admin", "password": FOREIGN_SECRETS["password"]}},
        {"name": "cert", "user": {"client-key-data": FOREIGN_SECRETS["client-key-data"],
                                  "client-certificate-data": FOREIGN_SECRETS["client-certificate-data"]}},
        {"name": "exec", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token",
                                           "args": [FOREIGN_SECRETS["exec-arg"]],
                                           "env": [{"name": "TOKEN", "value": FOREIGN_SECRETS["exec-env"]}]}}},
        {"name": "oidc", "user": {"auth-provider": {"name": "oidc",
                                                    "config": {"refresh-token": FOREIGN_SECRETS["auth-provider"], "client-id": "k8s"}}}},
    ],
    "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "admin"}}],
    "current-context": "prod",
}


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def no_foreign_secret_in(text):
    for name, value in FOREIGN_SECRETS.items():
        for form in (value, value[:24], base64.b64decode(value).decode()[:40] if name.endswith("-data") else value):
            assert form not in text, "%s of the replaced kubeconfig is shown" % name


# ----------------------------------------------------------------------------- Secret tokens (token_source=secret)


def test_read_token_secret_returns_token_and_ca():
    assert skc.read_token_secret(secret(), "gpushare-lab") == (TOKEN, "Q0EK")


def test_read_token_secret_not_filled_in_yet():
    assert skc.read_token_secret(secret(token=None), "gpushare-lab") == (None, None)


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "Opaque"}, "holds no ServiceAccount token"),
    ({"owner": "someone-else"}, "not 'gpushare-lab'"),
])
def test_read_token_secret_refuses_other_secrets(kwargs, message):
    with pytest.raises(skc.KubeconfigError, match=message) as caught:
        skc.read_token_secret(secret(**kwargs), "gpushare-lab")
    assert TOKEN not in str(caught.value)


def test_wait_for_token_polls_until_filled_in():
    answers = [secret(token=None), secret(token=None), secret()]
    sleeps = []
    token, ca_data = skc.wait_for_token(lambda: answers.pop(0), "gpushare-lab", timeout=10, sleep=sleeps.append, clock=lambda: 0)
    assert (token, ca_data) == (TOKEN, "Q0EK") and len(sleeps) == 2


def test_wait_for_token_times_out_with_the_fix():
    ticks = iter(range(100))
    with pytest.raises(skc.KubeconfigError, match="service-account-private-key-file"):
        skc.wait_for_token(lambda: secret(token=None), "gpushare-lab", timeout=3, sleep=lambda _s: None, clock=lambda: next(ticks))


# ----------------------------------------------------------------------------- expiring tokens (TokenRequest, the default)


class Api:
    """Stand-ins for TokenRequest and TokenReview that record their calls."""

    def __init__(self, valid=()):
        self.requested, self.reviewed, self.valid = [], [], set(valid)

    def request(self, expiration):
        token = jwt(exp=NOW + expiration, salt=str(len(self.requested)))
        self.requested.append(expiration)
        self.valid.add(token)
        return token

    def review(self, token):
        self.reviewed.append(token)
        return SA_USER if token in self.valid else None


def choose(existing, api, check_mode=False, expiration=8 * 3600, source="request"):
    return skc.choose_token(existing, "gpushare-lab", "gpushare-system", source=source, expiration=expiration,
                            request=api.request, review=api.review, read_secret=secret, check_mode=check_mode, now=NOW)


def test_a_token_is_requested_for_the_expiration_asked():
    api = Api()
    token, ca_data, expires = choose({}, api, expiration=3600)
    assert api.requested == [3600] and ca_data is None
    assert skc.jwt_claims(token)["exp"] == NOW + 3600 and expires == "2030-03-17T18:46:40Z"


def test_a_fresh_token_this_module_wrote_is_kept():
    api = Api()
    token = jwt(exp=NOW + 5 * 3600)  # more than half of 8 hours left
    api.valid.add(token)
    assert choose(ours(token), api)[0] == token and api.requested == [] and api.reviewed == [token]


@pytest.mark.parametrize("why, existing, valid", [
    ("less than half of its lifetime left", ours(jwt(exp=NOW + 3 * 3600)), True),
    ("the API server no longer accepts it (ServiceAccount recreated, key rotated)", ours(jwt()), False),
    ("a token of another ServiceAccount", ours(jwt(sub="system:serviceaccount:x:y")), True),
    ("a Secret token written before (token_source=secret)", ours(jwt(), source="secret"), True),
    ("a file this module did not write", dict(FOREIGN, users=[{"name": "u", "user": {"token": jwt()}}]), True),
    ("not a JWT", ours(TOKEN), True),
])
def test_a_new_token_is_requested_when(why, existing, valid):
    api = Api()
    if valid:
        api.valid.add(existing["users"][0]["user"]["token"])
    token, _ca, _expires = choose(existing, api)
    assert api.requested == [8 * 3600], why
    assert token != existing["users"][0]["user"]["token"]


def test_check_mode_requests_no_token():
    api = Api()
    assert choose({}, api, check_mode=True) == (skc.PENDING_TOKEN, None, None) and api.requested == []


def test_the_secret_source_reads_the_long_lived_token():
    api = Api()
    assert choose({}, api, source="secret") == (TOKEN, "Q0EK", None) and api.requested == []


@pytest.mark.parametrize("seconds", [0, 599, -1, "3600", True])
def test_an_expiration_the_api_server_refuses_is_refused_first(seconds):
    api = Api()
    with pytest.raises(skc.KubeconfigError, match="token_expiration: .* at least 600"):
        choose({}, api, expiration=seconds)
    assert api.requested == []


def test_jwt_claims():
    assert skc.jwt_claims(jwt())["sub"] == SA_USER
    assert skc.jwt_claims("not-a-jwt") is None and skc.jwt_claims("a.!!!.c") is None and skc.jwt_claims(None) is None


# ----------------------------------------------------------------------------- the kubeconfig


def test_build_kubeconfig_is_one_current_context_marked_as_ours():
    config = skc.build_kubeconfig("https://127.0.0.1:6443", TOKEN, "gpushare-lab", "gpushare", "gpushare-lab", "gpu-share",
                                  ca_data="Q0EK", owner="gpushare-system/gpushare-lab", token_source="request")
    assert config["current-context"] == "gpushare-lab"
    assert config["clusters"] == [{"name": "gpushare", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0EK"}}]
    assert config["contexts"][0]["context"] == {"cluster": "gpushare", "user": "gpushare-lab", "namespace": "gpu-share"}
    assert config["users"][0]["user"] == {"token": TOKEN}
    assert skc.mark_of(config) == {"writtenBy": skc.WRITER, "serviceAccount": "gpushare-system/gpushare-lab", "tokenSource": "request"}
    assert skc.mark_of(FOREIGN) is None


def test_build_kubeconfig_insecure_and_missing_server():
    config = skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x", ca_data="Q0EK", insecure=True)
    assert config["clusters"][0]["cluster"] == {"server": "https://h", "insecure-skip-tls-verify": True}
    with pytest.raises(skc.KubeconfigError, match="server"):
        skc.build_kubeconfig("", TOKEN, "u", "c", "x")


def test_redact_shows_a_fingerprint_of_the_token_it_wrote():
    config = ours()
    redacted = skc.redact(config)
    assert TOKEN not in repr(redacted) and redacted["users"][0]["user"]["token"].startswith("<redacted sha256:")
    assert config["users"][0]["user"]["token"] == TOKEN  # the original is untouched


def test_redact_hides_every_credential_of_another_kubeconfig():
    redacted = skc.redact(FOREIGN)
    no_foreign_secret_in(json.dumps(redacted))
    users = {entry["name"]: entry["user"] for entry in redacted["users"]}
    # Not even a fingerprint of a token this module did not write (a short one could be guessed from it).
    assert users["admin"] == {"token": "<redacted>"}
    assert users["basic"] == {"username": "admin", "password": "<redacted>"}
    assert users["cert"] == {"client-key-data": "<redacted>", "client-certificate-data": "<redacted>"}
    assert users["exec"]["exec"]["command"] == "get-token" and users["exec"]["exec"]["env"] == [{"name": "TOKEN", "value": "<redacted>"}]
    assert users["oidc"]["auth-provider"] == {"name": "oidc", "config": {"refresh-token": "<redacted>", "client-id": "<redacted>"}}
    assert redacted["clusters"][0]["cluster"]["server"] == "https://prod:6443"


def test_ensure_kubeconfig_writes_0600_and_is_idempotent(tmp_path):
    path = tmp_path / "creds" / "lab.kubeconfig"
    changed, diff = skc.ensure_kubeconfig(str(path), ours())
    assert changed and mode_of(path) == 0o600 and mode_of(path.parent) == 0o700
    assert yaml.safe_load(path.read_text()) == ours()
    assert TOKEN not in repr(diff)
    assert skc.ensure_kubeconfig(str(path), ours())[0] is False
    assert [p.name for p in path.parent.iterdir()] == ["lab.kubeconfig"]  # no temporary file left


def test_ensure_kubeconfig_tightens_a_wide_mode(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    skc.ensure_kubeconfig(str(path), ours())
    os.chmod(path, 0o644)
    changed, diff = skc.ensure_kubeconfig(str(path), ours())
    assert changed and mode_of(path) == 0o600
    assert diff["before"]["mode"] == "0644" and diff["after"]["mode"] == "0600"


def test_ensure_kubeconfig_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    changed, diff = skc.ensure_kubeconfig(str(path), ours(skc.PENDING_TOKEN), check_mode=True)
    assert changed and not path.exists() and diff["before"]["mode"] is None
    assert diff["after"]["kubeconfig"]["users"][0]["user"]["token"] == skc.PENDING_TOKEN


def test_ensure_kubeconfig_replaces_a_new_token(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    skc.ensure_kubeconfig(str(path), ours())
    changed, diff = skc.ensure_kubeconfig(str(path), ours(TOKEN + "2"))
    assert changed and diff["before"]["kubeconfig"] != diff["after"]["kubeconfig"]
    assert TOKEN not in repr(diff) and mode_of(path) == 0o600


@pytest.mark.parametrize("content", [yaml.safe_dump(FOREIGN), "not a kubeconfig at all\n", yaml.safe_dump(
    skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x"))])  # the last: our shape, but no mark
def test_a_file_it_did_not_write_is_left_alone_unless_forced(tmp_path, content):
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(skc.KubeconfigError) as caught:
        skc.ensure_kubeconfig(str(path), ours())
    message = str(caught.value)
    assert "was not written by gpushare.k8s.service_account_kubeconfig" in message and "force: true" in message
    assert "choose another path" in message
    assert path.read_text() == content
    with pytest.raises(skc.KubeconfigError, match="force: true to remove it"):
        skc.remove_kubeconfig(str(path))
    assert path.read_text() == content


def test_forced_replacement_diff_shows_no_credential_of_the_replaced_file(tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(FOREIGN))
    changed, diff = skc.ensure_kubeconfig(str(path), ours(), force=True)
    assert changed and yaml.safe_load(path.read_text()) == ours()
    no_foreign_secret_in(json.dumps(diff))
    assert TOKEN not in json.dumps(diff)
    assert diff["before"]["kubeconfig"]["users"][1]["user"]["username"] == "admin"  # what it was is still recognisable


def test_an_empty_file_may_be_replaced(tmp_path):
    path = tmp_path / "config"
    path.write_text("")
    assert skc.ensure_kubeconfig(str(path), ours())[0] is True


def test_remove_kubeconfig_removes_only_its_own(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    skc.ensure_kubeconfig(str(path), ours())
    changed, diff = skc.remove_kubeconfig(str(path), check_mode=True)
    assert changed and path.exists() and TOKEN not in repr(diff)
    assert skc.remove_kubeconfig(str(path))[0] is True and not path.exists()
    assert skc.remove_kubeconfig(str(path))[0] is False


def test_reusable_token_reads_the_expiry_claim():
    assert skc.reusable_token(ours(jwt(exp=int(time.time()) + 7200)), "gpushare-lab", "gpushare-system", 3600) is not None
    assert skc.reusable_token(ours(jwt(exp=int(time.time()) + 1800)), "gpushare-lab", "gpushare-system", 3600) is None
