"""A recipe: its sources, the writer model, the columns, the gates and the output (the keys of a
recipe YAML file). Close to NVIDIA data-designer's config (columns by ``column_type``, a model's
``inference_parameters`` beside its endpoint); why data-designer itself is not a dependency: the
README's "Data recipes"."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from trainer_core.recipes.columns import MODEL_COLUMNS, Column, LLMJudgeColumn, names_used
from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.gates import Gates
from trainer_core.recipes.sources.chunks import Chunking
from trainer_core.refusals import error_code, explain, validation_fields

# Each output format's fields (required first) as the Train tab reads them; None: optional.
FORMAT_FIELDS: dict[str, dict[str, bool]] = {
    "alpaca": {"instruction": True, "input": False, "output": True},
    "messages": {"messages": True},
    "preference": {"prompt": True, "chosen": True, "rejected": True},
    "embedding_pairs": {"anchor": True, "positive": True},
}
DOCUMENT_COLUMNS = ("source", "chunk_index", "chunk")  # each document chunk's seed row
TOPIC_COLUMNS = ("topic",)
MAX_RECIPE_BYTES = 256 * 1024


class InferenceParameters(BaseModel):
    """How the writer model is asked (data-designer's ``inference_parameters``)."""

    model_config = {"extra": "forbid"}
    temperature: float = Field(0.7, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(512, ge=1, le=32_768, description="Most tokens one answer may have.")
    max_parallel_requests: int = Field(4, ge=1, le=64, description="Requests in flight at once.")


class WriterModel(BaseModel):
    """Any OpenAI-compatible endpoint; the key is never in the recipe, only the name of the
    environment variable that holds it."""

    model_config = {"extra": "forbid"}
    endpoint: str = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:7860/v1.")
    model: str = Field(description="Model id at that endpoint (the studio's /v1: base, a run id, RUN/checkpoint-N).")
    api_key_env: Optional[str] = Field(None, description="Environment variable holding the API key (none: no key).")
    max_retries: int = Field(3, ge=0, le=10, description="Retries of a failed request (429, 5xx, connection).")
    timeout_s: float = Field(120.0, gt=0, le=3600, description="Seconds one request may take.")
    inference_parameters: InferenceParameters = InferenceParameters()

    @field_validator("endpoint")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.username or parts.password or parts.query:
            raise RecipeError(
                "model.endpoint: credentials or a query in the URL are not taken (the URL is written to the run's "
                "folder); put the key in an environment variable and name it in model.api_key_env",
                fields=("endpoint",),
            )
        return value


class Output(BaseModel):
    """The dataset file: its format and, for each of its fields, the column path that fills it."""

    model_config = {"extra": "forbid"}
    format: Literal[tuple(FORMAT_FIELDS)]  # type: ignore[valid-type]
    fields: dict[str, str] = Field(description="Format field -> column path, e.g. instruction: qa.question.")
    name: str = Field("recipe", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$", description="Name of the dataset folder.")

    @model_validator(mode="after")
    def _fields_fit(self) -> Output:
        wanted = FORMAT_FIELDS[self.format]
        missing = [f for f, required in wanted.items() if required and f not in self.fields]
        unknown = [f for f in self.fields if f not in wanted]
        if missing or unknown:
            raise RecipeError(
                f"output.fields: format {self.format} takes {', '.join(wanted)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(unknown)}" if unknown else ""),
                fields=("output",),
            )
        return self


class Recipe(BaseModel):
    """One recipe: exactly one source (documents, seed_rows or topics), then the columns in order."""

    model_config = {"extra": "forbid"}
    name: str = Field(min_length=1, max_length=100)
    description: str = ""
    documents: list[str] = Field([], description="PDF / DOCX / HTML / Markdown / text files or folders.")
    seed_rows: Optional[str] = Field(None, description="A JSON / JSONL dataset whose rows seed the records.")
    topics: list[str] = Field([], description="Topics, one record per topic (the column 'topic').")
    chunking: Chunking = Chunking()
    num_records: Optional[int] = Field(None, ge=1, le=1_000_000, description="Records to make (default: one per seed).")
    seed: int = Field(0, description="Seed of the samplers' draws.")
    model: WriterModel
    columns: list[Column] = Field(min_length=1)
    gates: Gates = Gates()
    output: Output

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        given = [k for k in ("documents", "seed_rows", "topics") if getattr(self, k)]
        if len(given) != 1:
            raise RecipeError(
                "sources: give exactly one of documents, seed_rows or topics"
                + (f" (given: {', '.join(given)})" if given else ""),
                fields=("documents", "seed_rows", "topics"),
            )
        names = [c.name for c in self.columns]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RecipeError(f"columns: {', '.join(twice)} named twice", fields=("columns",))
        if not any(isinstance(c, MODEL_COLUMNS) for c in self.columns):
            raise RecipeError("columns: a recipe needs at least one model column (llm-text, llm-structured, llm-judge)")
        for gate in self.gates.judge:
            judge = next((c for c in self.columns if c.name == gate.column), None)
            if not isinstance(judge, LLMJudgeColumn) or gate.score not in {s.name for s in judge.scores}:
                raise RecipeError(
                    f"gates.judge: {gate.column}.{gate.score} is not a judge column's score", fields=("gates",)
                )
        return self

    def check_names(self, seed_columns: list[str]) -> None:
        """Raise RecipeError where a template, gate or output field reads a name that is neither a
        seed column nor an earlier column."""
        known = set(seed_columns)
        for column in self.columns:
            for text in column.templates():
                unknown = sorted(names_used(text) - known)
                if unknown:
                    raise RecipeError(
                        f"columns.{column.name}: reads {', '.join(unknown)}, not a seed column nor an earlier column "
                        f"(known: {', '.join(sorted(known))})",
                        fields=("columns",),
                    )
            known.add(column.name)
        for where, path in [
            *(("gates", p) for p in self.gates.paths()),
            *(("output", p) for p in self.output.fields.values()),
        ]:
            if path.split(".")[0] not in known:
                raise RecipeError(
                    f"{where}: '{path}' names no column (known: {', '.join(sorted(known))})", fields=(where,)
                )


def parse_recipe(data: Any, where: str = "recipe") -> Recipe:
    """``data`` (a mapping, as read from YAML) as a Recipe; raises RecipeError naming the keys."""
    if not isinstance(data, dict):
        raise RecipeError(f"{where}: a recipe is a mapping of keys (name, model, columns, output, ...)")
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        codes = {error_code(e) for e in exc.errors()}
        raise RecipeError(
            f"{where}: {explain(exc)}", fields=validation_fields(exc), code=codes.pop() if len(codes) == 1 else None
        ) from None


class _NoAliases(yaml.SafeLoader):
    """YAML without anchors and aliases (a recipe needs none; they let a few bytes expand to millions of nodes)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not taken in a recipe")
        return super().compose_node(parent, index)


def load_yaml(text: str, where: str) -> Any:
    """``text`` (at most ``MAX_RECIPE_BYTES``) read as YAML; raises RecipeError naming ``where``."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_RECIPE_BYTES:
        raise RecipeError(f"{where}: a recipe is at most {MAX_RECIPE_BYTES // 1024} KB")
    try:
        return yaml.load(text, Loader=_NoAliases)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise RecipeError(f"{where}: cannot be read as YAML ({str(exc).splitlines()[0][:200]})") from None


def read_recipe(path: Path) -> Recipe:
    """The recipe in YAML file ``path``; relative document and seed paths are taken from the
    file's folder. Raises RecipeError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"{path.name}: cannot be read ({exc.__class__.__name__})") from None
    data = load_yaml(text, path.name)
    if isinstance(data, dict):
        base = path.resolve().parent
        data["documents"] = [str(base / Path(d).expanduser()) for d in data.get("documents") or []]
        if isinstance(data.get("seed_rows"), str):
            data["seed_rows"] = str(base / Path(data["seed_rows"]).expanduser())
    return parse_recipe(data, path.name)


def recipe_yaml(recipe: Recipe) -> str:
    """``recipe`` as YAML (what a run folder keeps; it holds no key, only ``api_key_env``)."""
    return yaml.safe_dump(recipe.model_dump(mode="json", exclude_defaults=False), sort_keys=False, allow_unicode=True)
