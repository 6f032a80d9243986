#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: service_account_kubeconfig
short_description: Write a kubeconfig for a Kubernetes ServiceAccount, mode 0600
version_added: 1.0.0
description:
  - Writes a kubeconfig with one cluster, one user and one context to O(path), holding a token of the ServiceAccount.
  - By default the token is an expiring one, issued by the TokenRequest API (C(serviceaccounts/token)) for
    O(token_expiration) seconds. A later run keeps it while more than half of that time is left and the API server still
    accepts it (TokenReview), and issues a new one otherwise.
  - With O(token_source=secret), the long-lived token of a Secret of type C(kubernetes.io/service-account-token) is used
    instead (the module waits until the token controller has filled it in). It does not expire.
  - The API server address and CA bundle are the ones this module connects with (the auth options below), so the
    kubeconfig reaches the same API server as the administrator who runs it.
  - The file is created with mode V(0600) before the token is written into it and is moved into place atomically; an
    existing file with a wider mode is tightened.
  - The file is marked as written by this module (a kubeconfig extension, which C(kubectl) keeps and ignores). A file at
    O(path) without that mark may be someone's own kubeconfig, and is neither replaced nor removed unless O(force=true).
  - No credential is ever returned, logged or shown in a diff - neither the new token nor any credential of the file
    being replaced (tokens, passwords, client keys and certificates, C(exec) and C(auth-provider) secrets are redacted;
    the token this module wrote is shown as a short fingerprint).
author:
  - gpushare.k8s maintainers (@gpushare)
options:
  state:
    description:
      - V(present) writes the kubeconfig; V(absent) removes it (only a file this module wrote, unless O(force=true)).
        With V(absent) the cluster is not contacted.
    type: str
    choices: [present, absent]
    default: present
  service_account:
    description: Name of the ServiceAccount.
    type: str
    required: true
  namespace:
    description: Namespace of the ServiceAccount (and of its token Secret).
    type: str
    required: true
  token_source:
    description:
      - V(request) issues an expiring token through the TokenRequest API (the caller needs C(create) on
        C(serviceaccounts/token)). Delete the ServiceAccount to revoke it before it expires.
      - V(secret) reads the long-lived token of the Secret O(secret), which must exist. Delete the Secret to revoke it.
    type: str
    choices: [request, secret]
    default: request
  token_expiration:
    description:
      - Lifetime of a requested token, in seconds (O(token_source=request)). The API server refuses less than 600 and may
        shorten it (C(--service-account-max-token-expiration)).
      - A token with less than half of this left is replaced by a new one.
    type: int
    default: 28800
  secret:
    description: Name of the token Secret, with O(token_source=secret). Defaults to C(<service_account>-token).
    type: str
  path:
    description: Where to write the kubeconfig. Missing parent directories are created with mode V(0700).
    type: path
    required: true
  force:
    description:
      - Replace (or, with O(state=absent), remove) a file at O(path) that this module did not write. Its content,
        credentials included, is lost.
    type: bool
    default: false
  server:
    description: API server address to write into the kubeconfig, when users reach it under another address than this
      module does. Defaults to the address this module connects to.
    type: str
  cluster_name:
    description: Name of the cluster entry of the kubeconfig.
    type: str
    default: gpushare
  context_name:
    description: Name of the context (and of the user entry). Defaults to O(service_account).
    type: str
  context_namespace:
    description: Default namespace of the context (what C(kubectl) uses when given none).
    type: str
  wait_timeout:
    description: Seconds to wait for the token controller to fill in the Secret (O(token_source=secret)).
    type: int
    default: 60
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads the existing file, asks the API server whether its token is still valid, and predicts C(changed) and the
        diff; requests no token and writes nothing.
  diff_mode:
    support: full
    details:
      - The diff shows the file mode and the kubeconfigs before and after with every credential redacted.
  idempotent:
    support: full
    details:
      - A requested token is kept while it is valid for more than half of O(token_expiration); then a run replaces it.
requirements:
  - kubernetes >= 24.2.0 (Python library)
  - PyYAML
notes:
  - The caller (a cluster administrator) needs C(create) on C(serviceaccounts/token) and C(tokenreviews), or, with
    O(token_source=secret), C(get) on the Secret.
seealso:
  - name: Manually create an API token for a ServiceAccount
    description: The TokenRequest API and the long-lived Secret tokens.
    link: https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#manually-create-an-api-token-for-a-serviceaccount
"""

EXAMPLES = r"""
- name: Let the lab run as the ServiceAccount gpushare-lab (a token valid for 8 hours)
  gpushare.k8s.service_account_kubeconfig:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml  # an administrator's kubeconfig
    service_account: gpushare-lab
    namespace: gpushare-system
    path: ~/.gpushare/gpushare-lab.kubeconfig

- name: Use the ServiceAccount's long-lived token Secret instead (it never expires)
  gpushare.k8s.service_account_kubeconfig:
    service_account: gpushare-lab
    namespace: gpushare-system
    path: ~/.gpushare/gpushare-lab.kubeconfig
    token_source: secret
    secret: gpushare-lab-token

- name: Remove the kubeconfig (only if this module wrote it)
  gpushare.k8s.service_account_kubeconfig:
    state: absent
    service_account: gpushare-lab
    namespace: gpushare-system
    path: ~/.gpushare/gpushare-lab.kubeconfig
"""

RETURN = r"""
path:
  description: The kubeconfig file.
  returned: always
  type: str
  sample: /root/.gpushare/gpushare-lab.kubeconfig
server:
  description: API server address written into the kubeconfig.
  returned: success and O(state=present)
  type: str
  sample: https://127.0.0.1:6443
context:
  description: Name of the kubeconfig's (current) context.
  returned: success and O(state=present)
  type: str
  sample: gpushare-lab
token_source:
  description: Where the token came from (V(request) or V(secret)).
  returned: success and O(state=present)
  type: str
  sample: request
token_expires:
  description: When the token expires (UTC, ISO 8601), as its own C(exp) claim says; V(null) for a token that does not
    expire, or in check mode before a new token is issued.
  returned: success and O(state=present)
  type: str
  sample: "2026-12-01T18:00:00Z"
"""

import base64
import json
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    K8sAuthError,
    build_api_client,
    hide_kubeconfig_credentials,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.sa_kubeconfig import (
    DEFAULT_EXPIRATION,
    PENDING_TOKEN,
    KubeconfigError,
    build_kubeconfig,
    ca_data_from_file,
    check_expiration,
    check_replaceable,
    choose_token,
    ensure_kubeconfig,
    parse_existing,
    read_existing,
    remove_kubeconfig,
)

try:
    from kubernetes import client as k8s_client
    from kubernetes.client.exceptions import ApiException
except ImportError:
    k8s_client = None
    ApiException = Exception


def argument_spec():
    spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        service_account=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        token_source=dict(type="str", choices=["request", "secret"], default="request"),
        token_expiration=dict(type="int", default=DEFAULT_EXPIRATION, no_log=False),  # seconds, not a secret
        secret=dict(type="str", no_log=False),  # the Secret's name, not its content
        path=dict(type="path", required=True),
        force=dict(type="bool", default=False),
        server=dict(type="str"),
        cluster_name=dict(type="str", default="gpushare"),
        context_name=dict(type="str"),
        context_namespace=dict(type="str"),
        wait_timeout=dict(type="int", default=60),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def _json(response):
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def _api_error(what, exc):
    try:
        message = json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError, AttributeError):
        message = exc.reason
    return KubeconfigError("{0}: HTTP {1}: {2}".format(what, exc.status, message), exc.status)


def secret_reader(core, name, namespace):
    """A function returning the Secret as a dict; API errors become KubeconfigError."""
    def read():
        try:
            return _json(core.read_namespaced_secret(name, namespace, _preload_content=False))
        except ApiException as exc:
            raise _api_error("cannot read Secret {0}/{1}".format(namespace, name), exc)
    return read


def token_requester(core, service_account, namespace):
    """A function issuing a token of ``expiration`` seconds through the TokenRequest API; returns the token."""
    def request(expiration):
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": expiration}}
        try:
            answer = _json(core.create_namespaced_service_account_token(service_account, namespace, body, _preload_content=False))
        except ApiException as exc:
            raise _api_error("cannot request a token for ServiceAccount {0}/{1}".format(namespace, service_account), exc)
        return (answer.get("status") or {}).get("token")
    return request


def token_reviewer(authentication):
    """A function returning the user name the API server authenticates a token as (TokenReview), or None."""
    def review(token):
        try:
            answer = _json(authentication.create_token_review({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                               "spec": {"token": token}}, _preload_content=False))
        except ApiException:
            return None  # cannot tell: a new token is requested
        status = answer.get("status") or {}
        return (status.get("user") or {}).get("username") if status.get("authenticated") else None
    return review


def root_ca(core, namespace):
    """Base64 of the cluster's CA bundle as published in ConfigMap kube-root-ca.crt, or None."""
    try:
        data = _json(core.read_namespaced_config_map("kube-root-ca.crt", namespace, _preload_content=False)).get("data") or {}
    except ApiException:
        return None
    return base64.b64encode(data["ca.crt"].encode("utf-8")).decode("ascii") if data.get("ca.crt") else None


def main(module_class=AnsibleModule):
    module = module_class(argument_spec=argument_spec(), supports_check_mode=True)
    hide_kubeconfig_credentials(module)
    params = module.params
    path = params["path"]
    service_account, namespace = params["service_account"], params["namespace"]
    context = params["context_name"] or service_account
    if params["state"] == "absent":
        try:
            changed, diff = remove_kubeconfig(path, check_mode=module.check_mode, force=params["force"])
        except KubeconfigError as exc:
            module.fail_json(msg=str(exc), changed=False, path=path)
        module.exit_json(changed=changed, path=path, **({"diff": diff} if module._diff else {}))

    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    secret = params["secret"] or "{0}-token".format(service_account)
    try:
        # Before any API call: a file this module did not write is left alone unless forced.
        existing_text, _mode = read_existing(path)
        check_replaceable(path, existing_text, params["force"])
        if params["token_source"] == "request":
            check_expiration(params["token_expiration"])
        api_client = build_api_client(params)  # every request bounded by request_timeout
        configuration = api_client.configuration
        core = k8s_client.CoreV1Api(api_client)
        token, secret_ca, expires = choose_token(
            parse_existing(existing_text), service_account, namespace,
            source=params["token_source"],
            expiration=params["token_expiration"],
            request=token_requester(core, service_account, namespace),
            review=token_reviewer(k8s_client.AuthenticationV1Api(api_client)),
            read_secret=secret_reader(core, secret, namespace),
            wait_timeout=params["wait_timeout"],
            check_mode=module.check_mode,
        )
        # Whatever happens next, no result or message of this module can carry the token.
        if token != PENDING_TOKEN:
            module.no_log_values.add(token)
        insecure = not configuration.verify_ssl
        ca_data = None
        if not insecure:
            ca_data = ca_data_from_file(configuration.ssl_ca_cert) or secret_ca or root_ca(core, namespace)
        server = params["server"] or configuration.host
        kubeconfig = build_kubeconfig(
            server=server, token=token, user=context, cluster=params["cluster_name"], context=context,
            namespace=params["context_namespace"], ca_data=ca_data, insecure=insecure,
            owner="{0}/{1}".format(namespace, service_account), token_source=params["token_source"],
        )
        changed, diff = ensure_kubeconfig(path, kubeconfig, check_mode=module.check_mode, force=params["force"])
    except KubeconfigError as exc:
        if module.check_mode and exc.status == 404:
            # Check mode did not create the Secret or the ServiceAccount: the real run will, then write the file.
            module.exit_json(changed=True, path=path, context=context,
                             msg="{0} does not exist yet; the kubeconfig would be written once it does".format(
                                 "Secret {0}/{1}".format(namespace, secret) if params["token_source"] == "secret"
                                 else "ServiceAccount {0}/{1}".format(namespace, service_account)))
        module.fail_json(msg=str(exc), changed=False, path=path)
    except K8sAuthError as exc:
        module.fail_json(msg=str(exc), changed=False, path=path)
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: {0}: {1}".format(type(exc).__name__, exc), exception=traceback.format_exc())

    result = dict(changed=changed, path=path, server=server, context=context, token_source=params["token_source"], token_expires=expires)
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
