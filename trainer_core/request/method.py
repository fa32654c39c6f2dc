"""What the run optimises: the training method (SFT, DPO, ORPO, KTO, GRPO) and the settings of
each method (beta, the DPO loss, KTO's weights, GRPO's sampling and rewards), and the adapter a run
starts from."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, field_validator, model_validator

from trainer_core.request.base import MAX_PATH_CHARS, FieldGroup, blank_is_none, in_section
from trainer_core.rewards.schemas import RewardSpec, json_text, parse_reward
from trainer_core.vocabulary import DpoLoss, GrpoLoss, TrainingMethod, WholeNumber, method_defaults_text


class MethodFields(FieldGroup):
    """The method group's fields (section ``method``); a field of some methods only lists them
    (``methods``: the form shows it for those)."""

    training_method: TrainingMethod = Field(
        TrainingMethod.sft,
        title="Training method",
        description="sft: learn the answers (conversations, instructions or raw text). dpo / orpo: learn to prefer the chosen answer over the rejected one (pairs); orpo needs no reference model. kto: learn from answers rated desirable or undesirable (a true/false label; pairs are unpaired). grpo: sample several answers per prompt and learn from the rewards they earn (prompts, plus columns such as answer for the rewards).",
        json_schema_extra=in_section("method"),
    )
    beta: float = Field(
        0.1,
        ge=0,
        le=10,
        title="Beta",
        description="DPO / KTO: how far the model may move from the reference model (higher: stays closer; 0.1 is the papers' usual value). ORPO: the weight of the odds-ratio term beside the answer loss. GRPO: the weight of the KL penalty to the reference model (0: no reference model, no KL chart); "
        f"{method_defaults_text('beta')} (DeepSeekMath's).",
        json_schema_extra=in_section("method", ("dpo", "orpo", "kto", "grpo")),
    )
    loss_type: DpoLoss = Field(
        "sigmoid",
        title="DPO loss type",
        description="sigmoid: the DPO paper's loss; hinge (SLiC), ipo, robust (noisy labels), bco_pair, sppo_hard, nca_pair, apo_zero, apo_down: TRL's variants.",
        json_schema_extra=in_section("method", ("dpo",)),
    )
    desirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="KTO: weight of the desirable answers' loss; raise it when there are fewer desirable than undesirable rows (the KTO paper keeps weight x count between 1 and 4/3 of the other side).",
        json_schema_extra=in_section("method", ("kto",)),
    )
    undesirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="KTO: weight of the undesirable answers' loss.",
        json_schema_extra=in_section("method", ("kto",)),
    )
    num_generations: WholeNumber = Field(
        4,
        ge=2,
        le=64,
        title="Answers per prompt",
        description="GRPO: completions sampled for each prompt; each is scored against the others of its group (batch_size x gradient_accumulation_steps must be a multiple of it).",
        json_schema_extra=in_section("method", ("grpo",)),
    )
    max_completion_length: WholeNumber = Field(
        128,
        ge=1,
        le=32768,
        title="Max answer tokens",
        description="GRPO: the longest completion sampled, in tokens (longer ones are cut and count as clipped).",
        json_schema_extra=in_section("method", ("grpo",)),
    )
    temperature: float = Field(
        1.0,
        gt=0,
        le=4,
        title="Sampling temperature",
        description="GRPO: temperature of the sampled completions (lower: surer, less varied answers, so smaller reward differences to learn from).",
        json_schema_extra=in_section("method", ("grpo",)),
    )
    grpo_loss_type: GrpoLoss = Field(
        "dapo",
        title="GRPO loss type",
        description="GRPO: how token losses are averaged (TRL's GRPOConfig.loss_type; also accepted as loss_type with training_method grpo). dapo: over the batch's tokens (no length bias); grpo: per completion (the paper's); dr_grpo: by a constant; bnpo, cispo, sapo: TRL's variants.",
        json_schema_extra=in_section("method", ("grpo",)),
    )
    rewards: list[RewardSpec] = Field(
        default_factory=list,
        max_length=16,
        title="Rewards",
        description='GRPO: the reward functions and their weights, e.g. [{"name": "numeric_match", "column": "answer"}, {"name": "format", "weight": 0.5}]. Empty: the numeric match of the final answer against the data\'s answer column.',
        json_schema_extra=in_section("method", ("grpo",)),
    )
    reward_file: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Reward functions file",
        description="GRPO: a Python file of reward functions in TRL's signature, in the allowed folders; runs inside the training worker, so only servers started with STUDIO_ALLOW_REWARD_CODE=1 accept it.",
        json_schema_extra=in_section("method", ("grpo",)),
    )
    adapter_name_or_path: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Start from adapter",
        description="The folder of a LoRA adapter trained earlier (e.g. an SFT run's output) to go on training: a DPO / ORPO / KTO run starts from the SFT model, which is also DPO's and KTO's reference. Needs training_type lora or qlora and the adapter's base model.",
        json_schema_extra=in_section("method"),
    )

    @field_validator("reward_file", "adapter_name_or_path")
    @classmethod
    def _blank_method_paths(cls, value: Optional[str]) -> Optional[str]:
        return blank_is_none(value)

    @field_validator("rewards", mode="before")
    @classmethod
    def _short_rewards(cls, value: Any) -> Any:
        """Rewards given in the short form (``numeric_match column=answer weight=2``: the form's
        lines, the CLI's items) or as JSON text, read into ``RewardSpec`` values."""
        if isinstance(value, str) and value.strip().startswith("["):  # a JSON list pasted into the form's box
            value = json_text(value, "rewards")
        if isinstance(value, str):
            value = [line for line in value.splitlines() if line.strip()]
        if isinstance(value, list):
            return [parse_reward(item) if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="before")
    @classmethod
    def _grpo_loss_name(cls, data: Any) -> Any:
        """TRL's own name: ``loss_type`` with a GRPO loss and training_method grpo is ``grpo_loss_type``."""
        if isinstance(data, dict) and str(data.get("training_method", "")) in ("grpo", "TrainingMethod.grpo"):
            if data.get("loss_type") in GrpoLoss.__args__ and "grpo_loss_type" not in data:
                data = {**data, "grpo_loss_type": data["loss_type"]}
                data.pop("loss_type")
        return data
