"""Who may call the referee, and how often: API keys (``keys``), shared quotas (``quotas``), the
interceptor that applies them (``interceptor``), refusals (``refusals``) and the plan the flags
make (``plan``), and who the client is behind a gateway (``proxies``). The names below are the package's public face."""

from referee.server.access.interceptor import (
    FAILED_KEYS_MESSAGE,
    AccessInterceptor,
    check_key,
    client_address,
    current_key,
    current_key_name,
    take_call,
)
from referee.server.access.keys import (
    AUTHORIZATION,
    UNAUTHENTICATED_MESSAGE,
    ApiKey,
    KeyFileError,
    KeyRing,
    bearer_key,
    check_name,
    digest_of,
    keygen_lines,
    new_key,
    parse_concurrency,
    parse_keys,
    parse_rate,
)
from referee.server.access.plan import AccessPlan, exposure_warning, is_loopback
from referee.server.access.proxies import TrustedProxies
from referee.server.access.quotas import QuotaTable
from referee.server.access.refusals import Refusal, know_methods, method_label, refusal_line, refused
from referee.server.status import QuotaExceeded, quota_status

__all__ = [
    "AUTHORIZATION",
    "FAILED_KEYS_MESSAGE",
    "UNAUTHENTICATED_MESSAGE",
    "AccessInterceptor",
    "AccessPlan",
    "ApiKey",
    "KeyFileError",
    "KeyRing",
    "QuotaExceeded",
    "QuotaTable",
    "Refusal",
    "TrustedProxies",
    "bearer_key",
    "check_key",
    "check_name",
    "client_address",
    "current_key",
    "current_key_name",
    "digest_of",
    "exposure_warning",
    "is_loopback",
    "keygen_lines",
    "know_methods",
    "method_label",
    "new_key",
    "parse_concurrency",
    "parse_keys",
    "parse_rate",
    "quota_status",
    "refusal_line",
    "refused",
    "take_call",
]
