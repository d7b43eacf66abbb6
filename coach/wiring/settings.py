"""Settings, all read from the environment. What each variable means is said once, in
.env.example; the comments here say why the code does what it does with it.

Production is the default, so a deployment that forgets a variable fails closed: a missing
secret stops start-up with a line naming it rather than running on a guessable default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from coach.wiring.web_server import web_max_connections
from infra.dbpool import connection_check
from infra.environment import (
    DEFAULT_OFFLINE_COACH_URL,
    env_bool,
    env_fernet_keys,
    env_float,
    env_int,
    env_list,
    env_required,
    env_secret,
    env_str,
    local_address,
)

BASE_DIR = Path(__file__).resolve().parents[2]

DEBUG = env_bool("DJANGO_DEBUG", default=False)

SECRET_KEY = env_secret(
    "DJANGO_SECRET_KEY",
    why="it signs sessions and tokens; make one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'",
)
FIELD_ENCRYPTION_KEYS = env_fernet_keys(
    "FIELD_ENCRYPTION_KEYS",
    why="it encrypts memories and messages at rest; make a key with: "
    "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'",
)

FIELD_LOOKUP_KEY = env_secret(
    "FIELD_LOOKUP_KEY",
    why="it keys the digests by which encrypted memory keys are found; make one with: "
    "python -c 'import secrets; print(secrets.token_urlsafe(48))'",
)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is not set: list the host names this app answers to, comma-separated.")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])
# In development the links in mail open where the run command serves, so a session cookie
# set on that address is sent back (127.0.0.1 and localhost do not share cookies).
dev_address = local_address(env_str("HOST", "127.0.0.1"), env_int("PORT", default=8000))
SITE_URL = env_str("SITE_URL", dev_address if DEBUG else "").rstrip("/")
if not SITE_URL:
    raise ImproperlyConfigured("SITE_URL is not set: the https address users reach the app at, for links in emails.")
# Account mail names SITE_URL's domain and this, never the host a request happened to name.
SITE_NAME = env_str("SITE_NAME", "Coach")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "allauth",
    "allauth.account",
    # A second factor (an authenticator app, with recovery codes): the admin requires it.
    "allauth.mfa",
    "django_htmx",
    # The wiring itself, to load the Celery app (coach/wiring/apps.py).
    "coach.wiring",
    "coach",
    "memory",
    "accounts",
    "emails",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the body: an oversized form gets a 413 that explains itself.
    "coach.middleware.request_body_within_limit",
    # Static files, served by the app itself; async, so a request does not change threads.
    "servestatic.middleware.ServeStaticMiddleware",
    # Pages gzipped (static files are served pre-compressed above, so never reach it);
    # BREACH-aware and leaving server-sent events alone: see coach/compression.py.
    "coach.compression.GZipPagesMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "coach.middleware.csp_nonce_on_every_response",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A database that refuses writes (a standby, or set read-only) gives the page's own
    # error, 503, rather than a 500 (its process_exception is asked first, being inside).
    "coach.middleware.WritesRefusedAnswered",
    # Last, and synchronous only: no page the app renders is kept by a browser or a proxy
    # cache (most hold someone's data). Being synchronous and innermost, it makes everything
    # between it and the static files one synchronous block, which a request enters once
    # (coach/middleware.py says why that matters).
    "coach.middleware.never_stored",
]

ROOT_URLCONF = "coach.wiring.urls"
# A message of COACH_MAX_MESSAGE_CHARS, percent-encoded, is far below it and the app takes
# no uploads; refused before the body is read (coach/wiring/asgi.py), so Django never holds more.
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", default=512 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
WSGI_APPLICATION = "coach.wiring.wsgi.application"
ASGI_APPLICATION = "coach.wiring.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_required(
    "DATABASE_URL", why="the run and test commands start a local PostgreSQL when it is unset; elsewhere set it."
)
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
except ValueError as error:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL Django can use: {error}") from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgresql://...): memories need pgvector.")
# A pool per process: a streaming reply borrows a connection for each database step and
# gives it back while it waits on the model, so replies in flight do not need one each.
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"].setdefault("OPTIONS", {}).update(
    {
        "pool": {
            "min_size": env_int("DATABASE_POOL_MIN_SIZE", default=1),
            "max_size": env_int("DATABASE_POOL_MAX_SIZE", default=20),
            # A request that cannot get a connection fails, with a page that says so, rather
            # than hangs.
            "timeout": env_float("DATABASE_POOL_TIMEOUT_SECONDS", default=10.0),
            # Each connection is checked as it is handed out, so after the database restarts
            # no request fails on one the server closed (CONN_HEALTH_CHECKS' check alone
            # makes a request wait seconds per closed connection: infra/dbpool.py).
            "check": connection_check,
        },
        # An unreachable database fails in seconds, not after the OS's TCP timeout.
        "connect_timeout": 5,
    }
)
# Every statement reads one person's rows or a due-list through an index, where starting
# parallel workers costs more than the read: with a stale row estimate at 10,000 people,
# the history prune planned two workers and spent 4 ms starting them for a 0.06 ms read
# (bin/bench scale). Options the URL gives (`?options=...`) are kept.
DATABASES["default"]["OPTIONS"]["options"] = " ".join(
    filter(None, [DATABASES["default"]["OPTIONS"].get("options"), "-c max_parallel_workers_per_gather=0"])
)
_pool = DATABASES["default"]["OPTIONS"]["pool"]
if not 0 <= _pool["min_size"] <= _pool["max_size"]:
    # Said now, at start-up, rather than by the pool at the first request.
    raise ImproperlyConfigured("DATABASE_POOL_MIN_SIZE must be between 0 and DATABASE_POOL_MAX_SIZE.")

# The most connections one web process takes at once (its server's limit, coach/wiring/web_server.py),
# which sizes its pool of connections to Redis (infra/redis.py).
WEB_MAX_CONNECTIONS = web_max_connections()
REDIS_URL = env_required(
    "REDIS_URL", why="the run and test commands start a local Redis when it is unset; elsewhere set it."
)
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        # Redis, and this process's memory while Redis does not answer (infra/cache_backend.py).
        "BACKEND": "infra.cache_backend.RedisCacheWithFallback",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "coach",
        # A local Redis answers in well under a millisecond; one that takes this long is down.
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

AUTH_USER_MODEL = "accounts.User"
# Database sessions that know their owner, so erasing a person ends every login of theirs.
SESSION_ENGINE = "accounts.sessions"
# Django's and allauth's, taking the person loaded with the login session as its user.
AUTHENTICATION_BACKENDS = [
    "accounts.backends.ModelBackend",
    "accounts.backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "chat"

# django-allauth: email and password, verified email, rate limits on (they count in Redis).
# Sign-up, password-reset and sign-in mail is queued, then sent by a task (emails/outbox.py).
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "mandatory")
if not DEBUG and ACCOUNT_EMAIL_VERIFICATION != "mandatory":
    raise ImproperlyConfigured("ACCOUNT_EMAIL_VERIFICATION must be 'mandatory' in production.")
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_CONFIRM_EMAIL_ON_GET = False
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
# A stolen session is not a stolen account: changing the email address or the password,
# and exporting everything, first ask for the password (or second factor) again.
ACCOUNT_REAUTHENTICATION_REQUIRED = True
ACCOUNT_REAUTHENTICATION_TIMEOUT = 300
# The person is told by email when their password or addresses change.
ACCOUNT_EMAIL_NOTIFICATIONS = True
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
# Second-factor secrets are encrypted with FIELD_ENCRYPTION_KEYS, like memories.
MFA_ADAPTER = "accounts.adapter.MfaAdapter"
ACCOUNT_DEFAULT_HTTP_PROTOCOL = SITE_URL.split("://", 1)[0]
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "10/m/ip,5/5m/key",
    "signup": "20/m/ip",
    "confirm_email": "1/3m/key",
    # Per address too: reset mail (to unknown addresses as well) cannot be used to flood one.
    "reset_password": "20/m/ip,3/15m/key",
    "reset_password_from_key": "20/m/ip",
    "change_password": "5/m/user",
}

# Lower case: an EMAIL_HOST setting beside MAILERS is refused by Django 6.1.
email_host = env_str("EMAIL_HOST")
# A development mail catcher has no TLS; production must say which it wants, because a
# default either way is wrong somewhere (an internet relay needs STARTTLS, a sidecar has none).
if not DEBUG and email_host and not env_str("EMAIL_USE_TLS"):
    raise ImproperlyConfigured(
        "EMAIL_USE_TLS is not set: say true for a mail server reached over the internet (STARTTLS), "
        "false only for one on a private network."
    )
email_use_tls = env_bool("EMAIL_USE_TLS", default=not DEBUG)
if email_host:
    MAILERS: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": email_host,
                "port": env_int("EMAIL_PORT", default=587),
                "username": env_str("EMAIL_HOST_USER") or None,
                "password": env_str("EMAIL_HOST_PASSWORD") or None,
                "use_tls": email_use_tls,
                "timeout": env_int("EMAIL_TIMEOUT_SECONDS", default=10),
            },
        }
    }
elif DEBUG:
    MAILERS = {"default": {"BACKEND": "infra.console_mail.ReadableConsoleBackend"}}
else:
    raise ImproperlyConfigured("EMAIL_HOST is not set: production sends verification and follow-up mail over SMTP.")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Coach <coach@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# Celery: Redis is broker and result store. Schedules live beside the tasks they run.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# A worker holds only the task it runs: one killed (SIGKILL, out of memory) leaves nothing
# it had fetched ahead waiting for the broker to hand it out again (an hour or so: the
# visibility timeout, set below with the emails it has to outlast).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The minutes of each hour at which nudges are planned (UTC); the account page's "your next
# note" counts on them.
EMAIL_NUDGE_PLANNING_MINUTES = (5, 20, 35, 50)
# What runs on a schedule, in plain words: see each task's docstring. Beat runs as one
# instance; a second one, or a tick repeated, cannot send an email twice (the ledger's
# unique key). A planning tick that no worker started within its quarter hour expires:
# the next tick plans the same people.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Sessions idle for COACH_SESSION_IDLE_MINUTES are ended and summarised.
    "end-idle-sessions": {"task": "coach.tasks.end_idle_sessions", "schedule": 300.0},
    # Every ten seconds: a temporary conversation its person left (or that went idle), with
    # no page of it open, is deleted with everything said in it.
    "sweep-temporary-conversations": {
        "task": "coach.tasks.sweep_temporary_conversations",
        "schedule": 10.0,
        "options": {"expires": 9},
    },
    # Every half minute: a turn whose web process died (past its deadline, still
    # "answering") is ended failed and retryable.
    "sweep-stale-turns": {"task": "coach.tasks.sweep_stale_turns", "schedule": 30.0, "options": {"expires": 25}},
    # Every half minute: each ended session still without a summary gets a summary task
    # (ending one only marks it, so a broker outage delays summaries, never loses them).
    "summarise-ended-sessions": {
        "task": "coach.tasks.summarise_ended_sessions",
        "schedule": 30.0,
        "options": {"expires": 25},
    },
    # Every 5 seconds: mail someone is waiting for (a sign-up confirmation, a password
    # reset), queued by the page that asked for it, is sent; SMTP outages only delay it.
    "send-outgoing-mail": {"task": "emails.tasks.send_outgoing_mail", "schedule": 5.0, "options": {"expires": 4}},
    # Every quarter hour: people with an intention coming up within MEMORY_PROSPECTIVE_LEAD_DAYS
    # are asked how it is going, if it is a good time to write to them.
    "plan-check-ins": {
        "task": "emails.tasks.plan_check_ins",
        "schedule": crontab(minute="0,15,30,45"),
        "options": {"expires": 14 * 60},
    },
    # Every quarter hour, five minutes after the check-ins (which come first): people due
    # their weekly or twice-weekly nudge, in their sending hours, get one planned.
    "plan-nudges": {
        "task": "emails.tasks.plan_nudges",
        "schedule": crontab(minute=",".join(str(minute) for minute in EMAIL_NUDGE_PLANNING_MINUTES)),
        "options": {"expires": 14 * 60},
    },
    # Every minute: a session summarised since the last tick gets its recap email, for
    # those who asked for recaps.
    "plan-session-recaps": {
        "task": "emails.tasks.plan_session_recaps",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    # Every 5 seconds: claims of senders that died (their process gone, or their heartbeat
    # silent for EMAIL_CLAIM_SILENT_SECONDS) are handed on, and emails whose time has come
    # (kept back by quiet hours, given back for a retry, or whose task was lost) go to a worker.
    "dispatch-due-emails": {
        "task": "emails.tasks.dispatch_due_emails",
        "schedule": 5.0,
        "options": {"expires": 4},
    },
    # Every night: forgotten memories past their restore window lose their text from the
    # history, and each person's history is bounded (MEMORY_HISTORY_MAX_EVENTS).
    "prune-memory-history": {
        "task": "memory.tasks.prune_memory_history",
        "schedule": crontab(hour=3, minute=25),
        "options": {"expires": 3 * 3600},
    },
    # Every hour: memories embedded by another model than EMBEDDING_MODEL are embedded again.
    "reembed-memories": {
        "task": "memory.tasks.reembed_memories",
        "schedule": crontab(minute=40),
        "options": {"expires": 50 * 60},
    },
    # Every hour: exchanges and summaries of conversations not yet embedded by EMBEDDING_MODEL
    # (a failed embedding call, or the model changed) are embedded, for the look-back.
    "reindex-exchanges": {
        "task": "coach.tasks.reindex_exchanges",
        "schedule": crontab(minute=45),
        "options": {"expires": 50 * 60},
    },
    # Every hour: each week still due (from its Sunday evening in the person's time zone,
    # for WEEKLY_EPISODE_DUE_DAYS) and unwritten is asked for, after the pause a failed or
    # lost write left it; each week is written up as one weekly episode memory.
    "plan-weekly-episodes": {
        "task": "emails.tasks.plan_weekly_episodes",
        "schedule": crontab(minute=10),
        "options": {"expires": 50 * 60},
    },
}

# Follow-up emails (DESIGN.md section 5).
EMAIL_SENDING_WINDOW_START = env_int("EMAIL_SENDING_WINDOW_START", default=9)
EMAIL_SENDING_WINDOW_END = env_int("EMAIL_SENDING_WINDOW_END", default=20)
if not 0 <= EMAIL_SENDING_WINDOW_START < EMAIL_SENDING_WINDOW_END <= 24:
    raise ImproperlyConfigured(
        "EMAIL_SENDING_WINDOW_START and EMAIL_SENDING_WINDOW_END are local hours, 0-23 then a later one up to 24."
    )
EMAIL_WAIT_AFTER_CHAT_HOURS = env_float("EMAIL_WAIT_AFTER_CHAT_HOURS", default=12.0)
if EMAIL_WAIT_AFTER_CHAT_HOURS < 0:
    raise ImproperlyConfigured("EMAIL_WAIT_AFTER_CHAT_HOURS is a number of hours, 0 or more.")
EMAIL_REPEAT_THRESHOLD = env_float("EMAIL_REPEAT_THRESHOLD", default=0.9)
# Each retry's delay is capped far below the visibility timeout, so no retry waits on a
# countdown Redis would redeliver.
EMAIL_SEND_MAX_RETRIES = env_int("EMAIL_SEND_MAX_RETRIES", default=5)
EMAIL_RETRY_BACKOFF_SECONDS = env_float("EMAIL_RETRY_BACKOFF_SECONDS", default=60.0)
WEEKLY_EPISODE_DUE_DAYS = env_int("WEEKLY_EPISODE_DUE_DAYS", default=7)
# RFC 5321's waits, not a short socket timeout: past the end of the data the server may
# already have accepted the mail, so giving up early would send it twice.
EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS = env_float("EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS", default=300.0)
EMAIL_SMTP_DATA_TIMEOUT_SECONDS = env_float("EMAIL_SMTP_DATA_TIMEOUT_SECONDS", default=120.0)
EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS = env_float("EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS", default=180.0)
EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS = env_float("EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS", default=600.0)
# The longest SMTP exchange those allow: seven replies before the data (the greeting, EHLO,
# STARTTLS, EHLO again, AUTH, MAIL, RCPT), DATA, the message in one block (a few KB), its
# end, and QUIT's five seconds.
EMAIL_SMTP_LONGEST_SECONDS = (
    7 * EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS
    + EMAIL_SMTP_DATA_TIMEOUT_SECONDS
    + EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS
    + EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS
    + 5
)
# The heartbeat runs on a thread of its own, so a sender waiting on SMTP or the model still
# beats; silence, not slowness, is what marks a dead one.
EMAIL_CLAIM_HEARTBEAT_SECONDS = env_float("EMAIL_CLAIM_HEARTBEAT_SECONDS", default=2.0)
EMAIL_CLAIM_SILENT_SECONDS = env_float("EMAIL_CLAIM_SILENT_SECONDS", default=10.0)
if not 0 < EMAIL_CLAIM_HEARTBEAT_SECONDS * 2 < EMAIL_CLAIM_SILENT_SECONDS:
    raise ImproperlyConfigured("EMAIL_CLAIM_SILENT_SECONDS must be more than twice EMAIL_CLAIM_HEARTBEAT_SECONDS.")

# The language model (docs/model-servers.md).
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OFFLINE_COACH_URL = env_str("OFFLINE_COACH_URL", DEFAULT_OFFLINE_COACH_URL)
# Another program on the offline coach's port would be sent every prompt: the token is how
# it proves it is this run's (infra/offline_coach_identity.py).
OFFLINE_COACH_TOKEN = env_str("OFFLINE_COACH_TOKEN")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL") or (None if OPENAI_API_KEY else OFFLINE_COACH_URL)
COACH_MODEL = env_str("COACH_MODEL") or ("gpt-4.1-mini" if OPENAI_API_KEY else "offline-coach")
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL") or ("text-embedding-3-small" if OPENAI_API_KEY else "all-MiniLM-L6-v2")
# vLLM and llama-server serve one model each, so embeddings may need a server of their own.
EMBEDDING_BASE_URL = env_str("EMBEDDING_BASE_URL")
EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY")
LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", default=30.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", default=2)
# Well inside a chat turn's deadline (checked below): an embedding that does not come back
# is a tool result the model acts on, not a turn held until its own deadline.
EMBEDDING_TIMEOUT_SECONDS = env_float("EMBEDDING_TIMEOUT_SECONDS", default=10.0)

# The longest a follow-up email's drafting takes: two drafts, each a completion and an
# embedding, each tried 1 + LLM_MAX_RETRIES times.
EMAIL_DRAFT_LONGEST_SECONDS = 4 * (1 + LLM_MAX_RETRIES) * LLM_TIMEOUT_SECONDS
# Longer than any drafting and SMTP exchange the settings allow, so a slow but living
# sender is never taken for dead.
EMAIL_CLAIM_STALE_SECONDS = env_int(
    "EMAIL_CLAIM_STALE_SECONDS", default=int(EMAIL_DRAFT_LONGEST_SECONDS + EMAIL_SMTP_LONGEST_SECONDS) + 60
)
if not EMAIL_CLAIM_STALE_SECONDS > EMAIL_DRAFT_LONGEST_SECONDS + EMAIL_SMTP_LONGEST_SECONDS:
    raise ImproperlyConfigured(
        "EMAIL_CLAIM_STALE_SECONDS must be above the longest drafting and SMTP exchange the settings allow "
        f"({EMAIL_DRAFT_LONGEST_SECONDS + EMAIL_SMTP_LONGEST_SECONDS:.0f} s), or a slow send would be taken "
        "for a dead one."
    )
# It must outlast the longest task that is running fine, a follow-up email's send, which
# EMAIL_CLAIM_STALE_SECONDS outlasts (a second delivery of a send task finds the email
# claimed, and sends nothing, all the same). Retries wait a quarter of it at most; nothing
# waits on a countdown beyond it.
CELERY_VISIBILITY_TIMEOUT_SECONDS = env_int(
    "CELERY_VISIBILITY_TIMEOUT_SECONDS", default=max(3600, EMAIL_CLAIM_STALE_SECONDS + 300)
)
if not CELERY_VISIBILITY_TIMEOUT_SECONDS > EMAIL_CLAIM_STALE_SECONDS:
    raise ImproperlyConfigured(
        "CELERY_VISIBILITY_TIMEOUT_SECONDS must be above EMAIL_CLAIM_STALE_SECONDS, the longest email send "
        "(drafting, then its SMTP exchange), or a send still running would be handed to a second worker."
    )
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS}

# The chat turn (DESIGN.md section 4).
COACH_MAX_TOOL_ROUNDS = env_int("COACH_MAX_TOOL_ROUNDS", default=4)
COACH_MAX_MESSAGE_CHARS = env_int("COACH_MAX_MESSAGE_CHARS", default=4000)
# The prompt is kept byte for byte between turns so a provider's prompt cache reads it
# (coach/prompting.py); after a long gap its "Today" and what it quotes may be out of date.
COACH_PROMPT_GAP_HOURS = env_float("COACH_PROMPT_GAP_HOURS", default=6.0)
COACH_HISTORY_BUDGET_TOKENS = env_int("COACH_HISTORY_BUDGET_TOKENS", default=6000)
COACH_SESSION_IDLE_MINUTES = env_int("COACH_SESSION_IDLE_MINUTES", default=30)
COACH_LOOK_BACK_MAX_RESULTS = env_int("COACH_LOOK_BACK_MAX_RESULTS", default=20)
COACH_LOOK_BACK_MAX_TOKENS = env_int("COACH_LOOK_BACK_MAX_TOKENS", default=1500)
# Counted from the turn's claim, so the sweeper can judge dead turns by it too.
COACH_TURN_DEADLINE_SECONDS = env_int("COACH_TURN_DEADLINE_SECONDS", default=120)
# Silence more than twice the heartbeat, so one late beat on a busy machine is not taken
# for a dead process (a web process also fails, as it starts, its dead predecessor's turns).
COACH_TURN_HEARTBEAT_SECONDS = env_float("COACH_TURN_HEARTBEAT_SECONDS", default=2.0)
COACH_TURN_SILENT_SECONDS = env_float("COACH_TURN_SILENT_SECONDS", default=8.0)
COACH_TURN_SWEEP_SECONDS = env_float("COACH_TURN_SWEEP_SECONDS", default=2.0)
if not 0 < COACH_TURN_HEARTBEAT_SECONDS * 2 < COACH_TURN_SILENT_SECONDS:
    raise ImproperlyConfigured("COACH_TURN_SILENT_SECONDS must be more than twice COACH_TURN_HEARTBEAT_SECONDS.")
if not 0 < EMBEDDING_TIMEOUT_SECONDS * 4 <= COACH_TURN_DEADLINE_SECONDS:
    raise ImproperlyConfigured(
        "EMBEDDING_TIMEOUT_SECONDS must be at most a quarter of COACH_TURN_DEADLINE_SECONDS: "
        "a turn may wait on a few memory tools, and must still answer within its deadline."
    )
COACH_FIRST_WORDS_SECONDS = env_int("COACH_FIRST_WORDS_SECONDS", default=20)
# Readers reconnect elsewhere at once; a turn still running after the grace is failed,
# retryable, by another process's sweep.
SHUTDOWN_GRACE_SECONDS = env_int("SHUTDOWN_GRACE_SECONDS", default=30)
COACH_MAX_TOKENS = env_int("COACH_MAX_TOKENS", default=1500)
# Counted in Redis, so the limits hold across every web process (coach/limits.py).
COACH_MAX_TURNS_AT_ONCE = env_int("COACH_MAX_TURNS_AT_ONCE", default=2)
COACH_MESSAGES_PER_MINUTE = env_int("COACH_MESSAGES_PER_MINUTE", default=10)
COACH_SESSIONS_PER_MINUTE = env_int("COACH_SESSIONS_PER_MINUTE", default=3)
COACH_MAX_OPEN_STREAMS = env_int("COACH_MAX_OPEN_STREAMS", default=12)
# An import calls the model and saves in bulk: the costliest thing one person can repeat.
MEMORY_IMPORTS_PER_HOUR = env_int("MEMORY_IMPORTS_PER_HOUR", default=10)
CHANGES_PER_MINUTE = env_int("CHANGES_PER_MINUTE", default=30)

# Memory (DESIGN.md section 3). The ceilings are the eviction policy's; see memory/policy.py.
MEMORY_MAX_STORED = env_int("MEMORY_MAX_STORED", default=60)
MEMORY_MAX_EPISODES = env_int("MEMORY_MAX_EPISODES", default=14)
# The person's own writes are never refused for the coach's ceiling, but a store without
# end would be a way to fill the database.
MEMORY_MAX_PER_PERSON = env_int("MEMORY_MAX_PER_PERSON", default=500)
if MEMORY_MAX_PER_PERSON < MEMORY_MAX_STORED:
    raise ImproperlyConfigured("MEMORY_MAX_PER_PERSON must be at least MEMORY_MAX_STORED.")
MEMORY_CONTENT_MAX_CHARS = env_int("MEMORY_CONTENT_MAX_CHARS", default=2000)
# Similarity cannot tell a reworded fact from a different one on the same topic, so the
# thresholds are chosen per model by `manage.py calibrate_dedup` (memory/near_copies.py);
# 0.8 and 0.95 for a model not listed here are a guess until calibrated. The bag of words
# is the offline coach's test model.
CALIBRATED_DEDUP_THRESHOLDS = {"all-MiniLM-L6-v2": 0.41, "bag-of-words": 0.16}
CALIBRATED_DEDUP_FAR_THRESHOLDS = {"all-MiniLM-L6-v2": 0.62, "bag-of-words": 0.26}
MEMORY_DEDUP_THRESHOLD = env_float(
    "MEMORY_DEDUP_THRESHOLD", default=CALIBRATED_DEDUP_THRESHOLDS.get(EMBEDDING_MODEL, 0.8)
)
MEMORY_DEDUP_FAR_THRESHOLD = env_float(
    "MEMORY_DEDUP_FAR_THRESHOLD", default=CALIBRATED_DEDUP_FAR_THRESHOLDS.get(EMBEDDING_MODEL, 0.95)
)
MEMORY_MAX_WRITES_PER_TURN = env_int("MEMORY_MAX_WRITES_PER_TURN", default=10)
MEMORY_MAX_READS_PER_TURN = env_int("MEMORY_MAX_READS_PER_TURN", default=10)
MEMORY_SEARCH_LIMIT = env_int("MEMORY_SEARCH_LIMIT", default=8)
# Checked at start-up to hold a full store's index (memory/apps.py).
MEMORY_CONTEXT_BUDGET_TOKENS = env_int("MEMORY_CONTEXT_BUDGET_TOKENS", default=6000)
MEMORY_PROSPECTIVE_LEAD_DAYS = env_int("MEMORY_PROSPECTIVE_LEAD_DAYS", default=30)
MEMORY_FORGOTTEN_DAYS = env_int("MEMORY_FORGOTTEN_DAYS", default=30)
MEMORY_HISTORY_MAX_EVENTS = env_int("MEMORY_HISTORY_MAX_EVENTS", default=1000)
# The undo is a token the page holds (memory/undo.py), so the server keeps nothing of a
# deleted memory while it runs.
MEMORY_UNDO_SECONDS = env_int("MEMORY_UNDO_SECONDS", default=600)

# Content-Security-Policy: our own origin plus a fresh nonce per response; nothing inline
# without it, no eval. htmx is vendored under static/ for this reason.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "base-uri": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "object-src": [CSP.NONE],
}
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    # Health checks come over plain HTTP from inside the deployment.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^livez$"]
    if env_bool("TRUST_X_FORWARDED_PROTO", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    # Preloading is a commitment browsers keep for months, made knowingly, never by default.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
    if not SECURE_HSTS_PRELOAD:
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "servestatic.storage.CompressedManifestStaticFilesStorage"
    },
}
# In production collectstatic writes each file under a hashed name with a gzip and a
# brotli copy beside it (the brotli package), and servestatic serves the smallest copy
# the browser accepts. In development static files are served straight from the source
# folders.
SERVESTATIC_USE_FINDERS = DEBUG
SERVESTATIC_AUTOREFRESH = DEBUG

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_ROUTINE_FILTERS = [] if env_str("LOG_LEVEL", "INFO").upper() == "DEBUG" else ["routine_task_lines"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "filters": {
        "forbidden_without_traceback": {"()": "infra.log_filters.ForbiddenWithoutTraceback"},
        "routine_task_lines": {"()": "infra.log_filters.RoutineTaskLines"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The model SDK's HTTP client logs every request at INFO: one line per token stream.
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "django.request": {"filters": ["forbidden_without_traceback"]},
        # Each periodic task's receipt and success, every few seconds: at DEBUG only, or
        # they bury what the console is for (coach/wiring/supervisor.py quiets the scheduler).
        **{name: {"filters": _ROUTINE_FILTERS} for name in ("celery.app.trace", "celery.worker.strategy")},
    },
}
