"""Arena battles: two models answer one prompt with the chat engine (``serving.engine.ChatEngine``:
one model loaded at a time, refused while a training job runs), their sides shuffled and their
names kept back until the user's vote; then the names are shown and the vote counts."""

from __future__ import annotations

import random
import secrets
import time
from typing import Any, Optional

from trainer_core.arena.leaderboard import leaderboard
from trainer_core.arena.schemas import Battle, BattleRequest, BattleSide, Leaderboard, Vote
from trainer_core.arena.store import ArenaStore
from trainer_core.refusals import Refusal
from trainer_core.serving.errors import ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.schemas import ChatMessage


class ArenaError(Refusal):
    """An arena request that cannot be served (fewer than two models, the same model twice, an
    unknown battle, a second vote: code ``already_voted``, status 409); the message says what to do."""

    code = "arena_refused"


class UnknownBattle(ArenaError):
    """No battle has this id."""

    code, status = "unknown_battle", 404


ARENA_BUSY = (
    "The arena needs the machine: a training job is running and has it; battle again when the job ends (or stop it)."
)


class Arena:
    """Battles, votes and the leaderboard over ``engine``'s models, kept in ``store``. ``rng``
    shuffles the sides and picks random models (a seeded ``random.Random`` in tests)."""

    def __init__(self, engine: Any, store: ArenaStore, rng: Optional[random.Random] = None) -> None:
        self.engine, self.store = engine, store
        self._rng = rng or random.SystemRandom()

    def battle(self, request: BattleRequest) -> Battle:
        """Both models answer ``request.prompt`` (loaded one after the other); returns the battle with
        the names hidden. Raises ChatUnavailable (a training job runs: nothing is loaded),
        ArenaError / ChatInputError / UnknownModel for models that cannot battle."""
        if self.engine.refusal():
            raise ChatUnavailable(ARENA_BUSY)
        left, right = self._pair(request.models)
        if self._rng.random() < 0.5:
            left, right = right, left
        messages = [ChatMessage(role="system", content=request.system)] if request.system else []
        messages.append(ChatMessage(role="user", content=request.prompt))
        try:
            answers = [self.engine.complete(model, messages, request.settings) for model in (left, right)]
        except ChatUnavailable as exc:  # a Start took the machine mid-battle: nothing is stored
            raise ChatUnavailable(ARENA_BUSY if self.engine.refusal() else str(exc)) from None
        battle_id = f"battle_{time.strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(4)}"
        record = {
            "prompt": request.prompt,
            "answers": [{"text": a.delta, "finish_reason": a.finish_reason} for a in answers],
        }
        created = time.time()
        self.store.add(battle_id, created, left, right, record)
        return self._shown(self.store.get(battle_id))

    def vote(self, battle_id: str, vote: Vote) -> Battle:
        """Record ``vote`` and return the battle with both names shown. Raises UnknownBattle, or
        ArenaError when the battle was voted already (a vote is never changed)."""
        found = self.store.get(battle_id)
        if found is None:
            raise UnknownBattle(f"battle {battle_id[:80]!r} does not exist: start a battle first")
        if not self.store.vote(battle_id, vote, time.time()):
            first = (self.store.get(battle_id) or found).get("vote")  # another vote may have won just now
            raise ArenaError(
                f"battle {battle_id} has its vote already ({first}): start a new battle",
                code="already_voted",
                status=409,
            )
        return self._shown(self.store.get(battle_id))

    def get(self, battle_id: str) -> Battle:
        """A battle as clients may see it (names only after its vote). Raises UnknownBattle."""
        found = self.store.get(battle_id)
        if found is None:
            raise UnknownBattle(f"battle {battle_id[:80]!r} does not exist")
        return self._shown(found)

    def history(self, limit: int = 50) -> list[Battle]:
        """The latest battles, newest first (names only for voted ones)."""
        return [self._shown(found) for found in self.store.list(limit)]

    def leaderboard(self, models: Optional[list[str]] = None) -> Leaderboard:
        """Standings over the voted battles among ``models`` (None: all; ``arena.leaderboard``).
        Raises UnknownModel for a model of ``models`` that no vote names and this server does not
        have (a model it has, or one that was voted on, stands with what it has: 0 battles or more)."""
        votes = self.store.votes()
        voted = {model for left, right, _ in votes for model in (left, right)}
        for model in dict.fromkeys(models or []):
            if model not in voted:
                try:
                    self.engine.resolve(model)
                except UnknownModel:
                    raise
                except ChatInputError:
                    pass  # known, but cannot answer now (its folder was deleted): it stands with 0 battles
        return leaderboard(votes, self._labels(), models)

    def _pair(self, models: list[str]) -> tuple[str, str]:
        """The two model ids to battle: ``models`` checked; one named: it and another picked at
        random; none: two picked at random."""
        if len(models) == 2 and models[0] == models[1]:
            raise ArenaError("models: name two different models (or one, or none, for random ones)", fields=("models",))
        for model in models:
            self.engine.resolve(model)  # UnknownModel / ChatInputError name the id
        if len(models) == 2:
            return models[0], models[1]
        ids = [choice.id for choice in self.engine.choices() if choice.id not in models]
        if len(ids) < 2 - len(models):
            raise ArenaError("the arena needs two models: train a run (or export one) to battle the base model")
        first, second = [*models, *self._rng.sample(ids, 2 - len(models))]
        return first, second

    def _labels(self) -> dict[str, str]:
        try:
            return {choice.id: choice.label for choice in self.engine.choices()}
        except (ChatInputError, OSError):
            return {}

    def _shown(self, found: dict[str, Any]) -> Battle:
        voted = found.get("vote") is not None
        labels = self._labels() if voted else {}
        sides = []
        for model, answer in zip((found["left_model"], found["right_model"]), found["answers"]):
            side = BattleSide(text=answer["text"], finish_reason=answer.get("finish_reason"))
            if voted:
                side.model, side.label = model, labels.get(model, model)
            sides.append(side)
        return Battle(
            battle_id=found["battle_id"],
            prompt=found["prompt"],
            left=sides[0],
            right=sides[1],
            vote=found.get("vote"),
            created_at=found["created_at"],
            voted_at=found.get("voted_at"),
        )
