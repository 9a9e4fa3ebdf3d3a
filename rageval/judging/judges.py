"""A judge configuration (``params/judges/NAME.yaml``): which model pre-labels, with which pinned
prompt, decoding, rubric and sampling, and the calibration it must pass before it is trusted.

The configuration's hash (:attr:`Judge.config_hash`: the canonical JSON of the validated model,
which holds the prompt's sha256) is what a calibration run is tagged with and what ``judge
prelabel`` looks up: change the model, its revision, the prompt or a threshold and the judge is a
new judge that must be calibrated again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, model_validator

from rageval.benchmark.schema import JUDGE_ASSESSOR_PREFIX, SIMILARITY_ASSESSOR_PREFIX
from rageval.errors import ConfigError, Problem
from rageval.hashing import sha256_bytes, sha256_text
from rageval.io import file_problem, read_bytes, read_yaml
from rageval.validation import Sha256, Slug, Strict, validated

Number = StrictFloat | StrictInt


class Decoding(Strict):
    """Decoding parameters sent with every request (recorded with every label)."""

    temperature: Number = Field(default=0.0, ge=0)
    top_p: Number | None = Field(default=None, gt=0, le=1)
    max_tokens: StrictInt = Field(default=512, gt=0)
    seed: StrictInt | None = None


class OpenAIBackend(Strict):
    """Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, a hosted API)."""

    type: Literal["openai"]
    base_url: Slug = Field(description="e.g. http://localhost:8000/v1; POST {base_url}/chat/completions")
    api_key_env: StrictStr | None = Field(default=None, description="the environment variable holding the key")
    json_mode: bool = Field(default=True, strict=True, description="send response_format json_object")
    price_per_input_token: Number = Field(default=0.0, ge=0)
    price_per_output_token: Number = Field(default=0.0, ge=0)


class SimilarityBackend(Strict):
    """An offline pre-labeler: the cosine of query and text under a local sentence encoder, mapped
    to a grade by thresholds (the lowest score that earns each grade)."""

    type: Literal["similarity"]
    thresholds: dict[Annotated[int, Field(strict=False)], Number]
    margin: Number = Field(default=0.03, ge=0, description="a score this close to a threshold is uncertain")
    batch_size: StrictInt = Field(default=32, gt=0)


class Sampling(Strict):
    """Independent samples per item; items some run ranked at ``high_impact_rank`` or better get more."""

    samples: StrictInt = Field(default=1, ge=1)
    high_impact_samples: StrictInt = Field(default=3, ge=1)
    high_impact_rank: StrictInt = Field(default=3, ge=1)


class Limits(Strict):
    timeout_s: Number = Field(default=60.0, gt=0)
    retries: StrictInt = Field(default=2, ge=0)
    backoff_s: Number = Field(default=0.5, ge=0)


class CalibrationRule(Strict):
    """What a calibration must reach for the judge to pre-label, and on what human standard."""

    benchmark: Slug = Field(description="the human-labeled calibration benchmark (folder, relative to the project)")
    split: Slug = "dev"
    min_weighted_kappa: Number = Field(ge=-1, le=1)
    weights: Literal["linear", "quadratic"] = "linear"
    measure: Slug = Field(default="nDCG@10", description="the measure system rankings are compared under")
    min_kendall_tau: Number | None = Field(default=None, ge=-1, le=1)
    min_slice_weighted_kappa: Number | None = Field(
        default=None, ge=-1, le=1, description="every slice with min_slice_items labelled items must reach it"
    )
    min_slice_items: StrictInt = Field(default=10, ge=2, description="slices with fewer labelled items are not held")


class JudgeConfig(Strict):
    name: Slug
    model: Slug = Field(description="model ID (the endpoint's model name, or an offline model package)")
    revision: Slug = Field(description="the model's revision: a commit, a digest, a dated snapshot")
    backend: Annotated[OpenAIBackend | SimilarityBackend, Field(discriminator="type")]
    prompt: Slug = Field(description="the prompt template file, relative to this file")
    prompt_sha256: Sha256
    decoding: Decoding = Decoding()
    rubric: dict[Annotated[int, Field(strict=False)], StrictStr] = Field(min_length=2)
    sampling: Sampling = Sampling()
    limits: Limits = Limits()
    calibration: CalibrationRule

    @model_validator(mode="after")
    def _thresholds_on_the_rubric(self) -> JudgeConfig:
        if isinstance(self.backend, SimilarityBackend):
            unknown = sorted(set(self.backend.thresholds) - set(self.rubric))
            if unknown:
                raise ValueError(f"backend.thresholds names grades {unknown} that the rubric does not define")
        return self


@dataclass(frozen=True)
class Judge:
    """A loaded judge: its configuration, file, prompt template and hashes."""

    config: JudgeConfig
    file: Path
    template: str

    @property
    def config_hash(self) -> str:
        return sha256_text(json.dumps(self.config.model_dump(mode="json"), sort_keys=True))

    @property
    def assessor(self) -> str:
        """How its labels are marked, in the labels' ``assessor`` column: ``llm:`` for a language
        model, ``similarity:`` for the cosine pre-labeler (its labels are no model's judgment)."""
        similarity = isinstance(self.config.backend, SimilarityBackend)
        prefix = SIMILARITY_ASSESSOR_PREFIX if similarity else JUDGE_ASSESSOR_PREFIX
        return f"{prefix}{self.config.model}@{self.config.prompt_sha256[:12]}"

    def record(self) -> dict[str, object]:
        """What every label and run records about the judge (never a key)."""
        c = self.config
        return {
            "name": c.name,
            "model": c.model,
            "revision": c.revision,
            "backend": c.backend.type,
            "prompt_sha256": c.prompt_sha256,
            "config_sha256": self.config_hash,
            "decoding": c.decoding.model_dump(),
            "rubric": {str(k): v for k, v in sorted(c.rubric.items())},
        }


def load_judge(path: str | Path) -> Judge:
    """Read and validate a judge configuration and its prompt; the prompt must match its pinned sha256."""
    path = Path(path)
    missing = file_problem(path)
    if missing is not None:
        raise ConfigError(Problem(file=str(path), message=missing.message, fix="give a params/judges/*.yaml file"))
    data, lines = read_yaml(Path(path), ConfigError)
    config = validated(data, lines, str(path), JudgeConfig, ConfigError, what="judge keys")
    prompt = path.parent / config.prompt
    if file_problem(prompt) is not None:
        raise ConfigError(
            Problem(
                file=str(path),
                line=lines.get(("prompt",)),
                field="prompt",
                message=f"no prompt template at {prompt}",
                fix="give the template's path, relative to the judge configuration",
            )
        )
    data_bytes = read_bytes(prompt)
    actual = sha256_bytes(data_bytes)
    if actual != config.prompt_sha256:
        raise ConfigError(
            Problem(
                file=str(path),
                line=lines.get(("prompt_sha256",)),
                field="prompt_sha256",
                message=f"the prompt template {prompt.name} has sha256 {actual}, not the pinned one",
                fix=f"if the change is intended, set prompt_sha256: {actual} and run `rageval judge calibrate` again",
            )
        )
    return Judge(config=config, file=path, template=data_bytes.decode("utf-8"))
