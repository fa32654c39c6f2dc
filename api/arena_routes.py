"""The blind arena over HTTP (``/api/arena``): start a battle (two models answer one prompt, names
hidden), vote on it (names shown), read a battle, the latest battles and the leaderboard. Every
route needs the API token. 409 while a training job runs (nothing is loaded), 400 for models that
cannot battle, 404 for an unknown battle or model, 409 for a second vote: each a refusal answered by
``api.errors`` (``{"detail", "fields", "code"}``)."""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Depends, Query, Request

from api.auth import require_token
from trainer_core.arena.battle import Arena
from trainer_core.arena.schemas import Battle, BattleRequest, Leaderboard, ModelId, VoteRequest

router = APIRouter(prefix="/api/arena", tags=["arena"], dependencies=[Depends(require_token)])
REFUSED = {
    400: {"description": "Models that cannot battle"},
    404: {"description": "Unknown battle or model"},
    409: {"description": "A training job has the machine, or the battle has its vote"},
}
MAX_LISTED = 500


def _arena(request: Request) -> Arena:
    return request.app.state.arena


@router.post("/battles", response_model=Battle, responses=REFUSED)
def start_battle(body: BattleRequest, arena: Arena = Depends(_arena)) -> Battle:
    """Both models (``models``, or two at random) answer ``prompt`` one after the other; the answer
    is the battle with the two answers as ``left`` / ``right`` and no names until a vote."""
    return arena.battle(body)


@router.post("/battles/{battle_id}/vote", response_model=Battle, responses=REFUSED)
def vote(battle_id: str, body: VoteRequest, arena: Arena = Depends(_arena)) -> Battle:
    """Record the vote (``left``, ``right``, ``tie``, ``both_bad``) once; the answer shows the names."""
    return arena.vote(battle_id, body.vote)


@router.get("/battles/{battle_id}", response_model=Battle, responses=REFUSED)
def get_battle(battle_id: str, arena: Arena = Depends(_arena)) -> Battle:
    """One battle (names only once voted)."""
    return arena.get(battle_id)


@router.get("/battles", response_model=list[Battle])
def list_battles(limit: int = Query(50, ge=1, le=MAX_LISTED), arena: Arena = Depends(_arena)) -> list[Battle]:
    """The latest battles, newest first (names only for voted ones)."""
    return arena.history(limit)


@router.get("/leaderboard", response_model=Leaderboard, responses={404: {"description": "Unknown model"}})
def get_leaderboard(
    models: Optional[list[ModelId]] = Query(None, max_length=64, description="The model set (repeat); empty: all."),
    arena: Arena = Depends(_arena),
) -> Leaderboard:
    """Standings over the voted battles between models of the set: win rate (ties half) with its
    95 % Wilson interval, and Elo (``trainer_core.arena.leaderboard``). A model of the set that no
    vote names and this server does not have is 404 (a model it has stands with 0 battles)."""
    return arena.leaderboard(models or None)
