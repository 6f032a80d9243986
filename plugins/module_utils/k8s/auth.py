# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build a ``kubernetes.client.ApiClient`` from kubernetes.core's auth options.

The options are kubernetes.core's own: its ``AUTH_ARG_SPEC`` (all 16 options, with their
aliases) is imported, not copied, and the ``K8S_AUTH_*`` environment variables are derived
from its ``AUTH_ARG_MAP``, so one ``module_defaults`` block configures both collections.
The collection adds ``request_timeout``. This file imports nothing from Ansible: modules
pass their ``params`` in, tests call it directly.

Precedence, as in kubernetes.core (``module_utils/k8s/client.py``, ``_create_auth_spec`` and
``_create_configuration``):

1. an option given to the task (or by ``module_defaults``);
2. its ``K8S_AUTH_*`` variable in the environment the module runs with: for a module process that is
   the environment it was started with, the task's ``environment:`` over the controller's (or the remote
   host's); for a module run in the controller by its action plugin, the same mapping
   (plugin_utils/controller_action.py puts the task's ``environment:`` into ``os.environ`` of the task's
   worker while the module runs). ``environ`` defaults to ``os.environ`` as it is at the call, not at import;
3. ``host`` plus a credential (``api_key``, ``username``/``password`` or
   ``client_cert``/``client_key``) is enough on its own, no file is read;
4. otherwise ``kubeconfig``/``context`` are loaded when given, else the
   in-cluster service account is tried, then the default kubeconfig
   (``$KUBECONFIG`` of that environment, or ``~/.kube/config``: :func:`default_kubeconfig`);
5. explicit options override what the kubeconfig said.

``request_timeout`` (not a kubernetes.core option: its 6.x modules have none) bounds
every request made through the client ``build_api_client`` returns: an API server that
stops answering fails the call after that many seconds instead of hanging the task.

Transient failures are retried below every caller by urllib3's own ``Retry``
(:func:`api_retry`): connections that could not be opened, and reads (and merge patches)
answered 429 or 5xx or cut mid-way, with exponential backoff and ``Retry-After``; a request
that timed out is never retried.
"""

from __future__ import annotations

import copy
import math
import os
import traceback

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
    AUTH_ARG_MAP as CORE_AUTH_ARG_MAP,
    AUTH_ARG_SPEC as CORE_AUTH_ARG_SPEC,
    AUTH_PROXY_HEADERS_SPEC,
)

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
    urllib3 = None
    k8s_client = None
    k8s_config = None
    ConfigException = Exception
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None

from ..errors import GpushareError


# The collection's own connection options, documented in plugins/doc_fragments/k8s_auth.py.
OWN_ARG_SPEC = {
    "request_timeout": {"type": "float", "default": 30},
}

# Argument spec shared by every module of the collection that talks to the API server (merge it
# into the module's own spec): kubernetes.core's options (doc fragment kubernetes.core.k8s_auth_options)
# plus ours (doc fragment gpushare.k8s.k8s_auth).
AUTH_ARG_SPEC = dict(copy.deepcopy(CORE_AUTH_ARG_SPEC), **copy.deepcopy(OWN_ARG_SPEC))
# kubeconfig is not no_log here: a path is no secret, and masking it turned every message naming the file into
# "********". A kubeconfig given as a dict holds credentials: modules call hide_kubeconfig_credentials.
AUTH_ARG_SPEC["kubeconfig"]["no_log"] = False

AUTH_OPTIONS = tuple(AUTH_ARG_SPEC)


def _env_vars(option):
    """kubernetes.core's environment names for ``option``: K8S_AUTH_<OPTION>, then K8S_AUTH_<CLIENT NAME>."""
    if option in OWN_ARG_SPEC:
        return ()
    if option == "proxy_headers":
        return tuple("K8S_AUTH_PROXY_HEADERS_{0}".format(key.upper()) for key in AUTH_PROXY_HEADERS_SPEC)
    names = ["K8S_AUTH_{0}".format(option.upper())]
    names.extend("K8S_AUTH_{0}".format(name.upper()) for name, arg in CORE_AUTH_ARG_MAP.items() if arg == option)
    return tuple(dict.fromkeys(names))


# Environment fallbacks, first match wins.
AUTH_ENV_VARS = {option: _env_vars(option) for option in AUTH_OPTIONS}

# kubernetes.core reads every other string in a boolean variable as true.
_FALSE_STRINGS = ("0", "false", "no")
_BOOL_OPTIONS = tuple(option for option, spec in CORE_AUTH_ARG_SPEC.items() if spec.get("type") == "bool")
_LIST_OPTIONS = tuple(option for option, spec in CORE_AUTH_ARG_SPEC.items() if spec.get("type") == "list")
_PATH_OPTIONS = ("ca_cert", "client_cert", "client_key")

# Seconds one request may take when the task gives no request_timeout.
DEFAULT_REQUEST_TIMEOUT = AUTH_ARG_SPEC["request_timeout"]["default"]

# Smallest pool worth keeping: a LIST and a few PATCHes in flight.
MIN_POOL_SIZE = 4

IMPERSONATE_USER_HEADER = "Impersonate-User"
IMPERSONATE_GROUP_HEADER = "Impersonate-Group"


class K8sAuthError(GpushareError):
    """The auth options cannot produce a working client configuration."""


def kubeconfig_credentials(kubeconfig):
    """The strings to keep out of output from a kubeconfig given as a dict: every value under ``users[].user``.

    That is where a kubeconfig holds tokens, passwords, client keys and certificates, and ``exec`` and
    ``auth-provider`` settings. A path (or anything but a dict) holds none.
    """
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value:
            found.add(value)

    if isinstance(kubeconfig, dict):
        for entry in kubeconfig.get("users") or []:
            if isinstance(entry, dict):
                walk(entry.get("user"))
    return found


def hide_kubeconfig_credentials(module):
    """Mask the credentials of a dict ``kubeconfig`` option in everything ``module`` returns (an ``AnsibleModule``)."""
    module.no_log_values.update(kubeconfig_credentials(module.params.get("kubeconfig")))


def _env_bool(value):
    return value.strip().lower() not in _FALSE_STRINGS


def _from_env(option, environ):
    """The value of ``option`` from its ``K8S_AUTH_*`` variables, converted to the option's type, or ``None``."""
    if option == "proxy_headers":
        headers = {}
        for key, var in zip(AUTH_PROXY_HEADERS_SPEC, AUTH_ENV_VARS[option]):
            if environ.get(var):
                headers[key] = environ[var]
        return headers or None
    for var in AUTH_ENV_VARS[option]:
        value = environ.get(var)
        if value is not None and value != "":
            if option in _BOOL_OPTIONS:
                return _env_bool(value)
            if option in _LIST_OPTIONS:
                return [item for item in value.split(",") if item]
            return value
    return None


def resolve_auth_params(params, environ=None):
    """Return the effective auth options: task options first, then ``K8S_AUTH_*``.

    ``params`` may hold other (non-auth) keys; they are ignored. Values that are
    ``None`` count as unset. Environment strings are converted to the option's
    type (booleans, the comma-separated ``impersonate_groups``, ``proxy_headers``
    from ``K8S_AUTH_PROXY_HEADERS_<KEY>``), paths expanded.
    """
    environ = os.environ if environ is None else environ
    resolved = {}
    for option in AUTH_OPTIONS:
        value = params.get(option) if params else None
        if value is None:
            value = _from_env(option, environ)
        if value is None:
            continue
        if option in _PATH_OPTIONS:
            value = os.path.expanduser(value)
        resolved[option] = value
    return resolved


def _has_own_credentials(auth):
    if not auth.get("host"):
        return False
    return bool(
        auth.get("api_key")
        or (auth.get("username") and auth.get("password"))
        or (auth.get("client_cert") and auth.get("client_key"))
    )


def _kubeconfig_paths(kubeconfig):
    paths = [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]
    missing = [p for p in paths if not os.path.exists(p)]
    if not paths or missing:
        raise K8sAuthError(
            "kubeconfig: file {0} does not exist; pass the path of a kubeconfig file "
            "(option kubeconfig or K8S_AUTH_KUBECONFIG)".format(", ".join(missing) or repr(kubeconfig))
        )
    return os.pathsep.join(paths)


def default_kubeconfig(environ=None):
    """The kubeconfig file(s) read when neither ``kubeconfig`` nor ``K8S_AUTH_KUBECONFIG`` names one.

    ``$KUBECONFIG`` of ``environ`` (``os.environ`` when ``None``), else ``~/.kube/config``: the kubernetes library's
    own rule (``KUBE_CONFIG_DEFAULT_LOCATION`` in ``kubernetes/config/kube_config.py``). The library applies it
    once, when it is imported: in a module process that is after the task's ``environment:`` was set, in the
    controller it is before any task. Applied here at every call, a module run in the controller reads the file a
    module process would.
    """
    environ = os.environ if environ is None else environ
    return environ.get("KUBECONFIG", "~/.kube/config")


def _load_kubeconfig(configuration, auth, environ=None):
    kubeconfig = auth.get("kubeconfig")
    context = auth.get("context")
    # persist_config: a refreshed token (OIDC and the like) is written back to the kubeconfig file.
    persist = bool(auth.get("persist_config"))
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(
                config_dict=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif kubeconfig is None or isinstance(kubeconfig, str):
            # A file named by the task must exist; the default is read as the kubernetes library reads it
            # (missing files of a $KUBECONFIG list skipped).
            config_file = _kubeconfig_paths(kubeconfig) if kubeconfig else default_kubeconfig(environ)
            k8s_config.load_kube_config(
                config_file=config_file,
                context=context,
                client_configuration=configuration,
                persist_config=persist,
            )
        else:
            raise K8sAuthError(
                "kubeconfig: expected a file path or a kubeconfig dict, got {0}".format(
                    type(kubeconfig).__name__
                )
            )
    except K8sAuthError:
        raise
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        if isinstance(kubeconfig, dict):
            where = "the kubeconfig dict"
        else:
            where = kubeconfig or "the default kubeconfig {0}".format(default_kubeconfig(environ))
        hint = " (context {0!r})".format(context) if context else ""
        raise K8sAuthError("could not load {0}{1}: {2}".format(where, hint, exc))


def _apply_overrides(configuration, overrides):
    """Set explicit options on ``configuration`` and keep them set.

    A kubeconfig with a token installs a refresh hook that rewrites the token,
    host and TLS files before every request; wrap it so the options given to
    the task still win afterwards.
    """
    if not overrides:
        return

    def apply(target):
        for key, value in overrides.items():
            setattr(target, key, copy.copy(value))

    apply(configuration)
    hook = configuration.refresh_api_key_hook
    if hook is not None:

        def refresh(target):
            hook(target)
            apply(target)

        configuration.refresh_api_key_hook = refresh


def build_configuration(params, environ=None, pool_maxsize=None):
    """Return a ``kubernetes.client.Configuration`` for the given options.

    ``pool_maxsize`` sizes the urllib3 connection pool: pass the number of
    requests the caller runs at once so threads never wait for a socket.
    """
    if not HAS_KUBERNETES:
        raise K8sAuthError("the kubernetes Python library is required")

    auth = resolve_auth_params(params, environ)
    configuration = k8s_client.Configuration()

    if _has_own_credentials(auth):
        pass
    elif auth.get("kubeconfig") or auth.get("context"):
        _load_kubeconfig(configuration, auth, environ)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            try:
                _load_kubeconfig(configuration, auth, environ)
            except K8sAuthError as exc:
                raise K8sAuthError(
                    "no Kubernetes credentials found: not running in a cluster and {0}. "
                    "Set kubeconfig (or K8S_AUTH_KUBECONFIG), or host with api_key.".format(exc)
                )

    overrides = {}
    if auth.get("host"):
        overrides["host"] = auth["host"].rstrip("/")
    if auth.get("api_key"):
        overrides["api_key"] = {"authorization": "Bearer {0}".format(auth["api_key"])}
    elif auth.get("username") and auth.get("password"):
        # The generated client has no basic-auth setting of its own: send the
        # header through the slot the bearer token uses.
        basic = k8s_client.Configuration(username=auth["username"], password=auth["password"])
        overrides["api_key"] = {"authorization": basic.get_basic_auth_token()}
    if "api_key" in overrides:
        overrides["api_key_prefix"] = {}
    if auth.get("validate_certs") is not None:
        overrides["verify_ssl"] = bool(auth["validate_certs"])
    if auth.get("ca_cert"):
        overrides["ssl_ca_cert"] = auth["ca_cert"]
    if auth.get("client_cert"):
        overrides["cert_file"] = auth["client_cert"]
    if auth.get("client_key"):
        overrides["key_file"] = auth["client_key"]
    if auth.get("proxy"):
        overrides["proxy"] = auth["proxy"]
    if auth.get("no_proxy"):
        overrides["no_proxy"] = auth["no_proxy"]
    proxy_headers = {key: value for key, value in (auth.get("proxy_headers") or {}).items() if value}
    if proxy_headers:
        overrides["proxy_headers"] = urllib3.util.make_headers(**proxy_headers)
    _apply_overrides(configuration, overrides)

    if pool_maxsize is not None:
        configuration.connection_pool_maxsize = max(int(pool_maxsize), MIN_POOL_SIZE)
    return configuration


def request_timeout(params):
    """The ``request_timeout`` option in seconds (a float above 0), its default when unset."""
    value = (params or {}).get("request_timeout")
    if value is None:
        return float(DEFAULT_REQUEST_TIMEOUT)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = 0.0
    if isinstance(value, bool) or not (seconds > 0 and math.isfinite(seconds)):
        raise K8sAuthError("request_timeout: {0!r} is not a number of seconds above 0; set e.g. request_timeout: 30".format(value))
    return seconds


# Retries below every caller (urllib3's Retry, see api_retry): how many, and how long between them.
RETRIES = 9  # in all; an API server answering 429 or 5xx is alive and asks to wait: about 10 s of backoff
CONNECT_RETRIES = 3  # a refused connection: an API server restarting, or (far more often) not started at all
READ_RETRIES = 3  # a connection cut before the answer
RETRY_BACKOFF = 0.05  # seconds; doubles each retry after the second: 0, 0.1, 0.2, 0.4 ... up to RETRY_BACKOFF_MAX
RETRY_BACKOFF_MAX = 2.0
RETRY_JITTER = 0.05  # up to this many seconds more, so parallel writers spread out
RETRY_AFTER_MAX = 20  # a Retry-After header is honoured up to this many seconds
# 429: API priority and fairness asked us to slow down. 5xx: server trouble. Not 409: a conflict
# needs a fresh read and a new plan, which only the caller can make (node_status does).
RETRY_STATUS = (429, 500, 502, 503, 504)
# Requests urllib3 may send again after a 429/5xx or a connection cut mid-way: reads, and PATCH
# because every PATCH of this collection is a JSON merge patch (applying it twice is applying it once;
# node status patches also carry a resourceVersion precondition). POST (token requests) is not resent.
RETRY_METHODS = frozenset(("GET", "HEAD", "PATCH"))


def is_timeout(error):
    """True when ``error`` (a urllib3 error) says the API server took the connection and sent no answer in time.

    urllib3 files a refused connection (``NewConnectionError``) under ``ConnectTimeoutError`` too: that one is
    not a timeout.
    """
    return isinstance(error, (urllib3.exceptions.TimeoutError, TimeoutError)) and not isinstance(
        error, urllib3.exceptions.NewConnectionError
    )


if HAS_KUBERNETES:

    class ApiRetry(urllib3.util.Retry):
        """urllib3's ``Retry`` with two rules of the collection on top.

        A request that timed out is never sent again: the API server took it and did not answer within
        ``request_timeout``, another try would only wait as long again (and one task would take a multiple
        of the bound it was given). ``Retry-After`` is honoured up to ``RETRY_AFTER_MAX`` seconds.
        """

        def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
            if error is not None and is_timeout(error):
                raise urllib3.exceptions.MaxRetryError(_pool, url, error) from error
            return super().increment(method, url, response, error, _pool, _stacktrace)

        def parse_retry_after(self, retry_after):
            return min(super().parse_retry_after(retry_after), RETRY_AFTER_MAX)

    class TimedApiClient(k8s_client.ApiClient):
        """An ApiClient whose requests time out after ``request_timeout`` seconds unless a call passes its own."""

        request_timeout = float(DEFAULT_REQUEST_TIMEOUT)

        def call_api(self, *args, **kwargs):  # pylint: disable=arguments-differ
            # (method, url, header_params, body, post_params, _request_timeout): the sixth may come positionally.
            if len(args) < 6 and kwargs.get("_request_timeout") is None:
                kwargs["_request_timeout"] = self.request_timeout
            return super().call_api(*args, **kwargs)

    class _RepeatedHeader(str):
        """A header name that can appear more than once in the client's header dict (one line per value).

        The API server reads every ``Impersonate-Group`` line as one group; a comma in one line would be part
        of a group's name.
        """

        __hash__ = object.__hash__

        def __eq__(self, other):
            return self is other

        def __ne__(self, other):
            return self is not other

else:
    ApiRetry = None
    TimedApiClient = None
    _RepeatedHeader = None


def api_retry():
    """The urllib3 ``Retry`` every client of the collection uses (``configuration.retries``).

    Connections that could not be opened are retried for every method (nothing was sent); requests in
    :data:`RETRY_METHODS` also after a 429 or 5xx answer or a connection cut mid-way. After the last retry the
    API server's answer is returned as it is (``raise_on_status=False``), so callers report its status and
    message.
    """
    return ApiRetry(
        total=RETRIES,
        connect=CONNECT_RETRIES,
        read=READ_RETRIES,
        redirect=0,
        status_forcelist=RETRY_STATUS,
        allowed_methods=RETRY_METHODS,
        backoff_factor=RETRY_BACKOFF,
        backoff_max=RETRY_BACKOFF_MAX,
        backoff_jitter=RETRY_JITTER,
        respect_retry_after_header=True,
        raise_on_status=False,
    )


def impersonation_headers(auth):
    """``[(header, value)]`` for ``impersonate_user`` and each of ``impersonate_groups``."""
    headers = []
    if auth.get("impersonate_user"):
        headers.append((IMPERSONATE_USER_HEADER, auth["impersonate_user"]))
    for group in auth.get("impersonate_groups") or ():
        if group:
            headers.append((IMPERSONATE_GROUP_HEADER, group))
    return headers


def build_api_client(params, environ=None, pool_maxsize=None):
    """Return a ``kubernetes.client.ApiClient`` built from the auth options.

    Every request through it is bounded by the ``request_timeout`` option (connect and read), transient
    failures are retried by :func:`api_retry`, and ``impersonate_user``/``impersonate_groups`` are sent as
    the ``Impersonate-*`` headers of every request.
    """
    seconds = request_timeout(params)
    configuration = build_configuration(params, environ=environ, pool_maxsize=pool_maxsize)
    configuration.retries = api_retry()
    api_client = TimedApiClient(configuration)
    api_client.request_timeout = seconds
    for header, value in impersonation_headers(resolve_auth_params(params, environ)):
        api_client.default_headers[_RepeatedHeader(header)] = value
    return api_client
