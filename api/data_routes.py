"""The token cache under ``/api/data/cache``: list its entries, delete one. Thin routes over
``trainer_core.data.token_cache.store``, behind the same bearer token as the training API."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request

from api.auth import require_token
from trainer_core.data.token_cache import store
from trainer_core.data.token_cache.key import KEY_CHARS

router = APIRouter(prefix="/api/data", tags=["data"], dependencies=[Depends(require_token)])
CACHE_KEY = Path(..., pattern=rf"^[0-9a-f]{{{KEY_CHARS}}}$", description=f"A cache key ({KEY_CHARS} hex characters).")


@router.get("/cache", response_model=list[store.Entry])
def cache_entries(request: Request) -> list[store.Entry]:
    """The tokenized splits kept (dataset files, model, rows, size in bytes, last used), most
    recently used first."""
    return store.entries(request.app.state.settings)


@router.delete("/cache/{key}", response_model=store.Entry, responses={404: {"description": "No such entry"}})
def delete_entry(request: Request, key: str = CACHE_KEY) -> store.Entry:
    """Delete one tokenized split; the next Start or check on that data tokenizes it again."""
    return store.delete(key, request.app.state.settings)
