# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Connection options shared by the collection's Kubernetes modules.

Same names, aliases and environment variables as kubernetes.core, so one
module_defaults block configures both. Kept in step with AUTH_ARG_SPEC in
plugins/module_utils/k8s_auth.py.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - Several files can be given separated by V(:) (V(;) on Windows), as in E(KUBECONFIG).
      - If not set, and no O(host) with credentials is given, the in-cluster service account is
        tried, then the default kubeconfig (E(KUBECONFIG) or C(~/.kube/config)).
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: raw
  context:
    description:
      - The name of a context in the kubeconfig.
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Overrides the server of the kubeconfig.
      - Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token used to authenticate with the API server.
      - Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  username:
    description:
      - User name for HTTP basic authentication, with O(password).
      - Only for API servers that still accept basic authentication.
      - Can also be set with the E(K8S_AUTH_USERNAME) environment variable.
    type: str
  password:
    description:
      - Password for HTTP basic authentication, with O(username).
      - Can also be set with the E(K8S_AUTH_PASSWORD) environment variable.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate.
      - Can also be set with the E(K8S_AUTH_VERIFY_SSL) (or E(K8S_AUTH_VALIDATE_CERTS)) environment variable.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to the CA certificate (full chain) that signed the API server's certificate.
      - Can also be set with the E(K8S_AUTH_SSL_CA_CERT) (or E(K8S_AUTH_CA_CERT)) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate used to authenticate with the API server.
      - Can also be set with the E(K8S_AUTH_CERT_FILE) (or E(K8S_AUTH_CLIENT_CERT)) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert).
      - Can also be set with the E(K8S_AUTH_KEY_FILE) (or E(K8S_AUTH_CLIENT_KEY)) environment variable.
    type: path
    aliases: [key_file]
  proxy:
    description:
      - URL of an HTTP proxy to reach the API server through.
      - Can also be set with the E(K8S_AUTH_PROXY) environment variable.
    type: str
  request_timeout:
    description:
      - Seconds each request to the API server may take (connecting and reading the answer). An API server that
        stops answering fails the task with a message naming it, instead of hanging it.
      - kubernetes.core has no such option; bound its tasks with the C(timeout) task keyword.
    type: float
    default: 30
requirements:
  - kubernetes >= 24.2.0 (Python library)
notes:
  - Options given to the task win over the E(K8S_AUTH_*) environment variables, which win over the kubeconfig.
  - Set these options once for every module of the collection with
    C(module_defaults) and the C(group/gpushare.k8s.k8s) action group.
"""
