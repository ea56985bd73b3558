"""The shared cache's backend keeps one Redis client per connection pool, and answers every
call as Django's own backend does (against a real Redis; skipped without one)."""

import os
import uuid

import pytest
from django.core.cache.backends.redis import RedisCache

from anonweb.common.cache import SharedRedisCache
from tests.conftest import REQUIRE_SERVICES, unavailable

REDIS_URL = os.environ.get("ANONWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def prefix():
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        unavailable(f"Redis not reachable at {REDIS_URL} ({exc})", required=REQUIRE_SERVICES)
    return f"test-shared-cache-{uuid.uuid4().hex}"


def test_one_client_per_pool_and_the_same_answers_as_django(prefix):
    ours = SharedRedisCache(REDIS_URL, {"KEY_PREFIX": prefix})
    django = RedisCache(REDIS_URL, {"KEY_PREFIX": prefix})
    try:
        assert ours.get("missing") is None and ours.get("missing", 7) == 7
        ours.set("roles", {3: frozenset({"analyst"})}, 60)
        assert django.get("roles") == {3: frozenset({"analyst"})}
        assert ours.add("roles", "other", 60) is False and ours.add("fresh", 1, 60) is True
        assert ours.incr("fresh") == 2 and django.get("fresh") == 2
        ours.set_many({"a": 1, "b": 2}, 60)
        assert ours.get_many(["a", "b", "c"]) == {"a": 1, "b": 2}
        ours.delete("roles")
        assert django.get("roles") is None
        client = ours._cache.get_client()
        assert ours._cache.get_client(write=True) is client  # one server: one pool
        assert django._cache.get_client() is not django._cache.get_client()
    finally:
        for key in ("roles", "fresh", "a", "b"):
            django.delete(key)
