FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
RUN useradd --create-home --uid 1000 anonweb
COPY pyproject.toml README.md ./
COPY anonweb ./anonweb
RUN pip install .
COPY . .
RUN mkdir -p /app/var && chown -R anonweb /app/var
USER anonweb
# collectstatic needs settings to load; the key here is only for that build step.
RUN SECRET_KEY=build-only-key-0000000000000000000000000000 python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "anonweb.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]
