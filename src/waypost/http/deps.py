"""The names handlers receive from the app (`create_app` provides them), marked as
dependencies explicitly, as Litestar 3.0 expects."""

from __future__ import annotations

from typing import TypeAlias

from litestar.di import NamedDependency

from waypost.http.settings import ServerConfig
from waypost.model import Grant
from waypost.store.base import Store

StoreDep: TypeAlias = NamedDependency[Store]  # the server's store, opened at start
CallerDep: TypeAlias = NamedDependency[Grant]  # the grant of the request's bearer token
ConfigDep: TypeAlias = NamedDependency[ServerConfig]  # what `waypost serve` was told
