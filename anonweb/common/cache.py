"""The shared cache (Redis), with one client object per connection pool.

Django's Redis backend builds a new ``redis.Redis`` object for every cache call (each one fills
a table of a few hundred response callbacks): a fifth of a millisecond of CPU per call, and a
page makes several (its session, its rendered fragments, its charts). A client takes a connection from its
pool for each command, so one client per pool serves every call the same way."""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class ReusedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # Django's own
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class SharedRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
