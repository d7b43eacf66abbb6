# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
RUN useradd --system --create-home --home-dir /home/coach coach

COPY requirements/app.lock requirements/app.lock
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/app.lock

COPY . .
# collectstatic loads the settings, which check every secret at start: secrets are made
# here for this step alone (kept in no layer of the image), beside services it never
# reaches. tests/coach/test_deployment.py runs this very step.
RUN DJANGO_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    FIELD_ENCRYPTION_KEYS="$(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')" \
    FIELD_LOOKUP_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(48))')" \
    DATABASE_URL=postgresql://build@localhost/build REDIS_URL=redis://localhost:6379/0 \
    ALLOWED_HOSTS=build SITE_URL=https://build EMAIL_HOST=build EMAIL_USE_TLS=true \
    python manage.py collectstatic --noinput -v 0

USER coach
EXPOSE 8000
# The proxies whose X-Forwarded-For and X-Forwarded-Proto uvicorn believes: uvicorn reads
# FORWARDED_ALLOW_IPS when --forwarded-allow-ips is not given. Never "*": anyone who can
# reach the port could then choose the address the per-IP rate limits count. Set it to
# your proxy's address (docker-compose passes it through).
ENV FORWARDED_ALLOW_IPS=127.0.0.1
CMD ["python", "-m", "coach.wiring.web_server", "--host", "0.0.0.0", "--port", "8000", "--proxy-headers"]
