# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Connection options the collection's Kubernetes modules add to kubernetes.core's.

Modules extend C(kubernetes.core.k8s_auth_options) (kubernetes.core's 16 auth options, whose
argument spec plugins/module_utils/k8s/auth.py imports) and this fragment, which documents
OWN_ARG_SPEC of that file.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  request_timeout:
    description:
      - Seconds each request to the API server may take (connecting and reading the answer). An API server that
        stops answering fails the task with a message naming it, instead of hanging it.
      - A request that timed out is not sent again. A connection that could not be opened is tried 3 more
        times (within half a second); reads and merge patches answered with HTTP 429 or 5xx, or cut before
        the answer, up to 9 more times with backoff (about 10 seconds, longer when the API server sends
        C(Retry-After)).
      - kubernetes.core has no such option; bound its tasks with the C(timeout) task keyword.
    type: float
    default: 30
requirements:
  - kubernetes >= 24.2.0 (Python library)
  - urllib3 >= 2.0 (Python library)
notes:
  - Options given to the task win over the E(K8S_AUTH_*) environment variables, which win over the kubeconfig.
  - The E(K8S_AUTH_*) variables, and E(KUBECONFIG) for the default kubeconfig, are read as kubernetes.core's modules
    read them, from the environment the module runs with. A task's C(environment) wins over the controller's own, also
    when the module runs in the controller (its action plugin, on a local connection).
  - The auth options are kubernetes.core's. The action group C(gpushare.k8s.k8s) holds the collection's modules
    and extends kubernetes.core's C(kubernetes.core.k8s), so one C(module_defaults) block for
    C(group/gpushare.k8s.k8s) sets the auth options of both collections' modules. Set O(request_timeout) for
    C(group/gpushare.k8s.modules) (the collection's modules alone), since kubernetes.core's modules would refuse it.
"""
