#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: service_account_kubeconfig
short_description: Write a kubeconfig for a Kubernetes ServiceAccount, mode 0600
version_added: 0.1.0
description:
  - Reads the token of a ServiceAccount from its Secret of type C(kubernetes.io/service-account-token) (waiting until
    the token controller has filled it in) and writes a kubeconfig with one cluster, one user and one context to O(path).
  - The API server address and CA bundle are the ones this module connects with (the auth options below), so the
    kubeconfig reaches the same API server as the administrator who runs it.
  - The file is created with mode V(0600) before the token is written into it and is moved into place atomically; an
    existing file with a wider mode is tightened.
  - The token is never returned, logged or shown in a diff; the diff shows the kubeconfig with the token replaced by a
    short fingerprint.
author:
  - gpushare.k8s maintainers (@gpushare)
options:
  service_account:
    description: Name of the ServiceAccount.
    type: str
    required: true
  namespace:
    description: Namespace of the ServiceAccount and of its token Secret.
    type: str
    required: true
  secret:
    description: Name of the token Secret. Defaults to C(<service_account>-token).
    type: str
  path:
    description: Where to write the kubeconfig. Missing parent directories are created with mode V(0700).
    type: path
    required: true
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
    description: Seconds to wait for the token controller to fill in the Secret.
    type: int
    default: 60
extends_documentation_fragment:
  - gpushare.k8s.k8s_auth
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads the Secret and predicts C(changed) and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The diff shows the file mode and the kubeconfig with its token replaced by a fingerprint.
  idempotent:
    support: full
requirements:
  - kubernetes >= 24.2.0 (Python library)
  - PyYAML
notes:
  - A Secret-based token does not expire; delete the Secret (or the ServiceAccount) to revoke it. The
    M(kubernetes.core.k8s) module cannot call the C(serviceaccounts/token) (TokenRequest) subresource, which is why
    the Secret is used.
seealso:
  - name: Manually create a long-lived API token for a ServiceAccount
    description: The Secret this module reads.
    link: https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#manually-create-an-api-token-for-a-serviceaccount
"""

EXAMPLES = r"""
- name: Let the lab run as the ServiceAccount gpushare-lab
  gpushare.k8s.service_account_kubeconfig:
    kubeconfig: ~/.kwok/clusters/gpushare/kubeconfig.yaml  # an administrator's kubeconfig
    service_account: gpushare-lab
    namespace: gpushare-system
    path: ~/.gpushare/gpushare-lab.kubeconfig
"""

RETURN = r"""
path:
  description: The kubeconfig file.
  returned: success
  type: str
  sample: /root/.gpushare/gpushare-lab.kubeconfig
server:
  description: API server address written into the kubeconfig.
  returned: success
  type: str
  sample: https://127.0.0.1:6443
context:
  description: Name of the kubeconfig's (current) context.
  returned: success
  type: str
  sample: gpushare-lab
"""

import json
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s_auth import (
    AUTH_ARG_SPEC,
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    K8sAuthError,
    build_configuration,
)
from ansible_collections.gpushare.k8s.plugins.module_utils.sa_kubeconfig import (
    KubeconfigError,
    build_kubeconfig,
    ca_data_from_file,
    ensure_kubeconfig,
    wait_for_token,
)

try:
    from kubernetes import client as k8s_client
    from kubernetes.client.exceptions import ApiException
except ImportError:
    k8s_client = None
    ApiException = Exception


def argument_spec():
    spec = dict(
        service_account=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        secret=dict(type="str", no_log=False),  # the Secret's name, not its content
        path=dict(type="path", required=True),
        server=dict(type="str"),
        cluster_name=dict(type="str", default="gpushare"),
        context_name=dict(type="str"),
        context_namespace=dict(type="str"),
        wait_timeout=dict(type="int", default=60),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def secret_reader(core, name, namespace):
    """A function returning the Secret as a dict; API errors become KubeconfigError."""
    def read():
        try:
            response = core.read_namespaced_secret(name, namespace, _preload_content=False)
            try:
                return json.loads(response.data)
            finally:
                response.release_conn()
        except ApiException as exc:
            try:
                message = json.loads(exc.body).get("message") or exc.reason
            except (TypeError, ValueError, AttributeError):
                message = exc.reason
            raise KubeconfigError("cannot read Secret {0}/{1}: HTTP {2}: {3}".format(namespace, name, exc.status, message), exc.status)
    return read


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)

    params = module.params
    service_account = params["service_account"]
    secret = params["secret"] or "{0}-token".format(service_account)
    context = params["context_name"] or service_account
    try:
        configuration = build_configuration(params)
        core = k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))
        token, secret_ca = wait_for_token(secret_reader(core, secret, params["namespace"]), service_account, params["wait_timeout"])
        # Whatever happens next, no result or message of this module can carry the token.
        module.no_log_values.add(token)
        insecure = not configuration.verify_ssl
        ca_data = None if insecure else (ca_data_from_file(configuration.ssl_ca_cert) or secret_ca)
        server = params["server"] or configuration.host
        kubeconfig = build_kubeconfig(
            server=server, token=token, user=context, cluster=params["cluster_name"], context=context,
            namespace=params["context_namespace"], ca_data=ca_data, insecure=insecure,
        )
        changed, diff = ensure_kubeconfig(params["path"], kubeconfig, check_mode=module.check_mode)
    except KubeconfigError as exc:
        if module.check_mode and exc.status == 404:
            # Check mode did not create the Secret: the real run will, then write the file.
            module.exit_json(changed=True, path=params["path"], context=context,
                             msg="Secret {0}/{1} does not exist yet; the kubeconfig would be written once it does".format(params["namespace"], secret))
        module.fail_json(msg=str(exc), changed=False)
    except K8sAuthError as exc:
        module.fail_json(msg=str(exc), changed=False)
    except Exception as exc:  # an unexpected failure still ends as a message, not a traceback
        module.fail_json(msg="unexpected error: {0}: {1}".format(type(exc).__name__, exc), exception=traceback.format_exc())

    result = dict(changed=changed, path=params["path"], server=server, context=context)
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
