"""The arena's request and answer models (field metadata here, once: the API and the tab read it)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from trainer_core.serving.schemas import GenerationSettings

Vote = Literal["left", "right", "tie", "both_bad"]
MAX_PROMPT_CHARS = 8000
# A model id: base, a job id, JOB/checkpoint-N, EXPORT or EXPORT/TYPE (all far shorter)
ModelId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class BattleRequest(BaseModel):
    """Two models answer ``prompt``. ``models``: the two model ids (the Chat tab's ids: ``base``,
    a run's job id, ``JOB/checkpoint-N``, an export's ``EXPORT`` or ``EXPORT/TYPE``); one id: it
    against another chosen at random; empty: two chosen at random from every model this server has."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS, description="What both models answer.")
    models: list[ModelId] = Field(
        default_factory=list,
        max_length=2,
        description="Two model ids; one, against a random other; none, two at random.",
    )
    system: Optional[str] = Field(None, max_length=MAX_PROMPT_CHARS, description="A system message for both.")
    settings: GenerationSettings = Field(
        default_factory=GenerationSettings, description="Generation settings, the same for both."
    )


class BattleSide(BaseModel):
    """One side's answer; ``model`` / ``label`` only once the battle has a vote."""

    text: str
    finish_reason: Optional[str] = None
    model: Optional[str] = None
    label: Optional[str] = None


class Battle(BaseModel):
    """A battle as clients see it: names hidden (``left`` / ``right`` without ``model``) until
    ``vote`` is set."""

    battle_id: str
    prompt: str
    left: BattleSide
    right: BattleSide
    vote: Optional[Vote] = None
    created_at: float
    voted_at: Optional[float] = None


class VoteRequest(BaseModel):
    """The user's verdict: the left answer is better, the right one, a tie, or both bad."""

    model_config = ConfigDict(extra="forbid")

    vote: Vote


class Standing(BaseModel):
    """One model's line of the leaderboard: battles voted, wins / losses / ties (both bad counts as a
    tie), the win rate (ties half) with its 95 % Wilson interval, and its Elo rating."""

    model: str
    label: str
    battles: int
    wins: int
    losses: int
    ties: int
    win_rate: float
    ci_low: float
    ci_high: float
    elo: float


class Leaderboard(BaseModel):
    """The standings of ``models`` (the set asked for, or every model that has a voted battle),
    from the ``battles`` voted among them; best Elo first."""

    models: list[str]
    battles: int
    standings: list[Standing]
